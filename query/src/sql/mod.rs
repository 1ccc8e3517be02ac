//! SQL over the data table: a predicate or a `SELECT` over `samples` in, row ids or a record batch
//! out.
//!
//! The text is parsed by sqlparser (`parse.rs`), expressions are evaluated over whole Arrow columns
//! with the compute kernels (`eval.rs`) in a scope of rows (`scope.rs`), with the functions that
//! read the file itself in `functions.rs`, and `exec.rs` runs the `SELECT` pipeline (filter, group,
//! project, sort, limit). Only the columns an expression names are materialised by [`Table`].
//! The modules import one another without a cycle: `exec` → `eval` → `functions` → `scope` →
//! `parse` → `ast`, with `error` under all of them.
//!
//! Grammar: `SELECT * | expr [AS alias], … FROM samples [WHERE expr] [GROUP BY expr, …]
//! [HAVING expr] [ORDER BY expr [ASC|DESC] [NULLS FIRST|LAST], …] [LIMIT n] [OFFSET m]`, where
//! `expr` has comparisons, `AND`/`OR`/`NOT` (three-valued), `[NOT] IN (list)`, `[NOT] BETWEEN`,
//! `[NOT] LIKE`/`ILIKE` `[ESCAPE 'c']`, `CASE [x] WHEN … THEN … [ELSE …] END`, `IS [NOT] NULL`,
//! `IS [NOT] TRUE/FALSE`, `+ - * / %`, unary `-`, `CAST(x AS INT|BIGINT|DOUBLE|FLOAT|VARCHAR|TEXT|
//! BOOLEAN)` and `x::type`, `lower`/`upper`/`length`/`abs`, `json_extract(json_field, '$.a.b')`
//! (reads the JSON payloads), and the aggregates `count(*)`, `count(x)`, `sum`, `min`, `max`, `avg`
//! (expressions over them allowed).
//! Dotted names (`image.width`) name columns; `samples.` qualifiers and ASCII case are forgiven.
//! Numbers compare across column types: integers widen to Int64, anything with a float to Float64.
//!
//! Floats compare as in PostgreSQL: `-0.0 = 0.0`, and NaN equals NaN and is greater than every
//! other number (`x > 1e308` holds for NaN); `GROUP BY` puts `0.0` and `-0.0` in one group and
//! every NaN in one group; `ORDER BY`, `min` and `max` order floats the same way. `LIKE` and
//! `ILIKE` take `%` and `_` as wildcards and `\` as escape character unless `ESCAPE 'c'` names another one.
//! Arithmetic on BIGINT that overflows (`9223372036854775807 + 1`, `-(-9223372036854775807 - 1)`,
//! `abs(-9223372036854775808)`, `(-9223372036854775807 - 1) / -1`) is an error, never a wrapped
//! value; `-9223372036854775808` itself is a BIGINT literal. `sum` of integers is an error only when
//! its total does not fit BIGINT (whatever the order of the rows on the way).
//!
//! Limits: expressions nest at most [`MAX_NESTING`] levels deep, where each open parenthesis or
//! bracket, each open `CASE` and each operator in a run of prefix operators (`NOT NOT x`, `- -x`)
//! is a level; deeper text is an [`Error::Sql`] at the token that goes past the limit. Chains of
//! binary operators (`a OR b OR …`, `x + x + …`) and `IN` lists have no length limit: they are
//! evaluated in loops, not by recursion, and a 20,000-term chain or a 100,000-value `IN` list runs
//! on a 2 MB thread stack. Texts of more than [`MAX_OPERATORS`] operator tokens are refused.
//! Every entry point runs on a stack sized for its text (stacker), so no text overflows the stack.
//!
//! Every error is [`Error::Sql`] with the line and column in the SQL text (both 1-based: an error
//! about the statement as a whole points at its first token).

mod ast;
mod duplicates;
mod error;
mod eval;
mod exec;
mod functions;
mod fused;
mod ivf;
mod kernels;
mod nearest;
mod parallel;
mod parse;
mod scope;

pub use duplicates::{
    groups, image_hashes, image_pairs, image_pairs_between, near_pairs, near_pairs_between, Pair,
};
pub use ivf::IvfIndex;
pub use nearest::{nearest, Neighbour};
pub use parse::{Param, MAX_NESTING, MAX_OPERATORS};

use arrow_array::RecordBatch;

use crate::error::{Error, Result};
use crate::index_set::IndexSet;
use crate::table::Table;

