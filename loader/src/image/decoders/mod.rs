//! The RGB image decoders: FFCV's `SimpleRGBImageDecoder`, `RandomResizedCropRGBImageDecoder`
//! and `CenterCropRGBImageDecoder`, writing HWC `u8` `[h, w, 3]` straight into the batch.
//!
//! Crop decoders decode only the crop, at a reduced DCT scale where the output allows
//! ([`crate::image::codec`]), resize it into the slot ([`crate::image::resample`]) and flip it
//! there when the fused flip says so: one pass per sample on the worker thread. A JPEG with restart markers
//! takes the planar path ([`crop_resize_planes`]): its Y, Cb and Cr planes are resized to the
//! output size and converted to RGB there (or, in an [`super::ImagePipeline`] that normalises,
//! converted and normalised in one pass: [`PlanarDecode`]). Grey fields come out with
//! their one channel replicated to three; CMYK / YCCK JPEGs (which beton's writer never stores,
//! but other writers may) take beton-storage's full decoder.

use std::sync::Arc;

use beton_storage::{ImageMode, ImageRef, Value};

use crate::decode::{ColumnSpec, ElemType, FieldData, SampleContext};
use crate::error::{Error, Result};
use crate::image::codec::{self, color};
use crate::image::ops::{flip_horizontal, resize_into, Crop, Interpolation};
use crate::image::resample::{resize_planes, Filter, Plane};
use crate::image::rng::SampleRng;
use crate::image::scratch;
use smallvec::SmallVec;

/// Output size `(height, width)` as a function of the epoch, for progressive resizing.
pub type SizeSchedule = Arc<dyn Fn(u64) -> (usize, usize) + Send + Sync>;

/// The field's name, if it is an image field; an error naming the decoder otherwise.
fn image_field<'a>(field: &FieldData<'a>, decoder: &str) -> Result<&'a str> {
    match field.field_type().is_image() {
        true => Ok(field.name()),
        false => Err(Error::InvalidArgument {
            what: format!("decoder for field '{}'", field.name()),
            why: format!("{decoder} cannot decode a {} field", field.field_type().name()),
        }),
    }
}

fn rgb_column(name: &str, (h, w): (usize, usize), decoder: &str) -> Result<Vec<ColumnSpec>> {
    if h == 0 || w == 0 || h > u16::MAX as usize || w > u16::MAX as usize {
        return Err(Error::InvalidArgument {
            what: format!("{decoder} output size"),
            why: format!("{h}x{w}: each side must be 1 to 65535"),
        });
    }
    Ok(vec![ColumnSpec { name: name.to_string(), elem: ElemType::U8, shape: vec![h, w, 3] }])
}

fn not_an_image() -> Error {
    Error::Decode("not an image value".into())
}

fn check_slot(out: &[&mut [u8]], (h, w): (usize, usize)) -> Result<()> {
    match out.first() {
        Some(o) if o.len() == h * w * 3 => Ok(()),
        _ => Err(Error::Decode(format!("output slot is not {h}x{w}x3 bytes"))),
    }
}

/// Writes the `crop` of `img` resized to `(out_h, out_w)` as packed RGB into `out`.
pub(crate) fn crop_resize_into(
    img: &ImageRef<'_>,
    crop: Crop,
    (out_h, out_w): (usize, usize),
    oversample: f64,
    interpolation: Interpolation,
    out: &mut [u8],
) -> Result<()> {
    let (w, h) = (u32::from(img.width), u32::from(img.height));
    let (ow, oh) = (out_w as u32, out_h as u32);
    check_crop(crop, (w, h))?;
    let exact = crop == Crop::full(w, h) && (ow, oh) == (w, h);
    if img.mode == ImageMode::Jpg {
        if !exact
            && crop_resize_planes(img, crop, (out_h, out_w), oversample, interpolation, |src| {
                color::to_rgb(src, out)
            })?
            .is_some()
        {
            return Ok(());
        }
        let done = if exact {
            codec::decode_full(img.data, w, h, out)?
        } else {
            scratch::REGION.with(|s| -> Result<bool> {
                let buf = &mut *s.borrow_mut();
                match codec::decode_crop(img.data, w, h, crop, (ow, oh), oversample, buf)? {
                    Some(r) => {
                        resize_into(buf, (r.width, r.height), 3, r.crop, out, (ow, oh), interpolation)?;
                        Ok(true)
                    }
                    None => Ok(false),
                }
            })?
        };
        if !done {
            // CMYK / YCCK: beton-storage's full decoder converts them as Pillow does.
            let px = img.decode()?;
            return raw_into(&px.data, (w, h), px.channels, crop, (ow, oh), interpolation, out);
        }
        return Ok(());
    }
    raw_into(img.data, (w, h), img.channels as u8, crop, (ow, oh), interpolation, out)
}

