//! Field types: what a column of the data table holds, how it sits in a row, how its values are
//! encoded and decoded, how it shows as Arrow columns and how the loader batches it.
//!
//! Each type lives in one file of this folder, as an implementation of [`FieldKind`] (`kind.rs`,
//! with what the types share): its row slot, descriptor (FFCV's type id and argument blob),
//! encoder, decoder, the kind of value it gives and its zero, Arrow columns, loader layout and
//! the short name Python uses. [`FieldType`] is the closed list of them, and the [`registry!`]
//! below is where each is registered, one line per type. Only this file names every type; the
//! types' files never name [`FieldType`].
//!
//! **Adding a field type** is one new file here (a struct implementing [`FieldKind`], and a
//! `parse` function recognising its descriptor and its short name and returning the variant's
//! parameter, `()` for none; a type without parameters declares both with `fixed_kind!` of
//! `fixed.rs` and writes only its codec), its variant in [`FieldType`], and its line in the
//! registry. The reader, the writer, the query table, versions' column files, the loader's
//! default decoders and `beton info` go through [`FieldKind`] and need no change;
//! docs/CONTRIBUTING.md lists the few other places (Python classes, docs) a type appears.
//!
//! FFCV's seven types keep their type ids (`ffcv/types.py`); beton's extensions are type 255 with
//! a tagged argument blob ([`extension`]).

// First: the types below are declared with its `fixed_kind!`.
#[macro_use]
mod fixed;

mod array;
mod bool;
mod bytes;
mod custom;
mod dtype;
pub mod extension;
mod float;
mod image;
mod int;
mod json;
mod kind;
pub mod ndarray;
mod text;

use crate::error::{Error, Result};
use crate::format::{Slot, ARGS_SIZE};
use crate::image::ImageOptions;
use crate::value::{SampleValue, Value};
pub use custom::CustomField;
pub use dtype::{ArraySpec, DType, Element};
pub use extension::{Extension, ExtensionKind};
pub use kind::{ColumnDef, ColumnSource, DecodeContext, Described, EncodeContext, FieldKind, Input, LoadAs};
pub use kind::{BOOL_SLOT, IMAGE_SLOT, PTR_SIZE_SLOT, SCALAR_SLOT};
pub use kind::{
    TYPE_BYTES, TYPE_CUSTOM, TYPE_FLOAT, TYPE_INT, TYPE_JSON, TYPE_NDARRAY, TYPE_RGB_IMAGE, TYPE_TORCH_TENSOR,
};

/// A type's recogniser: `Some` when `Described` is this type (or a malformed instance of it).
type Parse = fn(&Described<'_>) -> Option<std::result::Result<FieldType, String>>;

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
    Custom(CustomField),
}

/// The registry: each type's variant, its [`FieldKind`] and its `parse`, one line per type.
/// A type's `parse` recognises its descriptor or short name and returns the variant's parameter
/// (`()` for a type without one), so the type's file never names [`FieldType`].
macro_rules! registry {
    ($($variant:ident $(($param:ident))? => $kind:expr, $parse:path;)*) => {
        impl FieldType {
            /// What this type is and does.
            pub fn kind(&self) -> &dyn FieldKind {
                match self {
                    $(FieldType::$variant $(($param))? => $kind,)*
                }
            }
        }

        /// Every type's recogniser, in registry order.
        const PARSERS: &[Parse] = &[$(|d| $parse(d).map(|r| r.map(variant!($variant $(($param))?)))),*];
    };
}

/// The constructor of a registry line's variant from what its `parse` returns.
macro_rules! variant {
    ($variant:ident) => {
        |()| FieldType::$variant
    };
    ($variant:ident ($param:ident)) => {
        FieldType::$variant
    };
}

registry! {
    Float => &float::Float, float::parse;
    Int => &int::Int, int::parse;
    RgbImage => &image::RGB, image::parse_rgb;
    Bytes => &bytes::Bytes, bytes::parse;
    Json => &json::Json, json::parse;
    NDArray(spec) => ndarray::NDArray::of(spec), ndarray::parse_ndarray;
    TorchTensor(spec) => ndarray::TorchTensor::of(spec), ndarray::parse_torch_tensor;
    Text => &text::Text, text::parse;
    Bool => &bool::Bool, bool::parse;
    Array(dtype) => array::Array::of(dtype), array::parse;
    GreyImage => &image::GREY, image::parse_grey;
    Custom(custom) => custom, custom::parse;
}

impl FieldType {
    /// The type id stored in the descriptor.
    pub fn type_id(&self) -> u8 {
        self.kind().type_id()
    }

