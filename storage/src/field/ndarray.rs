//! NDArrayField and TorchTensorField (FFCV types 4 and 6): the field kinds, a `<u8` pointer in
//! the row and the array's bytes as payload. Their dtype, shape and argument blob are
//! [`ArraySpec`]'s (`dtype.rs`).

use ref_cast::RefCast;

pub use super::dtype::{ArraySpec, DType, MAX_DIMS};
use super::kind::{invalid_value, mismatch, word, ColumnDef, ColumnSource, DecodeContext, Described};
use super::kind::{EncodeContext, FieldKind, Input, LoadAs, SCALAR_SLOT, TYPE_NDARRAY, TYPE_TORCH_TENSOR};
use crate::error::Result;
use crate::format::{Slot, ARGS_SIZE};
use crate::value::{SampleValue, Value, ValueKind};

/// NDArrayField: the kind of `FieldType::NDArray(spec)`.
#[derive(Debug, RefCast)]
#[repr(transparent)]
pub(super) struct NDArray(ArraySpec);

/// TorchTensorField: the kind of `FieldType::TorchTensor(spec)` (NDArray's layout, type id 6).
#[derive(Debug, RefCast)]
#[repr(transparent)]
pub(super) struct TorchTensor(ArraySpec);

impl NDArray {
    pub(super) fn of(spec: &ArraySpec) -> &NDArray {
        NDArray::ref_cast(spec)
    }
}

impl TorchTensor {
    pub(super) fn of(spec: &ArraySpec) -> &TorchTensor {
        TorchTensor::ref_cast(spec)
    }
}

/// Parses the descriptor of type `id`, or the short name `name` with its dtype and shape.
fn parse(d: &Described<'_>, id: u8, name: &str) -> Option<std::result::Result<ArraySpec, String>> {
    if !d.is(id, name) {
        return None;
    }
    Some(match d {
        Described::Descriptor { args, .. } => ArraySpec::from_arguments(args),
        Described::Name { dtype, shape, .. } => match (dtype, shape) {
            (Some(dtype), Some(shape)) => DType::parse(dtype).and_then(|d| ArraySpec::new(d, shape.to_vec())),
            _ => Err(format!("a {name} field needs a dtype and a shape")),
        },
    })
}

pub(super) fn parse_ndarray(d: &Described<'_>) -> Option<std::result::Result<ArraySpec, String>> {
    parse(d, TYPE_NDARRAY, "ndarray")
}

pub(super) fn parse_torch_tensor(d: &Described<'_>) -> Option<std::result::Result<ArraySpec, String>> {
    parse(d, TYPE_TORCH_TENSOR, "torch_tensor")
}

fn encode(kind: &dyn FieldKind, spec: &ArraySpec, value: SampleValue) -> Result<Option<Vec<u8>>> {
    let b = match value {
        SampleValue::NDArray(b) | SampleValue::Bytes(b) => b,
        v => return Err(mismatch(kind, &v)),
    };
    if b.len() as u64 != spec.nbytes() {
        return Err(invalid_value(format!(
            "array of {} bytes, but shape {:?} of {} needs {}",
            b.len(),
            spec.shape,
            spec.dtype.name(),
            spec.nbytes()
        )));
    }
    Ok(Some(b))
}

fn decode<'a>(spec: &ArraySpec, slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
    let data = cx.payload(word(slot, 0), None)?;
    if data.len() as u64 != spec.nbytes() {
        return Err(cx.corrupt(format!(
            "array of shape {:?} and dtype {} needs {} bytes, its allocation has {}",
            spec.shape,
            spec.dtype.name(),
            spec.nbytes(),
            data.len()
        )));
    }
    Ok(Value::NDArray(data))
}

fn describe(spec: &ArraySpec) -> String {
    format!("dtype {} shape {:?}", spec.dtype.name(), spec.shape)
}

/// The methods NDArray and TorchTensor share.
macro_rules! array_kind {
    ($kind:ty, $name:literal, $short:literal, $id:expr) => {
        impl FieldKind for $kind {
            fn name(&self) -> &'static str {
                $name
            }

            fn short_name(&self) -> &'static str {
                $short
            }

            fn type_id(&self) -> u8 {
                $id
            }

            fn slot(&self) -> Slot {
                SCALAR_SLOT
            }

            fn payload_ptr_offset(&self) -> Option<usize> {
                Some(0)
            }

            fn to_arguments(&self) -> Box<[u8; ARGS_SIZE]> {
                self.0.to_arguments()
            }

            fn element(&self) -> Option<(&DType, &[u64])> {
                Some((&self.0.dtype, &self.0.shape))
            }

            fn input(&self) -> Input {
                Input::Bytes
            }

            fn value_kind(&self) -> ValueKind {
                ValueKind::NDArray
            }

            fn zero(&self) -> (SampleValue, &'static str) {
                (SampleValue::NDArray(vec![0; self.0.nbytes() as usize]), "zeros")
            }

            fn encode(
                &self,
                value: SampleValue,
                _: &mut [u8],
                _: &EncodeContext<'_>,
            ) -> Result<Option<Vec<u8>>> {
                encode(self, &self.0, value)
            }

            fn decode<'a>(&self, slot: &'a [u8], cx: &DecodeContext<'a, '_>) -> Result<Value<'a>> {
                decode(&self.0, slot, cx)
            }

            fn columns(&self) -> Vec<ColumnDef> {
                // A 1-D numeric array is a vector; others are their byte size.
                match self.0.vector() {
                    Some((element, dim)) => vec![ColumnDef::plain(ColumnSource::Vector(element, dim))],
                    None => vec![ColumnDef::plain(ColumnSource::Constant(self.0.nbytes()))],
                }
            }

            fn load_as(&self) -> LoadAs {
                LoadAs::Array(self.0.clone())
            }

            fn describe(&self) -> Option<String> {
                Some(describe(&self.0))
            }
        }
    };
}

array_kind!(NDArray, "NDArrayField", "ndarray", TYPE_NDARRAY);
array_kind!(TorchTensor, "TorchTensorField", "torch_tensor", TYPE_TORCH_TENSOR);
