//! ArrayField (beton extension): a variable-length 1-D array, `{ptr <u8, len <u8}` in the row
//! (len in elements), the elements back to back as payload.

use ref_cast::RefCast;

use super::dtype::DType;
use super::extension::{Extension, ExtensionKind};
use super::kind::{
    invalid_value, mismatch, put_size, word, ColumnDef, ColumnSource, DecodeContext, Described,
    EncodeContext, FieldKind, Input, LoadAs, PTR_SIZE_SLOT,
};
use crate::error::Result;
use crate::format::{Slot, ARGS_SIZE};
use crate::value::{SampleValue, Value, ValueKind};

/// ArrayField: the kind of `FieldType::Array(dtype)`.
#[derive(Debug, RefCast)]
#[repr(transparent)]
pub(super) struct Array(DType);

impl Array {
    pub(super) fn of(dtype: &DType) -> &Array {
        Array::ref_cast(dtype)
    }
}

pub(super) fn parse(d: &Described<'_>) -> Option<std::result::Result<DType, String>> {
    if !d.is_extension(ExtensionKind::Array, "array") {
        return None;
    }
    let typestr = match d {
        Described::Descriptor { ext: Some(ext), .. } => match std::str::from_utf8(&ext.params) {
            Ok(s) => s,
            Err(_) => return Some(Err("array element type is not ASCII".to_string())),
        },
        Described::Name { dtype: Some(dtype), .. } => dtype,
        _ => return Some(Err("an array field needs a dtype".to_string())),
    };
    Some(DType::parse(typestr))
}

impl FieldKind for Array {
    fn name(&self) -> &'static str {
        "ArrayField"
    }

    fn short_name(&self) -> &'static str {
        "array"
    }

    fn slot(&self) -> Slot {
        PTR_SIZE_SLOT
    }

    fn payload_ptr_offset(&self) -> Option<usize> {
        Some(0)
    }

    fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
        Extension::to_arguments(ExtensionKind::Array, PTR_SIZE_SLOT, self.0.typestr().as_bytes())
    }

    fn element(&self) -> Option<(&DType, &[u64])> {
        Some((&self.0, &[]))
    }

    fn input(&self) -> Input {
        Input::Bytes
    }

    fn value_kind(&self) -> ValueKind {
        ValueKind::Array
    }

    fn zero(&self) -> (SampleValue, &'static str) {
        (SampleValue::Array(Vec::new()), "an empty array")
    }

    fn encode(&self, value: SampleValue, slot: &mut [u8], _: &EncodeContext<'_>) -> Result<Option<Vec<u8>>> {
        let b = match value {
            SampleValue::Array(b) | SampleValue::Bytes(b) => b,
            v => return Err(mismatch(self, &v)),
        };
        let itemsize = self.0.itemsize();
        if b.len() % itemsize != 0 {
            return Err(invalid_value(format!(
                "{} bytes is not a whole number of {itemsize}-byte {} elements",
                b.len(),
                self.0.name()
            )));
        }
        put_size(slot, (b.len() / itemsize) as u64);
        Ok(Some(b))
    }

    fn decode<'a>(&self, slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
        let len = word(slot, 8);
        let size = len
            .checked_mul(self.0.itemsize() as u64)
            .ok_or_else(|| cx.corrupt(format!("array length {len} overflows")))?;
        Ok(Value::Array(cx.payload(word(slot, 0), Some(size))?))
    }

    fn columns(&self) -> Vec<ColumnDef> {
        // The number of elements.
        vec![ColumnDef::plain(ColumnSource::SizeWord)]
    }

    fn load_as(&self) -> LoadAs {
        LoadAs::Sized { itemsize: self.0.itemsize() }
    }

    fn describe(&self) -> Option<String> {
        Some(format!("dtype {}", self.0.name()))
    }
}
