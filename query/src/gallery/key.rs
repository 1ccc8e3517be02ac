//! Group keys: one column's values made comparable and hashable, numbers ordered as numbers.

use std::fmt;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::Array;
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;

use crate::error::Result;

/// One value of a grouping column. Nulls first, then booleans, numbers, text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Key {
    Null,
    Bool(bool),
    Int(i128),
    /// A float, by its total-order bits ([`f64::total_cmp`] order).
    Float(i64),
    Text(String),
}

impl Key {
    fn float(v: f64) -> Key {
        // f64::total_cmp's key: flip the magnitude bits of negatives.
        let bits = v.to_bits() as i64;
        Key::Float(bits ^ (((bits >> 63) as u64) >> 1) as i64)
    }

    fn float_value(bits: i64) -> f64 {
        f64::from_bits((bits ^ (((bits >> 63) as u64) >> 1) as i64) as u64)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Null => f.write_str("null"),
            Key::Bool(b) => write!(f, "{b}"),
            Key::Int(v) => write!(f, "{v}"),
            Key::Float(bits) => write!(f, "{}", Key::float_value(*bits)),
            Key::Text(s) => f.write_str(s),
        }
    }
}

/// Every value of `array` as a key.
pub(crate) fn keys(array: &dyn Array) -> Result<Vec<Key>> {
    let n = array.len();
    let valid = |i: usize| array.is_valid(i);
    let dt = array.data_type();
    let keys = if dt.is_signed_integer() {
        let a = arrow_cast::cast(array, &DataType::Int64)?;
        let a = a.as_primitive::<Int64Type>();
        (0..n).map(|i| if valid(i) { Key::Int(i128::from(a.value(i))) } else { Key::Null }).collect()
    } else if dt.is_unsigned_integer() {
        let a = arrow_cast::cast(array, &DataType::UInt64)?;
        let a = a.as_primitive::<UInt64Type>();
        (0..n).map(|i| if valid(i) { Key::Int(i128::from(a.value(i))) } else { Key::Null }).collect()
    } else if dt.is_floating() {
        let a = arrow_cast::cast(array, &DataType::Float64)?;
        let a = a.as_primitive::<Float64Type>();
        (0..n).map(|i| if valid(i) { Key::float(a.value(i)) } else { Key::Null }).collect()
    } else if *dt == DataType::Boolean {
        let a = array.as_boolean();
        (0..n).map(|i| if valid(i) { Key::Bool(a.value(i)) } else { Key::Null }).collect()
    } else {
        let options = FormatOptions::default();
        let f = ArrayFormatter::try_new(array, &options)?;
        (0..n).map(|i| if valid(i) { Key::Text(f.value(i).to_string()) } else { Key::Null }).collect()
    };
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};

    use super::*;

    fn sorted(array: ArrayRef) -> Vec<String> {
        let mut k = keys(array.as_ref()).unwrap();
        k.sort();
        k.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn numbers_order_as_numbers_and_nulls_come_first() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![Some(10), None, Some(-3), Some(2)]));
        assert_eq!(sorted(ints), ["null", "-3", "2", "10"]);
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.5, -0.5, -2.0, 10.0, f64::NAN]));
        assert_eq!(sorted(floats), ["-2", "-0.5", "1.5", "10", "NaN"]);
        let text: ArrayRef = Arc::new(StringArray::from(vec!["b", "a", "b"]));
        assert_eq!(sorted(text), ["a", "b", "b"]);
        let bools: ArrayRef = Arc::new(BooleanArray::from(vec![true, false]));
        assert_eq!(sorted(bools), ["false", "true"]);
    }
}
