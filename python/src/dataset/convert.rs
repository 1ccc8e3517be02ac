//! Conversions the dataset class shares: a sample's values as Python objects, the table's
//! columns as an Arrow C stream, a query plan as a dict, a copy of rows to a new file.

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use beton_query::Table;
use beton_storage::Value;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict};

use crate::errors::{from_query, from_storage};
use crate::index_set::IndexSet;

/// The named columns of `table` (all for `None`) as one record batch.
pub(crate) fn columns_batch(
    table: &Table<'_>,
    columns: Option<Vec<String>>,
) -> beton_query::Result<RecordBatch> {
    let names: Vec<String> = match columns {
        Some(c) => c,
        None => table.column_names().into_iter().map(String::from).collect(),
    };
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    table.record_batch(&names)
}

/// One value in the raw form `Dataset.get` gives Python (see there).
pub(crate) fn value_object<'py>(
    py: Python<'py>,
    value: Value<'_>,
    ty: &beton_storage::FieldType,
    decode_images: bool,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Int(v) => v.into_pyobject(py)?.into_any(),
        Value::Float(v) => v.into_pyobject(py)?.into_any(),
        Value::Bool(v) => v.into_pyobject(py)?.to_owned().into_any(),
        Value::Bytes(b) | Value::Custom(b) => PyBytes::new(py, b).into_any(),
        Value::Json(t) | Value::Text(t) => t.into_pyobject(py)?.into_any(),
        Value::NDArray(b) => {
            let (typestr, shape) = match ty.kind().element() {
                Some((dtype, shape)) => (dtype.typestr().to_string(), shape.to_vec()),
                None => (String::from("|u1"), vec![b.len() as u64]),
            };
            (PyBytes::new(py, b), typestr, shape).into_pyobject(py)?.into_any()
        }
        Value::Array(b) => {
            let typestr = match ty.kind().element() {
                Some((dtype, _)) => dtype.typestr().to_string(),
                None => String::from("|u1"),
            };
            let len =
                b.len() as u64 / beton_storage::DType::parse(&typestr).map_or(1, |d| d.itemsize() as u64);
            (PyBytes::new(py, b), typestr, vec![len]).into_pyobject(py)?.into_any()
        }
        Value::Image(img) if decode_images => {
            let p = py.detach(|| img.decode()).map_err(from_storage)?;
            (PyBytes::new(py, &p.data), p.height, p.width, p.channels).into_pyobject(py)?.into_any()
        }
        Value::Image(img) => {
            (PyBytes::new(py, img.data), img.mode.name(), img.height, img.width).into_pyobject(py)?.into_any()
        }
    })
}

/// `{"allocations", "pages", "bytes"}` of some reads.
fn reads_dict<'py>(py: Python<'py>, r: &beton_query::explain::Reads) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    set_fields!(d, r; allocations, pages, bytes);
    Ok(d)
}

/// A query plan as a dict (the Python `Explain` wraps it): `text` is `beton explain`'s output.
pub(crate) fn explain_dict<'py>(
    py: Python<'py>,
    e: beton_query::explain::Explain,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("text", e.to_string())?;
    d.set_item("sql", &e.sql)?;
    match &e.source {
        beton_query::explain::Source::File(p) if e.remote.is_some() => {
            d.set_item("path", p.to_string_lossy())?;
            d.set_item("version", 0)?;
        }
        beton_query::explain::Source::File(p) => {
            d.set_item("path", p)?;
            d.set_item("version", 0)?;
        }
        beton_query::explain::Source::Version { dir, version } => {
            d.set_item("path", dir)?;
            d.set_item("version", version)?;
        }
    }
    set_fields!(d, e; columns, heap_columns, rows_matched, num_rows, page_size);
    let scan = PyDict::new(py);
    scan.set_item("columnar", e.scan.columnar)?;
    scan.set_item("columnar_columns", &e.scan.columnar_columns)?;
    scan.set_item("row_major", e.scan.row_major)?;
    d.set_item("scan", scan)?;
    d.set_item("matched", reads_dict(py, &e.matched)?)?;
    d.set_item("total", reads_dict(py, &e.total)?)?;
    let files = e
        .data_files
        .iter()
        .map(|f| {
            let fd = PyDict::new(py);
            set_fields!(fd, f; id, data_file, rows_matched);
            fd.set_item("matched", reads_dict(py, &f.matched)?)?;
            fd.set_item("total", reads_dict(py, &f.total)?)?;
            Ok(fd)
        })
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("data_files", files)?;
    match &e.remote {
        Some(r) => {
            let rd = PyDict::new(py);
            set_fields!(rd, r; requests, bytes, requests_needed, bytes_needed);
            d.set_item("remote", rd)?;
        }
        None => d.set_item("remote", py.None())?,
    }
    d.set_item("ids", IndexSet::wrap(e.ids))?;
    Ok(d)
}

