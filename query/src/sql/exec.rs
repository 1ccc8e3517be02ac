//! The `SELECT` pipeline: WHERE (a boolean column to row ids), GROUP BY (row-format keys in a hash
//! map), aggregates, projection, ORDER BY (`lexsort_to_indices`) and LIMIT/OFFSET.
//!
//! Two shortcuts keep the common metadata queries near the cost of one pass over their columns
//! (benches/query_compare.rs): a GROUP BY on one integer key with a small range of values looks
//! groups up in a table instead of hashing encoded rows ([`Groups::dense`]), and an ORDER BY of
//! one numeric key with a small LIMIT keeps the best rows in a heap instead of sorting every row
//! ([`top_k`]). Both give the general path's result: the same groups, numbered in order of first
//! appearance; the same order of values, with ties in row order (an order the general sort, which
//! is unstable, may also give). Both, and the counts and sums per group, run in parallel morsels
//! with the same result at any number of threads (`parallel.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, UInt32Array};
use arrow_ord::sort::{lexsort_to_indices, sort_to_indices, SortColumn};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, Field, Schema, SortOptions};
use arrow_select::take::take;
use sqlparser::ast::{Expr, SelectItem, Value};
use sqlparser::tokenizer::Span;

use super::ast::{column_name, expr_text, pos, select_item_start};
use super::error::{at, sql_error};
use super::eval::{canonical_floats, function_args, sql_float_order, sql_type_name, AGGREGATES};
use super::functions::{self, Kind};
use super::parallel::{smallest, Groups};
use super::parse::{unsupported, OrderKey, SelectPlan};
use super::scope::{Ctx, Val};
use crate::error::Result;
use crate::index_set::IndexSet;
use crate::table::Table;

/// The rows where `predicate` is true (NULL counts as false), ascending.
fn matching_rows(ctx: &Ctx, predicate: &Expr) -> Result<Vec<u32>> {
    // A fused conjunction's ids without a bitmap of the table: an edit's `index >= 50000000 AND
    // index < 50000010` over 100 M rows made, counted and scanned 12.5 MB of bits (three
    // quarters of the update's 6.5 ms).
    if let Some(ids) = fused_ids(ctx, predicate) {
        // (Tables past 2^32 rows are refused before: `check_size`.)
        return Ok(ids?.into_iter().map(|i| i as u32).collect());
    }
    let bits = unfused_mask(ctx, predicate)?;
    let mut rows = Vec::with_capacity(bits.count_set_bits());
    rows.extend(bits.set_indices_u32());
    Ok(rows)
}

/// A bit per row in scope, set where `predicate` is true (NULL counts as false), by the general
/// evaluator: in morsels on all cores where it can.
fn unfused_mask(ctx: &Ctx, predicate: &Expr) -> Result<arrow_buffer::BooleanBuffer> {
    if let Some(mask) = in_morsels(ctx, predicate) {
        return mask;
    }
    whole_mask(ctx, predicate)
}

/// Whether the fused pass (`col < 3 AND other >= 0.5 AND ...` over every row in parallel
/// morsels) is faster than arrow's kernels here: compiled for the baseline x86-64 (no vector
/// compares of 64-bit integers) and run on one thread it is not (`query/examples/where_ab.rs`:
/// 0.8x), and arrow's kernels take it (both give the same rows).
fn fused_pays() -> bool {
    rayon::current_num_threads() > 1 || super::fused::Isa::detected().vectorised()
}

/// The fused pass's row ids of `predicate` over every row of `ctx`, where it takes the predicate
/// and pays ([`fused_pays`]); `None` leaves it to [`unfused_mask`].
fn fused_ids(ctx: &Ctx, predicate: &Expr) -> Option<Result<Vec<u64>>> {
    fused_pays().then(|| super::fused::conjunction_ids(ctx, predicate)).flatten()
}

/// Rows per morsel of a WHERE the fused pass does not take: as the fused pass's and the
/// aggregates' (a multiple of 64, so each morsel's bits are whole words of the mask).
const WHERE_MORSEL: usize = super::parallel::MORSEL;

/// [`unfused_mask`] of every row of the table, evaluated morsel by morsel on all cores: each
/// morsel's columns are slices of the table's ([`Ctx::window`]), so an arithmetic, `OR`,
/// `LIKE` or `CASE` makes arrays of 65,536 values that stay in cache instead of whole columns,
/// and the cores share the rows. Every expression the evaluator takes is row by row (no
/// aggregate, window or subquery is allowed in WHERE, and `index` is the window's positions),
/// so the bits are the whole table's evaluation, at any thread count. The first morsel is
/// evaluated alone first: it materialises the columns the predicate reads (once, cached by the
/// table) and gives the errors a whole evaluation gives (a wrong type, an unknown column); an
/// error in a later morsel (a division by zero, a cast) is the first one in row order. `None`
/// where it does not apply (a subset of rows, groups, a small table).
fn in_morsels(ctx: &Ctx, predicate: &Expr) -> Option<Result<arrow_buffer::BooleanBuffer>> {
    in_morsels_of(ctx, predicate, WHERE_MORSEL)
}

