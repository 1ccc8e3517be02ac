//! The edits of a version that SQL drives: delete the rows a predicate picks, set fields to
//! expressions over each row, add a column computed by an expression. Each evaluates its SQL
//! on the version's table, then commits through beton-dataset's edit of plain rows and values
//! ([`VersionedDataset::delete`], [`VersionedDataset::update_rows_with`],
//! [`VersionedDataset::add_column`]).

use arrow_array::{Array, ArrayRef};
use beton_storage::FieldType;

use crate::versioned::{VersionRef, VersionView, VersionedDataset, MAX_RETRIES};
use crate::{Error, IndexSet, Result};

/// SQL-driven edits of a [`VersionedDataset`], each a new version.
pub trait SqlEdits {
    /// Deletes the rows a SQL predicate (or `SELECT`) picks, as a new version.
    ///
    /// # Errors
    /// SQL errors; as [`VersionedDataset::delete`].
    fn delete_where(&self, sql: &str, message: &str) -> Result<VersionedDataset>;

    /// Sets fields of the rows a SQL predicate picks to SQL expressions over each row
    /// (`set = [("label", "label + 1"), ("caption", "'checked'")]`), as a new version: the new
    /// values go to column files (the data files are not touched). A predicate of `None`
    /// updates every row. An expression's values must fit the field as they are (a float
    /// expression is refused for an int field; `CAST(score AS BIGINT)` or
    /// `CAST(round(score) AS BIGINT)` converts explicitly): the rules of
    /// [`VersionedDataset::update_rows`].
    ///
    /// # Errors
    /// SQL errors naming their position; as [`VersionedDataset::update_rows`], naming the
    /// expression.
    fn update(
        &self,
        predicate: Option<&str>,
        set: &[(String, String)],
        message: &str,
    ) -> Result<VersionedDataset>;

    /// Adds field `name` computed by a SQL expression over each row (`score * 2`,
    /// `label IN (1, 2)`), its type that of the expression's result (int, float, bool, text).
    ///
    /// # Errors
    /// SQL errors; as [`VersionedDataset::add_column`].
    fn add_column_sql(&self, name: &str, expr: &str, message: &str) -> Result<VersionedDataset>;

    /// [`SqlEdits::delete_where`] with the predicate evaluated on `view`, this version opened
    /// already (its columnar copies and kept rows open: a caller holding the version's view,
    /// Python's `Dataset`, pays for the WHERE and the write alone).
    ///
    /// # Errors
    /// As [`SqlEdits::delete_where`].
    fn delete_where_in(&self, view: &VersionView, sql: &str, message: &str) -> Result<VersionedDataset>;

    /// [`SqlEdits::update`] with its first try evaluated on `view`, this version opened already.
    ///
    /// # Errors
    /// As [`SqlEdits::update`].
    fn update_in(
        &self,
        view: &VersionView,
        predicate: Option<&str>,
        set: &[(String, String)],
        message: &str,
    ) -> Result<VersionedDataset>;
}

impl SqlEdits for VersionedDataset {
    fn delete_where(&self, sql: &str, message: &str) -> Result<VersionedDataset> {
        self.delete_where_in(&self.view()?, sql, message)
    }

    fn delete_where_in(&self, view: &VersionView, sql: &str, message: &str) -> Result<VersionedDataset> {
        same_version(self, view)?;
        let rows = crate::select_indices(&view.table()?, sql)?;
        self.delete(&rows, Some(sql), message)
    }

    fn update_in(
        &self,
        view: &VersionView,
        predicate: Option<&str>,
        set: &[(String, String)],
        message: &str,
    ) -> Result<VersionedDataset> {
        same_version(self, view)?;
        update_retrying(self, Some(view), predicate, set, message)
    }

    fn update(
        &self,
        predicate: Option<&str>,
        set: &[(String, String)],
        message: &str,
    ) -> Result<VersionedDataset> {
        update_retrying(self, None, predicate, set, message)
    }

    fn add_column_sql(&self, name: &str, expr: &str, message: &str) -> Result<VersionedDataset> {
        // (Every type an expression gives has one column named after its field.)
        self.check_new_column(name, &FieldType::Int)?;
        let batch = {
            let view = self.view()?;
            let table = view.table()?;
            crate::query(&table, &format!("SELECT ({expr}) FROM samples"))?
        };
        let values = batch.column(0).clone();
        let ty = match values.data_type() {
            arrow_schema::DataType::Boolean => FieldType::Bool,
            arrow_schema::DataType::Utf8 | arrow_schema::DataType::LargeUtf8 => FieldType::Text,
            t if t.is_floating() => FieldType::Float,
            t if t.is_integer() => FieldType::Int,
            other => {
                return Err(Error::InvalidArgument {
                    what: format!("expression {expr:?}"),
                    why: format!("gives {other} values; a column holds int, float, bool or text"),
                })
            }
        };
        self.add_column(name, &ty, &values, message)
    }
}

/// [`SqlEdits::update`] of `v` (the first try on `view` when given): a conflict with another
/// writer that changed the same cells meanwhile evaluates the predicate and expressions again on
/// its version, as a database retries a conflicting UPDATE.
fn update_retrying(
    v: &VersionedDataset,
    mut view: Option<&VersionView>,
    predicate: Option<&str>,
    set: &[(String, String)],
    message: &str,
) -> Result<VersionedDataset> {
    let mut at = v.clone();
    for _ in 0..MAX_RETRIES {
        match update_once(&at, view.take(), predicate, set, message) {
            Err(Error::Conflict { .. }) => at = v.open_at(VersionRef::Latest)?,
            other => return other,
        }
    }
    Err(Error::Conflict {
        version: at.version(),
        why: format!("lost the race to update {MAX_RETRIES} times in a row"),
    })
}

/// Fails unless `view` is a view of `v`'s version.
fn same_version(v: &VersionedDataset, view: &VersionView) -> Result<()> {
    match view.version().map(VersionedDataset::version) {
        Some(n) if n == v.version() => Ok(()),
        other => Err(Error::InvalidArgument {
            what: "an edit's view".into(),
            why: format!("is of version {other:?}, not of the edited version {}", v.version()),
        }),
    }
}

/// One try of [`SqlEdits::update`] on version `at` (opened as `view` when given).
fn update_once(
    at: &VersionedDataset,
    view: Option<&VersionView>,
    predicate: Option<&str>,
    set: &[(String, String)],
    message: &str,
) -> Result<VersionedDataset> {
    if set.is_empty() {
        return Err(Error::InvalidArgument { what: "update".into(), why: "no field to set".into() });
    }
    let exprs: Vec<String> = set.iter().map(|(_, e)| format!("({e})")).collect();
    let sql = format!(
        "SELECT index, {} FROM samples{}",
        exprs.join(", "),
        predicate.map(|p| format!(" WHERE {p}")).unwrap_or_default()
    );
    let batch = match view {
        Some(view) => crate::query(&view.table()?, &sql)?,
        None => crate::query(&at.view()?.table()?, &sql)?,
    };
    let index =
        batch.column(0).as_any().downcast_ref::<arrow_array::UInt64Array>().map(|a| a.values().to_vec());
    let rows = IndexSet::from_sorted(index.unwrap_or_default())?;
    let values: Vec<(String, ArrayRef)> =
        set.iter().zip(batch.columns()[1..].iter()).map(|((f, _), a)| (f.clone(), a.clone())).collect();
    at.update_rows_with(&rows, values, Some(set), predicate, message)
}
