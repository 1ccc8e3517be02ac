//! IntField (FFCV type 1): a `<i8` in the row, no payload.

use super::fixed::Id;
use super::kind::{mismatch, word, ColumnSource, DecodeContext, Input, LoadAs, SCALAR_SLOT, TYPE_INT};
use crate::error::Result;
use crate::value::{SampleValue, Value, ValueKind};

fixed_kind! {
    /// IntField.
    struct Int = "IntField", "int", Id::Ffcv(TYPE_INT);
    slot SCALAR_SLOT, payload_ptr None, input Input::Int;
    value ValueKind::Int, zero SampleValue::Int(0), "0";
    column ColumnSource::Int, load LoadAs::Int;
}

fn encode(kind: &Int, value: SampleValue, slot: &mut [u8]) -> Result<Option<Vec<u8>>> {
    match value {
        SampleValue::Int(v) => slot.copy_from_slice(&v.to_le_bytes()),
        v => return Err(mismatch(kind, &v)),
    }
    Ok(None)
}

fn decode<'a>(slot: &'a [u8], _: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
    Ok(Value::Int(word(slot, 0) as i64))
}
