//! FFCV's per-sample image augmentations, over one sample's HWC `u8` RGB image in place.
//!
//! Each operation is an [`ImageOp`]: `apply(image, rng)` with the sample's own random stream
//! ([`SampleRng::for_op`]), so a pipeline of them gives the same pixels whatever the thread
//! count. Names, arguments and arithmetic follow FFCV's `ffcv.transforms` (blends clip to
//! `[0, 255]` and truncate, as FFCV's `astype(uint8)`).

use super::rng::SampleRng;
use crate::error::{Error, Result};

/// One sample's image: packed HWC RGB `u8`, `height × width × 3` bytes.
#[derive(Debug)]
pub struct ImageMut<'a> {
    pixels: &'a mut [u8],
    height: usize,
    width: usize,
}

impl<'a> ImageMut<'a> {
    /// Wraps `pixels` as a `height × width` RGB image.
    ///
    /// # Errors
    /// When `pixels` is not `height × width × 3` bytes.
    pub fn new(pixels: &'a mut [u8], height: usize, width: usize) -> Result<Self> {
        if pixels.len() != height * width * 3 {
            return Err(Error::InvalidArgument {
                what: "image buffer".into(),
                why: format!("{} bytes for {height}x{width}x3", pixels.len()),
            });
        }
        Ok(ImageMut { pixels, height, width })
    }

    /// The pixels, HWC.
    pub fn pixels(&mut self) -> &mut [u8] {
        self.pixels
    }

    /// Height in pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Width in pixels.
    pub fn width(&self) -> usize {
        self.width
    }
}

