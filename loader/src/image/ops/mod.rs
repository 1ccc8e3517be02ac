//! The user-visible image operations, one file each (the three colour jitters share one, as in
//! FFCV's `color_jitter.py`): FFCV's per-sample augmentations
//! ([`ImageOp`]s over one sample's HWC `u8` RGB image in place), and the crop, resize and
//! normalisation settings the decoders and [`ImagePipeline`](crate::image::ImagePipeline) take.
//!
//! Each [`ImageOp`] is `apply(image, rng)` with the sample's own random stream
//! ([`SampleRng::for_op`](crate::image::SampleRng::for_op)), so a pipeline of them gives the same
//! pixels whatever the thread count. Names, arguments and arithmetic follow FFCV's
//! `ffcv.transforms` (blends clip to `[0, 255]` and truncate, as FFCV's `astype(uint8)`).
//!
//! Adding an operation: a new file here with a struct implementing [`ImageOp`], and its line in
//! `operations!` below (which declares the file and re-exports the struct, so it is
//! `beton_loader::image::YourOp`); see `crate::image` for the Python side.

use crate::error::{Error, Result};
use crate::image::rng::SampleRng;

/// Declares each operation's file and re-exports its public items: one line per file.
macro_rules! operations {
    ($($file:ident::{$($item:ident),+ $(,)?}),* $(,)?) => {
        $(mod $file; pub use $file::{$($item),+};)*
    };
}

operations! {
    color_jitter::{RandomBrightness, RandomContrast, RandomSaturation},
    crop::{center_crop, random_resized_crop, Crop},
    cutout::{Cutout},
    flip::{RandomHorizontalFlip, RandomVerticalFlip},
    normalize::{FloatType, Layout, NormalizeImage},
    resize::{Interpolation},
    translate::{RandomTranslate},
}

pub(crate) use flip::flip_horizontal;
pub(crate) use normalize::{f32_to_f16, Table};
pub(crate) use resize::resize_into;

#[cfg(test)]
mod tests;

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
    /// drawn as `rng.chance(p)` and nothing else: an [`ImagePipeline`](crate::image::ImagePipeline)
    /// folds such operations at its end into the normalisation's writes. `None` (the default)
    /// for every other operation.
    fn horizontal_flip(&self) -> Option<f64> {
        None
    }
}
