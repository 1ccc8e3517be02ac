//! The `max_resolution` downscale: FFCV's size rule and an area-averaging resize.

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::pixels::Pixels;
use crate::error::{Error, Result};
use crate::recent::{Kept, Recent};

mod horizontal;

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
    let src = ImageRef::new(pixels.width, pixels.height, &pixels.data, pixel_type).map_err(resize_failed)?;
    let mut dst = Image::new(width, height, pixel_type);
    let whole = (f64::from(pixels.width), f64::from(pixels.height));
    with_resizer(|r| r.resize(&src, &mut dst, &box_filter(whole, whole))).map_err(resize_failed)?;
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
    // The crop `fast_image_resize` is given (`box_filter`), from the top-left corner.
    let crop = (extent.0.min(whole.0), extent.1.min(whole.1));
    if f64::from(dst_size.0) != crop.0 && dst_size.1 > 0 && crop.1 > 0.0 {
        if let Some(taps) = horizontal_taps(src_size.0, crop.0, dst_size.0) {
            return resize_with_taps(src, src_size, crop.1, dst, dst_size, &taps);
        }
    }
    fir_plane(src, src_size, dst, dst_size, &box_filter(extent, whole))
}

/// `fast_image_resize` on one 8-bit plane (`src` of `src_size`, packed) into `dst`.
fn fir_plane(
    src: &[u8],
    src_size: (u32, u32),
    dst: &mut [u8],
    dst_size: (u32, u32),
    options: &ResizeOptions,
) -> Result<()> {
    let src = ImageRef::new(src_size.0, src_size.1, src, PixelType::U8).map_err(resize_failed)?;
    let mut dst = Image::from_slice_u8(dst_size.0, dst_size.1, dst, PixelType::U8).map_err(resize_failed)?;
    with_resizer(|r| r.resize(&src, &mut dst, options)).map_err(resize_failed)
}

/// The error of a resize `fast_image_resize` refused.
fn resize_failed(e: impl std::fmt::Display) -> Error {
    Error::Image(format!("resize failed: {e}"))
}

/// [`resize_plane`] as `fast_image_resize` does it for 8-bit images (vertical pass first, into a
/// buffer of the source columns the horizontal pass reads), its horizontal pass ours
/// ([`horizontal`]): the crop's top `crop_height` rows (`taps` give its width) to `dst_size`.
fn resize_with_taps(
    src: &[u8],
    src_size: (u32, u32),
    crop_height: f64,
    dst: &mut [u8],
    dst_size: (u32, u32),
    taps: &horizontal::Taps,
) -> Result<()> {
    #[cfg(test)]
    WITH_TAPS.with(|n| n.set(n.get() + 1));
    let (sw, sh) = (src_size.0 as usize, src_size.1 as usize);
    let (dw, dh) = (dst_size.0 as usize, dst_size.1 as usize);
    if src.len() != sw * sh || dst.len() != dw * dh {
        return Err(Error::Image("internal: plane buffers of the wrong size".into()));
    }
    if f64::from(dst_size.1) == crop_height {
        // No vertical pass (the crop's top is 0): rows straight from the source.
        horizontal::convolve(taps, &src[taps.first as usize..], sw, dh, dst);
        return Ok(());
    }
    // The vertical pass alone (a crop of the columns the taps read, as wide as its output, is
    // not resized across), then ours.
    let span = taps.last - taps.first;
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Box)).crop(
        f64::from(taps.first),
        0.0,
        f64::from(span),
        crop_height,
    );
    COLUMNS.with(|cell| {
        let mut columns = cell.take();
        let len = span as usize * dh;
        if columns.len() < len {
            columns.resize(len, 0);
        }
        let done = fir_plane(src, src_size, &mut columns[..len], (span, dst_size.1), &options);
        if done.is_ok() {
            horizontal::convolve(taps, &columns[..len], span as usize, dh, dst);
        }
        if columns.capacity() <= KEPT_BYTES {
            cell.set(columns);
        }
        done
    })
}

/// Most bytes of the vertical pass's output kept for the next plane.
const KEPT_BYTES: usize = 16 << 20;

