//! JSONField (FFCV type 5): `{ptr <u8, size <u8}` in the row, UTF-8 JSON text and a NUL as
//! payload (FFCV's encoding; the size counts the NUL).

use super::{invalid_value, mismatch, put_size, word, ColumnDef, ColumnSource, DecodeContext, Described};
use super::{EncodeContext, FieldKind, FieldType, Input, LoadAs, PTR_SIZE_SLOT, TYPE_JSON};
use crate::error::Result;
use crate::format::Slot;
use crate::reader::Value;
use crate::writer::SampleValue;

/// JSONField.
#[derive(Debug)]
pub(super) struct Json;

const NAME: &str = "json";

pub(super) fn parse(d: &Described<'_>) -> Option<std::result::Result<FieldType, String>> {
    d.is(TYPE_JSON, NAME).then_some(Ok(FieldType::Json))
}

impl FieldKind for Json {
    fn name(&self) -> &'static str {
        "JSONField"
    }

    fn short_name(&self) -> &'static str {
        NAME
    }

    fn type_id(&self) -> u8 {
        TYPE_JSON
    }

    fn slot(&self) -> Slot {
        PTR_SIZE_SLOT
    }

    fn payload_ptr_offset(&self) -> Option<usize> {
        Some(0)
    }

    fn input(&self) -> Input {
        Input::Str
    }

    fn encode(&self, value: SampleValue, slot: &mut [u8], _: &EncodeContext<'_>) -> Result<Option<Vec<u8>>> {
        let text = match value {
            SampleValue::Json(text) | SampleValue::Text(text) => text,
            v => return Err(mismatch(self, &v)),
        };
        serde_json::from_str::<serde::de::IgnoredAny>(&text)
            .map_err(|e| invalid_value(format!("not valid JSON: {e}")))?;
        let mut b = text.into_bytes();
        b.push(0);
        put_size(slot, b.len() as u64);
        Ok(Some(b))
    }

    fn decode<'a>(&self, slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
        let data = cx.payload(word(slot, 0), Some(word(slot, 8)))?;
        match data.split_last() {
            Some((0, text)) => std::str::from_utf8(text)
                .map(Value::Json)
                .map_err(|e| cx.corrupt(format!("text is not UTF-8: {e}"))),
            _ => Err(cx.corrupt("JSON payload does not end with its NUL byte")),
        }
    }

    fn columns(&self) -> Vec<ColumnDef> {
        vec![ColumnDef::plain(ColumnSource::SizeWord)]
    }

    fn load_as(&self) -> LoadAs {
        // The trailing NUL is not part of the value.
        LoadAs::Sized { itemsize: 1, suffix: 1 }
    }
}
