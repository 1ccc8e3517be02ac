//! The scalar functions that read the file rather than their arguments' values:
//! `json_extract(field, '$.a.b')` parses each row's JSON payload, `in_split('val')` looks the rows up
//! in a named split. The evaluator (`eval.rs`) dispatches to them by name; they read columns through
//! the expression's scope ([`Ctx`]), never by evaluating sub-expressions, so they do not depend on
//! the evaluator.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::StringArray;
use beton_storage::{FieldType, Value as StorageValue};
use sqlparser::ast::{Expr, Value};
use sqlparser::tokenizer::Span;

use super::ast::{column_name, pos};
use super::error::sql_error;
use super::scope::{Ctx, Val};
use crate::error::Result;

/// `json_extract(field, '$.a.b')`: the value at the path in each row's JSON payload, as text
/// (strings unquoted, other values as JSON; missing paths and JSON null are NULL).
pub(crate) fn json_extract(ctx: &Ctx, args: &[&Expr], span: Span) -> Result<Val> {
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
pub(crate) fn in_split(ctx: &Ctx, args: &[&Expr], span: Span) -> Result<Val> {
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
