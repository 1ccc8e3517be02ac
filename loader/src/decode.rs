//! Field decoders: what the loader writes into a batch for each field of a sample.
//!
//! A [`FieldDecoder`] declares the fixed-size columns it fills for one sample ([`ColumnSpec`]: a
//! name, an element type and a per-sample shape) and then, on a worker thread, writes one
//! sample's value straight into its rows of the output slot: no per-sample allocation, no
//! intermediate batch. The built-ins are FFCV's decoders for its scalar and payload fields;
//! image decoders plug in through the same trait.
//!
//! Variable-length payloads (bytes, JSON, text, beton's arrays) are padded to the longest value
//! of the dataset, as FFCV's `BytesDecoder` does, with a second column `NAME.len` holding each
//! sample's length.

use beton_dataset::column_values::ColumnValues;
use beton_storage::field::LoadAs;
use beton_storage::{Dataset, FieldType, Value};

use crate::error::{Error, Result};

/// Element type of an output column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// `u8` (images, bytes, text).
    U8,
    /// `bool` stored as one byte, 0 or 1.
    Bool,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64` (FFCV's IntField).
    I64,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64` (lengths).
    U64,
    /// IEEE half.
    F16,
    /// `f32`.
    F32,
    /// `f64` (FFCV's FloatField).
    F64,
}

impl ElemType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ElemType::U8 | ElemType::Bool | ElemType::I8 => 1,
            ElemType::I16 | ElemType::U16 | ElemType::F16 => 2,
            ElemType::I32 | ElemType::U32 | ElemType::F32 => 4,
            ElemType::I64 | ElemType::U64 | ElemType::F64 => 8,
        }
    }

    /// numpy's name of the type (`"<i8"`, `"|u1"`, ...), little-endian.
    pub fn numpy(self) -> &'static str {
        match self {
            ElemType::U8 => "|u1",
            ElemType::Bool => "|b1",
            ElemType::I8 => "|i1",
            ElemType::I16 => "<i2",
            ElemType::I32 => "<i4",
            ElemType::I64 => "<i8",
            ElemType::U16 => "<u2",
            ElemType::U32 => "<u4",
            ElemType::U64 => "<u8",
            ElemType::F16 => "<f2",
            ElemType::F32 => "<f4",
            ElemType::F64 => "<f8",
        }
    }

    fn from_numpy(descr: &str) -> Option<ElemType> {
        let code = descr.trim_start_matches(['<', '|', '=']);
        Some(match code {
            "u1" | "B" => ElemType::U8,
            "b1" | "?" => ElemType::Bool,
            "i1" => ElemType::I8,
            "i2" => ElemType::I16,
            "i4" => ElemType::I32,
            "i8" => ElemType::I64,
            "u2" => ElemType::U16,
            "u4" => ElemType::U32,
            "u8" => ElemType::U64,
            "f2" => ElemType::F16,
            "f4" => ElemType::F32,
            "f8" => ElemType::F64,
            _ => return None,
        })
    }
}

/// One output column: `shape` is per sample (a batch column has shape `[batch, ...shape]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnSpec {
    /// Column name: the field's, or `FIELD.len` for lengths.
    pub name: String,
    /// Element type.
    pub elem: ElemType,
    /// Per-sample shape (empty for a scalar).
    pub shape: Vec<usize>,
}

impl ColumnSpec {
    /// Bytes one sample takes.
    pub fn sample_bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.elem.size()
    }

    /// Bytes `batch_size` samples take, or `None` when that overflows (a shape read from a
    /// corrupt file).
    pub fn batch_bytes(&self, batch_size: usize) -> Option<usize> {
        self.shape.iter().try_fold(self.elem.size(), |n, &d| n.checked_mul(d))?.checked_mul(batch_size)
    }
}

