//! A version out of the directory: `export` (a standalone `.beton` file FFCV loads) and
//! `compact` (one new data file folding deletions and column files in).

use std::path::Path;

use arrow_array::ArrayRef;
use beton_storage::FieldType;

use super::edits::check_indices;
use super::*;
use crate::copy::{Copied, Filled};
use crate::error::{Error, Result};
use crate::index_set::IndexSet;

impl VersionedDataset {
    /// Writes the rows `rows` of this version (indices; all of them for `None`) as one standalone
    /// `.beton` file at `path` that FFCV 1.0.2 loads: the visible fields with their current
    /// values, images and other payloads copied byte for byte (never re-encoded), and the
    /// version's named splits (restricted to the rows written). Written atomically, with
    /// `options`' threads; its progress counts the rows written. A NULL (a `.beton` file holds
    /// a value in every row) is written as [`crate::copy::null_filler`]'s value: the result's
    /// `filled` lists which rows of which field, and with what.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a row past the end; storage errors writing,
    /// [`beton_storage::Error::Cancelled`] when the progress callback cancels (nothing is left
    /// at `path`).
    pub fn export(&self, path: &Path, rows: Option<&IndexSet>, options: &ExportOptions) -> Result<Copied> {
        self.export_fields(path, rows, None, options)
    }

    /// [`VersionedDataset::export`] of the fields `fields` only, in that order (every field for
    /// `None`): a field FFCV cannot read (text, bool, array) can be left out of a file meant for
    /// FFCV.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`] for a name that is not a field, [`Error::InvalidArgument`] for
    /// a field named twice or none; as [`VersionedDataset::export`].
    pub fn export_fields(
        &self,
        path: &Path,
        rows: Option<&IndexSet>,
        fields: Option<&[String]>,
        options: &ExportOptions,
    ) -> Result<Copied> {
        let view = self.view()?;
        let table = view.table()?;
        let mut schema = view.schema()?;
        if let Some(names) = fields {
            schema = choose_fields(&schema, names)?;
        }
        let copied = export_table(&view, &table, &schema, path, rows, options)?;
        // Splits: table rows → positions in the file written.
        let mut splits = Vec::new();
        for name in self.manifest.splits.keys() {
            let set = table.split(name)?;
            let ids: Vec<u64> = match rows {
                None => set.as_slice().to_vec(),
                Some(rows) => {
                    let positions = rows.as_slice();
                    set.iter().filter_map(|r| positions.binary_search(&r).ok().map(|p| p as u64)).collect()
                }
            };
            splits.push((name.clone(), IndexSet::from_sorted(ids)?));
        }
        if !splits.is_empty() {
            crate::splits::save(path, None, splits.iter().map(|(n, s)| (n.as_str(), s)))?;
        }
        if let Some(classes) = &self.manifest.classes {
            beton_storage::save_classes(path, None, Some(classes))?;
        }
        Ok(copied)
    }

    /// Folds every data file, deletion and column file of this version into one new data file
    /// (payloads copied byte for byte), as a new version: the same rows, row ids and splits.
    /// Written with `options`' threads; its progress counts the rows written.
    ///
    /// # Errors
    /// As [`VersionedDataset::export`] (a cancelled compaction commits nothing) and
    /// [`VersionedDataset::commit`].
    pub fn compact(&self, options: &ExportOptions, message: &str) -> Result<VersionedDataset> {
        let _edit = lock::edit(self.dir())?;
        manifest::room_for_version(&self.manifest)?;
        // One data file per run of ascending row ids (a data file's ids ascend; a version's
        // rows need not, once a branch was merged into it): one for a version without merges.
        let mut written: Vec<(String, beton_storage::WriteReport, RowIds, Vec<ColumnFile>)> = Vec::new();
        {
            let view = self.view()?;
            let table = view.table()?;
            std::fs::create_dir_all(self.dir().join(DATA_DIR)).map_err(|e| io(self.dir(), e))?;
            let schema = view.schema()?;
            let ids = table.row_ids()?;
            let runs = ascending_runs(&ids);
            let whole = runs.len() == 1;
            for run in runs {
                let rel = format!("{DATA_DIR}/{}.beton", commit::unique_name());
                let rows = IndexSet::from(run.start as u64..run.end as u64);
                let rows = (!whole).then_some(&rows);
                let copied = export_table(&view, &table, &schema, &self.dir().join(&rel), rows, options)?;
                // The NULLs the data file holds fillers for stay NULLs: a patch marks them.
                let nulls = null_patches(self.dir(), &schema, &copied.filled)?;
                let ids = &ids[run];
                let row_ids = match (ids.first(), ids.last()) {
                    (Some(&a), Some(&b)) if b.checked_sub(a) == Some(ids.len() as u64 - 1) => {
                        RowIds::Range { start: a }
                    }
                    (None, _) => RowIds::Range { start: self.manifest.line_next_row_id() },
                    _ => {
                        let set = IndexSet::from_sorted(ids.to_vec())?;
                        let file = write_index_file(self.dir(), ROW_IDS_DIR, &set)?;
                        RowIds::File { file: file.file, checksum: file.checksum }
                    }
                };
                written.push((rel, copied.report, row_ids, nulls));
            }
        }
        let touches = Touches { everything: true, ..Touches::default() };
        let folded = self.manifest.fragments.iter().map(|f| f.id).collect();
        self.commit(Operation::Compact { fragments: folded }, message, &touches, |base, new| {
            manifest::room_for(base, written.iter().map(|_| 0))?;
            new.fragments = written
                .iter()
                .enumerate()
                .map(|(k, (rel, report, row_ids, nulls))| Fragment {
                    id: base.next_fragment_id + k as u64,
                    data_file: rel.clone(),
                    num_rows: report.num_samples,
                    data_bytes: Some(report.file_len),
                    row_ids: row_ids.clone(),
                    deletions: None,
                    columns: nulls.clone(),
                    copy: None,
                })
                .collect::<Vec<_>>()
                .into();
            new.next_fragment_id = base.next_fragment_id + written.len() as u64;
            Ok(())
        })
    }
}

