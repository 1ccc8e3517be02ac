//! Expressions to Arrow arrays: each node is one compute kernel over whole columns (arrow-ord
//! comparisons, arrow-arith arithmetic and Kleene logic, arrow-string `LIKE`, arrow-cast casts).
//!
//! Literals stay length-1 scalars ([`Val::scalar`]) so that `label < 3` is one kernel call over the
//! column; they are broadcast only where a kernel needs equal lengths (AND/OR). Numeric operands
//! are widened to a common type first: Int64 when both are integers, Float64 otherwise.
//!
//! A chain of operators (`a OR b OR …`, `x + 1 + 1 …`, `NOT NOT x`, `x IS NULL IS NULL`) is
//! evaluated in a loop over its first operands ([`Ctx::eval`]), not by recursion: its depth is the
//! length of the chain, which nothing bounds. `IN` over literals is one pass with a hash set.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_arith::boolean::{and_kleene, is_not_null, is_null, not, or_kleene};
use arrow_arith::numeric;
use arrow_array::cast::AsArray;
use arrow_array::{
    new_null_array, Array, ArrayRef, BooleanArray, Float64Array, Int64Array, NullArray, StringArray,
};
use arrow_buffer::BooleanBuffer;
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::DataType;
use sqlparser::ast::{
    BinaryOperator, CastKind, DataType as SqlType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    UnaryOperator, Value,
};
use sqlparser::tokenizer::Span;

use super::ast::{column_name, deeper, expr_text, first_operand, negated_number, pos};
use super::error::{at, sql_error};
use super::functions::{self, Kind, FUNCTIONS};
use super::parse::unsupported;
use super::scope::{Ctx, Val};
use crate::error::Result;

/// Names of the aggregate functions (evaluated by `exec`, not here).
pub(crate) const AGGREGATES: [&str; 5] = ["count", "sum", "min", "max", "avg"];

impl Ctx<'_, '_> {
    /// Evaluates `e` over the rows in scope.
    ///
    /// The chain of first operands below `e` (see [`first_operand`]) is walked in a loop: its
    /// bottom is evaluated, then each operator above it, from the bottom up; only the other
    /// operands (the right side of a binary operator, an `IN` list, …) are evaluated recursively,
    /// through [`deeper`]. Every node of the chain starts where its bottom does, so that is the
    /// position of their errors, as sqlparser's spans would give it.
    ///
    /// # Errors
    /// [`crate::Error::Sql`] at the offending sub-expression.
    pub fn eval(&self, e: &Expr) -> Result<Val> {
        deeper(|| {
            // A grouped context looks every node up by its text, which is built bottom-up only
            // along binary operators (see `group_value`); other forms are one level each there.
            let grouped = self.is_grouped();
            let mut chain = Vec::new();
            let mut bottom = e;
            while let Some(operand) = first_operand(bottom) {
                if grouped && !matches!(bottom, Expr::BinaryOp { .. }) {
                    break;
                }
                chain.push(bottom);
                bottom = operand;
            }
            let span = pos(bottom);
            for node in &chain {
                self.check(node, span)?;
            }
            let (mut v, mut level) = match self.group_value(bottom, &chain) {
                Some(found) => found,
                None => (self.eval_bottom(bottom, span)?, chain.len()),
            };
            while level > 0 {
                level -= 1;
                v = self.apply(chain[level], v, span)?;
            }
            Ok(v)
        })
    }