/// What a decoder knows about the sample it decodes.
#[derive(Debug, Clone, Copy)]
pub struct SampleContext {
    /// The sample's row id in the dataset.
    pub index: u64,
    /// The loader's seed.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// Position of the sample in its batch.
    pub position: usize,
}

/// Each row's stored `(height, width)`: the image slot is `mode u8 @0, width u16 @1, height u16
/// @3, data_ptr u64 @5` at the field's offset (FFCV's `ImageField` dtype).
pub(crate) fn stored_sizes(ds: &Dataset, field: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let offset = ds.fields()[field].offset();
    ds.data_table().chunks_exact(ds.row_size()).map(move |r| {
        let u16_at =
            |k: usize| r.get(offset + k..offset + k + 2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
        (usize::from(u16_at(3)), usize::from(u16_at(1)))
    })
}
/// One data file's share of a [`FieldData`]: the field there (if the file has it) and the
/// column-file values that replace it (null cells keep the data file's).
pub(crate) type FieldSpan<'a> = (Option<(&'a Dataset, usize)>, Option<&'a ColumnValues>);

/// A field as a decoder sizes its columns: its name, its type and the values it spans, in one
/// data file ([`FieldData::of_file`]) or over a version's data files and column files.
pub struct FieldData<'a> {
    name: &'a str,
    ty: &'a FieldType,
    /// Per data file: the field there (if it has it) and the column-file values that replace
    /// it (null cells keep the data file's; `beton_dataset::versioned::values`).
    parts: Vec<FieldSpan<'a>>,
}

