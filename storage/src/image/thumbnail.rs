//! Small upright copies of stored images, for looking at a dataset (galleries, contact sheets):
//! a JPEG is decoded at the coarsest DCT scale (1/2, 1/4, 1/8) that still covers the thumbnail,
//! then area-averaged down to fit, so a 2000-pixel photo costs a fraction of a full decode.

use super::{resize, to_channels, Channels, ImageMode, Pixels, JPEG_MAGIC};
use crate::error::{Error, Result};
use crate::jpeg::{Decompressor, PixelFormat, Rect};
use crate::value::ImageRef;

/// The size of a `width × height` image made to fit in `max_side × max_side`, keeping its
/// aspect ratio (each side at least 1); an image that already fits keeps its size.
pub fn fit_size(width: u32, height: u32, max_side: u32) -> (u32, u32) {
    let longest = width.max(height);
    if longest <= max_side || longest == 0 {
        return (width, height);
    }
    let scale =
        |side: u32| ((u64::from(side) * u64::from(max_side)).div_ceil(u64::from(longest)) as u32).max(1);
    (scale(width), scale(height))
}

impl ImageRef<'_> {
    /// The image made to fit in `max_side × max_side` (aspect ratio kept, never enlarged), with
    /// the field's channels (3 or 1).
    ///
    /// # Errors
    /// As [`ImageRef::decode`]: a corrupt JPEG, a decoded size other than the row's, raw bytes
    /// of the wrong length; `max_side` 0.
    pub fn thumbnail(&self, max_side: u32) -> Result<Pixels> {
        if max_side == 0 {
            return Err(Error::Image("thumbnail size must be at least 1 pixel".into()));
        }
        let (width, height) = (u32::from(self.width), u32::from(self.height));
        let (tw, th) = fit_size(width, height, max_side);
        let pixels = match self.mode {
            ImageMode::Raw => self.decode()?,
            ImageMode::Jpg => self.decode_scaled(tw.max(th))?,
        };
        if (pixels.width, pixels.height) == (tw, th) {
            return Ok(pixels);
        }
        resize::resize(&pixels, tw, th)
    }

    /// Decodes the JPEG at the coarsest scale 1/d (d in 8, 4, 2, 1) whose longest side is still
    /// at least `longest` pixels.
    fn decode_scaled(&self, longest: u32) -> Result<Pixels> {
        let data = self.data;
        if !data.starts_with(&JPEG_MAGIC) {
            return Err(Error::Image("stored JPEG is not a JPEG".into()));
        }
        let mut dec = Decompressor::new()?;
        let header = dec.header(data)?;
        if (header.width, header.height) != (u32::from(self.width), u32::from(self.height)) {
            return Err(Error::Image(format!(
                "stored JPEG is {}x{}, but the row says {}x{}",
                header.width, header.height, self.width, self.height
            )));
        }
        let side = header.width.max(header.height);
        let denom = [8, 4, 2].into_iter().find(|d| side.div_ceil(*d) >= longest).unwrap_or(1);
        dec.set_geometry(denom, Rect::default())?;
        let (w, h) = (header.width.div_ceil(denom), header.height.div_ceil(denom));
        let (format, channels) = match self.channels {
            Channels::Grey => (PixelFormat::Grey, 1),
            Channels::Rgb => (PixelFormat::Rgb, 3),
        };
        let mut out = vec![0u8; w as usize * h as usize * format.size()];
        dec.decompress(data, &mut out, (w, h), format)?;
        Ok(to_channels(Pixels { width: w, height: h, channels, data: out }, self.channels))
    }
}

/// Encodes 1- or 3-channel pixels as a baseline JPEG at `quality` (1–100; RGB with 4:2:0
/// chroma), for showing them (thumbnails in a page), not for storing them.
///
/// # Errors
/// [`Error::Image`] for pixels of another channel count or a data length that does not match.
pub fn encode_jpeg(pixels: &Pixels, quality: u8) -> Result<Vec<u8>> {
    super::jpeg::encode(pixels, quality.clamp(1, 100), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(width: u16, height: u16, channels: Channels) -> (ImageMode, Vec<u8>) {
        let c = channels as usize;
        let data: Vec<u8> =
            (0..usize::from(width) * usize::from(height) * c).map(|i| (i * 7 % 251) as u8).collect();
        let pixels = Pixels { width: width.into(), height: height.into(), channels: c as u8, data };
        (ImageMode::Jpg, encode_jpeg(&pixels, 90).unwrap())
    }

    #[test]
    fn fit_keeps_aspect_and_never_enlarges() {
        assert_eq!(fit_size(2000, 1000, 128), (128, 64));
        assert_eq!(fit_size(1000, 2000, 128), (64, 128));
        assert_eq!(fit_size(100, 50, 128), (100, 50));
        assert_eq!(fit_size(5000, 1, 128), (128, 1));
    }

    #[test]
    fn a_jpeg_thumbnail_fits_at_any_scale() {
        for (w, h, side) in
            [(640u16, 480u16, 128u32), (640, 480, 600), (640, 480, 1000), (33, 2000, 64), (9, 9, 4)]
        {
            let (mode, data) = stored(w, h, Channels::Rgb);
            let image = ImageRef { mode, width: w, height: h, channels: Channels::Rgb, data: &data };
            let t = image.thumbnail(side).unwrap();
            assert_eq!((t.width, t.height), fit_size(w.into(), h.into(), side), "{w}x{h} in {side}");
            assert_eq!(t.channels, 3);
            assert_eq!(t.data.len(), (t.width * t.height * 3) as usize);
        }
    }

    #[test]
    fn grey_and_raw_thumbnails_keep_the_fields_channels() {
        let (mode, data) = stored(300, 200, Channels::Grey);
        let grey = ImageRef { mode, width: 300, height: 200, channels: Channels::Grey, data: &data };
        let t = grey.thumbnail(100).unwrap();
        assert_eq!((t.width, t.height, t.channels), (100, 67, 1));
        let raw = vec![200u8; 40 * 20 * 3];
        let image =
            ImageRef { mode: ImageMode::Raw, width: 40, height: 20, channels: Channels::Rgb, data: &raw };
        let t = image.thumbnail(10).unwrap();
        assert_eq!((t.width, t.height, t.channels), (10, 5, 3));
        assert!(t.data.iter().all(|&v| v == 200));
    }

    #[test]
    fn a_bad_image_is_an_error_not_a_panic() {
        let (mode, data) = stored(64, 48, Channels::Rgb);
        // The row says another size.
        let lying = ImageRef { mode, width: 48, height: 64, channels: Channels::Rgb, data: &data };
        assert!(lying.thumbnail(16).unwrap_err().to_string().contains("row says 48x64"));
        for cut in [0, 2, 100, data.len() / 2] {
            let cut = ImageRef { mode, width: 64, height: 48, channels: Channels::Rgb, data: &data[..cut] };
            assert!(cut.thumbnail(16).is_err(), "cut at {}", cut.data.len());
        }
        let short = [1u8; 5];
        let raw =
            ImageRef { mode: ImageMode::Raw, width: 4, height: 4, channels: Channels::Rgb, data: &short };
        assert!(raw.thumbnail(2).is_err());
        let ok = ImageRef { mode, width: 64, height: 48, channels: Channels::Rgb, data: &data };
        assert!(ok.thumbnail(0).is_err());
    }
}
