//! The loader's decoders, image operations and image pipelines as Python classes: one class per
//! decoder and per operation, each holding its native value, built and checked when Python
//! constructs it. The Python layer (`beton.fields.decoders`, `beton.transforms`) holds one of
//! these per FFCV object and hands them to `Loader`; nothing crosses as a tuple or a kind name.
//!
//! Adding an image operation: a struct implementing `beton_loader::image::ImageOp` (one file in
//! `loader/src/image/ops/` and its line in `operations!` there), one `image_op!` line below, its
//! name in `register`'s `add_classes!` list, its stub in `beton/_native.pyi`, and its FFCV-named
//! Python class.

use std::sync::Arc;

use beton_loader::image::{
    Cutout as CutoutOp, FloatType, ImageOp as NativeImageOp, ImagePipeline as NativePipeline, Interpolation,
    Layout, NormalizeImage as NativeNormalize, RandomBrightness as BrightnessOp,
    RandomContrast as ContrastOp, RandomHorizontalFlip as HFlipOp, RandomSaturation as SaturationOp,
    RandomTranslate as TranslateOp, RandomVerticalFlip as VFlipOp,
};
use beton_loader::{
    BoolDecoder as NativeBool, BytesDecoder as NativeBytes, CenterCropRGBImageDecoder as NativeCenterCrop,
    FieldDecoder, FloatDecoder as NativeFloat, IntDecoder as NativeInt, NDArrayDecoder as NativeNDArray,
    RandomResizedCropRGBImageDecoder as NativeRrc, SimpleRGBImageDecoder as NativeSimple,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

fn invalid(class: &str, what: String) -> PyErr {
    PyValueError::new_err(format!("{class}: {what}"))
}

fn probability(class: &str, name: &str, p: f64) -> PyResult<f64> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(invalid(class, format!("{name} is {p}: a probability is in [0, 1]")))
    }
}

fn size(class: &str, (h, w): (i64, i64)) -> PyResult<(usize, usize)> {
    if h > 0 && w > 0 && h <= 1 << 16 && w <= 1 << 16 {
        Ok((h as usize, w as usize))
    } else {
        Err(invalid(class, format!("output_size ({h}, {w}): height and width are in 1..=65536")))
    }
}

fn range(class: &str, name: &str, (lo, hi): (f64, f64)) -> PyResult<(f64, f64)> {
    if lo > 0.0 && lo <= hi && hi.is_finite() {
        Ok((lo, hi))
    } else {
        Err(invalid(class, format!("{name} ({lo}, {hi}): expected 0 < low <= high")))
    }
}

fn interpolation(class: &str, name: &str) -> PyResult<Interpolation> {
    Interpolation::parse(name).map_err(|e| invalid(class, e.to_string()))
}

/// The native decoder a decoder class stands for.
#[derive(Debug, Clone)]
enum DecoderKind {
    Int,
    Float,
    NDArray,
    Bytes,
    Bool,
    Simple,
    RandomResizedCrop(NativeRrc),
    CenterCrop(NativeCenterCrop),
}

/// Base of the decoder classes: FFCV's decoders, which a pipeline starts with.
#[pyclass(module = "beton._native", subclass, frozen)]
pub struct Decoder {
    kind: DecoderKind,
}

impl Decoder {
    /// The field decoder for a pipeline of only this decoder.
    pub(crate) fn field_decoder(&self) -> Arc<dyn FieldDecoder> {
        match &self.kind {
            DecoderKind::Int => Arc::new(NativeInt),
            DecoderKind::Float => Arc::new(NativeFloat),
            DecoderKind::NDArray => Arc::new(NativeNDArray),
            DecoderKind::Bytes => Arc::new(NativeBytes),
            DecoderKind::Bool => Arc::new(NativeBool),
            _ => Arc::new(self.pipeline()),
        }
    }

