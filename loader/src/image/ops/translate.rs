//! FFCV's `RandomTranslate`.

use super::{ImageMut, ImageOp};
use crate::image::rng::SampleRng;

/// FFCV's `RandomTranslate(padding, fill=(0, 0, 0))`: pads by `padding` with `fill` and takes
/// a window of the original size at a uniform offset in `0..=2·padding` on each axis.
#[derive(Debug, Clone, Copy)]
pub struct RandomTranslate {
    /// Padding on each side, in pixels.
    pub padding: usize,
    /// Colour of the padding.
    pub fill: [u8; 3],
}

impl ImageOp for RandomTranslate {
    fn apply(&self, image: &mut ImageMut<'_>, rng: &mut SampleRng) {
        let span = 2 * self.padding as u64 + 1;
        let dy = rng.below(span) as isize - self.padding as isize;
        let dx = rng.below(span) as isize - self.padding as isize;
        if (dy, dx) == (0, 0) {
            return;
        }
        let (h, w) = (image.height as isize, image.width as isize);
        let src = image.pixels.to_vec();
        // out[r][c] = src[r + dy][c + dx], fill outside.
        for r in 0..h {
            for c in 0..w {
                let (sr, sc) = (r + dy, c + dx);
                let o = ((r * w + c) * 3) as usize;
                if (0..h).contains(&sr) && (0..w).contains(&sc) {
                    let s = ((sr * w + sc) * 3) as usize;
                    image.pixels[o..o + 3].copy_from_slice(&src[s..s + 3]);
                } else {
                    image.pixels[o..o + 3].copy_from_slice(&self.fill);
                }
            }
        }
    }
}
