//! FloatField (FFCV type 0): a `<f8` in the row, no payload.

use super::fixed::Id;
use super::kind::{mismatch, word, ColumnSource, DecodeContext, Input, LoadAs, SCALAR_SLOT, TYPE_FLOAT};
use crate::error::Result;
use crate::value::{SampleValue, Value, ValueKind};

fixed_kind! {
    /// FloatField.
    struct Float = "FloatField", "float", Id::Ffcv(TYPE_FLOAT);
    slot SCALAR_SLOT, payload_ptr None, input Input::Float;
    value ValueKind::Float, zero SampleValue::Float(f64::NAN), "NaN";
    column ColumnSource::Float, load LoadAs::Float;
}

fn encode(kind: &Float, value: SampleValue, slot: &mut [u8]) -> Result<Option<Vec<u8>>> {
    match value {
        SampleValue::Float(v) => slot.copy_from_slice(&v.to_le_bytes()),
        v => return Err(mismatch(kind, &v)),
    }
    Ok(None)
}

fn decode<'a>(slot: &'a [u8], _: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
    Ok(Value::Float(f64::from_bits(word(slot, 0))))
}
