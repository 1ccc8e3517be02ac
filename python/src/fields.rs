//! Field types as Python classes: one native class per field type (FFCV's `IntField`, ...,
//! `RGBImageField`, and beton's `BoolField`, `TextField`, `ArrayField`, `GreyImageField`), each
//! holding the storage `FieldType` and image options it stands for, checked when Python makes
//! it. The writers and `add_column` take these objects; the Python classes in `beton.fields`
//! hold one each.

use std::path::PathBuf;

use beton_storage::field::Input;
use beton_storage::{FieldSpec, FieldType, ImageOptions, ImageSource, Pixels, SampleValue, WriteMode};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use crate::errors::from_storage;

/// Base of the field classes.
#[pyclass(module = "beton._native", subclass, frozen)]
pub struct Field {
    ty: FieldType,
    image: ImageOptions,
}

impl Field {
    /// The writer's spec of a field named `name` of this type.
    pub(crate) fn spec(&self, name: String) -> FieldSpec {
        FieldSpec { name, ty: self.ty.clone(), image: self.image.clone() }
    }

    fn of(ty: &str, dtype: Option<&str>, shape: Option<&[u64]>) -> PyResult<Field> {
        let ty = FieldType::from_short_name(ty, dtype, shape).map_err(from_storage)?;
        Ok(Field { ty, image: ImageOptions::default() })
    }
}

#[pymethods]
impl Field {
    /// The field type's short name (`int`, `rgb_image`, ...), as `beton info` shows it.
    #[getter]
    fn type_name(&self) -> &'static str {
        self.ty.short_name()
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let me = slf.get();
        Ok(format!("{}({:?})", slf.get_type().name()?, me.ty))
    }

    /// FFCV's type id of the field's descriptor (255 for beton's extensions and custom fields).
    #[getter]
    fn type_id(&self) -> u8 {
        self.ty.type_id()
    }

    /// The descriptor's 1024-byte argument blob (FFCV's `to_binary`).
    fn arguments<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.ty.to_arguments()[..])
    }

    /// The field's slot in a data-table row: `(size, alignment)` in bytes.
    fn slot(&self) -> (usize, usize) {
        let slot = self.ty.slot();
        (slot.size, slot.align)
    }

    /// `value` (as the Python field class converts it for the writer) encoded as a data file
    /// stores it: `(slot bytes, (pointer offset in the slot, payload) or None)`, the pointer
    /// left 0 (FFCV's `Field.encode`, whose `malloc` gives it). `draw` in [0, 1) picks JPEG for
    /// `write_mode='proportion'` when below `compress_probability`.
    #[pyo3(signature = (value, draw = 0.0))]
    #[allow(clippy::type_complexity)]
    fn encode_one<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
        draw: f64,
    ) -> PyResult<(Bound<'py, PyBytes>, Option<(usize, Bound<'py, PyBytes>)>)> {
        use beton_storage::field::EncodeContext;

        let value = sample_value(&self.ty, value)?;
        let mut slot = vec![0u8; self.ty.slot().size];
        let cx = EncodeContext { image: &self.image, draw, alpha_flattened: None };
        let payload = self.ty.kind().encode(value, &mut slot, &cx).map_err(from_storage)?;
        let payload = match (payload, self.ty.payload_ptr_offset()) {
            (Some(p), Some(at)) => Some((at, PyBytes::new(py, &p))),
            _ => None,
        };
        Ok((PyBytes::new(py, &slot), payload))
    }
}

/// An array field's element: numpy's typestr and the shape.
type Element = (String, Vec<u64>);

/// A field type read from a descriptor (FFCV's `from_binary`): `(short name, (dtype, shape)
/// or None)`, for a beton or FFCV type; an error for a custom type beton does not know.
#[pyfunction]
pub(crate) fn field_of_descriptor(type_id: u8, arguments: &[u8]) -> PyResult<(String, Option<Element>)> {
    let args: &[u8; beton_storage::format::ARGS_SIZE] = arguments.try_into().map_err(|_| {
        PyValueError::new_err(format!(
            "a field's arguments are {} bytes, not {}",
            beton_storage::format::ARGS_SIZE,
            arguments.len()
        ))
    })?;
    let ty = FieldType::from_descriptor(type_id, args, None).map_err(|why| {
        PyValueError::new_err(why.unwrap_or_else(|| {
            format!("type id {type_id}: a custom field type beton does not know (its Field class reads it)")
        }))
    })?;
    let kind = ty.kind();
    let details = kind.element().map(|(dtype, shape)| (dtype.typestr().to_string(), shape.to_vec()));
    Ok((kind.short_name().to_string(), details))
}

