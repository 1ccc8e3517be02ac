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

/// One random flip: its struct (FFCV's `flip_prob`, default 0.5) and its [`ImageOp`], which runs
/// `$flip` on the image with probability `flip_prob`; `$extra` are further methods of the op.
macro_rules! random_flip {
    ($(#[$doc:meta])* $name:ident, |$image:ident| $flip:block $($extra:item)*) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            /// Probability of flipping.
            pub flip_prob: f64,
        }

        impl Default for $name {
            fn default() -> Self {
                $name { flip_prob: 0.5 }
            }
        }

        impl ImageOp for $name {
            fn apply(&self, $image: &mut ImageMut<'_>, rng: &mut SampleRng) {
                if rng.chance(self.flip_prob) $flip
            }

            $($extra)*
        }
    };
}

random_flip!(
    /// FFCV's `RandomHorizontalFlip(flip_prob=0.5)`.
    RandomHorizontalFlip,
    |image| {
        flip_horizontal(image.pixels, image.width);
    }
    fn horizontal_flip(&self) -> Option<f64> {
        Some(self.flip_prob)
    }
);

random_flip!(
    /// FFCV's `RandomVerticalFlip(flip_prob=0.5)`.
    RandomVerticalFlip,
    |image| {
        let row = image.width * 3;
        let h = image.height;
        for i in 0..h / 2 {
            let (a, b) = image.pixels.split_at_mut((h - 1 - i) * row);
            a[i * row..(i + 1) * row].swap_with_slice(&mut b[..row]);
        }
    }
);
