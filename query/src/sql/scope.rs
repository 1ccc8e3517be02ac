//! The scope of an expression: the rows it is evaluated over ([`Ctx`]) and the values it gives
//! ([`Val`]). Both the evaluator (`eval.rs`) and the functions it calls (`functions.rs`) read
//! columns through a [`Ctx`]; the `SELECT` pipeline (`exec.rs`) makes one per stage (all rows, the
//! rows WHERE keeps, one row per group). Kept apart from the evaluator so that the functions it
//! calls need not import it back.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use arrow_array::{Array, ArrayRef, Datum, UInt32Array};
use arrow_schema::DataType;
use arrow_select::take::take;
use sqlparser::ast::Expr;
use sqlparser::tokenizer::Span;

use super::ast::{expr_text, write_text};
use super::error::{at, sql_error};
use super::parse::TABLE_NAME;
use crate::error::Result;
use crate::table::Table;

/// An evaluated expression: a column of the rows in scope, or a length-1 scalar.
#[derive(Debug, Clone)]
pub(crate) struct Val {
    pub array: ArrayRef,
    pub scalar: bool,
}

impl Datum for Val {
    fn get(&self) -> (&dyn Array, bool) {
        (self.array.as_ref(), self.scalar)
    }
}

impl Val {
    pub(super) fn scalar(array: ArrayRef) -> Val {
        Val { array, scalar: true }
    }

    pub(super) fn data_type(&self) -> &DataType {
        self.array.data_type()
    }

    pub(super) fn like(&self, array: ArrayRef) -> Val {
        Val { array, scalar: self.scalar }
    }
}

/// Which rows of the table a context's columns hold.
enum Rows {
    /// Every row.
    All,
    /// The rows at these positions (ascending, unique), taken.
    At(UInt32Array),
    /// The rows `[start, end)`, sliced (no copy): a morsel of a WHERE evaluated on all cores.
    Window(std::ops::Range<usize>),
}

/// The rows an expression is evaluated over: the whole table, some of its rows, or a window.
pub(crate) struct Ctx<'t, 'a> {
    table: &'t Table<'a>,
    rows: Rows,
    num_rows: usize,
    /// In a grouped query: one row per group, and the values of the group keys and aggregates
    /// by their SQL text ([`expr_text`]); any other column reference is an error.
    groups: Option<HashMap<String, ArrayRef>>,
    /// The lengths of the keys of `groups`: a text of another length is not looked up.
    key_lengths: HashSet<usize>,
}

impl<'t, 'a> Ctx<'t, 'a> {
    /// Every row of `table`.
    pub fn all(table: &'t Table<'a>) -> Self {
        Ctx {
            table,
            rows: Rows::All,
            num_rows: table.num_rows() as usize,
            groups: None,
            key_lengths: HashSet::new(),
        }
    }

    /// The rows of `table` at `rows`, ascending and unique.
    pub fn rows(table: &'t Table<'a>, rows: UInt32Array) -> Self {
        debug_assert!(rows.values().windows(2).all(|w| w[0] < w[1]), "rows must ascend");
        if rows.len() as u64 == table.num_rows() {
            // Every row, in order: the columns as cached, without a copy.
            return Ctx::all(table);
        }
        Ctx { table, num_rows: rows.len(), rows: Rows::At(rows), groups: None, key_lengths: HashSet::new() }
    }

    /// The table rows `rows` (a range of positions), every column a slice of the table's.
    pub fn window(table: &'t Table<'a>, rows: std::ops::Range<usize>) -> Self {
        debug_assert!(rows.end as u64 <= table.num_rows());
        Ctx {
            table,
            num_rows: rows.len(),
            rows: Rows::Window(rows),
            groups: None,
            key_lengths: HashSet::new(),
        }
    }

    /// One row per group: expressions whose SQL text ([`expr_text`]) is a key of `values`
    /// evaluate to it.
    pub fn groups(table: &'t Table<'a>, num_groups: usize, values: HashMap<String, ArrayRef>) -> Self {
        let key_lengths = values.keys().map(String::len).collect();
        Ctx { table, rows: Rows::All, num_rows: num_groups, groups: Some(values), key_lengths }
    }

