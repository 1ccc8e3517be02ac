//! Field types: what a column of the data table holds, how it sits in a row, how its values are
//! encoded and decoded, how it shows as Arrow columns and how the loader batches it.
//!
//! Each type lives in one file of this folder, as an implementation of [`FieldKind`]: its row
//! slot, descriptor (FFCV's type id and argument blob), encoder, decoder, Arrow columns, loader
//! layout and the short name Python uses. [`FieldType`] is the closed list of them, and the
//! [`registry!`] below is where each is registered, one line per type.
//!
//! **Adding a field type** is one new file here (a struct implementing [`FieldKind`], and a
//! `parse` function recognising its descriptor and its short name; a type without parameters
//! declares both with `fixed_kind!` of `fixed.rs` and writes only its codec), its variant in
//! [`FieldType`], and its line in the registry. The reader, the writer, the query table, the
//! loader's default decoders, `beton info` and the Python bindings all go through [`FieldKind`]
//! and need no change (Python exposes the type by its short name; a Python `Field` class that
//! names it is one class in `python/beton/fields/`).
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
pub mod extension;
mod float;
mod image;
mod int;
mod json;
pub mod ndarray;
mod text;

use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::format::{Slot, ARGS_SIZE};
use crate::image::ImageOptions;
use crate::value::{SampleValue, Value};
pub use custom::CustomField;
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

/// One field type: everything the reader, writer, query table and loader need to know about it.
pub trait FieldKind: Send + Sync + std::fmt::Debug {
    /// FFCV's class name, or beton's for its extensions (`IntField`, `TextField`).
    fn name(&self) -> &'static str;

    /// The short name schemas use in Python and in listings (`int`, `rgb_image`).
    fn short_name(&self) -> &'static str;

    /// The type id stored in the descriptor: FFCV's (0–6) or [`TYPE_CUSTOM`].
    fn type_id(&self) -> u8 {
        TYPE_CUSTOM
    }

    /// The field's slot in a data-table row.
    fn slot(&self) -> Slot;

    /// Where the payload pointer sits inside the slot, for fields whose samples own a payload.
    fn payload_ptr_offset(&self) -> Option<usize> {
        None
    }

    /// The descriptor's 1024-byte argument blob.
    fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
        Box::new([0u8; ARGS_SIZE])
    }

    /// Element type and shape of array fields (an empty shape for variable-length arrays).
    fn element(&self) -> Option<(&DType, &[u64])> {
        None
    }

    /// What a caller hands the writer for one value of this type (Python's conversion).
    fn input(&self) -> Input;

    /// Fills `slot` (zeroed, [`FieldKind::slot`]'s size) for one value and returns its payload, if
    /// the type has one (its pointer is filled in when the payload is placed in a page).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (what = "value") for a value of the wrong kind or shape;
    /// [`Error::Image`] for an image that cannot be encoded. The writer adds the sample and field.
    fn encode(&self, value: SampleValue, slot: &mut [u8], cx: &EncodeContext<'_>) -> Result<Option<Vec<u8>>>;

    /// Decodes one value from its row slot, reading its payload through `cx`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the sample, field and byte offset for bytes that cannot be a
    /// value of this type. Never panics on any bytes.
    fn decode<'a>(&self, slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>>;

    /// The columns this field contributes to the data table's Arrow view (dataset/src/table.rs).
    fn columns(&self) -> Vec<ColumnDef>;

    /// How the loader's default decoder batches this field.
    fn load_as(&self) -> LoadAs;

    /// Type details for listings (`dtype float32 shape [2, 3]`), if any.
    fn describe(&self) -> Option<String> {
        None
    }
}

/// What the writer needs besides the value: image options and the sample's random draw.
#[derive(Debug, Clone, Copy)]
pub struct EncodeContext<'a> {
    /// The field's image options (image fields only).
    pub image: &'a ImageOptions,
    /// A uniform number in [0, 1) drawn for this sample from the writer's seed.
    pub draw: f64,
    /// Where an image field counts an image whose transparency it flattened (the writer's
    /// report, [`crate::WriteReport::alpha_flattened`]); `None`: not counted.
    pub alpha_flattened: Option<&'a std::cell::Cell<u64>>,
}

