//! FloatField (FFCV type 0): a `<f8` in the row, no payload.

use super::{mismatch, word, ColumnDef, ColumnSource, DecodeContext, Described, EncodeContext};
use super::{FieldKind, FieldType, Input, LoadAs, SCALAR_SLOT, TYPE_FLOAT};
use crate::error::Result;
use crate::format::Slot;
use crate::reader::Value;
use crate::writer::SampleValue;

/// FloatField.
#[derive(Debug)]
pub(super) struct Float;

const NAME: &str = "float";

pub(super) fn parse(d: &Described<'_>) -> Option<std::result::Result<FieldType, String>> {
    d.is(TYPE_FLOAT, NAME).then_some(Ok(FieldType::Float))
}

impl FieldKind for Float {
    fn name(&self) -> &'static str {
        "FloatField"
    }

    fn short_name(&self) -> &'static str {
        NAME
    }

    fn type_id(&self) -> u8 {
        TYPE_FLOAT
    }

    fn slot(&self) -> Slot {
        SCALAR_SLOT
    }

    fn input(&self) -> Input {
        Input::Float
    }

    fn encode(&self, value: SampleValue, slot: &mut [u8], _: &EncodeContext<'_>) -> Result<Option<Vec<u8>>> {
        match value {
            SampleValue::Float(v) => slot.copy_from_slice(&v.to_le_bytes()),
            v => return Err(mismatch(self, &v)),
        }
        Ok(None)
    }

    fn decode<'a>(&self, slot: &'a [u8], _: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
        Ok(Value::Float(f64::from_bits(word(slot, 0))))
    }

    fn columns(&self) -> Vec<ColumnDef> {
        vec![ColumnDef::plain(ColumnSource::Float)]
    }

    fn load_as(&self) -> LoadAs {
        LoadAs::Float
    }
}
