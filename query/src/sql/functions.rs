//! The scalar SQL functions: one entry each in [`FUNCTIONS`], with its names, what it takes and
//! how it computes. The evaluator (`eval.rs`) looks a call up there, checks its arguments as the
//! entry says (one string, one number, or the expressions as written) and calls it; an unknown
//! name's error lists the table. Adding a function is one entry here and its kernel.
//!
//! Most take one value ([`Kind::Text`], [`Kind::Number`]): a kernel over a whole column. Two
//! read the file rather than their arguments' values ([`Kind::Exprs`]): `json_extract(field,
//! '$.a.b')` parses each row's JSON payload, `in_split('val')` looks the rows up in a named
//! split. They read columns through the expression's scope ([`Ctx`]), never by evaluating
//! sub-expressions, so this module does not depend on the evaluator.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float64Array, Int64Array, StringArray};
use arrow_schema::DataType;
use beton_storage::{FieldType, Value as StorageValue};
use sqlparser::ast::{Expr, Value};
use sqlparser::tokenizer::Span;

use super::ast::{column_name, pos};
use super::error::sql_error;
use super::scope::{Ctx, Val};
use crate::error::Result;

/// A scalar SQL function.
pub(crate) struct Function {
    /// Its name, then its aliases (matched lowercased).
    pub(crate) names: &'static [&'static str],
    /// What it takes and how it computes.
    pub(crate) kind: Kind,
}

/// What a function takes (checked by the evaluator before it runs) and its kernel.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// One argument, a string (NULL: a null string).
    Text(fn(Val, Span) -> Result<Val>),
    /// One argument, a number, widened to BIGINT or DOUBLE first (NULL stays NULL).
    Number(fn(Val, Span) -> Result<Val>),
    /// Its arguments as written (literals, field names), which it checks itself.
    Exprs {
        /// The function.
        eval: fn(&Ctx, &[&Expr], Span) -> Result<Val>,
        /// Its first argument names a field whose payloads it reads, not a column to load.
        field_first: bool,
    },
    /// One argument, a vector (a vector column or `[x, y, ...]`; NULL: a null vector).
    Vector(fn(Val, Span) -> Result<Val>),
    /// Two vectors of one length (a column and a literal or parameter, or two columns).
    Vectors(fn(Val, Val, Span) -> Result<Val>),
    /// Two integers, as their 64 bits (a signed one's two's complement).
    Bits(fn(Val, Val, Span) -> Result<Val>),
}

/// Every scalar function, in the order an unknown name's error lists them.
pub(crate) const FUNCTIONS: &[Function] = &[
    Function { names: &["lower"], kind: Kind::Text(lower) },
    Function { names: &["upper"], kind: Kind::Text(upper) },
    Function { names: &["length", "char_length", "character_length"], kind: Kind::Text(length) },
    Function { names: &["abs"], kind: Kind::Number(abs) },
    Function { names: &["round"], kind: Kind::Number(round) },
    Function { names: &["json_extract"], kind: Kind::Exprs { eval: json_extract, field_first: true } },
    Function { names: &["in_split"], kind: Kind::Exprs { eval: in_split, field_first: false } },
    Function { names: &["l2_norm"], kind: Kind::Vector(l2_norm) },
    Function { names: &["l2_distance"], kind: Kind::Vectors(l2_distance) },
    Function { names: &["cosine_distance"], kind: Kind::Vectors(cosine_distance) },
    Function { names: &["inner_product"], kind: Kind::Vectors(inner_product) },
    Function { names: &["phash"], kind: Kind::Exprs { eval: phash, field_first: true } },
    Function { names: &["hamming"], kind: Kind::Bits(hamming) },
];

/// A value's integers as their 64 bits (NULL stays NULL), or what it is instead.
pub(crate) fn bits_of(v: &Val, name: &str, span: Span) -> Result<arrow_array::UInt64Array> {
    use arrow_array::types::UInt64Type;
    let t = v.data_type();
    if matches!(t, DataType::Null) {
        return Ok(arrow_array::UInt64Array::new_null(v.array.len()));
    }
    if !t.is_integer() {
        return Err(sql_error(format!("{name}() takes integers (64-bit hashes), got {t}"), span));
    }
    if t == &DataType::UInt64 {
        return Ok(v.array.as_primitive::<UInt64Type>().clone());
    }
    let wide = arrow_cast::cast(&v.array, &DataType::Int64).map_err(|e| sql_error(e.to_string(), span))?;
    Ok(wide.as_primitive::<Int64Type>().unary(|x| x as u64))
}

