//! Expressions to Arrow arrays: each node is one compute kernel over whole columns (arrow-ord
//! comparisons, arrow-arith arithmetic and Kleene logic, arrow-string `LIKE`, arrow-cast casts).
//!
//! Literals stay length-1 scalars ([`Val::scalar`]) so that `label < 3` is one kernel call over the
//! column; they are broadcast only where a kernel needs equal lengths (AND/OR). Numeric operands
//! are widened to a common type first: Int64 when both are integers, Float64 otherwise.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_arith::boolean::{and_kleene, is_not_null, is_null, not, or_kleene};
use arrow_arith::numeric;
use arrow_array::cast::AsArray;
use arrow_array::{
    new_null_array, Array, ArrayRef, BooleanArray, Datum, Float64Array, Int64Array, NullArray, StringArray,
    UInt32Array,
};
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::DataType;
use arrow_select::take::take;
use sqlparser::ast::{
    BinaryOperator, CastKind, DataType as SqlType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    Spanned, UnaryOperator, Value,
};
use sqlparser::tokenizer::Span;

use super::parse::{unsupported, TABLE_NAME};
use super::{at, sql_error};
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
    fn scalar(array: ArrayRef) -> Val {
        Val { array, scalar: true }
    }

    fn data_type(&self) -> &DataType {
        self.array.data_type()
    }

    fn like(&self, array: ArrayRef) -> Val {
        Val { array, scalar: self.scalar }
    }
}

/// Names of the aggregate functions (evaluated by `exec`, not here).
pub(crate) const AGGREGATES: [&str; 5] = ["count", "sum", "min", "max", "avg"];

/// The rows an expression is evaluated over: the whole table, or the rows at `rows`.
pub(crate) struct Ctx<'t, 'a> {
    table: &'t Table<'a>,
    rows: Option<UInt32Array>,
    num_rows: usize,
    /// In a grouped query: one row per group, and the values of the group keys and aggregates
    /// by their SQL text; any other column reference is an error.
    groups: Option<HashMap<String, ArrayRef>>,
}

impl<'t, 'a> Ctx<'t, 'a> {
    /// Every row of `table`.
    pub fn all(table: &'t Table<'a>) -> Self {
        Ctx { table, rows: None, num_rows: table.num_rows() as usize, groups: None }
    }

    /// The rows of `table` at `rows`, ascending and unique.
    pub fn rows(table: &'t Table<'a>, rows: UInt32Array) -> Self {
        debug_assert!(rows.values().windows(2).all(|w| w[0] < w[1]), "rows must ascend");
        if rows.len() as u64 == table.num_rows() {
            // Every row, in order: the columns as cached, without a copy.
            return Ctx::all(table);
        }
        Ctx { table, num_rows: rows.len(), rows: Some(rows), groups: None }
    }

    /// One row per group: expressions whose SQL text is a key of `values` evaluate to it.
    pub fn groups(table: &'t Table<'a>, num_groups: usize, values: HashMap<String, ArrayRef>) -> Self {
        Ctx { table, rows: None, num_rows: num_groups, groups: Some(values) }
    }

