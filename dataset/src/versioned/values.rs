//! Column-file arrays of every field type (docs/FORMAT.md §13): the Arrow type a field's values
//! take in a column file, building such an array from values, reading one cell back as the
//! storage value a data file would give, and deriving the data table's columns of the field.
//!
//! The array follows the kind of value the field type gives ([`FieldKind::value_kind`]), so a
//! new field type whose values are one of these needs nothing here:
//!
//! | values (field types) | column-file array |
//! |---|---|
//! | Int, Float, Bool, Text | Int64, Float64, Boolean, Utf8 |
//! | Json (JSON) | LargeUtf8 (the text, no NUL) |
//! | Bytes, NDArray, Array, Custom (Bytes, NDArray, TorchTensor, Array, custom) | LargeBinary (the payload or row bytes) |
//! | Image (RGBImage, GreyImage) | Struct `{mode: UInt8, width: UInt16, height: UInt16, data: LargeBinary}` (JPEG bytes verbatim, or raw pixels) |
//!
//! [`FieldKind::value_kind`]: beton_storage::FieldKind::value_kind
//!
//! In memory a fragment's column may hold nulls: a null cell is "the data file's value", the
//! rows a patch leaves alone (a patch of 5 images over a data file of 100,000 holds 5 images,
//! not 100,000). Column files on disk hold no nulls.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, LargeBinaryBuilder, LargeStringBuilder, StringBuilder,
    UInt16Builder, UInt8Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt16Type, UInt8Type};
use arrow_array::{Array, ArrayRef, FixedSizeBinaryArray, StringArray, StructArray, UInt64Array};
use arrow_schema::{DataType, Field, Fields};
use beton_storage::field::ColumnSource;
use beton_storage::{Channels, FieldType, ImageMode, ImageOptions, ImageRef, SampleValue, Value, ValueKind};

use crate::error::{Error, Result};

/// The Arrow type of field type `ty`'s values in a column file.
pub fn column_file_type(ty: &FieldType) -> DataType {
    match ty.kind().value_kind() {
        ValueKind::Int => DataType::Int64,
        ValueKind::Float => DataType::Float64,
        ValueKind::Bool => DataType::Boolean,
        ValueKind::Text => DataType::Utf8,
        ValueKind::Json => DataType::LargeUtf8,
        ValueKind::Image => DataType::Struct(image_fields()),
        ValueKind::Bytes | ValueKind::NDArray | ValueKind::Array | ValueKind::Custom => DataType::LargeBinary,
    }
}

/// True when the field's column-file array is its one table column (int, float, bool, text):
/// SQL can compute such values, and missing ones have a natural default.
pub fn is_plain(ty: &FieldType) -> bool {
    matches!(ty, FieldType::Int | FieldType::Float | FieldType::Bool | FieldType::Text)
}

fn image_fields() -> Fields {
    Fields::from(vec![
        Field::new("mode", DataType::UInt8, false),
        Field::new("width", DataType::UInt16, false),
        Field::new("height", DataType::UInt16, false),
        Field::new("data", DataType::LargeBinary, false),
    ])
}

fn bad(why: String) -> Error {
    Error::InvalidArgument { what: "column file".into(), why }
}

