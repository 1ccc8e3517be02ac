//! Copies rows of a table (a `.beton` file's, or a version's) into a new `.beton` file with every
//! value as it is stored: JPEGs and other payloads byte for byte, never decoded or re-encoded
//! (`ImageSource::Stored`). Export and compaction of versions, and Python's
//! `DatasetWriter.from_indexed_dataset` of a beton dataset, go through it.

use std::path::Path;

use beton_storage::{FieldSpec, FieldType, SampleValue, WriteReport, Writer, WriterOptions};

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

/// A field's NULLs that a copy had to fill: a `.beton` file holds a value in every row.
#[derive(Debug, Clone, PartialEq)]
pub struct Filled {
    /// The field.
    pub field: String,
    /// What the NULLs were written as (`0`, `NaN`, `''`, ...).
    pub with: &'static str,
    /// The rows of the file written that hold the filler, ascending.
    pub rows: Vec<u64>,
}

/// What [`copy_rows`] wrote.
#[derive(Debug, Clone)]
pub struct Copied {
    /// The write's report.
    pub report: WriteReport,
    /// The NULLs written as a filler value, by field (none when the rows had no NULL).
    pub filled: Vec<Filled>,
}

/// The value a NULL of a field of type `ty` is written as in a `.beton` file, and its name:
/// the type's zero ([`FieldKind::zero`](beton_storage::FieldKind::zero): NaN for floats, JSON
/// `null`, an empty payload, a 1x1 black image).
pub fn null_filler(ty: &FieldType) -> (SampleValue, &'static str) {
    ty.kind().zero()
}

/// Writes rows of `table` as a new `.beton` file at `path` (atomically), the values of `copy`'s
/// fields as `table` stores them (column-file values of a version included). A NULL (a `.beton`
/// file has none) is written as [`null_filler`]'s value and listed in [`Copied::filled`].
///
/// # Errors
/// [`Error::InvalidArgument`] for a row past the end of the table; storage errors for a field a
/// data file lacks, and writing.
pub fn copy_rows(table: &Table<'_>, path: &Path, copy: Copy<'_>, options: WriterOptions) -> Result<Copied> {
    let num_rows = table.num_rows();
    if let Some(&bad) = copy.rows.and_then(|r| r.iter().find(|&&r| r >= num_rows)) {
        return Err(Error::InvalidArgument {
            what: "rows to copy".into(),
            why: format!("row {bad} is past the end of the dataset ({num_rows} rows)"),
        });
    }
    // A custom field's row bytes may point into its file's heap, where only its FFCV `Field`
    // class knows: copied into another file they would point at other bytes.
    if let Some((name, _)) = copy.fields.iter().find(|(_, t)| matches!(t, FieldType::Custom(_))) {
        if table.has_custom_payloads() {
            return Err(Error::InvalidArgument {
                what: format!("field '{name}'"),
                why: "is of a custom type whose values point into the file's heap (its Field's encode \
                      called malloc); beton cannot move them into another file: leave the field out \
                      (columns=...) or read it with its Field class and write it again"
                    .into(),
            });
        }
    }
    let specs = copy.fields.iter().map(|(n, t)| FieldSpec::new(n.clone(), t.clone())).collect();
    let n = copy.rows.map_or(num_rows, |r| r.len() as u64);
    // (field position, file row) of each NULL written as a filler.
    let nulls = std::sync::Mutex::new(Vec::<(usize, u64)>::new());
    let report = Writer::new(path, specs, options)?.write_indexed(n, |i| {
        let row = copy.rows.map_or(i, |r| r[i as usize]);
        let mut sample = Vec::with_capacity(copy.fields.len());
        for (k, (name, ty)) in copy.fields.iter().enumerate() {
            sample.push(match table.value(row, name, ty)? {
                Some(value) => value.to_sample_value(),
                None => {
                    nulls.lock().unwrap_or_else(|e| e.into_inner()).push((k, i));
                    null_filler(ty).0
                }
            });
        }
        Ok::<_, beton_storage::writer::SourceError>(sample)
    })?;
    if let Some(classes) = copy.classes {
        beton_storage::save_classes(path, None, Some(classes))?;
    }
    crate::columnar::after_write(path);
    let mut nulls = nulls.into_inner().unwrap_or_else(|e| e.into_inner());
    nulls.sort_unstable();
    let mut filled: Vec<Filled> = Vec::new();
    for (k, row) in nulls {
        let (name, ty) = &copy.fields[k];
        match filled.last_mut() {
            Some(f) if f.field == *name => f.rows.push(row),
            _ => filled.push(Filled { field: name.clone(), with: null_filler(ty).1, rows: vec![row] }),
        }
    }
    Ok(Copied { report, filled })
}