/// `hamming(a, b)`: the number of bits in which two 64-bit integers differ (pHashes, say).
fn hamming(a: Val, b: Val, span: Span) -> Result<Val> {
    let scalar = a.scalar && b.scalar;
    let (x, y) = (bits_of(&a, "hamming", span)?, bits_of(&b, "hamming", span)?);
    let rows = if a.scalar { y.len() } else { x.len() };
    let at = |v: &arrow_array::UInt64Array, s: bool, i: usize| {
        let i = if s { 0 } else { i };
        (!v.is_null(i)).then(|| v.value(i))
    };
    let out: Int64Array = (0..rows)
        .map(|i| Some(i64::from((at(&x, a.scalar, i)? ^ at(&y, b.scalar, i)?).count_ones())))
        .collect();
    Ok(Val { array: Arc::new(out), scalar })
}

/// For `NAME.phash` where `NAME` is an image field and the table has no column of that name,
/// the field: `image.phash` is `phash(image)`.
pub(crate) fn phash_column(table: &crate::table::Table, name: &str) -> Option<String> {
    let field = name.strip_suffix(".phash")?;
    if table.column_names().contains(&name) {
        return None;
    }
    table.fields().into_iter().find(|(n, t)| n == field && t.is_image()).map(|(n, _)| n)
}

/// `phash(image)`: each row's 64-bit perceptual hash of its image (the DCT hash of
/// `ImageRef::phash`, from a 1/8-scale grey decode), as UBIGINT; NULL for a NULL image.
pub(crate) fn phash(ctx: &Ctx, args: &[&Expr], span: Span) -> Result<Val> {
    use rayon::prelude::*;
    let [field] = args else {
        return Err(sql_error(format!("phash() takes an image field, got {} arguments", args.len()), span));
    };
    let name = column_name(field)
        .ok_or_else(|| sql_error("phash() takes an image field, like phash(image)", pos(field)))?;
    let table = ctx.table();
    let ty = table
        .fields()
        .into_iter()
        .find(|(n, t)| *n == name && t.is_image())
        .map(|(_, t)| t)
        .ok_or_else(|| sql_error(format!("'{name}' is not an image field"), pos(field)))?;
    let ids = ctx.column("index", span)?;
    let ids = ids.as_primitive::<arrow_array::types::UInt64Type>();
    let hashes: Vec<Option<u64>> = ids
        .values()
        .par_iter()
        .map(|&i| match table.value(i, &name, &ty)? {
            Some(StorageValue::Image(image)) => image
                .phash()
                .map(Some)
                .map_err(|e| sql_error(format!("sample {i}: field '{name}': {e}"), span)),
            _ => Ok(None),
        })
        .collect::<Result<_>>()?;
    Ok(Val { array: Arc::new(arrow_array::UInt64Array::from(hashes)), scalar: false })
}

/// A vector literal: one row of a `FixedSizeList<Float64>`.
pub(crate) fn vector_literal(values: Vec<f64>) -> Result<ArrayRef> {
    let d = values.len() as i32;
    let item = Arc::new(arrow_schema::Field::new("item", DataType::Float64, false));
    Ok(Arc::new(FixedSizeListArray::try_new(item, d, Arc::new(Float64Array::from(values)), None)?))
}

/// Arrow's half-precision float (the `half` crate's, through Arrow).
type F16 = <arrow_array::types::Float16Type as arrow_array::ArrowPrimitiveType>::Native;

