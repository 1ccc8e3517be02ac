//! FFCV's `Cutout`.

use super::{ImageMut, ImageOp};
use crate::image::rng::SampleRng;

/// FFCV's `Cutout(crop_size, fill=(0, 0, 0))`: fills a `crop_size` square at a uniform position
/// inside the image (clipped to the image when larger).
#[derive(Debug, Clone, Copy)]
pub struct Cutout {
    /// Side of the square, in pixels.
    pub crop_size: usize,
    /// Its colour.
    pub fill: [u8; 3],
}

impl ImageOp for Cutout {
    fn apply(&self, image: &mut ImageMut<'_>, rng: &mut SampleRng) {
        let (h, w) = (image.height, image.width);
        let y = rng.below((h.saturating_sub(self.crop_size) + 1) as u64) as usize;
        let x = rng.below((w.saturating_sub(self.crop_size) + 1) as u64) as usize;
        for r in y..(y + self.crop_size).min(h) {
            for c in x..(x + self.crop_size).min(w) {
                let o = (r * w + c) * 3;
                image.pixels[o..o + 3].copy_from_slice(&self.fill);
            }
        }
    }
}