/// [`in_morsels`] with `morsel` rows per morsel (a multiple of 64).
fn in_morsels_of(ctx: &Ctx, predicate: &Expr, morsel: usize) -> Option<Result<arrow_buffer::BooleanBuffer>> {
    use rayon::prelude::*;
    debug_assert!(morsel > 0 && morsel % 64 == 0);
    let n = ctx.num_rows();
    if ctx.is_grouped() || n as u64 != ctx.table().num_rows() || n < 2 * morsel {
        return None;
    }
    let table = ctx.table();
    let words_per = morsel / 64;
    let mut words = vec![0u64; n.div_ceil(64)];
    let fill = |k: usize, out: &mut [u64]| -> Result<()> {
        let start = k * morsel;
        let rows = start..(start + morsel).min(n);
        let bits = whole_mask(&Ctx::window(table, rows), predicate)?;
        for (w, chunk) in out.iter_mut().zip(bits.bit_chunks().iter_padded()) {
            *w = chunk;
        }
        Ok(())
    };
    let (first, rest) = words.split_at_mut(words_per);
    if let Err(e) = fill(0, first) {
        return Some(Err(e));
    }
    let results: Vec<Result<()>> =
        rest.par_chunks_mut(words_per).enumerate().map(|(k, out)| fill(k + 1, out)).collect();
    if let Some(e) = results.into_iter().find_map(Result::err) {
        return Some(Err(e));
    }
    Some(Ok(arrow_buffer::BooleanBuffer::new(arrow_buffer::Buffer::from_vec(words), 0, n)))
}

/// [`unfused_mask`] over the rows of `ctx` at once.
fn whole_mask(ctx: &Ctx, predicate: &Expr) -> Result<arrow_buffer::BooleanBuffer> {
    let v = ctx.eval(predicate)?;
    let span = pos(predicate);
    if v.array.data_type() != &DataType::Boolean && v.array.data_type() != &DataType::Null {
        return Err(sql_error(
            format!("WHERE needs a boolean, got {}", sql_type_name(v.array.data_type())),
            span,
        ));
    }
    let mask = ctx.broadcast(v)?;
    let Some(mask) = mask.as_boolean_opt() else {
        return Ok(arrow_buffer::BooleanBuffer::new_unset(ctx.num_rows()));
    };
    Ok(match mask.nulls() {
        Some(n) => mask.values() & n.inner(),
        None => mask.values().clone(),
    })
}

/// Rows of the table addressed with u32 (Arrow's take indices).
fn check_size(table: &Table) -> Result<()> {
    if table.num_rows() > u64::from(u32::MAX) {
        return Err(sql_error("tables of more than 2^32 rows are not supported by SQL yet", Span::empty()));
    }
    Ok(())
}

/// [`super::select_indices`] for a bare predicate.
pub(crate) fn filter_ids(table: &Table, predicate: &Expr) -> Result<IndexSet> {
    check_size(table)?;
    prefetch(table, [predicate]);
    let ctx = Ctx::all(table);
    // A fused conjunction gives the ids straight away (no bitmap of the whole table where the
    // table is read a data file at a time).
    if let Some(ids) = fused_ids(&ctx, predicate) {
        return Ok(IndexSet::from_increasing(ids?));
    }
    let bits = unfused_mask(&ctx, predicate)?;
    // Straight to u64 ids, allocated once (no u32 list in between), in parallel morsels.
    Ok(IndexSet::from_increasing(super::fused::set_ids(&bits)))
}

/// [`super::query`] for a bare predicate: `SELECT * FROM samples WHERE predicate`.
pub(crate) fn filter_rows(table: &Table, predicate: &Expr) -> Result<RecordBatch> {
    check_size(table)?;
    prefetch(table, [predicate]);
    let rows = matching_rows(&Ctx::all(table), predicate)?;
    let ctx = Ctx::rows(table, UInt32Array::from(rows));
    let (mut fields, mut arrays) = (Vec::new(), Vec::new());
    every_column(&ctx, pos(predicate), &mut fields, &mut arrays)?;
    batch(fields, arrays, ctx.num_rows())
}

/// [`super::select_indices`] for a `SELECT`: WHERE, then ORDER BY / LIMIT / OFFSET pick the rows.
pub(crate) fn select_ids(table: &Table, plan: &SelectPlan) -> Result<IndexSet> {
    check_size(table)?;
    if let Some(g) = plan.group_by.first() {
        return Err(unsupported("GROUP BY in a row selection", pos(g)));
    }
    if let Some(h) = &plan.having {
        return Err(unsupported("HAVING in a row selection", pos(h)));
    }
    for item in &plan.projection {
        if let Some(e) = item_expr(item) {
            if contains_aggregate(e) {
                return Err(unsupported("aggregates in a row selection", pos(e)));
            }
        }
    }
    prefetch(table, plan_exprs(plan));
    let filtered = where_rows(table, plan)?;
    let rows: Vec<u32> = if plan.order_by.is_empty() {
        filtered.unwrap_or_else(|| (0..table.num_rows() as u32).collect())
    } else {
        let ctx = scope(table, filtered.clone());
        let mut keys = Vec::new();
        for k in &plan.order_by {
            let expr = resolve_alias(&k.expr, &plan.projection).unwrap_or(&k.expr);
            keys.push(sort_column(ctx.broadcast(ctx.eval(expr)?)?, k));
        }
        let order = sort_indices(&keys, plan.limit.map(|l| l + plan.offset))?;
        match &filtered {
            Some(rows) => order.values().iter().map(|&i| rows[i as usize]).collect(),
            None => order.values().to_vec(),
        }
    };
    let end = plan.limit.map_or(rows.len(), |l| rows.len().min(plan.offset.saturating_add(l)));
    let mut kept: Vec<u64> =
        rows.get(plan.offset.min(end)..end).unwrap_or(&[]).iter().map(|&r| u64::from(r)).collect();
    kept.sort_unstable();
    IndexSet::from_sorted(kept)
}

