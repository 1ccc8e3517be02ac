//! `Dataset`: one class for every dataset — a `.beton` file (a read-only dataset of one data
//! file at version 0) or a version of a dataset directory — over one Rust type,
//! [`VersionView`]: its fields, one sample's values, the table as an Arrow C stream, SQL, named
//! splits, explain and galleries here; the edits of a dataset directory, each committing a new
//! version that the object then shows, in [`edits`].

mod branches;
mod convert;
mod edits;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use beton_query::versioned::{VersionRef, VersionView, VersionedDataset};
use beton_storage::OpenOptions;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

pub(crate) use convert::{
    columns_batch, copy_table, explain_dict, sample_dict, sample_index, stream_capsule, ArrowStream,
};

use crate::errors::{from_query, from_storage};
use crate::index_set::IndexSet;
use crate::source::Source;

/// (name, type, (dtype, shape) of arrays).
type FieldInfo = (String, String, Option<(String, Vec<u64>)>);

/// An open dataset: a `.beton` file, or a version of a dataset directory that edits move on.
#[pyclass(module = "beton._native", frozen)]
pub struct Dataset {
    pub(crate) state: RwLock<Arc<VersionView>>,
}

/// Which version `version` names: a number, a tag, or the latest for `None`.
fn version_ref(version: Option<&Bound<'_, PyAny>>) -> PyResult<VersionRef> {
    Ok(match version {
        None => VersionRef::Latest,
        Some(v) => match v.extract::<u64>() {
            Ok(n) => VersionRef::Number(n),
            Err(_) => VersionRef::Tag(v.extract::<String>()?),
        },
    })
}

/// The error of an edit asked of a `.beton` file: it says how to make the file a dataset.
fn read_only(view: &VersionView) -> PyErr {
    let path = view.file().map(|d| d.path().display().to_string()).unwrap_or_default();
    PyValueError::new_err(format!(
        "{path} is a .beton file, which is read-only: make it a dataset directory to edit it, \
         with beton.import_file(DIR, '{path}') (its rows are hard-linked, not copied)"
    ))
}

impl Dataset {
    fn of(view: VersionView) -> Dataset {
        Dataset { state: RwLock::new(Arc::new(view)) }
    }

