//! Perceptual hashes of stored images: the 64-bit DCT hash (`pHash`, as Python's `imagehash`
//! computes it): the image in grey, area-averaged to 32 × 32, its 2-D DCT-II, and one bit per
//! coefficient of the lowest 8 × 8 frequencies, set where it is above their median. Images that
//! look alike (re-encoded, resized, lightly edited) get hashes a few bits apart; different
//! images about 32. A JPEG is decoded in grey at the coarsest DCT scale (1/8 for photos over
//! 256 pixels) that still covers 32 pixels, so a hash costs a fraction of a full decode.

use super::{Channels, ImageMode, JPEG_MAGIC};
use crate::error::{Error, Result};
use crate::jpeg::{Decompressor, PixelFormat, Rect};
use crate::value::ImageRef;

/// The side of the grey image the DCT reads.
const SIDE: usize = 32;
/// The side of the block of low frequencies hashed.
const LOW: usize = 8;

impl ImageRef<'_> {
    /// The image's 64-bit perceptual hash (see the module's note); compare two with
    /// `(a ^ b).count_ones()`, their Hamming distance.
    ///
    /// # Errors
    /// As [`ImageRef::decode`]: a corrupt JPEG, a decoded size other than the row's, raw bytes
    /// of the wrong length.
    pub fn phash(&self) -> Result<u64> {
        let (w, h) = (usize::from(self.width), usize::from(self.height));
        match self.mode {
            ImageMode::Raw => {
                let c = match self.channels {
                    Channels::Grey => 1,
                    Channels::Rgb => 3,
                };
                if self.data.len() != w * h * c || w == 0 || h == 0 {
                    return Err(Error::Image(format!(
                        "raw image of {w}x{h}x{c} has {} bytes, not {}",
                        self.data.len(),
                        w * h * c
                    )));
                }
                let grey: Vec<u8> = match c {
                    1 => self.data.to_vec(),
                    _ => self.data.chunks_exact(3).map(|p| luma(p[0], p[1], p[2])).collect(),
                };
                Ok(phash_grey(w, h, &grey))
            }
            ImageMode::Jpg => {
                let data = self.data;
                if !data.starts_with(&JPEG_MAGIC) {
                    return Err(Error::Image("stored JPEG is not a JPEG".into()));
                }
                let mut dec = Decompressor::new()?;
                let header = dec.header(data)?;
                if (header.width as usize, header.height as usize) != (w, h) {
                    return Err(Error::Image(format!(
                        "stored JPEG is {}x{}, but the row says {w}x{h}",
                        header.width, header.height
                    )));
                }
                let side = header.width.min(header.height);
                let denom = [8, 4, 2].into_iter().find(|d| side.div_ceil(*d) >= SIDE as u32).unwrap_or(1);
                dec.set_geometry(denom, Rect::default())?;
                let (sw, sh) = (header.width.div_ceil(denom), header.height.div_ceil(denom));
                let mut grey = vec![0u8; sw as usize * sh as usize];
                dec.decompress(data, &mut grey, (sw, sh), PixelFormat::Grey)?;
                Ok(phash_grey(sw as usize, sh as usize, &grey))
            }
        }
    }
}

/// JPEG's luma (ITU-R BT.601), as libjpeg-turbo's grey output of a colour JPEG.
fn luma(r: u8, g: u8, b: u8) -> u8 {
    (0.299 * f32::from(r) + 0.587 * f32::from(g) + 0.114 * f32::from(b)).round().clamp(0.0, 255.0) as u8
}

/// The weights of an area-average from `n` source pixels to `SIDE` (each output pixel the mean
/// of the source span it covers, fractional pixels weighted by their share): per output pixel,
/// `(first source pixel, weights)`.
fn area_weights(n: usize) -> Vec<(usize, Vec<f32>)> {
    let scale = n as f64 / SIDE as f64;
    (0..SIDE)
        .map(|o| {
            let (lo, hi) = (o as f64 * scale, (o + 1) as f64 * scale);
            let first = lo.floor() as usize;
            let last = (hi.ceil() as usize).min(n).max(first + 1);
            let w: Vec<f32> = (first..last)
                .map(|s| ((hi.min((s + 1) as f64) - lo.max(s as f64)).max(0.0) / scale) as f32)
                .collect();
            (first, w)
        })
        .collect()
}

