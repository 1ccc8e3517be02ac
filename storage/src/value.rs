//! Values: what the writer takes for one field of one sample ([`SampleValue`], owned) and what
//! the reader hands back ([`Value`], borrowed from the file).
//!
//! Their own module because every field type's codec (`field/*.rs`) maps between the two, and the
//! reader and the writer drive those codecs: with the values here, the field modules depend on
//! neither the reader nor the writer.

use crate::error::Result;
use crate::image::{self, Channels, EncodedImage, ImageMode, ImageSource, Pixels};

/// One field's value in a sample given to the writer.
#[derive(Debug, Clone, PartialEq)]
pub enum SampleValue {
    /// For Int fields.
    Int(i64),
    /// For Float fields.
    Float(f64),
    /// For image fields.
    Image(ImageSource),
    /// For Bytes fields.
    Bytes(Vec<u8>),
    /// For JSON fields: JSON text (checked to parse).
    Json(String),
    /// For NDArray and TorchTensor fields: the array's bytes, C order, little-endian.
    NDArray(Vec<u8>),
    /// For Text fields.
    Text(String),
    /// For Bool fields.
    Bool(bool),
    /// For Array fields: the elements' bytes, a whole number of elements.
    Array(Vec<u8>),
    /// For custom fields: the row slot's bytes.
    Custom(Vec<u8>),
    /// For custom fields that own heap data (an FFCV `Field` whose `encode` calls `malloc`):
    /// the row slot's bytes and each payload with the slot offset of its pointer, a
    /// little-endian `u64` the writer fills in with the payload's file offset (what `malloc`
    /// returned to FFCV's writer).
    CustomWithPayloads {
        /// The slot's bytes (pointer words are overwritten).
        slot: Vec<u8>,
        /// (offset of the pointer in the slot, payload bytes), in allocation order.
        payloads: Vec<(usize, Vec<u8>)>,
    },
}

impl SampleValue {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            SampleValue::Int(_) => "an int",
            SampleValue::Float(_) => "a float",
            SampleValue::Image(_) => "an image",
            SampleValue::Bytes(_) => "bytes",
            SampleValue::Json(_) => "JSON",
            SampleValue::NDArray(_) => "an ndarray",
            SampleValue::Text(_) => "text",
            SampleValue::Bool(_) => "a bool",
            SampleValue::Array(_) => "an array",
            SampleValue::Custom(_) => "custom bytes",
            SampleValue::CustomWithPayloads { .. } => "custom bytes with payloads",
        }
    }
}

/// An image as stored in one sample: the row's metadata and the payload bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// JPEG or raw.
    pub mode: ImageMode,
    /// Width from the row.
    pub width: u16,
    /// Height from the row.
    pub height: u16,
    /// 3 for RGBImage fields, 1 for GreyImage fields.
    pub channels: Channels,
    /// The payload: JPEG bytes, or `width × height × channels` raw bytes.
    pub data: &'a [u8],
}

impl ImageRef<'_> {
    /// Decodes the image to HWC `u8` pixels.
    ///
    /// # Errors
    /// A corrupt JPEG, or a decoded size that differs from the row's.
    pub fn decode(&self) -> Result<Pixels> {
        image::decode_stored(self.mode, self.width, self.height, self.data, self.channels)
    }

    /// Decodes as FFCV 1.0.2's loader does (libjpeg-turbo's fast integer IDCT): pixel for pixel
    /// what FFCV hands out for this image (checked against every JPEG of the FFCV fixtures).
    /// Slightly less accurate than [`ImageRef::decode`]; raw images are the same either way.
    ///
    /// # Errors
    /// As [`ImageRef::decode`].
    pub fn decode_like_ffcv(&self) -> Result<Pixels> {
        image::decode_stored_with(self.mode, self.width, self.height, self.data, self.channels, true)
    }
}

