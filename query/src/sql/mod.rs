//! SQL over the data table: a predicate or a `SELECT` over `samples` in, row ids or a record batch
//! out.
//!
//! The text is parsed by sqlparser (`parse.rs`), expressions are evaluated over whole Arrow columns
//! with the compute kernels (`eval.rs`), and `exec.rs` runs the `SELECT` pipeline (filter, group,
//! project, sort, limit). Only the columns an expression names are materialised by [`Table`].
//!
//! Grammar: `SELECT * | expr [AS alias], … FROM samples [WHERE expr] [GROUP BY expr, …]
//! [HAVING expr] [ORDER BY expr [ASC|DESC] [NULLS FIRST|LAST], …] [LIMIT n] [OFFSET m]`, where
//! `expr` has comparisons, `AND`/`OR`/`NOT` (three-valued), `[NOT] IN (list)`, `[NOT] BETWEEN`,
//! `[NOT] LIKE`/`ILIKE`, `CASE [x] WHEN … THEN … [ELSE …] END`, `IS [NOT] NULL`, `IS [NOT] TRUE/FALSE`, `+ - * / %`, unary `-`,
//! `CAST(x AS INT|BIGINT|DOUBLE|FLOAT|VARCHAR|TEXT|BOOLEAN)` and `x::type`, `lower`/`upper`/
//! `length`/`abs`, `json_extract(json_field, '$.a.b')` (reads the JSON payloads), and the
//! aggregates `count(*)`, `count(x)`, `sum`, `min`, `max`, `avg` (expressions over them allowed).
//! Dotted names (`image.width`) name columns; `samples.` qualifiers and ASCII case are forgiven.
//! Numbers compare across column types: integers widen to Int64, anything with a float to Float64.
//!
//! Every error is [`Error::Sql`] with the line and column in the SQL text.

mod eval;
mod exec;
mod parse;

use arrow_array::RecordBatch;
use sqlparser::ast::Spanned;
use sqlparser::tokenizer::Span;

use crate::error::{Error, Result};
use crate::index_set::IndexSet;
use crate::table::Table;

/// The row ids of `table` that a bare predicate (`label < 3 AND image.width >= 224`) or a
/// `SELECT … FROM samples WHERE …` selects. For a `SELECT`, its projection is ignored, but
/// `ORDER BY`/`LIMIT`/`OFFSET` choose which rows are kept (the ids come back sorted).
///
/// # Errors
/// [`Error::Sql`] with the position in `predicate_or_query` for text that does not parse, unknown
/// columns, mixed types and unsupported syntax (`GROUP BY` and aggregates included); storage
/// errors from materialising columns.
pub fn select_indices(table: &Table, predicate_or_query: &str) -> Result<IndexSet> {
    let run = || match parse::parse(predicate_or_query)? {
        parse::Parsed::Predicate(expr) => exec::filter_ids(table, &expr),
        parse::Parsed::Select(select) => exec::select_ids(table, &select),
    };
    run().map_err(|e| reanchor(predicate_or_query, e))
}

/// Runs `SELECT … FROM samples …` over `table`.
///
/// # Errors
/// As [`select_indices`]; a bare predicate is an error here.
pub fn query(table: &Table, sql: &str) -> Result<RecordBatch> {
    let run = || match parse::parse(sql)? {
        parse::Parsed::Predicate(e) => {
            Err(sql_error("expected a SELECT statement (a bare predicate is for select_indices)", e.span()))
        }
        parse::Parsed::Select(select) => exec::run(table, &select),
    };
    run().map_err(|e| reanchor(sql, e))
}

/// sqlparser's span of `-x` and of `CAST(x AS t)` is the span of `x`; errors about the whole
/// expression should point at its first token. Moves such an error left over the text: to the
/// `-` of a negative LIMIT/OFFSET, to the `CAST` keyword of an unsupported cast.
fn reanchor(sql: &str, e: Error) -> Error {
    let Error::Sql { message, line, column } = e else { return e };
    let keep = |message| Error::Sql { message, line, column };
    let Some(text) = sql.split('\n').nth(line.saturating_sub(1) as usize) else { return keep(message) };
    let chars: Vec<char> = text.chars().collect();
    // 0-based index of the character just before the error position, skipping whitespace.
    let before = |mut i: usize| {
        while i > 0 && chars[i - 1].is_whitespace() {
            i -= 1;
        }
        i.checked_sub(1)
    };
    let start = (column as usize).saturating_sub(1).min(chars.len());
    let moved = if message.starts_with("expected a non-negative integer, got -") {
        before(start).filter(|&i| chars[i] == '-')
    } else if message.starts_with("CAST to ") {
        before(start).filter(|&i| chars[i] == '(').and_then(before).and_then(|end| {
            let mut i = end + 1;
            while i > 0 && (chars[i - 1].is_ascii_alphanumeric() || chars[i - 1] == '_') {
                i -= 1;
            }
            let word: String = chars[i..=end].iter().collect::<String>().to_ascii_uppercase();
            word.ends_with("CAST").then_some(i)
        })
    } else {
        None
    };
    match moved {
        Some(i) => Error::Sql { message, line, column: i as u64 + 1 },
        None => keep(message),
    }
}

/// An [`Error::Sql`] at the start of `span`.
pub(crate) fn sql_error(message: impl Into<String>, span: Span) -> Error {
    Error::Sql { message: message.into(), line: span.start.line, column: span.start.column }
}

/// Attaches `span` to errors that have no SQL position (Arrow errors, unknown columns).
pub(crate) fn at(span: Span) -> impl Fn(Error) -> Error {
    move |e| match e {
        Error::Sql { .. } | Error::Storage(_) => e,
        Error::NoSuchColumn { .. } => sql_error(e.to_string(), span),
        Error::Arrow(a) => sql_error(a.to_string(), span),
        other => sql_error(other.to_string(), span),
    }
}