    /// A short name for listings: FFCV's class name, or beton's for extensions.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The short name Python schemas use (`int`, `rgb_image`, ...).
    pub fn short_name(&self) -> &'static str {
        self.kind().short_name()
    }

    /// The field's slot in a data-table row.
    pub fn slot(&self) -> Slot {
        self.kind().slot()
    }

    /// Where the payload pointer sits inside the slot, for fields whose samples own a payload.
    pub fn payload_ptr_offset(&self) -> Option<usize> {
        self.kind().payload_ptr_offset()
    }

    /// Encodes `value` as a data file would store it in a field of this type (images per
    /// `image`, a stored image's bytes kept verbatim) and hands `f` the value a reader would
    /// get back: what a column file of a dataset directory holds for it.
    ///
    /// # Errors
    /// As [`FieldKind::encode`]: a value of the wrong kind or shape, an image that cannot be
    /// encoded.
    pub fn encode_value<R>(
        &self,
        value: SampleValue,
        image: &ImageOptions,
        draw: f64,
        f: impl FnOnce(Value<'_>) -> R,
    ) -> Result<R> {
        let kind = self.kind();
        let mut slot = vec![0u8; kind.slot().size];
        let payload = kind.encode(value, &mut slot, &EncodeContext { image, draw, alpha_flattened: None })?;
        let payload = payload.unwrap_or_default();
        let corrupt = |why: String| Error::InvalidArgument { what: "value".into(), why };
        let read = |_ptr: u64, size: Option<u64>| -> Result<&[u8]> {
            match size {
                Some(n) if n != payload.len() as u64 => {
                    Err(corrupt(format!("its size word says {n} bytes, its payload has {}", payload.len())))
                }
                _ => Ok(payload.as_slice()),
            }
        };
        let value = kind.decode(&slot, &DecodeContext { payload: &read, corrupt: &corrupt })?;
        Ok(f(value))
    }

    /// True for image fields (RGB or grey).
    pub fn is_image(&self) -> bool {
        self.kind().load_as() == LoadAs::Image
    }

    /// True for FFCV's own types (ids 0–6), which FFCV 1.0.2 reads with no extra code.
    pub fn is_ffcv_type(&self) -> bool {
        self.type_id() != TYPE_CUSTOM
    }

    /// The descriptor's argument blob.
    pub fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
        self.kind().to_arguments()
    }

    /// The type a short name describes (`int`, `ndarray` with `dtype` and `shape`, ...), as the
    /// Python bindings build schemas. `custom` is not one: a custom field needs its slot.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown name or missing or bad array details.
    pub fn from_short_name(name: &str, dtype: Option<&str>, shape: Option<&[u64]>) -> Result<FieldType> {
        let described = Described::Name { name, dtype, shape };
        let invalid = |why: String| Error::InvalidArgument { what: format!("field type '{name}'"), why };
        match PARSERS.iter().find_map(|parse| parse(&described)) {
            Some(parsed) => parsed.map_err(invalid),
            None => Err(invalid("no field type has this name".into())),
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
    ) -> std::result::Result<FieldType, Option<String>> {
        let ext = match type_id {
            TYPE_CUSTOM => Extension::parse(args).map_err(Some)?,
            _ => None,
        };
        let described = Described::Descriptor { type_id, args, ext: ext.as_ref() };
        if let Some(parsed) = PARSERS.iter().find_map(|parse| parse(&described)) {
            let ty = parsed.map_err(Some)?;
            if let Some(ext) = &ext {
                if ty.slot() != ext.slot {
                    return Err(Some(format!(
                        "{} extension declares a {}-byte slot aligned to {}, expected {:?}",
                        ty.name(),
                        ext.slot.size,
                        ext.slot.align,
                        ty.slot()
                    )));
                }
            }
            return Ok(ty);
        }
        match (type_id, ext) {
            // A kind from a newer beton: its slot is in the blob, so expose the row bytes raw.
            (TYPE_CUSTOM, Some(ext)) => {
                Ok(FieldType::Custom(CustomField { slot: ext.slot, arguments: Box::new(*args) }))
            }
            (TYPE_CUSTOM, None) => match custom_slot {
                Some(slot) => Ok(FieldType::Custom(CustomField { slot, arguments: Box::new(*args) })),
                None => Err(None),
            },
            (other, _) => {
                Err(Some(format!("unknown field type id {other} (FFCV knows 0-6 and 255 for custom fields)")))
            }
        }
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

    /// One of each type but custom (a test of a new type starts by adding it here).
    fn every_type() -> Vec<FieldType> {
        let spec = ArraySpec::new(DType::parse("<f4").unwrap(), vec![2, 3]).unwrap();
        vec![
            FieldType::Float,
            FieldType::Int,
            FieldType::RgbImage,
            FieldType::Bytes,
            FieldType::Json,
            FieldType::NDArray(spec.clone()),
            FieldType::TorchTensor(spec),
            FieldType::Text,
            FieldType::Bool,
            FieldType::Array(DType::parse("<i2").unwrap()),
            FieldType::GreyImage,
        ]
    }

    #[test]
    fn ffcv_types_round_trip_through_descriptors_and_short_names() {
        for ty in every_type() {
            let args = ty.to_arguments();
            assert_eq!(FieldType::from_descriptor(ty.type_id(), &args, None), Ok(ty.clone()));
            let (dtype, shape) = match ty.kind().element() {
                Some((d, s)) => (Some(d.typestr().to_string()), Some(s.to_vec())),
                None => (None, None),
            };
            let by_name = FieldType::from_short_name(ty.short_name(), dtype.as_deref(), shape.as_deref());
            assert_eq!(by_name.unwrap(), ty);
        }
        assert!(FieldType::from_short_name("ndarray", None, None).is_err());
        let err = FieldType::from_short_name("complex", None, None).unwrap_err().to_string();
        assert!(err.contains("no field type"), "{err}");
    }

    #[test]
    fn a_types_zero_is_one_of_its_values() {
        let custom = FieldType::Custom(CustomField {
            slot: Slot { size: 6, align: 1 },
            arguments: Box::new([0; ARGS_SIZE]),
        });
        for ty in every_type().into_iter().chain([custom]) {
            let (zero, _) = ty.kind().zero();
            let kind = ty.encode_value(zero, &ImageOptions::default(), 0.0, |v| v.kind()).unwrap();
            assert_eq!(kind, ty.kind().value_kind(), "{ty:?}");
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
