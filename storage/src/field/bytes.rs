//! BytesField (FFCV type 3): `{ptr <u8, size <u8}` in the row, the bytes as payload.

use super::{mismatch, put_size, word, ColumnDef, ColumnSource, DecodeContext, Described, EncodeContext};
use super::{FieldKind, FieldType, Input, LoadAs, PTR_SIZE_SLOT, TYPE_BYTES};
use crate::error::Result;
use crate::format::Slot;
use crate::reader::Value;
use crate::writer::SampleValue;

/// BytesField.
#[derive(Debug)]
pub(super) struct Bytes;

const NAME: &str = "bytes";

pub(super) fn parse(d: &Described<'_>) -> Option<std::result::Result<FieldType, String>> {
    d.is(TYPE_BYTES, NAME).then_some(Ok(FieldType::Bytes))
}

impl FieldKind for Bytes {
    fn name(&self) -> &'static str {
        "BytesField"
    }

    fn short_name(&self) -> &'static str {
        NAME
    }

    fn type_id(&self) -> u8 {
        TYPE_BYTES
    }

    fn slot(&self) -> Slot {
        PTR_SIZE_SLOT
    }

    fn payload_ptr_offset(&self) -> Option<usize> {
        Some(0)
    }

    fn input(&self) -> Input {
        Input::Bytes
    }

    fn encode(&self, value: SampleValue, slot: &mut [u8], _: &EncodeContext<'_>) -> Result<Option<Vec<u8>>> {
        match value {
            SampleValue::Bytes(b) => {
                put_size(slot, b.len() as u64);
                Ok(Some(b))
            }
            v => Err(mismatch(self, &v)),
        }
    }

    fn decode<'a>(&self, slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
        Ok(Value::Bytes(cx.payload(word(slot, 0), Some(word(slot, 8)))?))
    }

    fn columns(&self) -> Vec<ColumnDef> {
        vec![ColumnDef::plain(ColumnSource::SizeWord)]
    }

    fn load_as(&self) -> LoadAs {
        LoadAs::Sized { itemsize: 1, suffix: 0 }
    }
}
