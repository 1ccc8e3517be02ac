//! FFCV's `RandomHorizontalFlip` and `RandomVerticalFlip`, and the row mirror they and the
//! crop decoders' fused flip share.

use super::{ImageMut, ImageOp};
use crate::image::rng::SampleRng;


/// Mirrors each row of a packed RGB image `width` pixels wide.
pub(crate) fn flip_horizontal(pixels: &mut [u8], width: usize) {
    if width == 0 {
        return;
    }
    for row in pixels.chunks_exact_mut(width * 3) {
        for i in 0..width / 2 {
            let j = width - 1 - i;
            let (a, b) = row.split_at_mut(j * 3);
            a[i * 3..i * 3 + 3].swap_with_slice(&mut b[..3]);
        }
    }
}

/// FFCV's `RandomHorizontalFlip(flip_prob=0.5)`.
#[derive(Debug, Clone, Copy)]
pub struct RandomHorizontalFlip {
    /// Probability of flipping.
    pub flip_prob: f64,
}

impl Default for RandomHorizontalFlip {
    fn default() -> Self {
        RandomHorizontalFlip { flip_prob: 0.5 }
    }
}

impl ImageOp for RandomHorizontalFlip {
    fn apply(&self, image: &mut ImageMut<'_>, rng: &mut SampleRng) {
        if rng.chance(self.flip_prob) {
            flip_horizontal(image.pixels, image.width);
        }
    }

    fn horizontal_flip(&self) -> Option<f64> {
        Some(self.flip_prob)
    }
}

/// FFCV's `RandomVerticalFlip(flip_prob=0.5)`.
#[derive(Debug, Clone, Copy)]
pub struct RandomVerticalFlip {
    /// Probability of flipping.
    pub flip_prob: f64,
}

impl Default for RandomVerticalFlip {
    fn default() -> Self {
        RandomVerticalFlip { flip_prob: 0.5 }
    }
}

impl ImageOp for RandomVerticalFlip {
    fn apply(&self, image: &mut ImageMut<'_>, rng: &mut SampleRng) {
        if !rng.chance(self.flip_prob) || image.width == 0 {
            return;
        }
        let row = image.width * 3;
        let h = image.height;
        for i in 0..h / 2 {
            let (a, b) = image.pixels.split_at_mut((h - 1 - i) * row);
            a[i * row..(i + 1) * row].swap_with_slice(&mut b[..row]);
        }
    }
}
