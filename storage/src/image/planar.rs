//! The writer's re-encode of a YCbCr JPEG in YCbCr: decoded to its Y, Cb and Cr planes, each
//! plane resized (area averaging) to the target's 4:2:0 planes, and encoded from them. No chroma
//! upsampling and colour conversion on the way in, no colour conversion and chroma downsampling
//! on the way out, and a resize of 1.5 bytes a pixel instead of 3: what the RGB route ([`super::jpeg::decode`], [`super::resize::resize`],
//! [`super::jpeg::encode`]) spends beside the entropy coding.
//!
//! The pixels differ from the RGB route's by rounding (area averaging is linear, and so is the
//! colour transform, but each route rounds and clamps at its own steps) and by the chroma
//! filtering: libjpeg's fancy (triangle) upsampling followed by the encoder's 2×2 box is replaced
//! by one box resize of the chroma plane, which is at least as sharp. A 4:2:0 source whose size
//! does not change keeps its chroma samples exactly (before quantisation).

use std::cell::RefCell;
use std::ffi::c_int;

use super::pixels::MAX_PIXEL_BYTES;
use super::resize;
use crate::error::{Error, Result};
use crate::jpeg::{self, plane_size, Decompressor, JpegColor, JpegHeader, PlaneLayout, Rect};

/// TurboJPEG's `TJSAMP_420`: what the writer encodes RGB fields with (as `cv2.imencode`).
const S420: c_int = turbojpeg::raw::TJSAMP_TJSAMP_420 as c_int;

/// Whether [`reencode`] takes a JPEG with this header: 8-bit YCbCr, not lossless, with a chroma
/// subsampling TurboJPEG names (its planes have known sizes).
pub(super) fn takes(header: &JpegHeader) -> bool {
    header.color == JpegColor::YCbCr
        && !header.lossless
        && header.precision == 8
        && header.subsampling >= 0
        && header.subsampling != turbojpeg::raw::TJSAMP_TJSAMP_GRAY as c_int
        && (0..3).all(|c| plane_size(c, (header.width, header.height), header.subsampling) != (0, 0))
}

/// Buffers kept per thread between images: the decoded planes and the target's planes (fresh
/// buffers of this size cost page faults on every image).
#[derive(Default)]
struct Scratch {
    source: Vec<u8>,
    target: Vec<u8>,
    luma: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Re-encodes the YCbCr JPEG `data` (whose header `header` says [`takes`] it) at `target` size
/// as a 4:2:0 JPEG at `quality` with a restart marker every `restart_interval` MCUs. `dec` has
/// the writer's strict settings: a corrupt JPEG is an error, as in the RGB route.
pub(super) fn reencode(
    dec: &mut Decompressor,
    data: &[u8],
    header: &JpegHeader,
    target: (u32, u32),
    quality: u8,
    restart_interval: u16,
) -> Result<Vec<u8>> {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let out = reencode_with(&mut scratch, dec, data, header, target, quality, restart_interval);
            // A thread does not hold on to one huge image's planes.
            if scratch.source.capacity() + scratch.target.capacity() + scratch.luma.capacity() > KEPT_BYTES {
                *scratch = Scratch::default();
            }
            out
        }
        Err(_) => {
            reencode_with(&mut Scratch::default(), dec, data, header, target, quality, restart_interval)
        }
    })
}

/// Most bytes of planes kept for the next image (a 12-megapixel 4:2:0 photo's are 18 MB).
const KEPT_BYTES: usize = 32 << 20;