/// The runs of strictly ascending ids of `ids`, in order (one, possibly empty, at least).
pub(super) fn ascending_runs(ids: &[u64]) -> Vec<std::ops::Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    for k in 1..ids.len() {
        if ids[k] <= ids[k - 1] {
            runs.push(start..k);
            start = k;
        }
    }
    runs.push(start..ids.len());
    runs
}

/// Writes the table rows `rows` (all for `None`) of a version's table to `path`.
/// Patch column files marking as NULL the rows of a data file that hold a NULL's filler
/// ([`crate::copy::copy_rows`]'s `filled`): one file per field, its `_row` the rows and its
/// values nulls (docs/FORMAT.md §13).
pub(super) fn null_patches(
    dir: &Path,
    schema: &[(String, FieldType)],
    filled: &[Filled],
) -> Result<Vec<ColumnFile>> {
    let mut files = Vec::with_capacity(filled.len());
    for f in filled {
        let ty = schema.iter().find(|(n, _)| *n == f.field).map(|(_, t)| t).ok_or_else(|| {
            Error::InvalidArgument {
                what: format!("field '{}'", f.field),
                why: "is not in the schema".into(),
            }
        })?;
        let rows: ArrayRef = std::sync::Arc::new(arrow_array::UInt64Array::from(f.rows.clone()));
        let values = arrow_array::new_null_array(&values::column_file_type(ty), f.rows.len());
        let mut file = view::write_column_file(
            dir,
            vec![(view::PATCH_ROWS.to_string(), rows), (f.field.clone(), values)],
        )?;
        file.fields.retain(|n| n != view::PATCH_ROWS);
        files.push(file);
    }
    Ok(files)
}

/// The fields of `schema` named by `names`, in that order.
pub(super) fn choose_fields(
    schema: &[(String, FieldType)],
    names: &[String],
) -> Result<Vec<(String, FieldType)>> {
    if names.is_empty() {
        return Err(Error::InvalidArgument { what: "fields".into(), why: "names no field".into() });
    }
    let mut chosen: Vec<(String, FieldType)> = Vec::with_capacity(names.len());
    for name in names {
        if chosen.iter().any(|(n, _)| n == name) {
            return Err(Error::InvalidArgument {
                what: "fields".into(),
                why: format!("names '{name}' twice"),
            });
        }
        let field = schema.iter().find(|(n, _)| n == name).ok_or_else(|| Error::NoSuchColumn {
            name: name.clone(),
            available: schema.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
        })?;
        chosen.push(field.clone());
    }
    Ok(chosen)
}

pub(super) fn export_table(
    view: &VersionView,
    table: &crate::Table<'_>,
    schema: &[(String, FieldType)],
    path: &Path,
    rows: Option<&IndexSet>,
    options: &ExportOptions,
) -> Result<Copied> {
    use beton_storage::WriterOptions;
    if let Some(rows) = rows {
        check_indices(rows, "rows to export", view.number(), view.num_rows())?;
    }
    // Chosen from the payload (0), as for any write, unless a data file has pages larger than
    // FFCV's: its samples may need them, and a choice past the first 64 MiB takes 8 MiB.
    let page_size = view
        .datasets()?
        .iter()
        .map(|d| d.page_size())
        .filter(|&p| p > beton_storage::format::DEFAULT_PAGE_SIZE)
        .max()
        .unwrap_or(0);
    let options = WriterOptions {
        page_size,
        num_threads: options.num_threads,
        progress: options.progress.clone(),
        ..WriterOptions::default()
    };
    let copy = crate::copy::Copy { fields: schema, rows: rows.map(IndexSet::as_slice), classes: None };
    crate::copy::copy_rows(table, path, copy, options)
}
