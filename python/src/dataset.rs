//! `Dataset`: an open `.beton` file: its fields, one sample's values, the data table as an Arrow
//! C stream, SQL, and named splits.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use beton_query::{splits, Table};
use beton_storage::{OpenOptions, Value};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict};

use crate::errors::{from_query, from_storage};
use crate::index_set::IndexSet;

/// (name, type, (dtype, shape) of arrays).
type FieldInfo = (String, String, Option<(String, Vec<u64>)>);

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
            d.set_item("version", 1)?;
        }
        beton_query::explain::Source::File(p) => {
            d.set_item("path", p)?;
            d.set_item("version", 1)?;
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

/// An open, validated `.beton` file.
#[pyclass(module = "beton._native", frozen)]
pub struct Dataset {
    pub(crate) inner: Arc<beton_storage::Dataset>,
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

impl Dataset {
    /// This file, as the source of the index sets it makes.
    fn source(&self) -> crate::gallery::Source {
        crate::gallery::Source::File(Arc::clone(&self.inner))
    }
}

#[pymethods]
impl Dataset {
    /// Opens and validates `path` (its allocation table on first payload read). `custom` maps a foreign custom field's name to its row
    /// layout `(size, align)`.
    #[new]
    #[pyo3(signature = (path, custom = None))]
    fn open(
        py: Python<'_>,
        path: std::path::PathBuf,
        custom: Option<BTreeMap<String, (usize, usize)>>,
    ) -> PyResult<Self> {
        // The allocation table is checked on first payload read, so opening a file to query its
        // data table costs O(fields), not O(payloads).
        let mut options = OpenOptions::new().defer_allocation_checks(true);
        for (name, (size, align)) in custom.unwrap_or_default() {
            options = options.custom_layout(&name, size, align);
        }
        let ds = py.detach(|| options.open(&path)).map_err(from_storage)?;
        Ok(Dataset { inner: Arc::new(ds) })
    }

    fn __len__(&self) -> usize {
        self.inner.num_samples() as usize
    }

    /// The file's path (`pathlib.Path`), or its URL (`str`) for a remote dataset.
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.inner.is_remote() {
            return Ok(pyo3::types::PyString::new(py, &self.inner.path().to_string_lossy()).into_any());
        }
        Ok(self.inner.path().into_pyobject(py)?.into_any())
    }

    #[getter]
    fn page_size(&self) -> u64 {
        self.inner.page_size()
    }

    #[getter]
    fn num_pages(&self) -> u64 {
        self.inner.num_pages()
    }

    /// `[(name, type, details)]`: details is the dtype and shape of arrays, else None.
    fn fields(&self) -> Vec<FieldInfo> {
        self.inner
            .fields()
            .iter()
            .map(|f| {
                let kind = f.field_type().kind();
                let details =
                    kind.element().map(|(dtype, shape)| (dtype.typestr().to_string(), shape.to_vec()));
                (f.name().to_string(), kind.short_name().to_string(), details)
            })
            .collect()
    }

    /// Sample `index` as `{name: value}` in raw form (the Python layer makes numpy arrays and
    /// parses JSON): ints, floats, bools, bytes, str (JSON, text); `(bytes, typestr, shape)` for
    /// arrays; `(bytes, height, width, channels)` for decoded images (raw payload bytes with
    /// `decode_images=False`, as `(bytes, 'jpg'|'raw', height, width)`).
    #[pyo3(signature = (index, decode_images = true))]
    fn get<'py>(&self, py: Python<'py>, index: i64, decode_images: bool) -> PyResult<Bound<'py, PyDict>> {
        let i = sample_index(index, self.inner.num_samples())?;
        if self.inner.is_remote() {
            // Its payloads fetched without the GIL (the handle keeps their blocks for the read
            // below); errors come from that read.
            let ds = Arc::clone(&self.inner);
            py.detach(|| (0..ds.fields().len()).for_each(|k| drop(ds.get(i, k))));
        }
        let fields = self.inner.fields().iter().map(|f| (f.name(), f.field_type()));
        sample_dict(py, decode_images, fields, |k, _, _| self.inner.get(i, k).map(Some).map_err(from_storage))
    }

    /// The data table's columns (all, or `columns`) as an Arrow C stream capsule.
    #[pyo3(signature = (columns = None))]
    fn table_stream<'py>(&self, py: Python<'py>, columns: Option<Vec<String>>) -> ArrowStream<'py> {
        let ds = Arc::clone(&self.inner);
        stream_capsule(py, || columns_batch(&Table::new(&ds), columns))
    }

    /// The values of `fields` (all when `None`) in `rows`, as an Arrow C stream capsule
    /// (`beton_query::take`).
    #[pyo3(signature = (rows, fields = None))]
    fn take_stream<'py>(
        &self,
        py: Python<'py>,
        rows: Vec<u64>,
        fields: Option<Vec<String>>,
    ) -> ArrowStream<'py> {
        let ds = Arc::clone(&self.inner);
        stream_capsule(py, || beton_query::take(&Table::new(&ds), &rows, fields.as_deref()))
    }

    /// The column names of the data table.
    fn column_names(&self) -> Vec<String> {
        Table::new(&self.inner).column_names().into_iter().map(String::from).collect()
    }

    /// `SELECT …` → an Arrow C stream capsule of the result.
    fn query_stream<'py>(&self, py: Python<'py>, sql: String) -> ArrowStream<'py> {
        let ds = Arc::clone(&self.inner);
        stream_capsule(py, || beton_query::query(&Table::new(&ds), &sql))
    }

    /// The row ids a predicate or `SELECT` matches.
    fn select(&self, py: Python<'_>, sql: String) -> PyResult<IndexSet> {
        let ds = Arc::clone(&self.inner);
        let set = py.detach(|| beton_query::select_indices(&Table::new(&ds), &sql)).map_err(from_query)?;
        Ok(IndexSet::of(set, self.source()))
    }

    /// The named splits, by name.
    fn splits(&self, py: Python<'_>) -> PyResult<BTreeMap<String, IndexSet>> {
        let ds = Arc::clone(&self.inner);
        Ok(py
            .detach(|| splits::all(&ds))
            .map_err(from_query)?
            .into_iter()
            .map(|(n, s)| (n, IndexSet::of(s, self.source())))
            .collect())
    }

    /// Named split `name`.
    fn split(&self, py: Python<'_>, name: &str) -> PyResult<IndexSet> {
        let ds = Arc::clone(&self.inner);
        Ok(IndexSet::of(py.detach(|| splits::get(&ds, name)).map_err(from_query)?, self.source()))
    }

    /// Adds or replaces named splits in the file, in one crash-safe update.
    fn save_splits(&self, py: Python<'_>, sets: BTreeMap<String, IndexSet>) -> PyResult<()> {
        let (path, opened) = (self.inner.path().to_path_buf(), self.inner.file_id());
        py.detach(|| splits::save(&path, opened, sets.iter().map(|(n, s)| (n.as_str(), &s.inner))))
            .map_err(from_query)
    }

    /// Removes named splits from the file, in one crash-safe update.
    fn remove_splits(&self, py: Python<'_>, names: Vec<String>) -> PyResult<()> {
        let (path, opened) = (self.inner.path().to_path_buf(), self.inner.file_id());
        py.detach(|| splits::remove(&path, opened, names.iter().map(String::as_str))).map_err(from_query)
    }

    /// The plan of `sql` (`beton explain`): a dict, with `text` as the CLI prints it.
    fn explain<'py>(&self, py: Python<'py>, sql: String) -> PyResult<Bound<'py, PyDict>> {
        let ds = Arc::clone(&self.inner);
        let e = py.detach(|| beton_query::explain::file(&ds, &sql)).map_err(from_query)?;
        explain_dict(py, e)
    }

    /// The class names stored in the file, or None.
    #[getter]
    fn classes(&self, py: Python<'_>) -> PyResult<Option<Vec<String>>> {
        let ds = Arc::clone(&self.inner);
        py.detach(|| ds.classes()).map_err(from_storage)
    }

    /// Stores class names in the file (None removes them), in one crash-safe update.
    fn save_classes(&self, py: Python<'_>, classes: Option<Vec<String>>) -> PyResult<()> {
        let (path, opened) = (self.inner.path().to_path_buf(), self.inner.file_id());
        py.detach(|| {
            beton_storage::save_classes(&path, opened, classes.as_deref())?;
            beton_query::columnar::refresh(&path);
            Ok(())
        })
        .map_err(from_storage)
    }

    /// Writes rows `rows` (all for None; any order, repeats allowed) of fields `fields` (all for
    /// None) to a new `.beton` file at `path`, every value as stored: images never re-encoded.
    /// The class names go with them. Returns the writer's report.
    #[pyo3(signature = (path, fields = None, rows = None, page_size = None, num_workers = 0))]
    fn copy_to<'py>(
        &self,
        py: Python<'py>,
        path: std::path::PathBuf,
        fields: Option<Vec<String>>,
        rows: Option<Vec<u64>>,
        page_size: Option<u64>,
        num_workers: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let ds = Arc::clone(&self.inner);
        let schema: Vec<_> =
            ds.fields().iter().map(|f| (f.name().to_string(), f.field_type().clone())).collect();
        let classes = ds.classes().map_err(from_storage)?;
        let options = beton_storage::WriterOptions {
            page_size: page_size.unwrap_or(ds.page_size()),
            num_threads: num_workers,
            ..beton_storage::WriterOptions::default()
        };
        copy_table(py, &Table::new(&ds), &schema, &path, fields, rows, classes.as_deref(), options)
    }

    /// A gallery of rows (`rows`: None, SQL, an IndexSet, a query result with `index`, or row
    /// numbers) with `options` (a dict: `by`, `n`, `columns`, `size`, `image`, `summaries`,
    /// `max_groups`, `title`): `Dataset.gallery` wraps it.
    #[pyo3(signature = (rows = None, options = None, progress = None))]
    fn gallery(
        &self,
        py: Python<'_>,
        rows: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<crate::gallery::Gallery> {
        crate::gallery::build(py, &self.source(), rows, options, progress)
    }

    /// The notebook card: `facts` (name, value) above a strip of `n` thumbnails.
    #[pyo3(signature = (facts, n = 8))]
    fn card_html(&self, py: Python<'_>, facts: Vec<(String, String)>, n: usize) -> PyResult<String> {
        crate::gallery::card(py, &self.source(), facts, n)
    }

    /// A query's result (an Arrow C stream) for a notebook: a table, and thumbnails when it
    /// has an `index` column.
    fn result_html(&self, py: Python<'_>, result: &Bound<'_, PyAny>) -> PyResult<String> {
        crate::gallery::result_html(py, &self.source(), result)
    }

    fn __repr__(&self) -> String {
        let names: Vec<&str> = self.inner.fields().iter().map(|f| f.name()).collect();
        format!(
            "Dataset('{}', {} samples, fields: {})",
            self.inner.path().display(),
            self.inner.num_samples(),
            names.join(", ")
        )
    }
}