    /// What must hold of a chain node before its operand is evaluated (the checks that came first
    /// when evaluation recursed): supported `LIKE` and `CAST` forms. `span` is the node's.
    fn check(&self, e: &Expr, span: Span) -> Result<()> {
        match e {
            Expr::Like { any: true, .. } | Expr::ILike { any: true, .. } => {
                Err(unsupported("LIKE ANY", span))
            }
            Expr::Cast { kind, data_type, format, .. } => {
                if format.is_some() || !matches!(kind, CastKind::Cast | CastKind::DoubleColon) {
                    return Err(unsupported("this form of CAST", span));
                }
                arrow_type(data_type, span).map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// Applies chain node `e` (see [`first_operand`]) to the value `v` of its first operand.
    fn apply(&self, e: &Expr, v: Val, span: Span) -> Result<Val> {
        match e {
            Expr::BinaryOp { op, right, .. } => {
                let r = self.eval(right)?;
                self.binary(v, op, r, span)
            }
            Expr::UnaryOp { op, .. } => match op {
                UnaryOperator::Not => Ok(v.like(Arc::new(not(&boolean(v.clone(), span)?)?))),
                UnaryOperator::Minus => {
                    let v = widen(v, span)?;
                    if v.array.data_type() == &DataType::Null {
                        return Ok(v); // -NULL is NULL
                    }
                    // Checked: -(-9223372036854775808) is an error.
                    Ok(v.like(numeric::neg(v.array.as_ref()).map_err(|e| at(span)(e.into()))?))
                }
                UnaryOperator::Plus => widen(v, span),
                other => Err(unsupported(&format!("operator {other}"), span)),
            },
            Expr::Nested(_) => Ok(v),
            Expr::IsNull(_) => Ok(v.like(Arc::new(is_null(v.array.as_ref())?))),
            Expr::IsNotNull(_) => Ok(v.like(Arc::new(is_not_null(v.array.as_ref())?))),
            Expr::IsTrue(_) | Expr::IsNotTrue(_) | Expr::IsFalse(_) | Expr::IsNotFalse(_) => {
                let b = boolean(v.clone(), span)?;
                let b = if matches!(e, Expr::IsFalse(_) | Expr::IsNotFalse(_)) { not(&b)? } else { b };
                let is = null_as_false(&b);
                let is = if matches!(e, Expr::IsNotTrue(_) | Expr::IsNotFalse(_)) { not(&is)? } else { is };
                Ok(v.like(Arc::new(is)))
            }
            Expr::InList { list, negated, .. } => {
                let out = self.in_list(v, list, span)?;
                self.negate(out, *negated, span)
            }
            Expr::Between { negated, low, high, .. } => {
                let ge = self.binary(v.clone(), &BinaryOperator::GtEq, self.eval(low)?, pos(low))?;
                let le = self.binary(v, &BinaryOperator::LtEq, self.eval(high)?, pos(high))?;
                let both = self.logic(ge, le, false, span)?;
                self.negate(both, *negated, span)
            }
            Expr::Like { negated, pattern, escape_char, .. }
            | Expr::ILike { negated, pattern, escape_char, .. } => {
                let v = string(v, span)?;
                let p = string(self.eval(pattern)?, pos(pattern))?;
                let p = match escape_char {
                    Some(c) => self.escape_pattern(p, pos(pattern), c)?,
                    None => p,
                };
                let kernel = if matches!(e, Expr::Like { .. }) {
                    arrow_string::like::like
                } else {
                    arrow_string::like::ilike
                };
                let out = Val { array: Arc::new(kernel(&v, &p)?), scalar: v.scalar && p.scalar };
                self.negate(out, *negated, span)
            }
            Expr::Cast { data_type, .. } => cast(v, &arrow_type(data_type, span)?, span),
            other => Err(unsupported(&format!("the expression '{}'", shown(other)), span)),
        }
    }

    /// `LIKE` pattern `p` with escape character `c` (a one-character string; `''` for none) in
    /// arrow's syntax, where `\` escapes the character after it.
    fn escape_pattern(&self, p: Val, pattern_span: Span, c: &Expr) -> Result<Val> {
        let span = pos(c);
        let escape = string(self.eval(c)?, span)?;
        let scalar = escape.scalar;
        let escape = escape.array.as_string::<i32>();
        let escape = match (scalar, escape.iter().next().flatten()) {
            (true, Some(text)) => {
                let mut chars = text.chars();
                match (chars.next(), chars.next()) {
                    (first, None) => first,
                    _ => return Err(sql_error(format!("ESCAPE needs one character, got '{text}'"), span)),
                }
            }
            // NULL: as in PostgreSQL, the whole LIKE is NULL.
            (true, None) => return Ok(Val::scalar(new_null_array(&DataType::Utf8, 1))),
            _ => return Err(sql_error("ESCAPE needs one character, not a column", span)),
        };
        let patterns = p.array.as_string::<i32>();
        let out = patterns
            .iter()
            .map(|x| x.map(|x| like_escaped(x, escape)).transpose())
            .collect::<std::result::Result<StringArray, _>>()
            .map_err(|message| sql_error(message, pattern_span))?;
        Ok(p.like(Arc::new(out)))
    }

    /// `v IN (list)`, before `NOT`: by [`in_set`] when every item is a literal (or another
    /// scalar), else as `v = a OR v = b OR …`.
    fn in_list(&self, v: Val, list: &[Expr], span: Span) -> Result<Val> {
        if list.is_empty() {
            return Err(sql_error("IN () needs at least one value", span));
        }
        let mut items = Vec::with_capacity(list.len());
        for item in list {
            let x = self.eval(item)?;
            if !x.scalar {
                return self.in_fold(v, list, span);
            }
            // The type error `v = item` would give, in the order the items come.
            if !comparable(v.data_type(), x.data_type()) {
                let (l, r) = (sql_type_name(v.data_type()), sql_type_name(x.data_type()));
                return Err(sql_error(format!("type mismatch: {l} = {r}"), pos(item)));
            }
            items.push(x);
        }
        match in_set(&v, &items) {
            Some(out) => Ok(Val { array: Arc::new(out), scalar: v.scalar }),
            None => self.in_fold(v, list, span),
        }
    }

    /// `v = a OR v = b OR …`, for lists [`in_set`] does not take.
    fn in_fold(&self, v: Val, list: &[Expr], span: Span) -> Result<Val> {
        let mut acc: Option<Val> = None;
        for item in list {
            let eq = self.binary(v.clone(), &BinaryOperator::Eq, self.eval(item)?, pos(item))?;
            acc = Some(match acc {
                None => eq,
                Some(a) => self.logic(a, eq, true, span)?,
            });
        }
        acc.ok_or_else(|| sql_error("IN () needs at least one value", span))
    }

    /// A node that is not a chain node (or, in a grouped context, any node but a binary operator).
    fn eval_bottom(&self, e: &Expr, span: Span) -> Result<Val> {
        if let Expr::UnaryOp { op: UnaryOperator::Minus, expr } = e {
            if let Some(n) = negated_number(expr) {
                // `-9223372036854775808` is one BIGINT literal, as in PostgreSQL.
                return literal(&Value::Number(format!("-{n}"), false), span);
            }
        }
        if let Some(operand) = first_operand(e) {
            self.check(e, span)?;
            let v = self.eval(operand)?;
            return self.apply(e, v, span);
        }
        match e {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) if self.is_grouped() => {
                Err(sql_error(format!("'{e}' must appear in GROUP BY or inside an aggregate"), span))
            }
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                let name = self.resolve(&column_name(e).unwrap_or_default());
                if let Some(field) = functions::phash_column(self.table(), &name) {
                    // `image.phash`: the image's perceptual hash, computed (not a stored column).
                    let arg = Expr::Identifier(sqlparser::ast::Ident::new(field));
                    return functions::phash(self, &[&arg], span);
                }
                Ok(Val { array: self.column(&name, span)?, scalar: false })
            }
            Expr::Value(v) => literal(&v.value, span),
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
                            pos(&when.condition),
                        )?,
                        None => self.eval(&when.condition)?,
                    };
                    let mask = boolean(cond.clone(), pos(&when.condition))?;
                    let then = self.eval(&when.result)?;
                    let (then, rest) = coerce(then, out, "vs", pos(&when.result))?;
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
            Expr::Array(a) => {
                // A vector literal (`[1, 2.5, -3]`, or a vector parameter): numbers only.
                let mut values = Vec::with_capacity(a.elem.len());
                for e in &a.elem {
                    let v = widen(self.eval(e)?, pos(e))?;
                    let x = match v.data_type() {
                        DataType::Int64 if v.scalar && v.array.is_valid(0) => {
                            v.array.as_primitive::<arrow_array::types::Int64Type>().value(0) as f64
                        }
                        DataType::Float64 if v.scalar && v.array.is_valid(0) => {
                            v.array.as_primitive::<arrow_array::types::Float64Type>().value(0)
                        }
                        _ => {
                            return Err(sql_error(
                                "a vector's elements are numbers (not NULL, not columns)",
                                pos(e),
                            ))
                        }
                    };
                    values.push(x);
                }
                if values.is_empty() {
                    return Err(sql_error("a vector has at least one element", span));
                }
                Ok(Val::scalar(functions::vector_literal(values)?))
            }
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                Err(unsupported("subqueries", span))
            }
            other => Err(unsupported(&format!("the expression '{}'", shown(other)), span)),
        }
    }

    /// A scalar function that is not an aggregate: looked up in [`FUNCTIONS`], its arguments
    /// checked as its entry says.
    fn function(&self, name: &str, args: &[&Expr], span: Span) -> Result<Val> {
        let Some(f) = functions::find(name) else {
            let names: Vec<&str> = FUNCTIONS.iter().map(|f| f.names[0]).collect();
            return Err(sql_error(
                format!(
                    "unknown function {name}(); the functions are {}, and the aggregates {}",
                    names.join(", "),
                    AGGREGATES.join(", ")
                ),
                span,
            ));
        };
        let one = || match args {
            [a] => self.eval(a),
            _ => Err(sql_error(format!("{name}() takes one argument, got {}", args.len()), span)),
        };
        match f.kind {
            Kind::Text(apply) => apply(string(one()?, span)?, span),
            Kind::Number(apply) => apply(widen(one()?, span)?, span),
            Kind::Exprs { eval, .. } => eval(self, args, span),
            Kind::Vector(apply) => apply(vector(one()?, name, span)?, span),
            Kind::Vectors(apply) => match args {
                [a, b] => {
                    apply(vector(self.eval(a)?, name, pos(a))?, vector(self.eval(b)?, name, pos(b))?, span)
                }
                _ => {
                    Err(sql_error(format!("{name}() takes two vectors, got {} arguments", args.len()), span))
                }
            },
            Kind::Bits(apply) => match args {
                [a, b] => apply(self.eval(a)?, self.eval(b)?, span),
                _ => {
                    Err(sql_error(format!("{name}() takes two integers, got {} arguments", args.len()), span))
                }
            },
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
pub(crate) fn has_nan_or_negative_zero(values: &[f64]) -> bool {
    let negative_zero = (-0.0f64).to_bits();
    values
        .chunks(1024)
        .any(|block| block.iter().fold(false, |seen, x| seen | x.is_nan() | (x.to_bits() == negative_zero)))
}

/// `e` as SQL text for a message, cut after 80 characters.
fn shown(e: &Expr) -> String {
    let text = expr_text(e);
    match text.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// `pattern` with escape character `escape` rewritten in arrow's `LIKE` syntax, where `\` is the
/// escape character (arrow-string's `like`: `\x` matches `x`, `\\` a backslash). Without an
/// escape character (`ESCAPE ''`) every character but `%` and `_` is literal, backslash included.
///
/// # Errors
/// A pattern that ends with its escape character (PostgreSQL refuses it too).
fn like_escaped(pattern: &str, escape: Option<char>) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 2);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            let Some(next) = chars.next() else {
                return Err(format!("LIKE pattern '{pattern}' ends with its ESCAPE character"));
            };
            if matches!(next, '%' | '_' | '\\') {
                out.push('\\');
            }
            out.push(next);
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Whether `=` takes operands of types `l` and `r` ([`coerce`]'s rule).
fn comparable(l: &DataType, r: &DataType) -> bool {
    l == r || *l == DataType::Null || *r == DataType::Null || (is_numeric(l) && is_numeric(r))
}

/// The key of a float in [`in_set`]: equal for values SQL calls equal (`-0.0` and `0.0`; every
/// NaN), as [`sql_float_order`] makes them before arrow compares.
fn float_key(x: f64) -> u64 {
    if x.is_nan() {
        f64::NAN.to_bits()
    } else {
        (x + 0.0).to_bits()
    }
}

/// Lists up to this long are searched member by member in [`in_set`]'s fast path; longer ones
/// by binary search.
const SHORT_IN_LIST: usize = 16;

/// `v IN (items)` for length-1 `items` of types [`comparable`] with `v`: one pass over `v` with a
/// hash set, the same answer as `v = a OR v = b OR …` (three-valued: NULL where nothing matches
/// and `v` or an item is NULL) in time linear in rows plus items. Integers compare exactly, an
/// integer and a float as the integer cast to a float, floats as [`float_key`]s. `None` for types
/// it does not take (the caller folds `=` and `OR`).
fn in_set(v: &Val, items: &[Val]) -> Option<BooleanArray> {
    use arrow_array::types::{
        Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
        UInt64Type, UInt8Type,
    };
    let (mut ints, mut floats, mut strings, mut bools) =
        (HashSet::new(), HashSet::new(), HashSet::new(), [false; 2]);
    let mut any_null = false;
    let column = v.data_type();
    for item in items {
        let a = item.array.as_ref();
        if a.is_null(0) {
            any_null = true;
            continue;
        }
        match a.data_type() {
            DataType::Int64 => {
                let x = a.as_primitive::<Int64Type>().value(0);
                if column.is_floating() {
                    floats.insert(float_key(x as f64));
                } else {
                    ints.insert(i128::from(x));
                }
            }
            DataType::Float64 => {
                floats.insert(float_key(a.as_primitive::<Float64Type>().value(0)));
            }
            DataType::Utf8 => {
                strings.insert(a.as_string::<i32>().value(0));
            }
            DataType::Boolean => bools[usize::from(a.as_boolean().value(0))] = true,
            _ => return None,
        }
    }
    let answer = |hit: bool| {
        if hit {
            Some(true)
        } else if any_null {
            None
        } else {
            Some(false)
        }
    };
    // The common case, an integer column without nulls against integers: the set's members
    // compared in one pass over the values (a few compares or a binary search per row, no
    // hashing, no null buffer), the same answers as the general path below.
    let only_ints = floats.is_empty() && strings.is_empty() && bools == [false; 2];
    if column.is_integer() && v.array.null_count() == 0 && !any_null && only_ints {
        let mut members: Vec<i128> = ints.iter().copied().collect();
        members.sort_unstable();
        let hit = |x: i128| match members.len() <= SHORT_IN_LIST {
            true => members.contains(&x),
            false => members.binary_search(&x).is_ok(),
        };
        macro_rules! in_members {
            ($t:ty) => {{
                let values = v.array.as_primitive::<$t>().values();
                BooleanBuffer::collect_bool(values.len(), |i| hit(i128::from(values[i])))
            }};
        }
        let bits = match column {
            DataType::Int8 => in_members!(Int8Type),
            DataType::Int16 => in_members!(Int16Type),
            DataType::Int32 => in_members!(Int32Type),
            DataType::Int64 => in_members!(Int64Type),
            DataType::UInt8 => in_members!(UInt8Type),
            DataType::UInt16 => in_members!(UInt16Type),
            DataType::UInt32 => in_members!(UInt32Type),
            DataType::UInt64 => in_members!(UInt64Type),
            _ => return None,
        };
        return Some(BooleanArray::new(bits, None));
    }
    let int =
        |x: i128| answer(ints.contains(&x) || (!floats.is_empty() && floats.contains(&float_key(x as f64))));
    let float = |x: f64| answer(floats.contains(&float_key(x)));
    macro_rules! ints {
        ($t:ty) => {
            v.array.as_primitive::<$t>().iter().map(|x| x.and_then(|x| int(i128::from(x)))).collect()
        };
    }
    Some(match column {
        DataType::Null => BooleanArray::new_null(v.array.len()),
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt64 => ints!(UInt64Type),
        DataType::Float32 => v
            .array
            .as_primitive::<Float32Type>()
            .iter()
            .map(|x| x.and_then(|x| float(f64::from(x))))
            .collect(),
        DataType::Float64 => {
            v.array.as_primitive::<Float64Type>().iter().map(|x| x.and_then(float)).collect()
        }
        DataType::Utf8 => {
            v.array.as_string::<i32>().iter().map(|x| x.and_then(|x| answer(strings.contains(x)))).collect()
        }
        DataType::Boolean => {
            v.array.as_boolean().iter().map(|x| x.and_then(|x| answer(bools[usize::from(x)]))).collect()
        }
        _ => return None,
    })
}

/// Float group keys made equal where SQL calls them equal (as [`sql_float_order`] does for
/// comparisons): `-0.0` becomes `0.0` and every NaN the positive quiet NaN, so that the row format
/// (which keeps their bits apart) puts them in one group. Other arrays are returned as they are.
pub(crate) fn canonical_floats(a: &ArrayRef) -> ArrayRef {
    use arrow_array::types::{Float32Type, Float64Type};
    match a.data_type() {
        DataType::Float64 => {
            let floats = a.as_primitive::<Float64Type>();
            if !has_nan_or_negative_zero(floats.values()) {
                return a.clone();
            }
            Arc::new(arrow_arith::arity::unary::<_, _, Float64Type>(floats, |x| {
                if x.is_nan() {
                    f64::NAN
                } else {
                    x + 0.0
                }
            }))
        }
        DataType::Float32 => Arc::new(arrow_arith::arity::unary::<_, _, Float32Type>(
            a.as_primitive::<Float32Type>(),
            |x: f32| {
                if x.is_nan() {
                    f32::NAN
                } else {
                    x + 0.0
                }
            },
        )),
        _ => a.clone(),
    }
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

/// `v` when it is a vector (or NULL), else an error naming the function.
fn vector(v: Val, name: &str, span: Span) -> Result<Val> {
    match v.data_type() {
        DataType::FixedSizeList(..) | DataType::Null => Ok(v),
        t => Err(sql_error(format!("{name}() takes vectors, got {}", sql_type_name(t)), span)),
    }
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
        DataType::FixedSizeList(..) => "VECTOR",
        _ => "unsupported type",
    }
}

/// Float operands made to compare as SQL does under Arrow's IEEE totalOrder kernels: `-0.0` becomes
/// `0.0` (SQL: equal), and every NaN the positive quiet NaN (totalOrder puts a NaN with its sign bit
/// set below every number; PostgreSQL's NaN is above every number and equal to itself).
pub(crate) fn sql_float_order(v: Val) -> Val {
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
