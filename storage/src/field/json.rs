//! JSONField (FFCV type 5): `{ptr <u8, size <u8}` in the row, UTF-8 JSON text and a NUL as
//! payload (FFCV's encoding; the size counts the NUL).

use super::fixed::Id;
use super::kind::{
    invalid_value, mismatch, sized_payload, ColumnSource, DecodeContext, Input, LoadAs, PTR_SIZE_SLOT,
    TYPE_JSON,
};
use crate::error::Result;
use crate::value::{SampleValue, Value, ValueKind};

fixed_kind! {
    /// JSONField.
    struct Json = "JSONField", "json", Id::Ffcv(TYPE_JSON);
    slot PTR_SIZE_SLOT, payload_ptr Some(0), input Input::Str;
    value ValueKind::Json, zero SampleValue::Json("null".into()), "JSON null";
    // A batch row has room for the trailing NUL (not part of the value): FFCV's BytesDecoder
    // is as wide as the longest payload, NUL included, and `JSONField.unpack` looks for it.
    column ColumnSource::SizeWord, load LoadAs::Sized { itemsize: 1 };
}

fn encode(kind: &Json, value: SampleValue, slot: &mut [u8]) -> Result<Option<Vec<u8>>> {
    let text = match value {
        SampleValue::Json(text) | SampleValue::Text(text) => text,
        v => return Err(mismatch(kind, &v)),
    };
    serde_json::from_str::<serde::de::IgnoredAny>(&text)
        .map_err(|e| invalid_value(format!("not valid JSON: {e}")))?;
    let mut b = text.into_bytes();
    b.push(0);
    Ok(sized_payload(slot, b))
}

fn decode<'a>(slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
    match cx.sized_payload(slot)?.split_last() {
        Some((0, text)) => std::str::from_utf8(text)
            .map(Value::Json)
            .map_err(|e| cx.corrupt(format!("text is not UTF-8: {e}"))),
        _ => Err(cx.corrupt("JSON payload does not end with its NUL byte")),
    }
}
