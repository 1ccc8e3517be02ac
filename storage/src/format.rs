//! On-disk structures of a `.beton` file, mirroring FFCV 1.0.2's `ffcv/types.py`.
//!
//! Layout (docs/FORMAT.md is normative): a 24-byte [`Header`], `num_fields` 1041-byte
//! [`FieldDesc`]s, the data table (`num_samples` rows of [`RowLayout::size`] bytes, starting
//! unaligned right after the descriptors), zero padding to the next multiple of `page_size`, whole
//! pages of payload data, and the allocation table ([`AllocEntry`], 24 bytes each) from
//! `alloc_table_ptr` to the end of the file. Everything is little-endian.
//!
//! The parsers here take untrusted bytes and never panic: short input is an error.

/// The only format version FFCV 1.x writes and reads (`CURRENT_VERSION` in `ffcv/types.py`).
pub const VERSION: u16 = 2;
/// Size of the header: `<u2 version, <u2 num_fields, <u4 page_size, <u8 num_samples, <u8
/// alloc_table_ptr` (numpy aligned struct, no padding needed).
pub const HEADER_SIZE: usize = 24;
/// Bytes of a field name in a descriptor (ASCII, NUL-padded, no NUL when 16 characters long).
pub const NAME_SIZE: usize = 16;
/// Bytes of a field's argument blob (`ARG_TYPE` in FFCV: 1024 × `<u1`).
pub const ARGS_SIZE: usize = 1024;
/// Size of one field descriptor: type id (1) + name (16) + arguments (1024), packed.
pub const FIELD_DESC_SIZE: usize = 1 + NAME_SIZE + ARGS_SIZE;
/// Size of one allocation-table entry: `<u8 sample_id, <u8 ptr, <u8 size`.
pub const ALLOC_ENTRY_SIZE: usize = 24;
/// Smallest page size the writer accepts (FFCV's `MIN_PAGE_SIZE`, 2 MiB: a huge page).
pub const MIN_PAGE_SIZE: u64 = 1 << 21;
/// The writer's page size must be below this (FFCV's `MAX_PAGE_SIZE`: the header stores a `<u4`).
pub const MAX_PAGE_SIZE: u64 = 1 << 32;
/// FFCV's default page size (`4 * MIN_PAGE_SIZE`).
pub const DEFAULT_PAGE_SIZE: u64 = 4 * MIN_PAGE_SIZE;

/// `parse` and `to_bytes` of a fixed-size record of little-endian numbers, its fields back to back
/// in the order given: the byte layout written once (FORMAT.md spells it out).
macro_rules! le_record {
    ($record:ident[$size:ident] { $($field:ident: $ty:ty),+ $(,)? }) => {
        // The fields fill the record exactly.
        const _: () = assert!(0 $(+ std::mem::size_of::<$ty>())+ == $size);

        impl $record {
            #[doc = concat!(
                "Parses the first [`", stringify!($size), "`] bytes; `None` if `bytes` is shorter."
            )]
            pub fn parse(bytes: &[u8]) -> Option<$record> {
                let _rest = bytes.get(..$size)?;
                $(
                    let ($field, _rest) = _rest.split_first_chunk::<{ std::mem::size_of::<$ty>() }>()?;
                    let $field = <$ty>::from_le_bytes(*$field);
                )+
                Some($record { $($field),+ })
            }

            #[doc = concat!("The record's [`", stringify!($size), "`] bytes.")]
            pub fn to_bytes(&self) -> [u8; $size] {
                let mut b = [0u8; $size];
                let _rest = &mut b[..];
                $(
                    let (head, _rest) = _rest.split_at_mut(std::mem::size_of::<$ty>());
                    head.copy_from_slice(&self.$field.to_le_bytes());
                )+
                b
            }
        }
    };
}

/// The file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Format version, [`VERSION`].
    pub version: u16,
    /// Number of field descriptors that follow.
    pub num_fields: u16,
    /// Page size in bytes, a power of two.
    pub page_size: u32,
    /// Number of rows in the data table.
    pub num_samples: u64,
    /// Byte offset of the allocation table; 0 means the writer never finished.
    pub alloc_table_ptr: u64,
}

le_record!(Header[HEADER_SIZE] {
    version: u16,
    num_fields: u16,
    page_size: u32,
    num_samples: u64,
    alloc_table_ptr: u64,
});

/// One field descriptor as stored: type id, name and argument blob, uninterpreted.
#[derive(Clone, PartialEq, Eq)]
pub struct FieldDesc {
    /// FFCV type id (0–6, or 255 for custom fields).
    pub type_id: u8,
    /// The 16 name bytes as stored (NUL-padded).
    pub name: [u8; NAME_SIZE],
    /// The 1024-byte argument blob.
    pub arguments: Box<[u8; ARGS_SIZE]>,
}

impl std::fmt::Debug for FieldDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = self.arguments.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        f.debug_struct("FieldDesc")
            .field("type_id", &self.type_id)
            .field("name", &String::from_utf8_lossy(self.name_bytes()))
            .field("arguments_len_nonzero", &used)
            .finish()
    }
}