/// Copies rows of `table` (fields `fields`, each with its type in `schema`) into a new file,
/// values as stored (never re-encoded): the report as a dict.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_table<'py>(
    py: Python<'py>,
    table: &Table<'_>,
    schema: &[(String, beton_storage::FieldType)],
    path: &std::path::Path,
    fields: Option<Vec<String>>,
    rows: Option<Vec<u64>>,
    classes: Option<&[String]>,
    options: beton_storage::WriterOptions,
) -> PyResult<Bound<'py, PyDict>> {
    let fields: Vec<(String, beton_storage::FieldType)> = match fields {
        None => schema.to_vec(),
        Some(names) => names
            .into_iter()
            .map(|n| match schema.iter().find(|(s, _)| *s == n) {
                Some(f) => Ok(f.clone()),
                None => Err(pyo3::exceptions::PyKeyError::new_err(format!(
                    "no field '{n}' to copy; the fields are {}",
                    schema.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>().join(", ")
                ))),
            })
            .collect::<PyResult<_>>()?,
    };
    let copy = beton_query::copy::Copy { fields: &fields, rows: rows.as_deref(), classes };
    let copied =
        py.detach(|| beton_query::copy::copy_rows(table, path, copy, options)).map_err(from_query)?;
    let report = crate::writer::report_dict(py, &copied.report)?;
    report.set_item("filled", crate::writer::filled(&copied.filled))?;
    Ok(report)
}

/// An `arrow_array_stream` PyCapsule (the Arrow C stream interface), or the error making it.
pub(crate) type ArrowStream<'py> = PyResult<Bound<'py, PyCapsule>>;

/// Python's sample `index` (negative: from the end) of `n` samples.
///
/// # Errors
/// `IndexError` past either end.
pub(crate) fn sample_index(index: i64, n: u64) -> PyResult<u64> {
    let i = if index < 0 { index + n as i64 } else { index };
    if !(0..n as i64).contains(&i) {
        return Err(pyo3::exceptions::PyIndexError::new_err(format!("sample {index} of {n}")));
    }
    Ok(i as u64)
}

/// A sample as `{name: value}` over `fields` (name and type, in order), `value(k, name, type)`
/// reading field `k`'s value, each made a Python object by [`value_object`].
pub(crate) fn sample_dict<'py, 'f, 'v>(
    py: Python<'py>,
    decode_images: bool,
    fields: impl Iterator<Item = (&'f str, &'f beton_storage::FieldType)>,
    mut value: impl FnMut(usize, &str, &beton_storage::FieldType) -> PyResult<Option<Value<'v>>>,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (k, (name, ty)) in fields.enumerate() {
        match value(k, name, ty)? {
            Some(v) => out.set_item(name, value_object(py, v, ty, decode_images)?)?,
            None => out.set_item(name, py.None())?, // NULL
        }
    }
    Ok(out)
}

/// Runs `query` without the GIL and hands its record batch to Python as an `arrow_array_stream`
/// PyCapsule (the Arrow C stream interface).
pub(crate) fn stream_capsule(
    py: Python<'_>,
    query: impl FnOnce() -> beton_query::Result<RecordBatch> + Send,
) -> ArrowStream<'_> {
    let batch = py.detach(query).map_err(from_query)?;
    let schema = batch.schema();
    let reader = RecordBatchIterator::new([Ok(batch)], schema);
    let stream = FFI_ArrowArrayStream::new(Box::new(reader));
    PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
}
