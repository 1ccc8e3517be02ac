//! BoolField (beton extension): one byte in the row, 0 or 1, no payload.

use super::{mismatch, ColumnDef, ColumnSource, DecodeContext, Described, EncodeContext, Extension};
use super::{ExtensionKind, FieldKind, FieldType, Input, LoadAs, BOOL_SLOT};
use crate::error::Result;
use crate::format::{Slot, ARGS_SIZE};
use crate::reader::Value;
use crate::writer::SampleValue;

/// BoolField.
#[derive(Debug)]
pub(super) struct Bool;

const NAME: &str = "bool";

pub(super) fn parse(d: &Described<'_>) -> Option<std::result::Result<FieldType, String>> {
    d.is_extension(ExtensionKind::Bool, NAME).then_some(Ok(FieldType::Bool))
}

impl FieldKind for Bool {
    fn name(&self) -> &'static str {
        "BoolField"
    }

    fn short_name(&self) -> &'static str {
        NAME
    }

    fn slot(&self) -> Slot {
        BOOL_SLOT
    }

    fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
        Extension::to_arguments(ExtensionKind::Bool, BOOL_SLOT, &[])
    }

    fn input(&self) -> Input {
        Input::Bool
    }

    fn encode(&self, value: SampleValue, slot: &mut [u8], _: &EncodeContext<'_>) -> Result<Option<Vec<u8>>> {
        match value {
            SampleValue::Bool(v) => slot[0] = v as u8,
            v => return Err(mismatch(self, &v)),
        }
        Ok(None)
    }

    fn decode<'a>(&self, slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
        match slot.first() {
            Some(0) => Ok(Value::Bool(false)),
            Some(1) => Ok(Value::Bool(true)),
            b => Err(cx.corrupt(format!("bool byte is {}, not 0 or 1", b.copied().unwrap_or_default()))),
        }
    }

    fn columns(&self) -> Vec<ColumnDef> {
        vec![ColumnDef::plain(ColumnSource::Bool)]
    }

    fn load_as(&self) -> LoadAs {
        LoadAs::Bool
    }
}
