//! `write_arrow`: writes a `.beton` file from an Arrow table (the Arrow C stream interface). The
//! table crosses into Rust once, zero-copy; every value is read from the Arrow buffers on the
//! encoding threads with no Python call per row, so a table of numbers writes at memory speed
//! (the per-row path, `writer::write`, takes the GIL for every sample).
//!
//! Column `k` of the stream feeds field `k`. Each column is checked against its field's type
//! before anything is written: a column of the wrong Arrow type raises `TypeError`, a null or an
//! integer that does not fit an int field `ValueError`, naming the field, the column and the row.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::ffi_stream::RecordBatchStreamReader;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BinaryViewArray, FixedSizeBinaryArray, LargeBinaryArray, LargeStringArray,
    RecordBatch, RecordBatchReader, StringArray, StringViewArray,
};
use arrow_buffer::{Buffer, OffsetBuffer};
use arrow_schema::DataType;
use beton_storage::field::Input;
use beton_storage::{
    DType, EncodedImage, FieldType, ImageMode, ImageSource, SampleValue, Writer, WriterOptions,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

use crate::errors::from_storage;

/// What went wrong with a column, raised before the write starts.
enum Bad {
    /// The column's Arrow type cannot feed the field: `TypeError`.
    Type(String),
    /// A value cannot: `ValueError`.
    Value(String),
}

impl Bad {
    fn into_py(self, field: &str, column: &str) -> PyErr {
        match self {
            Bad::Type(why) => PyTypeError::new_err(format!("field '{field}' (column '{column}'): {why}")),
            Bad::Value(why) => PyValueError::new_err(format!("field '{field}' (column '{column}'): {why}")),
        }
    }
}

/// One record batch's column of variable-size values, each row's value a byte slice of it.
enum Var {
    Utf8(StringArray),
    LargeUtf8(LargeStringArray),
    Utf8View(StringViewArray),
    Binary(BinaryArray),
    LargeBinary(LargeBinaryArray),
    BinaryView(BinaryViewArray),
    FixedBinary(FixedSizeBinaryArray),
    /// A list of primitives: row `j` is elements `offsets[j]..offsets[j + 1]` of `values`
    /// (the child's data buffer, `width` bytes an element).
    List {
        offsets: OffsetBuffer<i32>,
        values: Buffer,
        width: usize,
    },
    LargeList {
        offsets: OffsetBuffer<i64>,
        values: Buffer,
        width: usize,
    },
    /// A fixed-size list of primitives: row `j` is elements `j * size..(j + 1) * size`.
    FixedList {
        size: usize,
        values: Buffer,
        width: usize,
    },
}

impl Var {
    /// Row `j`'s bytes (for strings, their UTF-8).
    fn bytes(&self, j: usize) -> &[u8] {
        let span = |start: usize, end: usize, width: usize| start * width..end * width;
        match self {
            Var::Utf8(a) => a.value(j).as_bytes(),
            Var::LargeUtf8(a) => a.value(j).as_bytes(),
            Var::Utf8View(a) => a.value(j).as_bytes(),
            Var::Binary(a) => a.value(j),
            Var::LargeBinary(a) => a.value(j),
            Var::BinaryView(a) => a.value(j),
            Var::FixedBinary(a) => a.value(j),
            Var::List { offsets, values, width } => {
                &values[span(offsets[j] as usize, offsets[j + 1] as usize, *width)]
            }
            Var::LargeList { offsets, values, width } => {
                &values[span(offsets[j] as usize, offsets[j + 1] as usize, *width)]
            }
            Var::FixedList { size, values, width } => &values[span(j * size, (j + 1) * size, *width)],
        }
    }

    /// Row `j` as text. Strings only; the arrays were validated (UTF-8 included) on import.
    fn text(&self, j: usize) -> &str {
        match self {
            Var::Utf8(a) => a.value(j),
            Var::LargeUtf8(a) => a.value(j),
            Var::Utf8View(a) => a.value(j),
            _ => unreachable!("text() on a binary column; Column::new pairs Str and paths with strings only"),
        }
    }
}

/// What a variable-size column's rows become.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// [`SampleValue::Text`] (text and JSON fields: [`Input::Str`]).
    Str,
    /// [`SampleValue::Bytes`] (bytes, arrays, custom fields: [`Input::Bytes`]).
    Bytes,
    /// An image file to read ([`Input::Image`] from strings).
    ImageFile,
    /// An encoded image ([`Input::Image`] from binary).
    ImageEncoded,
}

