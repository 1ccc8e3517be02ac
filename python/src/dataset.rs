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

/// An open, validated `.beton` file.
#[pyclass(module = "beton._native", frozen)]
pub struct Dataset {
    pub(crate) inner: Arc<beton_storage::Dataset>,
}

/// A record batch as an `arrow_array_stream` PyCapsule (the Arrow C stream interface).
pub(crate) fn stream_capsule(py: Python<'_>, batch: RecordBatch) -> PyResult<Bound<'_, PyCapsule>> {
    let schema = batch.schema();
    let reader = RecordBatchIterator::new([Ok(batch)], schema);
    let stream = FFI_ArrowArrayStream::new(Box::new(reader));
    PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
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

    #[getter]
    fn path(&self) -> std::path::PathBuf {
        self.inner.path().to_path_buf()
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
        let n = self.inner.num_samples() as i64;
        let i = if index < 0 { index + n } else { index };
        if !(0..n).contains(&i) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!("sample {index} of {n}")));
        }
        let out = PyDict::new(py);
        for (k, f) in self.inner.fields().iter().enumerate() {
            let value = self.inner.get(i as u64, k).map_err(from_storage)?;
            let obj = value_object(py, value, f.field_type(), decode_images)?;
            out.set_item(f.name(), obj)?;
        }
        Ok(out)
    }

    /// The data table's columns (all, or `columns`) as an Arrow C stream capsule.
    #[pyo3(signature = (columns = None))]
    fn table_stream<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let ds = Arc::clone(&self.inner);
        let batch = py
            .detach(|| {
                let table = Table::new(&ds);
                columns_batch(&table, columns)
            })
            .map_err(from_query)?;
        stream_capsule(py, batch)
    }

    /// The column names of the data table.
    fn column_names(&self) -> Vec<String> {
        Table::new(&self.inner).column_names().into_iter().map(String::from).collect()
    }

    /// `SELECT …` → an Arrow C stream capsule of the result.
    fn query_stream<'py>(&self, py: Python<'py>, sql: String) -> PyResult<Bound<'py, PyCapsule>> {
        let ds = Arc::clone(&self.inner);
        let batch = py.detach(|| beton_query::query(&Table::new(&ds), &sql)).map_err(from_query)?;
        stream_capsule(py, batch)
    }

    /// The row ids a predicate or `SELECT` matches.
    fn select(&self, py: Python<'_>, sql: String) -> PyResult<IndexSet> {
        let ds = Arc::clone(&self.inner);
        let set = py.detach(|| beton_query::select_indices(&Table::new(&ds), &sql)).map_err(from_query)?;
        Ok(IndexSet::wrap(set))
    }

    /// The named splits, by name.
    fn splits(&self) -> PyResult<BTreeMap<String, IndexSet>> {
        Ok(splits::all(&self.inner)
            .map_err(from_query)?
            .into_iter()
            .map(|(n, s)| (n, IndexSet::wrap(s)))
            .collect())
    }

    /// Named split `name`.
    fn split(&self, name: &str) -> PyResult<IndexSet> {
        Ok(IndexSet::wrap(splits::get(&self.inner, name).map_err(from_query)?))
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