    /// The dataset as open now (an edit moves it to the version it commits).
    pub(crate) fn opened(&self) -> Arc<VersionView> {
        Arc::clone(&self.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The version being read, or the read-only error of a `.beton` file.
    fn versioned(&self) -> PyResult<(Arc<VersionView>, VersionedDataset)> {
        let opened = self.opened();
        let version = opened.version().cloned().ok_or_else(|| read_only(&opened))?;
        Ok((opened, version))
    }

    /// A `.beton` file's path and identity (for its in-place metadata updates), or the error of
    /// a dataset directory's version naming `what` it cannot do in place and what does it
    /// instead.
    fn file(&self, what: &str, instead: &str) -> PyResult<(PathBuf, Option<beton_storage::FileId>)> {
        let opened = self.opened();
        let file = opened.file().map(|d| (d.path().to_path_buf(), d.file_id()));
        match file {
            Some(file) => Ok(file),
            None => Err(PyValueError::new_err(format!(
                "{what} is for a .beton file; a version of a dataset directory does it as a new version: {instead}"
            ))),
        }
    }

    /// Whether reads fetch from object storage.
    fn remote(view: &VersionView) -> bool {
        // A version's data files are remote exactly when its store is.
        view.file().is_some_and(|d| d.is_remote())
            || view.version().is_some_and(|v| v.store().url().is_some())
    }

    /// This dataset, as the source of the index sets it makes.
    fn source(&self) -> Source {
        Source(self.opened())
    }
}

/// A dataset directory (a local folder, or a URL with a version) rather than a `.beton` file.
fn is_directory(path: &Path) -> PyResult<bool> {
    Ok(path.is_dir() || VersionedDataset::probe(path).map_err(from_query)?)
}

#[pymethods]
impl Dataset {
    /// Opens `path`: a `.beton` file (validated; its allocation table on first payload read;
    /// `custom` maps a foreign custom field's name to its row layout `(size, align)`), or version
    /// `version` (a number, a tag, or None for the latest) of the dataset directory there.
    #[new]
    #[pyo3(signature = (path, version = None, custom = None, branch = None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        version: Option<&Bound<'_, PyAny>>,
        custom: Option<BTreeMap<String, (usize, usize)>>,
        branch: Option<String>,
    ) -> PyResult<Self> {
        let at = version_ref(version)?;
        if py.detach(|| is_directory(&path))? {
            let view = py.detach(|| {
                match &branch {
                    None => VersionedDataset::open(&path, at),
                    Some(b) => VersionedDataset::open_branch(&path, b, at),
                }
                .and_then(|v| v.view())
            });
            return Ok(Dataset::of(view.map_err(from_query)?));
        }
        if let Some(b) = &branch {
            return Err(PyValueError::new_err(format!(
                "{}: a .beton file has no branches (branch {b:?}); branches are a dataset directory's \
                 (beton.import_file)",
                path.display()
            )));
        }
        if version.is_some() && at != VersionRef::Number(0) {
            return Err(PyValueError::new_err(format!(
                "{}: a .beton file has one version, 0; versions are a dataset directory's (beton.import_file)",
                path.display()
            )));
        }
        // The allocation table is checked on first payload read, so opening a file to query its
        // data table costs O(fields), not O(payloads).
        let mut options = OpenOptions::new().defer_allocation_checks(true);
        for (name, (size, align)) in custom.unwrap_or_default() {
            options = options.custom_layout(&name, size, align);
        }
        let ds = py.detach(|| options.open(&path)).map_err(from_storage)?;
        Ok(Dataset::of(VersionView::of_file(Arc::new(ds))))
    }

    /// Makes `dir` a dataset whose version 1 is the `.beton` file `file` (hard-linked).
    #[staticmethod]
    fn import_file(py: Python<'_>, dir: PathBuf, file: PathBuf) -> PyResult<Self> {
        let view = py.detach(|| VersionedDataset::import(&dir, &file).and_then(|v| v.view()));
        Ok(Dataset::of(view.map_err(from_query)?))
    }

    /// A new dataset `dir` of the rows of `sources` in order (`.beton` files hard-linked,
    /// dataset directories' latest versions exported once); `progress(done, total)` counts
    /// their rows (an exception it raises stops the concat and propagates).
    #[staticmethod]
    #[pyo3(signature = (dir, sources, message = String::new(), progress = None))]
    fn concat(
        py: Python<'_>,
        dir: PathBuf,
        sources: Vec<PathBuf>,
        message: String,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let (options, interrupted) = crate::progress::export_options(0, progress);
        let view = py
            .detach(|| VersionedDataset::concat(&dir, &sources, &message, &options).and_then(|v| v.view()))
            .map_err(|e| crate::progress::error(&interrupted, from_query(e)))?;
        Ok(Dataset::of(view))
    }

    /// `files` (`.beton` files written apart) as one new version of the dataset `dir`: its
    /// version 1 when new, else appended (`VersionedDataset::commit_files`).
    #[staticmethod]
    #[pyo3(signature = (dir, files, message = String::new()))]
    fn commit_files(py: Python<'_>, dir: PathBuf, files: Vec<PathBuf>, message: String) -> PyResult<Self> {
        let view =
            py.detach(|| VersionedDataset::commit_files(&dir, &files, &message).and_then(|v| v.view()));
        Ok(Dataset::of(view.map_err(from_query)?))
    }

    /// True when `path` is a dataset directory. For a URL, one listing of its `_versions/`
    /// (without the GIL), whose refusal or unreachable store raises, naming the listing.
    #[staticmethod]
    fn is_dataset_dir(py: Python<'_>, path: PathBuf) -> PyResult<bool> {
        py.detach(|| VersionedDataset::probe(&path)).map_err(from_query)
    }

    /// True for a `.beton` file (read-only, version 0), false for a dataset directory's version.
    #[getter]
    fn is_file(&self) -> bool {
        self.opened().is_file()
    }

    /// The file's or directory's path (`pathlib.Path`), or its URL (`str`) on object storage
    /// (a directory's local mirror is hidden).
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let opened = self.opened();
        let (path, url) = match opened.version() {
            Some(v) => (v.dir().to_path_buf(), v.store().url().map(str::to_string)),
            None => {
                let ds = opened.file().expect("a file view has its data file");
                (ds.path().to_path_buf(), ds.is_remote().then(|| ds.path().to_string_lossy().into_owned()))
            }
        };
        match url {
            Some(url) => Ok(pyo3::types::PyString::new(py, &url).into_any()),
            None => Ok(path.into_pyobject(py)?.into_any()),
        }
    }