    /// The group values of a grouped context.
    pub fn into_groups(self) -> Option<HashMap<String, ArrayRef>> {
        self.groups
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
        let array = self.table.column(name).map_err(at(span))?;
        match &self.rows {
            None => Ok(array),
            Some(rows) => Ok(take(array.as_ref(), rows, None).map_err(|e| at(span)(e.into()))?),
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

    /// Evaluates `e` over the rows in scope.
    ///
    /// # Errors
    /// [`crate::Error::Sql`] at the offending sub-expression.
    pub fn eval(&self, e: &Expr) -> Result<Val> {
        let span = e.span();
        if let Some(groups) = &self.groups {
            if let Some(array) = groups.get(&e.to_string()) {
                return Ok(Val { array: array.clone(), scalar: false });
            }
        }
        match e {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) if self.groups.is_some() => {
                Err(sql_error(format!("'{e}' must appear in GROUP BY or inside an aggregate"), span))
            }
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                let name = column_name(e).unwrap_or_default();
                Ok(Val { array: self.column(&self.resolve(&name), span)?, scalar: false })
            }
            Expr::Value(v) => literal(&v.value, span),
            Expr::Nested(inner) => self.eval(inner),
            Expr::BinaryOp { left, op, right } => {
                let (l, r) = (self.eval(left)?, self.eval(right)?);
                self.binary(l, op, r, span)
            }
            Expr::UnaryOp { op, expr } => {
                let v = self.eval(expr)?;
                match op {
                    UnaryOperator::Not => Ok(v.like(Arc::new(not(&boolean(v.clone(), span)?)?))),
                    UnaryOperator::Minus => {
                        let v = widen(v, span)?;
                        if v.array.data_type() == &DataType::Null {
                            return Ok(v); // -NULL is NULL
                        }
                        Ok(v.like(numeric::neg(v.array.as_ref()).map_err(|e| at(span)(e.into()))?))
                    }
                    UnaryOperator::Plus => widen(v, span),
                    other => Err(unsupported(&format!("operator {other}"), span)),
                }
            }
            Expr::IsNull(x) => {
                let v = self.eval(x)?;
                Ok(v.like(Arc::new(is_null(v.array.as_ref())?)))
            }
            Expr::IsNotNull(x) => {
                let v = self.eval(x)?;
                Ok(v.like(Arc::new(is_not_null(v.array.as_ref())?)))
            }
            Expr::IsTrue(x) | Expr::IsNotTrue(x) | Expr::IsFalse(x) | Expr::IsNotFalse(x) => {
                let v = self.eval(x)?;
                let b = boolean(v.clone(), span)?;
                let b = if matches!(e, Expr::IsFalse(_) | Expr::IsNotFalse(_)) { not(&b)? } else { b };
                let is = null_as_false(&b);
                let is = if matches!(e, Expr::IsNotTrue(_) | Expr::IsNotFalse(_)) { not(&is)? } else { is };
                Ok(v.like(Arc::new(is)))
            }
            Expr::InList { expr, list, negated } => {
                let v = self.eval(expr)?;
                let mut acc: Option<Val> = None;
                for item in list {
                    let eq = self.binary(v.clone(), &BinaryOperator::Eq, self.eval(item)?, item.span())?;
                    acc = Some(match acc {
                        None => eq,
                        Some(a) => self.logic(a, eq, true, span)?,
                    });
                }
                let acc = acc.ok_or_else(|| sql_error("IN () needs at least one value", span))?;
                self.negate(acc, *negated, span)
            }
            Expr::Between { expr, negated, low, high } => {
                let v = self.eval(expr)?;
                let ge = self.binary(v.clone(), &BinaryOperator::GtEq, self.eval(low)?, low.span())?;
                let le = self.binary(v, &BinaryOperator::LtEq, self.eval(high)?, high.span())?;
                let both = self.logic(ge, le, false, span)?;
                self.negate(both, *negated, span)
            }
            Expr::Like { negated, any, expr, pattern, escape_char }
            | Expr::ILike { negated, any, expr, pattern, escape_char } => {
                if *any {
                    return Err(unsupported("LIKE ANY", span));
                }
                if let Some(c) = escape_char {
                    return Err(unsupported("LIKE … ESCAPE", c.span()));
                }
                let v = string(self.eval(expr)?, expr.span())?;
                let p = string(self.eval(pattern)?, pattern.span())?;
                let kernel = if matches!(e, Expr::Like { .. }) {
                    arrow_string::like::like
                } else {
                    arrow_string::like::ilike
                };
                let out = Val { array: Arc::new(kernel(&v, &p)?), scalar: v.scalar && p.scalar };
                self.negate(out, *negated, span)
            }
            Expr::Cast { kind, expr, data_type, format } => {
                if format.is_some() || !matches!(kind, CastKind::Cast | CastKind::DoubleColon) {
                    return Err(unsupported("this form of CAST", span));
                }
                let to = arrow_type(data_type, span)?;
                let v = self.eval(expr)?;
                cast(v, &to, span)
            }
            Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_lowercase();
                if f.over.is_some() {
                    return Err(unsupported("window functions", span));
                }
                if AGGREGATES.contains(&name.as_str()) {
                    return Err(sql_error(format!("aggregate {name}() is not allowed here"), span));
                }
                let args = function_args(f, span)?;
                self.function(&name, &args, span)
            }
            Expr::Case { operand, conditions, else_result, .. } => {
                // Folded from the last WHEN to the first, so the first true condition wins.
                let mut out = match else_result {
                    Some(x) => self.eval(x)?,
                    None => Val::scalar(Arc::new(NullArray::new(1))),
                };
                for when in conditions.iter().rev() {
                    let cond = match operand {
                        Some(op) => self.binary(
                            self.eval(op)?,
                            &BinaryOperator::Eq,
                            self.eval(&when.condition)?,
                            when.condition.span(),
                        )?,
                        None => self.eval(&when.condition)?,
                    };
                    let mask = boolean(cond.clone(), when.condition.span())?;
                    let then = self.eval(&when.result)?;
                    let (then, rest) = coerce(then, out, "vs", when.result.span())?;
                    let scalar = cond.scalar && then.scalar && rest.scalar;
                    let full = |v: Val| -> Result<Val> {
                        if scalar {
                            Ok(v)
                        } else {
                            Ok(Val { array: self.broadcast(v)?, scalar: false })
                        }
                    };
                    let mask = if scalar || !cond.scalar {
                        null_as_false(&mask)
                    } else {
                        null_as_false(self.broadcast(Val::scalar(Arc::new(mask)))?.as_boolean())
                    };
                    let (then, rest) = (full(then)?, full(rest)?);
                    out = Val { array: arrow_select::zip::zip(&mask, &then, &rest)?, scalar };
                }
                Ok(out)
            }
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                Err(unsupported("subqueries", span))
            }
            other => Err(unsupported(&format!("the expression '{other}'"), span)),
        }
    }

    /// A scalar function that is not an aggregate.
    fn function(&self, name: &str, args: &[&Expr], span: Span) -> Result<Val> {
        let one = || match args {
            [a] => Ok(*a),
            _ => Err(sql_error(format!("{name}() takes one argument, got {}", args.len()), span)),
        };
        match name {
            "lower" | "upper" => {
                let v = string(self.eval(one()?)?, span)?;
                let s = v.array.as_string::<i32>();
                let out: StringArray = if name == "lower" {
                    s.iter().map(|x| x.map(str::to_lowercase)).collect()
                } else {
                    s.iter().map(|x| x.map(str::to_uppercase)).collect()
                };
                Ok(v.like(Arc::new(out)))
            }
            "length" | "char_length" | "character_length" => {
                let v = string(self.eval(one()?)?, span)?;
                // Characters, as SQL counts them (arrow's `length` counts bytes).
                let s = v.array.as_string::<i32>();
                let out: Int64Array = s.iter().map(|x| x.map(|t| t.chars().count() as i64)).collect();
                Ok(v.like(Arc::new(out)))
            }
            "abs" => {
                let v = widen(self.eval(one()?)?, span)?;
                let out: ArrayRef = match v.data_type() {
                    DataType::Int64 => Arc::new(
                        v.array
                            .as_primitive::<arrow_array::types::Int64Type>()
                            .iter()
                            .map(|x| x.map(i64::wrapping_abs))
                            .collect::<Int64Array>(),
                    ),
                    _ => Arc::new(
                        v.array
                            .as_primitive::<arrow_array::types::Float64Type>()
                            .iter()
                            .map(|x| x.map(f64::abs))
                            .collect::<Float64Array>(),
                    ),
                };
                Ok(v.like(out))
            }
            "json_extract" => super::exec::json_extract(self, args, span),
            "in_split" => super::exec::in_split(self, args, span),
            _ => Err(sql_error(
                format!(
                    "unknown function {name}(); the functions are lower, upper, length, abs, json_extract, in_split, \
                     and the aggregates count, sum, min, max, avg"
                ),
                span,
            )),
        }
    }

    /// `l op r`, with operands coerced to a common type.
    pub fn binary(&self, l: Val, op: &BinaryOperator, r: Val, span: Span) -> Result<Val> {
        use BinaryOperator as B;
        let err = at(span);
        if matches!(op, B::And | B::Or) {
            return self.logic(l, r, matches!(op, B::Or), span);
        }
        let scalar = l.scalar && r.scalar;
        match op {
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq => {
                let (l, r) = narrow_literal(l, r);
                let (l, r) = coerce(l, r, &op.to_string(), span)?;
                let (l, r) = (sql_float_order(l), sql_float_order(r));
                let out = match op {
                    B::Eq => arrow_ord::cmp::eq(&l, &r),
                    B::NotEq => arrow_ord::cmp::neq(&l, &r),
                    B::Lt => arrow_ord::cmp::lt(&l, &r),
                    B::LtEq => arrow_ord::cmp::lt_eq(&l, &r),
                    B::Gt => arrow_ord::cmp::gt(&l, &r),
                    _ => arrow_ord::cmp::gt_eq(&l, &r),
                }
                .map_err(|e| err(e.into()))?;
                Ok(Val { array: Arc::new(out), scalar })
            }
            B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo => {
                let (l, r) = (widen(l, span)?, widen(r, span)?);
                if l.array.data_type() == &DataType::Null && r.array.data_type() == &DataType::Null {
                    // NULL op NULL is NULL (Arrow's kernels have no arithmetic on the Null type).
                    let len = l.array.len().max(r.array.len());
                    return Ok(Val { array: new_null_array(&DataType::Null, len), scalar });
                }
                let (l, r) = coerce(l, r, &op.to_string(), span)?;
                let out = match op {
                    B::Plus => numeric::add(&l, &r),
                    B::Minus => numeric::sub(&l, &r),
                    B::Multiply => numeric::mul(&l, &r),
                    B::Divide => numeric::div(&l, &r),
                    _ => numeric::rem(&l, &r),
                }
                .map_err(|e| err(e.into()))?;
                Ok(Val { array: out, scalar })
            }
            other => Err(unsupported(&format!("operator {other}"), span)),
        }
    }

    /// Kleene AND (`or == false`) or OR of two booleans.
    pub fn logic(&self, l: Val, r: Val, or: bool, span: Span) -> Result<Val> {
        let scalar = l.scalar && r.scalar;
        let (l, r) = (boolean(l, span)?, boolean(r, span)?);
        let (l, r) = if scalar || l.len() == r.len() {
            (l, r)
        } else {
            let l = self.broadcast(Val { scalar: l.len() == 1, array: Arc::new(l) })?;
            let r = self.broadcast(Val { scalar: r.len() == 1, array: Arc::new(r) })?;
            (l.as_boolean().clone(), r.as_boolean().clone())
        };
        let out = if or { or_kleene(&l, &r)? } else { and_kleene(&l, &r)? };
        Ok(Val { array: Arc::new(out), scalar })
    }

    fn negate(&self, v: Val, negated: bool, span: Span) -> Result<Val> {
        if !negated {
            return Ok(v);
        }
        let b = boolean(v.clone(), span)?;
        Ok(v.like(Arc::new(not(&b)?)))
    }
}

