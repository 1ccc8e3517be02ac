//! Where to crop: torchvision's `RandomResizedCrop.get_params` (FFCV's `get_random_crop`, the
//! same algorithm) and FFCV's `get_center_crop`.

use crate::image::rng::SampleRng;

/// A crop rectangle, in pixels of the stored image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crop {
    /// Left column.
    pub x: u32,
    /// Top row.
    pub y: u32,
    /// Width, at least 1.
    pub width: u32,
    /// Height, at least 1.
    pub height: u32,
}

impl Crop {
    /// The whole `width × height` image.
    pub fn full(width: u32, height: u32) -> Crop {
        Crop { x: 0, y: 0, width, height }
    }
}

/// Python's `round` (and numpy's): halves to even.
fn round(x: f64) -> f64 {
    x.round_ties_even()
}

/// torchvision's `RandomResizedCrop.get_params` on a `width × height` image: up to 10 tries of
/// an area `uniform(scale) × width × height` and a log-uniform aspect ratio in `ratio`
/// (`w = round(sqrt(area·r))`, `h = round(sqrt(area/r))`), the first that fits placed uniformly;
/// else the largest centred crop with the ratio clamped to `ratio`.
pub fn random_resized_crop(
    width: u32,
    height: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
    rng: &mut SampleRng,
) -> Crop {
    let (width, height) = (width.max(1), height.max(1));
    let area = f64::from(width) * f64::from(height);
    let (log_lo, log_hi) = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target_area = area * rng.uniform_in(scale.0, scale.1);
        let aspect = rng.uniform_in(log_lo, log_hi).exp();
        let w = round((target_area * aspect).sqrt());
        let h = round((target_area / aspect).sqrt());
        if w > 0.0 && w <= f64::from(width) && h > 0.0 && h <= f64::from(height) {
            let (w, h) = (w as u32, h as u32);
            let y = rng.below(u64::from(height - h) + 1) as u32;
            let x = rng.below(u64::from(width - w) + 1) as u32;
            return Crop { x, y, width: w, height: h };
        }
    }
    let in_ratio = f64::from(width) / f64::from(height);
    let (lo, hi) = (ratio.0.min(ratio.1), ratio.0.max(ratio.1));
    let (w, h) = if in_ratio < lo {
        (width, (round(f64::from(width) / lo) as u32).clamp(1, height))
    } else if in_ratio > hi {
        ((round(f64::from(height) * hi) as u32).clamp(1, width), height)
    } else {
        (width, height)
    };
    Crop { x: (width - w) / 2, y: (height - h) / 2, width: w, height: h }
}

/// FFCV's `get_center_crop`: the centred square of side `int(ratio · min(width, height))` (at
/// least 1, at most the shorter side).
pub fn center_crop(width: u32, height: u32, ratio: f64) -> Crop {
    let (width, height) = (width.max(1), height.max(1));
    let side = width.min(height);
    let c = ((ratio * f64::from(side)) as u32).clamp(1, side);
    Crop { x: (width - c) / 2, y: (height - c) / 2, width: c, height: c }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::SampleContext;

    #[test]
    fn random_crops_fit_and_follow_the_ranges() {
        for index in 0..2000 {
            let ctx = SampleContext { index, seed: 1, epoch: 0, position: 0 };
            let (w, h) = (200 + (index as u32 % 300), 100 + (index as u32 * 7 % 400));
            let c = random_resized_crop(w, h, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut SampleRng::for_crop(&ctx));
            assert!(c.width >= 1 && c.height >= 1 && c.x + c.width <= w && c.y + c.height <= h, "{c:?}");
        }
    }

    #[test]
    fn fallback_is_the_clamped_centre_crop() {
        let ctx = SampleContext { index: 0, seed: 0, epoch: 0, position: 0 };
        // An area scale over 1 never fits: straight to the fallback.
        let c = random_resized_crop(400, 100, (2.0, 3.0), (0.75, 4.0 / 3.0), &mut SampleRng::for_crop(&ctx));
        assert_eq!(c, Crop { x: 133, y: 0, width: 133, height: 100 });
        let c = random_resized_crop(100, 100, (2.0, 3.0), (0.75, 4.0 / 3.0), &mut SampleRng::for_crop(&ctx));
        assert_eq!(c, Crop::full(100, 100));
    }

    #[test]
    fn center_crop_is_ffcvs() {
        // 224/256 of 300 = 262.5 -> 262; offsets floor((w - c) / 2).
        assert_eq!(center_crop(500, 300, 224.0 / 256.0), Crop { x: 119, y: 19, width: 262, height: 262 });
        assert_eq!(center_crop(1, 1, 224.0 / 256.0), Crop::full(1, 1));
    }
}

#[cfg(test)]
mod golden {
    use super::*;
    use crate::decode::SampleContext;

    #[test]
    fn golden_random_resized_crops() {
        // Pins the crop stream (seed derivation, draws, rounding): the same seed must give the
        // same crops in every release.
        let crops: Vec<[u32; 4]> = (0..4)
            .map(|index| {
                let ctx = SampleContext { index, seed: 0, epoch: 1, position: 0 };
                let c = random_resized_crop(
                    500,
                    375,
                    (0.08, 1.0),
                    (0.75, 4.0 / 3.0),
                    &mut SampleRng::for_crop(&ctx),
                );
                [c.x, c.y, c.width, c.height]
            })
            .collect();
        assert_eq!(crops, GOLDEN);
    }

    const GOLDEN: [[u32; 4]; 4] =
        [[109, 0, 356, 344], [168, 2, 181, 212], [120, 79, 181, 230], [104, 20, 355, 272]];
}
