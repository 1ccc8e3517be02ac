//! Custom fields: a type-255 field this crate does not interpret (a user's FFCV `Field` class, or
//! an extension from a newer beton). Its row bytes are exposed raw; it has no payload that this
//! crate can find (FFCV's custom fields keep their own pointers).

use super::kind::{
    invalid_value, mismatch, ColumnDef, ColumnSource, DecodeContext, Described, EncodeContext, FieldKind,
    Input, LoadAs,
};
use crate::error::Result;
use crate::format::{Slot, ARGS_SIZE};
use crate::value::{SampleValue, Value, ValueKind};

/// A custom field: its row slot (given by the caller, or by a newer beton's blob) and the
/// descriptor's argument blob, kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomField {
    /// The field's slot in the row.
    pub slot: Slot,
    /// The descriptor's argument blob, kept as written.
    pub arguments: Box<[u8; ARGS_SIZE]>,
}

/// Custom fields are recognised by elimination (`FieldType::from_descriptor`), never by name.
pub(super) fn parse(_: &Described<'_>) -> Option<std::result::Result<CustomField, String>> {
    None
}

impl FieldKind for CustomField {
    fn name(&self) -> &'static str {
        "custom"
    }

    fn short_name(&self) -> &'static str {
        "custom"
    }

    fn slot(&self) -> Slot {
        self.slot
    }

    fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
        self.arguments.clone()
    }

    fn input(&self) -> Input {
        Input::Bytes
    }

    fn value_kind(&self) -> ValueKind {
        ValueKind::Custom
    }

    fn zero(&self) -> (SampleValue, &'static str) {
        (SampleValue::Custom(vec![0; self.slot.size]), "zero bytes")
    }

    fn encode(&self, value: SampleValue, slot: &mut [u8], _: &EncodeContext<'_>) -> Result<Option<Vec<u8>>> {
        let b = match value {
            SampleValue::Custom(b) | SampleValue::Bytes(b) => b,
            v => return Err(mismatch(self, &v)),
        };
        if b.len() != self.slot.size {
            return Err(invalid_value(format!(
                "custom value of {} bytes for a {}-byte slot",
                b.len(),
                self.slot.size
            )));
        }
        slot.copy_from_slice(&b);
        Ok(None)
    }

    fn decode<'a>(&self, slot: &'a [u8], _: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
        Ok(Value::Custom(slot))
    }

    fn columns(&self) -> Vec<ColumnDef> {
        vec![ColumnDef::plain(ColumnSource::Raw(self.slot.size))]
    }

    fn load_as(&self) -> LoadAs {
        LoadAs::None
    }

    fn describe(&self) -> Option<String> {
        Some(format!("{} bytes aligned to {}", self.slot.size, self.slot.align))
    }
}