/// The reader's side of a decode: the sample's payloads and its error context.
pub struct DecodeContext<'a, 'c> {
    pub(crate) payload: &'c dyn Fn(u64, Option<u64>) -> Result<&'a [u8]>,
    pub(crate) corrupt: &'c dyn Fn(String) -> Error,
}

impl<'a> DecodeContext<'a, '_> {
    /// The payload at `ptr` owned by this sample (of `size` bytes when the row says so).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the sample owns no allocation there (of that size).
    pub fn payload(&self, ptr: u64, size: Option<u64>) -> Result<&'a [u8]> {
        (self.payload)(ptr, size)
    }

    /// The payload of a `{ptr, size}` slot whose size counts bytes (Bytes, JSON, text).
    ///
    /// # Errors
    /// As [`DecodeContext::payload`].
    pub fn sized_payload(&self, slot: &[u8]) -> Result<&'a [u8]> {
        self.payload(word(slot, 0), Some(word(slot, 8)))
    }

    /// A [`Error::Corrupt`] naming this sample, field and row offset.
    pub fn corrupt(&self, what: impl Into<String>) -> Error {
        (self.corrupt)(what.into())
    }
}

/// What a caller gives the writer for a value, by kind (the Python bindings convert by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// An integer ([`SampleValue::Int`]).
    Int,
    /// A float ([`SampleValue::Float`]).
    Float,
    /// A bool ([`SampleValue::Bool`]).
    Bool,
    /// A string ([`SampleValue::Text`]).
    Str,
    /// Bytes ([`SampleValue::Bytes`]).
    Bytes,
    /// An image ([`SampleValue::Image`]).
    Image,
}

/// One column of the data table's Arrow view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    /// Appended to the field's name as `name.suffix`; `None` names the column after the field.
    pub suffix: Option<&'static str>,
    /// Where its values come from.
    pub source: ColumnSource,
}

impl ColumnDef {
    /// The column named after its field.
    pub fn plain(source: ColumnSource) -> ColumnDef {
        ColumnDef { suffix: None, source }
    }
}

/// Where a data-table column's values come from: a few ways of reading a row slot, shared by all
/// field types (dataset/src/table.rs gathers each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnSource {
    /// The row's position (the table's `index` column; no field).
    Index,
    /// An 8-byte little-endian integer at slot offset 0.
    Int,
    /// An 8-byte little-endian float at slot offset 0.
    Float,
    /// The bool byte.
    Bool,
    /// Image mode byte, as 'jpg' / 'raw'.
    ImageMode,
    /// Image width (`<u2` at slot offset 1).
    ImageWidth,
    /// Image height (`<u2` at slot offset 3).
    ImageHeight,
    /// The payload's size, from the allocation table.
    ImageNbytes,
    /// The `size` word of a `{ptr, size}` slot (Bytes, JSON) or the `len` of an array.
    SizeWord,
    /// The same number for every row (an NDArray's payload size).
    Constant(u64),
    /// The payload, decoded as UTF-8 (reads heap pages).
    Text,
    /// The slot's bytes as they are.
    Raw(usize),
}

impl ColumnSource {
    /// The column's Arrow type.
    pub fn data_type(&self) -> DataType {
        match self {
            ColumnSource::Index
            | ColumnSource::ImageNbytes
            | ColumnSource::SizeWord
            | ColumnSource::Constant(_) => DataType::UInt64,
            ColumnSource::Int => DataType::Int64,
            ColumnSource::Float => DataType::Float64,
            ColumnSource::Bool => DataType::Boolean,
            ColumnSource::ImageMode | ColumnSource::Text => DataType::Utf8,
            ColumnSource::ImageWidth | ColumnSource::ImageHeight => DataType::UInt16,
            ColumnSource::Raw(size) => DataType::FixedSizeBinary((*size).min(i32::MAX as usize) as i32),
        }
    }

    /// True when reading the column reads payload pages.
    pub fn reads_payloads(&self) -> bool {
        matches!(self, ColumnSource::Text)
    }
}

