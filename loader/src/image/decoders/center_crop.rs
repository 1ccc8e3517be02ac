//! FFCV's `CenterCropRGBImageDecoder`.

use std::sync::Arc;

use beton_storage::{Dataset, Value};

use super::{image_field, rgb_column, Output, PlanarDecode};
use crate::decode::{ColumnSpec, FieldData, FieldDecoder, SampleContext};
use crate::error::{Error, Result};
use crate::image::ops::{center_crop, Crop, Interpolation};

/// FFCV's `CenterCropRGBImageDecoder`: the centred square of side `ratio × min(h, w)` (default
/// `ratio` 224/256), resized to the output size.
#[derive(Debug, Clone)]
pub struct CenterCropRGBImageDecoder {
    out: Output,
    ratio: f64,
}

impl CenterCropRGBImageDecoder {
    /// Centre crops of FFCV's default ratio 224/256, resized to `output_size` = `(height, width)`.
    pub fn new(output_size: (usize, usize)) -> Self {
        CenterCropRGBImageDecoder { out: Output::new(output_size), ratio: 224.0 / 256.0 }
    }

    /// The crop's side as a fraction of the image's shorter side.
    pub fn ratio(mut self, ratio: f64) -> Self {
        self.ratio = ratio;
        self
    }

    output_settings!();
}

impl PlanarDecode for CenterCropRGBImageDecoder {
    fn output(&self) -> &Output {
        &self.out
    }

    fn crop_for(&self, width: u32, height: u32, _: &SampleContext) -> Crop {
        center_crop(width, height, self.ratio)
    }
}

impl FieldDecoder for CenterCropRGBImageDecoder {
    fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> Result<Vec<ColumnSpec>> {
        self.columns_of(&FieldData::of_file(ds, field), epoch)
    }

    fn columns_of(&self, field: &FieldData<'_>, epoch: u64) -> Result<Vec<ColumnSpec>> {
        let name = image_field(field, "CenterCropRGBImageDecoder")?;
        if !(self.ratio > 0.0 && self.ratio <= 1.0) {
            return Err(Error::InvalidArgument {
                what: "CenterCropRGBImageDecoder ratio".into(),
                why: format!("{} is not in (0, 1]", self.ratio),
            });
        }
        rgb_column(name, self.out.size(epoch), "CenterCropRGBImageDecoder")
    }

    fn decode(&self, value: Value<'_>, ctx: &SampleContext, out: &mut [&mut [u8]]) -> Result<()> {
        self.out.decode(value, ctx, out, |w, h| center_crop(w, h, self.ratio))
    }
}