/// Every expression of `plan`.
fn plan_exprs(plan: &SelectPlan) -> impl Iterator<Item = &Expr> {
    plan.projection
        .iter()
        .filter_map(item_expr)
        .chain(&plan.selection)
        .chain(&plan.group_by)
        .chain(&plan.having)
        .chain(plan.order_by.iter().map(|k| &k.expr))
}

/// Materialises the columns that `exprs` name together ([`Table::prefetch`]), before evaluation
/// asks for them one at a time.
fn prefetch<'e>(table: &Table, exprs: impl IntoIterator<Item = &'e Expr>) {
    let mut names = Vec::new();
    for e in exprs {
        collect_columns(e, &mut names);
    }
    let ctx = Ctx::all(table);
    let names: Vec<String> = names.iter().map(|n| ctx.resolve(n)).collect();
    table.prefetch(&names.iter().map(String::as_str).collect::<Vec<_>>());
}

/// The column names in `e`, as written (a name inside an expression the engine does not support is
/// simply not collected). A loop over a list of nodes, not recursion: chains are as deep as long.
fn collect_columns(e: &Expr, out: &mut Vec<String>) {
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        let first = todo.len();
        match e {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => out.extend(column_name(e)),
            Expr::Function(f) => {
                // A function whose first argument is a field reads its payloads, not a column.
                let name = f.name.to_string().to_ascii_lowercase();
                let field_first = functions::find(&name)
                    .is_some_and(|f| matches!(f.kind, Kind::Exprs { field_first: true, .. }));
                let skip = usize::from(field_first);
                if let Ok(args) = function_args(f, Span::empty()) {
                    todo.extend(args.into_iter().skip(skip));
                }
            }
            other => for_each_operand(other, |x| todo.push(x)),
        }
        // Operands in text order.
        todo[first..].reverse();
    }
}

/// Calls `f` on every operand of the operators and forms the engine runs, in text order (not on
/// function arguments, which the walkers handle themselves).
fn for_each_operand<'e>(e: &'e Expr, mut f: impl FnMut(&'e Expr)) {
    match e {
        Expr::BinaryOp { left, right, .. } => {
            f(left);
            f(right);
        }
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::Cast { expr, .. }
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::IsTrue(expr)
        | Expr::IsNotTrue(expr)
        | Expr::IsFalse(expr)
        | Expr::IsNotFalse(expr) => f(expr),
        Expr::Between { expr, low, high, .. } => [expr, low, high].into_iter().for_each(|x| f(x)),
        Expr::InList { expr, list, .. } => {
            f(expr);
            list.iter().for_each(f);
        }
        Expr::Like { expr, pattern, escape_char, .. } | Expr::ILike { expr, pattern, escape_char, .. } => {
            f(expr);
            f(pattern);
            escape_char.iter().for_each(|x| f(x));
        }
        Expr::Case { operand, conditions, else_result, .. } => {
            operand.iter().chain(else_result).for_each(|x| f(x));
            for when in conditions {
                f(&when.condition);
                f(&when.result);
            }
        }
        _ => {}
    }
}

/// The rows WHERE keeps, or `None` for all rows (without listing them).
fn where_rows(table: &Table, plan: &SelectPlan) -> Result<Option<Vec<u32>>> {
    plan.selection.as_ref().map(|p| matching_rows(&Ctx::all(table), p)).transpose()
}

/// The context of the rows WHERE kept.
fn scope<'t, 'a>(table: &'t Table<'a>, rows: Option<Vec<u32>>) -> Ctx<'t, 'a> {
    match rows {
        Some(rows) => Ctx::rows(table, UInt32Array::from(rows)),
        None => Ctx::all(table),
    }
}

/// The row order of `keys`, only the first `limit` rows when given: [`top_k`] for one numeric key
/// without nulls and a limit well below the number of rows, `lexsort_to_indices` otherwise.
fn sort_indices(keys: &[SortColumn], limit: Option<usize>) -> Result<UInt32Array> {
    if let ([key], Some(k)) = (keys, limit) {
        let n = key.values.len();
        if key.values.null_count() == 0 && k <= n / 8 {
            let descending = key.options.is_some_and(|o| o.descending);
            if let Some(order) = top_k(key.values.as_ref(), k, descending) {
                return Ok(UInt32Array::from(order));
            }
        }
    }
    Ok(lexsort_to_indices(keys, limit)?)
}

