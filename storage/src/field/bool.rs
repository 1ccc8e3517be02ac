//! BoolField (beton extension): one byte in the row, 0 or 1, no payload.

use super::extension::ExtensionKind;
use super::fixed::Id;
use super::kind::{mismatch, ColumnSource, DecodeContext, Input, LoadAs, BOOL_SLOT};
use crate::error::Result;
use crate::value::{SampleValue, Value, ValueKind};

fixed_kind! {
    /// BoolField.
    struct Bool = "BoolField", "bool", Id::Extension(ExtensionKind::Bool);
    slot BOOL_SLOT, payload_ptr None, input Input::Bool;
    value ValueKind::Bool, zero SampleValue::Bool(false), "false";
    column ColumnSource::Bool, load LoadAs::Bool;
}

fn encode(kind: &Bool, value: SampleValue, slot: &mut [u8]) -> Result<Option<Vec<u8>>> {
    match value {
        SampleValue::Bool(v) => slot[0] = v as u8,
        v => return Err(mismatch(kind, &v)),
    }
    Ok(None)
}

fn decode<'a>(slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
    match slot.first() {
        Some(0) => Ok(Value::Bool(false)),
        Some(1) => Ok(Value::Bool(true)),
        b => Err(cx.corrupt(format!("bool byte is {}, not 0 or 1", b.copied().unwrap_or_default()))),
    }
}