/// A vector column's elements, whatever their type, read as f64 one row at a time.
pub(crate) enum Elements<'a> {
    I8(&'a [i8]),
    U8(&'a [u8]),
    I16(&'a [i16]),
    U16(&'a [u16]),
    I32(&'a [i32]),
    U32(&'a [u32]),
    I64(&'a [i64]),
    U64(&'a [u64]),
    F16(&'a [F16]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl<'a> Elements<'a> {
    pub(crate) fn of(values: &'a ArrayRef, span: Span) -> Result<Elements<'a>> {
        use arrow_array::types::*;
        Ok(match values.data_type() {
            DataType::Int8 => Elements::I8(values.as_primitive::<Int8Type>().values()),
            DataType::UInt8 => Elements::U8(values.as_primitive::<UInt8Type>().values()),
            DataType::Int16 => Elements::I16(values.as_primitive::<Int16Type>().values()),
            DataType::UInt16 => Elements::U16(values.as_primitive::<UInt16Type>().values()),
            DataType::Int32 => Elements::I32(values.as_primitive::<Int32Type>().values()),
            DataType::UInt32 => Elements::U32(values.as_primitive::<UInt32Type>().values()),
            DataType::Int64 => Elements::I64(values.as_primitive::<Int64Type>().values()),
            DataType::UInt64 => Elements::U64(values.as_primitive::<UInt64Type>().values()),
            DataType::Float16 => Elements::F16(values.as_primitive::<Float16Type>().values()),
            DataType::Float32 => Elements::F32(values.as_primitive::<Float32Type>().values()),
            DataType::Float64 => Elements::F64(values.as_primitive::<Float64Type>().values()),
            t => return Err(sql_error(format!("a vector of {t} elements is not a vector of numbers"), span)),
        })
    }

    /// Row `i` of `d` elements: in place for float32 and float64, else copied into `buf`.
    pub(crate) fn row<'b>(&'b self, i: usize, d: usize, buf: &'b mut [f64]) -> Row<'b> {
        match self {
            Elements::F32(v) => Row::F32(&v[i * d..(i + 1) * d]),
            Elements::F64(v) => Row::F64(&v[i * d..(i + 1) * d]),
            _ => {
                self.fill(i * d, buf);
                Row::F64(buf)
            }
        }
    }

    /// Elements `start..start + out.len()` into `out`.
    pub(crate) fn fill(&self, start: usize, out: &mut [f64]) {
        let end = start + out.len();
        macro_rules! copy {
            ($v:expr) => {
                for (o, x) in out.iter_mut().zip(&$v[start..end]) {
                    *o = *x as f64;
                }
            };
        }
        match self {
            Elements::I8(v) => copy!(v),
            Elements::U8(v) => copy!(v),
            Elements::I16(v) => copy!(v),
            Elements::U16(v) => copy!(v),
            Elements::I32(v) => copy!(v),
            Elements::U32(v) => copy!(v),
            Elements::I64(v) => copy!(v),
            Elements::U64(v) => copy!(v),
            Elements::F16(v) => {
                for (o, x) in out.iter_mut().zip(&v[start..end]) {
                    *o = x.to_f64();
                }
            }
            Elements::F32(v) => copy!(v),
            Elements::F64(v) => out.copy_from_slice(&v[start..end]),
        }
    }
}

/// One vector of a column, as its elements are stored (float32) or as f64.
pub(crate) enum Row<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl Row<'_> {
    /// `metric` of this vector and `q`.
    pub(crate) fn metric(&self, metric: Metric, q: &[f64]) -> Option<f64> {
        match self {
            Row::F32(x) => metric.of(x, q),
            Row::F64(x) => metric.of(x, q),
        }
    }
}

fn l2_norm(v: Val, span: Span) -> Result<Val> {
    let zero = match vector_len(&v) {
        0 => Val { array: v.array.clone(), scalar: true },
        d => Val::scalar(vector_literal(vec![0.0; d])?),
    };
    pairwise(v, zero, span, Metric::Norm)
}

fn l2_distance(a: Val, b: Val, span: Span) -> Result<Val> {
    pairwise(a, b, span, Metric::L2)
}

fn cosine_distance(a: Val, b: Val, span: Span) -> Result<Val> {
    pairwise(a, b, span, Metric::Cosine)
}

fn inner_product(a: Val, b: Val, span: Span) -> Result<Val> {
    pairwise(a, b, span, Metric::Dot)
}

/// What a vector function computes from two vectors `x` and `y`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Metric {
    /// `‖x‖` (`y` is the zero vector).
    Norm,
    /// `‖x - y‖`.
    L2,
    /// `1 - x·y / (‖x‖ ‖y‖)`; none for a zero vector.
    Cosine,
    /// `x·y`.
    Dot,
}

impl Metric {
    fn name(self) -> &'static str {
        match self {
            Metric::Norm => "l2_norm",
            Metric::L2 => "l2_distance",
            Metric::Cosine => "cosine_distance",
            Metric::Dot => "inner_product",
        }
    }

    /// The metric of `x` and `y`, in f64. The sums run in 8 lanes (8 independent chains the
    /// compiler vectorises, not one sequential add per element), so their last bits can differ
    /// from a sequential sum's.
    pub(crate) fn of<T: Copy + Into<f64>>(self, x: &[T], y: &[f64]) -> Option<f64> {
        match self {
            Metric::Norm => Some(lanes(x, y, |a, _| a * a).sqrt()),
            Metric::L2 => Some(lanes(x, y, |a, b| (a - b) * (a - b)).sqrt()),
            Metric::Dot => Some(lanes(x, y, |a, b| a * b)),
            Metric::Cosine => {
                // The three sums in one pass over the two vectors.
                let (mut dot, mut na, mut nb) = ([0.0f64; 8], [0.0f64; 8], [0.0f64; 8]);
                let (cx, cy) = (x.chunks_exact(8), y.chunks_exact(8));
                let (rx, ry) = (cx.remainder(), cy.remainder());
                for (a, b) in cx.zip(cy) {
                    for k in 0..8 {
                        let (a, b) = (a[k].into(), b[k]);
                        dot[k] += a * b;
                        na[k] += a * a;
                        nb[k] += b * b;
                    }
                }
                for (&a, &b) in rx.iter().zip(ry) {
                    let a = a.into();
                    dot[0] += a * b;
                    na[0] += a * a;
                    nb[0] += b * b;
                }
                let (dot, na, nb) = (dot.iter().sum::<f64>(), na.iter().sum::<f64>(), nb.iter().sum::<f64>());
                // A zero vector has no direction: no distance (NULL).
                (na > 0.0 && nb > 0.0).then(|| 1.0 - dot / (na.sqrt() * nb.sqrt()))
            }
        }
    }
}

/// The sum of `term(x[i], y[i])` over `i`, in 8 lanes.
#[inline(always)]
fn lanes<T: Copy + Into<f64>>(x: &[T], y: &[f64], term: impl Fn(f64, f64) -> f64) -> f64 {
    let mut acc = [0.0f64; 8];
    let (cx, cy) = (x.chunks_exact(8), y.chunks_exact(8));
    let (rx, ry) = (cx.remainder(), cy.remainder());
    for (a, b) in cx.zip(cy) {
        for k in 0..8 {
            acc[k] += term(a[k].into(), b[k]);
        }
    }
    let rest: f64 = rx.iter().zip(ry).map(|(&a, &b)| term(a.into(), b)).sum();
    acc.iter().sum::<f64>() + rest
}

/// The length of a vector value's vectors (0 for NULL).
fn vector_len(v: &Val) -> usize {
    match v.data_type() {
        DataType::FixedSizeList(_, d) => *d as usize,
        _ => 0,
    }
}

/// Rows a task of the parallel loops computes.
const ROWS_PER_TASK: usize = 8192;

/// `metric` of each row's two vectors (one side may be one vector for every row), in f64: NULL
/// where either is NULL or the metric has no value. A column against one vector (a query's
/// commonest form) is computed in parallel, float32 and float64 columns read in place.
fn pairwise(a: Val, b: Val, span: Span, metric: Metric) -> Result<Val> {
    use rayon::prelude::*;
    let name = metric.name();
    let scalar = a.scalar && b.scalar;
    let rows = if a.scalar { b.array.len() } else { a.array.len() };
    if matches!(a.data_type(), DataType::Null) || matches!(b.data_type(), DataType::Null) {
        return Ok(Val { array: Arc::new(Float64Array::new_null(rows)), scalar });
    }
    let (da, db) = (vector_len(&a), vector_len(&b));
    if da != db {
        return Err(sql_error(format!("{name}() of vectors of {da} and {db} elements"), span));
    }
    let d = da;
    // Every metric here is symmetric: the column first, the one vector second.
    let (a, b) = if a.scalar && !b.scalar { (b, a) } else { (a, b) };
    let (la, lb) = (a.array.as_fixed_size_list(), b.array.as_fixed_size_list());
    let (ea, eb) = (Elements::of(la.values(), span)?, Elements::of(lb.values(), span)?);
    if b.scalar && !a.scalar {
        let mut q = vec![0.0; d];
        eb.fill(0, &mut q);
        let query_null = lb.is_null(0);
        let mut out = vec![0.0f64; rows];
        let mut valid = vec![true; rows];
        out.par_chunks_mut(ROWS_PER_TASK).zip(valid.par_chunks_mut(ROWS_PER_TASK)).enumerate().for_each(
            |(c, (out, valid))| {
                let mut buf = vec![0.0; d];
                for (j, (o, v)) in out.iter_mut().zip(valid.iter_mut()).enumerate() {
                    let i = c * ROWS_PER_TASK + j;
                    let value = match query_null || la.is_null(i) {
                        true => None,
                        false => ea.row(i, d, &mut buf).metric(metric, &q),
                    };
                    match value {
                        Some(x) => *o = x,
                        None => *v = false,
                    }
                }
            },
        );
        let nulls = valid.iter().any(|v| !v).then(|| arrow_buffer::NullBuffer::from(valid));
        return Ok(Val { array: Arc::new(Float64Array::new(out.into(), nulls)), scalar });
    }
    // Two columns, or two single vectors.
    let (mut x, mut y) = (vec![0.0; d], vec![0.0; d]);
    let row = |scalar: bool, i: usize| if scalar { 0 } else { i };
    if b.scalar {
        eb.fill(0, &mut y);
    }
    if a.scalar {
        ea.fill(0, &mut x);
    }
    let mut out = arrow_array::builder::Float64Builder::with_capacity(rows);
    for i in 0..rows {
        let (ia, ib) = (row(a.scalar, i), row(b.scalar, i));
        if la.is_null(ia) || lb.is_null(ib) {
            out.append_null();
            continue;
        }
        if !a.scalar {
            ea.fill(ia * d, &mut x);
        }
        if !b.scalar {
            eb.fill(ib * d, &mut y);
        }
        out.append_option(metric.of(&x, &y));
    }
    Ok(Val { array: Arc::new(out.finish()), scalar })
}

/// The function called `name` (lowercase).
pub(crate) fn find(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.names.contains(&name))
}

/// Each string through `f`.
fn map_text(v: Val, f: fn(&str) -> String) -> Val {
    let out: StringArray = v.array.as_string::<i32>().iter().map(|x| x.map(f)).collect();
    v.like(Arc::new(out))
}

fn lower(v: Val, _: Span) -> Result<Val> {
    Ok(map_text(v, str::to_lowercase))
}

fn upper(v: Val, _: Span) -> Result<Val> {
    Ok(map_text(v, str::to_uppercase))
}

/// Characters, as SQL counts them (arrow's `length` counts bytes).
fn length(v: Val, _: Span) -> Result<Val> {
    let out: Int64Array =
        v.array.as_string::<i32>().iter().map(|x| x.map(|t| t.chars().count() as i64)).collect();
    Ok(v.like(Arc::new(out)))
}

/// `abs(i64::MIN)` is an error, not a wrap.
fn abs(v: Val, span: Span) -> Result<Val> {
    let out: ArrayRef = match v.data_type() {
        DataType::Null => return Ok(v), // abs(NULL) is NULL
        DataType::Int64 => Arc::new(
            v.array
                .as_primitive::<Int64Type>()
                .iter()
                .map(|x| {
                    x.map(|x| {
                        x.checked_abs().ok_or_else(|| sql_error(format!("abs({x}) overflows BIGINT"), span))
                    })
                    .transpose()
                })
                .collect::<Result<Int64Array>>()?,
        ),
        _ => Arc::new(
            v.array.as_primitive::<Float64Type>().iter().map(|x| x.map(f64::abs)).collect::<Float64Array>(),
        ),
    };
    Ok(v.like(out))
}

/// Of the argument's type, as in PostgreSQL and DuckDB: a float stays a float (for an int field,
/// `CAST(round(x) AS BIGINT)`); halves round away from zero (SQLite's and DuckDB's round).
fn round(v: Val, _: Span) -> Result<Val> {
    if v.data_type() != &DataType::Float64 {
        return Ok(v);
    }
    let out: Float64Array = v.array.as_primitive::<Float64Type>().iter().map(|x| x.map(f64::round)).collect();
    Ok(v.like(Arc::new(out)))
}

/// `json_extract(field, '$.a.b')`: the value at the path in each row's JSON payload, as text
/// (strings unquoted, other values as JSON; missing paths and JSON null are NULL).
fn json_extract(ctx: &Ctx, args: &[&Expr], span: Span) -> Result<Val> {
    let [field, path] = args else {
        return Err(sql_error(format!("json_extract() takes two arguments, got {}", args.len()), span));
    };
    let name = column_name(field)
        .ok_or_else(|| sql_error("json_extract() needs a JSON field name first", pos(field)))?;
    let table = ctx.table();
    let is_json = |ds: &beton_storage::Dataset| {
        ds.fields().iter().position(|f| f.name() == name && *f.field_type() == FieldType::Json)
    };
    is_json(table.dataset()).ok_or_else(|| sql_error(format!("'{name}' is not a JSON field"), pos(field)))?;
    let path = match path {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => s.clone(),
            _ => return Err(sql_error("json_extract() needs a path literal like '$.a.b'", pos(path))),
        },
        _ => return Err(sql_error("json_extract() needs a path literal like '$.a.b'", pos(path))),
    };
    let steps: Vec<&str> = match path.strip_prefix('$') {
        Some("") => Vec::new(),
        Some(rest) if rest.starts_with('.') => rest[1..].split('.').collect(),
        _ => return Err(sql_error(format!("JSON path must start with '$.': {path}"), span)),
    };
    // The rows in scope, as table row ids.
    let ids = ctx.column("index", span)?;
    let ids = ids.as_primitive::<arrow_array::types::UInt64Type>();
    let mut out = Vec::with_capacity(ids.len());
    for &i in ids.values() {
        let (ds, row) = table.locate(i)?;
        let k = is_json(ds).ok_or_else(|| sql_error(format!("'{name}' is not a JSON field"), pos(field)))?;
        let text = match ds.get(row, k)? {
            StorageValue::Json(t) => t,
            _ => unreachable!("JSON field"),
        };
        let doc: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| sql_error(format!("sample {i}: field '{name}' is not valid JSON: {e}"), span))?;
        let mut at_path = Some(&doc);
        for step in &steps {
            at_path = at_path.and_then(|v| match v {
                serde_json::Value::Array(a) => step.parse::<usize>().ok().and_then(|j| a.get(j)),
                _ => v.get(step),
            });
        }
        out.push(match at_path {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
        });
    }
    Ok(Val { array: Arc::new(StringArray::from(out)), scalar: false })
}

/// `in_split('val')`: whether each row in scope is in the file's named split `val`.
fn in_split(ctx: &Ctx, args: &[&Expr], span: Span) -> Result<Val> {
    let name = match args {
        [Expr::Value(v)] => match &v.value {
            Value::SingleQuotedString(s) => s.as_str(),
            _ => {
                return Err(sql_error("in_split() needs a split name in quotes, like in_split('val')", span))
            }
        },
        _ => return Err(sql_error("in_split() needs a split name in quotes, like in_split('val')", span)),
    };
    let split = ctx.table().split(name).map_err(|e| sql_error(e.to_string(), pos(args[0])))?;
    let ids = ctx.column("index", span)?;
    let ids = ids.as_primitive::<arrow_array::types::UInt64Type>();
    let members = split.as_slice();
    let ids = ids.values();
    let out: arrow_array::BooleanArray = if ids.windows(2).all(|w| w[0] < w[1]) {
        // Both ascend (the usual case: rows in table order), so one linear merge.
        let mut j = 0;
        ids.iter()
            .map(|&i| {
                while members.get(j).is_some_and(|&m| m < i) {
                    j += 1;
                }
                Some(members.get(j) == Some(&i))
            })
            .collect()
    } else {
        ids.iter().map(|i| Some(members.binary_search(i).is_ok())).collect()
    };
    Ok(Val { array: Arc::new(out), scalar: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercase_and_name_one_function_each() {
        let mut seen = std::collections::HashSet::new();
        for name in FUNCTIONS.iter().flat_map(|f| f.names) {
            assert_eq!(*name, name.to_ascii_lowercase(), "calls are matched lowercased");
            assert!(seen.insert(*name), "{name} names two functions");
            assert!(find(name).is_some_and(|f| f.names.contains(name)));
        }
    }
}
