//! Opening a `.beton` file: validate everything once, then trust.
//!
//! [`Dataset::open`] maps the file and checks the header, every descriptor, the row layout, the
//! bounds of the data table and every allocation-table entry (owner, pointer, size, one page per
//! allocation), the last on open or on first use ([`OpenOptions::defer_allocation_checks`]).
//! What is checked here the reading side (`mod.rs`) trusts.
//!
//! This module takes untrusted bytes and never panics on any input; the fuzz target
//! `fuzz/fuzz_targets/open_read.rs` holds it to that.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::file_id::{read_exact_at, FileId};
use super::{Dataset, Field, RemoteParts};
use crate::error::{Error, Result};
use crate::field::FieldType;
use crate::format::{self, FieldDesc, Header, RowLayout, Slot};
use crate::format::{ALLOC_ENTRY_SIZE, FIELD_DESC_SIZE, HEADER_SIZE, VERSION};
use crate::mmap::Bytes;
use crate::remote;

/// Options for opening a file.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    custom_layouts: HashMap<String, Slot>,
    defer_allocation_checks: bool,
    no_follow: bool,
    remote: Option<remote::RemoteOptions>,
}

impl OpenOptions {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares the row slot of a foreign custom field (type id 255 written by an FFCV `Field`
    /// class beton does not know): `size` bytes aligned to `align` (numpy's `itemsize` and
    /// `alignment` of that field's `metadata_type`; 1 for a structured dtype).
    pub fn custom_layout(mut self, name: &str, size: usize, align: usize) -> Self {
        self.custom_layouts.insert(name.to_string(), Slot { size, align });
        self
    }

    /// Checks the allocation table's entries on first use instead of on open: opening is then
    /// O(fields) however many payloads the file has, and a workload that reads only the data
    /// table (SQL over scalar columns) never reads the allocation table at all. A bad entry is
    /// then reported by the first payload read (and by [`crate::verify`]) as the same
    /// [`Error::Corrupt`] that open would give. Everything else is still checked on open.
    pub fn defer_allocation_checks(mut self, defer: bool) -> Self {
        self.defer_allocation_checks = defer;
        self
    }

    /// Refuses a local path whose last component is a symbolic link (`O_NOFOLLOW`: the open
    /// fails with [`Error::Io`] of OS error `ELOOP`), so that a caller who must know where a
    /// file leads need not `lstat` it first. Ignored where the platform has no such flag.
    pub fn no_follow(mut self, no_follow: bool) -> Self {
        self.no_follow = no_follow;
        self
    }

    /// How a URL is read (cache directory and bound, requests in flight, retries) instead of
    /// [`remote::RemoteOptions::from_env`].
    pub fn remote_options(mut self, options: remote::RemoteOptions) -> Self {
        self.remote = Some(options);
        self
    }

    /// Opens and validates `path`: a local file, or a URL ([`OpenOptions::open_url`]).
    ///
    /// # Errors
    /// I/O errors, and every way the file breaks the format (see [`Dataset::open`]).
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Dataset> {
        let path = path.as_ref();
        if remote::is_url(path) {
            return self.open_url(&path.to_string_lossy());
        }
        let io = |e| Error::io(path, e);
        let mut open = std::fs::OpenOptions::new();
        open.read(true);
        #[cfg(unix)]
        if self.no_follow {
            std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW);
        }
        let file = open.open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(Error::io(
                path,
                std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory, not a .beton file"),
            ));
        }
        // The header and descriptors read with `pread`; the file is mapped when first read
        // (`Dataset::bytes`): a query its columnar copy serves never maps it.
        let len = meta.len();
        let mut head = vec![0u8; len.min(HEAD_READ) as usize];
        read_exact_at(&file, &mut head, 0).map_err(io)?;
        if let Some(h) = Header::parse(&head) {
            let descriptors = format::data_table_start(h.num_fields).min(len) as usize;
            if descriptors > head.len() {
                let at = head.len();
                head.resize(descriptors, 0);
                read_exact_at(&file, &mut head[at..], at as u64).map_err(io)?;
            }
        }
        let mut ds = Dataset::validate(path.to_path_buf(), Source::File { file, len, head: &head }, self)?;
        ds.id = Some(FileId::of(&meta, ds.header.to_bytes()));
        ds.modified = meta.modified().ok();
        Ok(ds)
    }

    /// Opens the `.beton` object at `url` (`s3://`, `gs://`, `az://`, `http(s)://`, `file://`)
    /// through a local replica (see [`crate::remote`]): fetches its header, descriptors,
    /// allocation table and data table with range requests, then validates it as
    /// [`OpenOptions::open`] does. Payloads are fetched when read. Errors name the URL.
    ///
    /// # Errors
    /// [`Error::RemoteNotFound`], [`Error::RemoteDenied`], [`Error::RemoteUnavailable`] (after
    /// retries: within [`RemoteOptions::open_retry_for`](crate::RemoteOptions::open_retry_for)
    /// for a store that does not answer), [`Error::Remote`], and every error of
    /// [`OpenOptions::open`].
    pub fn open_url(&self, url: &str) -> Result<Dataset> {
        let options = match &self.remote {
            Some(o) => o.clone(),
            None => remote::RemoteOptions::from_env()?,
        };
        let (source, info) = remote::open_source(url, &options)?;
        let replica = remote::Replica::create(source, info, options)?;
        let len = replica.len();
        let (file, local) = replica.file();
        let file = file.try_clone().map_err(|e| Error::io(local, e))?;
        // The first 64 KiB (the header, and the descriptors: it holds 60), then the rest of the
        // descriptors and the allocation table at the end, then the data table. The spare
        // pages after it (named splits) are fetched when read.
        let mut leases = vec![replica.ensure(std::slice::from_ref(&(0..64 << 10)))?];
        let mut buf = [0u8; HEADER_SIZE];
        if let Some(h) = read_exact_at(&file, &mut buf, 0).ok().and_then(|()| Header::parse(&buf)) {
            let descriptors = format::data_table_start(h.num_fields);
            leases.push(replica.ensure(&[0..descriptors, h.alloc_table_ptr..len])?);
        }
        let bytes = Bytes::map(local, &file, len)?;
        let mut ds = Dataset::validate(PathBuf::from(url), Source::Bytes(bytes), self)?;
        leases.push(replica.ensure(&[0..ds.table_end, ds.header.alloc_table_ptr..len])?);
        ds.file = Some(file);
        ds.remote = Some(RemoteParts { replica, recent: remote::RecentLeases::default(), _metadata: leases });
        Ok(ds)
    }

    /// Validates a dataset held in memory (tests and fuzzing); errors name the path `<memory>`.
    ///
    /// # Errors
    /// As [`OpenOptions::open`].
    pub fn open_bytes(&self, bytes: Vec<u8>) -> Result<Dataset> {
        Dataset::validate(PathBuf::from("<memory>"), Source::Bytes(Bytes::Owned(bytes)), self)
    }
}