/// Positions of the `k` first values of `values` in ascending (or descending) order, ties in
/// position order: a heap of `k` entries per morsel of rows ([`smallest`]). `None` for types it
/// does not handle.
///
/// Values are compared through a u64 key whose unsigned order is the order Arrow's sort uses:
/// IEEE totalOrder for floats (so -0.0 before 0.0 and NaN after every number, as `sort_to_indices`
/// orders them), two's complement with the sign bit flipped for signed integers.
fn top_k(values: &dyn Array, k: usize, descending: bool) -> Option<Vec<u32>> {
    use arrow_array::types::{UInt16Type, UInt64Type};
    const SIGN: u64 = 1 << 63;
    let flip = if descending { u64::MAX } else { 0 };
    Some(match values.data_type() {
        DataType::Float64 => smallest(
            values.as_primitive::<Float64Type>().values(),
            |x| {
                let bits = x.to_bits();
                let key = if bits & SIGN != 0 { !bits } else { bits | SIGN };
                key ^ flip
            },
            k,
        ),
        DataType::Int64 => {
            smallest(values.as_primitive::<Int64Type>().values(), |&x| (x as u64 ^ SIGN) ^ flip, k)
        }
        DataType::UInt64 => smallest(values.as_primitive::<UInt64Type>().values(), |&x| x ^ flip, k),
        DataType::UInt16 => {
            smallest(values.as_primitive::<UInt16Type>().values(), |&x| u64::from(x) ^ flip, k)
        }
        _ => return None,
    })
}

/// [`super::query`].
pub(crate) fn run(table: &Table, plan: &SelectPlan) -> Result<RecordBatch> {
    check_size(table)?;
    let aggregate = !plan.group_by.is_empty()
        || plan.having.is_some()
        || plan.projection.iter().any(|item| item_expr(item).is_some_and(contains_aggregate));
    prefetch(table, plan_exprs(plan));
    let rows = where_rows(table, plan)?;
    if !aggregate && plan.order_by.is_empty() {
        // Nothing reorders the rows: cut before evaluating.
        let len = rows.as_ref().map_or(table.num_rows() as usize, Vec::len);
        let end = plan.limit.map_or(len, |l| len.min(plan.offset.saturating_add(l)));
        let start = plan.offset.min(end);
        let rows = match rows {
            Some(rows) => rows[start..end].to_vec(),
            None => (start as u32..end as u32).collect(),
        };
        let ctx = Ctx::rows(table, UInt32Array::from(rows));
        let (fields, arrays) = project(&ctx, plan)?;
        return batch(fields, arrays, ctx.num_rows());
    }
    let ctx = scope(table, rows);
    let ctx = if aggregate { group(&ctx, plan)? } else { ctx };
    let (fields, arrays) = project(&ctx, plan)?;
    let num_rows = ctx.num_rows();
    let mut keys = Vec::new();
    for k in &plan.order_by {
        let array = match output_position(&k.expr, &fields, &plan.projection)? {
            Some(i) => arrays[i].clone(),
            None => ctx.broadcast(ctx.eval(resolve_alias(&k.expr, &plan.projection).unwrap_or(&k.expr))?)?,
        };
        keys.push(sort_column(array, k));
    }
    let (arrays, num_rows) = if keys.is_empty() {
        (arrays, num_rows)
    } else {
        let order = sort_indices(&keys, plan.limit.map(|l| l + plan.offset))?;
        let arrays = arrays.iter().map(|a| take(a.as_ref(), &order, None)).collect::<Result<Vec<_>, _>>()?;
        (arrays, order.len())
    };
    let end = plan.limit.map_or(num_rows, |l| num_rows.min(plan.offset.saturating_add(l)));
    let start = plan.offset.min(end);
    let arrays: Vec<ArrayRef> = arrays.iter().map(|a| a.slice(start, end - start)).collect();
    batch(fields, arrays, end - start)
}

fn batch(fields: Vec<Field>, arrays: Vec<ArrayRef>, num_rows: usize) -> Result<RecordBatch> {
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(num_rows));
    Ok(RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)?)
}

/// A sort key of `ORDER BY`: floats ordered as SQL compares them (`-0.0` ties with `0.0` and
/// keeps row order; every NaN, whatever its sign bit, above every number, as in PostgreSQL).
fn sort_column(values: ArrayRef, k: &OrderKey) -> SortColumn {
    let values = sql_float_order(Val { array: values, scalar: false }).array;
    SortColumn { values, options: Some(SortOptions { descending: k.descending, nulls_first: k.nulls_first }) }
}

fn item_expr(item: &SelectItem) -> Option<&Expr> {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    }
}

/// The output name of a select item.
fn item_name(e: &Expr, alias: Option<&str>) -> String {
    alias.map(str::to_string).or_else(|| column_name(e)).unwrap_or_else(|| expr_text(e))
}

/// An ORDER BY that names a select alias: the aliased expression.
fn resolve_alias<'p>(e: &Expr, projection: &'p [SelectItem]) -> Option<&'p Expr> {
    let Expr::Identifier(id) = e else { return None };
    projection.iter().find_map(|item| match item {
        SelectItem::ExprWithAlias { expr, alias } if alias.value == id.value => Some(expr),
        _ => None,
    })
}

