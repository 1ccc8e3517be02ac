//! Field types: what a column of the data table holds, how it sits in a row, and how its
//! descriptor is written and read back.
//!
//! FFCV's seven types keep their type ids (`ffcv/types.py`); beton's extensions are type 255 with
//! a tagged argument blob ([`extension`]). Adding a field type means one variant here and its
//! encode (writer.rs) and decode (reader.rs) arms.

pub mod extension;
pub mod ndarray;

use crate::format::{Slot, ARGS_SIZE};
pub use extension::{Extension, ExtensionKind};
pub use ndarray::{ArraySpec, DType};

/// FFCV's type id for FloatField.
pub const TYPE_FLOAT: u8 = 0;
/// FFCV's type id for IntField.
pub const TYPE_INT: u8 = 1;
/// FFCV's type id for RGBImageField.
pub const TYPE_RGB_IMAGE: u8 = 2;
/// FFCV's type id for BytesField.
pub const TYPE_BYTES: u8 = 3;
/// FFCV's type id for NDArrayField.
pub const TYPE_NDARRAY: u8 = 4;
/// FFCV's type id for JSONField.
pub const TYPE_JSON: u8 = 5;
/// FFCV's type id for TorchTensorField.
pub const TYPE_TORCH_TENSOR: u8 = 6;
/// FFCV's type id for any Field class it does not know (custom fields, beton's extensions).
pub const TYPE_CUSTOM: u8 = 255;

/// Row slot of FFCV's packed image struct `{mode <u1, width <u2, height <u2, data_ptr <u8}`.
pub const IMAGE_SLOT: Slot = Slot { size: 13, align: 1 };
/// Row slot of the packed `{ptr <u8, size <u8}` struct (Bytes, JSON, text, arrays).
pub const PTR_SIZE_SLOT: Slot = Slot { size: 16, align: 1 };
/// Row slot of an 8-byte scalar (`<i8`, `<f8`, the NDArray `<u8` pointer).
pub const SCALAR_SLOT: Slot = Slot { size: 8, align: 8 };
/// Row slot of a bool (`<u1`).
pub const BOOL_SLOT: Slot = Slot { size: 1, align: 1 };

/// What a field holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldType {
    /// `<f8` (type 0).
    Float,
    /// `<i8` (type 1).
    Int,
    /// An RGB image, JPEG or raw HWC `u8` (type 2).
    RgbImage,
    /// Opaque bytes (type 3).
    Bytes,
    /// JSON text, stored as UTF-8 followed by a NUL (type 5).
    Json,
    /// A fixed-shape array (type 4).
    NDArray(ArraySpec),
    /// A fixed-shape array that FFCV hands out as a torch tensor (type 6; same layout as NDArray).
    TorchTensor(ArraySpec),
    /// Extension: UTF-8 text.
    Text,
    /// Extension: a boolean.
    Bool,
    /// Extension: a variable-length 1-D array of the given element type.
    Array(DType),
    /// Extension: a single-channel image, JPEG or raw.
    GreyImage,
    /// A type-255 field this crate does not interpret: its row bytes are exposed raw.
    Custom {
        /// The field's slot in the row.
        slot: Slot,
        /// The descriptor's argument blob, kept as written.
        arguments: Box<[u8; ARGS_SIZE]>,
    },
}

impl FieldType {
    /// The type id stored in the descriptor.
    pub fn type_id(&self) -> u8 {
        match self {
            FieldType::Float => TYPE_FLOAT,
            FieldType::Int => TYPE_INT,
            FieldType::RgbImage => TYPE_RGB_IMAGE,
            FieldType::Bytes => TYPE_BYTES,
            FieldType::NDArray(_) => TYPE_NDARRAY,
            FieldType::Json => TYPE_JSON,
            FieldType::TorchTensor(_) => TYPE_TORCH_TENSOR,
            _ => TYPE_CUSTOM,
        }
    }