/// What a dataset is validated from: bytes held (a remote replica's map, bytes in memory), or a
/// local file whose first bytes (`head`: the header and every descriptor, as far as the file
/// goes) were read, mapped when first read.
enum Source<'a> {
    Bytes(Bytes),
    File { file: File, len: u64, head: &'a [u8] },
}

/// Bytes read at open before the header says how many descriptors follow: the header and the
/// first 7 descriptors (1,041 bytes each; a file with more fields reads the rest in a second
/// `pread`).
const HEAD_READ: u64 = 8192;

impl Dataset {
    /// Opens `path` with default options.
    ///
    /// Checks, in order: the 24-byte header; version 2; `alloc_table_ptr` ≠ 0 (0 is the mark of a
    /// write that never finished); the descriptors fit in the file; every name is ASCII; every
    /// type id and argument blob; page size a power of two; the data table ends within the file
    /// and before the allocation table; the allocation table is whole 24-byte entries; and every
    /// entry belongs to a sample, lies inside the data pages and within one page.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::UnsupportedVersion`], [`Error::InterruptedWrite`],
    /// [`Error::UnknownCustomField`] or [`Error::Corrupt`] naming the byte offset.
    pub fn open(path: impl AsRef<Path>) -> Result<Dataset> {
        OpenOptions::new().open(path)
    }