/// Which output column an ORDER BY key is: a 1-based ordinal, an output name, or the same
/// expression text as a select item.
fn output_position(e: &Expr, fields: &[Field], projection: &[SelectItem]) -> Result<Option<usize>> {
    if let Expr::Value(v) = e {
        if let Value::Number(n, _) = &v.value {
            return match n.parse::<usize>() {
                Ok(k) if (1..=fields.len()).contains(&k) => Ok(Some(k - 1)),
                _ => Err(sql_error(format!("ORDER BY position {n} is not in the select list"), pos(e))),
            };
        }
    }
    if let Some(name) = column_name(e) {
        if let Some(i) = fields.iter().position(|f| *f.name() == name) {
            return Ok(Some(i));
        }
    }
    let has_wildcard = projection.iter().any(|i| item_expr(i).is_none());
    if has_wildcard {
        return Ok(None);
    }
    let text = expr_text(e);
    Ok(projection.iter().position(|item| item_expr(item).is_some_and(|x| expr_text(x) == text)))
}

/// Evaluates the select list over the rows in scope (no aggregates).
fn project(ctx: &Ctx, plan: &SelectPlan) -> Result<(Vec<Field>, Vec<ArrayRef>)> {
    let (mut fields, mut arrays) = (Vec::new(), Vec::new());
    for item in &plan.projection {
        match item {
            SelectItem::Wildcard(opts) => {
                if opts.opt_exclude.is_some()
                    || opts.opt_except.is_some()
                    || opts.opt_replace.is_some()
                    || opts.opt_rename.is_some()
                    || opts.opt_ilike.is_some()
                {
                    return Err(unsupported("options on *", opts.wildcard_token.0.span));
                }
                every_column(ctx, opts.wildcard_token.0.span, &mut fields, &mut arrays)?;
            }
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                let alias = match item {
                    SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.as_str()),
                    _ => None,
                };
                let array = ctx.broadcast(ctx.eval(e)?)?;
                fields.push(Field::new(item_name(e, alias), array.data_type().clone(), true));
                arrays.push(array);
            }
            other => return Err(unsupported(&format!("the select item {other}"), select_item_start(other))),
        }
    }
    Ok((fields, arrays))
}

/// `*`: every column of the table over the rows in scope.
fn every_column(ctx: &Ctx, span: Span, fields: &mut Vec<Field>, arrays: &mut Vec<ArrayRef>) -> Result<()> {
    for name in ctx.table().column_names() {
        let array = ctx.column(name, span)?;
        fields.push(Field::new(name, array.data_type().clone(), true));
        arrays.push(array);
    }
    Ok(())
}

/// True when `e` calls an aggregate.
fn contains_aggregate(e: &Expr) -> bool {
    let mut found = Vec::new();
    collect_aggregates(e, &mut found);
    !found.is_empty()
}

/// The aggregate calls in `e`, outermost first, in text order (arguments of an aggregate are not
/// searched). A loop over a list of nodes, as [`collect_columns`].
fn collect_aggregates<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        let first = todo.len();
        match e {
            Expr::Function(f) => {
                if AGGREGATES.contains(&f.name.to_string().to_ascii_lowercase().as_str()) {
                    out.push(e);
                } else if let Ok(args) = function_args(f, Span::empty()) {
                    todo.extend(args);
                }
            }
            other => for_each_operand(other, |x| todo.push(x)),
        }
        todo[first..].reverse();
    }
}

/// The groups of the rows in scope: [`Groups::dense`] for one small-range integer key, encoded
/// rows in a hash map otherwise.
fn group_ids(ctx: &Ctx, keys: &[ArrayRef]) -> Result<Groups> {
    let n = ctx.num_rows();
    if keys.is_empty() {
        return Ok(Groups::one(n));
    }
    if let [key] = keys {
        if let Some(groups) = Groups::dense(key) {
            return Ok(groups);
        }
    }
    // -0.0 and 0.0, and NaNs, are one group each (the row format keeps their bits apart).
    let keys: Vec<ArrayRef> = keys.iter().map(canonical_floats).collect();
    let converter = RowConverter::new(keys.iter().map(|k| SortField::new(k.data_type().clone())).collect())?;
    let rows = converter.convert_columns(&keys)?;
    let mut ids = HashMap::new();
    let (mut group, mut first) = (Vec::with_capacity(n), Vec::new());
    for i in 0..n {
        let next = first.len() as u32;
        let g = *ids.entry(rows.row(i)).or_insert(next);
        if g == next {
            first.push(i as u32);
        }
        group.push(g);
    }
    Ok(Groups::listed(group, first))
}

