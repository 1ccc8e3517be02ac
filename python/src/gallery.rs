//! `Gallery`: a built gallery (HTML page or notebook fragment, PNG contact sheet), and what the
//! datasets' `gallery`, `card_html` and `result_html` make it from (an index set's
//! `_repr_html_` is `Source::set_html`). The work is in `beton_query::gallery`.

use std::sync::Mutex;

use arrow_array::{RecordBatch, RecordBatchReader};
use beton_query::gallery::{
    diff_gallery, ChangeKind, DiffRows, Gallery as RustGallery, GalleryOptions, Selection, SummaryKind,
};
use beton_query::versioned::VersionedDataset;
use beton_query::Table;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::errors::from_query;
use crate::index_set::IndexSet;
use crate::source::{repr_options, Source};

/// Rows of a query's result shown as a table.
const REPR_ROWS: usize = 10;

/// The rows to show, as Python gives them: `None` (all), SQL text, an `IndexSet`, a query's
/// result (an object with `__arrow_c_stream__` and an `index` column) or row numbers in order.
enum Rows {
    All,
    Sql(String),
    Set(beton_query::IndexSet),
    Result(RecordBatch),
    List(Vec<u64>),
}

impl Rows {
    fn extract(rows: Option<&Bound<'_, PyAny>>) -> PyResult<Rows> {
        let Some(rows) = rows else { return Ok(Rows::All) };
        if rows.is_none() {
            return Ok(Rows::All);
        }
        if let Ok(sql) = rows.cast::<PyString>() {
            return Ok(Rows::Sql(sql.extract::<String>()?));
        }
        if let Ok(set) = rows.extract::<PyRef<'_, IndexSet>>() {
            return Ok(Rows::Set(set.inner.clone()));
        }
        if rows.hasattr("__arrow_c_stream__")? {
            return Ok(Rows::Result(read_batch(rows)?));
        }
        match rows.extract::<Vec<u64>>() {
            Ok(list) => Ok(Rows::List(list)),
            Err(_) => Err(PyTypeError::new_err(format!(
                "where: expected SQL (str), an IndexSet, a query result with an `index` column, or row numbers; got {}",
                rows.get_type().name()?
            ))),
        }
    }

    /// The selection over `table` (a diff's gallery applies one to two tables).
    fn selection(&self, table: &Table<'_>) -> beton_query::Result<Selection> {
        Ok(match self {
            Rows::All => Selection::all(table),
            Rows::Sql(sql) => Selection::of_sql(table, sql)?,
            Rows::Set(set) => Selection::of_set(set),
            Rows::Result(batch) => Selection::of_result(batch.clone())?,
            Rows::List(list) => Selection::of_rows(list.clone()),
        })
    }
}

/// Every batch of an Arrow C stream, concatenated.
fn read_batch(stream: &Bound<'_, PyAny>) -> PyResult<RecordBatch> {
    let reader = crate::arrow_write::import_stream(stream)?;
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>().map_err(|e| from_query(e.into()))?;
    arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| from_query(e.into()))
}

/// Gallery options from a Python dict (`by`, `n`, `columns`, `size`, `image`, `summaries`,
/// `max_groups`, `title`; missing keys keep their defaults, the title `title`).
fn options(given: Option<&Bound<'_, PyDict>>, title: String) -> PyResult<GalleryOptions> {
    let mut o = GalleryOptions { title, ..GalleryOptions::default() };
    for (key, value) in given.into_iter().flat_map(|d| d.iter()) {
        let key: String = key.extract()?;
        if value.is_none() && key != "summaries" {
            continue;
        }
        match key.as_str() {
            "by" => o.by = Some(value.extract()?),
            "n" => o.per_group = value.extract()?,
            "columns" => o.columns = Some(value.extract()?),
            "size" => o.size = value.extract()?,
            "image" => o.image = Some(value.extract()?),
            "summaries" => o.summaries = value.extract()?,
            "max_groups" => o.max_groups = value.extract()?,
            "title" => o.title = value.extract()?,
            other => return Err(PyTypeError::new_err(format!("gallery: unknown option '{other}'"))),
        }
    }
    Ok(o)
}

/// A gallery's `progress(done, total)` callable, called from the threads making thumbnails:
/// the first exception it raises is kept, and raised once the gallery is built.
struct Reporter {
    callback: Option<Py<PyAny>>,
    failed: Mutex<Option<PyErr>>,
}