/// Row `row` of a column-file array of field type `ty` as a storage value; `None` for a null
/// cell (the data file's value stands).
///
/// # Errors
/// [`Error::InvalidArgument`] for an array of another type, or a cell that cannot be a value of
/// `ty` (an array of the wrong size, an image whose pixels do not match its size).
pub fn cell<'a>(array: &'a ArrayRef, ty: &FieldType, row: usize) -> Result<Option<Value<'a>>> {
    if row >= array.len() {
        return Err(bad(format!("row {row} past its {} values", array.len())));
    }
    if array.is_null(row) {
        return Ok(None);
    }
    let want = column_file_type(ty);
    if *array.data_type() != want {
        return Err(bad(format!("holds {} values for a {} field, not {want}", array.data_type(), ty.name())));
    }
    let binary = || array.as_binary::<i64>().value(row);
    let sized = |bytes: &'a [u8], n: u64| {
        if bytes.len() as u64 == n {
            Ok(bytes)
        } else {
            Err(bad(format!("row {row} holds {} bytes, a {} value has {n}", bytes.len(), ty.name())))
        }
    };
    let kind = ty.kind();
    // A type without a payload holds its value in its row: the slot's bytes (custom fields).
    let fixed = |bytes: &'a [u8]| match kind.payload_ptr_offset() {
        None => sized(bytes, kind.slot().size as u64),
        Some(_) => Ok(bytes),
    };
    Ok(Some(match kind.value_kind() {
        ValueKind::Int => Value::Int(array.as_primitive::<Int64Type>().value(row)),
        ValueKind::Float => Value::Float(array.as_primitive::<Float64Type>().value(row)),
        ValueKind::Bool => Value::Bool(array.as_boolean().value(row)),
        ValueKind::Text => Value::Text(array.as_string::<i32>().value(row)),
        ValueKind::Json => Value::Json(array.as_string::<i64>().value(row)),
        ValueKind::Bytes => Value::Bytes(fixed(binary())?),
        ValueKind::Custom => Value::Custom(fixed(binary())?),
        // The array's shape.
        ValueKind::NDArray => Value::NDArray(match kind.element() {
            Some((dtype, shape)) => {
                sized(binary(), shape.iter().fold(dtype.itemsize() as u64, |n, &d| n.saturating_mul(d)))?
            }
            None => binary(),
        }),
        // Whole elements.
        ValueKind::Array => {
            let bytes = binary();
            if let Some((dtype, _)) = kind.element() {
                if bytes.len() % dtype.itemsize() != 0 {
                    return Err(bad(format!(
                        "row {row} holds {} bytes, not whole {} elements",
                        bytes.len(),
                        dtype.name()
                    )));
                }
            }
            Value::Array(bytes)
        }
        ValueKind::Image => {
            let s = array.as_struct();
            let byte = s.column(0).as_primitive::<UInt8Type>().value(row);
            let mode =
                ImageMode::from_byte(byte).ok_or_else(|| bad(format!("row {row}: image mode {byte}")))?;
            let width = s.column(1).as_primitive::<UInt16Type>().value(row);
            let height = s.column(2).as_primitive::<UInt16Type>().value(row);
            let data = s.column(3).as_binary::<i64>().value(row);
            let channels = if *ty == FieldType::GreyImage { Channels::Grey } else { Channels::Rgb };
            let raw = usize::from(width) * usize::from(height) * channels as usize;
            if mode == ImageMode::Raw && data.len() != raw {
                return Err(bad(format!(
                    "row {row}: a raw {width}x{height} image has {raw} bytes, not {}",
                    data.len()
                )));
            }
            Value::Image(ImageRef { mode, width, height, channels, data })
        }
    }))
}

/// Builds a column-file array of one field type, value by value.
#[derive(Debug)]
pub struct ValuesBuilder {
    ty: FieldType,
    inner: Builder,
}

#[derive(Debug)]
enum Builder {
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    Text(StringBuilder),
    Json(LargeStringBuilder),
    Binary(LargeBinaryBuilder),
    Image(Box<ImageBuilders>),
}

#[derive(Debug)]
struct ImageBuilders {
    mode: UInt8Builder,
    width: UInt16Builder,
    height: UInt16Builder,
    data: LargeBinaryBuilder,
    /// Validity of each image (false: NULL); empty while every image is valid.
    valid: Vec<bool>,
}