    /// The group values of a grouped context.
    pub fn into_groups(self) -> Option<HashMap<String, ArrayRef>> {
        self.groups
    }

    /// Whether this is a grouped context (one row per group).
    pub fn is_grouped(&self) -> bool {
        self.groups.is_some()
    }

    pub fn num_rows(&self) -> usize {
        self.num_rows
    }

    pub fn table(&self) -> &'t Table<'a> {
        self.table
    }

    /// Column `name` over the rows in scope.
    pub fn column(&self, name: &str, span: Span) -> Result<ArrayRef> {
        if self.groups.is_some() {
            return Err(sql_error(format!("'{name}' must appear in GROUP BY or inside an aggregate"), span));
        }
        // The position column over some rows is those rows' positions: not 100 M positions made
        // to take or slice a few of.
        let positions = |p: &mut dyn Iterator<Item = u64>| -> ArrayRef {
            std::sync::Arc::new(arrow_array::UInt64Array::from_iter_values(p))
        };
        match (&self.rows, name) {
            (Rows::At(rows), "index") => Ok(positions(&mut rows.values().iter().map(|&r| u64::from(r)))),
            (Rows::Window(w), "index") => Ok(positions(&mut w.clone().map(|r| r as u64))),
            (Rows::All, _) => self.table.column(name).map_err(at(span)),
            (Rows::At(rows), _) => {
                // A few rows of a big table: gathered from the data files' copies, not the whole
                // column made for them.
                if beton_dataset::take::few_rows(rows.len(), self.table.num_rows()) {
                    if let Some(array) = self.table.gather_rows(name, rows.values()) {
                        return Ok(array);
                    }
                }
                let array = self.table.column(name).map_err(at(span))?;
                Ok(take(array.as_ref(), rows, None).map_err(|e| at(span)(e.into()))?)
            }
            (Rows::Window(w), _) => Ok(self.table.column(name).map_err(at(span))?.slice(w.start, w.len())),
        }
    }

    /// The column `name` refers to: itself, without a `samples.` qualifier, or the one column
    /// that matches it ignoring ASCII case. Unknown names are kept (the lookup then lists the
    /// columns).
    pub fn resolve(&self, name: &str) -> String {
        let names = self.table.column_names();
        let bare = name.strip_prefix(TABLE_NAME).and_then(|n| n.strip_prefix('.'));
        for candidate in [Some(name), bare].into_iter().flatten() {
            if names.contains(&candidate) {
                return candidate.to_string();
            }
            let mut folded = names.iter().filter(|n| n.eq_ignore_ascii_case(candidate));
            if let (Some(only), None) = (folded.next(), folded.next()) {
                return only.to_string();
            }
        }
        name.to_string()
    }

    /// `v` as a full column of [`Ctx::num_rows`] rows.
    pub fn broadcast(&self, v: Val) -> Result<ArrayRef> {
        if !v.scalar {
            return Ok(v.array);
        }
        let zeros = UInt32Array::from(vec![0u32; self.num_rows]);
        Ok(take(v.array.as_ref(), &zeros, None)?)
    }

    /// In a grouped context, the value of the highest node of `chain` (or of `bottom`) whose text
    /// is a group key or aggregate, and the level to continue from. The text of each node is the
    /// one below it and ` {op} {right}`, so one buffer grows from the bottom up; it is looked up
    /// only at the lengths of the keys, and no longer once it is longer than every key.
    pub(super) fn group_value(&self, bottom: &Expr, chain: &[&Expr]) -> Option<(Val, usize)> {
        let groups = self.groups.as_ref()?;
        let longest = self.key_lengths.iter().copied().max().unwrap_or(0);
        let find = |text: &str| {
            if self.key_lengths.contains(&text.len()) {
                groups.get(text).map(|a| Val { array: a.clone(), scalar: false })
            } else {
                None
            }
        };
        let mut text = expr_text(bottom);
        let mut found = find(&text).map(|v| (v, chain.len()));
        for level in (0..chain.len()).rev() {
            if text.len() > longest {
                break;
            }
            let Expr::BinaryOp { op, right, .. } = chain[level] else { break };
            let _ = write!(text, " {op} ");
            write_text(right, &mut text);
            if let Some(v) = find(&text) {
                found = Some((v, level));
            }
        }
        found
    }
}