/// A crop that is empty or reaches outside the `w × h` image is an error.
fn check_crop(crop: Crop, (w, h): (u32, u32)) -> Result<()> {
    if crop.width == 0 || crop.height == 0 || crop.x + crop.width > w || crop.y + crop.height > h {
        return Err(Error::Decode(format!("crop {crop:?} outside the {w}x{h} image")));
    }
    Ok(())
}

/// The planar path of [`crop_resize_into`] for a JPEG: its raw planes (Y, Cb, Cr at their own
/// resolutions, or grey) decoded for the crop ([`codec::decode_crop_planes`]), each resized
/// straight to `(out_h, out_w)`, then handed to `finish` (Y, Cb, Cr or grey planes of
/// `out_h × out_w` bytes) for the colour conversion. `Ok(None)` when the JPEG does not take
/// this path (see `decode_crop_planes`).
pub(crate) fn crop_resize_planes<R>(
    img: &ImageRef<'_>,
    crop: Crop,
    (out_h, out_w): (usize, usize),
    oversample: f64,
    interpolation: Interpolation,
    finish: impl FnOnce(color::Source<'_>) -> R,
) -> Result<Option<R>> {
    let (w, h) = (u32::from(img.width), u32::from(img.height));
    let out = (out_w as u32, out_h as u32);
    scratch::PLANES.with(|cell| {
        let (raw, resized) = &mut *cell.borrow_mut();
        let Some(p) = codec::decode_crop_planes(img.data, w, h, crop, out, oversample, raw)? else {
            return Ok(None);
        };
        let planes: SmallVec<[Plane<'_>; 3]> = (0..p.count)
            .map(|c| {
                let (at, pw, ph) = p.geometry[c];
                let crop = p.crop[c];
                // Chroma enlarged on both axes takes the triangle filter, as libjpeg-turbo's own
                // (fancy) chroma upsampling does: it costs half the taps of Catmull-Rom, and the
                // subsampled chroma of a JPEG holds no detail a sharper kernel would keep.
                let enlarged = crop[2] < f64::from(out.0) && crop[3] < f64::from(out.1);
                let filter = if c > 0 && enlarged {
                    Filter::Bilinear
                } else {
                    interpolation.filter((crop[2], crop[3]), out)
                };
                Plane { data: &raw[at..at + pw as usize * ph as usize], size: (pw, ph), crop, filter }
            })
            .collect();
        resized.resize(p.count * out_w * out_h, 0);
        resize_planes(&planes, resized, out)?;
        Ok(Some(finish(color::Source::planes(p.count, resized))))
    })
}

/// [`crop_resize_into`] for packed pixels of 1 or 3 channels.
fn raw_into(
    data: &[u8],
    (w, h): (u32, u32),
    channels: u8,
    crop: Crop,
    (ow, oh): (u32, u32),
    interpolation: Interpolation,
    out: &mut [u8],
) -> Result<()> {
    if !matches!(channels, 1 | 3) || data.len() != w as usize * h as usize * usize::from(channels) {
        return Err(Error::Decode(format!("raw image of {} bytes, not {w}x{h}x{channels}", data.len())));
    }
    let exact = crop == Crop::full(w, h) && (ow, oh) == (w, h);
    let rect = [f64::from(crop.x), f64::from(crop.y), f64::from(crop.width), f64::from(crop.height)];
    match (channels, exact) {
        (3, true) => out.copy_from_slice(data),
        (3, false) => resize_into(data, (w, h), 3, rect, out, (ow, oh), interpolation)?,
        (_, true) => color::to_rgb(color::Source::Grey(data), out),
        (_, false) => scratch::REGION.with(|s| -> Result<()> {
            let grey = &mut *s.borrow_mut();
            grey.resize(ow as usize * oh as usize, 0);
            resize_into(data, (w, h), 1, rect, grey, (ow, oh), interpolation)?;
            color::to_rgb(color::Source::Grey(grey), out);
            Ok(())
        })?,
    }
    Ok(())
}

/// What the crop decoders share: the output size (fixed or per epoch) and the fused flip.
#[derive(Clone)]
pub(crate) struct Output {
    size: (usize, usize),
    schedule: Option<SizeSchedule>,
    flip_prob: f64,
    oversample: f64,
    interpolation: Interpolation,
}

impl Output {
    fn new(size: (usize, usize)) -> Self {
        Output {
            size,
            schedule: None,
            flip_prob: 0.0,
            oversample: 1.0,
            interpolation: Interpolation::default(),
        }
    }

    fn size(&self, epoch: u64) -> (usize, usize) {
        self.schedule.as_ref().map_or(self.size, |f| f(epoch))
    }

    fn decode(
        &self,
        value: Value<'_>,
        ctx: &SampleContext,
        out: &mut [&mut [u8]],
        crop: impl Fn(u32, u32) -> Crop,
    ) -> Result<()> {
        let img = value.as_image().ok_or_else(not_an_image)?;
        let size = self.size(ctx.epoch);
        check_slot(out, size)?;
        let c = crop(u32::from(img.width), u32::from(img.height));
        crop_resize_into(&img, c, size, self.oversample, self.interpolation, out[0])?;
        if self.flips(ctx) {
            flip_horizontal(out[0], size.1);
        }
        Ok(())
    }

    /// Whether the fused flip mirrors sample `ctx`.
    fn flips(&self, ctx: &SampleContext) -> bool {
        self.flip_prob > 0.0 && SampleRng::for_flip(ctx).chance(self.flip_prob)
    }
}

/// The crop decoders' planar path, for an [`super::ImagePipeline`] that normalises: the
/// resized planes go straight to the normalisation, which converts them to RGB on the way
/// ([`super::NormalizeImage`]), with no packed RGB image in between.
pub(crate) trait PlanarDecode: Send + Sync {
    /// The decoder's output size, resize settings and fused flip.
    fn output(&self) -> &Output;

    /// The decoder's crop of sample `ctx` from a `width × height` image.
    fn crop_for(&self, width: u32, height: u32, ctx: &SampleContext) -> Crop;

    /// Decodes the crop of `value` for `ctx` into planes at the output size and hands them to
    /// `finish` ([`crop_resize_planes`]), without the fused flip; `Ok(false)`
    /// when the image does not take the planar path (the caller decodes it as usual).
    ///
    /// # Errors
    /// A corrupt payload, a crop outside the image.
    fn decode_planes(
        &self,
        value: Value<'_>,
        ctx: &SampleContext,
        finish: &mut dyn FnMut(color::Source<'_>),
    ) -> Result<bool> {
        let img = value.as_image().ok_or_else(not_an_image)?;
        if img.mode != ImageMode::Jpg {
            return Ok(false);
        }
        let (w, h) = (u32::from(img.width), u32::from(img.height));
        let crop = self.crop_for(w, h, ctx);
        check_crop(crop, (w, h))?;
        let out = self.output();
        let done =
            crop_resize_planes(&img, crop, out.size(ctx.epoch), out.oversample, out.interpolation, finish)?;
        Ok(done.is_some())
    }

    /// Whether the decoder's fused flip mirrors sample `ctx`.
    fn flips(&self, ctx: &SampleContext) -> bool {
        self.output().flips(ctx)
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("size", &self.size)
            .field("schedule", &self.schedule.as_ref().map(|_| "Fn(epoch)"))
            .field("flip_prob", &self.flip_prob)
            .field("oversample", &self.oversample)
            .field("interpolation", &self.interpolation)
            .finish()
    }
}

/// The settings both crop decoders take, on their [`Output`] `out`.
macro_rules! output_settings {
    () => {
        /// DCT scaling keeps the decoded crop at least `factor ×` the output size (default 1: the
        /// smallest scale of 1/8, 1/4, 1/2, 1 at which the crop still covers the output). Larger
        /// factors leave more of the downscale to the antialiased resize: sharper, slower (on the
        /// bench corpus at 64 px, factor 1.5 raises the mean PSNR against a full-resolution
        /// Lanczos3 reference from about 41-44 dB to 45-46 dB).
        pub fn oversample(mut self, factor: f64) -> Self {
            self.out.oversample = factor.max(1.0);
            self
        }

        /// How the crop is resized (default [`Interpolation::Bicubic`]).
        pub fn interpolation(mut self, interpolation: Interpolation) -> Self {
            self.out.interpolation = interpolation;
            self
        }

        /// Progressive resizing: the output size `(height, width)` of each epoch.
        pub fn size_schedule(mut self, f: impl Fn(u64) -> (usize, usize) + Send + Sync + 'static) -> Self {
            self.out.schedule = Some(Arc::new(f));
            self
        }

        /// The output size `(height, width)` in `epoch`.
        pub fn output_size(&self, epoch: u64) -> (usize, usize) {
            self.out.size(epoch)
        }
    };
}

mod center_crop;
mod random_resized_crop;
mod simple;

pub use center_crop::CenterCropRGBImageDecoder;
pub use random_resized_crop::RandomResizedCropRGBImageDecoder;
pub use simple::SimpleRGBImageDecoder;

#[cfg(test)]
mod tests {
    use std::ffi::c_int;

    use turbojpeg::raw;

    use super::*;

    /// A smooth `w × h` picture (gradients and a soft disc, as photos are at the scale of a
    /// JPEG block) as a JPEG with `subsamp` and a restart marker every MCU (`restarts`) or none.
    fn smooth_jpeg(w: usize, h: usize, subsamp: c_int, restarts: bool) -> Vec<u8> {
        let grey = subsamp == raw::TJSAMP_TJSAMP_GRAY as c_int;
        let channels = if grey { 1 } else { 3 };
        let pixels: Vec<u8> = (0..w * h)
            .flat_map(|p| {
                let (x, y) = ((p % w) as f64, (p / w) as f64);
                let d = ((x - w as f64 * 0.4).powi(2) + (y - h as f64 * 0.6).powi(2)).sqrt();
                let disc = 120.0 / (1.0 + (d / 20.0).powi(2));
                let rgb = [x * 200.0 / w as f64 + disc, y * 180.0 / h as f64 + 40.0, 220.0 - disc - x * 0.3];
                rgb.into_iter().take(channels).map(|v| v.clamp(0.0, 255.0) as u8)
            })
            .collect();
        crate::image::codec::restart::tests::compress(&pixels, w, h, subsamp, 92, i32::from(restarts))
    }

    fn psnr(a: &[u8], b: &[u8]) -> f64 {
        let mse = a.iter().zip(b).map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2)).sum::<f64>()
            / a.len() as f64;
        10.0 * (255.0 * 255.0 / mse.max(1e-9)).log10()
    }

    /// Every subsampling libjpeg-turbo writes, and grey, takes the planar path, with restart
    /// markers or without (through the seek index: the same bytes out), and agrees with the
    /// packed path (libjpeg-turbo's RGB of the crop) on the same pixels, for crops that enlarge,
    /// shrink (a DCT scale below 1) and touch the image's edges.
    #[test]
    fn planar_path_for_every_subsampling() {
        use raw::{
            TJSAMP_TJSAMP_411 as S411, TJSAMP_TJSAMP_420 as S420, TJSAMP_TJSAMP_422 as S422,
            TJSAMP_TJSAMP_440 as S440, TJSAMP_TJSAMP_441 as S441, TJSAMP_TJSAMP_444 as S444,
            TJSAMP_TJSAMP_GRAY as SGRAY,
        };
        let (w, h) = (301u32, 229u32);
        for subsamp in [S444, S422, S420, S440, S411, S441, SGRAY] {
            let marked = smooth_jpeg(w as usize, h as usize, subsamp as c_int, true);
            let plain = smooth_jpeg(w as usize, h as usize, subsamp as c_int, false);
            let image = |data| ImageRef {
                mode: ImageMode::Jpg,
                width: w as u16,
                height: h as u16,
                channels: beton_storage::Channels::Rgb,
                data,
            };
            let (marked, plain) = (image(&marked[..]), image(&plain[..]));
            for (crop, out) in [
                (Crop { x: 40, y: 30, width: 100, height: 80 }, (160usize, 160usize)),
                (Crop { x: 0, y: 0, width: 301, height: 229 }, (64, 48)),
                (Crop { x: 200, y: 150, width: 101, height: 79 }, (33, 47)),
                (Crop { x: 10, y: 20, width: 250, height: 200 }, (112, 96)),
            ] {
                let what = format!("subsamp {subsamp} {crop:?} -> {out:?}");
                let grey = |src: color::Source<'_>| matches!(src, color::Source::Grey(_));
                let planar =
                    crop_resize_planes(&marked, crop, out, 1.0, Interpolation::Bicubic, grey).unwrap();
                assert_eq!(planar, Some(subsamp == SGRAY), "{what}");
                assert_eq!(
                    crop_resize_planes(&plain, crop, out, 1.0, Interpolation::Bicubic, grey).unwrap(),
                    Some(subsamp == SGRAY),
                    "{what}: no restart markers, the planar path through the seek index"
                );
                let mut a = vec![0u8; out.0 * out.1 * 3];
                let (mut b, mut packed) = (a.clone(), a.clone());
                crop_resize_into(&marked, crop, out, 1.0, Interpolation::Bicubic, &mut a).unwrap();
                crop_resize_into(&plain, crop, out, 1.0, Interpolation::Bicubic, &mut b).unwrap();
                assert!(a == b, "{what}: with and without restart markers");
                // The packed path on the same JPEG.
                let (ow, oh) = (out.1 as u32, out.0 as u32);
                let mut buf = Vec::new();
                let r = codec::decode_crop(plain.data, w, h, crop, (ow, oh), 1.0, &mut buf).unwrap().unwrap();
                resize_into(
                    &buf,
                    (r.width, r.height),
                    3,
                    r.crop,
                    &mut packed,
                    (ow, oh),
                    Interpolation::Bicubic,
                )
                .unwrap();
                let score = psnr(&a, &packed);
                assert!(score >= 38.0, "{what}: planar vs packed PSNR {score:.2} dB");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Damaged JPEGs (bytes overwritten, cut short) give an error or pixels through the crop
        /// and resize, never a panic, whatever the crop and output size (the codec's own test
        /// covers its decode alone).
        #[test]
        fn damaged_jpegs_never_panic_in_crop_resize(
            damage in crate::image::codec::testing::damage(4000),
            crop in crate::image::codec::testing::crop_in(120, 90),
            (ow, oh, restarts) in (1u32..80, 1u32..80, proptest::prelude::any::<bool>()),
        ) {
            let data = crate::image::codec::testing::damaged_jpeg(&damage, restarts);
            let img = ImageRef {
                mode: ImageMode::Jpg,
                width: 120,
                height: 90,
                channels: beton_storage::Channels::Rgb,
                data: &data,
            };
            let mut out = vec![0u8; ow as usize * oh as usize * 3];
            let _ = crop_resize_into(&img, crop, (oh as usize, ow as usize), 1.0, Default::default(), &mut out);
        }
    }
}