impl ValuesBuilder {
    /// An empty column of field type `ty`.
    pub fn new(ty: &FieldType) -> ValuesBuilder {
        let inner = match column_file_type(ty) {
            DataType::Int64 => Builder::Int(Int64Builder::new()),
            DataType::Float64 => Builder::Float(Float64Builder::new()),
            DataType::Boolean => Builder::Bool(BooleanBuilder::new()),
            DataType::Utf8 => Builder::Text(StringBuilder::new()),
            DataType::LargeUtf8 => Builder::Json(LargeStringBuilder::new()),
            DataType::Struct(_) => Builder::Image(Box::new(ImageBuilders {
                mode: UInt8Builder::new(),
                width: UInt16Builder::new(),
                height: UInt16Builder::new(),
                data: LargeBinaryBuilder::new(),
                valid: Vec::new(),
            })),
            _ => Builder::Binary(LargeBinaryBuilder::new()),
        };
        ValuesBuilder { ty: ty.clone(), inner }
    }

    /// Appends one value (as a reader gives it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a value of another field type.
    pub fn push(&mut self, value: &Value<'_>) -> Result<()> {
        match (&mut self.inner, value) {
            (Builder::Int(b), Value::Int(v)) => b.append_value(*v),
            (Builder::Float(b), Value::Float(v)) => b.append_value(*v),
            (Builder::Bool(b), Value::Bool(v)) => b.append_value(*v),
            (Builder::Text(b), Value::Text(v)) => b.append_value(v),
            (Builder::Json(b), Value::Json(v)) => b.append_value(v),
            (
                Builder::Binary(b),
                Value::Bytes(v) | Value::NDArray(v) | Value::Array(v) | Value::Custom(v),
            ) => b.append_value(v),
            (Builder::Image(b), Value::Image(img)) => {
                b.mode.append_value(img.mode as u8);
                b.width.append_value(img.width);
                b.height.append_value(img.height);
                b.data.append_value(img.data);
                if !b.valid.is_empty() {
                    b.valid.push(true);
                }
            }
            (_, v) => {
                return Err(Error::InvalidArgument {
                    what: "value".into(),
                    why: format!("{v:?} is not a {} value", self.ty.name()),
                })
            }
        }
        Ok(())
    }

    /// Appends a NULL (a row with no value: SQL's NULL).
    pub fn push_null(&mut self) {
        match &mut self.inner {
            Builder::Int(b) => b.append_null(),
            Builder::Float(b) => b.append_null(),
            Builder::Bool(b) => b.append_null(),
            Builder::Text(b) => b.append_null(),
            Builder::Json(b) => b.append_null(),
            Builder::Binary(b) => b.append_null(),
            Builder::Image(b) => {
                if b.valid.is_empty() {
                    b.valid = vec![true; arrow_array::builder::ArrayBuilder::len(&b.mode)];
                }
                b.valid.push(false);
                // The children hold an empty image under the struct's null.
                b.mode.append_value(ImageMode::Raw as u8);
                b.width.append_value(0);
                b.height.append_value(0);
                b.data.append_value([]);
            }
        }
    }

    /// Encodes `value` as a data file would store it (images per `image`) and appends it.
    ///
    /// # Errors
    /// As [`FieldType::encode_value`].
    pub fn encode(&mut self, value: SampleValue, image: &ImageOptions, draw: f64) -> Result<()> {
        let ty = self.ty.clone();
        ty.encode_value(value, image, draw, |v| self.push(&v))?
    }

    /// The column.
    pub fn finish(self) -> ArrayRef {
        match self.inner {
            Builder::Int(mut b) => Arc::new(b.finish()),
            Builder::Float(mut b) => Arc::new(b.finish()),
            Builder::Bool(mut b) => Arc::new(b.finish()),
            Builder::Text(mut b) => Arc::new(b.finish()),
            Builder::Json(mut b) => Arc::new(b.finish()),
            Builder::Binary(mut b) => Arc::new(b.finish()),
            Builder::Image(mut b) => {
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(b.mode.finish()),
                    Arc::new(b.width.finish()),
                    Arc::new(b.height.finish()),
                    Arc::new(b.data.finish()),
                ];
                let nulls = (!b.valid.is_empty())
                    .then(|| arrow_buffer::NullBuffer::from(std::mem::take(&mut b.valid)));
                Arc::new(StructArray::new(image_fields(), columns, nulls))
            }
        }
    }
}