    /// This version's number (0 for a `.beton` file).
    #[getter]
    fn version(&self) -> u64 {
        self.opened().number()
    }

    fn __len__(&self) -> usize {
        self.opened().num_rows() as usize
    }

    /// The page size of the data files (the largest, over several).
    #[getter]
    fn page_size(&self) -> PyResult<u64> {
        Ok(self.opened().datasets().map_err(from_query)?.iter().map(|d| d.page_size()).max().unwrap_or(0))
    }

    /// Heap pages of the data files, together.
    #[getter]
    fn num_pages(&self) -> PyResult<u64> {
        Ok(self.opened().datasets().map_err(from_query)?.iter().map(|d| d.num_pages()).sum())
    }

    /// `[(name, type, details)]`: details is the dtype and shape of arrays, else None.
    fn fields(&self) -> PyResult<Vec<FieldInfo>> {
        let schema = self.opened().schema().map_err(from_query)?;
        Ok(schema
            .iter()
            .map(|(name, ty)| {
                let kind = ty.kind();
                let details = kind.element().map(|(d, s)| (d.typestr().to_string(), s.to_vec()));
                (name.clone(), kind.short_name().to_string(), details)
            })
            .collect())
    }

    /// Sample `index` as `{name: value}` in raw form (the Python layer makes numpy arrays and
    /// parses JSON): ints, floats, bools, bytes, str (JSON, text); `(bytes, typestr, shape)` for
    /// arrays; `(bytes, height, width, channels)` for decoded images (raw payload bytes with
    /// `decode_images=False`, as `(bytes, 'jpg'|'raw', height, width)`); None for a NULL. Each
    /// value from its column file where one holds it, else from its data file.
    #[pyo3(signature = (index, decode_images = true))]
    fn get<'py>(&self, py: Python<'py>, index: i64, decode_images: bool) -> PyResult<Bound<'py, PyDict>> {
        let opened = self.opened();
        let i = sample_index(index, opened.num_rows())?;
        let schema = opened.fields();
        // Column files read once per version, without the GIL (from the store on object storage).
        py.detach(|| opened.load_columns()).map_err(from_query)?;
        if Self::remote(&opened) {
            // Its payloads fetched without the GIL (the view and the data
            // files' handles keep them for the read below); errors come from that read.
            py.detach(|| schema.iter().for_each(|(name, ty)| drop(opened.value(i, name, ty))));
        }
        let fields = schema.iter().map(|(name, ty)| (name.as_str(), ty));
        sample_dict(py, decode_images, fields, |_, name, ty| opened.value(i, name, ty).map_err(from_query))
    }

    /// The table's columns (all, or `columns`) as an Arrow C stream capsule.
    #[pyo3(signature = (columns = None))]
    fn table_stream<'py>(&self, py: Python<'py>, columns: Option<Vec<String>>) -> ArrowStream<'py> {
        let opened = self.opened();
        stream_capsule(py, || columns_batch(&opened.table()?, columns))
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
        let opened = self.opened();
        stream_capsule(py, || beton_query::take(&opened.table()?, &rows, fields.as_deref()))
    }

    /// The rows each data file gives this version, in index order.
    fn data_file_rows(&self) -> Vec<u64> {
        self.opened().data_file_rows()
    }

    /// The column names of the table.
    fn column_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let opened = self.opened();
        // Column and split files read without the GIL (from the store, on object storage).
        let table = py.detach(|| opened.table()).map_err(from_query)?;
        Ok(table.column_names().into_iter().map(String::from).collect())
    }

    /// `SELECT …` → an Arrow C stream capsule of the result; `params` the values of its
    /// `$name`s.
    #[pyo3(signature = (sql, params = None))]
    fn query_stream<'py>(
        &self,
        py: Python<'py>,
        sql: String,
        params: Option<&Bound<'py, PyDict>>,
    ) -> ArrowStream<'py> {
        let params = query_params(params)?;
        let opened = self.opened();
        stream_capsule(py, || beton_query::query_with(&opened.table()?, &sql, &params))
    }

    /// The indices a predicate or `SELECT` matches; `params` the values of its `$name`s.
    #[pyo3(signature = (sql, params = None))]
    fn select(&self, py: Python<'_>, sql: String, params: Option<&Bound<'_, PyDict>>) -> PyResult<IndexSet> {
        let params = query_params(params)?;
        let opened = self.opened();
        let set = py
            .detach(|| beton_query::select_indices_with(&opened.table()?, &sql, &params))
            .map_err(from_query)?;
        Ok(IndexSet::of(set, Source(opened)))
    }

    /// Nearest neighbours: through the column's IVF index when one serves this version and
    /// `exact` is false (`beton_query::IvfIndex::search`, `nprobe` lists a query), else exact
    /// (`beton_query::nearest`); per query vector of `queries`, the `k` best rows of those
    /// `where_` selects (all for `None`) by `metric`, as `(query, index, distance)` lists and
    /// whether the index answered.
    #[pyo3(signature = (column, queries, k, metric, where_ = None, nprobe = None, exact = false))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn nearest(
        &self,
        py: Python<'_>,
        column: String,
        queries: Vec<Vec<f64>>,
        k: usize,
        metric: String,
        where_: Option<String>,
        nprobe: Option<usize>,
        exact: bool,
    ) -> PyResult<(Vec<u64>, Vec<u64>, Vec<f64>, bool)> {
        let opened = self.opened();
        let (found, indexed) = py
            .detach(|| {
                let table = opened.table()?;
                let rows = where_.as_deref().map(|w| beton_query::select_indices(&table, w)).transpose()?;
                if !exact {
                    // The rows' identity only when there is an index to check it against: a
                    // string per data file, not worth building on every search without one.
                    let path = beton_query::IvfIndex::path(&opened, &column)?;
                    if let Some(index) = beton_query::IvfIndex::load_shared(&path)? {
                        if index.metric == metric
                            && index.serves(&beton_query::IvfIndex::key(&opened, &column)?)
                        {
                            let nprobe = nprobe.unwrap_or_else(|| default_nprobe(&index));
                            let found = index.search(&table, &queries, k, nprobe, rows.as_ref(), &metric)?;
                            return Ok::<_, beton_query::Error>((found, true));
                        }
                    }
                }
                Ok((beton_query::nearest(&table, &column, &queries, k, rows.as_ref(), &metric)?, false))
            })
            .map_err(from_query)?;
        Ok((
            found.iter().map(|n| n.query as u64).collect(),
            found.iter().map(|n| n.index).collect(),
            found.iter().map(|n| n.distance).collect(),
            indexed,
        ))
    }

    /// Builds (or, when one serves an ancestor of this version by appends and `rebuild` is
    /// false, extends) the IVF index of `column`; returns `{path, lists, rows, covered,
    /// extended}`.
    #[pyo3(signature = (column, metric, lists = None, seed = 0, rebuild = false, target_recall = 0.95))]
    #[allow(clippy::too_many_arguments)]
    fn create_index<'py>(
        &self,
        py: Python<'py>,
        column: String,
        metric: String,
        lists: Option<usize>,
        seed: u64,
        rebuild: bool,
        target_recall: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let opened = self.opened();
        let (path, index, extended) = py
            .detach(|| {
                let table = opened.table()?;
                let (path, key) = beton_query::IvfIndex::location(&opened, &column)?;
                let old = if rebuild { None } else { beton_query::IvfIndex::load(&path).ok().flatten() };
                let (index, extended) = match old {
                    Some(mut index)
                        if index.serves(&key)
                            && index.metric == metric
                            && lists.is_none_or(|l| l == index.num_lists()) =>
                    {
                        index.extend(&table, key)?;
                        (index, true)
                    }
                    _ => (beton_query::IvfIndex::build(&table, &column, &metric, lists, seed, key)?, false),
                };
                let mut index = index;
                index.tune(&table, target_recall, seed)?;
                index.save(&path)?;
                Ok::<_, beton_query::Error>((path, index, extended))
            })
            .map_err(from_query)?;
        let out = index_dict(py, &path, &index)?;
        out.set_item("extended", extended)?;
        Ok(out)
    }

    /// The IVF index of `column` and whether it serves this version: `{path, lists, rows,
    /// covered, metric, serves}`, or None when there is none.
    fn index_info<'py>(&self, py: Python<'py>, column: String) -> PyResult<Option<Bound<'py, PyDict>>> {
        let opened = self.opened();
        let found = py
            .detach(|| {
                let (path, key) = beton_query::IvfIndex::location(&opened, &column)?;
                Ok::<_, beton_query::Error>(
                    beton_query::IvfIndex::load_shared(&path)?.map(|i| (path, i.serves(&key), i)),
                )
            })
            .map_err(from_query)?;
        let Some((path, serves, index)) = found else { return Ok(None) };
        let out = index_dict(py, &path, &index)?;
        out.set_item("serves", serves)?;
        Ok(Some(out))
    }

    /// Removes the IVF index of `column`; whether there was one.
    fn drop_index(&self, column: String) -> PyResult<bool> {
        let opened = self.opened();
        let path = beton_query::IvfIndex::path(&opened, &column).map_err(from_query)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(PyErr::from(e)),
        }
    }

    /// Near-duplicate groups (`beton_query::near_pairs` / `image_pairs`, then `groups`): by a
    /// vector column within `threshold` by `metric`, or by an image field's perceptual hash
    /// within `threshold` bits (0: the same pixels), over the rows `where_` selects; as
    /// `(group, index, distance)` lists.
    #[pyo3(signature = (by, threshold, metric, where_ = None))]
    fn near_duplicates(
        &self,
        py: Python<'_>,
        by: String,
        threshold: f64,
        metric: String,
        where_: Option<String>,
    ) -> PyResult<(Vec<u64>, Vec<u64>, Vec<f64>)> {
        let opened = self.opened();
        let found = py
            .detach(|| {
                let table = opened.table()?;
                let rows = where_.as_deref().map(|w| beton_query::select_indices(&table, w)).transpose()?;
                let pairs = match bits(&table, &by, threshold)? {
                    Some(bits) => beton_query::image_pairs(&table, &by, bits, rows.as_ref())?,
                    None => beton_query::near_pairs(&table, &by, threshold, &metric, rows.as_ref())?,
                };
                Ok::<_, beton_query::Error>(beton_query::groups(&pairs))
            })
            .map_err(from_query)?;
        Ok((
            found.iter().map(|g| g.0 as u64).collect(),
            found.iter().map(|g| g.1).collect(),
            found.iter().map(|g| g.2).collect(),
        ))
    }

    /// Pairs of a row of this dataset and a row of `other` that are near-duplicates (as
    /// [`Dataset::near_duplicates`]), as `(index, other_index, distance)` lists.
    #[pyo3(signature = (other, by, threshold, metric, where_ = None, other_where = None))]
    #[allow(clippy::too_many_arguments)]
    fn near_pairs_with(
        &self,
        py: Python<'_>,
        other: &Dataset,
        by: String,
        threshold: f64,
        metric: String,
        where_: Option<String>,
        other_where: Option<String>,
    ) -> PyResult<(Vec<u64>, Vec<u64>, Vec<f64>)> {
        let (a, b) = (self.opened(), other.opened());
        let pairs = py
            .detach(|| {
                let (ta, tb) = (a.table()?, b.table()?);
                let ra = where_.as_deref().map(|w| beton_query::select_indices(&ta, w)).transpose()?;
                let rb = other_where.as_deref().map(|w| beton_query::select_indices(&tb, w)).transpose()?;
                match bits(&ta, &by, threshold)? {
                    Some(bits) => {
                        beton_query::image_pairs_between(&ta, ra.as_ref(), &tb, rb.as_ref(), &by, bits)
                    }
                    None => beton_query::near_pairs_between(
                        &ta,
                        ra.as_ref(),
                        &tb,
                        rb.as_ref(),
                        &by,
                        threshold,
                        &metric,
                    ),
                }
            })
            .map_err(from_query)?;
        Ok((
            pairs.iter().map(|p| p.a).collect(),
            pairs.iter().map(|p| p.b).collect(),
            pairs.iter().map(|p| p.distance).collect(),
        ))
    }

    /// The named splits (as indices), by name.
    fn splits(&self, py: Python<'_>) -> PyResult<BTreeMap<String, IndexSet>> {
        let opened = self.opened();
        let splits = py.detach(|| opened.splits()).map_err(from_query)?;
        Ok(splits.into_iter().map(|(n, s)| (n, IndexSet::of(s, Source(Arc::clone(&opened))))).collect())
    }

    /// Named split `name`.
    fn split(&self, py: Python<'_>, name: &str) -> PyResult<IndexSet> {
        let opened = self.opened();
        let set = py.detach(|| opened.table()?.split(name)).map_err(from_query)?;
        let set = set.as_ref().clone();
        Ok(IndexSet::of(set, Source(Arc::clone(&opened))))
    }

    /// Adds or replaces named splits (IndexSets of indices): in a `.beton` file, in place in
    /// one crash-safe update (returns None); in a dataset directory, as a new version (returns
    /// its number).
    #[pyo3(signature = (sets, message = String::new()))]
    fn save_splits(
        &self,
        py: Python<'_>,
        sets: BTreeMap<String, IndexSet>,
        message: String,
    ) -> PyResult<Option<u64>> {
        if self.opened().is_file() {
            let (path, opened) = self.file("save_splits", "")?;
            let sets = sets.iter().map(|(n, s)| (n.as_str(), &s.inner));
            py.detach(|| beton_query::splits::save(&path, opened, sets)).map_err(from_query)?;
            return Ok(None);
        }
        let sets: BTreeMap<String, beton_query::IndexSet> =
            sets.into_iter().map(|(n, s)| (n, s.inner)).collect();
        self.edit(py, |v| v.save_splits(&sets, &[], &message)).map(Some)
    }

    /// Removes named splits: in place from a `.beton` file (returns None), as a new version of a
    /// dataset directory (returns its number).
    #[pyo3(signature = (names, message = String::new()))]
    fn remove_splits(&self, py: Python<'_>, names: Vec<String>, message: String) -> PyResult<Option<u64>> {
        if self.opened().is_file() {
            let (path, opened) = self.file("remove_splits", "")?;
            py.detach(|| beton_query::splits::remove(&path, opened, names.iter().map(String::as_str)))
                .map_err(from_query)?;
            return Ok(None);
        }
        self.edit(py, |v| v.save_splits(&BTreeMap::new(), &names, &message)).map(Some)
    }

    /// The plan of `sql` (`beton explain`): a dict, with `text` as the CLI prints it.
    fn explain<'py>(&self, py: Python<'py>, sql: String) -> PyResult<Bound<'py, PyDict>> {
        let opened = self.opened();
        let e = py.detach(|| beton_query::explain::explain(&opened, &sql)).map_err(from_query)?;
        explain_dict(py, e)
    }

    /// The class names (label `k` names class `k`), or None.
    #[getter]
    fn classes(&self, py: Python<'_>) -> PyResult<Option<Vec<String>>> {
        let opened = self.opened();
        py.detach(|| opened.classes()).map_err(from_query)
    }

    /// Stores class names in a `.beton` file (None removes them), in one crash-safe update.
    fn save_classes(&self, py: Python<'_>, classes: Option<Vec<String>>) -> PyResult<()> {
        let (path, opened) = self.file("save_classes", "set_classes(classes) or rename_class(old, new)")?;
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
        path: PathBuf,
        fields: Option<Vec<String>>,
        rows: Option<Vec<u64>>,
        page_size: Option<u64>,
        num_workers: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let opened = self.opened();
        let schema = opened.schema().map_err(from_query)?;
        let table = opened.table().map_err(from_query)?;
        // Not given: chosen from the payload, unless a data file has pages larger than FFCV's
        // (its samples may need them), as an export chooses.
        let page_size = match page_size {
            Some(p) => crate::writer::writer_page_size(Some(p))?,
            None => opened
                .datasets()
                .map_err(from_query)?
                .iter()
                .map(|d| d.page_size())
                .filter(|&p| p > beton_storage::format::DEFAULT_PAGE_SIZE)
                .max()
                .unwrap_or(0),
        };
        let options =
            beton_storage::WriterOptions { page_size, num_threads: num_workers, ..Default::default() };
        let classes = opened.classes().map_err(from_query)?;
        copy_table(py, &table, &schema, &path, fields, rows, classes.as_deref(), options)
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
        let opened = self.opened();
        let names: Vec<String> = opened.schema().unwrap_or_default().into_iter().map(|(n, _)| n).collect();
        match opened.version() {
            None => format!(
                "Dataset('{}', {} samples, fields: {})",
                opened.file().map(|d| d.path().display().to_string()).unwrap_or_default(),
                opened.num_rows(),
                names.join(", ")
            ),
            Some(v) => format!(
                "Dataset('{}', version {}, {} samples in {} data files, fields: {})",
                v.dir().display(),
                v.version(),
                opened.num_rows(),
                opened.num_data_files(),
                names.join(", ")
            ),
        }
    }
}