/// Groups the rows in scope: a context of one row per group in which the group keys and every
/// aggregate of the select list, HAVING and ORDER BY are columns; HAVING is applied.
fn group<'t, 'a>(ctx: &Ctx<'t, 'a>, plan: &SelectPlan) -> Result<Ctx<'t, 'a>> {
    let keys = plan.group_by.iter().map(|g| ctx.broadcast(ctx.eval(g)?)).collect::<Result<Vec<_>>>()?;
    let groups = group_ids(ctx, &keys)?;
    let num_groups = groups.num_groups();
    let mut values = HashMap::new();
    let first = UInt32Array::from(groups.first().to_vec());
    for (g, key) in plan.group_by.iter().zip(&keys) {
        let at_first = if num_groups == 0 { key.slice(0, 0) } else { take(key.as_ref(), &first, None)? };
        values.insert(expr_text(g), at_first);
    }
    let mut calls = Vec::new();
    for item in &plan.projection {
        match item_expr(item) {
            Some(e) => collect_aggregates(e, &mut calls),
            None => {
                return Err(sql_error(
                    format!("{item} cannot be selected in a grouped or aggregate query"),
                    select_item_start(item),
                ))
            }
        }
    }
    plan.having
        .iter()
        .chain(plan.order_by.iter().map(|k| &k.expr))
        .for_each(|e| collect_aggregates(e, &mut calls));
    for call in calls {
        let Expr::Function(f) = call else { continue };
        let text = expr_text(call);
        if let std::collections::hash_map::Entry::Vacant(slot) = values.entry(text) {
            let name = f.name.to_string().to_ascii_lowercase();
            slot.insert(aggregate(ctx, &name, f, &groups, pos(call))?);
        }
    }
    let grouped = Ctx::groups(ctx.table(), num_groups, values);
    let Some(having) = &plan.having else { return Ok(grouped) };
    let mask = grouped.eval(having)?;
    if !matches!(mask.array.data_type(), DataType::Boolean | DataType::Null) {
        return Err(sql_error(
            format!("HAVING needs a boolean, got {}", sql_type_name(mask.array.data_type())),
            pos(having),
        ));
    }
    let keep = matching_rows(&grouped, having)?;
    let keep = UInt32Array::from(keep);
    let Some(values) = grouped.into_groups() else { unreachable!("a grouped context") };
    let values = values
        .into_iter()
        .map(|(k, v)| Ok((k, take(v.as_ref(), &keep, None)?)))
        .collect::<Result<HashMap<_, _>>>()?;
    Ok(Ctx::groups(ctx.table(), keep.len(), values))
}

