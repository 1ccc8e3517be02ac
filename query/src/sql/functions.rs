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
use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray};
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
];

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