/// The pHash of a `width × height` grey image (row-major, one byte a pixel): bit `63 - k` is
/// coefficient `k` of the 8 × 8 low frequencies (row-major) above their median.
pub fn phash_grey(width: usize, height: usize, grey: &[u8]) -> u64 {
    assert_eq!(grey.len(), width * height, "grey pixels");
    // Area-average to SIDE × SIDE: rows first, then columns.
    let (wx, wy) = (area_weights(width), area_weights(height));
    let mut rows = vec![0.0f32; height * SIDE];
    for y in 0..height {
        let line = &grey[y * width..(y + 1) * width];
        for (o, (first, w)) in wx.iter().enumerate() {
            rows[y * SIDE + o] = w.iter().enumerate().map(|(k, w)| w * f32::from(line[first + k])).sum();
        }
    }
    let mut small = [[0.0f32; SIDE]; SIDE];
    for (o, (first, w)) in wy.iter().enumerate() {
        for x in 0..SIDE {
            small[o][x] = w.iter().enumerate().map(|(k, w)| w * rows[(first + k) * SIDE + x]).sum();
        }
    }
    // The DCT-II's lowest LOW frequencies along x, then along y (scaling does not change which
    // coefficients are above the median).
    let cos: Vec<[f32; SIDE]> = (0..LOW)
        .map(|u| {
            let mut c = [0.0f32; SIDE];
            for (x, c) in c.iter_mut().enumerate() {
                *c = (std::f64::consts::PI * (2 * x + 1) as f64 * u as f64 / (2 * SIDE) as f64).cos() as f32;
            }
            c
        })
        .collect();
    let mut along_x = [[0.0f32; LOW]; SIDE];
    for y in 0..SIDE {
        for u in 0..LOW {
            along_x[y][u] = small[y].iter().zip(&cos[u]).map(|(a, b)| a * b).sum();
        }
    }
    let mut coef = [0.0f32; LOW * LOW];
    for v in 0..LOW {
        for u in 0..LOW {
            coef[v * LOW + u] = (0..SIDE).map(|y| along_x[y][u] * cos[v][y]).sum();
        }
    }
    let mut sorted = coef;
    sorted.sort_by(f32::total_cmp);
    let median = (sorted[LOW * LOW / 2 - 1] + sorted[LOW * LOW / 2]) / 2.0;
    // Above the median by more than rounding noise: a flat region's zero coefficients must not
    // set bits at random (a flat image hashes to the DC bit alone).
    let noise = 1e-5 * coef.iter().fold(0.0f32, |m, c| m.max(c.abs()));
    coef.iter().enumerate().fold(0u64, |h, (k, &c)| if c > median + noise { h | 1 << (63 - k) } else { h })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A smooth, non-separable picture: a sum of plane waves whose directions depend on `seed`.
    fn picture(w: usize, h: usize, seed: u32) -> Vec<u8> {
        let waves: Vec<(f32, f32, f32)> = (0..12u32)
            .map(|k| {
                let t = (seed * 7919 + k * 104_729) as f32;
                ((t * 0.37).sin() * 9.0, (t * 0.71).cos() * 9.0, t)
            })
            .collect();
        (0..w * h)
            .map(|i| {
                let (x, y) = ((i % w) as f32 / w as f32, (i / w) as f32 / h as f32);
                let v: f32 = waves.iter().map(|(a, b, p)| (a * x + b * y + p).cos()).sum();
                (127.0 + 10.0 * v).clamp(0.0, 255.0) as u8
            })
            .collect()
    }

    #[test]
    fn resizing_keeps_the_hash_and_another_picture_changes_it() {
        let a = phash_grey(200, 150, &picture(200, 150, 1));
        let half = phash_grey(100, 75, &picture(100, 75, 1));
        let up = phash_grey(24, 18, &picture(24, 18, 1));
        let other = phash_grey(200, 150, &picture(200, 150, 3));
        assert!((a ^ half).count_ones() <= 4, "{a:064b} vs {half:064b}");
        assert!((a ^ up).count_ones() <= 8, "{a:064b} vs {up:064b}");
        assert!((a ^ other).count_ones() >= 16, "{a:064b} vs {other:064b}");
        // Half the bits set (the median splits them); a flat image has only its DC bit.
        assert!((24..=40).contains(&a.count_ones()));
        assert_eq!(phash_grey(40, 40, &[90; 1600]), 1 << 63);
    }

    #[test]
    fn area_weights_sum_to_one() {
        for n in [1, 7, 31, 32, 33, 63, 500] {
            for (_, w) in area_weights(n) {
                assert!((w.iter().sum::<f32>() - 1.0).abs() < 1e-4, "n {n}");
            }
        }
    }
}