/// True where `b` is true; NULL becomes false.
pub(crate) fn null_as_false(b: &BooleanArray) -> BooleanArray {
    match b.nulls() {
        Some(n) => BooleanArray::new(b.values() & n.inner(), None),
        None => BooleanArray::new(b.values().clone(), None),
    }
}

/// The column a (compound) identifier names: parts joined with '.'.
pub(crate) fn column_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(i.value.clone()),
        Expr::CompoundIdentifier(parts) => {
            Some(parts.iter().map(|p| p.value.as_str()).collect::<Vec<_>>().join("."))
        }
        _ => None,
    }
}

/// The plain expression arguments of a function call (`*` only for `count`).
pub(crate) fn function_args(f: &sqlparser::ast::Function, span: Span) -> Result<Vec<&Expr>> {
    if f.filter.is_some() || !f.within_group.is_empty() || !matches!(f.parameters, FunctionArguments::None) {
        return Err(unsupported("this form of function call", span));
    }
    match &f.args {
        FunctionArguments::None => Ok(Vec::new()),
        FunctionArguments::Subquery(_) => Err(unsupported("subqueries", span)),
        FunctionArguments::List(list) => {
            if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
                return Err(unsupported("DISTINCT or clauses inside a function call", span));
            }
            list.args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                    _ => Err(sql_error(format!("unsupported argument '{a}'"), span)),
                })
                .collect()
        }
    }
}