    /// A short name for listings: FFCV's class name, or beton's for extensions.
    pub fn name(&self) -> &'static str {
        match self {
            FieldType::Float => "FloatField",
            FieldType::Int => "IntField",
            FieldType::RgbImage => "RGBImageField",
            FieldType::Bytes => "BytesField",
            FieldType::Json => "JSONField",
            FieldType::NDArray(_) => "NDArrayField",
            FieldType::TorchTensor(_) => "TorchTensorField",
            FieldType::Text => "TextField",
            FieldType::Bool => "BoolField",
            FieldType::Array(_) => "ArrayField",
            FieldType::GreyImage => "GreyImageField",
            FieldType::Custom { .. } => "custom",
        }
    }

    /// The field's slot in a data-table row.
    pub fn slot(&self) -> Slot {
        match self {
            FieldType::Float | FieldType::Int | FieldType::NDArray(_) | FieldType::TorchTensor(_) => {
                SCALAR_SLOT
            }
            FieldType::RgbImage | FieldType::GreyImage => IMAGE_SLOT,
            FieldType::Bytes | FieldType::Json | FieldType::Text | FieldType::Array(_) => PTR_SIZE_SLOT,
            FieldType::Bool => BOOL_SLOT,
            FieldType::Custom { slot, .. } => *slot,
        }
    }

    /// Where the payload pointer sits inside the slot, for fields whose samples own a payload.
    pub fn payload_ptr_offset(&self) -> Option<usize> {
        match self {
            FieldType::RgbImage | FieldType::GreyImage => Some(5),
            FieldType::Bytes
            | FieldType::Json
            | FieldType::Text
            | FieldType::Array(_)
            | FieldType::NDArray(_)
            | FieldType::TorchTensor(_) => Some(0),
            FieldType::Float | FieldType::Int | FieldType::Bool | FieldType::Custom { .. } => None,
        }
    }

    /// True for FFCV's own types (ids 0–6), which FFCV 1.0.2 reads with no extra code.
    pub fn is_ffcv_type(&self) -> bool {
        self.type_id() != TYPE_CUSTOM
    }

    /// The descriptor's argument blob.
    pub fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
        let ext = |kind, params: &[u8]| Extension::to_arguments(kind, self.slot(), params);
        match self {
            FieldType::NDArray(spec) | FieldType::TorchTensor(spec) => spec.to_arguments(),
            FieldType::Text => ext(ExtensionKind::Text, &[]),
            FieldType::Bool => ext(ExtensionKind::Bool, &[]),
            FieldType::Array(dtype) => ext(ExtensionKind::Array, dtype.typestr().as_bytes()),
            FieldType::GreyImage => ext(ExtensionKind::GreyImage, &[]),
            FieldType::Custom { arguments, .. } => arguments.clone(),
            _ => Box::new([0u8; ARGS_SIZE]),
        }
    }

    /// Interprets a descriptor. `custom_slot` is the caller's row layout for a foreign type-255
    /// field (the file does not store it).
    ///
    /// # Errors
    /// `Err(None)` for a foreign custom field with no `custom_slot`; `Err(Some(why))` for an
    /// unknown type id or a malformed argument blob. Never panics.
    pub fn from_descriptor(
        type_id: u8,
        args: &[u8; ARGS_SIZE],
        custom_slot: Option<Slot>,
    ) -> Result<FieldType, Option<String>> {
        Ok(match type_id {
            TYPE_FLOAT => FieldType::Float,
            TYPE_INT => FieldType::Int,
            TYPE_RGB_IMAGE => FieldType::RgbImage,
            TYPE_BYTES => FieldType::Bytes,
            TYPE_JSON => FieldType::Json,
            TYPE_NDARRAY => FieldType::NDArray(ArraySpec::from_arguments(args).map_err(Some)?),
            TYPE_TORCH_TENSOR => FieldType::TorchTensor(ArraySpec::from_arguments(args).map_err(Some)?),
            TYPE_CUSTOM => match Extension::parse(args).map_err(Some)? {
                Some(ext) => Self::from_extension(ext, args)?,
                None => match custom_slot {
                    Some(slot) => FieldType::Custom { slot, arguments: Box::new(*args) },
                    None => return Err(None),
                },
            },
            other => {
                return Err(Some(format!(
                    "unknown field type id {other} (FFCV knows 0-6 and 255 for custom fields)"
                )))
            }
        })
    }

    fn from_extension(ext: Extension, args: &[u8; ARGS_SIZE]) -> Result<FieldType, Option<String>> {
        let ty = match ext.kind {
            k if k == ExtensionKind::Text as u16 => FieldType::Text,
            k if k == ExtensionKind::Bool as u16 => FieldType::Bool,
            k if k == ExtensionKind::GreyImage as u16 => FieldType::GreyImage,
            k if k == ExtensionKind::Array as u16 => {
                let typestr = std::str::from_utf8(&ext.params)
                    .map_err(|_| Some("array element type is not ASCII".to_string()))?;
                FieldType::Array(DType::parse(typestr).map_err(Some)?)
            }
            // A kind from a newer beton: its slot is in the blob, so expose the row bytes raw.
            _ => return Ok(FieldType::Custom { slot: ext.slot, arguments: Box::new(*args) }),
        };
        if ty.slot() != ext.slot {
            return Err(Some(format!(
                "{} extension declares a {}-byte slot aligned to {}, expected {:?}",
                ty.name(),
                ext.slot.size,
                ext.slot.align,
                ty.slot()
            )));
        }
        Ok(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_types_round_trip_through_descriptors() {
        for ty in [
            FieldType::Text,
            FieldType::Bool,
            FieldType::GreyImage,
            FieldType::Array(DType::parse("<f4").unwrap()),
        ] {
            let args = ty.to_arguments();
            assert_eq!(ty.type_id(), TYPE_CUSTOM);
            assert_eq!(FieldType::from_descriptor(TYPE_CUSTOM, &args, None), Ok(ty));
        }
    }

    #[test]
    fn foreign_custom_field_needs_a_layout() {
        let mut args = Box::new([0u8; ARGS_SIZE]);
        args[..10].copy_from_slice(b"ext-args\x01\x02");
        assert_eq!(FieldType::from_descriptor(TYPE_CUSTOM, &args, None), Err(None));
        let slot = Slot { size: 6, align: 1 };
        let ty = FieldType::from_descriptor(TYPE_CUSTOM, &args, Some(slot)).unwrap();
        assert_eq!(ty.slot(), slot);
        assert!(FieldType::from_descriptor(7, &args, None).unwrap_err().is_some());
    }
}