/// A query's parameters from Python: `{name: value}` with values None, bool, int, float or str
/// (numpy scalars of those kinds too).
fn query_params(params: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, beton_query::Param)>> {
    use beton_query::Param;
    use pyo3::exceptions::PyTypeError;
    use pyo3::types::{PyBool, PyFloat, PyString};
    let Some(params) = params else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(params.len());
    for (key, value) in params.iter() {
        let name: String = key.extract().map_err(|_| {
            PyTypeError::new_err(format!("params: the key {key:?} is not a str (names are $name in the SQL)"))
        })?;
        // numpy's bool and number scalars say what they are by their dtype's kind.
        let kind: Option<String> =
            value.getattr("dtype").and_then(|d| d.getattr("kind")).and_then(|k| k.extract()).ok();
        // numpy arrays (ndim >= 1) are vectors or nothing; numpy scalars have ndim 0.
        let array = value.getattr("ndim").and_then(|n| n.extract::<usize>()).is_ok_and(|n| n >= 1);
        let param = if array
            || value.is_instance_of::<pyo3::types::PyList>()
            || value.is_instance_of::<pyo3::types::PyTuple>()
        {
            match vector_param(&value) {
                Some(v) => Param::Vector(v),
                None => {
                    let ty = value.get_type().name().map(|n| n.to_string()).unwrap_or_default();
                    return Err(PyTypeError::new_err(format!(
                        "params['{name}']: a {ty} is not a query parameter: a vector is a non-empty 1-D array or list of numbers"
                    )));
                }
            }
        } else if value.is_none() {
            Param::Null
        } else if value.is_instance_of::<PyBool>() || kind.as_deref() == Some("b") {
            Param::Bool(value.is_truthy()?)
        } else if value.is_instance_of::<PyString>() {
            Param::Text(value.extract()?)
        } else if value.is_instance_of::<PyFloat>() || kind.as_deref() == Some("f") {
            Param::Float(value.extract()?)
        } else if let Ok(i) = value.extract::<i64>() {
            Param::Int(i)
        } else {
            let ty = value.get_type().name().map(|n| n.to_string()).unwrap_or_default();
            return Err(PyTypeError::new_err(format!(
                "params['{name}']: a {ty} is not a query parameter (None, bool, int in BIGINT's range, float, str, or a vector: a 1-D array or list of numbers)"
            )));
        };
        out.push((name, param));
    }
    Ok(out)
}