/// A literal as a length-1 array.
fn literal(v: &Value, span: Span) -> Result<Val> {
    let array: ArrayRef = match v {
        Value::Number(n, _) => match n.parse::<i64>() {
            Ok(i) => Arc::new(Int64Array::from(vec![i])),
            Err(_) => match n.parse::<f64>() {
                Ok(x) => Arc::new(Float64Array::from(vec![x])),
                Err(_) => return Err(sql_error(format!("number out of range: {n}"), span)),
            },
        },
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) | Value::EscapedStringLiteral(s) => {
            Arc::new(StringArray::from(vec![s.as_str()]))
        }
        Value::Boolean(b) => Arc::new(BooleanArray::from(vec![*b])),
        Value::Null => Arc::new(NullArray::new(1)),
        other => return Err(unsupported(&format!("the literal {other}"), span)),
    };
    Ok(Val::scalar(array))
}

fn is_integer(t: &DataType) -> bool {
    t.is_integer()
}

fn is_numeric(t: &DataType) -> bool {
    t.is_integer() || t.is_floating()
}

/// Integers to Int64, floats to Float64, NULL kept; anything else is a type error.
fn widen(v: Val, span: Span) -> Result<Val> {
    match v.data_type() {
        DataType::Int64 | DataType::Float64 | DataType::Null => Ok(v),
        t if is_integer(t) => cast(v, &DataType::Int64, span),
        t if t.is_floating() => cast(v, &DataType::Float64, span),
        t => Err(sql_error(format!("expected a number, got {}", sql_type_name(t)), span)),
    }
}

