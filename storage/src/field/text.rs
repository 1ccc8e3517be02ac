//! TextField (beton extension): `{ptr <u8, size <u8}` in the row, UTF-8 bytes (no NUL) as
//! payload. Its table column is the text itself, so reading it reads heap pages.

use super::extension::ExtensionKind;
use super::fixed::Id;
use super::kind::{mismatch, sized_payload, ColumnSource, DecodeContext, Input, LoadAs, PTR_SIZE_SLOT};
use crate::error::Result;
use crate::value::{SampleValue, Value, ValueKind};

fixed_kind! {
    /// TextField.
    struct Text = "TextField", "text", Id::Extension(ExtensionKind::Text);
    slot PTR_SIZE_SLOT, payload_ptr Some(0), input Input::Str;
    value ValueKind::Text, zero SampleValue::Text(String::new()), "''";
    column ColumnSource::Text, load LoadAs::Sized { itemsize: 1 };
}

fn encode(kind: &Text, value: SampleValue, slot: &mut [u8]) -> Result<Option<Vec<u8>>> {
    match value {
        SampleValue::Text(text) => Ok(sized_payload(slot, text.into_bytes())),
        v => Err(mismatch(kind, &v)),
    }
}

fn decode<'a>(slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
    std::str::from_utf8(cx.sized_payload(slot)?)
        .map(Value::Text)
        .map_err(|e| cx.corrupt(format!("text is not UTF-8: {e}")))
}