/// The table column `source` of field type `ty` derived from its column-file array (nulls where
/// the array has them).
///
/// # Errors
/// [`Error::InvalidArgument`] for an array of another type or a source the type has not.
pub fn table_column(array: &ArrayRef, ty: &FieldType, source: ColumnSource) -> Result<ArrayRef> {
    let want = column_file_type(ty);
    if *array.data_type() != want {
        return Err(bad(format!("holds {} values for a {} field, not {want}", array.data_type(), ty.name())));
    }
    let nulls = array.logical_nulls();
    let valid = |i: usize| nulls.as_ref().is_none_or(|n| n.is_valid(i));
    let kind = ty.kind();
    let lengths = |i: usize| -> u64 {
        match kind.value_kind() {
            ValueKind::Json => array.as_string::<i64>().value_length(i) as u64,
            ValueKind::Image => array.as_struct().column(3).as_binary::<i64>().value_length(i) as u64,
            _ => array.as_binary::<i64>().value_length(i) as u64,
        }
    };
    let sizes = |f: &dyn Fn(u64) -> u64| -> ArrayRef {
        Arc::new(UInt64Array::from_iter((0..array.len()).map(|i| valid(i).then(|| f(lengths(i))))))
    };
    let binary = matches!(
        kind.value_kind(),
        ValueKind::Bytes | ValueKind::NDArray | ValueKind::Array | ValueKind::Custom
    );
    Ok(match (source, kind.value_kind()) {
        (ColumnSource::Int | ColumnSource::Float | ColumnSource::Bool | ColumnSource::Text, _) => {
            array.clone()
        }
        (ColumnSource::ImageMode, ValueKind::Image) => {
            let modes = array.as_struct().column(0).as_primitive::<UInt8Type>();
            Arc::new(StringArray::from_iter((0..array.len()).map(|i| {
                valid(i).then(|| ImageMode::from_byte(modes.value(i)).map_or("?", ImageMode::name))
            })))
        }
        (ColumnSource::ImageWidth | ColumnSource::ImageHeight, ValueKind::Image) => {
            let k = if source == ColumnSource::ImageWidth { 1 } else { 2 };
            let dims = array.as_struct().column(k).as_primitive::<UInt16Type>();
            Arc::new(arrow_array::UInt16Array::from_iter(
                (0..array.len()).map(|i| valid(i).then(|| dims.value(i))),
            ))
        }
        (ColumnSource::ImageNbytes, _) => sizes(&|n| n),
        // JSON's size word counts its stored NUL; an array's counts elements.
        (ColumnSource::SizeWord, ValueKind::Json) => sizes(&|n| n + 1),
        (ColumnSource::SizeWord, ValueKind::Array) => {
            let itemsize = kind.element().map_or(1, |(dtype, _)| dtype.itemsize()) as u64;
            sizes(&|n| n / itemsize)
        }
        (ColumnSource::SizeWord, _) => sizes(&|n| n),
        (ColumnSource::Constant(c), _) => sizes(&|_| c),
        (ColumnSource::Raw(size), _) if binary => {
            let b = array.as_binary::<i64>();
            let values = (0..array.len())
                .map(|i| (valid(i) && b.value_length(i) as usize == size).then(|| b.value(i)));
            Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(values, size as i32)?)
        }
        (ColumnSource::Vector(element, dim), ValueKind::NDArray) => {
            // Each value's bytes, copied once into an aligned buffer (zeros under a NULL).
            let b = array.as_binary::<i64>();
            let width = element.size() * dim as usize;
            let mut bytes = arrow_buffer::MutableBuffer::with_capacity(width * array.len());
            for i in 0..array.len() {
                match valid(i) {
                    true if b.value_length(i) as usize == width => bytes.extend_from_slice(b.value(i)),
                    true => {
                        return Err(bad(format!(
                            "value {i} has {} bytes, a vector of {dim} {element:?} has {width}",
                            b.value_length(i)
                        )))
                    }
                    false => bytes.extend_zeros(width),
                }
            }
            let list = crate::gather::vectors(bytes.into(), element, dim)?;
            let list = list.as_fixed_size_list();
            let (field, size, values, _) = list.clone().into_parts();
            Arc::new(arrow_array::FixedSizeListArray::try_new(field, size, values, nulls.clone())?)
        }
        (source, _) => return Err(bad(format!("a {} field has no {source:?} column", ty.name()))),
    })
}

