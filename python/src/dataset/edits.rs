//! The edits of a dataset directory's version, each committing a new version that the
//! `Dataset` object then shows; its log, tags, diff, export and cleanup. A `.beton` file has
//! none of them: each says how to make it a directory (`beton.import_file`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatchReader};
use beton_query::versioned::{Manifest, VersionRef, VersionedDataset};
use beton_query::SqlEdits;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{version_ref, Dataset};
use crate::errors::from_query;
use crate::index_set::IndexSet;

/// The version `at` names for this handle: a number (on its branch), a tag, or a branch's
/// name (its head; a tag of the same name wins).
fn resolve_ref(version: &VersionedDataset, at: &Bound<'_, PyAny>) -> PyResult<VersionedDataset> {
    let r = version_ref(Some(at))?;
    if let VersionRef::Tag(name) = &r {
        let tags = version.tags().map_err(from_query)?;
        if !tags.contains_key(name) {
            return version.on_branch(name, VersionRef::Latest).map_err(|e| {
                PyValueError::new_err(format!("{name:?} is neither a tag nor a branch of this dataset: {e}"))
            });
        }
    }
    version.open_at(r).map_err(from_query)
}

/// A manifest as a dict (`beton log`'s fields).
fn manifest_dict<'py>(py: Python<'py>, m: &Manifest) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", m.version)?;
    d.set_item("parent", m.parent)?;
    d.set_item("timestamp_ms", m.timestamp_ms)?;
    d.set_item("operation", m.operation.name())?;
    d.set_item("details", serde_json::to_string(&m.operation).unwrap_or_default())?;
    d.set_item("message", &m.message)?;
    let lines = m.lines.as_ref();
    d.set_item("branch", lines.and_then(|l| l.branch.clone()).unwrap_or_else(|| "main".into()))?;
    d.set_item("merged", lines.and_then(|l| l.merged.as_ref()).map(|p| (p.branch.clone(), p.version)))?;
    d.set_item("num_rows", m.num_rows())?;
    d.set_item("data_files", m.fragments.len())?;
    d.set_item(
        "deleted_rows",
        m.fragments.iter().map(|f| f.deletions.as_ref().map_or(0, |d| d.count)).sum::<u64>(),
    )?;
    Ok(d)
}

impl Dataset {
    /// Runs an edit on the current version without the GIL and shows its result; a `.beton`
    /// file's is refused, naming `beton.import_file`.
    pub(super) fn edit(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&VersionedDataset) -> beton_query::Result<VersionedDataset> + Send,
    ) -> PyResult<u64> {
        self.edit_in(py, |current, _| f(current))
    }

    /// [`Dataset::edit`] of an edit that reads the current version through its open view (its
    /// columnar copies and kept rows, opened already).
    pub(super) fn edit_in(
        &self,
        py: Python<'_>,
        f: impl FnOnce(
                &VersionedDataset,
                &beton_query::versioned::VersionView,
            ) -> beton_query::Result<VersionedDataset>
            + Send,
    ) -> PyResult<u64> {
        let (opened, current) = self.versioned()?;
        // The next version's view shares what this one has open (data files, columnar copies).
        let view = py
            .detach(|| f(&current, &opened).and_then(|next| next.view_after(&opened)))
            .map_err(from_query)?;
        let v = view.number();
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(view);
        Ok(v)
    }
}

