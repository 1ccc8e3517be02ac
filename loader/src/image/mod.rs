//! Image decoding for the loader: FFCV's RGB image decoders with crop-aware, DCT-scaled JPEG
//! decoding, and FFCV's per-sample augmentations, fused on the worker thread.
//!
//! FFCV decodes the whole JPEG, then crops and resizes. Here a crop decoder asks libjpeg-turbo
//! for the crop's rows and columns only, at 1/2, 1/4 or 1/8 scale when the crop is still at least
//! the output size there (the scaling happens in the DCT domain), resizes that straight into the
//! batch slot, and flips it in place: one pass per sample (`codec/`, `resample/`).
//! For a JPEG with restart markers (beton's writer puts them in) only the crop's intervals are
//! entropy-decoded, and for one without (FFCV's) only the crop's MCUs, found through a seek
//! index built on its first decode (`codec/seek.rs`): into raw Y, Cb, Cr planes that are resized
//! each to the output size, so that chroma upsampling and the colour conversion run on output
//! pixels only (`codec/color.rs`); a normalising pipeline converts and normalises them in one
//! pass.
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
//! # Where things are
//!
//! - `codec/`: JPEG bytes to RGB or to raw Y / Cb / Cr planes (crop-aware, DCT-scaled,
//!   restart-marker slices), on beton-storage's codec layer ([`beton_storage::jpeg`]); the
//!   colour conversion of planes.
//! - `resample/`: the resize kernels (separable, fixed-point; AVX2).
//! - `normalize/`: [`NormalizeImage`]'s kernels (lookup table, AVX2 + F16C, AVX-512 VBMI).
//! - `ops/`: one file per user-visible operation: the [`ImageOp`]s, the crops, the resize
//!   settings ([`Interpolation`]) and [`NormalizeImage`] itself.
//! - `decoders/`: one file per decoder, and what they share.
//! - `pipeline.rs`: [`ImagePipeline`]. `cpu.rs`: the one CPU-feature check. `scratch.rs`: the
//!   per-thread buffers and TurboJPEG decompressor. `rng.rs`: [`SampleRng`].
//!
//! Dependencies run one way: `pipeline` → `decoders`, `normalize`; `decoders` → `codec`,
//! `resample`, `ops`; `normalize` → `codec`, `ops`; `codec` → `ops` (the crop); `ops` →
//! `resample`; and below them all `cpu`, `scratch` and `rng`, which import nothing here. Inside a
//! folder the files use what their `mod.rs` shares (an operation implements `ops::ImageOp`, a
//! decoder uses the decoders' helpers) and `mod.rs` only declares and re-exports them, except
//! for the kernel files (`avx2.rs`), which read their room's private types as an inline
//! `mod simd` would.
//!
//! # Adding an image operation
//!
//! 1. A new file `ops/your_op.rs` with a struct implementing [`ImageOp`] (see `ops/cutout.rs`).
//! 2. Its line `your_op::{YourOp},` in the `operations!` list in `ops/mod.rs`: that declares the
//!    file and makes it `beton_loader::image::YourOp`.
//! 3. For Python (its class): in `python/src/ops.rs` its `image_op!` line (with the native type
//!    in the `use` list) and its name in `register`'s `add_classes!` list; its stub in
//!    `python/beton/_native.pyi`; and its FFCV-named class in `python/beton/transforms/image.py`.
//!
//! All randomness comes from `(seed, epoch, index)` ([`SampleRng`]), so batches do not depend on
//! the number of threads. Corrupt payloads are errors (the loader names the sample), never
//! panics. A crop decode reads only the JPEG data the crop needs: corruption entirely below the
//! crop goes unnoticed (beton's writer validates every JPEG it stores).

mod codec;
mod cpu;
mod decoders;
mod normalize;
mod ops;
mod pipeline;
mod resample;
mod rng;
mod scratch;

pub use decoders::{
    CenterCropRGBImageDecoder, RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder, SizeSchedule,
};
#[cfg(all(feature = "cuda", test))]
pub(crate) use normalize::Prepared;
pub use ops::*;
pub use pipeline::ImagePipeline;
pub use rng::SampleRng;
