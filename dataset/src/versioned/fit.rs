//! Which values a field takes, for `update`, `update_rows` and `add_column`: what is stored is
//! what was given, or the edit is refused naming the field, the values' type and the first row
//! that does not fit. No value is converted with a loss (a float into an int field, a number into
//! a bool or text field); an explicit SQL `CAST` (or `round`, then `CAST`) says what to store.
//!
//! | field | takes | refuses (convert explicitly) |
//! |---|---|---|
//! | int | integers of any width, signed or not, within int64 | floats, even `2.0` (`CAST(x AS BIGINT)` truncates, `CAST(round(x) AS BIGINT)` rounds); bools; text |
//! | float | floats; integers a float64 holds exactly (every one up to 2^53 in magnitude) | larger integers that would round; bools; text |
//! | bool | booleans | numbers, even 0 and 1 (`x <> 0`, `CAST(x AS BOOLEAN)`); text |
//! | text | strings | numbers, bools (`CAST(x AS VARCHAR)`) |
//! | JSON | strings holding JSON text | everything else |
//! | bytes, arrays, custom | binary values (the payload) | numbers, text |
//! | images | the column-file image struct | everything else |
//!
//! Also here: the names a new column may not take, since SQL would resolve them to another
//! column ([`check_new_column`]).

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use beton_storage::FieldType;

use super::{values, SchemaField};
use crate::error::{Error, Result};

/// Where values come from and where they go, for messages.
pub(crate) struct Target<'a> {
    /// The edit and what it was given: `update` `expression 'score'`, `update_rows` `values`.
    pub source: &'a str,
    /// The field.
    pub field: &'a str,
    /// Its type.
    pub ty: &'a FieldType,
    /// The dataset index each value goes to (`None`: value `k` goes to row `k`; one value for
    /// all goes to every row of `rows`).
    pub rows: Option<&'a [u64]>,
}

impl Target<'_> {
    /// The row value `k` goes to.
    fn row(&self, k: usize) -> u64 {
        self.rows.and_then(|r| r.get(k).copied()).unwrap_or(k as u64)
    }

    fn refuse(&self, why: String) -> Error {
        Error::InvalidArgument { what: format!("{} for field '{}'", self.source, self.field), why }
    }

    /// The refusal of `values` of a type the field does not take, showing the first value.
    fn wrong_type(&self, values: &ArrayRef, hint: &str) -> Error {
        // Refused by type, so that a statement fits or not whatever rows it matches.
        let first = match values.is_empty() {
            true => "no row matched".to_string(),
            false => format!("row {}: {}", self.row(0), shown(values, 0)),
        };
        self.refuse(format!(
            "{} values do not fit the {} field ({first}); {hint}",
            values.data_type(),
            self.ty.short_name()
        ))
    }
}

/// Value `k` of `values` as text, for a message.
fn shown(values: &ArrayRef, k: usize) -> String {
    arrow_cast::display::array_value_to_string(values, k).unwrap_or_else(|_| "?".into())
}

