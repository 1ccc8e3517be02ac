//! IntField (FFCV type 1): a `<i8` in the row, no payload.

use super::{mismatch, word, ColumnDef, ColumnSource, DecodeContext, Described, EncodeContext};
use super::{FieldKind, FieldType, Input, LoadAs, SCALAR_SLOT, TYPE_INT};
use crate::error::Result;
use crate::format::Slot;
use crate::reader::Value;
use crate::writer::SampleValue;

/// IntField.
#[derive(Debug)]
pub(super) struct Int;

const NAME: &str = "int";

pub(super) fn parse(d: &Described<'_>) -> Option<std::result::Result<FieldType, String>> {
    d.is(TYPE_INT, NAME).then_some(Ok(FieldType::Int))
}

impl FieldKind for Int {
    fn name(&self) -> &'static str {
        "IntField"
    }

    fn short_name(&self) -> &'static str {
        NAME
    }

    fn type_id(&self) -> u8 {
        TYPE_INT
    }

    fn slot(&self) -> Slot {
        SCALAR_SLOT
    }

    fn input(&self) -> Input {
        Input::Int
    }

    fn encode(&self, value: SampleValue, slot: &mut [u8], _: &EncodeContext<'_>) -> Result<Option<Vec<u8>>> {
        match value {
            SampleValue::Int(v) => slot.copy_from_slice(&v.to_le_bytes()),
            v => return Err(mismatch(self, &v)),
        }
        Ok(None)
    }

    fn decode<'a>(&self, slot: &'a [u8], _: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
        Ok(Value::Int(word(slot, 0) as i64))
    }

    fn columns(&self) -> Vec<ColumnDef> {
        vec![ColumnDef::plain(ColumnSource::Int)]
    }

    fn load_as(&self) -> LoadAs {
        LoadAs::Int
    }
}