/// An integer literal compared with an integer column of another type: the literal cast to the
/// column's type when it fits, so that the column is compared as it is instead of through a widened
/// copy (`image.width >= 2` compares UInt16 values). The outcome is the same: both sides hold the
/// same integers either way. A literal that does not fit is left for [`coerce`] to widen.
fn narrow_literal(l: Val, r: Val) -> (Val, Val) {
    let narrows = |lit: &Val, col: &Val| {
        lit.scalar
            && !col.scalar
            && lit.data_type() == &DataType::Int64
            && lit.array.null_count() == 0
            && col.data_type().is_integer()
            && col.data_type() != &DataType::Int64
    };
    if narrows(&r, &l) {
        if let Ok(r) = cast(r.clone(), l.data_type(), Span::empty()) {
            return (l, r);
        }
    } else if narrows(&l, &r) {
        if let Ok(l) = cast(l.clone(), r.data_type(), Span::empty()) {
            return (l, r);
        }
    }
    (l, r)
}

/// Both operands at one type: numbers to Int64 or Float64, NULL to the other side's type.
fn coerce(l: Val, r: Val, op: &str, span: Span) -> Result<(Val, Val)> {
    let (lt, rt) = (l.data_type().clone(), r.data_type().clone());
    if lt == rt {
        return Ok((l, r));
    }
    match (&lt, &rt) {
        (DataType::Null, DataType::Null) => {
            Ok((cast(l, &DataType::Int64, span)?, cast(r, &DataType::Int64, span)?))
        }
        (DataType::Null, t) => Ok((cast(l, t, span)?, r)),
        (t, DataType::Null) => Ok((l, cast(r, t, span)?)),
        (a, b) if is_numeric(a) && is_numeric(b) => {
            let to = if a.is_floating() || b.is_floating() { DataType::Float64 } else { DataType::Int64 };
            Ok((cast(l, &to, span)?, cast(r, &to, span)?))
        }
        _ => {
            Err(sql_error(format!("type mismatch: {} {op} {}", sql_type_name(&lt), sql_type_name(&rt)), span))
        }
    }
}

/// `v` as a BooleanArray (NULL literals become a null boolean).
fn boolean(v: Val, span: Span) -> Result<BooleanArray> {
    match v.data_type() {
        DataType::Boolean => Ok(v.array.as_boolean().clone()),
        DataType::Null => Ok(new_null_array(&DataType::Boolean, v.array.len()).as_boolean().clone()),
        t => Err(sql_error(format!("expected a boolean, got {}", sql_type_name(t)), span)),
    }
}