/// How the loader's default decoder batches a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadAs {
    /// One `i64` per sample.
    Int,
    /// One `f64` per sample.
    Float,
    /// One bool byte per sample.
    Bool,
    /// A fixed-shape array per sample.
    Array(ArraySpec),
    /// A variable-length payload per sample, padded to the longest (as FFCV's `BytesDecoder`,
    /// JSON's closing NUL included): `itemsize` bytes per element counted by the row's size word.
    Sized {
        /// Bytes per element of the size word.
        itemsize: usize,
    },
    /// An image: decoded by the image pipeline's decoders.
    Image,
    /// No default decoder (custom fields).
    None,
}

/// A descriptor or a short name, as a type's `parse` function sees it.
#[derive(Debug, Clone, Copy)]
pub enum Described<'a> {
    /// A stored descriptor: FFCV's type id, its argument blob and, for type 255 with beton's
    /// magic, the parsed extension.
    Descriptor {
        /// FFCV's type id.
        type_id: u8,
        /// The argument blob.
        args: &'a [u8; ARGS_SIZE],
        /// The parsed beton extension blob, if any.
        ext: Option<&'a Extension>,
    },
    /// A short name with its array details, as Python schemas give them.
    Name {
        /// The short name (`int`, `ndarray`).
        name: &'a str,
        /// A numpy type string, for array types.
        dtype: Option<&'a str>,
        /// A shape, for fixed-shape array types.
        shape: Option<&'a [u64]>,
    },
}

impl Described<'_> {
    /// True for an FFCV descriptor of type id `id`, or the short name `name`.
    fn is(&self, id: u8, name: &str) -> bool {
        match self {
            Described::Descriptor { type_id, .. } => *type_id == id && id != TYPE_CUSTOM,
            Described::Name { name: n, .. } => *n == name,
        }
    }

    /// True for beton's extension of kind `kind`, or the short name `name`.
    fn is_extension(&self, kind: ExtensionKind, name: &str) -> bool {
        match self {
            Described::Descriptor { ext: Some(ext), .. } => ext.kind == kind as u16,
            Described::Descriptor { .. } => false,
            Described::Name { name: n, .. } => *n == name,
        }
    }
}

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
        const PARSERS: &[Parse] = &[$($parse),*];
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

/// An invalid value given to the writer (the writer adds the sample and field).
pub(crate) fn invalid_value(why: String) -> Error {
    Error::InvalidArgument { what: "value".into(), why }
}

/// The error for a value of the wrong kind.
pub(crate) fn mismatch(kind: &dyn FieldKind, value: &SampleValue) -> Error {
    invalid_value(format!("expected a value for a {} field, got {}", kind.name(), value.kind()))
}

/// Writes the `size` word of a `{ptr, size}` slot.
pub(crate) fn put_size(slot: &mut [u8], size: u64) {
    slot[8..16].copy_from_slice(&size.to_le_bytes());
}

/// `bytes` as the payload of a `{ptr, size}` slot whose size counts bytes (Bytes, JSON, text):
/// writes the size word and returns the payload, as [`FieldKind::encode`] does.
pub(crate) fn sized_payload(slot: &mut [u8], bytes: Vec<u8>) -> Option<Vec<u8>> {
    put_size(slot, bytes.len() as u64);
    Some(bytes)
}

/// The little-endian `u64` at `at` in `slot` (0 past its end: slots are sized by their type).
pub(crate) fn word(slot: &[u8], at: usize) -> u64 {
    slot.get(at..at + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes)
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
    fn ffcv_types_round_trip_through_descriptors_and_short_names() {
        let spec = ArraySpec::new(DType::parse("<f4").unwrap(), vec![2, 3]).unwrap();
        for ty in [
            FieldType::Float,
            FieldType::Int,
            FieldType::RgbImage,
            FieldType::Bytes,
            FieldType::Json,
            FieldType::NDArray(spec.clone()),
            FieldType::TorchTensor(spec.clone()),
            FieldType::Text,
            FieldType::Bool,
            FieldType::Array(DType::parse("<i2").unwrap()),
            FieldType::GreyImage,
        ] {
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
