//! FFCV's `RandomResizedCropRGBImageDecoder`.

use std::sync::Arc;

use beton_storage::{Dataset, Value};

use super::{image_field, rgb_column, Output, PlanarDecode};
use crate::decode::{ColumnSpec, FieldData, FieldDecoder, SampleContext};
use crate::error::{Error, Result};
use crate::image::ops::{random_resized_crop, Crop, Interpolation};
use crate::image::rng::SampleRng;

/// FFCV's `RandomResizedCropRGBImageDecoder`: a random crop by torchvision's
/// `RandomResizedCrop.get_params` (defaults `scale = (0.08, 1)`, `ratio = (3/4, 4/3)`), resized
/// to the output size, optionally flipped (a fused `RandomHorizontalFlip`). Crops and flips come
/// from `(seed, epoch, index)` alone.
///
/// ```
/// use beton_loader::image::RandomResizedCropRGBImageDecoder;
/// let dec = RandomResizedCropRGBImageDecoder::new((224, 224))
///     .flip(0.5)
///     .size_schedule(|epoch| if epoch < 10 { (160, 160) } else { (192, 192) });
/// assert_eq!(dec.output_size(12), (192, 192));
/// ```
#[derive(Debug, Clone)]
pub struct RandomResizedCropRGBImageDecoder {
    out: Output,
    scale: (f64, f64),
    ratio: (f64, f64),
}

impl RandomResizedCropRGBImageDecoder {
    /// Crops resized to `output_size` = `(height, width)`, with torchvision's default ranges.
    pub fn new(output_size: (usize, usize)) -> Self {
        RandomResizedCropRGBImageDecoder {
            out: Output::new(output_size),
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
        }
    }

    /// The range of the crop's area as a fraction of the image's.
    pub fn scale(mut self, scale: (f64, f64)) -> Self {
        self.scale = scale;
        self
    }

    /// The range of the crop's aspect ratio (width / height), drawn log-uniformly.
    pub fn ratio(mut self, ratio: (f64, f64)) -> Self {
        self.ratio = ratio;
        self
    }

    /// Flips each output horizontally with probability `p` (FFCV's `RandomHorizontalFlip`,
    /// fused into the decode); 0, the default, never flips.
    pub fn flip(mut self, p: f64) -> Self {
        self.out.flip_prob = p;
        self
    }

    output_settings!();

    /// The crop of sample `ctx` from a `width × height` image.
    pub fn crop(&self, width: u32, height: u32, ctx: &SampleContext) -> Crop {
        random_resized_crop(width, height, self.scale, self.ratio, &mut SampleRng::for_crop(ctx))
    }
}

impl PlanarDecode for RandomResizedCropRGBImageDecoder {
    fn output(&self) -> &Output {
        &self.out
    }

    fn crop_for(&self, width: u32, height: u32, ctx: &SampleContext) -> Crop {
        self.crop(width, height, ctx)
    }
}

impl FieldDecoder for RandomResizedCropRGBImageDecoder {
    fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> Result<Vec<ColumnSpec>> {
        self.columns_of(&FieldData::of_file(ds, field), epoch)
    }

    fn columns_of(&self, field: &FieldData<'_>, epoch: u64) -> Result<Vec<ColumnSpec>> {
        let name = image_field(field, "RandomResizedCropRGBImageDecoder")?;
        let ok = |(a, b): (f64, f64)| a.is_finite() && b.is_finite() && a > 0.0 && a <= b;
        if !ok(self.scale) || !ok(self.ratio) {
            return Err(Error::InvalidArgument {
                what: "RandomResizedCropRGBImageDecoder ranges".into(),
                why: format!("scale {:?} and ratio {:?} must be positive, lo <= hi", self.scale, self.ratio),
            });
        }
        rgb_column(name, self.out.size(epoch), "RandomResizedCropRGBImageDecoder")
    }

    fn decode(&self, value: Value<'_>, ctx: &SampleContext, out: &mut [&mut [u8]]) -> Result<()> {
        self.out.decode(value, ctx, out, |w, h| self.crop(w, h, ctx))
    }
}