    fn is_image(&self) -> bool {
        matches!(
            self.kind,
            DecoderKind::Simple | DecoderKind::RandomResizedCrop(_) | DecoderKind::CenterCrop(_)
        )
    }

    fn pipeline(&self) -> NativePipeline {
        match &self.kind {
            DecoderKind::RandomResizedCrop(d) => NativePipeline::new(d.clone()),
            DecoderKind::CenterCrop(d) => NativePipeline::new(d.clone()),
            _ => NativePipeline::new(NativeSimple),
        }
    }
}

#[pymethods]
impl Decoder {
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!("{}()", slf.get_type().name()?))
    }
}

macro_rules! plain_decoder {
    ($name:ident, $kind:expr, $doc:literal) => {
        #[doc = $doc]
        #[pyclass(module = "beton._native", extends = Decoder, frozen)]
        pub struct $name;

        #[pymethods]
        impl $name {
            #[new]
            fn new() -> PyClassInitializer<Self> {
                PyClassInitializer::from(Decoder { kind: $kind }).add_subclass($name)
            }
        }
    };
}

plain_decoder!(IntDecoder, DecoderKind::Int, "FFCV's `IntDecoder`: an int64 per sample.");
plain_decoder!(FloatDecoder, DecoderKind::Float, "FFCV's `FloatDecoder`: a float64 per sample.");
plain_decoder!(NDArrayDecoder, DecoderKind::NDArray, "FFCV's `NDArrayDecoder`: the field's dtype and shape.");
plain_decoder!(BytesDecoder, DecoderKind::Bytes, "FFCV's `BytesDecoder`: bytes padded to the longest.");
plain_decoder!(BoolDecoder, DecoderKind::Bool, "beton's `BoolDecoder`: a bool per sample (`BoolField`).");
plain_decoder!(
    SimpleRGBImageDecoder,
    DecoderKind::Simple,
    "FFCV's `SimpleRGBImageDecoder`: every image whole at its stored size."
);

/// FFCV's `RandomResizedCropRGBImageDecoder`: decodes only the crop, DCT-scaled.
#[pyclass(module = "beton._native", extends = Decoder, frozen)]
pub struct RandomResizedCropRGBImageDecoder;

#[pymethods]
impl RandomResizedCropRGBImageDecoder {
    #[new]
    #[pyo3(signature = (output_size, scale = (0.08, 1.0), ratio = (3.0 / 4.0, 4.0 / 3.0), interpolation = "bicubic"))]
    fn new(
        output_size: (i64, i64),
        scale: (f64, f64),
        ratio: (f64, f64),
        interpolation: &str,
    ) -> PyResult<PyClassInitializer<Self>> {
        const C: &str = "RandomResizedCropRGBImageDecoder";
        let (lo, hi) = range(C, "scale", scale)?;
        if hi > 1.0 {
            return Err(invalid(
                C,
                format!("scale ({lo}, {hi}): a fraction of the image's area is at most 1"),
            ));
        }
        let d = NativeRrc::new(size(C, output_size)?)
            .scale((lo, hi))
            .ratio(range(C, "ratio", ratio)?)
            .interpolation(self::interpolation(C, interpolation)?);
        Ok(PyClassInitializer::from(Decoder { kind: DecoderKind::RandomResizedCrop(d) })
            .add_subclass(RandomResizedCropRGBImageDecoder))
    }
}

/// FFCV's `CenterCropRGBImageDecoder`: a centred square of `ratio` × the shorter side.
#[pyclass(module = "beton._native", extends = Decoder, frozen)]
pub struct CenterCropRGBImageDecoder;