/// A field's whole column, ready to give any row's value without Python.
enum Column {
    /// Numbers, copied out of all batches into one vector (checked and widened on the way).
    Int(Vec<i64>),
    Float(Vec<f64>),
    Bool(Vec<bool>),
    /// One [`Var`] per record batch.
    Var(Kind, Vec<Var>),
    /// Images as `Dataset.take` gives them (`{mode, width, height, data}` structs of stored
    /// bytes), one per record batch: stored again byte for byte, never decoded.
    Stored(Vec<StoredImages>),
}

/// One record batch's column of stored images, checked on import.
struct StoredImages {
    modes: Vec<ImageMode>,
    widths: Vec<u16>,
    heights: Vec<u16>,
    data: Var,
}

impl Column {
    /// Row `i` of the table, which is row `j` of batch `b`.
    fn value(&self, i: usize, b: usize, j: usize) -> SampleValue {
        match self {
            Column::Int(v) => SampleValue::Int(v[i]),
            Column::Float(v) => SampleValue::Float(v[i]),
            Column::Bool(v) => SampleValue::Bool(v[i]),
            Column::Var(kind, batches) => {
                let var = &batches[b];
                match kind {
                    Kind::Str => SampleValue::Text(var.text(j).to_owned()),
                    Kind::Bytes => SampleValue::Bytes(var.bytes(j).to_vec()),
                    Kind::ImageFile => SampleValue::Image(ImageSource::File(PathBuf::from(var.text(j)))),
                    Kind::ImageEncoded => SampleValue::Image(ImageSource::Encoded(var.bytes(j).to_vec())),
                }
            }
            Column::Stored(batches) => {
                let images = &batches[b];
                SampleValue::Image(ImageSource::Stored(EncodedImage {
                    mode: images.modes[j],
                    width: images.widths[j],
                    height: images.heights[j],
                    data: images.data.bytes(j).to_vec(),
                }))
            }
        }
    }

    /// Field type `ty`'s column from `arrays` (one per batch, `starts[b]` the table row of batch
    /// `b`'s first row), chosen by what the type takes ([`FieldKind::input`]), so that a new
    /// field type needs nothing here.
    ///
    /// [`FieldKind::input`]: beton_storage::field::FieldKind::input
    fn new(ty: &FieldType, arrays: &[ArrayRef], starts: &[usize]) -> Result<Column, Bad> {
        for (a, &start) in arrays.iter().zip(starts) {
            if let Some(nulls) = a.logical_nulls() {
                if let Some(k) = (0..a.len()).find(|&k| nulls.is_null(k)) {
                    return Err(Bad::Value(format!(
                        "row {} is null; a beton field has no nulls (fill or drop them first)",
                        start + k
                    )));
                }
            }
        }
        let field = format!("{} fields", ty.short_name());
        let num_rows = arrays.iter().map(|a| a.len()).sum();
        Ok(match ty.kind().input() {
            Input::Int => {
                let mut out = Vec::with_capacity(num_rows);
                for (a, &start) in arrays.iter().zip(starts) {
                    ints(a, start, &field, &mut out)?;
                }
                Column::Int(out)
            }
            Input::Float => {
                let mut out = Vec::with_capacity(num_rows);
                for a in arrays {
                    floats(a, &field, &mut out)?;
                }
                Column::Float(out)
            }
            Input::Bool => {
                let mut out = Vec::with_capacity(num_rows);
                for a in arrays {
                    match a.data_type() {
                        DataType::Boolean => out.extend(a.as_boolean().values().iter()),
                        other => {
                            return Err(Bad::Type(format!("{field} take a boolean column, not {other}")))
                        }
                    }
                }
                Column::Bool(out)
            }
            Input::Str => Column::Var(
                Kind::Str,
                vars(arrays, |a, _| strings(a).ok_or_else(|| expected(&field, STRINGS, a)))?,
            ),
            Input::Bytes => match ty.kind().element() {
                // Arrays: their bytes, or lists of their element type.
                Some((dtype, _)) => {
                    Column::Var(Kind::Bytes, vars(arrays, |a, start| array_rows(a, start, dtype, &field))?)
                }
                None => Column::Var(
                    Kind::Bytes,
                    vars(arrays, |a, _| binaries(a).ok_or_else(|| expected(&field, BINARIES, a)))?,
                ),
            },
            Input::Image if matches!(arrays.first().map(|a| a.data_type()), Some(DataType::Struct(_))) => {
                let mut batches = Vec::with_capacity(arrays.len());
                for (a, &start) in arrays.iter().zip(starts) {
                    batches.push(stored_images(a, start, &field)?);
                }
                Column::Stored(batches)
            }
            Input::Image => {
                let kind = match arrays.first() {
                    Some(a) if binaries(a).is_some() => Kind::ImageEncoded,
                    _ => Kind::ImageFile,
                };
                let convert = if kind == Kind::ImageFile { strings } else { binaries };
                let wrong = |a: &ArrayRef| {
                    Bad::Type(format!(
                        "{field} take a {STRINGS} column of paths or a {BINARIES} column of encoded \
                         JPEG/PNG files, not {}",
                        a.data_type()
                    ))
                };
                Column::Var(kind, vars(arrays, |a, _| convert(a).ok_or_else(|| wrong(a)))?)
            }
        })
    }
}

