//! FFCV's colour jitters (`ffcv/transforms/color_jitter.py`): `RandomBrightness`,
//! `RandomContrast` and `RandomSaturation`, one blend each, with the blend factor, the blend and
//! the luma they share.

use super::{ImageMut, ImageOp};
use crate::image::rng::SampleRng;

/// The blend factor of FFCV's colour jitters: `uniform(max(0, 1 - m), 1 + m)`, drawn only when
/// the op applies (probability `p`).
fn jitter(magnitude: f64, p: f64, rng: &mut SampleRng) -> Option<f32> {
    if !rng.chance(p) {
        return None;
    }
    Some(rng.uniform_in((1.0 - magnitude).max(0.0), 1.0 + magnitude) as f32)
}

/// `ratio·a + (1 − ratio)·b`, clipped to `[0, 255]`, truncated (FFCV's `blend`).
pub(super) fn blend(a: u8, b: f32, ratio: f32) -> u8 {
    (ratio * f32::from(a) + (1.0 - ratio) * b).clamp(0.0, 255.0) as u8
}

/// ITU-R 601 luma as FFCV's colour jitters compute it: truncated to `u8` (FFCV stores it in
/// the `uint8` destination before blending).
fn luma(px: &[u8]) -> f32 {
    let l = 0.2989 * f32::from(px[0]) + 0.587 * f32::from(px[1]) + 0.114 * f32::from(px[2]);
    f32::from(l as u8)
}

/// One colour jitter: its struct (FFCV's `magnitude` and `p`) and its [`ImageOp`], which draws
/// the blend factor and, when the op applies, runs `$blend` over the image with it.
macro_rules! colour_jitter {
    ($(#[$doc:meta])* $name:ident, |$image:ident, $ratio:ident| $blend:block) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            /// The factor is drawn from `[max(0, 1 - magnitude), 1 + magnitude]`.
            pub magnitude: f64,
            /// Probability of applying.
            pub p: f64,
        }

        impl ImageOp for $name {
            fn apply(&self, $image: &mut ImageMut<'_>, rng: &mut SampleRng) {
                if let Some($ratio) = jitter(self.magnitude, self.p, rng) $blend
            }
        }
    };
}

colour_jitter!(
    /// FFCV's `RandomBrightness(magnitude, p=0.5)`: blends with black.
    RandomBrightness,
    |image, ratio| {
        image.pixels.iter_mut().for_each(|v| *v = blend(*v, 0.0, ratio));
    }
);

colour_jitter!(
    /// FFCV's `RandomContrast(magnitude, p=0.5)`: blends with the image's mean luma.
    RandomContrast,
    |image, ratio| {
        let n = (image.height * image.width).max(1);
        let mean = image.pixels.chunks_exact(3).map(|px| f64::from(luma(px))).sum::<f64>() / n as f64;
        image.pixels.iter_mut().for_each(|v| *v = blend(*v, mean as f32, ratio));
    }
);

colour_jitter!(
    /// FFCV's `RandomSaturation(magnitude, p=0.5)`: blends each pixel with its luma.
    RandomSaturation,
    |image, ratio| {
        for px in image.pixels.chunks_exact_mut(3) {
            let l = luma(px);
            px.iter_mut().for_each(|v| *v = blend(*v, l, ratio));
        }
    }
);