/// The row ids of `table` that a bare predicate (`label < 3 AND image.width >= 224`) or a
/// `SELECT … FROM samples WHERE …` selects. For a `SELECT`, its projection is ignored, but
/// `ORDER BY`/`LIMIT`/`OFFSET` choose which rows are kept (the ids come back sorted).
///
/// Never panics and never overflows the stack, for any text.
///
/// # Errors
/// [`Error::Sql`] with the position in `predicate_or_query` for text that does not parse, nests
/// deeper than [`MAX_NESTING`], names unknown columns, mixes types, overflows BIGINT arithmetic or
/// uses unsupported syntax (`GROUP BY` and aggregates included); storage errors from
/// materialising columns.
pub fn select_indices(table: &Table, predicate_or_query: &str) -> Result<IndexSet> {
    select_indices_with(table, predicate_or_query, &[])
}

/// [`select_indices`] with values for the text's parameters (`label = $l AND score > $min`,
/// `params` `[("l", Param::Int(3)), ("min", Param::Float(0.5))]`).
///
/// # Errors
/// As [`select_indices`]; [`Error::Sql`] at a `$name` `params` has no value for, and for a
/// parameter the text never names.
pub fn select_indices_with(
    table: &Table,
    predicate_or_query: &str,
    params: &[(String, Param)],
) -> Result<IndexSet> {
    let ids = run(predicate_or_query, params, |parsed| match parsed {
        parse::Parsed::Predicate(expr) => exec::filter_ids(table, expr),
        parse::Parsed::Select(select) => exec::select_ids(table, select),
    })?;
    // The columns were read by the query, after they were handed out: zeros read from a file
    // that shrank meanwhile are an error, not an answer.
    table.check_intact()?;
    Ok(ids)
}

/// Runs `SELECT … FROM samples …` over `table`. A bare predicate is `SELECT * FROM samples WHERE`
/// that predicate: every column of the matching rows.
///
/// Never panics and never overflows the stack, for any text.
///
/// # Errors
/// As [`select_indices`].
pub fn query(table: &Table, sql: &str) -> Result<RecordBatch> {
    query_with(table, sql, &[])
}

/// [`query`] with values for the text's parameters ([`select_indices_with`]).
///
/// # Errors
/// As [`select_indices_with`].
pub fn query_with(table: &Table, sql: &str, params: &[(String, Param)]) -> Result<RecordBatch> {
    let batch = run(sql, params, |parsed| match parsed {
        parse::Parsed::Predicate(e) => exec::filter_rows(table, e),
        parse::Parsed::Select(select) => exec::run(table, select),
    })?;
    table.check_intact()?;
    Ok(batch)
}

/// What a query selects, for showing its rows: a bare predicate gives the matching rows in
/// ascending order (no values: nothing was asked for); `SELECT … FROM samples …` gives its
/// result as it comes (its order, its columns), which shows rows only when it has an `index`
/// column.
#[derive(Debug, Clone)]
pub enum Selected {
    /// The rows a bare predicate matches.
    Rows(IndexSet),
    /// A SELECT's result.
    Result(RecordBatch),
}

/// Runs `predicate_or_query` over `table` as [`select_indices`] does for a bare predicate and
/// as [`query`] does for a SELECT, keeping the SELECT's order and columns.
///
/// # Errors
/// As [`query`].
pub fn select_rows(table: &Table, predicate_or_query: &str) -> Result<Selected> {
    run(predicate_or_query, &[], |parsed| match parsed {
        parse::Parsed::Predicate(expr) => exec::filter_ids(table, expr).map(Selected::Rows),
        parse::Parsed::Select(select) => exec::run(table, select).map(Selected::Result),
    })
}

/// Parses `sql` and runs `f` on it, on a stack deep enough for the tree the text can give (the
/// tree is taken apart without recursion, and all else recurses through [`ast::deeper`]; this is
/// the guarantee for what remains: sqlparser's `Drop` of forms beton refuses); then places the
/// error, if any, in the text.
fn run<T>(sql: &str, params: &[(String, Param)], f: impl FnOnce(&parse::Parsed) -> Result<T>) -> Result<T> {
    let go = || {
        let mut tokens = parse::tokenize(sql)?;
        tokens.bind(params)?;
        let stack = tokens.stack_bytes();
        stacker::maybe_grow(stack, stack, || f(&parse::parse(sql, tokens)?))
    };
    go().map_err(|e| locate(sql, reanchor(sql, e)))
}

