//! The `max_resolution` downscale: FFCV's size rule and an area-averaging resize.

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use super::pixels::Pixels;
use crate::error::{Error, Result};

/// FFCV's size rule: `ratio = max_res / max(w, h)`; when `ratio < 1` the new size is
/// `(floor(ratio·w), floor(ratio·h))`, each at least 1. `None` (or an image that already fits)
/// keeps the size.
pub(crate) fn target_size(width: u32, height: u32, max_resolution: Option<u32>) -> (u32, u32) {
    let Some(max_res) = max_resolution else {
        return (width, height);
    };
    let longest = width.max(height);
    if longest == 0 {
        return (width, height);
    }
    let ratio = f64::from(max_res) / f64::from(longest);
    if ratio >= 1.0 {
        return (width, height);
    }
    // Both products are < the original side, so they fit u32; `as` saturates anyway.
    let scale = |side: u32| ((ratio * f64::from(side)).floor() as u32).max(1);
    (scale(width), scale(height))
}

/// Resizes 1- or 3-channel pixels to `width × height` with `fast_image_resize`'s
/// `Convolution(Box)`: every output pixel is the mean of the source pixels whose centres fall in
/// its footprint (Pillow's BOX filter), i.e. area averaging. Integer fixed-point arithmetic, so
/// the result is deterministic.
pub(crate) fn resize(pixels: &Pixels, width: u32, height: u32) -> Result<Pixels> {
    if (width, height) == (pixels.width, pixels.height) {
        return Ok(pixels.clone());
    }
    let pixel_type = match pixels.channels {
        1 => PixelType::U8,
        3 => PixelType::U8x3,
        c => return Err(Error::Image(format!("cannot resize {c}-channel pixels"))),
    };
    let resize_err = |e: &dyn std::fmt::Display| Error::Image(format!("resize failed: {e}"));
    let src =
        ImageRef::new(pixels.width, pixels.height, &pixels.data, pixel_type).map_err(|e| resize_err(&e))?;
    let mut dst = Image::new(width, height, pixel_type);
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Box));
    Resizer::new().resize(&src, &mut dst, &options).map_err(|e| resize_err(&e))?;
    Ok(Pixels { width, height, channels: pixels.channels, data: dst.into_vec() })
}
