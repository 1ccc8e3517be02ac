//! `beton explain FILE SQL`: what a query touches and what a loader would read for its rows,
//! without printing the query's output. The plan is `beton_query::explain`'s (Python's
//! `Dataset.explain` gives the same); this file opens the file or version and prints it.

use std::path::Path;

use anyhow::Result;

/// Explains `sql` (a bare predicate or a `SELECT`) on the data table of `file`.
pub fn run(file: &Path, custom: &[String], sql: &str) -> Result<String> {
    let ds = crate::open::open(file, custom)?;
    let view = beton_query::versioned::VersionView::of_file(std::sync::Arc::new(ds));
    Ok(beton_query::explain::explain(&view, sql)?.to_string())
}

/// Explains `sql` on a version of the dataset directory `dir`: the columns, the rows matched, and
/// for each data file the rows, pages and payload bytes a loader of those rows would read.
pub fn run_version(dir: &Path, version: Option<&str>, sql: &str) -> Result<String> {
    let v = beton_query::versioned::VersionedDataset::open(dir, crate::versions::version_ref(version))?;
    Ok(beton_query::explain::explain(&v.view()?, sql)?.to_string())
}
