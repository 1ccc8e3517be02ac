//! The loader over a version of a dataset directory (docs/FORMAT.md §13): several data files,
//! the rows each keeps (deletions left out) and field values column files give, as one index
//! space. A sample's index is its position in the version; each is read from its own data file
//! (never copied), or from a column file for edited fields.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_buffer::NullBuffer;
use beton_dataset::column_values::ColumnValues;
use beton_dataset::kept_rows::KeptRows;
use beton_storage::Dataset;

use crate::error::{Error, Result};
use crate::pages::PageMap;

/// One data file of a version.
#[derive(Debug, Clone)]
pub struct Part {
    /// The data file.
    pub ds: Arc<Dataset>,
    /// Its rows in the version (its rows less deleted ones, held as those); `None` for all of
    /// them. Deleting 5 rows of a 100 M-row data file makes no list of 100 M rows to load.
    pub rows: Option<Arc<KeptRows>>,
    /// Values of fields that column files replace or add, one per data-file row, by name (each
    /// made into one array when the loader reads the field).
    pub columns: beton_dataset::versioned::view::Columns,
    /// The fields with NULLs (a row appended without the field) and their validity over the
    /// data-file rows (`false`: NULL).
    pub nulls: BTreeMap<String, NullBuffer>,
}

/// A version's data files, in order: the loader's samples are their kept rows, concatenated.
#[derive(Debug, Clone)]
pub struct Parts {
    parts: Vec<Part>,
    /// The visible fields and their types (column-file fields included).
    schema: Vec<(String, beton_storage::FieldType)>,
    /// First sample of each part, and the total at the end.
    starts: Vec<u64>,
}

/// Where a field's values come from in one part.
#[derive(Debug, Clone)]
pub(crate) enum FieldSource {
    /// Field `k` of the part's data file.
    Field(usize),
    /// A column file's values (`beton_dataset::versioned::values`), of the field's type; a null
    /// cell is the value of field `field` of the data file.
    Column {
        /// One per data-file row, as column files give them (each sample's cell found in them,
        /// no whole column made).
        values: Arc<ColumnValues>,
        /// The field's type.
        ty: beton_storage::FieldType,
        /// The field in the data file, if it has it.
        field: Option<usize>,
        /// The rows where the field is NULL (`false`), if any.
        nulls: Option<NullBuffer>,
    },
}

impl Parts {
    /// The version made of `parts`, in order, with fields `schema`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no parts, rows past a file's end or not ascending, or a
    /// column of the wrong length.
    pub fn new(parts: Vec<Part>, schema: Vec<(String, beton_storage::FieldType)>) -> Result<Parts> {
        let invalid = |why: String| Error::InvalidArgument { what: "version parts".into(), why };
        if parts.is_empty() {
            return Err(invalid("a version to load needs at least one data file".into()));
        }
        let mut starts = vec![0u64];
        for (k, p) in parts.iter().enumerate() {
            let n = p.ds.num_samples();
            if let Some(rows) = p.rows.as_ref().filter(|r| r.file_rows() != n) {
                return Err(invalid(format!(
                    "rows of data file {k} are of {} rows, not {n}",
                    rows.file_rows()
                )));
            }
            if let Some((name, _)) = p.columns.iter().find(|(_, a)| a.len() as u64 != n) {
                return Err(invalid(format!("column '{name}' of data file {k} has not {n} values")));
            }
            starts.push(starts[k] + p.rows.as_ref().map_or(n, |r| r.len()));
        }
        Ok(Parts { parts, schema, starts })
    }

    /// A `.beton` file as one part: all its rows, its own fields.
    pub fn single(ds: Arc<Dataset>) -> Parts {
        let schema = ds.fields().iter().map(|f| (f.name().to_string(), f.field_type().clone())).collect();
        let starts = vec![0, ds.num_samples()];
        let part = Part { ds, rows: None, columns: BTreeMap::new(), nulls: BTreeMap::new() };
        Parts { parts: vec![part], schema, starts }
    }

    /// The data files and schema of an opened version: what
    /// [`Loader::builder_parts`](crate::Loader::builder_parts) takes.
    ///
    /// # Errors
    /// As [`Parts::new`]; a schema type this beton does not know.
    pub fn of_version(view: &beton_dataset::versioned::VersionView) -> Result<Parts> {
        let parts = view
            .parts()?
            .into_iter()
            .map(|(ds, rows, columns, nulls)| Part { ds, rows, columns, nulls })
            .collect();
        Parts::new(parts, view.schema()?)
    }

