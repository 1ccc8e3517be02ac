//! Rows as Arrow: the field values of chosen rows, one column per field, in the column-file
//! types of [`crate::versioned::values`] (images as `{mode, width, height, data}` structs of their
//! stored bytes, never decoded). What `Dataset.take` and Ray Data's read tasks return, and what
//! the writer's `from_arrow` takes back byte for byte.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema};
use beton_storage::FieldType;

use crate::versioned::values::{column_file_type, ValuesBuilder};
use crate::{Error, Result, Table};

/// Whether `rows` rows of a table of `num_rows` are few: under one in 16. A few rows are read
/// where they lie; a fair share of the table from the whole column, made once (here, and in SQL's
/// projections of chosen rows).
pub fn few_rows(rows: usize, num_rows: u64) -> bool {
    (rows as u64).saturating_mul(16) < num_rows
}

/// The values of `fields` (all of the table's when `None`, in schema order) in `rows` (table row
/// indices, any order, repeats allowed), one Arrow column per field named after it.
///
/// The rows' payloads of a remote dataset are fetched first, in one batch of coalesced range
/// requests, rather than a request per value.
///
/// # Errors
/// [`Error::InvalidArgument`] for a field the table does not have (naming those it has) or a row
/// past the end; storage errors reading a value (naming the row).
pub fn take(table: &Table<'_>, rows: &[u64], fields: Option<&[String]>) -> Result<RecordBatch> {
    let all = table.fields();
    let chosen: Vec<(String, FieldType)> = match fields {
        None => all,
        Some(names) => names
            .iter()
            .map(|name| {
                all.iter().find(|(n, _)| n == name).cloned().ok_or_else(|| Error::InvalidArgument {
                    what: format!("field '{name}'"),
                    why: format!(
                        "is not a field of the dataset; its fields are {:?}",
                        all.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
                    ),
                })
            })
            .collect::<Result<_>>()?,
    };
    let num_rows = table.num_rows();
    if let Some(&row) = rows.iter().find(|&&r| r >= num_rows) {
        return Err(Error::InvalidArgument {
            what: "row".into(),
            why: format!("{row} is past the end of the dataset ({num_rows} rows)"),
        });
    }
    let _leases = fetch_remote_payloads(table, rows, &chosen)?;
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(chosen.len());
    let indices = std::cell::OnceCell::new();
    for (name, ty) in &chosen {
        // Ints, floats and bools are the table's own columns (column files applied): a gather,
        // no value at a time, when the rows are a fair share of the table (the column is made
        // for every row once; a take of a few rows reads just those).
        let share = !few_rows(rows.len(), num_rows);
        if share && matches!(ty, FieldType::Int | FieldType::Float | FieldType::Bool) {
            let column = table.column(name)?;
            if *column.data_type() == column_file_type(ty) {
                let indices = indices.get_or_init(|| arrow_array::UInt64Array::from(rows.to_vec()));
                columns.push(arrow_select::take::take(column.as_ref(), indices, None)?);
                continue;
            }
        }
        let mut builder = ValuesBuilder::new(ty);
        for &row in rows {
            match table.value(row, name, ty).map_err(|e| at_row(e, row, name))? {
                Some(value) => builder.push(&value)?,
                None => builder.push_null(),
            }
        }
        columns.push(builder.finish());
    }
    let schema = Schema::new(
        chosen
            .iter()
            .zip(&columns)
            .map(|((name, ty), c)| Field::new(name, column_file_type(ty), c.null_count() > 0))
            .collect::<Vec<_>>(),
    );
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows.len()));
    Ok(RecordBatch::try_new_with_options(Arc::new(schema), columns, &options)?)
}

/// For each remote data file behind `rows`, its rows' payloads, fetched in one go (held until
/// the leases drop). Nothing for local files.
fn fetch_remote_payloads(
    table: &Table<'_>,
    rows: &[u64],
    fields: &[(String, FieldType)],
) -> Result<Vec<beton_storage::Lease>> {
    let Some((first, _)) = fields.first() else { return Ok(Vec::new()) };
    if !table.is_remote() {
        return Ok(Vec::new());
    }
    // (data file, its rows), in the order the files are first met.
    let mut by_file: Vec<(&beton_storage::Dataset, Vec<u64>)> = Vec::new();
    for &row in rows {
        let (ds, file_row, _) = table.value_source(row, first)?;
        if !ds.is_remote() {
            continue;
        }
        match by_file.iter_mut().find(|(d, _)| std::ptr::eq(*d, ds)) {
            Some((_, file_rows)) => file_rows.push(file_row),
            None => by_file.push((ds, vec![file_row])),
        }
    }
    let mut leases = Vec::new();
    for (ds, file_rows) in by_file {
        leases.extend(ds.fetch_samples(file_rows)?);
    }
    Ok(leases)
}

/// `e` with the row and field it happened at.
fn at_row(e: Error, row: u64, field: &str) -> Error {
    match e {
        Error::InvalidArgument { what, why } => {
            Error::InvalidArgument { what: format!("{what} (row {row}, field '{field}')"), why }
        }
        other => other,
    }
}
