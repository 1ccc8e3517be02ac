//! Cell values as caption text: floats with six significant digits, long text cut, `label`
//! values with their class names. Shared by the builder's captions, the summaries' keys and
//! the HTML tables.

use arrow_array::Array;
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use beton_storage::Value;

/// Longest caption text shown, in characters.
pub(super) const MAX_CAPTION: usize = 60;

/// One Arrow cell as text.
pub(super) fn format_cell(array: &dyn Array, i: usize) -> String {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type};
    use arrow_schema::DataType;
    if array.is_valid(i) {
        match array.data_type() {
            DataType::Float64 => return short_float(array.as_primitive::<Float64Type>().value(i)),
            DataType::Float32 => return short_float(f64::from(array.as_primitive::<Float32Type>().value(i))),
            _ => {}
        }
    }
    let options = FormatOptions::default().with_null("NULL");
    match ArrayFormatter::try_new(array, &options) {
        Ok(f) => cut(&f.value(i).to_string()),
        Err(_) => String::from("?"),
    }
}

/// One field value as caption text.
pub(super) fn value_text(value: &Value<'_>) -> String {
    match value {
        Value::Int(v) => v.to_string(),
        Value::Float(v) => short_float(*v),
        Value::Bool(v) => v.to_string(),
        Value::Text(s) | Value::Json(s) => cut(s),
        Value::Image(img) => format!("{}x{} {}", img.width, img.height, img.mode.name()),
        Value::Bytes(b) | Value::NDArray(b) | Value::Array(b) | Value::Custom(b) => {
            format!("{} bytes", b.len())
        }
    }
}

/// A float as a caption: 6 significant digits without trailing zeros (`0.123457`, `2.5`,
/// `1.5e-7`), as `%g` prints; a caption is read, not parsed back (`ds[i]` gives the value).
pub(super) fn short_float(v: f64) -> String {
    if !v.is_finite() {
        return (if v.is_nan() {
            "NaN"
        } else if v > 0.0 {
            "inf"
        } else {
            "-inf"
        })
        .to_string();
    }
    if v == 0.0 {
        return "0".to_string();
    }
    const DIGITS: i32 = 6;
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    // The exponent after rounding to DIGITS significant digits (999999.7 is 1e6).
    let sci = format!("{:.*e}", (DIGITS - 1) as usize, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..DIGITS).contains(&exp) {
        let decimals = (DIGITS - 1 - exp).max(0) as usize;
        trim(&format!("{v:.decimals$}"))
    } else {
        format!("{}e{exp}", trim(mantissa))
    }
}

/// `text` cut to [`MAX_CAPTION`] characters.
pub(super) fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_CAPTION) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A `label` value with its class name, when there is one.
pub(super) fn with_class(column: &str, text: String, classes: Option<&[String]>) -> String {
    let name = (column == "label")
        .then_some(classes)
        .flatten()
        .and_then(|c| text.parse::<usize>().ok().and_then(|k| c.get(k)));
    match name {
        Some(name) => format!("{text} ({name})"),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_go_with_labels_only() {
        let classes = vec!["cat".to_string(), "dog".to_string()];
        assert_eq!(with_class("label", "1".into(), Some(&classes)), "1 (dog)");
        assert_eq!(with_class("label", "7".into(), Some(&classes)), "7");
        assert_eq!(with_class("other", "1".into(), Some(&classes)), "1");
    }

    #[test]
    fn float_captions_have_six_significant_digits() {
        let cases = [
            (0.1 + 0.2, "0.3"),
            (0.123456789, "0.123457"),
            (2.5, "2.5"),
            (3.0, "3"),
            (-1234.56789, "-1234.57"),
            (999999.7, "1e6"),
            (123456789.0, "1.23457e8"),
            (0.00001234567, "1.23457e-5"),
            (0.0001234567, "0.000123457"),
            (1.5e-7, "1.5e-7"),
            (0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (v, want) in cases {
            assert_eq!(short_float(v), want, "{v}");
        }
        let column = arrow_array::Float64Array::from(vec![Some(1.0 / 3.0), None]);
        assert_eq!(format_cell(&column, 0), "0.333333");
        assert_eq!(format_cell(&column, 1), "NULL");
    }

    #[test]
    fn long_captions_are_cut_on_a_character() {
        let long = "é".repeat(100);
        let c = cut(&long);
        assert_eq!(c.chars().count(), MAX_CAPTION + 1);
        assert!(c.ends_with('…'));
    }
}