/// `values` as the Arrow type `target.ty` holds in a column file, checked against the rules
/// above: `count` values (or one for all), no nulls, every cell a valid value of the type (array
/// sizes, image pixels, JSON syntax).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the field, the values' type and the first row that does
/// not fit.
pub(crate) fn fit(target: &Target<'_>, values: &ArrayRef, count: usize) -> Result<ArrayRef> {
    let ty = target.ty;
    let want = values::column_file_type(ty);
    if values.len() != count && values.len() != 1 {
        return Err(target.refuse(format!("{} values for {count} rows", values.len())));
    }
    let nulls = values.logical_nulls();
    if let Some(k) = (0..values.len()).find(|&k| nulls.as_ref().is_some_and(|n| n.is_null(k))) {
        return Err(target.refuse(format!(
            "row {} is NULL; the {} field holds no NULLs",
            target.row(k),
            ty.short_name()
        )));
    }
    // A dictionary-encoded column (pandas categories) is its values; an empty list of values
    // (for a version without rows) has no type of its own: the field's.
    let values = &match values.data_type() {
        DataType::Dictionary(_, inner) => arrow_cast::cast(values.as_ref(), inner)?,
        DataType::Null if values.is_empty() => arrow_array::new_empty_array(&want),
        _ => values.clone(),
    };
    let from = values.data_type();
    let exact = |array: &ArrayRef| -> Result<ArrayRef> {
        let options = arrow_cast::CastOptions { safe: false, ..Default::default() };
        arrow_cast::cast_with_options(array.as_ref(), &want, &options).map_err(|e| {
            target.refuse(format!("{from} values do not fit the {} field: {e}", ty.short_name()))
        })
    };
    match ty {
        FieldType::Int => match from {
            DataType::UInt64 => {
                let big =
                    values.as_primitive::<UInt64Type>().values().iter().position(|&v| v > i64::MAX as u64);
                if let Some(k) = big {
                    return Err(target.refuse(format!(
                        "row {}: {} is past the int field's range (int64, at most {})",
                        target.row(k),
                        shown(values, k),
                        i64::MAX
                    )));
                }
                exact(values)
            }
            t if t.is_integer() => exact(values),
            _ => Err(target.wrong_type(
                values,
                "an int field takes integers only, not even 2.0: convert explicitly, with \
                 CAST(x AS BIGINT) (truncates) or CAST(round(x) AS BIGINT) in SQL, or integer values",
            )),
        },
        FieldType::Float => match from {
            DataType::Float16 | DataType::Float32 | DataType::Float64 => exact(values),
            t if t.is_integer() => {
                let wide = exact(values)?;
                let floats = wide.as_primitive::<arrow_array::types::Float64Type>().values();
                let ints: Vec<i128> = match from {
                    DataType::UInt64 => {
                        values.as_primitive::<UInt64Type>().values().iter().map(|&v| v.into()).collect()
                    }
                    _ => arrow_cast::cast(values.as_ref(), &DataType::Int64)?
                        .as_primitive::<Int64Type>()
                        .values()
                        .iter()
                        .map(|&v| v.into())
                        .collect(),
                };
                match ints.iter().zip(floats.iter()).position(|(&i, &f)| f as i128 != i) {
                    Some(k) => Err(target.refuse(format!(
                        "row {}: the integer {} has no exact float64 value (it would be stored as {}); \
                         convert explicitly with CAST(x AS DOUBLE)",
                        target.row(k),
                        shown(values, k),
                        floats[k]
                    ))),
                    None => Ok(wide),
                }
            }
            _ => Err(target.wrong_type(
                values,
                "a float field takes numbers: convert explicitly with CAST(x AS DOUBLE)",
            )),
        },
        FieldType::Bool => match from {
            DataType::Boolean => Ok(values.clone()),
            _ => Err(target.wrong_type(
                values,
                "a bool field takes booleans only, not even 0 or 1: convert explicitly, with x <> 0 \
                 or CAST(x AS BOOLEAN) in SQL, or bool values",
            )),
        },
        FieldType::Text => match from {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => exact(values),
            _ => Err(target.wrong_type(
                values,
                "a text field takes strings only: convert explicitly with CAST(x AS VARCHAR), or \
                 quote a text value in SQL ('text')",
            )),
        },
        FieldType::Json => match from {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let cast = exact(values)?;
                for k in 0..cast.len() {
                    if let Err(e) =
                        serde_json::from_str::<serde::de::IgnoredAny>(cast.as_string::<i64>().value(k))
                    {
                        return Err(target.refuse(format!("row {} is not valid JSON: {e}", target.row(k))));
                    }
                }
                Ok(cast)
            }
            _ => Err(target.wrong_type(values, "a json field takes strings of JSON text")),
        },
        FieldType::RgbImage | FieldType::GreyImage if *from != want => {
            Err(target.wrong_type(values, &format!("an image field takes {want} values (encoded images)")))
        }
        FieldType::RgbImage | FieldType::GreyImage => check_cells(target, values.clone()),
        _ => match from {
            DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_) => check_cells(target, exact(values)?),
            _ => Err(target.wrong_type(
                values,
                &format!("the {} field takes binary values (its payloads)", ty.short_name()),
            )),
        },
    }
}

/// `cast` once every cell is a valid value of the field (array sizes, image pixels).
fn check_cells(target: &Target<'_>, cast: ArrayRef) -> Result<ArrayRef> {
    for k in 0..cast.len() {
        values::cell(&cast, target.ty, k).map_err(|e| {
            let why = match e {
                Error::InvalidArgument { why, .. } => why,
                other => other.to_string(),
            };
            // The cell's message counts values; name the row too.
            let why =
                why.strip_prefix(&format!("row {k}")).unwrap_or(&why).trim_start_matches(':').trim_start();
            target.refuse(format!("row {} (value {k}): {why}", target.row(k)))
        })?;
    }
    Ok(cast)
}

/// The table's columns of a field `name` of type `ty` (`name`, or `name.width`, ...).
fn columns_of(name: &str, ty: &FieldType) -> Vec<String> {
    ty.kind()
        .columns()
        .iter()
        .map(|c| match c.suffix {
            Some(suffix) => format!("{name}.{suffix}"),
            None => name.to_string(),
        })
        .collect()
}