impl<'a> FieldData<'a> {
    /// Field `field` of `ds`.
    pub fn of_file(ds: &'a Dataset, field: usize) -> FieldData<'a> {
        let f = &ds.fields()[field];
        FieldData { name: f.name(), ty: f.field_type(), parts: vec![(Some((ds, field)), None)] }
    }

    pub(crate) fn of_parts(name: &'a str, ty: &'a FieldType, parts: Vec<FieldSpan<'a>>) -> FieldData<'a> {
        FieldData { name, ty, parts }
    }

    /// The field's name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The field's type.
    pub fn field_type(&self) -> &'a FieldType {
        self.ty
    }

    /// The data file and field, when the values are one data file's field and nothing else.
    pub fn single_file(&self) -> Option<(&'a Dataset, usize)> {
        match self.parts.as_slice() {
            [(Some(file), None)] => Some(*file),
            _ => None,
        }
    }

    /// The data files whose field gives some of the values.
    pub fn files(&self) -> impl Iterator<Item = (&'a Dataset, usize)> + '_ {
        self.parts.iter().filter(|(_, c)| c.is_none_or(|c| c.has_nulls())).filter_map(|(f, _)| *f)
    }

    /// The cells column files give (an array and a position in it; null where a data file's
    /// value stands), without making any column whole.
    pub fn column_cells(&self) -> impl Iterator<Item = (&'a arrow_array::ArrayRef, usize)> + '_ {
        self.parts.iter().filter_map(|(_, c)| *c).flat_map(|c| c.cells())
    }

    /// The longest value of a variable-length field, in bytes (JSON's NUL not counted).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a field that is not variable-length; a corrupt size word.
    pub fn longest(&self, decoder: &str) -> Result<usize> {
        let mut max = 0usize;
        for (ds, field) in self.files() {
            max = max.max(longest(ds, field, decoder)?.0);
        }
        for (array, row) in self.column_cells() {
            let value = beton_dataset::versioned::values::cell(array, self.ty, row)?;
            let len = match value {
                Some(Value::Bytes(b) | Value::Array(b)) => b.len(),
                // Room for the NUL that ends JSON in a data file (as `longest` counts it).
                Some(Value::Json(t)) => t.len() + 1,
                Some(Value::Text(t)) => t.len(),
                _ => 0,
            };
            max = max.max(len);
        }
        Ok(max)
    }

    /// Every stored image's `(height, width)`, data files' rows first, then column files'.
    ///
    /// # Errors
    /// Column-file cells that are not images.
    pub fn image_sizes(&self) -> Result<Vec<(usize, usize)>> {
        let mut sizes = Vec::new();
        for (ds, field) in self.files() {
            sizes.extend(stored_sizes(ds, field));
        }
        for (array, row) in self.column_cells() {
            if let Some(Value::Image(img)) = beton_dataset::versioned::values::cell(array, self.ty, row)? {
                sizes.push((usize::from(img.height), usize::from(img.width)));
            }
        }
        Ok(sizes)
    }

    fn wrong_decoder(&self, decoder: &str) -> Error {
        Error::InvalidArgument {
            what: format!("decoder for field '{}'", self.name),
            why: format!("{decoder} cannot decode a {} field", self.ty.name()),
        }
    }
}

/// Writes one field of one sample into its rows of the batch's columns.
///
/// Implementations must write every byte of `out` (slots are reused, so bytes left alone hold a
/// previous batch's data) and take all randomness from [`SampleContext`] (seed, epoch, index),
/// so that batches do not depend on thread count or timing.
pub trait FieldDecoder: Send + Sync {
    /// The columns this decoder fills for field `field` of `ds`, for `epoch` (a decoder may
    /// change its output size between epochs, e.g. progressive resizing).
    ///
    /// # Errors
    /// When the decoder cannot decode this field (wrong type, sizes that differ, ...).
    fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> Result<Vec<ColumnSpec>>;

    /// The columns for `field` wherever its values lie: over a version of a dataset directory,
    /// several data files and column files ([`FieldData`]). By default, [`columns`](Self::columns)
    /// when the field is one data file's; beton's decoders size any field.
    ///
    /// # Errors
    /// As [`columns`](Self::columns); by default, a field whose values column files give.
    fn columns_of(&self, field: &FieldData<'_>, epoch: u64) -> Result<Vec<ColumnSpec>> {
        match field.single_file() {
            Some((ds, k)) => self.columns(ds, k, epoch),
            None => Err(Error::InvalidArgument {
                what: format!("decoder for field '{}'", field.name()),
                why: "the field's values come from column files of a dataset directory, and this \
                      decoder implements only `columns` (one data file's field): implement \
                      `columns_of`"
                    .into(),
            }),
        }
    }

    /// Writes `value` into `out`, one byte slice per column of [`columns`](Self::columns), each
    /// of that column's `sample_bytes()`.
    ///
    /// # Errors
    /// A value this decoder cannot write (the message should say why; the loader adds the
    /// sample index and field name).
    fn decode(&self, value: Value<'_>, ctx: &SampleContext, out: &mut [&mut [u8]]) -> Result<()>;
}

fn decode_error(why: impl Into<String>) -> Error {
    Error::Decode(why.into())
}

/// FFCV's `IntDecoder`: an `i64` per sample.
#[derive(Debug, Default, Clone, Copy)]
pub struct IntDecoder;

/// FFCV's `FloatDecoder`: an `f64` per sample.
#[derive(Debug, Default, Clone, Copy)]
pub struct FloatDecoder;

/// A `bool` (one byte, 0 or 1) per sample, for beton's bool field.
#[derive(Debug, Default, Clone, Copy)]
pub struct BoolDecoder;

/// FFCV's `NDArrayDecoder` (and `TorchTensorField`'s): the array's bytes, its dtype and shape.
#[derive(Debug, Default, Clone, Copy)]
pub struct NDArrayDecoder;

/// FFCV's `BytesDecoder`, also for JSON, text and beton's variable-length arrays: the payload
/// padded with zeros to the longest of the dataset, and its length in `NAME.len`.
#[derive(Debug, Default, Clone, Copy)]
pub struct BytesDecoder;

/// The [`FieldDecoder`] of a field that loads as one scalar per sample (`LoadAs::$load`): one
/// column of `$elem`, each sample's value the bytes `$bytes` makes of it (`None`: not `$what`).
macro_rules! scalar_decoder {
    ($decoder:ident, $load:ident, $elem:ident, $bytes:expr, $what:literal) => {
        impl FieldDecoder for $decoder {
            fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> Result<Vec<ColumnSpec>> {
                self.columns_of(&FieldData::of_file(ds, field), epoch)
            }

            fn columns_of(&self, field: &FieldData<'_>, _epoch: u64) -> Result<Vec<ColumnSpec>> {
                if field.field_type().kind().load_as() != LoadAs::$load {
                    return Err(field.wrong_decoder(stringify!($decoder)));
                }
                Ok(vec![ColumnSpec { name: field.name().to_string(), elem: ElemType::$elem, shape: vec![] }])
            }

            fn decode(&self, value: Value<'_>, _: &SampleContext, out: &mut [&mut [u8]]) -> Result<()> {
                let bytes = ($bytes)(value).ok_or_else(|| decode_error(concat!("not ", $what)))?;
                out[0].copy_from_slice(&bytes);
                Ok(())
            }
        }
    };
}

scalar_decoder!(IntDecoder, Int, I64, |v: Value<'_>| v.as_int().map(i64::to_le_bytes), "an int");
scalar_decoder!(FloatDecoder, Float, F64, |v: Value<'_>| v.as_float().map(f64::to_le_bytes), "a float");
scalar_decoder!(
    BoolDecoder,
    Bool,
    Bool,
    |v: Value<'_>| match v {
        Value::Bool(b) => Some([b as u8]),
        _ => None,
    },
    "a bool"
);

impl FieldDecoder for NDArrayDecoder {
    fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> Result<Vec<ColumnSpec>> {
        self.columns_of(&FieldData::of_file(ds, field), epoch)
    }

    fn columns_of(&self, f: &FieldData<'_>, _epoch: u64) -> Result<Vec<ColumnSpec>> {
        match f.field_type().kind().load_as() {
            LoadAs::Array(spec) => {
                let elem =
                    ElemType::from_numpy(spec.dtype.typestr()).ok_or_else(|| Error::InvalidArgument {
                        what: format!("decoder for field '{}'", f.name()),
                        why: format!(
                            "arrays of dtype {} are not supported by the loader",
                            spec.dtype.typestr()
                        ),
                    })?;
                // Every sample's array lies in one page (FORMAT.md §5): a descriptor whose
                // arrays cannot is corrupt, and no buffer is sized from it.
                for (ds, _) in f.files() {
                    if ds.num_samples() > 0 && spec.nbytes() > ds.page_size() {
                        return Err(Error::Storage(beton_storage::Error::Corrupt {
                            path: ds.path().to_path_buf(),
                            offset: 0,
                            what: format!(
                                "field '{}': arrays of shape {:?} ({} bytes) cannot fit the file's \
                                 pages of {} bytes",
                                f.name(),
                                spec.shape,
                                spec.nbytes(),
                                ds.page_size()
                            ),
                        }));
                    }
                }
                Ok(vec![ColumnSpec {
                    name: f.name().to_string(),
                    elem,
                    shape: spec.shape.iter().map(|&d| d as usize).collect(),
                }])
            }
            _ => Err(f.wrong_decoder("NDArrayDecoder")),
        }
    }

    fn decode(&self, value: Value<'_>, _: &SampleContext, out: &mut [&mut [u8]]) -> Result<()> {
        match value {
            Value::NDArray(bytes) if bytes.len() == out[0].len() => out[0].copy_from_slice(bytes),
            _ => return Err(decode_error("array payload of the wrong size")),
        }
        Ok(())
    }
}

/// The longest payload of a variable-length field over every row (from the rows' size words).
fn longest(ds: &Dataset, field: usize, decoder: &str) -> Result<(usize, usize)> {
    let f = &ds.fields()[field];
    let itemsize = match f.field_type().kind().load_as() {
        LoadAs::Sized { itemsize } => itemsize,
        _ => {
            return Err(Error::InvalidArgument {
                what: format!("decoder for field '{}'", f.name()),
                why: format!("{decoder} cannot decode a {} field", f.field_type().name()),
            })
        }
    };
    // A value lies in its sample's page (FORMAT.md §5), so no valid size word exceeds the page
    // size: a larger one is a corrupt row, reported before any buffer is sized from it.
    let (row, offset, limit) = (ds.row_size(), f.offset(), ds.page_size().min(ds.file_len()));
    let table = ds.data_table();
    let mut max = 0u64;
    for (i, r) in table.chunks_exact(row).enumerate() {
        let word = u64::from_le_bytes(r[offset + 8..offset + 16].try_into().unwrap_or_default());
        let bytes = word.checked_mul(itemsize as u64).filter(|&b| b <= limit);
        let Some(bytes) = bytes else {
            return Err(Error::Storage(beton_storage::Error::Corrupt {
                path: ds.path().to_path_buf(),
                offset: ds.data_table_offset() + (i * row + offset + 8) as u64,
                what: format!(
                    "sample {i}, field '{}': the row gives a size of {word} × {itemsize} bytes, more \
                     than a page ({} bytes) or the file ({} bytes) can hold",
                    f.name(),
                    ds.page_size(),
                    ds.file_len()
                ),
            }));
        };
        max = max.max(bytes);
    }
    ds.check_intact()?;
    Ok((max as usize, itemsize))
}

impl FieldDecoder for BytesDecoder {
    fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> Result<Vec<ColumnSpec>> {
        self.columns_of(&FieldData::of_file(ds, field), epoch)
    }

    fn columns_of(&self, field: &FieldData<'_>, _epoch: u64) -> Result<Vec<ColumnSpec>> {
        if !matches!(field.field_type().kind().load_as(), LoadAs::Sized { .. }) {
            return Err(field.wrong_decoder("BytesDecoder"));
        }
        let max = field.longest("BytesDecoder")?;
        let name = field.name().to_string();
        Ok(vec![
            ColumnSpec { name: name.clone(), elem: ElemType::U8, shape: vec![max] },
            ColumnSpec { name: format!("{name}.len"), elem: ElemType::U64, shape: vec![] },
        ])
    }

    fn decode(&self, value: Value<'_>, _: &SampleContext, out: &mut [&mut [u8]]) -> Result<()> {
        let bytes = match value {
            Value::Bytes(b) | Value::Array(b) => b,
            Value::Json(t) | Value::Text(t) => t.as_bytes(),
            _ => return Err(decode_error("not a bytes, JSON, text or array value")),
        };
        let (data, len) = out.split_at_mut(1);
        let data = &mut data[0];
        if bytes.len() > data.len() {
            return Err(decode_error(format!(
                "{} bytes, longer than the column's {}",
                bytes.len(),
                data.len()
            )));
        }
        data[..bytes.len()].copy_from_slice(bytes);
        data[bytes.len()..].fill(0);
        len[0].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        Ok(())
    }
}

/// The decoder FFCV uses by default for a field of this type; `None` for images (their decoders
/// come with the image pipeline) and custom fields.
pub fn default_decoder(ty: &FieldType) -> Option<std::sync::Arc<dyn FieldDecoder>> {
    use std::sync::Arc;
    Some(match ty.kind().load_as() {
        LoadAs::Int => Arc::new(IntDecoder),
        LoadAs::Float => Arc::new(FloatDecoder),
        LoadAs::Bool => Arc::new(BoolDecoder),
        LoadAs::Array(_) => Arc::new(NDArrayDecoder),
        LoadAs::Sized { .. } => Arc::new(BytesDecoder),
        LoadAs::Image | LoadAs::None => return None,
    })
}