/// `v` as Utf8 (NULL literals become a null string).
fn string(v: Val, span: Span) -> Result<Val> {
    match v.data_type() {
        DataType::Utf8 => Ok(v),
        DataType::Null => cast(v, &DataType::Utf8, span),
        t => Err(sql_error(format!("expected a string, got {}", sql_type_name(t)), span)),
    }
}

/// Casts that fail (not a number, out of range) are errors, not NULLs.
fn cast(v: Val, to: &DataType, span: Span) -> Result<Val> {
    if v.data_type() == to {
        return Ok(v);
    }
    let options = CastOptions { safe: false, ..CastOptions::default() };
    let array = cast_with_options(v.array.as_ref(), to, &options).map_err(|e| at(span)(e.into()))?;
    Ok(v.like(array))
}

/// True when `values` holds a NaN or -0.0. Branch-free within blocks of 1024 so that it compiles to
/// SIMD (a short-circuiting `any` per value does not).
fn has_nan_or_negative_zero(values: &[f64]) -> bool {
    let negative_zero = (-0.0f64).to_bits();
    values
        .chunks(1024)
        .any(|block| block.iter().fold(false, |seen, x| seen | x.is_nan() | (x.to_bits() == negative_zero)))
}

/// The Arrow type of an SQL type name in CAST.
fn arrow_type(t: &SqlType, span: Span) -> Result<DataType> {
    Ok(match t {
        SqlType::Int(_)
        | SqlType::Integer(_)
        | SqlType::BigInt(_)
        | SqlType::SmallInt(_)
        | SqlType::TinyInt(_)
        | SqlType::Int2(_)
        | SqlType::Int4(_)
        | SqlType::Int8(_)
        | SqlType::Int64 => DataType::Int64,
        SqlType::Float(_)
        | SqlType::Real
        | SqlType::Double(_)
        | SqlType::DoublePrecision
        | SqlType::Float64
        | SqlType::Float8 => DataType::Float64,
        SqlType::Varchar(_)
        | SqlType::CharacterVarying(_)
        | SqlType::Char(_)
        | SqlType::Text
        | SqlType::String(_) => DataType::Utf8,
        SqlType::Boolean | SqlType::Bool => DataType::Boolean,
        other => return Err(unsupported(&format!("CAST to {other}"), span)),
    })
}

/// SQL's name for an Arrow type, in messages.
pub(crate) fn sql_type_name(t: &DataType) -> &'static str {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 => "VARCHAR",
        DataType::Boolean => "BOOLEAN",
        DataType::Null => "NULL",
        DataType::Float32 | DataType::Float64 => "DOUBLE",
        t if t.is_integer() => "INTEGER",
        DataType::FixedSizeBinary(_) => "BINARY",
        _ => "unsupported type",
    }
}

/// Float operands made to compare as SQL does under Arrow's IEEE totalOrder kernels: `-0.0` becomes
/// `0.0` (SQL: equal), and every NaN the positive quiet NaN (totalOrder puts a NaN with its sign bit
/// set below every number; PostgreSQL's NaN is above every number and equal to itself).
fn sql_float_order(v: Val) -> Val {
    match v.array.as_any().downcast_ref::<Float64Array>() {
        // Nothing to change (the usual case): no copy of the column. Checking is one read-only
        // pass, far cheaper than writing a new column of the same size.
        Some(a) if !has_nan_or_negative_zero(a.values()) => v,
        Some(a) => {
            let out: Float64Array =
                arrow_arith::arity::unary(a, |x: f64| if x.is_nan() { f64::NAN } else { x + 0.0 });
            Val { array: Arc::new(out), scalar: v.scalar }
        }
        None => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nan_and_negative_zero_anywhere() {
        let mut values = vec![0.5; 3000];
        assert!(!has_nan_or_negative_zero(&values));
        values[0] = 0.0;
        assert!(!has_nan_or_negative_zero(&values), "positive zero is kept");
        for (at, x) in [(0, f64::NAN), (1023, -0.0), (1024, -f64::NAN), (2999, f64::NAN)] {
            let mut v = values.clone();
            v[at] = x;
            assert!(has_nan_or_negative_zero(&v), "{x} at {at}");
        }
        assert!(!has_nan_or_negative_zero(&[]));
    }
}