impl Reporter {
    fn report(&self, done: u64, total: u64) {
        let Some(callback) = &self.callback else { return };
        Python::attach(|py| {
            if let Err(e) = callback.call1(py, (done, total)) {
                self.failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
            }
        });
    }

    /// What was built, or the callable's exception (first), or the build's error.
    fn finish<T>(self, built: beton_query::Result<T>) -> PyResult<T> {
        match self.failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => built.map_err(from_query),
        }
    }
}

/// Builds a gallery of `rows` of `source` (`Dataset.gallery`, `Version.gallery`) with
/// `options` (a dict, see [`options`]), calling `progress(done, total)` (a Python callable) as
/// thumbnails are made; an exception it raises is raised once the gallery is built.
pub(crate) fn build(
    py: Python<'_>,
    source: &Source,
    rows: Option<&Bound<'_, PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Gallery> {
    let rows = Rows::extract(rows)?;
    let options = self::options(options, source.title())?;
    let reporter = Reporter { callback: progress, failed: Mutex::new(None) };
    let report = |done: u64, total: u64| reporter.report(done, total);
    let built = py.detach(|| {
        source.with_table(|table, classes| {
            let options = GalleryOptions { classes, ..options };
            RustGallery::build(table, &rows.selection(table)?, &options, &report)
        })
    });
    Ok(Gallery { inner: reporter.finish(built)? })
}

/// Builds the gallery of what changed from `versions.0` to `versions.1` (named `sides`):
/// `Dataset.gallery(diff=(a, b))`. `rows` narrows the rows shown: SQL selects in each version
/// (the newer for changed and added rows, the older for deleted ones); an index set, a query's
/// result or row numbers are rows of the newer version (deleted rows are then left out).
pub(crate) fn build_diff(
    py: Python<'_>,
    versions: (&VersionedDataset, &VersionedDataset),
    sides: (String, String),
    rows: Option<&Bound<'_, PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Gallery> {
    let rows = Rows::extract(rows)?;
    let given = |key: &str| options.and_then(|o| o.get_item(key).ok().flatten()).filter(|v| !v.is_none());
    if let Some(by) = given("by") {
        if by.extract::<String>().ok().as_deref() != Some("change") {
            return Err(PyValueError::new_err(format!(
                "gallery(diff=...) groups by change (changed, added, deleted); by={by} is not supported: narrow the rows with where= instead"
            )));
        }
    }
    // No title given: diff_gallery's, what changed.
    let mut options = self::options(options, String::new())?;
    options.by = None;
    let reporter = Reporter { callback: progress, failed: Mutex::new(None) };
    let report = |done: u64, total: u64| reporter.report(done, total);
    let built = py.detach(|| {
        let narrowed = match &rows {
            Rows::All => DiffRows::All,
            Rows::Sql(sql) => DiffRows::Sql(sql),
            other => DiffRows::Newer(other.selection(&versions.1.view()?.table()?)?.rows().to_vec()),
        };
        diff_gallery(versions.0, versions.1, sides, narrowed, &options, &report)
    });
    Ok(Gallery { inner: reporter.finish(built)? })
}

/// A dataset's card (`Dataset._repr_html_`): `facts` above a strip of `n` thumbnails.
pub(crate) fn card(
    py: Python<'_>,
    source: &Source,
    facts: Vec<(String, String)>,
    n: usize,
) -> PyResult<String> {
    let title = source.title();
    py.detach(|| {
        source.with_table(|table, classes| {
            let options = GalleryOptions { per_group: n, ..repr_options(title, classes) };
            Ok(RustGallery::build(table, &Selection::all(table), &options, &|_, _| {})?.to_html_card(&facts))
        })
    })
    .map_err(from_query)
}

/// A query's result for a notebook (`QueryResult._repr_html_`): its first rows as a table, and
/// thumbnails of its first rows when it has an `index` column.
pub(crate) fn result_html(py: Python<'_>, source: &Source, result: &Bound<'_, PyAny>) -> PyResult<String> {
    let batch = read_batch(result)?;
    let title = source.title();
    py.detach(|| {
        let mut html = beton_query::gallery::table_html(&batch, REPR_ROWS);
        if batch.column_by_name("index").is_some() && batch.num_rows() > 0 {
            let thumbnails = source.with_table(|table, classes| {
                let selection = Selection::of_result(batch)?;
                Ok(RustGallery::build(table, &selection, &repr_options(title, classes), &|_, _| {})?
                    .to_html(false))
            });
            // A result whose `index` is not this dataset's rows still shows as a table.
            if let Ok(thumbnails) = thumbnails {
                html.push_str(&thumbnails);
            }
        }
        Ok(html)
    })
}

