//! PNG decoding with the `png` crate: every colour type and bit depth, expanded to 8-bit grey,
//! grey+alpha, RGB or RGBA. Palettes and sub-byte depths are expanded, 16-bit samples keep their
//! high byte, and a `tRNS` transparency becomes an alpha channel (a palette with `tRNS` decodes
//! as RGBA, grey or RGB with `tRNS` as grey+alpha or RGBA). The alpha channel is kept: the
//! caller flattens it ([`super::flatten_alpha`]), dropping it as FFCV does or compositing.

use std::io::Cursor;

use png::{BitDepth, ColorType, Transformations};

use super::pixels::{Pixels, MAX_PIXEL_BYTES};
use crate::error::{Error, Result};

fn corrupt(e: png::DecodingError) -> Error {
    match e {
        png::DecodingError::LimitsExceeded => {
            Error::Image(format!("PNG too large: over the limit of {MAX_PIXEL_BYTES} bytes of pixels"))
        }
        e => Error::Image(format!("corrupt PNG: {e}")),
    }
}

/// Decodes a PNG (the first image of an APNG) to 1 (grey), 2 (grey+alpha), 3 (RGB) or 4 (RGBA)
/// channels.
pub(crate) fn decode(data: &[u8]) -> Result<Pixels> {
    let limit = usize::try_from(MAX_PIXEL_BYTES).unwrap_or(usize::MAX);
    let mut decoder = png::Decoder::new_with_limits(Cursor::new(data), png::Limits { bytes: limit });
    decoder.set_transformations(Transformations::EXPAND | Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(corrupt)?;
    let size = reader.output_buffer_size().ok_or_else(|| Error::Image("PNG too large".into()))?;
    if u64::try_from(size).unwrap_or(u64::MAX) > MAX_PIXEL_BYTES {
        let (w, h) = reader.info().size();
        return Err(Error::Image(format!(
            "PNG too large: {w}x{h} is over the limit of {MAX_PIXEL_BYTES} bytes of pixels"
        )));
    }
    let mut buf = vec![0u8; size];
    let info = reader.next_frame(&mut buf).map_err(corrupt)?;
    if info.bit_depth != BitDepth::Eight {
        return Err(Error::Image(format!(
            "unsupported PNG: {:?}-bit output after expansion",
            info.bit_depth
        )));
    }
    let samples = info.color_type.samples();
    let width = usize::try_from(info.width).map_err(|_| Error::Image("PNG too wide".into()))?;
    let height = usize::try_from(info.height).map_err(|_| Error::Image("PNG too tall".into()))?;
    let row = width.checked_mul(samples).ok_or_else(|| Error::Image("PNG too large".into()))?;
    let total = row.checked_mul(height).ok_or_else(|| Error::Image("PNG too large".into()))?;
    if width == 0 || height == 0 || info.line_size != row || buf.len() < total {
        return Err(Error::Image(format!(
            "corrupt PNG: {}x{} image with {} bytes a row",
            info.width, info.height, info.line_size
        )));
    }
    buf.truncate(total);
    let channels = match info.color_type {
        ColorType::Grayscale => 1,
        ColorType::GrayscaleAlpha => 2,
        ColorType::Rgb => 3,
        ColorType::Rgba => 4,
        ColorType::Indexed => {
            return Err(Error::Image("corrupt PNG: palette was not expanded".into()));
        }
    };
    Ok(Pixels { width: info.width, height: info.height, channels, data: buf })
}