/// A `{mode, width, height, data}` struct column (`Dataset.take`'s images): its modes checked
/// (0 JPEG, 1 raw), naming the row; the writer checks a raw image's size against its field.
fn stored_images(a: &ArrayRef, start: usize, field: &str) -> Result<StoredImages, Bad> {
    let wrong = || {
        Bad::Type(format!(
            "{field} take a struct column only as Dataset.take gives images: {{mode: uint8, width: \
             uint16, height: uint16, data: binary}}, not {}",
            a.data_type()
        ))
    };
    let s = a.as_struct_opt().ok_or_else(wrong)?;
    let child = |name: &str| s.column_by_name(name).ok_or_else(wrong);
    let (mode, width, height) = (child("mode")?, child("width")?, child("height")?);
    let (Some(mode), Some(width), Some(height)) = (
        mode.as_primitive_opt::<UInt8Type>(),
        width.as_primitive_opt::<UInt16Type>(),
        height.as_primitive_opt::<UInt16Type>(),
    ) else {
        return Err(wrong());
    };
    let data_array = child("data")?;
    let data = binaries(data_array).ok_or_else(wrong)?;
    for c in [mode as &dyn Array, width, height, data_array.as_ref()] {
        if let Some(k) = c.logical_nulls().and_then(|n| (0..c.len()).find(|&k| n.is_null(k))) {
            return Err(Bad::Value(format!(
                "row {} has a null image part; a beton field has no nulls",
                start + k
            )));
        }
    }
    let mut modes = Vec::with_capacity(s.len());
    for j in 0..s.len() {
        let m = ImageMode::from_byte(mode.value(j)).ok_or_else(|| {
            Bad::Value(format!(
                "row {}: image mode {} is neither 0 (JPEG) nor 1 (raw)",
                start + j,
                mode.value(j)
            ))
        })?;
        modes.push(m);
    }
    Ok(StoredImages { modes, widths: width.values().to_vec(), heights: height.values().to_vec(), data })
}

const STRINGS: &str = "string (utf8, large_utf8, utf8_view)";
const BINARIES: &str = "binary (binary, large_binary, binary_view, fixed_size_binary)";

fn expected(what: &str, takes: &str, a: &ArrayRef) -> Bad {
    Bad::Type(format!("{what} take a {takes} column, not {}", a.data_type()))
}

/// Each batch's [`Var`]; `convert` is given the batch and the table row of its first row.
fn vars(
    arrays: &[ArrayRef],
    convert: impl Fn(&ArrayRef, usize) -> Result<Var, Bad>,
) -> Result<Vec<Var>, Bad> {
    let mut start = 0;
    arrays
        .iter()
        .map(|a| {
            let var = convert(a, start);
            start += a.len();
            var
        })
        .collect()
}

