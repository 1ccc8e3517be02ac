//! Image decoding for the loader: FFCV's RGB image decoders with crop-aware, DCT-scaled JPEG
//! decoding, and FFCV's per-sample augmentations, fused on the worker thread.
//!
//! FFCV decodes the whole JPEG, then crops and resizes. Here a crop decoder asks libjpeg-turbo
//! for the crop's rows and columns only, at 1/2, 1/4 or 1/8 scale when the crop is still at least
//! the output size there (the scaling happens in the DCT domain), resizes that straight into the
//! batch slot, and flips it in place: one pass per sample (private modules `jpeg` and `resize`).
//! For a JPEG with restart markers (beton's writer puts them in) only the crop's intervals are
//! entropy-decoded, into raw Y, Cb, Cr planes that are resized each to the output size, so that
//! chroma upsampling and the colour conversion run on output pixels only (module `color`); a
//! normalising pipeline converts and normalises them in one pass.
//!
//! - Decoders ([`FieldDecoder`](crate::FieldDecoder)s for RGB and grey image fields; grey comes
//!   out replicated to 3 channels; HWC `u8` `[h, w, 3]`): [`SimpleRGBImageDecoder`],
//!   [`RandomResizedCropRGBImageDecoder`], [`CenterCropRGBImageDecoder`]. The crop decoders take
//!   a [`size_schedule`](RandomResizedCropRGBImageDecoder::size_schedule) for progressive
//!   resizing.
//! - Augmentations ([`ImageOp`]): [`RandomHorizontalFlip`], [`RandomVerticalFlip`],
//!   [`RandomTranslate`], [`Cutout`], [`RandomBrightness`], [`RandomContrast`],
//!   [`RandomSaturation`]; and [`NormalizeImage`] to `f32` / `f16`, CHW or HWC.
//! - [`ImagePipeline`]: decoder → operations → normalisation, as one field decoder.
//!
//! All randomness comes from `(seed, epoch, index)` ([`SampleRng`]), so batches do not depend on
//! the number of threads. Corrupt payloads are errors (the loader names the sample), never
//! panics. A crop decode reads only the JPEG data the crop needs: corruption entirely below the
//! crop goes unnoticed (beton's writer validates every JPEG it stores).

mod color;
mod crop;
mod decoders;
#[cfg(test)]
mod guarded;
mod jpeg;
mod lut;
mod ops;
mod pipeline;
mod resample;
mod resize;
mod restart;
mod rng;

pub use crop::{center_crop, random_resized_crop, Crop};
pub(crate) use decoders::stored_sizes;
pub use decoders::{
    CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder, SizeSchedule,
};
pub use ops::{
    Cutout, ImageMut, ImageOp, RandomBrightness, RandomContrast, RandomHorizontalFlip, RandomSaturation,
    RandomTranslate, RandomVerticalFlip,
};
#[cfg(feature = "cuda")]
pub(crate) use pipeline::f32_to_f16;
#[cfg(all(feature = "cuda", test))]
pub(crate) use pipeline::Prepared;
pub use pipeline::{FloatType, ImagePipeline, Layout, NormalizeImage};
pub use resize::Interpolation;
pub use rng::SampleRng;
