//! What every field type implements and shares: the [`FieldKind`] trait, the contexts of its
//! encoder and decoder, how it shows as Arrow columns ([`ColumnDef`]) and how the loader batches
//! it ([`LoadAs`]), FFCV's type ids and row slots, and the small helpers the codecs share.
//!
//! Apart from the registry (`mod.rs`, which names every type) so that each type's file depends
//! on this one and never on the list of all types.

use arrow_schema::DataType;

use super::dtype::{ArraySpec, DType};
use super::extension::{Extension, ExtensionKind};
use crate::error::{Error, Result};
use crate::format::{Slot, ARGS_SIZE};
use crate::image::ImageOptions;
use crate::value::{SampleValue, Value, ValueKind};

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

    /// Which [`Value`] variant [`FieldKind::decode`] gives.
    fn value_kind(&self) -> ValueKind;

    /// The type's zero and its name (0, NaN for floats, JSON `null`, an empty payload, zeros of
    /// a fixed size, a 1x1 black image): what stands for a missing value in a data file, which
    /// has none (beton-dataset writes it for SQL's NULL).
    fn zero(&self) -> (SampleValue, &'static str);

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
    /// A 1-D array's payload as a vector of its elements (a `FixedSizeList`; reads heap pages).
    Vector(super::dtype::Element, u32),
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
            ColumnSource::Vector(element, dim) => DataType::FixedSizeList(
                std::sync::Arc::new(arrow_schema::Field::new("item", element.data_type(), false)),
                *dim as i32,
            ),
        }
    }

    /// True when reading the column reads payload pages.
    pub fn reads_payloads(&self) -> bool {
        matches!(self, ColumnSource::Text | ColumnSource::Vector(..))
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
    pub(super) fn is(&self, id: u8, name: &str) -> bool {
        match self {
            Described::Descriptor { type_id, .. } => *type_id == id && id != TYPE_CUSTOM,
            Described::Name { name: n, .. } => *n == name,
        }
    }

    /// True for beton's extension of kind `kind`, or the short name `name`.
    pub(super) fn is_extension(&self, kind: ExtensionKind, name: &str) -> bool {
        match self {
            Described::Descriptor { ext: Some(ext), .. } => ext.kind == kind as u16,
            Described::Descriptor { .. } => false,
            Described::Name { name: n, .. } => *n == name,
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