#[cfg(test)]
thread_local! {
    /// Tests: planes resized with our horizontal pass on this thread.
    static WITH_TAPS: Cell<usize> = const { Cell::new(0) };
}

thread_local! {
    /// The vertical pass's output, kept between planes.
    static COLUMNS: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// This thread's taps from `in_size` pixels (the first `in1` of them) to `out_size`, the last
/// 16 sets kept (a corpus has few sizes, each with a luma and a chroma set).
fn horizontal_taps(in_size: u32, in1: f64, out_size: u32) -> Option<Rc<horizontal::Taps>> {
    thread_local! {
        static TAPS: Kept<(u32, u64, u32), horizontal::Taps> =
            const { RefCell::new(Recent::new(16)) };
    }
    let key = (in_size, in1.to_bits(), out_size);
    TAPS.with(|kept| {
        kept.borrow_mut().get_or_insert_with(
            |k| *k == key,
            || (key, horizontal::Taps::area(in_size, in1, out_size).map(Rc::new)),
        )
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Our horizontal pass gives `fast_image_resize`'s bytes: whole resizes compared at every
    /// width to 40 and larger ones, down (to 1/9: windows of 8, and past them, where
    /// `fast_image_resize` does it all) and up, heights resized and kept (no vertical pass),
    /// whole planes and fractional crops (a chroma plane's picture ending inside its last
    /// sample), with the AVX2 pass and the scalar one, each buffer ending at an inaccessible
    /// page.
    #[test]
    fn the_horizontal_pass_is_fast_image_resizes() {
        let mut next = beton_testkit::xorshift(0x5851_f42d_4c95_7f2d);
        let mut widths: Vec<u32> = (1..=40).collect();
        widths.extend([63, 64, 65, 100, 255, 256, 257, 333, 500, 512, 640, 1000, 1023, 2000]);
        let (mut ours, mut compared) = (0, 0);
        for scalar in [false, true] {
            horizontal::SCALAR.with(|c| c.set(scalar));
            for (case, &sw) in widths.iter().enumerate() {
                let sh = [1, 2, 7, 17, 64, 375][case % 6];
                let src: Vec<u8> = (0..sw * sh).map(|_| next() as u8).collect();
                for (dw, dh) in [
                    (sw * 256 / 500, sh * 256 / 500),
                    (sw / 2, sh / 2),
                    (sw / 3, sh),
                    (sw * 2 / 7, sh / 5),
                    (sw / 9, sh / 9),
                    (sw * 3 / 2, sh),
                    (sw + 3, sh * 2),
                ] {
                    let (dw, dh) = (dw.max(1), dh.max(1));
                    let whole = (f64::from(sw), f64::from(sh));
                    for extent in [whole, (whole.0 - 0.5, whole.1 - 0.25), (whole.0 - 0.75, whole.1)] {
                        if extent.0 <= 0.0 || extent.1 <= 0.0 {
                            continue;
                        }
                        // Source and output end at an inaccessible page: a gather or store
                        // past either faults.
                        let guarded_src = beton_testkit::Guarded::with(&src);
                        let mut a = beton_testkit::Guarded::with(&vec![0u8; (dw * dh) as usize]);
                        let mut b = vec![1u8; (dw * dh) as usize];
                        let before = WITH_TAPS.with(Cell::get);
                        resize_plane(guarded_src.as_ref(), (sw, sh), extent, a.as_mut(), (dw, dh)).unwrap();
                        ours += WITH_TAPS.with(Cell::get) - before;
                        fir_plane(&src, (sw, sh), &mut b, (dw, dh), &box_filter(extent, whole)).unwrap();
                        assert!(
                            a.as_ref() == b.as_slice(),
                            "{sw}x{sh} (extent {extent:?}) to {dw}x{dh}, scalar {scalar}: not fast_image_resize's"
                        );
                        compared += 1;
                    }
                }
            }
        }
        horizontal::SCALAR.with(|c| c.set(false));
        // (The fallback is taken too: 2000 -> 222 has windows of 9.)
        assert!(ours > 1000 && ours < compared, "{ours} of {compared} by our pass");
    }
}