/// A per-sample augmentation of an RGB image, in place.
pub trait ImageOp: Send + Sync + std::fmt::Debug {
    /// Applies the operation to `image`, drawing from `rng`, the sample's stream for this
    /// operation.
    fn apply(&self, image: &mut ImageMut<'_>, rng: &mut SampleRng);

    /// `Some(p)` for an operation that mirrors the image left to right with probability `p`,
    /// drawn as `rng.chance(p)` and nothing else: an [`ImagePipeline`](super::ImagePipeline)
    /// folds such operations at its end into the normalisation's writes. `None` (the default)
    /// for every other operation.
    fn horizontal_flip(&self) -> Option<f64> {
        None
    }
}

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

/// The blend factor of FFCV's colour jitters: `uniform(max(0, 1 - m), 1 + m)`, drawn only when
/// the op applies (probability `p`).
fn jitter(magnitude: f64, p: f64, rng: &mut SampleRng) -> Option<f32> {
    if !rng.chance(p) {
        return None;
    }
    Some(rng.uniform_in((1.0 - magnitude).max(0.0), 1.0 + magnitude) as f32)
}

/// `ratio·a + (1 − ratio)·b`, clipped to `[0, 255]`, truncated (FFCV's `blend`).
fn blend(a: u8, b: f32, ratio: f32) -> u8 {
    (ratio * f32::from(a) + (1.0 - ratio) * b).clamp(0.0, 255.0) as u8
}

/// ITU-R 601 luma as FFCV's colour jitters compute it: truncated to `u8` (FFCV stores it in
/// the `uint8` destination before blending).
fn luma(px: &[u8]) -> f32 {
    let l = 0.2989 * f32::from(px[0]) + 0.587 * f32::from(px[1]) + 0.114 * f32::from(px[2]);
    f32::from(l as u8)
}

/// FFCV's `RandomBrightness(magnitude, p=0.5)`: blends with black.
#[derive(Debug, Clone, Copy)]
pub struct RandomBrightness {
    /// The factor is drawn from `[max(0, 1 - magnitude), 1 + magnitude]`.
    pub magnitude: f64,
    /// Probability of applying.
    pub p: f64,
}

impl ImageOp for RandomBrightness {
    fn apply(&self, image: &mut ImageMut<'_>, rng: &mut SampleRng) {
        if let Some(ratio) = jitter(self.magnitude, self.p, rng) {
            image.pixels.iter_mut().for_each(|v| *v = blend(*v, 0.0, ratio));
        }
    }
}

/// FFCV's `RandomContrast(magnitude, p=0.5)`: blends with the image's mean luma.
#[derive(Debug, Clone, Copy)]
pub struct RandomContrast {
    /// The factor is drawn from `[max(0, 1 - magnitude), 1 + magnitude]`.
    pub magnitude: f64,
    /// Probability of applying.
    pub p: f64,
}

impl ImageOp for RandomContrast {
    fn apply(&self, image: &mut ImageMut<'_>, rng: &mut SampleRng) {
        if let Some(ratio) = jitter(self.magnitude, self.p, rng) {
            let n = (image.height * image.width).max(1);
            let mean = image.pixels.chunks_exact(3).map(|px| f64::from(luma(px))).sum::<f64>() / n as f64;
            image.pixels.iter_mut().for_each(|v| *v = blend(*v, mean as f32, ratio));
        }
    }
}

/// FFCV's `RandomSaturation(magnitude, p=0.5)`: blends each pixel with its luma.
#[derive(Debug, Clone, Copy)]
pub struct RandomSaturation {
    /// The factor is drawn from `[max(0, 1 - magnitude), 1 + magnitude]`.
    pub magnitude: f64,
    /// Probability of applying.
    pub p: f64,
}

impl ImageOp for RandomSaturation {
    fn apply(&self, image: &mut ImageMut<'_>, rng: &mut SampleRng) {
        if let Some(ratio) = jitter(self.magnitude, self.p, rng) {
            for px in image.pixels.chunks_exact_mut(3) {
                let l = luma(px);
                px.iter_mut().for_each(|v| *v = blend(*v, l, ratio));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::SampleContext;

    fn rng() -> SampleRng {
        SampleRng::for_op(&SampleContext { index: 3, seed: 1, epoch: 0, position: 0 }, 0)
    }

    fn image(h: usize, w: usize) -> Vec<u8> {
        (0..h * w * 3).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn flips_mirror_and_twice_is_identity() {
        let (h, w) = (5, 7);
        let orig = image(h, w);
        let mut px = orig.clone();
        flip_horizontal(&mut px, w);
        assert_eq!(&px[0..3], &orig[(w - 1) * 3..w * 3]);
        flip_horizontal(&mut px, w);
        assert_eq!(px, orig);
        let mut img = ImageMut::new(&mut px, h, w).unwrap();
        RandomVerticalFlip { flip_prob: 1.0 }.apply(&mut img, &mut rng());
        assert_eq!(&px[0..w * 3], &orig[(h - 1) * w * 3..]);
    }

    #[test]
    fn translate_and_cutout_keep_the_size_and_fill() {
        let (h, w) = (8, 9);
        let mut px = image(h, w);
        let mut img = ImageMut::new(&mut px, h, w).unwrap();
        Cutout { crop_size: 4, fill: [7, 7, 7] }.apply(&mut img, &mut rng());
        assert_eq!(px.chunks_exact(3).filter(|p| p == &[7, 7, 7]).count(), 16);
        let mut px = vec![200u8; h * w * 3];
        let mut img = ImageMut::new(&mut px, h, w).unwrap();
        RandomTranslate { padding: 3, fill: [1, 2, 3] }.apply(&mut img, &mut rng());
        let filled = px.chunks_exact(3).filter(|p| p == &[1, 2, 3]).count();
        let kept = px.chunks_exact(3).filter(|p| p == &[200, 200, 200]).count();
        assert_eq!(filled + kept, h * w);
    }

    #[test]
    fn jitters_blend_as_ffcv() {
        assert_eq!(blend(100, 0.0, 1.5), 150);
        assert_eq!(blend(200, 0.0, 1.5), 255);
        let mut px = vec![10u8, 20, 30];
        let mut img = ImageMut::new(&mut px, 1, 1).unwrap();
        RandomSaturation { magnitude: 0.5, p: 1.0 }.apply(&mut img, &mut rng());
        // A grey pixel stays grey under any saturation change.
        let mut grey = vec![90u8; 3];
        let mut img = ImageMut::new(&mut grey, 1, 1).unwrap();
        RandomSaturation { magnitude: 0.5, p: 1.0 }.apply(&mut img, &mut rng());
        assert!(grey.iter().all(|&v| (89..=90).contains(&v)), "{grey:?}");
    }
}