#[cfg(test)]
mod tests {
    use beton_storage::DType;

    use super::*;

    /// Every field type's value survives encode → column → cell, and its table columns have the
    /// types the data table gives them.
    #[test]
    fn every_type_round_trips() {
        let jpeg =
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/edge-jpegs/baseline-411.jpg"))
                .ok();
        let spec = beton_storage::ArraySpec { dtype: DType::parse("<f4").unwrap(), shape: vec![2, 2] };
        let mut cases: Vec<(FieldType, SampleValue)> = vec![
            (FieldType::Int, SampleValue::Int(-7)),
            (FieldType::Float, SampleValue::Float(2.5)),
            (FieldType::Bool, SampleValue::Bool(true)),
            (FieldType::Text, SampleValue::Text("ok".into())),
            (FieldType::Json, SampleValue::Json("{\"a\": [1, 2]}".into())),
            (FieldType::Bytes, SampleValue::Bytes(vec![0, 1, 2])),
            (FieldType::NDArray(spec.clone()), SampleValue::Bytes(vec![7; 16])),
            (FieldType::Array(DType::parse("<i2").unwrap()), SampleValue::Bytes(vec![1, 0, 2, 0])),
            (
                FieldType::RgbImage,
                SampleValue::Image(beton_storage::ImageSource::Pixels(beton_storage::Pixels {
                    width: 3,
                    height: 2,
                    channels: 3,
                    data: (0..18).collect(),
                })),
            ),
        ];
        if let Some(jpeg) = jpeg {
            cases.push((FieldType::RgbImage, SampleValue::Image(beton_storage::ImageSource::Encoded(jpeg))));
        }
        let options = ImageOptions::with_mode(beton_storage::WriteMode::Raw);
        for (ty, value) in cases {
            let expected = ty.encode_value(value.clone(), &options, 0.0, |v| format!("{v:?}")).unwrap();
            let mut b = ValuesBuilder::new(&ty);
            b.encode(value, &options, 0.0).unwrap();
            let array = b.finish();
            assert_eq!(*array.data_type(), column_file_type(&ty));
            let got = cell(&array, &ty, 0).unwrap().map(|v| format!("{v:?}"));
            assert_eq!(got.as_deref(), Some(expected.as_str()), "{ty:?}");
            for def in ty.kind().columns() {
                let column = table_column(&array, &ty, def.source).unwrap();
                assert_eq!(*column.data_type(), def.source.data_type(), "{ty:?} {def:?}");
                assert_eq!(column.len(), 1);
            }
            // A null cell is the data file's value.
            let nulls = arrow_array::new_null_array(array.data_type(), 2);
            assert!(cell(&nulls, &ty, 1).unwrap().is_none());
            // A cell of another type is an error, not a panic.
            if ty != FieldType::Int {
                let ints: ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1]));
                assert!(cell(&ints, &ty, 0).is_err());
            }
        }
    }

    #[test]
    fn wrong_sizes_are_errors() {
        let spec = beton_storage::ArraySpec { dtype: DType::parse("<f4").unwrap(), shape: vec![2] };
        let array: ArrayRef = Arc::new(arrow_array::LargeBinaryArray::from(vec![&[1u8, 2, 3][..]]));
        assert!(cell(&array, &FieldType::NDArray(spec), 0).is_err());
        assert!(cell(&array, &FieldType::Array(DType::parse("<i2").unwrap()), 0).is_err());
        assert!(cell(&array, &FieldType::Bytes, 5).is_err());
    }
}