    fn validate(path: PathBuf, source: Source<'_>, options: &OpenOptions) -> Result<Dataset> {
        let (data, len) = match &source {
            Source::Bytes(bytes) => (bytes.as_slice(), bytes.as_slice().len() as u64),
            Source::File { len, head, .. } => (*head, *len),
        };
        let corrupt = |offset: u64, what: String| Error::Corrupt { path: path.clone(), offset, what };
        let header = Header::parse(data).ok_or_else(|| {
            corrupt(0, format!("file is {len} bytes, shorter than the {HEADER_SIZE}-byte header"))
        })?;
        if header.version != VERSION {
            return Err(Error::UnsupportedVersion { path, version: header.version, expected: VERSION });
        }
        if header.alloc_table_ptr == 0 {
            return Err(Error::InterruptedWrite { path });
        }
        let table_start = format::data_table_start(header.num_fields);
        if table_start > len {
            return Err(corrupt(
                HEADER_SIZE as u64,
                format!(
                    "header announces {} field descriptors ({} bytes), but the file is {len} bytes",
                    header.num_fields,
                    FIELD_DESC_SIZE * header.num_fields as usize
                ),
            ));
        }

        let mut fields = Vec::with_capacity(header.num_fields as usize);
        for k in 0..header.num_fields as usize {
            let offset = HEADER_SIZE + k * FIELD_DESC_SIZE;
            let desc = FieldDesc::parse(&data[offset..])
                .ok_or_else(|| corrupt(offset as u64, format!("field descriptor {k} is cut short")))?;
            let name_bytes = desc.name_bytes();
            if !name_bytes.is_ascii() {
                return Err(corrupt(
                    offset as u64 + 1,
                    format!("field {k}: name {:?} is not ASCII", String::from_utf8_lossy(name_bytes)),
                ));
            }
            let name = String::from_utf8_lossy(name_bytes).into_owned();
            let ty = FieldType::from_descriptor(
                desc.type_id,
                &desc.arguments,
                options.custom_layouts.get(&name).copied(),
            )
            .map_err(|why| match why {
                None => Error::UnknownCustomField { path: path.clone(), field: name.clone() },
                Some(why) => corrupt(offset as u64, format!("field {k} '{name}': {why}")),
            })?;
            let arguments = desc.arguments.iter().any(|&b| b != 0).then_some(desc.arguments);
            fields.push(Field { name, ty, offset: 0, type_id: desc.type_id, arguments });
        }

        let page_size = header.page_size as u64;
        if !page_size.is_power_of_two() {
            return Err(corrupt(4, format!("page_size {page_size} is not a power of two")));
        }
        let slots: Vec<Slot> = fields.iter().map(|f| f.ty.slot()).collect();
        let layout = RowLayout::new(&slots)
            .ok_or_else(|| corrupt(HEADER_SIZE as u64, "row layout overflows".to_string()))?;
        for (f, &offset) in fields.iter_mut().zip(&layout.offsets) {
            f.offset = offset;
        }
        if layout.size == 0 && header.num_samples > 0 {
            return Err(corrupt(
                8,
                format!(
                    "{} samples with rows of 0 bytes: a file with samples must have fields",
                    header.num_samples
                ),
            ));
        }
        let table_end = header
            .num_samples
            .checked_mul(layout.size as u64)
            .and_then(|n| n.checked_add(table_start))
            .filter(|&end| end <= len)
            .ok_or_else(|| {
                corrupt(
                    table_start,
                    format!(
                        "data table of {} rows × {} bytes from byte {table_start} runs past the end \
                         of the file ({len} bytes)",
                        header.num_samples, layout.size
                    ),
                )
            })?;
        let alloc_start = header.alloc_table_ptr;
        if alloc_start > len {
            return Err(corrupt(
                16,
                format!("alloc_table_ptr {alloc_start} is past the end of the file ({len} bytes)"),
            ));
        }
        if alloc_start < table_end {
            return Err(corrupt(
                16,
                format!(
                    "alloc_table_ptr {alloc_start} points inside the data table, which ends at byte \
                     {table_end}"
                ),
            ));
        }
        let table_bytes = len - alloc_start;
        if table_bytes % ALLOC_ENTRY_SIZE as u64 != 0 {
            return Err(corrupt(
                alloc_start,
                format!(
                    "allocation table ({table_bytes} bytes from byte {alloc_start} to the end) is not \
                     a whole number of {ALLOC_ENTRY_SIZE}-byte entries"
                ),
            ));
        }
        let num_allocations = table_bytes / ALLOC_ENTRY_SIZE as u64;
        let data_start = format::align_to_page(table_end, page_size)
            .ok_or_else(|| corrupt(4, "first page offset overflows".to_string()))?;

        let (file, bytes) = match source {
            Source::Bytes(bytes) => {
                bytes.advise_random(data_start, alloc_start);
                (None, OnceLock::from(bytes))
            }
            Source::File { file, .. } => (Some(file), OnceLock::new()),
        };
        Ok(Dataset {
            path,
            id: None,
            modified: None,
            file,
            bytes,
            len,
            map_failed: OnceLock::new(),
            header,
            fields,
            row_size: layout.size,
            table_start,
            table_end,
            first_page_bound: data_start,
            num_allocations,
            alloc_check: OnceLock::new(),
            index: OnceLock::new(),
            remote: None,
        })
        .and_then(|ds| {
            if !options.defer_allocation_checks {
                ds.alloc_meta()?;
            }
            ds.check_intact()?;
            Ok(ds)
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::mmap::tests::FAIL_MAPS;
    use crate::{Dataset, Error, FieldSpec, FieldType, OpenOptions, SampleValue, Writer, WriterOptions};

    /// `n` rows of `fields` ints (`field_k` = row × (k + 1)) and, with `blob`, a 3-byte payload.
    fn write(path: &std::path::Path, fields: usize, blob: bool, n: u64) {
        let mut specs: Vec<FieldSpec> =
            (0..fields).map(|k| FieldSpec::new(format!("f{k}"), FieldType::Int)).collect();
        if blob {
            specs.push(FieldSpec::new("blob", FieldType::Bytes));
        }
        let writer = Writer::new(path, specs, WriterOptions::default()).unwrap();
        writer
            .write_indexed(n, |i| {
                let mut row: Vec<SampleValue> =
                    (0..fields).map(|k| SampleValue::Int((i * (k as u64 + 1)) as i64)).collect();
                if blob {
                    row.push(SampleValue::Bytes(vec![i as u8; 3]));
                }
                Ok(row)
            })
            .unwrap();
    }

    fn int(ds: &Dataset, row: u64, field: usize) -> i64 {
        match ds.get(row, field).unwrap() {
            crate::Value::Int(v) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_local_file_is_mapped_when_first_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.beton");
        write(&path, 2, true, 100);
        let ds = OpenOptions::new().defer_allocation_checks(true).open(&path).unwrap();
        // What a query served by a columnar copy asks of a data file: nothing maps it.
        let _ = (ds.fields(), ds.num_samples(), ds.file_len(), ds.file_id(), ds.check_intact());
        assert!(!ds.is_mapped());
        assert_eq!(int(&ds, 99, 1), 198);
        assert!(ds.is_mapped());
        // Checking the allocation table at open reads it through the map.
        assert!(Dataset::open(&path).unwrap().is_mapped());
    }

    #[test]
    fn descriptors_past_the_first_read_are_read_too() {
        // 12 fields: the descriptors (1,041 bytes each) run past the 8 KiB read first.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wide.beton");
        write(&path, 12, false, 10);
        let ds = OpenOptions::new().defer_allocation_checks(true).open(&path).unwrap();
        assert_eq!(ds.fields().len(), 12);
        assert_eq!(ds.fields()[11].name(), "f11");
        assert_eq!(int(&ds, 9, 11), 9 * 12);
        // Cut inside the descriptors: the same error the map gave.
        let cut = dir.path().join("cut.beton");
        std::fs::write(&cut, &std::fs::read(&path).unwrap()[..10_000]).unwrap();
        let e = Dataset::open(&cut).unwrap_err();
        assert!(matches!(e, Error::Corrupt { offset: 24, .. }), "{e}");
    }

    #[test]
    #[cfg(unix)]
    fn no_follow_refuses_a_link_and_opens_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.beton");
        write(&path, 1, false, 5);
        let link = dir.path().join("link.beton");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let options = OpenOptions::new().no_follow(true);
        assert_eq!(int(&options.open(&path).unwrap(), 4, 0), 4);
        let e = options.open(&link).unwrap_err();
        assert!(matches!(&e, Error::Io { source, .. } if source.raw_os_error() == Some(libc::ELOOP)), "{e}");
        assert_eq!(int(&OpenOptions::new().open(&link).unwrap(), 4, 0), 4);
    }

    #[test]
    fn a_map_that_cannot_be_made_when_first_read_is_an_error_not_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.beton");
        write(&path, 1, true, 50);
        let ds = OpenOptions::new().defer_allocation_checks(true).open(&path).unwrap();
        FAIL_MAPS.with(|f| f.set(true));
        let got = ds.get(7, 0);
        let row = ds.row(7).map(<[u8]>::to_vec);
        let intact = ds.check_intact();
        let payload = ds.get(7, 1);
        FAIL_MAPS.with(|f| f.set(false));
        // The row read zeros, and every check says why instead of trusting them.
        assert_eq!(row.unwrap(), vec![0u8; ds.row_size()]);
        for e in [got.unwrap_err(), intact.unwrap_err(), payload.unwrap_err()] {
            assert!(e.to_string().contains("mapping it failed") && e.to_string().contains("a.beton"), "{e}");
        }
        // Opened again, the file maps and reads.
        assert_eq!(int(&OpenOptions::new().open(&path).unwrap(), 7, 0), 7);
    }
}
