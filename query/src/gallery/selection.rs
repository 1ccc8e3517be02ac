//! The rows a gallery shows and what chose them: every row, a set, rows one by one, a
//! predicate or a `SELECT` (whose other columns become captions). Its own file so that the
//! summaries read it without depending on the builder (`mod.rs`), which calls them.

use arrow_array::{Array, ArrayRef, RecordBatch, UInt64Array};

use crate::error::{Error, Result};
use crate::index_set::IndexSet;
use crate::sql::Selected;
use crate::Table;

/// The rows a gallery shows, in order, and what chose them.
#[derive(Debug, Clone)]
pub struct Selection {
    pub(super) rows: Vec<u64>,
    /// A query's result, one row per entry of `rows` (captions and grouping may come from it).
    pub(super) result: Option<RecordBatch>,
    /// The order means something (a SELECT's, rows given one by one): each group shows its
    /// first rows; otherwise rows spread evenly over it.
    pub(super) ordered: bool,
    /// The query text, or a description of the set.
    pub(super) described: String,
}

impl Selection {
    /// Every row of `table`.
    pub fn all(table: &Table<'_>) -> Selection {
        Selection {
            rows: (0..table.num_rows()).collect(),
            result: None,
            ordered: false,
            described: String::new(),
        }
    }

    /// These rows, in this order (repeats allowed).
    pub fn of_rows(rows: Vec<u64>) -> Selection {
        Selection { rows, result: None, ordered: true, described: String::new() }
    }

    /// The rows of `set` (table rows), ascending.
    pub fn of_set(set: &IndexSet) -> Selection {
        Selection { rows: set.as_slice().to_vec(), result: None, ordered: false, described: String::new() }
    }

    /// The rows `sql` selects: a bare predicate's matches, or a `SELECT`'s rows in its order
    /// (it must select the `index` column), its other columns becoming captions.
    ///
    /// # Errors
    /// SQL errors (with their position); [`Error::InvalidArgument`] for a `SELECT` without an
    /// `index` column.
    pub fn of_sql(table: &Table<'_>, sql: &str) -> Result<Selection> {
        let mut selection = match crate::sql::select_rows(table, sql)? {
            Selected::Rows(set) => Selection::of_set(&set),
            Selected::Result(batch) => Selection::of_result(batch)?,
        };
        selection.described = sql.trim().to_string();
        Ok(selection)
    }

    /// A query's result (rows in its order): its `index` column (UInt64, or any integer
    /// column without nulls or negatives) names the rows; its other columns become captions.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] without an `index` column, or with one that holds nulls or
    /// negative values.
    pub fn of_result(batch: RecordBatch) -> Result<Selection> {
        let bad = |why: String| Error::InvalidArgument { what: "rows to show".into(), why };
        let Some(index) = batch.column_by_name("index") else {
            let columns: Vec<&str> = batch.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
            return Err(bad(format!(
                "a query's result shows rows only with an `index` column (SELECT index, ... FROM samples ...); \
                 its columns are: {}",
                columns.join(", ")
            )));
        };
        let index = arrow_cast::cast(index, &arrow_schema::DataType::UInt64)
            .map_err(|e| bad(format!("the `index` column is not of row numbers: {e}")))?;
        let index = index
            .as_any()
            .downcast_ref::<UInt64Array>()
            .ok_or_else(|| bad("the `index` column is not of row numbers".into()))?;
        if index.null_count() > 0 {
            return Err(bad("the `index` column has nulls".into()));
        }
        Ok(Selection {
            rows: index.values().to_vec(),
            result: Some(batch),
            ordered: true,
            described: String::new(),
        })
    }

    /// The rows, in order.
    pub fn rows(&self) -> &[u64] {
        &self.rows
    }

    /// `column` (one value per table row) at the selected rows, in selection order: the column
    /// itself when the selection is every row in order.
    pub(super) fn gather(&self, column: ArrayRef) -> Result<ArrayRef> {
        let every_row =
            self.rows.len() == column.len() && self.rows.iter().enumerate().all(|(i, &r)| i as u64 == r);
        if every_row {
            return Ok(column);
        }
        let rows = UInt64Array::from(self.rows.clone());
        Ok(arrow_select::take::take(column.as_ref(), &rows, None)?)
    }
}
