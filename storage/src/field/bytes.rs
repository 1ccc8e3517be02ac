//! BytesField (FFCV type 3): `{ptr <u8, size <u8}` in the row, the bytes as payload.

use super::fixed::Id;
use super::kind::{
    mismatch, sized_payload, ColumnSource, DecodeContext, Input, LoadAs, PTR_SIZE_SLOT, TYPE_BYTES,
};
use crate::error::Result;
use crate::value::{SampleValue, Value, ValueKind};

fixed_kind! {
    /// BytesField.
    struct Bytes = "BytesField", "bytes", Id::Ffcv(TYPE_BYTES);
    slot PTR_SIZE_SLOT, payload_ptr Some(0), input Input::Bytes;
    value ValueKind::Bytes, zero SampleValue::Bytes(Vec::new()), "empty bytes";
    column ColumnSource::SizeWord, load LoadAs::Sized { itemsize: 1 };
}

fn encode(kind: &Bytes, value: SampleValue, slot: &mut [u8]) -> Result<Option<Vec<u8>>> {
    match value {
        SampleValue::Bytes(b) => Ok(sized_payload(slot, b)),
        v => Err(mismatch(kind, &v)),
    }
}

fn decode<'a>(slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
    cx.sized_payload(slot).map(Value::Bytes)
}
