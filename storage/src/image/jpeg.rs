//! The writer's JPEG steps on top of the codec layer ([`crate::jpeg`]): the strict whole decode
//! (grey, YCbCr, RGB, CMYK and YCCK to 1 or 3 channels, with the EXIF orientation), encoding
//! [`Pixels`], and the restart interval that decides whether a passed-through JPEG is rewritten.

use super::pixels::{Pixels, MAX_PIXEL_BYTES};
use crate::error::{Error, Result};
use crate::jpeg::{markers, Decompressor, JpegHeader, PixelFormat};
pub(crate) use crate::jpeg::{with_restarts, JpegColor};

/// A fully decoded JPEG: its pixels as stored (not yet oriented; 1 channel for grey, 3 for
/// everything else: CMYK and YCCK are converted to RGB), the header and the metadata that
/// decides orientation and passthrough.
#[derive(Debug)]
pub(crate) struct DecodedJpeg {
    pub pixels: Pixels,
    pub header: JpegHeader,
    /// EXIF orientation tag (1–8 when present and readable).
    pub orientation: Option<u32>,
}

/// Decodes a whole JPEG strictly. Grey JPEGs give 1 channel; YCbCr and RGB JPEGs give RGB;
/// CMYK and YCCK give RGB through [`cmyk_to_rgb`].
pub(crate) fn decode(data: &[u8]) -> Result<DecodedJpeg> {
    decode_with(data, false)
}

/// [`decode`], optionally with libjpeg-turbo's fast integer IDCT (`TJPARAM_FASTDCT`), which is
/// what FFCV's loader uses (`TJFLAG_FASTDCT` in `libffcv.cpp`): with it the pixels equal FFCV's.
pub(crate) fn decode_with(data: &[u8], fast_dct: bool) -> Result<DecodedJpeg> {
    let mut dec = Decompressor::new()?;
    if fast_dct {
        dec.set_fast_dct(true)?;
    }
    let header = dec.header(data)?;
    if header.precision > 8 {
        return Err(Error::Image(format!(
            "unsupported JPEG: {}-bit samples (only 8-bit JPEGs are supported)",
            header.precision
        )));
    }
    let markers = markers::parse(data);
    let (channels, data_out) = match header.color {
        JpegColor::Grey => (1, decompress(&mut dec, data, &header, PixelFormat::Grey)?),
        JpegColor::YCbCr | JpegColor::Rgb => (3, decompress(&mut dec, data, &header, PixelFormat::Rgb)?),
        JpegColor::Cmyk | JpegColor::Ycck => {
            let cmyk = decompress(&mut dec, data, &header, PixelFormat::Cmyk)?;
            // libjpeg never inverts: it hands back the stored values (for YCCK, the CMYK that the
            // YCC transform encoded). Adobe (Photoshop) files store inverted CMYK, so an Adobe
            // marker (always present for YCCK) means inverted, as Pillow reads them.
            let inverted = markers.adobe_transform.is_some() || header.color == JpegColor::Ycck;
            (3, cmyk_to_rgb(&cmyk, inverted))
        }
    };
    let orientation = markers.orientation();
    Ok(DecodedJpeg {
        pixels: Pixels { width: header.width, height: header.height, channels, data: data_out },
        header,
        orientation,
    })
}

/// Decodes the whole JPEG to `format`; returns the tightly packed pixels, refusing more than
/// [`MAX_PIXEL_BYTES`].
fn decompress(
    dec: &mut Decompressor,
    data: &[u8],
    header: &JpegHeader,
    format: PixelFormat,
) -> Result<Vec<u8>> {
    let too_large = || {
        Error::Image(format!(
            "JPEG too large: {}x{} is over the limit of {MAX_PIXEL_BYTES} bytes of pixels",
            header.width, header.height
        ))
    };
    let w = usize::try_from(header.width).map_err(|_| too_large())?;
    let h = usize::try_from(header.height).map_err(|_| too_large())?;
    let row = w.checked_mul(format.size()).ok_or_else(too_large)?;
    let total = row.checked_mul(h).ok_or_else(too_large)?;
    if u64::try_from(total).unwrap_or(u64::MAX) > MAX_PIXEL_BYTES {
        return Err(too_large());
    }
    let mut out = vec![0u8; total];
    dec.decompress(data, &mut out, (header.width, header.height), format)?;
    Ok(out)
}

/// (a·b)/255 rounded, exact for 0..=255 (Pillow's `MULDIV255`).
fn muldiv255(a: u8, b: u8) -> u8 {
    let t = u32::from(a) * u32::from(b) + 128;
    // ((t >> 8) + t) >> 8 ≤ 255 for a, b ≤ 255.
    u8::try_from(((t >> 8) + t) >> 8).unwrap_or(u8::MAX)
}

/// CMYK (4 bytes a pixel) to RGB as Pillow does (`R = 255 − min(255, C + K)`-free form:
/// `R = (255 − K) − (C·(255 − K))/255`). With `inverted` (Adobe files) the stored bytes are
/// 255 − C etc. first un-inverted, which makes `R ≈ C'·K'/255` on the stored values.
pub(crate) fn cmyk_to_rgb(cmyk: &[u8], inverted: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(cmyk.len() / 4 * 3);
    for px in cmyk.chunks_exact(4) {
        let [c, m, y, k] = [px[0], px[1], px[2], px[3]];
        let (c, m, y, k) = if inverted { (255 - c, 255 - m, 255 - y, 255 - k) } else { (c, m, y, k) };
        let nk = 255 - k;
        out.push(nk - muldiv255(c, nk));
        out.push(nk - muldiv255(m, nk));
        out.push(nk - muldiv255(y, nk));
    }
    out
}

/// Encodes 1-channel (TJSAMP_GRAY) or 3-channel RGB (4:2:0, as cv2.imencode and FFCV) pixels at
/// `quality` (1–100), with a restart marker every `restart_interval` MCUs (0: none) and, then,
/// optimised Huffman tables (which win back the markers' bytes).
pub(crate) fn encode(pixels: &Pixels, quality: u8, restart_interval: u16) -> Result<Vec<u8>> {
    crate::jpeg::compress(
        &pixels.data,
        (pixels.width, pixels.height, pixels.channels),
        quality,
        restart_interval,
    )
}

/// The restart interval (DRI, in MCUs) of a JPEG, from the markers before its first scan; 0 when
/// it has none (or the markers cannot be read: the caller has decoded the JPEG already).
pub(crate) fn restart_interval(data: &[u8]) -> u16 {
    markers::parse(data).restart_interval
}