/// A `Field` subclass `$name`: its Python constructor takes `new`'s arguments (with `new`'s
/// attributes: docs, a `#[pyo3(signature)]`) and `$body` makes the [`Field`] it stands for.
macro_rules! field_class {
    ($name:ident, $doc:literal, $(#[$attr:meta])* fn new($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        #[doc = $doc]
        #[pyclass(module = "beton._native", extends = Field, frozen)]
        pub struct $name;

        #[pymethods]
        impl $name {
            #[new]
            $(#[$attr])*
            fn new($($arg: $ty),*) -> PyResult<PyClassInitializer<Self>> {
                let field: PyResult<Field> = $body;
                Ok(PyClassInitializer::from(field?).add_subclass($name))
            }
        }
    };
}

/// A field type that takes no arguments.
macro_rules! simple_field {
    ($name:ident, $short:literal, $doc:literal) => {
        field_class!(
            $name,
            $doc,
            fn new() {
                Field::of($short, None, None)
            }
        );
    };
}

simple_field!(IntField, "int", "FFCV's `IntField`: an int64 per sample.");
simple_field!(FloatField, "float", "FFCV's `FloatField`: a float64 per sample.");
simple_field!(BoolField, "bool", "beton's `BoolField`: a bool per sample.");
simple_field!(TextField, "text", "beton's `TextField`: UTF-8 text per sample, queryable in SQL.");
simple_field!(BytesField, "bytes", "FFCV's `BytesField`: variable-length bytes per sample.");
simple_field!(JSONField, "json", "FFCV's `JSONField`: a JSON document per sample.");

/// A fixed-shape array field type: `dtype` and `shape`.
macro_rules! array_field {
    ($name:ident, $short:literal, $doc:literal) => {
        field_class!(
            $name,
            $doc,
            /// `dtype` as numpy writes it (`'<f4'`, `'|u1'`), `shape` a list of sizes.
            fn new(dtype: &str, shape: Vec<i64>) {
                let sizes =
                    shape.iter().map(|&n| u64::try_from(n)).collect::<Result<Vec<u64>, _>>().map_err(
                        |_| {
                            PyValueError::new_err(format!(
                                "{}: shape {shape:?}: every size is 0 or more",
                                stringify!($name)
                            ))
                        },
                    )?;
                Field::of($short, Some(dtype), Some(&sizes))
            }
        );
    };
}

array_field!(
    NDArrayField,
    "ndarray",
    "FFCV's `NDArrayField`: an array of a fixed dtype and shape per sample."
);
array_field!(
    TorchTensorField,
    "torch_tensor",
    "FFCV's `TorchTensorField`: as `NDArrayField`, read as a tensor."
);

field_class!(
    ArrayField,
    "beton's `ArrayField`: a variable-length 1-D array of a fixed dtype per sample.",
    fn new(dtype: &str) {
        Field::of("array", Some(dtype), None)
    }
);

/// An image field type: FFCV's `RGBImageField` arguments (and beton's two), checked.
macro_rules! image_field {
    ($name:ident, $short:literal, $doc:literal) => {
        field_class!($name, $doc,
            #[pyo3(signature = (write_mode = "raw", max_resolution = None, smart_threshold = None, jpeg_quality = 90,
                                compress_probability = 0.5, jpeg_passthrough = true, jpeg_restart_interval = 1,
                                verify = true))]
            #[allow(clippy::too_many_arguments)]
            fn new(
                write_mode: &str,
                max_resolution: Option<i64>,
                smart_threshold: Option<i64>,
                jpeg_quality: i64,
                compress_probability: f64,
                jpeg_passthrough: bool,
                jpeg_restart_interval: i64,
                verify: bool,
            ) {
                let mut field = Field::of($short, None, None)?;
                let bad = |what: String| PyValueError::new_err(format!("{}: {what}", stringify!($name)));
                let write_mode = match write_mode {
                    "raw" => WriteMode::Raw,
                    "jpg" => WriteMode::Jpg,
                    "smart" => WriteMode::Smart {
                        threshold: match smart_threshold {
                            None => 1 << 20,
                            Some(t) => u64::try_from(t)
                                .map_err(|_| bad(format!("smart_threshold {t}: 0 or more")))?,
                        },
                    },
                    "proportion" => {
                        if !(0.0..=1.0).contains(&compress_probability) {
                            return Err(bad(format!(
                                "compress_probability {compress_probability}: a probability in [0, 1]"
                            )));
                        }
                        WriteMode::Proportion { probability: compress_probability }
                    }
                    other => {
                        return Err(bad(format!(
                            "write_mode '{other}': one of 'raw', 'jpg', 'smart', 'proportion'"
                        )));
                    }
                };
                let max_resolution = max_resolution
                    .map(|r| {
                        u32::try_from(r)
                            .ok()
                            .filter(|&r| r > 0)
                            .ok_or_else(|| bad(format!("max_resolution {r}: 1 or more")))
                    })
                    .transpose()?;
                let jpeg_quality = u8::try_from(jpeg_quality)
                    .ok()
                    .filter(|q| (1..=100).contains(q))
                    .ok_or_else(|| bad(format!("jpeg_quality {jpeg_quality}: 1 to 100")))?;
                let jpeg_restart_interval = u16::try_from(jpeg_restart_interval).map_err(|_| {
                    bad(format!("jpeg_restart_interval {jpeg_restart_interval}: 0 to 65535 MCUs"))
                })?;
                field.image = ImageOptions {
                    write_mode,
                    max_resolution,
                    jpeg_quality,
                    jpeg_passthrough,
                    jpeg_restart_interval,
                    verify,
                    // Set for every image field by the writer (`DatasetWriter(alpha_background=)`).
                    alpha_background: None,
                };
                Ok(field)
            }
        );
    };
}