/// One aggregate per group. Counts and sums in parallel morsels ([`Groups::per_group`]): integer
/// sums in `i128`, so a sum is an error only when its total does not fit BIGINT, whatever the order
/// of the rows; float sums added per morsel, then the morsels' sums in morsel order.
fn aggregate(
    ctx: &Ctx,
    name: &str,
    f: &sqlparser::ast::Function,
    groups: &Groups,
    span: Span,
) -> Result<ArrayRef> {
    let star = matches!(&f.args, sqlparser::ast::FunctionArguments::List(l)
        if matches!(l.args.as_slice(), [sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Wildcard)]));
    if star {
        if name != "count" {
            return Err(sql_error(format!("{name}(*) is not allowed; only count(*)"), span));
        }
        return Ok(Arc::new(Int64Array::from(groups.counts())));
    }
    let args = function_args(f, span)?;
    let [arg] = args.as_slice() else {
        return Err(sql_error(format!("{name}() takes one argument, got {}", args.len()), span));
    };
    if contains_aggregate(arg) {
        return Err(sql_error("aggregates cannot be nested", pos(arg)));
    }
    let values = ctx.broadcast(ctx.eval(arg)?)?;
    let t = values.data_type().clone();
    match name {
        "count" => Ok(Arc::new(Int64Array::from(match values.nulls() {
            None => groups.counts(),
            Some(nulls) => groups.per_group(0i64, |c, i| *c += i64::from(nulls.is_valid(i)), |c, d| *c += d),
        }))),
        "sum" if t.is_integer() => {
            let v = arrow_cast::cast(values.as_ref(), &DataType::Int64)?;
            let v = v.as_primitive::<Int64Type>();
            let (nulls, x) = (v.nulls(), v.values());
            // (sum, any value): exact in i128 for up to 2^64 rows.
            let sums = groups.per_group(
                (0i128, false),
                |(s, any), i| {
                    if nulls.is_none_or(|n| n.is_valid(i)) {
                        *s += i128::from(x[i]);
                        *any = true;
                    }
                },
                |(s, any), (t, more)| {
                    *s += t;
                    *any |= more;
                },
            );
            let sums = sums
                .into_iter()
                .map(|(s, any)| any.then(|| i64::try_from(s)).transpose())
                .collect::<Result<Int64Array, _>>()
                .map_err(|_| sql_error("sum overflows BIGINT", span))?;
            Ok(Arc::new(sums))
        }
        "sum" | "avg" => {
            if !(t.is_integer() || t.is_floating() || t == DataType::Null) {
                return Err(sql_error(format!("{name}() needs numbers, got {}", sql_type_name(&t)), span));
            }
            let v = arrow_cast::cast(values.as_ref(), &DataType::Float64)?;
            let v = v.as_primitive::<Float64Type>();
            let (nulls, x) = (v.nulls(), v.values());
            let sums = groups.per_group(
                (0f64, 0u64),
                |(s, c), i| {
                    if nulls.is_none_or(|n| n.is_valid(i)) {
                        *s += x[i];
                        *c += 1;
                    }
                },
                |(s, c), (t, d)| {
                    *s += t;
                    *c += d;
                },
            );
            let out: Float64Array = sums
                .iter()
                .map(|&(s, c)| (c > 0).then(|| if name == "avg" { s / c as f64 } else { s }))
                .collect();
            Ok(Arc::new(out))
        }
        _ => {
            // min / max: one sort of the values, then each group's first row in that order.
            // Floats as SQL orders them: every NaN above every number, -0.0 equal to 0.0.
            let values = sql_float_order(Val { array: values, scalar: false }).array;
            let options = SortOptions { descending: name == "max", nulls_first: false };
            let order =
                sort_to_indices(values.as_ref(), Some(options), None).map_err(|e| at(span)(e.into()))?;
            let group = groups.ids();
            let mut pick: Vec<Option<u32>> = vec![None; groups.num_groups()];
            for &i in order.values() {
                let g = group[i as usize] as usize;
                if pick[g].is_none() {
                    pick[g] = Some(i);
                }
            }
            Ok(take(values.as_ref(), &UInt32Array::from(pick), None)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{StringArray, UInt16Array, UInt64Array};
    use beton_storage::SampleValue;

    fn predicate(sql: &str) -> Expr {
        let tokens = super::super::parse::tokenize(sql).unwrap();
        match &super::super::parse::parse(sql, tokens).unwrap() {
            super::super::parse::Parsed::Predicate(e) => (**e).clone(),
            super::super::parse::Parsed::Select(_) => unreachable!("{sql}"),
        }
    }

    /// A WHERE evaluated morsel by morsel on several threads gives the rows, or the error, the
    /// evaluator gives over the whole table at once: every kind of expression it takes (called
    /// here directly, whether or not the fused pass would take it first), NULLs, NaN, `index`,
    /// text, JSON, errors in a late morsel.
    #[test]
    fn a_where_in_morsels_is_the_whole_tables_evaluation() {
        let (_tmp, path) = beton_testkit::temp_path("m.beton");
        let n = 1000u64;
        beton_testkit::write(&path, beton_testkit::schema("a:int f:float t:text j:json b:bytes"), n, |i| {
            let f = match i % 97 {
                7 => f64::NAN,
                8 => -0.0,
                k => (k as f64 - 40.0) / 8.0,
            };
            // A text that is not a number in one late row, to fail a cast there.
            let t = match i {
                901 => "x901".to_string(),
                _ => format!("{}", (i * 37) % 1000),
            };
            let j = match i % 5 {
                0 => "{}".to_string(),
                k => format!("{{\"k\": {k}}}"),
            };
            vec![
                SampleValue::Int((i as i64 * 7919) % 23 - 11),
                SampleValue::Float(f),
                SampleValue::Text(t),
                SampleValue::Json(j),
                SampleValue::Bytes(vec![0; (i % 6) as usize]),
            ]
        });
        let ds = beton_storage::Dataset::open(&path).unwrap();
        let table = Table::new(&ds);
        let whole = |e: &Expr| -> std::result::Result<Vec<usize>, String> {
            whole_mask(&Ctx::all(&table), e).map(|b| b.set_indices().collect()).map_err(|e| e.to_string())
        };
        let mut errors = 0;
        for sql in [
            "a + 1 < 2",
            "f * 2 > a",
            "a - f <= 0.5 AND a * a > 3",
            "a < 1 OR f > 0.5",
            "NOT (a < 3) OR t = '74'",
            "t LIKE '1%'",
            "t NOT LIKE '%9' AND a > 0",
            "lower(t) = t AND length(t) = 2",
            "CASE WHEN a > 0 THEN f > 0.5 ELSE t LIKE '%1' END",
            "CASE WHEN a > 0 THEN 1 END = 1",
            "index % 7 = 3 OR index > 990",
            "index BETWEEN 100 AND 700 AND a <> 2",
            "abs(a) < 2 OR f IS NULL",
            "f <> f OR f = -0.0",
            "f IS NOT NULL AND a IN (1, 5, 9)",
            "a IN (1, 5, 9) OR f > 0.99",
            "json_extract(j, '$.k') = '3' OR json_extract(j, '$.k') IS NULL",
            "b > 3",
            "1 = 1",
            "1 = 0",
            "NULL",
            "a > NULL",
            "a",
            "nope > 1",
            "CAST(t AS BIGINT) > 500",
            "a / (a - a) > 0",
        ] {
            let e = predicate(sql);
            let expected = whole(&e);
            errors += usize::from(expected.is_err());
            for morsel in [64, 128, 320] {
                for threads in [1, 3] {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                    let got = pool
                        .install(|| in_morsels_of(&Ctx::all(&table), &e, morsel))
                        .expect("a table of several morsels")
                        .map(|b| {
                            assert_eq!(b.len(), n as usize);
                            b.set_indices().collect::<Vec<_>>()
                        })
                        .map_err(|e| e.to_string());
                    assert_eq!(got, expected, "{sql}: morsels of {morsel}, {threads} threads");
                }
            }
            // What a WHERE runs: the same rows (the fused pass where it applies, else these).
            let ids = filter_ids(&table, &e).map(|s| s.iter().map(|i| i as usize).collect());
            assert_eq!(ids.map_err(|e| e.to_string()), expected, "{sql}");
        }
        // The list holds errors of the first morsel (a type, an unknown column) and of a late one
        // (the cast at row 901).
        assert!(errors >= 4, "{errors}");
        assert!(whole(&predicate("CAST(t AS BIGINT) > 500")).unwrap_err().contains("x901"));
        // A subset of rows, a grouped scope or a table of one morsel is left to the evaluator.
        assert!(in_morsels_of(&Ctx::all(&table), &predicate("a < 1"), 512).is_none());
        let rows = Ctx::rows(&table, UInt32Array::from(vec![1, 2, 3]));
        assert!(in_morsels_of(&rows, &predicate("a < 1"), 64).is_none());
    }

    /// The reference order: a full sort on (value, position), first `k`.
    fn reference(values: &ArrayRef, k: usize, descending: bool) -> Vec<u32> {
        let positions: ArrayRef = Arc::new(UInt32Array::from_iter_values(0..values.len() as u32));
        let keys = [
            SortColumn {
                values: values.clone(),
                options: Some(SortOptions { descending, nulls_first: false }),
            },
            SortColumn { values: positions, options: Some(SortOptions::default()) },
        ];
        lexsort_to_indices(&keys, Some(k)).unwrap().values().to_vec()
    }

    fn check_top_k(values: ArrayRef) {
        for descending in [false, true] {
            for k in [1, 2, 3, 7, values.len()] {
                let got = top_k(values.as_ref(), k, descending).expect("a handled type");
                assert_eq!(
                    got,
                    reference(&values, k, descending),
                    "k {k}, descending {descending}: {values:?}"
                );
            }
        }
    }

    #[test]
    fn top_k_orders_as_arrow_sort_with_ties_in_row_order() {
        let floats = vec![
            0.5,
            -0.0,
            0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.5,
            -1e300,
            1e-300,
            0.0,
            -0.0,
            2.0,
            0.5,
        ];
        check_top_k(Arc::new(Float64Array::from(floats)));
        check_top_k(Arc::new(Int64Array::from(vec![3, -1, i64::MIN, 3, i64::MAX, 0, -1, 7, 3, i64::MIN])));
        check_top_k(Arc::new(UInt64Array::from(vec![5, u64::MAX, 0, 5, 1 << 63, 2, u64::MAX, 0])));
        check_top_k(Arc::new(UInt16Array::from(vec![4, 1, 4, u16::MAX, 0, 1, 2, 4])));
        assert!(top_k(&StringArray::from(vec!["a"]), 1, false).is_none());
    }

    #[test]
    fn sort_indices_takes_the_heap_only_when_it_applies() {
        let values: ArrayRef = Arc::new(Int64Array::from_iter_values((0..100).map(|i| (i * 37) % 11)));
        let key = |descending| SortColumn {
            values: values.clone(),
            options: Some(SortOptions { descending, nulls_first: false }),
        };
        for descending in [false, true] {
            let got = sort_indices(&[key(descending)], Some(5)).unwrap().values().to_vec();
            assert_eq!(got, reference(&values, 5, descending));
        }
        // No limit, or a limit near the number of rows: the general sort, same order of values.
        let all = sort_indices(&[key(false)], None).unwrap();
        let sorted: Vec<i64> = all.values().iter().map(|&i| (i64::from(i) * 37) % 11).collect();
        assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
    }

    /// [`Groups::dense`]'s ids and first rows.
    fn dense_group_ids(key: &ArrayRef) -> Option<(Vec<u32>, Vec<u32>)> {
        Groups::dense(key).map(|g| (g.ids().into_owned(), g.first().to_vec()))
    }

    /// Group ids numbered in order of first appearance, by brute force.
    fn naive_groups(values: &[i64]) -> (Vec<u32>, Vec<u32>) {
        let (mut seen, mut group, mut first) = (Vec::<i64>::new(), Vec::new(), Vec::new());
        for (i, v) in values.iter().enumerate() {
            let g = seen.iter().position(|s| s == v).unwrap_or_else(|| {
                seen.push(*v);
                first.push(i as u32);
                seen.len() - 1
            });
            group.push(g as u32);
        }
        (group, first)
    }

    #[test]
    fn dense_group_ids_number_groups_by_first_appearance() {
        let values = vec![7, -3, 7, 0, -3, 65_000, 7, -300];
        let key: ArrayRef = Arc::new(Int64Array::from(values.clone()));
        assert_eq!(dense_group_ids(&key), Some(naive_groups(&values)));
        let key: ArrayRef = Arc::new(UInt16Array::from(vec![4, 1, 4, u16::MAX, 0, 1]));
        assert_eq!(dense_group_ids(&key), Some(naive_groups(&[4, 1, 4, 65_535, 0, 1])));
    }

    #[test]
    fn dense_group_ids_decline_wide_ranges_nulls_and_other_types() {
        let wide: ArrayRef = Arc::new(Int64Array::from(vec![0, 1 << 40, 5]));
        assert_eq!(dense_group_ids(&wide), None);
        let extremes: ArrayRef = Arc::new(Int64Array::from(vec![i64::MIN, i64::MAX]));
        assert_eq!(dense_group_ids(&extremes), None);
        let big: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX, u64::MAX - 1]));
        assert_eq!(dense_group_ids(&big), None, "past i64::MAX");
        let nulls: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None]));
        assert_eq!(dense_group_ids(&nulls), None);
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.0]));
        assert_eq!(dense_group_ids(&floats), None);
    }
}