#[pymethods]
impl CenterCropRGBImageDecoder {
    #[new]
    #[pyo3(signature = (output_size, ratio = 224.0 / 256.0, interpolation = "bicubic"))]
    fn new(output_size: (i64, i64), ratio: f64, interpolation: &str) -> PyResult<PyClassInitializer<Self>> {
        const C: &str = "CenterCropRGBImageDecoder";
        if !(ratio > 0.0 && ratio <= 1.0) {
            return Err(invalid(C, format!("ratio is {ratio}: expected 0 < ratio <= 1")));
        }
        let d = NativeCenterCrop::new(size(C, output_size)?)
            .ratio(ratio)
            .interpolation(self::interpolation(C, interpolation)?);
        Ok(PyClassInitializer::from(Decoder { kind: DecoderKind::CenterCrop(d) })
            .add_subclass(CenterCropRGBImageDecoder))
    }
}

/// Base of the per-sample image operations, fused into the native decode.
#[pyclass(module = "beton._native", subclass, frozen)]
pub struct ImageOp {
    op: Arc<dyn NativeImageOp>,
}

#[pymethods]
impl ImageOp {
    fn __repr__(&self) -> String {
        format!("{:?}", self.op)
    }
}

macro_rules! image_op {
    ($name:ident, ($($arg:ident : $ty:ty = $default:expr),*), $build:expr, $doc:literal) => {
        #[doc = $doc]
        #[pyclass(module = "beton._native", extends = ImageOp, frozen)]
        pub struct $name;

        #[pymethods]
        impl $name {
            #[new]
            #[pyo3(signature = ($($arg = $default),*))]
            fn new($($arg: $ty),*) -> PyResult<PyClassInitializer<Self>> {
                const C: &str = stringify!($name);
                let op: Arc<dyn NativeImageOp> = Arc::new($build);
                Ok(PyClassInitializer::from(ImageOp { op }).add_subclass($name))
            }
        }
    };
}

fn fill(class: &str, fill: Vec<i64>) -> PyResult<[u8; 3]> {
    match fill[..] {
        [r, g, b] if [r, g, b].iter().all(|c| (0..=255).contains(c)) => Ok([r as u8, g as u8, b as u8]),
        _ => Err(invalid(class, format!("fill {fill:?}: three values in 0..=255"))),
    }
}

fn pixels(class: &str, name: &str, n: i64) -> PyResult<usize> {
    usize::try_from(n).map_err(|_| invalid(class, format!("{name} is {n}: a number of pixels, 0 or more")))
}

fn magnitude(class: &str, m: f64) -> PyResult<f64> {
    if m >= 0.0 && m.is_finite() {
        Ok(m)
    } else {
        Err(invalid(class, format!("magnitude is {m}: 0 or more")))
    }
}

image_op!(RandomHorizontalFlip, (flip_prob: f64 = 0.5),
    HFlipOp { flip_prob: probability(C, "flip_prob", flip_prob)? },
    "FFCV's `RandomHorizontalFlip(flip_prob)`.");
image_op!(RandomVerticalFlip, (flip_prob: f64 = 0.5),
    VFlipOp { flip_prob: probability(C, "flip_prob", flip_prob)? },
    "beton's `RandomVerticalFlip(flip_prob)`.");
image_op!(RandomTranslate, (padding: i64 = 0, fill: Vec<i64> = vec![0, 0, 0]),
    TranslateOp { padding: pixels(C, "padding", padding)?, fill: self::fill(C, fill)? },
    "FFCV's `RandomTranslate(padding, fill)`.");
image_op!(Cutout, (crop_size: i64 = 0, fill: Vec<i64> = vec![0, 0, 0]),
    CutoutOp { crop_size: pixels(C, "crop_size", crop_size)?, fill: self::fill(C, fill)? },
    "FFCV's `Cutout(crop_size, fill)`.");
image_op!(RandomBrightness, (magnitude: f64 = 0.0, p: f64 = 0.5),
    BrightnessOp { magnitude: self::magnitude(C, magnitude)?, p: probability(C, "p", p)? },
    "FFCV's `RandomBrightness(magnitude, p)`.");
image_op!(RandomContrast, (magnitude: f64 = 0.0, p: f64 = 0.5),
    ContrastOp { magnitude: self::magnitude(C, magnitude)?, p: probability(C, "p", p)? },
    "FFCV's `RandomContrast(magnitude, p)`.");