/// A vector parameter: a 1-D numpy array of numbers, or a list or tuple of numbers.
fn vector_param(value: &Bound<'_, PyAny>) -> Option<Vec<f64>> {
    use pyo3::types::{PyList, PyTuple};
    let ndim: Option<usize> = value.getattr("ndim").and_then(|n| n.extract()).ok();
    let kind: Option<String> =
        value.getattr("dtype").and_then(|d| d.getattr("kind")).and_then(|k| k.extract()).ok();
    let listed = match (ndim, kind.as_deref()) {
        (Some(1), Some("i" | "u" | "f")) => value.call_method0("tolist").ok()?,
        (Some(_), _) => return None,
        _ if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() => value.clone(),
        _ => return None,
    };
    let items: Vec<Bound<'_, PyAny>> = listed.try_iter().ok()?.collect::<PyResult<_>>().ok()?;
    if items.is_empty() {
        return None;
    }
    items
        .iter()
        .map(|x| match x.is_instance_of::<pyo3::types::PyBool>() {
            true => None,
            false => x.extract::<f64>().ok(),
        })
        .collect()
}

/// For a search by `by`: `Some(bits)` when it is an image field (its threshold a whole number
/// of pHash bits), `None` for a vector column.
fn bits(table: &beton_query::Table, by: &str, threshold: f64) -> Result<Option<u32>, beton_query::Error> {
    let image = table.fields().into_iter().any(|(name, ty)| name == by && ty.is_image());
    if !image {
        return Ok(None);
    }
    if threshold.fract() != 0.0 || !(0.0..=64.0).contains(&threshold) {
        return Err(beton_query::Error::InvalidArgument {
            what: format!("near-duplicates by '{by}'"),
            why: format!("an image's threshold is a number of pHash bits from 0 to 64, not {threshold}"),
        });
    }
    Ok(Some(threshold as u32))
}

/// What `create_index` and `index_info` say of an index: `{path, lists, rows, covered,
/// metric, nprobe, recall}`.
fn index_dict<'py>(
    py: Python<'py>,
    path: &Path,
    index: &beton_query::IvfIndex,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("path", path.display().to_string())?;
    out.set_item("lists", index.num_lists())?;
    out.set_item("rows", index.rows.len())?;
    out.set_item("covered", index.covered)?;
    out.set_item("metric", &index.metric)?;
    out.set_item("nprobe", default_nprobe(index))?;
    out.set_item("recall", index.recall)?;
    Ok(out)
}

/// Lists an IVF search reads by default: those its tuning chose (`IvfIndex::tune`: the fewest
/// reaching the recall asked for on a sample of its rows), else a sixteenth of them.
fn default_nprobe(index: &beton_query::IvfIndex) -> usize {
    match index.nprobe {
        0 => (index.num_lists() / 16).max(8).min(index.num_lists().max(1)),
        n => n,
    }
}
