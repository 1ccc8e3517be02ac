//! TextField (beton extension): `{ptr <u8, size <u8}` in the row, UTF-8 bytes (no NUL) as
//! payload. Its table column is the text itself, so reading it reads heap pages.

use super::{mismatch, put_size, word, ColumnDef, ColumnSource, DecodeContext, Described, EncodeContext};
use super::{Extension, ExtensionKind, FieldKind, FieldType, Input, LoadAs, PTR_SIZE_SLOT};
use crate::error::Result;
use crate::format::{Slot, ARGS_SIZE};
use crate::reader::Value;
use crate::writer::SampleValue;

/// TextField.
#[derive(Debug)]
pub(super) struct Text;

const NAME: &str = "text";

pub(super) fn parse(d: &Described<'_>) -> Option<std::result::Result<FieldType, String>> {
    d.is_extension(ExtensionKind::Text, NAME).then_some(Ok(FieldType::Text))
}

impl FieldKind for Text {
    fn name(&self) -> &'static str {
        "TextField"
    }

    fn short_name(&self) -> &'static str {
        NAME
    }

    fn slot(&self) -> Slot {
        PTR_SIZE_SLOT
    }

    fn payload_ptr_offset(&self) -> Option<usize> {
        Some(0)
    }

    fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
        Extension::to_arguments(ExtensionKind::Text, PTR_SIZE_SLOT, &[])
    }

    fn input(&self) -> Input {
        Input::Str
    }

    fn encode(&self, value: SampleValue, slot: &mut [u8], _: &EncodeContext<'_>) -> Result<Option<Vec<u8>>> {
        match value {
            SampleValue::Text(text) => {
                put_size(slot, text.len() as u64);
                Ok(Some(text.into_bytes()))
            }
            v => Err(mismatch(self, &v)),
        }
    }

    fn decode<'a>(&self, slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
        let data = cx.payload(word(slot, 0), Some(word(slot, 8)))?;
        std::str::from_utf8(data).map(Value::Text).map_err(|e| cx.corrupt(format!("text is not UTF-8: {e}")))
    }

    fn columns(&self) -> Vec<ColumnDef> {
        vec![ColumnDef::plain(ColumnSource::Text)]
    }

    fn load_as(&self) -> LoadAs {
        LoadAs::Sized { itemsize: 1, suffix: 0 }
    }
}