    /// The visible fields and their types.
    pub fn schema(&self) -> &[(String, beton_storage::FieldType)] {
        &self.schema
    }

    /// Samples in the version.
    pub fn num_rows(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The data files.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The part holding sample `index` and the sample's row in its data file.
    #[inline]
    pub(crate) fn locate(&self, index: u64) -> (usize, u64) {
        // A `.beton` file (or a version of one data file without deletions): the row is the
        // index, as the loader read files before it read every dataset as parts.
        if let [only] = self.parts.as_slice() {
            if only.rows.is_none() {
                return (0, index);
            }
        }
        let k = self.starts.partition_point(|&s| s <= index).saturating_sub(1).min(self.parts.len() - 1);
        let local = index - self.starts[k];
        let row = self.parts[k].rows.as_ref().map_or(local, |rows| rows.get(local));
        (k, row)
    }

    /// Where field `name` comes from in each part.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when a part has it neither in its data file nor in a column.
    pub(crate) fn resolve(&self, name: &str) -> Result<Vec<FieldSource>> {
        let ty = self.schema.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone());
        self.parts
            .iter()
            .enumerate()
            .map(|(k, p)| match (p.columns.get(name), &ty) {
                (Some(a), Some(ty)) => Ok(FieldSource::Column {
                    values: Arc::clone(a),
                    ty: ty.clone(),
                    field: p.ds.field_index(name).ok().filter(|&f| p.ds.fields()[f].field_type() == ty),
                    nulls: p.nulls.get(name).cloned(),
                }),
                _ => p.ds.field_index(name).map(FieldSource::Field).map_err(|_| Error::InvalidArgument {
                    what: format!("field '{name}'"),
                    why: format!(
                        "data file {k} ({}) has no such field and no column file holds it",
                        p.ds.path().display()
                    ),
                }),
            })
            .collect()
    }

    /// The samples (version indices, ascending) where field `name` is NULL, among `indices`
    /// (all samples for `None`), at most `limit` of them, and how many there are in all.
    pub fn null_samples(&self, name: &str, indices: Option<&[u64]>, limit: usize) -> (Vec<u64>, u64) {
        let mut first = Vec::new();
        let mut count = 0u64;
        let mut note = |index: u64| {
            count += 1;
            if first.len() < limit {
                first.push(index);
            }
        };
        match indices {
            None => {
                for (k, p) in self.parts.iter().enumerate() {
                    let Some(nulls) = p.nulls.get(name) else { continue };
                    let rows: Box<dyn Iterator<Item = u64>> = match &p.rows {
                        Some(rows) => Box::new(rows.iter()),
                        None => Box::new(0..p.ds.num_samples()),
                    };
                    for (j, row) in rows.enumerate() {
                        if nulls.is_null(row as usize) {
                            note(self.starts[k] + j as u64);
                        }
                    }
                }
            }
            Some(indices) => {
                if self.parts.iter().all(|p| !p.nulls.contains_key(name)) {
                    return (first, 0);
                }
                for &index in indices {
                    if index >= self.num_rows() {
                        continue;
                    }
                    let (k, row) = self.locate(index);
                    if self.parts[k].nulls.get(name).is_some_and(|n| n.is_null(row as usize)) {
                        note(index);
                    }
                }
            }
        }
        (first, count)
    }

    /// The page map of the version: each sample on its data file's page, pages of different
    /// files distinct (QUASI_RANDOM stays page-aware across data files). Files whose samples lie
    /// in order on their pages (any file without payloads) give runs: O(pages), not O(samples).
    pub(crate) fn page_map(&self) -> PageMap {
        // One data file read whole: its own map (the same pages QUASI_RANDOM orders a file by).
        if let [Part { ds, rows: None, .. }] = self.parts.as_slice() {
            return PageMap::from_dataset(ds);
        }
        // (The kept rows of files with deletions listed: QUASI_RANDOM's page map alone needs them.)
        let lists: Vec<Option<Arc<Vec<u64>>>> =
            self.parts.iter().map(|p| p.rows.as_ref().map(|r| r.list())).collect();
        PageMap::concat(
            self.parts
                .iter()
                .zip(&lists)
                .map(|(p, list)| (PageMap::from_dataset(&p.ds), list.as_deref().map(Vec::as_slice)))
                .collect(),
        )
    }

    /// Fails when a data file changed under its map since it was opened.
    pub(crate) fn check_intact(&self) -> Result<()> {
        for p in &self.parts {
            p.ds.check_intact()?;
        }
        Ok(())
    }
}