image_field!(RGBImageField, "rgb_image", "FFCV's `RGBImageField`: an RGB image per sample, raw or JPEG.");
image_field!(GreyImageField, "grey_image", "beton's `GreyImageField`: a greyscale image per sample.");

field_class!(
    CustomField,
    "A custom field type (FFCV's type id 255): a user's `Field` class, whose `encode` writes its \
     `metadata_type` row slot (`size` bytes aligned to `align`) and may `malloc` payloads; \
     `arguments` is its `to_binary()` blob (1024 bytes).",
    fn new(size: usize, align: usize, arguments: &[u8]) {
        let bad = |why: String| PyValueError::new_err(format!("CustomField: {why}"));
        if size == 0 || !align.is_power_of_two() || align > 8 {
            return Err(bad(format!(
                "a {size}-byte slot aligned to {align}: the slot is 1 byte or more, aligned to 1, 2, 4 or 8"
            )));
        }
        let args: [u8; beton_storage::format::ARGS_SIZE] = arguments.try_into().map_err(|_| {
            bad(format!(
                "to_binary() gave {} bytes, not {}",
                arguments.len(),
                beton_storage::format::ARGS_SIZE
            ))
        })?;
        let ty = FieldType::Custom(beton_storage::CustomField {
            slot: beton_storage::format::Slot { size, align },
            arguments: Box::new(args),
        });
        // A blob that reads as one of beton's own types would be taken for that type on read.
        if FieldType::from_descriptor(ty.type_id(), &args, None).is_ok() {
            return Err(bad("to_binary() gives the blob of one of beton's own field types".into()));
        }
        Ok(Field { ty, image: ImageOptions::default() })
    }
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_classes!(m; Field, IntField, FloatField, BoolField, TextField, BytesField, JSONField, NDArrayField,
                    TorchTensorField, ArrayField, RGBImageField, GreyImageField, CustomField);
    m.add_function(wrap_pyfunction!(field_of_descriptor, m)?)?;
    Ok(())
}

/// A Python value as the field's sample value.
pub(crate) fn sample_value(ty: &FieldType, v: &Bound<'_, PyAny>) -> PyResult<SampleValue> {
    if let (FieldType::Custom(_), Ok(t)) = (ty, v.cast::<PyTuple>()) {
        // A custom field's FFCV `encode`: (slot bytes, [(pointer offset in the slot, payload)]).
        let (slot, payloads): (Vec<u8>, Vec<(usize, Vec<u8>)>) = t.extract()?;
        return Ok(SampleValue::CustomWithPayloads { slot, payloads });
    }
    Ok(match ty.kind().input() {
        Input::Int => SampleValue::Int(v.extract()?),
        Input::Float => SampleValue::Float(v.extract()?),
        Input::Bool => SampleValue::Bool(v.extract()?),
        Input::Str => SampleValue::Text(v.extract()?),
        Input::Bytes => SampleValue::Bytes(v.extract()?),
        Input::Image => {
            let source = if let Ok(b) = v.cast::<PyBytes>() {
                ImageSource::Encoded(b.as_bytes().to_vec())
            } else if v.is_instance_of::<PyString>() {
                ImageSource::File(PathBuf::from(v.extract::<String>()?))
            } else if let Ok(t) = v.cast::<PyTuple>() {
                // (pixels bytes, height, width, channels), C order HWC u8.
                let (data, height, width, channels): (Vec<u8>, u32, u32, u8) = t.extract()?;
                ImageSource::Pixels(Pixels { width, height, channels, data })
            } else {
                return Err(PyValueError::new_err(
                    "an image is file bytes, a path, or (pixels, height, width, channels)",
                ));
            };
            SampleValue::Image(source)
        }
    })
}