fn strings(a: &ArrayRef) -> Option<Var> {
    Some(match a.data_type() {
        DataType::Utf8 => Var::Utf8(a.as_string::<i32>().clone()),
        DataType::LargeUtf8 => Var::LargeUtf8(a.as_string::<i64>().clone()),
        DataType::Utf8View => Var::Utf8View(a.as_string_view().clone()),
        _ => return None,
    })
}

fn binaries(a: &ArrayRef) -> Option<Var> {
    Some(match a.data_type() {
        DataType::Binary => Var::Binary(a.as_binary::<i32>().clone()),
        DataType::LargeBinary => Var::LargeBinary(a.as_binary::<i64>().clone()),
        DataType::BinaryView => Var::BinaryView(a.as_binary_view().clone()),
        DataType::FixedSizeBinary(_) => Var::FixedBinary(a.as_fixed_size_binary().clone()),
        _ => return None,
    })
}

/// Appends an integer column to `out`, failing on a value beyond `i64` (row `start + k`).
fn ints(a: &ArrayRef, start: usize, field: &str, out: &mut Vec<i64>) -> Result<(), Bad> {
    macro_rules! widen {
        ($t:ty) => {
            out.extend(a.as_primitive::<$t>().values().iter().map(|&v| i64::from(v)))
        };
    }
    match a.data_type() {
        DataType::Int8 => widen!(Int8Type),
        DataType::Int16 => widen!(Int16Type),
        DataType::Int32 => widen!(Int32Type),
        DataType::Int64 => out.extend_from_slice(a.as_primitive::<Int64Type>().values()),
        DataType::UInt8 => widen!(UInt8Type),
        DataType::UInt16 => widen!(UInt16Type),
        DataType::UInt32 => widen!(UInt32Type),
        DataType::UInt64 => {
            let values = a.as_primitive::<UInt64Type>().values();
            if let Some(k) = values.iter().position(|&v| v > i64::MAX as u64) {
                return Err(Bad::Value(format!(
                    "row {} holds {}, more than {field} (int64) hold",
                    start + k,
                    values[k]
                )));
            }
            out.extend(values.iter().map(|&v| v as i64));
        }
        other => return Err(Bad::Type(format!("{field} take an integer column, not {other}"))),
    }
    Ok(())
}

/// Appends a float or integer column to `out` as `f64` (integers round to nearest, as Python's
/// `float(int)` does).
fn floats(a: &ArrayRef, field: &str, out: &mut Vec<f64>) -> Result<(), Bad> {
    macro_rules! widen {
        ($t:ty) => {
            out.extend(a.as_primitive::<$t>().values().iter().map(|&v| v as f64))
        };
    }
    match a.data_type() {
        DataType::Float16 => {
            out.extend(a.as_primitive::<Float16Type>().values().iter().map(|&v| f64::from(v)))
        }
        DataType::Float32 => widen!(Float32Type),
        DataType::Float64 => out.extend_from_slice(a.as_primitive::<Float64Type>().values()),
        DataType::Int8 => widen!(Int8Type),
        DataType::Int16 => widen!(Int16Type),
        DataType::Int32 => widen!(Int32Type),
        DataType::Int64 => widen!(Int64Type),
        DataType::UInt8 => widen!(UInt8Type),
        DataType::UInt16 => widen!(UInt16Type),
        DataType::UInt32 => widen!(UInt32Type),
        DataType::UInt64 => widen!(UInt64Type),
        other => return Err(Bad::Type(format!("{field} take a float or integer column, not {other}"))),
    }
    Ok(())
}

/// The Arrow type whose elements are numpy `dtype`'s bytes (little-endian numbers only).
fn element_type(dtype: &DType) -> Option<DataType> {
    let s = dtype.typestr().as_bytes();
    if s[0] == b'>' && dtype.itemsize() > 1 {
        return None;
    }
    Some(match (s[1], dtype.itemsize()) {
        (b'i', 1) => DataType::Int8,
        (b'i', 2) => DataType::Int16,
        (b'i', 4) => DataType::Int32,
        (b'i', 8) => DataType::Int64,
        (b'u', 1) => DataType::UInt8,
        (b'u', 2) => DataType::UInt16,
        (b'u', 4) => DataType::UInt32,
        (b'u', 8) => DataType::UInt64,
        (b'f', 2) => DataType::Float16,
        (b'f', 4) => DataType::Float32,
        (b'f', 8) => DataType::Float64,
        _ => return None,
    })
}