image_op!(RandomSaturation, (magnitude: f64 = 0.0, p: f64 = 0.5),
    SaturationOp { magnitude: self::magnitude(C, magnitude)?, p: probability(C, "p", p)? },
    "FFCV's `RandomSaturation(magnitude, p)`.");

/// FFCV's `NormalizeImage(mean, std, type)`: `(x − mean) / std` per channel (pixel units) to
/// float32 or float16 (`half=True`), written CHW (`channels_first=True`) or HWC.
#[pyclass(module = "beton._native", frozen)]
pub struct NormalizeImage {
    inner: NativeNormalize,
}

#[pymethods]
impl NormalizeImage {
    #[new]
    #[pyo3(signature = (mean, std, half = false, channels_first = true))]
    fn new(mean: Vec<f32>, std: Vec<f32>, half: bool, channels_first: bool) -> PyResult<Self> {
        const C: &str = "NormalizeImage";
        let three = |name: &str, v: Vec<f32>| -> PyResult<[f32; 3]> {
            <[f32; 3]>::try_from(v.as_slice())
                .ok()
                .filter(|v| v.iter().all(|x| x.is_finite()))
                .ok_or_else(|| invalid(C, format!("{name} {v:?}: three finite values, one per channel")))
        };
        let (mean, std) = (three("mean", mean)?, three("std", std)?);
        if std.contains(&0.0) {
            return Err(invalid(C, format!("std {std:?}: a standard deviation of 0 divides by zero")));
        }
        let dtype = if half { FloatType::F16 } else { FloatType::F32 };
        let layout = if channels_first { Layout::Chw } else { Layout::Hwc };
        Ok(NormalizeImage { inner: NativeNormalize::new(mean, std).dtype(dtype).layout(layout) })
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// An image field's native pipeline: an image decoder, the operations fused into its decode, an
/// optional normalisation. With `source`, a view: a further output over field `source` (FFCV's
/// `PipelineSpec(source, ...)`), drawing its own randomness.
#[pyclass(module = "beton._native", frozen)]
pub struct ImagePipeline {
    pub(crate) inner: Arc<NativePipeline>,
    pub(crate) source: Option<String>,
}

#[pymethods]
impl ImagePipeline {
    #[new]
    #[pyo3(signature = (decoder, ops = Vec::new(), normalize = None, source = None))]
    fn new(
        decoder: PyRef<'_, Decoder>,
        ops: Vec<PyRef<'_, ImageOp>>,
        normalize: Option<PyRef<'_, NormalizeImage>>,
        source: Option<String>,
    ) -> PyResult<Self> {
        if !decoder.is_image() {
            return Err(PyTypeError::new_err(format!(
                "ImagePipeline: {:?} is not an image decoder (SimpleRGBImageDecoder, \
                 RandomResizedCropRGBImageDecoder, CenterCropRGBImageDecoder)",
                decoder.kind
            )));
        }
        let mut p = decoder.pipeline();
        for op in &ops {
            p = p.then_shared(Arc::clone(&op.op));
        }
        if let Some(n) = normalize {
            p = p.normalize(n.inner);
        }
        Ok(ImagePipeline { inner: Arc::new(p), source })
    }

    fn __repr__(&self) -> String {
        match &self.source {
            Some(s) => format!("ImagePipeline(source={s:?}, {:?})", self.inner),
            None => format!("{:?}", self.inner),
        }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_classes!(m; Decoder, IntDecoder, FloatDecoder, NDArrayDecoder, BytesDecoder, BoolDecoder,
                    SimpleRGBImageDecoder, RandomResizedCropRGBImageDecoder, CenterCropRGBImageDecoder,
                    ImageOp, RandomHorizontalFlip, RandomVerticalFlip, RandomTranslate, Cutout,
                    RandomBrightness, RandomContrast, RandomSaturation, NormalizeImage, ImagePipeline);
    Ok(())
}