impl FieldDesc {
    /// Parses one descriptor; `None` if `bytes` is shorter than [`FIELD_DESC_SIZE`].
    pub fn parse(bytes: &[u8]) -> Option<FieldDesc> {
        let b = bytes.get(..FIELD_DESC_SIZE)?;
        let mut name = [0u8; NAME_SIZE];
        name.copy_from_slice(&b[1..1 + NAME_SIZE]);
        let mut arguments = Box::new([0u8; ARGS_SIZE]);
        arguments.copy_from_slice(&b[1 + NAME_SIZE..]);
        Some(FieldDesc { type_id: b[0], name, arguments })
    }

    /// The descriptor's 1041 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIELD_DESC_SIZE);
        out.push(self.type_id);
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&self.arguments[..]);
        out
    }

    /// The name bytes up to the first NUL (all 16 when there is none).
    pub fn name_bytes(&self) -> &[u8] {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_SIZE);
        &self.name[..end]
    }
}

/// One entry of the allocation table: `size` bytes at absolute file offset `ptr` belong to sample
/// `sample_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllocEntry {
    /// The sample that owns the bytes.
    pub sample_id: u64,
    /// Absolute byte offset in the file.
    pub ptr: u64,
    /// Length in bytes.
    pub size: u64,
}

le_record!(AllocEntry[ALLOC_ENTRY_SIZE] { sample_id: u64, ptr: u64, size: u64 });

/// Size and alignment of one field's slot in a data-table row, in numpy's terms: a plain scalar
/// (`<i8`, `<f8`, `<u8`) aligns to its size, a structured dtype built without `align=True` (every
/// FFCV struct: image, bytes, JSON) aligns to 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot {
    /// Bytes the field takes in the row.
    pub size: usize,
    /// Alignment of the field's offset in the row (1, 2, 4 or 8).
    pub align: usize,
}

/// Where each field sits in a data-table row: numpy's `np.dtype([...], align=True)` rules, as
/// FFCV's `get_metadata_type` builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowLayout {
    /// Byte offset of each field in the row.
    pub offsets: Vec<usize>,
    /// Row size: the end of the last field rounded up to the largest alignment.
    pub size: usize,
    /// The largest field alignment (1 when there are no fields).
    pub align: usize,
}

impl RowLayout {
    /// Computes the layout: each field at the next multiple of its alignment, the row padded to
    /// the largest alignment. `None` when the sizes overflow `usize`.
    pub fn new(slots: &[Slot]) -> Option<RowLayout> {
        let mut offsets = Vec::with_capacity(slots.len());
        let mut end = 0usize;
        let mut align = 1usize;
        for s in slots {
            let a = s.align.max(1);
            end = end.checked_next_multiple_of(a)?;
            offsets.push(end);
            end = end.checked_add(s.size)?;
            align = align.max(a);
        }
        Some(RowLayout { offsets, size: end.checked_next_multiple_of(align)?, align })
    }
}

/// `offset` rounded up to a multiple of `page_size` (FFCV's `align_to_page`); `None` on overflow.
pub fn align_to_page(offset: u64, page_size: u64) -> Option<u64> {
    offset.checked_next_multiple_of(page_size)
}

/// Byte offset where the data table starts: right after the descriptors, unaligned.
pub fn data_table_start(num_fields: u16) -> u64 {
    (HEADER_SIZE + FIELD_DESC_SIZE * num_fields as usize) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = Header {
            version: 2,
            num_fields: 3,
            page_size: 1 << 23,
            num_samples: 1000,
            alloc_table_ptr: 123456,
        };
        assert_eq!(Header::parse(&h.to_bytes()), Some(h));
        assert_eq!(Header::parse(&h.to_bytes()[..23]), None);
    }

    #[test]
    fn row_layout_follows_numpy_align_true() {
        // Values checked against numpy 1.26: np.dtype([...], align=True).
        let img = Slot { size: 13, align: 1 };
        let i8s = Slot { size: 8, align: 8 };
        let ptr_size = Slot { size: 16, align: 1 };
        let custom = Slot { size: 6, align: 1 };
        let l = RowLayout::new(&[img, i8s]).unwrap();
        assert_eq!((l.offsets.clone(), l.size), (vec![0, 16], 24));
        let l = RowLayout::new(&[img, ptr_size]).unwrap();
        assert_eq!((l.offsets.clone(), l.size), (vec![0, 13], 29));
        let l = RowLayout::new(&[img, img, Slot { size: 8, align: 8 }]).unwrap();
        assert_eq!((l.offsets.clone(), l.size), (vec![0, 13, 32], 40));
        let l = RowLayout::new(&[i8s, custom, i8s]).unwrap();
        assert_eq!((l.offsets.clone(), l.size), (vec![0, 8, 16], 24));
        let l = RowLayout::new(&[ptr_size, custom]).unwrap();
        assert_eq!((l.offsets.clone(), l.size), (vec![0, 16], 22));
        let l = RowLayout::new(&[]).unwrap();
        assert_eq!(l.size, 0);
    }
}