/// An array field's rows (`a` a batch whose first row is table row `start`): each row's raw
/// bytes (the writer checks their length), or a list of the dtype's elements.
fn array_rows(a: &ArrayRef, start: usize, dtype: &DType, field: &str) -> Result<Var, Bad> {
    if let Some(var) = binaries(a) {
        return Ok(var);
    }
    let element = element_type(dtype);
    let wrong = || {
        let lists = match &element {
            Some(t) => format!(" or a list of {t}"),
            None => String::new(),
        };
        Bad::Type(format!(
            "{field} of {} take a {BINARIES} column (the array's bytes){lists}, not {}",
            dtype.name(),
            a.data_type()
        ))
    };
    let child = match a.data_type() {
        DataType::List(_) => a.as_list::<i32>().values(),
        DataType::LargeList(_) => a.as_list::<i64>().values(),
        DataType::FixedSizeList(_, _) => a.as_fixed_size_list().values(),
        _ => return Err(wrong()),
    };
    if element.as_ref() != Some(child.data_type()) {
        return Err(wrong());
    }
    let width = dtype.itemsize();
    let data = child.to_data();
    let values = data.buffers()[0].slice_with_length(data.offset() * width, data.len() * width);
    let var = match a.data_type() {
        DataType::List(_) => Var::List { offsets: a.as_list::<i32>().offsets().clone(), values, width },
        DataType::LargeList(_) => {
            Var::LargeList { offsets: a.as_list::<i64>().offsets().clone(), values, width }
        }
        _ => Var::FixedList { size: a.as_fixed_size_list().value_length() as usize, values, width },
    };
    if let Some(nulls) = child.nulls().filter(|n| n.null_count() > 0) {
        // Only the elements the rows use count (a sliced list keeps its whole child).
        let used = match &var {
            Var::List { offsets, .. } => offsets[0] as usize..offsets[offsets.len() - 1] as usize,
            Var::LargeList { offsets, .. } => offsets[0] as usize..offsets[offsets.len() - 1] as usize,
            _ => 0..child.len(),
        };
        if let Some(k) = used.into_iter().find(|&k| nulls.is_null(k)) {
            // The row whose elements hold element k.
            let row = match &var {
                Var::List { offsets, .. } => offsets.partition_point(|&o| o as usize <= k) - 1,
                Var::LargeList { offsets, .. } => offsets.partition_point(|&o| o as usize <= k) - 1,
                Var::FixedList { size, .. } => k / size,
                _ => unreachable!("lists only"),
            };
            return Err(Bad::Value(format!(
                "row {} has a null element; a beton array has no nulls",
                start + row
            )));
        }
    }
    Ok(var)
}

/// Takes the Arrow stream out of `stream`: an `arrow_array_stream` capsule, or an object with
/// `__arrow_c_stream__` (a `pyarrow.Table`, a polars `DataFrame`, ...).
pub(crate) fn import_stream(stream: &Bound<'_, PyAny>) -> PyResult<RecordBatchStreamReader> {
    let capsule = if stream.hasattr("__arrow_c_stream__")? {
        stream.call_method0("__arrow_c_stream__")?
    } else {
        stream.clone()
    };
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| {
        PyTypeError::new_err(
            "write_arrow takes an Arrow C stream: an object with __arrow_c_stream__ or its capsule",
        )
    })?;
    let ptr = capsule.pointer_checked(Some(c"arrow_array_stream"))?;
    // SAFETY: a capsule named "arrow_array_stream" holds an `ArrowArrayStream` struct (the Arrow
    // PyCapsule interface), which is `FFI_ArrowArrayStream`'s layout. `from_raw` moves the stream
    // out and leaves a released one behind, which the capsule's destructor then skips, so the
    // stream is released once, by the reader; no Python code runs between the check and the move.
    unsafe { RecordBatchStreamReader::from_raw(ptr.as_ptr().cast()) }
        .map_err(|e| PyValueError::new_err(format!("reading the Arrow stream: {e}")))
}