fn reencode_with(
    scratch: &mut Scratch,
    dec: &mut Decompressor,
    data: &[u8],
    header: &JpegHeader,
    (tw, th): (u32, u32),
    quality: u8,
    restart_interval: u16,
) -> Result<Vec<u8>> {
    // The whole image: a decode at a DCT scale (1/2, 1/4, 1/8) would be faster for big
    // downscales, but its block-wise low-pass moves the pixels about twice as far from a fair
    // resampling (Lanczos, OpenCV's INTER_AREA) as area averaging of the whole decode does.
    dec.set_geometry(1, Rect::default())?;
    let size = (header.width, header.height);

    // The decoded planes, one after another in `source`.
    let no_planes = || Error::Image(format!("internal: no YCbCr planes of a {}x{} JPEG", size.0, size.1));
    let source_planes = PlaneLayout::new(3, header.subsampling, size).ok_or_else(no_planes)?;
    if source_planes.bytes as u64 > MAX_PIXEL_BYTES {
        return Err(Error::Image(format!(
            "JPEG too large: {}x{} is over the limit of {MAX_PIXEL_BYTES} bytes of pixels",
            header.width, header.height
        )));
    }
    let source = fit(&mut scratch.source, source_planes.bytes);
    dec.decompress_planes(data, source, source_planes.geometry())?;

    // The target's planes, padded as TurboJPEG reads them (a 4:2:0 Y plane of an odd width has
    // one column more: the last column repeated, as libjpeg pads).
    let target_layout = PlaneLayout::new(3, S420, (tw, th)).ok_or_else(no_planes)?;
    let target_planes = target_layout.planes.map(|(_, w, h)| (w, h));
    let sizes = target_planes.map(|(w, h)| w as usize * h as usize);
    let target = fit(&mut scratch.target, target_layout.bytes);
    let (y, chroma) = target.split_at_mut(sizes[0]);
    let (cb, cr) = chroma.split_at_mut(sizes[1]);

    // The picture's extent in the luma plane (which may be padded to whole MCUs) and in each
    // chroma plane: a chroma sample covers (hf × vf) luma samples, and the target's chroma
    // plane covers the target's luma extent padded to even sizes.
    let extent = (f64::from(header.width), f64::from(header.height));
    let (_, w0, h0) = source_planes.planes[0];
    let (tcw, tch) = target_planes[1];
    let plane = |c: usize| {
        let (offset, w, h) = source_planes.planes[c];
        (&source[offset..offset + w as usize * h as usize], (w, h))
    };

    let luma = fit(&mut scratch.luma, tw as usize * th as usize);
    let (src, size) = plane(0);
    resize::resize_plane(src, size, extent, luma, (tw, th))?;
    pad(luma, (tw, th), y, target_planes[0]);
    for (c, out) in [(1, cb), (2, cr)] {
        let (src, (w, h)) = plane(c);
        let (hf, vf) = (f64::from(w0 / w), f64::from(h0 / h));
        // In this order the division is exact where no resize is needed (extent = target).
        let chroma_extent = (
            extent.0 * f64::from(tcw * 2) / f64::from(tw) / hf,
            extent.1 * f64::from(tch * 2) / f64::from(th) / vf,
        );
        resize::resize_plane(src, (w, h), chroma_extent, out, target_planes[c])?;
    }
    let target = &scratch.target;
    let (y, chroma) = target.split_at(sizes[0]);
    let (cb, cr) = chroma.split_at(sizes[1]);
    jpeg::compress_planes(&[y, cb, cr], (tw, th), S420, quality, restart_interval)
}

/// `buf` holding exactly `len` bytes (kept between calls; its contents are overwritten).
fn fit(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    buf.resize(len, 0);
    &mut buf[..len]
}

/// Copies `src` (`w × h`, packed) into the top-left of `dst` (`pw × ph`, packed, `pw ≥ w`,
/// `ph ≥ h`), repeating its last column and last row into the padding.
fn pad(src: &[u8], (w, h): (u32, u32), dst: &mut [u8], (pw, ph): (u32, u32)) {
    let (w, h, pw) = (w as usize, h as usize, pw as usize);
    for (row, out) in dst.chunks_exact_mut(pw).take(ph as usize).enumerate() {
        let from = &src[row.min(h - 1) * w..][..w];
        out[..w].copy_from_slice(from);
        let last = from[w - 1];
        out[w..].fill(last);
    }
}