/// One field's value in one sample, borrowed from the file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// IntField.
    Int(i64),
    /// FloatField.
    Float(f64),
    /// RGBImageField or GreyImageField.
    Image(ImageRef<'a>),
    /// BytesField payload.
    Bytes(&'a [u8]),
    /// JSONField text, without the stored trailing NUL.
    Json(&'a str),
    /// NDArrayField / TorchTensorField payload: the array's bytes (dtype and shape are the
    /// field's).
    NDArray(&'a [u8]),
    /// TextField.
    Text(&'a str),
    /// BoolField.
    Bool(bool),
    /// ArrayField payload: the elements' bytes (element type is the field's).
    Array(&'a [u8]),
    /// A custom field's raw row bytes.
    Custom(&'a [u8]),
}

/// Which [`Value`] variant a field type's values are ([`FieldKind::value_kind`]): what code that
/// keeps values outside a data file (a version's column files) needs to know to hold them.
///
/// [`FieldKind::value_kind`]: crate::field::FieldKind::value_kind
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// [`Value::Int`].
    Int,
    /// [`Value::Float`].
    Float,
    /// [`Value::Image`].
    Image,
    /// [`Value::Bytes`].
    Bytes,
    /// [`Value::Json`].
    Json,
    /// [`Value::NDArray`].
    NDArray,
    /// [`Value::Text`].
    Text,
    /// [`Value::Bool`].
    Bool,
    /// [`Value::Array`].
    Array,
    /// [`Value::Custom`].
    Custom,
}

impl<'a> Value<'a> {
    /// Which variant this is.
    pub fn kind(&self) -> ValueKind {
        match self {
            Value::Int(_) => ValueKind::Int,
            Value::Float(_) => ValueKind::Float,
            Value::Image(_) => ValueKind::Image,
            Value::Bytes(_) => ValueKind::Bytes,
            Value::Json(_) => ValueKind::Json,
            Value::NDArray(_) => ValueKind::NDArray,
            Value::Text(_) => ValueKind::Text,
            Value::Bool(_) => ValueKind::Bool,
            Value::Array(_) => ValueKind::Array,
            Value::Custom(_) => ValueKind::Custom,
        }
    }

    /// The value as the writer takes it, to store it in another file as it is stored here
    /// (images byte for byte: [`ImageSource::Stored`]).
    pub fn to_sample_value(&self) -> SampleValue {
        use SampleValue as S;
        match *self {
            Value::Int(v) => S::Int(v),
            Value::Float(v) => S::Float(v),
            Value::Bool(v) => S::Bool(v),
            Value::Image(img) => S::Image(ImageSource::Stored(EncodedImage {
                mode: img.mode,
                width: img.width,
                height: img.height,
                data: img.data.to_vec(),
            })),
            Value::Bytes(b) => S::Bytes(b.to_vec()),
            Value::Json(t) => S::Json(t.to_string()),
            Value::NDArray(b) => S::NDArray(b.to_vec()),
            Value::Text(t) => S::Text(t.to_string()),
            Value::Array(b) => S::Array(b.to_vec()),
            Value::Custom(b) => S::Custom(b.to_vec()),
        }
    }

    /// The integer, for Int values.
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            Value::Int(v) => Some(v),
            _ => None,
        }
    }

    /// The float, for Float values.
    pub fn as_float(&self) -> Option<f64> {
        match *self {
            Value::Float(v) => Some(v),
            _ => None,
        }
    }

    /// The text, for Json and Text values.
    pub fn as_str(&self) -> Option<&'a str> {
        match *self {
            Value::Json(s) | Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The payload or raw bytes, for Bytes, NDArray, Array and Custom values (and the UTF-8 of
    /// text).
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match *self {
            Value::Bytes(b) | Value::NDArray(b) | Value::Array(b) | Value::Custom(b) => Some(b),
            Value::Json(s) | Value::Text(s) => Some(s.as_bytes()),
            Value::Image(img) => Some(img.data),
            _ => None,
        }
    }

    /// The image, for image values.
    pub fn as_image(&self) -> Option<ImageRef<'a>> {
        match *self {
            Value::Image(img) => Some(img),
            _ => None,
        }
    }
}