/// An error without a position (line 0: it is about the statement as a whole, or sqlparser gave the
/// node no span) placed at the first token of the text.
fn locate(sql: &str, e: Error) -> Error {
    match e {
        Error::Sql { message, line: 0, .. } | Error::Sql { message, column: 0, .. } => {
            let (mut line, mut column) = (1, 1);
            for c in sql.chars() {
                match c {
                    '\n' => (line, column) = (line + 1, 1),
                    c if c.is_whitespace() => column += 1,
                    _ => break,
                }
            }
            Error::Sql { message, line, column }
        }
        other => other,
    }
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

#[cfg(test)]
mod tests {
    //! Whole queries at several thread counts: the parallel kernels (`parallel`) seen through
    //! `query`, which is what users call.

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{Array, Float64Array};
    use beton_storage::{Dataset, FieldSpec, FieldType, SampleValue, Writer, WriterOptions};

    use super::parallel::MORSEL;
    use super::*;

    fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(f)
    }

    /// A table of `n` rows: `a` (ints in 0..1000 with runs), `f` (floats of many magnitudes), `w`
    /// (ints over a range wider than a morsel).
    fn table_file(dir: &std::path::Path, n: u64) -> std::path::PathBuf {
        let path = dir.join("groups.beton");
        let fields = vec![
            FieldSpec::new("a", FieldType::Int),
            FieldSpec::new("f", FieldType::Float),
            FieldSpec::new("w", FieldType::Int),
        ];
        Writer::new(&path, fields, WriterOptions::default())
            .unwrap()
            .write_indexed(n, |i| {
                let a = ((i / 5000) * 37 + i % 11) % 1000;
                let f = ((i * 2654435761) % 100_003) as f64 * 1.37e-3 - 50.0 + (i % 7) as f64 * 1e9;
                Ok(vec![
                    SampleValue::Int(a as i64),
                    SampleValue::Float(f),
                    SampleValue::Int(((i * 7919) % 150_000) as i64 - 1000),
                ])
            })
            .unwrap();
        path
    }

    #[test]
    fn grouped_and_top_k_queries_give_one_result_at_one_and_three_threads() {
        let tmp = tempfile::tempdir().unwrap();
        let n = 3 * MORSEL as u64 + 17;
        let ds = Dataset::open(table_file(tmp.path(), n)).unwrap();
        let table = Table::new(&ds);
        let queries = [
            "SELECT a, count(*), count(f), sum(a), sum(f), avg(f), min(f), max(w) FROM samples GROUP BY a",
            "SELECT a, count(*) AS n FROM samples WHERE f > 0 GROUP BY a HAVING count(*) > 3 ORDER BY n DESC, a",
            "SELECT w, count(*), avg(f) FROM samples GROUP BY w ORDER BY w LIMIT 50",
            "SELECT a % 3 AS r, f > 0 AS p, count(*), sum(f) FROM samples GROUP BY a % 3, f > 0",
            "SELECT count(*), avg(f), sum(w), min(a) FROM samples",
            "SELECT count(*), avg(f) FROM samples WHERE a > 5000",
            "SELECT index, f FROM samples ORDER BY f DESC LIMIT 10",
            "SELECT index, a FROM samples ORDER BY a LIMIT 100 OFFSET 3",
            "SELECT index FROM samples WHERE a < 500 ORDER BY w DESC LIMIT 7",
        ];
        for sql in queries {
            let run = |threads| in_pool(threads, || query(&table, sql).unwrap());
            let one: RecordBatch = run(1);
            assert_eq!(one, run(3), "{sql}");
            assert_eq!(one, run(2), "{sql}");
        }
        // The float sums are bit for bit the morsel-wise sums.
        let batch = in_pool(2, || query(&table, "SELECT sum(f) FROM samples").unwrap());
        let got = batch.column(0).as_any().downcast_ref::<Float64Array>().unwrap().value(0);
        let f = table.column("f").unwrap();
        let f = f.as_primitive::<arrow_array::types::Float64Type>().values();
        let want = f.chunks(MORSEL).fold(0.0, |s, m| s + m.iter().fold(0.0, |t, x| t + x));
        assert_eq!(got.to_bits(), want.to_bits());
        // The top rows, ties in row order, as a full sort on (a, index) gives them.
        let top = in_pool(3, || query(&table, "SELECT index FROM samples ORDER BY a LIMIT 20").unwrap());
        let all = in_pool(1, || query(&table, "SELECT index, a FROM samples ORDER BY a, index").unwrap());
        assert_eq!(top.column(0), &all.column(0).slice(0, 20));
    }

    #[test]
    fn integer_sums_fail_only_when_the_total_does_not_fit() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("big.beton");
        let values = [i64::MAX, 1, -1, i64::MIN, i64::MIN];
        Writer::new(&path, vec![FieldSpec::new("x", FieldType::Int)], WriterOptions::default())
            .unwrap()
            .write_indexed(values.len() as u64, |i| Ok(vec![SampleValue::Int(values[i as usize])]))
            .unwrap();
        let ds = Dataset::open(&path).unwrap();
        let table = Table::new(&ds);
        // i64::MAX + 1 - 1: the running sum leaves BIGINT, the total does not.
        let batch = query(&table, "SELECT sum(x) FROM samples WHERE index < 3").unwrap();
        let sum = batch.column(0).as_primitive::<Int64Type>().value(0);
        assert_eq!(sum, i64::MAX);
        let err = query(&table, "SELECT sum(x) FROM samples WHERE index >= 3").unwrap_err();
        assert!(err.to_string().contains("sum overflows BIGINT"), "{err}");
    }
}
