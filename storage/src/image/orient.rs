//! EXIF orientation (TIFF tag 274): turning stored pixels into the upright image, as Pillow's
//! `ImageOps.exif_transpose`.

use super::pixels::Pixels;

/// Applies EXIF orientation `orientation` (1–8; anything else is left as is) to `pixels`:
///
/// | tag | shown image                              |
/// |-----|------------------------------------------|
/// | 1   | as stored                                |
/// | 2   | mirrored left–right                      |
/// | 3   | rotated 180°                             |
/// | 4   | mirrored top–bottom                      |
/// | 5   | transposed (mirror along the main diagonal) |
/// | 6   | rotated 90° clockwise                    |
/// | 7   | transversed (mirror along the anti-diagonal) |
/// | 8   | rotated 90° counter-clockwise            |
///
/// Tags 5–8 swap width and height.
pub(crate) fn apply(pixels: Pixels, orientation: u32) -> Pixels {
    if !(2..=8).contains(&orientation) {
        return pixels;
    }
    let (w, h) = (pixels.width as usize, pixels.height as usize);
    let c = usize::from(pixels.channels);
    if w.checked_mul(h).and_then(|n| n.checked_mul(c)) != Some(pixels.data.len()) {
        // Never happens for decoder output; leave it alone rather than index out of bounds.
        return pixels;
    }
    let swap = orientation >= 5;
    let (ow, oh) = if swap { (h, w) } else { (w, h) };
    let mut out = Vec::with_capacity(pixels.data.len());
    for y in 0..oh {
        for x in 0..ow {
            // (sx, sy): the stored pixel shown at (x, y).
            let (sx, sy) = match orientation {
                2 => (w - 1 - x, y),
                3 => (w - 1 - x, h - 1 - y),
                4 => (x, h - 1 - y),
                5 => (y, x),
                6 => (y, h - 1 - x),
                7 => (w - 1 - y, h - 1 - x),
                _ => (w - 1 - y, x), // 8
            };
            let i = (sy * w + sx) * c;
            out.extend_from_slice(&pixels.data[i..i + c]);
        }
    }
    Pixels { width: ow as u32, height: oh as u32, channels: pixels.channels, data: out }
}