/// A column-file array of `spec`'s type from Python values (what the field class's `encode`
/// gives, as the writer takes them): images encoded per the field's options.
pub(super) fn object_column(
    spec: &beton_storage::FieldSpec,
    objects: &[Bound<'_, PyAny>],
) -> PyResult<ArrayRef> {
    let mut b = beton_query::versioned::values::ValuesBuilder::new(&spec.ty);
    for (i, obj) in objects.iter().enumerate() {
        let value = crate::fields::sample_value(&spec.ty, obj)
            .map_err(|e| PyValueError::new_err(format!("value {i} for '{}': {e}", spec.name)))?;
        b.encode(value, &spec.image, 0.0)
            .map_err(|e| PyValueError::new_err(format!("value {i} for '{}': {e}", spec.name)))?;
    }
    Ok(b.finish())
}

/// One Arrow column from an object with `__arrow_c_stream__` (a one-column table).
fn one_column(values: &Bound<'_, PyAny>) -> PyResult<ArrayRef> {
    let reader = crate::arrow_write::import_stream(values)?;
    let schema = reader.schema();
    let batches: Vec<_> =
        reader.collect::<Result<_, _>>().map_err(|e| PyValueError::new_err(e.to_string()))?;
    let batch = arrow_select::concat::concat_batches(&schema, &batches)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    if batch.num_columns() != 1 {
        return Err(PyValueError::new_err(format!(
            "values: expected one column, got {}",
            batch.num_columns()
        )));
    }
    Ok(batch.column(0).clone())
}

#[pymethods]
impl Dataset {
    /// Every committed version's log entry on this handle's branch (or on `branch`), oldest
    /// first.
    #[pyo3(signature = (branch = None))]
    fn versions<'py>(&self, py: Python<'py>, branch: Option<String>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let (_, version) = self.versioned()?;
        let all = py
            .detach(|| match &branch {
                None => version.versions(),
                Some(b) => version.on_branch(b, VersionRef::Latest)?.versions(),
            })
            .map_err(from_query)?;
        all.iter().map(|m| manifest_dict(py, m)).collect()
    }

    /// `{tag: version}`.
    fn tags(&self, py: Python<'_>) -> PyResult<BTreeMap<String, u64>> {
        let (_, version) = self.versioned()?;
        py.detach(|| version.tags()).map_err(from_query)
    }

    /// Names this version.
    fn tag(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let (_, version) = self.versioned()?;
        py.detach(|| version.tag(name)).map_err(from_query)
    }

    /// Deletes a tag; returns the version it named.
    fn delete_tag(&self, py: Python<'_>, name: &str) -> PyResult<u64> {
        let (_, version) = self.versioned()?;
        py.detach(|| version.delete_tag(name)).map_err(from_query)
    }

    /// Deletes rows (a SQL predicate or an IndexSet of indices); returns the new version.
    #[pyo3(signature = (sql = None, rows = None, message = String::new()))]
    fn delete(
        &self,
        py: Python<'_>,
        sql: Option<String>,
        rows: Option<IndexSet>,
        message: String,
    ) -> PyResult<u64> {
        match (sql, rows) {
            (Some(sql), None) => self.edit_in(py, |v, view| v.delete_where_in(view, &sql, &message)),
            (None, Some(rows)) => self.edit(py, |v| v.delete(&rows.inner, None, &message)),
            _ => Err(PyValueError::new_err("delete takes a SQL predicate or an IndexSet, one of them")),
        }
    }

    /// Sets fields to SQL expressions on the rows a predicate picks (all for None).
    #[pyo3(signature = (set, sql = None, message = String::new()))]
    fn update(
        &self,
        py: Python<'_>,
        set: Vec<(String, String)>,
        sql: Option<String>,
        message: String,
    ) -> PyResult<u64> {
        self.edit_in(py, |v, view| v.update_in(view, sql.as_deref(), &set, &message))
    }

    /// Sets field values of rows `rows`: `values` maps a field to a one-column Arrow stream,
    /// `objects` a field to a list of Python values as its field class encodes them, written
    /// with `fields[name]` (a `beton._native.Field`: an image field's options; default, the
    /// field type's defaults).
    #[pyo3(signature = (rows, values, objects = None, fields = None, message = String::new()))]
    fn update_rows(
        &self,
        py: Python<'_>,
        rows: IndexSet,
        values: Bound<'_, PyDict>,
        objects: Option<Bound<'_, PyDict>>,
        fields: Option<Bound<'_, PyDict>>,
        message: String,
    ) -> PyResult<u64> {
        let mut columns = Vec::new();
        for (name, v) in values.iter() {
            columns.push((name.extract::<String>()?, one_column(&v)?));
        }
        let schema = self.versioned()?.0.schema().map_err(from_query)?;
        for (name, objs) in objects.iter().flat_map(|d| d.iter()) {
            let name: String = name.extract()?;
            let objs: Vec<Bound<'_, PyAny>> = objs.extract()?;
            let ty = schema
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| t.clone())
                .ok_or_else(|| PyValueError::new_err(format!("no field '{name}' in this version")))?;
            let mut spec = beton_storage::FieldSpec::new(name.clone(), ty.clone());
            if let Some(field) = fields.as_ref().map(|f| f.get_item(&name)).transpose()?.flatten() {
                let field = field.cast::<crate::fields::Field>().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "fields['{name}'] is not a field type (beton._native.Field)"
                    ))
                })?;
                spec.image = field.get().spec(name.clone()).image;
            }
            columns.push((name.clone(), object_column(&spec, &objs)?));
        }
        self.edit(py, |v| v.update_rows(&rows.inner, columns, &message))
    }

    /// Adds a field: `sql` computes it per row, `values` (a one-column Arrow stream) gives it
    /// (of type `field`, an int, float, bool or text `beton._native.Field`; from the values
    /// when None), or `objects` (Python values as the field class encodes them) of type
    /// `field`, any field type.
    #[pyo3(signature = (name, sql = None, values = None, objects = None, field = None, message = String::new()))]
    #[allow(clippy::too_many_arguments)]
    fn add_column(
        &self,
        py: Python<'_>,
        name: String,
        sql: Option<String>,
        values: Option<Bound<'_, PyAny>>,
        objects: Option<Vec<Bound<'_, PyAny>>>,
        field: Option<PyRef<'_, crate::fields::Field>>,
        message: String,
    ) -> PyResult<u64> {
        let spec = field.map(|f| f.spec(name.clone()));
        match (sql, values, objects) {
            (None, None, Some(objects)) => {
                let spec =
                    spec.ok_or_else(|| PyValueError::new_err("add_column of objects needs a field type"))?;
                let array = object_column(&spec, &objects)?;
                self.edit(py, |v| v.add_column(&name, &spec.ty, &array, &message))
            }
            (Some(sql), None, None) => self.edit(py, |v| v.add_column_sql(&name, &sql, &message)),
            (None, Some(values), None) => {
                let array = one_column(&values)?;
                let ty = match spec {
                    Some(spec) => spec.ty,
                    None => match array.data_type() {
                        arrow_schema::DataType::Boolean => beton_storage::FieldType::Bool,
                        t if t.is_floating() => beton_storage::FieldType::Float,
                        t if t.is_integer() => beton_storage::FieldType::Int,
                        arrow_schema::DataType::Utf8
                        | arrow_schema::DataType::LargeUtf8
                        | arrow_schema::DataType::Utf8View => beton_storage::FieldType::Text,
                        other => {
                            return Err(PyValueError::new_err(format!(
                                "column '{name}': {other} values; a column holds int, float, bool or text"
                            )))
                        }
                    },
                };
                self.edit(py, |v| v.add_column(&name, &ty, &array, &message))
            }
            _ => Err(PyValueError::new_err(
                "add_column takes a SQL expression, values or objects, one of them",
            )),
        }
    }

    /// Removes a field from the schema.
    #[pyo3(signature = (name, message = String::new()))]
    fn drop_column(&self, py: Python<'_>, name: String, message: String) -> PyResult<u64> {
        self.edit(py, |v| v.drop_column(&name, &message))
    }

    /// Adds the rows of a `.beton` file (hard-linked, never re-encoded).
    #[pyo3(signature = (file, message = String::new()))]
    fn append_file(&self, py: Python<'_>, file: PathBuf, message: String) -> PyResult<u64> {
        self.edit(py, |v| v.append_file(&file, &message))
    }

    /// Appends the images of the ImageFolder `root`, labelled by class name (new classes added
    /// at the end of the class names), with their paths relative to `root` when the schema has
    /// a text field `path_field` (`VersionedDataset::append_imagefolder`). `field` (a
    /// `beton._native.Field`) gives the image options; `progress(done, total)` counts images.
    /// Returns the report: `num_samples`, `skipped`, `added_classes`, `classes`, `with_path`.
    #[pyo3(signature = (root, image_field = "image".to_string(), label_field = "label".to_string(),
                        path_field = "path".to_string(), field = None, num_workers = 0, skip_bad = false,
                        message = String::new(), progress = None, alpha_background = None))]
    #[allow(clippy::too_many_arguments)]
    fn append_imagefolder<'py>(
        &self,
        py: Python<'py>,
        root: PathBuf,
        image_field: String,
        label_field: String,
        path_field: String,
        field: Option<PyRef<'_, crate::fields::Field>>,
        num_workers: usize,
        skip_bad: bool,
        message: String,
        progress: Option<Py<PyAny>>,
        alpha_background: Option<(u8, u8, u8)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (export, interrupted) = crate::progress::export_options(num_workers, progress);
        let mut image: beton_storage::ImageOptions =
            field.map(|f| f.spec(image_field.clone()).image).unwrap_or_default();
        image.alpha_background = alpha_background.map(|(r, g, b)| [r, g, b]);
        let options = beton_query::versioned::ImageFolderOptions {
            image,
            image_field,
            label_field,
            path_field,
            writer: beton_storage::WriterOptions {
                num_threads: num_workers,
                progress: export.progress,
                skip_bad,
                ..Default::default()
            },
        };
        let mut report = None;
        self.edit(py, |v| {
            let (next, r) = v.append_imagefolder(&root, &options, &message)?;
            report = Some(r);
            Ok(next)
        })
        .map_err(|e| crate::progress::error(&interrupted, e))?;
        let r = report.expect("set by a successful append");
        let out = PyDict::new(py);
        out.set_item("num_samples", r.write.num_samples)?;
        let skipped: Vec<(u64, String)> = r.write.skipped.clone();
        out.set_item("skipped", skipped)?;
        out.set_item("added_classes", r.added_classes)?;
        out.set_item("classes", r.classes)?;
        out.set_item("with_path", r.with_path)?;
        crate::writer::warn_alpha_dropped(py, &r.write)?;
        out.set_item("alpha_flattened", r.write.alpha_flattened)?;
        out.set_item("alpha_flattening", r.write.alpha_flattening.clone())?;
        Ok(out)
    }

    /// Sets the class names (the current ones with names added at the end), as a new version;
    /// returns its number (this version's when the list is unchanged).
    #[pyo3(signature = (classes, message = String::new()))]
    fn set_classes(&self, py: Python<'_>, classes: Vec<String>, message: String) -> PyResult<u64> {
        self.edit(py, |v| v.set_classes(&classes, &message))
    }

    /// Renames class `old` to `new`, as a new version.
    #[pyo3(signature = (old, new, message = String::new()))]
    fn rename_class(&self, py: Python<'_>, old: String, new: String, message: String) -> PyResult<u64> {
        self.edit(py, |v| v.rename_class(&old, &new, &message))
    }

    /// Makes version `version` the latest again, as a new version.
    fn restore(&self, py: Python<'_>, version: u64) -> PyResult<u64> {
        self.edit(py, |v| v.restore(version))
    }

    /// Folds data files, deletions and column files into one new data file;
    /// `progress(done, total)` counts the rows written (an exception it raises stops the
    /// compaction, which then commits nothing, and propagates).
    #[pyo3(signature = (num_workers = 0, message = String::new(), progress = None))]
    fn compact(
        &self,
        py: Python<'_>,
        num_workers: usize,
        message: String,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<u64> {
        let (options, interrupted) = crate::progress::export_options(num_workers, progress);
        self.edit(py, |v| v.compact(&options, &message)).map_err(|e| crate::progress::error(&interrupted, e))
    }

    /// Removes old versions and unreferenced files: `(versions, files, bytes)` removed.
    #[pyo3(signature = (keep_versions = 1, grace_seconds = 3600.0))]
    fn cleanup(
        &self,
        py: Python<'_>,
        keep_versions: usize,
        grace_seconds: f64,
    ) -> PyResult<(Vec<u64>, Vec<String>, u64)> {
        let (_, version) = self.versioned()?;
        let grace = std::time::Duration::try_from_secs_f64(grace_seconds)
            .map_err(|e| PyValueError::new_err(format!("grace_seconds: {e}")))?;
        let r = py.detach(|| version.cleanup(keep_versions, grace)).map_err(from_query)?;
        Ok((r.versions, r.files, r.bytes))
    }

    /// Writes rows (all, or an IndexSet of indices) as one standalone `.beton` file FFCV loads;
    /// `progress(done, total)` counts the rows written (an exception it raises stops the
    /// export, which then leaves nothing at `path`, and propagates).
    /// `fields`: the fields written, in that order (all for `None`). Returns the rows written and
    /// the NULLs written as fillers: `[(field, filler, rows)]`.
    #[pyo3(signature = (path, rows = None, num_workers = 0, progress = None, fields = None))]
    fn export(
        &self,
        py: Python<'_>,
        path: PathBuf,
        rows: Option<IndexSet>,
        num_workers: usize,
        progress: Option<Py<PyAny>>,
        fields: Option<Vec<String>>,
    ) -> PyResult<(u64, crate::writer::FilledRows)> {
        let (_, version) = self.versioned()?;
        let (options, interrupted) = crate::progress::export_options(num_workers, progress);
        let copied = py
            .detach(|| {
                version.export_fields(&path, rows.as_ref().map(|r| &r.inner), fields.as_deref(), &options)
            })
            .map_err(|e| crate::progress::error(&interrupted, from_query(e)))?;
        Ok((copied.report.num_samples, crate::writer::filled(&copied.filled)))
    }

    /// What changed from version `a` to version `b` (numbers or tags; default: this version's
    /// parent to this version): a dict of `from`, `to`, `added` and `deleted` row ids,
    /// `added_columns`, `dropped_columns` and `changed` (column → row ids).
    #[pyo3(signature = (a = None, b = None))]
    fn diff<'py>(
        &self,
        py: Python<'py>,
        a: Option<&Bound<'_, PyAny>>,
        b: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (_, version) = self.versioned()?;
        let vb = match b {
            None => version.clone(),
            Some(b) => resolve_ref(&version, b)?,
        };
        let va = match a {
            Some(a) => resolve_ref(&version, a)?,
            None => match vb.manifest().parent {
                Some(p) => version.open_at(VersionRef::Number(p)).map_err(from_query)?,
                None => vb.clone(),
            },
        };
        let d = py.detach(|| beton_query::versioned::diff(&va, &vb)).map_err(from_query)?;
        let out = PyDict::new(py);
        set_fields!(out, d; from, to, added, deleted, added_columns, dropped_columns, changed);
        Ok(out)
    }

    /// The gallery of the rows that differ from `a` to `b` (as `diff` names them): changed rows
    /// before beside after, their differing cells highlighted; added and deleted rows.
    /// `rows` narrows them (SQL applies to each version; an index set or row numbers are rows
    /// of `b`); `options` and `progress` as `gallery`'s.
    #[pyo3(signature = (a, b, rows = None, options = None, progress = None))]
    fn diff_gallery(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        rows: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<crate::gallery::Gallery> {
        let (_, version) = self.versioned()?;
        let (va, vb) = (resolve_ref(&version, a)?, resolve_ref(&version, b)?);
        let name = |at: &Bound<'_, PyAny>| -> PyResult<String> {
            Ok(match at.extract::<u64>() {
                Ok(n) => format!("v{n}"),
                Err(_) => at.str()?.to_string(),
            })
        };
        crate::gallery::build_diff(py, (&va, &vb), (name(a)?, name(b)?), rows, options, progress)
    }
}