/// A gallery of a dataset's rows: ``Dataset.gallery`` wraps it (``beton.Gallery``).
#[pyclass(module = "beton._native", frozen)]
pub struct Gallery {
    inner: RustGallery,
}

#[pymethods]
impl Gallery {
    /// The gallery as HTML: a whole self-contained page (`page`), or a fragment for a notebook.
    #[pyo3(signature = (page = false))]
    fn html(&self, py: Python<'_>, page: bool) -> String {
        py.detach(|| self.inner.to_html(page))
    }

    /// The gallery as a PNG contact sheet.
    fn png<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let png = py.detach(|| self.inner.to_png()).map_err(from_query)?;
        Ok(PyBytes::new(py, &png))
    }

    /// The title.
    #[getter]
    fn title(&self) -> &str {
        &self.inner.title
    }

    /// Rows selected.
    #[getter]
    fn matched(&self) -> u64 {
        self.inner.matched
    }

    /// Rows of the dataset.
    #[getter]
    fn num_rows(&self) -> u64 {
        self.inner.num_rows
    }

    /// The grouping column, or None.
    #[getter]
    fn by(&self) -> Option<&str> {
        self.inner.by.as_deref()
    }

    /// The image field shown, or None.
    #[getter]
    fn image_field(&self) -> Option<&str> {
        self.inner.image_field.as_deref()
    }

    /// Groups not drawn, and their rows.
    #[getter]
    fn hidden_groups(&self) -> (u64, u64) {
        self.inner.hidden_groups
    }

    /// The groups drawn: `(key, rows, indices shown)`.
    fn groups(&self) -> Vec<(Option<String>, u64, Vec<u64>)> {
        self.inner
            .groups
            .iter()
            .map(|g| (g.key.clone(), g.count, g.tiles.iter().map(|t| t.index).collect()))
            .collect()
    }

    /// A diff's gallery: its tiles' changes, `(row_id, kind, index before, index after,
    /// columns changed)` in the order shown; empty for other galleries.
    #[allow(clippy::type_complexity)]
    fn changes(&self) -> Vec<(u64, &'static str, Option<u64>, Option<u64>, Vec<String>)> {
        let tiles = self.inner.groups.iter().flat_map(|g| &g.tiles);
        tiles
            .filter_map(|t| {
                let c = t.change.as_ref()?;
                let (before, after) = match c.kind {
                    ChangeKind::Deleted => (Some(t.index), None),
                    ChangeKind::Added => (None, Some(t.index)),
                    ChangeKind::Changed => (c.before.as_ref().map(|b| b.index), Some(t.index)),
                };
                Some((c.row_id, c.kind.name(), before, after, c.changed.clone()))
            })
            .collect()
    }

    /// The per-column summaries: dicts with `column`, `data_type`, `rows`, `nulls`, `kind`
    /// ("counts": `top` [(value, rows)], `distinct`, `other`; "histogram": `min`, `max`, `mean`,
    /// `bins`; "unreadable": `error`).
    fn summaries<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .summaries
            .iter()
            .map(|s| {
                let d = PyDict::new(py);
                set_fields!(d, s; column, data_type, rows, nulls);
                match &s.kind {
                    SummaryKind::Counts { top, distinct, other } => {
                        d.set_item("kind", "counts")?;
                        d.set_item("top", top)?;
                        d.set_item("distinct", distinct)?;
                        d.set_item("other", other)?;
                    }
                    SummaryKind::Unreadable(why) => {
                        d.set_item("kind", "unreadable")?;
                        d.set_item("error", why)?;
                    }
                    SummaryKind::Histogram { min, max, mean, bins } => {
                        d.set_item("kind", "histogram")?;
                        d.set_item("min", min)?;
                        d.set_item("max", max)?;
                        d.set_item("mean", mean)?;
                        d.set_item("bins", bins)?;
                    }
                }
                Ok(d)
            })
            .collect()
    }
}
