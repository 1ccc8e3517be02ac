//! Copies rows of a table (a `.beton` file's, or a version's) into a new `.beton` file with every
//! value as it is stored: JPEGs and other payloads byte for byte, never decoded or re-encoded
//! (`ImageSource::Stored`). Export and compaction of versions, and Python's
//! `DatasetWriter.from_indexed_dataset` of a beton dataset, go through it.

use std::path::Path;

use beton_storage::{FieldSpec, FieldType, WriteReport, Writer, WriterOptions};

use crate::error::{Error, Result};
use crate::Table;

/// What [`copy_rows`] writes.
#[derive(Debug, Clone, Copy)]
pub struct Copy<'a> {
    /// The fields written, in order, with their types in `table` (a subset of its fields, in
    /// any order).
    pub fields: &'a [(String, FieldType)],
    /// The table rows written, in this order (repeats allowed); all rows in order for `None`.
    pub rows: Option<&'a [u64]>,
    /// Class names to store in the file written ([`beton_storage::save_classes`]).
    pub classes: Option<&'a [String]>,
}

/// Writes rows of `table` as a new `.beton` file at `path` (atomically), the values of `copy`'s
/// fields as `table` stores them (column-file values of a version included).
///
/// # Errors
/// [`Error::InvalidArgument`] for a row past the end of the table; storage errors for a field a
/// data file lacks, and writing.
pub fn copy_rows(
    table: &Table<'_>,
    path: &Path,
    copy: Copy<'_>,
    options: WriterOptions,
) -> Result<WriteReport> {
    let num_rows = table.num_rows();
    if let Some(&bad) = copy.rows.and_then(|r| r.iter().find(|&&r| r >= num_rows)) {
        return Err(Error::InvalidArgument {
            what: "rows to copy".into(),
            why: format!("row {bad} is past the end of the dataset ({num_rows} rows)"),
        });
    }
    let specs = copy.fields.iter().map(|(n, t)| FieldSpec::new(n.clone(), t.clone())).collect();
    let n = copy.rows.map_or(num_rows, |r| r.len() as u64);
    let report = Writer::new(path, specs, options)?.write_indexed(n, |i| {
        let row = copy.rows.map_or(i, |r| r[i as usize]);
        let mut sample = Vec::with_capacity(copy.fields.len());
        for (name, ty) in copy.fields {
            sample.push(table.value(row, name, ty)?.to_sample_value());
        }
        Ok::<_, beton_storage::writer::SourceError>(sample)
    })?;
    if let Some(classes) = copy.classes {
        beton_storage::save_classes(path, None, Some(classes))?;
    }
    crate::columnar::after_write(path);
    Ok(report)
}