/// Fails unless `name` can be a new field of type `ty` beside `schema`: 1 to 16 ASCII bytes (a
/// data file's field name), not a field already, and none of its table columns one that SQL
/// would confuse with another: `index`, `row_id`, a column of another field (`image.width`),
/// any of these in another case (SQL resolves names case-insensitively), or a name starting
/// with `samples.` (the table's own prefix).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the column it would shadow.
pub(crate) fn check_new_column(schema: &[SchemaField], name: &str, ty: &FieldType) -> Result<()> {
    let refuse = |why: String| Err(Error::InvalidArgument { what: format!("column '{name}'"), why });
    if schema.iter().any(|f| f.name == name) {
        return refuse("exists already".into());
    }
    if name.is_empty() || name.len() > 16 || !name.is_ascii() || name.contains('\0') {
        return refuse("a name is 1 to 16 ASCII bytes (a data file's field name)".into());
    }
    let mut taken: Vec<(String, Option<&str>)> = vec![("index".into(), None), ("row_id".into(), None)];
    for f in schema {
        let ty = f.field_type()?;
        taken.extend(columns_of(&f.name, &ty).into_iter().map(|c| (c, Some(f.name.as_str()))));
    }
    for column in columns_of(name, ty) {
        if column.len() >= 8 && column[..8].eq_ignore_ascii_case("samples.") {
            return refuse(format!(
                "SQL reads '{column}' as column '{}' of table samples; choose another name",
                &column[8..]
            ));
        }
        if let Some((other, field)) = taken.iter().find(|(t, _)| t.eq_ignore_ascii_case(&column)) {
            let whose = match field {
                Some(f) if f != other => format!("column '{other}' of field '{f}'"),
                Some(_) => format!("field '{other}'"),
                None => format!("the table's own column '{other}'"),
            };
            let case = if *other == column { "" } else { " (SQL resolves names case-insensitively)" };
            return refuse(format!("SQL would read {whose} for '{column}'{case}; choose another name"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{BooleanArray, Float64Array, Int32Array, Int64Array, StringArray, UInt64Array};

    use super::*;

    fn target(ty: &FieldType) -> Target<'_> {
        Target { source: "values", field: "f", ty, rows: Some(&[3, 7, 9]) }
    }

    fn err(ty: FieldType, values: ArrayRef) -> String {
        fit(&target(&ty), &values, 3).unwrap_err().to_string()
    }

    #[test]
    fn int_fields_take_integers_only() {
        let ok = fit(&target(&FieldType::Int), &(Arc::new(Int32Array::from(vec![1, -2, 3])) as ArrayRef), 3)
            .unwrap();
        assert_eq!(ok.as_primitive::<Int64Type>().values(), &[1, -2, 3]);
        let e = err(FieldType::Int, Arc::new(Float64Array::from(vec![2.0, 2.9, 1.0])));
        assert!(
            e.contains("field 'f'")
                && e.contains("Float64")
                && e.contains("row 3: 2.0")
                && e.contains("CAST"),
            "{e}"
        );
        let e = err(FieldType::Int, Arc::new(UInt64Array::from(vec![1, u64::MAX, 2])));
        assert!(e.contains("row 7") && e.contains("range"), "{e}");
        assert!(
            err(FieldType::Int, Arc::new(BooleanArray::from(vec![true, false, true]))).contains("Boolean")
        );
        assert!(err(FieldType::Int, Arc::new(StringArray::from(vec!["1", "2", "3"]))).contains("Utf8"));
    }

    #[test]
    fn float_bool_and_text_fields_refuse_lossy_conversions() {
        let big = Arc::new(Int64Array::from(vec![1, (1 << 53) + 1, 2])) as ArrayRef;
        assert!(err(FieldType::Float, big).contains("row 7: the integer 9007199254740993"));
        let ints = Arc::new(Int64Array::from(vec![1, 1 << 53, -3])) as ArrayRef;
        let ok = fit(&target(&FieldType::Float), &ints, 3).unwrap();
        assert_eq!(
            ok.as_primitive::<arrow_array::types::Float64Type>().values(),
            &[1.0, 9007199254740992.0, -3.0]
        );
        assert!(err(FieldType::Bool, Arc::new(Int64Array::from(vec![0, 1, 1]))).contains("not even 0 or 1"));
        assert!(
            err(FieldType::Text, Arc::new(Int64Array::from(vec![0, 1, 1]))).contains("CAST(x AS VARCHAR)")
        );
        let nulls = Arc::new(Int64Array::from(vec![Some(1), None, Some(2)])) as ArrayRef;
        assert!(err(FieldType::Int, nulls).contains("row 7 is NULL"));
        assert!(err(FieldType::Int, Arc::new(Int64Array::from(vec![1, 2]))).contains("2 values for 3 rows"));
    }

    #[test]
    fn new_columns_may_not_shadow_derived_ones() {
        let schema =
            vec![SchemaField::new("image", &FieldType::RgbImage), SchemaField::new("label", &FieldType::Int)];
        let e = |name: &str| check_new_column(&schema, name, &FieldType::Int).unwrap_err().to_string();
        assert!(e("image.width").contains("column 'image.width' of field 'image'"), "{}", e("image.width"));
        assert!(e("Image.Height").contains("case-insensitively"));
        assert!(e("index").contains("own column 'index'") && e("ROW_ID").contains("row_id"));
        assert!(e("label").contains("exists already") && e("LABEL").contains("field 'label'"));
        assert!(e("samples.x").contains("table samples"));
        assert!(e("a_name_that_is_too_long").contains("16 ASCII bytes"));
        check_new_column(&schema, "score", &FieldType::Float).unwrap();
        // A new image field's own columns count too.
        let plain = vec![SchemaField::new("thumb.width", &FieldType::Int)];
        assert!(check_new_column(&plain, "thumb", &FieldType::RgbImage)
            .unwrap_err()
            .to_string()
            .contains("thumb.width"));
    }
}
