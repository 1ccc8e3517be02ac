//! A dataset directory's branches: start one, list and delete them, merge one into this
//! handle's branch (beton-dataset's `versioned::branch` and `versioned::merge`).

use std::sync::{Arc, Mutex};

use beton_query::versioned::merge::{MergeOptions, MergeReport, Resolution, Strategy, Take};
use beton_query::versioned::{VersionRef, VersionedDataset};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::Dataset;
use crate::errors::from_query;

/// A resolution as Python gives it: `(row_id, column, take, value)`, `take` being `ours`,
/// `theirs` or `value` (then `value` is the cell's, as the field's Python values go; `None` is
/// NULL).
type PyResolution<'py> = (Option<u64>, Option<String>, String, Option<Bound<'py, PyAny>>);

/// `strategy` by name.
fn strategy(name: &str) -> PyResult<Strategy> {
    match name {
        "fail" => Ok(Strategy::Fail),
        "ours" => Ok(Strategy::Ours),
        "theirs" => Ok(Strategy::Theirs),
        other => {
            Err(PyValueError::new_err(format!("strategy {other:?}: expected 'fail', 'ours' or 'theirs'")))
        }
    }
}

/// A merge's report as a dict.
fn report_dict<'py>(py: Python<'py>, r: &MergeReport, version: u64) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", version)?;
    d.set_item("committed", r.committed)?;
    d.set_item("base", (r.base.0.clone(), r.base.1))?;
    d.set_item("theirs", r.theirs)?;
    d.set_item("rows_added", r.rows_added)?;
    d.set_item("rows_deleted", r.rows_deleted)?;
    d.set_item("cells_set", r.cells_set)?;
    let resolved: Vec<_> = r.resolved.iter().map(crate::errors::conflict_tuple).collect();
    d.set_item("resolved", resolved)?;
    Ok(d)
}

impl Dataset {
    /// The version being read, of a dataset directory (the error of a `.beton` file).
    fn directory(&self) -> PyResult<VersionedDataset> {
        Ok(self.versioned()?.1)
    }
}

#[pymethods]
impl Dataset {
    /// The branch this version is on: `main`, a branch's name; None for a `.beton` file.
    #[getter]
    fn branch_name(&self) -> Option<String> {
        self.opened().version().map(|v| v.branch_name().to_string())
    }

    /// Starts branch `name` at version `version` of this handle's branch (this version for
    /// None); returns a handle on the new branch.
    #[pyo3(signature = (name, version = None))]
    fn branch(&self, py: Python<'_>, name: String, version: Option<u64>) -> PyResult<Dataset> {
        let v = self.directory()?;
        let view =
            py.detach(|| v.create_branch(&name, version).and_then(|b| b.view())).map_err(from_query)?;
        Ok(Dataset::of(view))
    }

    /// The branches, main first: `[{name, head, start: (branch, version) | None, created_ms,
    /// line}]`.
    fn branches<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let v = self.directory()?;
        let all = py.detach(|| v.branches()).map_err(from_query)?;
        all.iter()
            .map(|b| {
                let d = PyDict::new(py);
                d.set_item("name", &b.name)?;
                d.set_item("head", b.head)?;
                d.set_item("start", b.start.clone())?;
                d.set_item("created_ms", b.created_ms)?;
                d.set_item("line", &b.line)?;
                Ok(d)
            })
            .collect()
    }

    /// Deletes branch `name` (its name; `cleanup` removes its versions); returns its head.
    fn delete_branch(&self, py: Python<'_>, name: String) -> PyResult<u64> {
        let v = self.directory()?;
        py.detach(|| v.delete_branch(&name)).map_err(from_query)
    }

    /// The latest version of branch `name` of the same dataset, as a new handle.
    #[pyo3(signature = (name, version = None))]
    fn on_branch(&self, py: Python<'_>, name: String, version: Option<u64>) -> PyResult<Dataset> {
        let v = self.directory()?;
        let at = version.map_or(VersionRef::Latest, VersionRef::Number);
        let view = py.detach(|| v.on_branch(&name, at).and_then(|b| b.view())).map_err(from_query)?;
        Ok(Dataset::of(view))
    }

    /// Merges the head of branch `source` into this handle's branch; this object then shows
    /// the merged version. `resolve`: `[(row_id, column, take, value)]`. Returns the report.
    #[pyo3(signature = (source, message = String::new(), strategy_name = "fail".to_string(), resolve = None))]
    fn merge<'py>(
        &self,
        py: Python<'py>,
        source: String,
        message: String,
        strategy_name: String,
        resolve: Option<Vec<PyResolution<'py>>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (opened, _) = self.versioned()?;
        let schema = opened.schema().map_err(from_query)?;
        let mut resolutions = Vec::new();
        for (k, (row_id, column, take, value)) in resolve.unwrap_or_default().into_iter().enumerate() {
            let take = match (take.as_str(), value) {
                ("ours", _) => Take::Ours,
                ("theirs", _) => Take::Theirs,
                ("value", value) => {
                    let name = column.clone().ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "resolve[{k}]: a value resolves a cell: give its column"
                        ))
                    })?;
                    let ty =
                        schema.iter().find(|(n, _)| *n == name).map(|(_, t)| t.clone()).ok_or_else(|| {
                            PyValueError::new_err(format!("resolve[{k}]: no column '{name}' on this branch"))
                        })?;
                    let array = match value.filter(|v| !v.is_none()) {
                        None => arrow_array::new_null_array(
                            &beton_query::versioned::values::column_file_type(&ty),
                            1,
                        ),
                        Some(v) => {
                            let spec = beton_storage::FieldSpec::new(name.clone(), ty);
                            super::edits::object_column(&spec, &[v])
                                .map_err(|e| PyValueError::new_err(format!("resolve[{k}]: {e}")))?
                        }
                    };
                    Take::Value(array)
                }
                (other, _) => {
                    return Err(PyValueError::new_err(format!(
                        "resolve[{k}]: take {other:?}: expected 'ours', 'theirs' or a value"
                    )))
                }
            };
            resolutions.push(Resolution { row_id, column, take });
        }
        let options = MergeOptions { strategy: strategy(&strategy_name)?, resolve: resolutions };
        let report: Arc<Mutex<Option<MergeReport>>> = Arc::default();
        let out = Arc::clone(&report);
        let version = self.edit_in(py, move |current, _| {
            let (merged, r) = current.merge(&source, &message, &options)?;
            *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            Ok(merged)
        })?;
        let r = report.lock().unwrap_or_else(|e| e.into_inner()).take().expect("the merge reported");
        report_dict(py, &r, version)
    }
}