/// Writes the rows of an Arrow table, column `k` into field `k` (`stream`: an
/// `arrow_array_stream` capsule or an object with `__arrow_c_stream__`). Options and the result
/// as `write`'s.
#[pyfunction]
#[pyo3(signature = (path, fields, stream, page_size = None, num_workers = 0, seed = 0,
                    chunk_size = 256, progress = None, skip_bad = false, columnar_copy = true,
                    alpha_background = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_arrow<'py>(
    py: Python<'py>,
    path: PathBuf,
    fields: Bound<'py, PyDict>,
    stream: Bound<'py, PyAny>,
    page_size: Option<u64>,
    num_workers: usize,
    seed: u64,
    chunk_size: usize,
    progress: Option<Py<PyAny>>,
    skip_bad: bool,
    columnar_copy: bool,
    alpha_background: Option<(u8, u8, u8)>,
) -> PyResult<Bound<'py, PyDict>> {
    let specs = crate::writer::with_alpha_background(crate::writer::field_specs(&fields)?, alpha_background);
    let reader = import_stream(&stream)?;
    let schema = reader.schema();
    if schema.fields().len() != specs.len() {
        return Err(PyValueError::new_err(format!(
            "the Arrow table has {} columns for {} fields (column k feeds field k)",
            schema.fields().len(),
            specs.len()
        )));
    }
    // The batches are read holding the GIL: a producer backed by Python code needs it (one
    // backed by memory takes no time).
    let batches: Vec<RecordBatch> = reader
        .filter(|b| !matches!(b, Ok(b) if b.num_rows() == 0))
        .collect::<Result<_, _>>()
        .map_err(|e| PyValueError::new_err(format!("reading the Arrow stream: {e}")))?;
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let column_names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();

    let prepared = py.detach(|| -> Result<(Vec<usize>, Vec<Column>), (usize, Bad)> {
        let mut starts = Vec::with_capacity(batches.len());
        let mut num_rows = 0usize;
        for b in &batches {
            starts.push(num_rows);
            num_rows += b.num_rows();
        }
        let columns = specs
            .iter()
            .enumerate()
            .map(|(k, spec)| {
                let arrays: Vec<ArrayRef> = batches.iter().map(|b| Arc::clone(b.column(k))).collect();
                // Validate at the boundary (offsets, UTF-8: the C interface imports unchecked),
                // then read without checks.
                for a in &arrays {
                    a.to_data()
                        .validate_full()
                        .map_err(|e| (k, Bad::Value(format!("invalid Arrow data: {e}"))))?;
                }
                Column::new(&spec.ty, &arrays, &starts).map_err(|e| (k, e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        starts.push(num_rows);
        Ok((starts, columns))
    });
    let (starts, columns) = prepared.map_err(|(k, bad)| bad.into_py(&names[k], &column_names[k]))?;
    let num_rows = *starts.last().expect("starts ends with the row count");

    let options = WriterOptions {
        page_size: crate::writer::writer_page_size(page_size)?,
        num_threads: num_workers,
        seed,
        chunk_size,
        skip_bad,
        ..Default::default()
    };
    let (options, interrupted) = crate::writer::with_progress(progress, options);
    let writer = Writer::new(&path, specs, options).map_err(from_storage)?;
    let batch_starts = &starts[..starts.len() - 1];
    let fetch = |i: u64| -> Result<Vec<SampleValue>, beton_storage::writer::SourceError> {
        let i = i as usize;
        // The last batch starting at or before row i (batches are non-empty, so it holds it).
        let b = batch_starts.partition_point(|&s| s <= i) - 1;
        let j = i - batch_starts[b];
        Ok(columns.iter().map(|c| c.value(i, b, j)).collect())
    };
    // A table-only schema (numbers and bools): straight into the data table, no value objects.
    let fixed = columns.iter().all(|c| matches!(c, Column::Int(_) | Column::Float(_) | Column::Bool(_)));
    let result = py.detach(|| match fixed {
        true => writer.write_fixed(num_rows as u64, |k, i| columns[k].value(i as usize, 0, 0)),
        false => writer.write_indexed(num_rows as u64, fetch),
    });
    // The Arrow buffers are released here, holding the GIL (a producer's release may call
    // into Python).
    drop(columns);
    drop(batches);
    crate::writer::report(py, result, &interrupted, columnar_copy)
}
