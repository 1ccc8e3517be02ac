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
    let whole = (f64::from(pixels.width), f64::from(pixels.height));
    with_resizer(|r| r.resize(&src, &mut dst, &box_filter(whole, whole))).map_err(|e| resize_err(&e))?;
    Ok(Pixels { width, height, channels: pixels.channels, data: dst.into_vec() })
}

/// Resizes one 8-bit plane as [`resize`] does: the top-left `extent` of `src` (`src_size`,
/// packed; the extent in pixels, fractional: a chroma plane's picture may end inside its last
/// sample) into `dst` (`dst_size`, packed). An extent of exactly `dst_size` is copied.
pub(crate) fn resize_plane(
    src: &[u8],
    src_size: (u32, u32),
    extent: (f64, f64),
    dst: &mut [u8],
    dst_size: (u32, u32),
) -> Result<()> {
    let resize_err = |e: &dyn std::fmt::Display| Error::Image(format!("resize failed: {e}"));
    let whole = (f64::from(src_size.0), f64::from(src_size.1));
    if extent == (f64::from(dst_size.0), f64::from(dst_size.1))
        && dst_size.0 <= src_size.0
        && dst_size.1 <= src_size.1
    {
        let (w, sw) = (dst_size.0 as usize, src_size.0 as usize);
        if dst.len() != w * dst_size.1 as usize || src.len() != sw * src_size.1 as usize {
            return Err(Error::Image("internal: plane buffers of the wrong size".into()));
        }
        for (row, out) in dst.chunks_exact_mut(w.max(1)).enumerate() {
            out.copy_from_slice(&src[row * sw..row * sw + w]);
        }
        return Ok(());
    }
    let src = ImageRef::new(src_size.0, src_size.1, src, PixelType::U8).map_err(|e| resize_err(&e))?;
    let mut dst =
        Image::from_slice_u8(dst_size.0, dst_size.1, dst, PixelType::U8).map_err(|e| resize_err(&e))?;
    let options = box_filter(extent, whole);
    with_resizer(|r| r.resize(&src, &mut dst, &options)).map_err(|e| resize_err(&e))
}

/// Area averaging of the top-left `extent` (at most `whole`).
fn box_filter(extent: (f64, f64), whole: (f64, f64)) -> ResizeOptions {
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Box));
    if extent == whole {
        options
    } else {
        options.crop(0.0, 0.0, extent.0.min(whole.0), extent.1.min(whole.1))
    }
}

/// Runs `f` with this thread's resizer (it keeps its scratch buffers between images).
fn with_resizer<T>(f: impl FnOnce(&mut Resizer) -> T) -> T {
    thread_local! {
        static RESIZER: std::cell::RefCell<Resizer> = std::cell::RefCell::new(Resizer::new());
    }
    RESIZER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut r) => f(&mut r),
        Err(_) => f(&mut Resizer::new()),
    })
}
