//! Image encoding for the writer and decoding of stored images: JPEG (libjpeg-turbo through the
//! `turbojpeg` crate) and PNG sources, colour conversion (grey, CMYK, YCCK), EXIF orientation,
//! the `max_resolution` downscale, and the write modes (raw / jpg / smart / proportion) with
//! JPEG passthrough.
//!
//! Everything here takes untrusted bytes and never panics: bad input is an [`Error::Image`].
//!
//! # What the writer does with an image ([`encode_image`])
//!
//! 1. **Source.** [`ImageSource::Pixels`] (1, 3 or 4 channels, HWC), or JPEG / PNG bytes
//!    ([`ImageSource::Encoded`], [`ImageSource::File`]) recognised by their magic bytes, never by
//!    the file name.
//! 2. **Decode, strictly.** JPEG: libjpeg-turbo with every libjpeg *warning* made an error
//!    (`TJPARAM_STOPONWARNING`), so a truncated or corrupt JPEG is refused instead of being stored
//!    as a half-grey picture. Grey, YCbCr (any subsampling), RGB, CMYK and YCCK; baseline,
//!    extended, progressive, arithmetic; 8-bit samples only. Adobe CMYK/YCCK (inverted, as
//!    Photoshop writes them) is converted to RGB as Pillow does. Bytes after EOI are ignored.
//!    PNG: every colour type and bit depth; palettes expanded, 16-bit samples keep their high
//!    byte, a `tRNS` chunk read as alpha. Decoded images over 2 GiB of pixels are refused.
//! 3. **EXIF orientation is applied at write time**: a JPEG whose EXIF orientation tag is 2–8 is
//!    rotated / mirrored to be upright (tag 6: stored 64×48, shown and stored 48×64). The stored
//!    image is therefore always upright and carries no orientation; [`decode_stored`] never
//!    rotates. An unreadable EXIF block is ignored (orientation 1).
//! 4. **Transparency** (a PNG with an alpha channel, a palette or grey/RGB PNG with `tRNS`, RGBA
//!    pixels) is flattened before anything else ([`flatten_alpha`]). By default alpha is
//!    dropped and the colour channels kept as they are, as FFCV does (its writer takes images
//!    through Pillow's `convert("RGB")`): colours hidden under transparent pixels (often black,
//!    or stray colours in clip art) show. With [`ImageOptions::alpha_background`] `(r, g, b)`
//!    each pixel is composited onto that colour instead, straight (not premultiplied) alpha
//!    rounded to nearest: `out = (a·c + (255 − a)·bg + 127) / 255` per channel, so a fully
//!    transparent pixel becomes the background and an opaque one keeps its colour. A grey+alpha
//!    source composites each of R, G, B (grey replicated). Images with a pixel whose alpha is
//!    below 255 are counted in the writer's report
//!    ([`WriteReport::alpha_flattened`](crate::WriteReport::alpha_flattened)); fully opaque
//!    ones lose nothing either way.
//! 5. **Channels.** An RGB field replicates grey sources; a grey field converts colour to luma
//!    with ITU-R 601-2, as Pillow's `convert("L")`: `L = (299·R + 587·G + 114·B + 500) / 1000`.
//! 6. **Downscale** to `max_resolution` with FFCV's size rule (`ratio = max_res / max(w, h)`;
//!    below 1 the size becomes `(floor(ratio·w), floor(ratio·h))`, each at least 1) by **area
//!    averaging**: `fast_image_resize`'s `Convolution(FilterType::Box)`, Pillow's BOX filter, in
//!    which each output pixel is the mean of the source pixels whose centres fall inside its
//!    footprint. That is exact area averaging for integer ratios and a close stand-in for
//!    OpenCV's `INTER_AREA` (which FFCV uses) for fractional ones. Integer arithmetic:
//!    deterministic. A final size over 65535 on either side is an error (the row stores `u16`).
//! 7. **Mode.** raw: HWC bytes. jpg: libjpeg-turbo at `jpeg_quality`, 4:2:0 chroma subsampling
//!    for RGB (as `cv2.imencode`, which FFCV uses), a 1-component JPEG for grey fields. smart:
//!    jpg when the raw bytes would exceed the threshold. proportion: jpg when the per-sample
//!    `draw` is below the probability. A YCbCr JPEG re-encoded for an RGB field (downscaled, or
//!    passthrough off) and needing no rotation never leaves YCbCr (`planar.rs`): its Y, Cb and
//!    Cr planes are decoded, each is resized by the same area averaging to the target's 4:2:0
//!    planes, and the JPEG is encoded from them: no chroma upsampling and colour conversion in,
//!    no colour conversion and chroma downsampling out, half the bytes resized. Its pixels
//!    differ from decoding to RGB, resizing and encoding by rounding and chroma filtering
//!    (against a clean original both are as close: tested), and a 4:2:0 source re-encoded at
//!    its own size keeps its chroma samples.
//! 8. **JPEG passthrough.** When the result is to be a JPEG and the source is a JPEG that needs
//!    no downscale and no rotation and is YCbCr (RGB field) or grey (grey field), its coded data
//!    is stored unchanged: no generation loss. What decides it is read from the header alone;
//!    the JPEG is then checked ([`ImageOptions::verify`], default on) by one entropy-level pass
//!    that decodes every Huffman code as libjpeg-turbo would ([`crate::jpeg::entropy`]), or, for
//!    what that pass cannot vouch for (progressive, arithmetic, damage), by the strict whole
//!    decode of step 2; a corrupt JPEG is refused either way. With `verify` off its bytes are
//!    stored exactly as given.
//! 9. **Restart markers.** JPEGs are written with a restart marker every
//!    [`ImageOptions::jpeg_restart_interval`] MCUs (default 1) and optimised Huffman tables
//!    (libjpeg-turbo encodes with the standard ones, then
//!    [`optimize_tables`](crate::jpeg::entropy::optimize_tables) rewrites the scan with the
//!    tables libjpeg-turbo's own optimisation computes: the same bytes, at less cost); a
//!    passed-through JPEG without that interval is rewritten losslessly (its DCT coefficients
//!    unchanged, so its pixels are) to have it: by the entropy pass, which re-cuts the intervals
//!    bit for bit and keeps the source's Huffman tables, or for what that pass declines by
//!    libjpeg-turbo's transform (optimised tables). The loader's crop decoders cut a crop's
//!    restart intervals out of the JPEG and entropy-decode only those. FFCV reads such JPEGs as
//!    any other.
//!
//! The same input always gives the same bytes.
//!
//! For looking at images: [`ImageRef::thumbnail`](crate::ImageRef::thumbnail) (a DCT-scaled
//! decode made to fit a box) and [`encode_jpeg`].

use std::path::PathBuf;

use crate::error::{Error, Result};

mod jpeg;
mod orient;
mod phash;
mod pixels;
mod planar;
mod png;
mod resize;
mod thumbnail;

pub use phash::phash_grey;
pub use pixels::Pixels;
pub use thumbnail::{encode_jpeg, fit_size};
#[cfg(test)]
mod alpha_tests;
#[cfg(test)]
mod tests;

/// How an image payload is stored (the `mode` byte of the row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageMode {
    /// JPEG bytes (`mode` 0).
    Jpg = 0,
    /// Raw HWC `u8` pixels (`mode` 1).
    Raw = 1,
}

impl ImageMode {
    /// The mode for a stored `mode` byte; `None` for anything but 0 and 1.
    pub fn from_byte(b: u8) -> Option<ImageMode> {
        match b {
            0 => Some(ImageMode::Jpg),
            1 => Some(ImageMode::Raw),
            _ => None,
        }
    }

    /// `"jpg"` or `"raw"`, FFCV's names.
    pub fn name(self) -> &'static str {
        match self {
            ImageMode::Jpg => "jpg",
            ImageMode::Raw => "raw",
        }
    }
}

/// Channels of an image field: RGBImage fields hold 3, GreyImage fields 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channels {
    /// 3 channels, RGB.
    Rgb = 3,
    /// 1 channel, luma.
    Grey = 1,
}

/// How the writer chooses between JPEG and raw for each image (FFCV's `write_mode`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WriteMode {
    /// Always raw pixels.
    Raw,
    /// Always JPEG.
    Jpg,
    /// JPEG when the raw image would take more than `threshold` bytes (FFCV's `smart_threshold`).
    Smart {
        /// Raw size in bytes above which the image is JPEG-encoded.
        threshold: u64,
    },
    /// JPEG with probability `probability`, drawn per sample from the writer's seed and the
    /// sample index (FFCV's `compress_probability`), so the choice does not depend on threads.
    Proportion {
        /// Probability of JPEG, in [0, 1].
        probability: f64,
    },
}

/// Options of an image field.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageOptions {
    /// Raw / jpg / smart / proportion.
    pub write_mode: WriteMode,
    /// Longest side after the writer's downscale (area averaging); `None` keeps the size.
    pub max_resolution: Option<u32>,
    /// JPEG quality, 1–100 (FFCV's default 90).
    pub jpeg_quality: u8,
    /// Store a source JPEG as is when it is to be stored as JPEG, already fits `max_resolution`,
    /// needs no rotation and is YCbCr or grey (no decode/re-encode loss). Default true.
    pub jpeg_passthrough: bool,
    /// A restart marker every this many MCUs in the JPEGs written (0: none, as FFCV writes).
    /// Default 1: the loader's crop decoders then entropy-decode only the MCUs around the crop
    /// (about 1.3× faster random resized crops at 512 px) for about 3 % more bytes. A passed-
    /// through JPEG with another interval is rewritten losslessly (same pixels) to have it.
    pub jpeg_restart_interval: u16,
    /// Check a passed-through JPEG before storing it (default true): every Huffman code of its
    /// scan is decoded (an entropy-level pass, no pixels; a JPEG that pass cannot vouch for is
    /// decoded whole), so a corrupt JPEG is refused at write time, and it is given restart
    /// markers as `jpeg_restart_interval` says. `false` stores a passed-through JPEG's bytes
    /// exactly as given, after reading only its header: no check of its data (a corrupt one
    /// fails when the loader decodes it) and no restart markers added.
    pub verify: bool,
    /// What transparency is flattened onto: `None` (the default) drops alpha and keeps the
    /// colour channels as they are, as FFCV does; `Some([r, g, b])` composites each pixel onto
    /// that colour (`out = (a·c + (255 − a)·bg + 127) / 255`, straight alpha). See step 4 of
    /// the [module docs](self).
    pub alpha_background: Option<[u8; 3]>,
}

impl Default for ImageOptions {
    fn default() -> Self {
        ImageOptions {
            write_mode: WriteMode::Raw,
            max_resolution: None,
            jpeg_quality: 90,
            jpeg_passthrough: true,
            jpeg_restart_interval: 1,
            verify: true,
            alpha_background: None,
        }
    }
}

impl ImageOptions {
    /// The default options with write mode `write_mode` (e.g. raw pixels for exact tests).
    pub fn with_mode(write_mode: WriteMode) -> Self {
        ImageOptions { write_mode, ..ImageOptions::default() }
    }
}

/// An image given to the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSource {
    /// Pixels already decoded.
    Pixels(Pixels),
    /// The bytes of a JPEG or PNG file (sniffed by magic bytes, not by name).
    Encoded(Vec<u8>),
    /// A JPEG or PNG file to read.
    File(PathBuf),
    /// An image as a `.beton` file stores it, copied from one (compaction, export): stored byte
    /// for byte, never decoded or re-encoded. A raw image's bytes must be `width × height ×
    /// channels`.
    Stored(EncodedImage),
}

/// An image ready to store: the row's mode, width, height and the payload bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedImage {
    /// JPEG or raw.
    pub mode: ImageMode,
    /// Width in pixels (fits the row's `<u2`).
    pub width: u16,
    /// Height in pixels (fits the row's `<u2`).
    pub height: u16,
    /// The payload.
    pub data: Vec<u8>,
}

/// Encodes one image for a field of `channels` channels. `draw` is a uniform number in [0, 1)
/// derived from (seed, sample index), used by [`WriteMode::Proportion`].
///
/// # Errors
/// [`Error::Image`] naming what is wrong: not a JPEG or PNG, corrupt or truncated data, a size
/// over 65535 after the downscale, an unsupported colour space.
pub fn encode_image(
    source: &ImageSource,
    options: &ImageOptions,
    channels: Channels,
    draw: f64,
) -> Result<EncodedImage> {
    encode_image_flattened(source, options, channels, draw).map(|(image, _)| image)
}

/// [`encode_image`], also saying whether the image had transparency (a pixel whose alpha is
/// below 255) that was flattened as [`ImageOptions::alpha_background`] says: what the writer
/// counts in its report.
///
/// # Errors
/// As [`encode_image`].
pub fn encode_image_flattened(
    source: &ImageSource,
    options: &ImageOptions,
    channels: Channels,
    draw: f64,
) -> Result<(EncodedImage, bool)> {
    // An image read from a file: its errors name the file (a sample index alone does not say
    // which of a folder's images is broken).
    encode(source, options, channels, draw).map_err(|e| match (source, e) {
        (ImageSource::File(path), Error::Image(why)) => Error::Image(format!("{}: {why}", path.display())),
        (_, e) => e,
    })
}

fn encode(
    source: &ImageSource,
    options: &ImageOptions,
    channels: Channels,
    draw: f64,
) -> Result<(EncodedImage, bool)> {
    if !(1..=100).contains(&options.jpeg_quality) {
        return Err(Error::Image(format!("jpeg_quality {} is not in 1..=100", options.jpeg_quality)));
    }
    if options.max_resolution == Some(0) {
        return Err(Error::Image("max_resolution 0: must be at least 1".into()));
    }
    let file_bytes;
    let (bytes, loaded) = match source {
        ImageSource::Stored(img) => {
            let raw = u64::from(img.width) * u64::from(img.height) * channels as u64;
            if img.mode == ImageMode::Raw && img.data.len() as u64 != raw {
                return Err(Error::Image(format!(
                    "a stored raw {}×{} image of {} channels needs {raw} bytes, got {}",
                    img.width,
                    img.height,
                    channels as u8,
                    img.data.len()
                )));
            }
            return Ok((img.clone(), false));
        }
        ImageSource::Pixels(p) => {
            check_pixels(p)?;
            (None, Loaded::Pixels(p))
        }
        ImageSource::Encoded(b) => {
            if let Some((width, height, data)) = fast_passthrough(b, options, channels, draw) {
                let data = data.unwrap_or_else(|| b.clone());
                return Ok((EncodedImage { mode: ImageMode::Jpg, width, height, data }, false));
            }
            if let Some(image) = planar_reencode(b, options, channels, draw) {
                return Ok((image, false));
            }
            (Some(b.as_slice()), decode_source(b)?)
        }
        ImageSource::File(path) => {
            file_bytes = FileBuffer::read(path)?;
            if let Some((width, height, data)) = fast_passthrough(&file_bytes, options, channels, draw) {
                let data = data.unwrap_or_else(|| file_bytes.to_vec());
                return Ok((EncodedImage { mode: ImageMode::Jpg, width, height, data }, false));
            }
            if let Some(image) = planar_reencode(&file_bytes, options, channels, draw) {
                return Ok((image, false));
            }
            (Some(&file_bytes[..]), decode_source(&file_bytes)?)
        }
    };

    // Passthrough is possible only for a JPEG that needs no rotation and has the field's colour
    // space (a grey JPEG in an RGB field would hand a reader 1 channel where it expects 3).
    let passthrough_ok = match (&loaded, bytes) {
        (Loaded::Jpeg(j), Some(_)) => {
            options.jpeg_passthrough
                && j.orientation.is_none_or(|o| o == 1)
                && !j.header.lossless
                && match channels {
                    Channels::Rgb => j.header.color == jpeg::JpegColor::YCbCr,
                    Channels::Grey => j.header.color == jpeg::JpegColor::Grey,
                }
        }
        _ => false,
    };

    let background = options.alpha_background;
    let mut flattened = false;
    let pixels = match loaded {
        Loaded::Pixels(p) if has_alpha(p) => {
            let (p, transparent) = flatten_alpha(p, background);
            flattened = transparent;
            to_channels(p, channels)
        }
        Loaded::Pixels(p) => to_channels_ref(p, channels),
        Loaded::Png(p) if has_alpha(&p) => {
            let (p, transparent) = flatten_alpha(&p, background);
            flattened = transparent;
            to_channels(p, channels)
        }
        Loaded::Png(p) => to_channels(p, channels),
        Loaded::Jpeg(j) => {
            let p = match j.orientation {
                Some(o) => orient::apply(j.pixels, o),
                None => j.pixels,
            };
            to_channels(p, channels)
        }
    };
    let (width, height) = resize::target_size(pixels.width, pixels.height, options.max_resolution);
    let (w16, h16) = check_size(width, height)?;
    let needs_resize = (width, height) != (pixels.width, pixels.height);
    let mode = mode_of(options.write_mode, (width, height), channels, draw);

    if mode == ImageMode::Jpg && passthrough_ok && !needs_resize {
        if let Some(b) = bytes {
            let interval = options.jpeg_restart_interval;
            let data = if interval == 0 || jpeg::restart_interval(b) == interval {
                b.to_vec()
            } else {
                jpeg::with_restarts(b, interval)?
            };
            return Ok((EncodedImage { mode, width: w16, height: h16, data }, false));
        }
    }

    let pixels = if needs_resize { resize::resize(&pixels, width, height)? } else { pixels };
    let data = match mode {
        ImageMode::Raw => pixels.data,
        ImageMode::Jpg => jpeg::encode(&pixels, options.jpeg_quality, options.jpeg_restart_interval)?,
    };
    Ok((EncodedImage { mode, width: w16, height: h16, data }, flattened))
}

/// The mode an image of `width × height` is stored in: what `write_mode` says, for smart by its
/// raw size, for proportion by the sample's `draw`.
fn mode_of(write_mode: WriteMode, (width, height): (u32, u32), channels: Channels, draw: f64) -> ImageMode {
    let raw_bytes = u64::from(width) * u64::from(height) * channels as u64;
    match write_mode {
        WriteMode::Raw => ImageMode::Raw,
        WriteMode::Jpg => ImageMode::Jpg,
        WriteMode::Smart { threshold } if raw_bytes > threshold => ImageMode::Jpg,
        WriteMode::Smart { .. } => ImageMode::Raw,
        WriteMode::Proportion { probability } if draw < probability => ImageMode::Jpg,
        WriteMode::Proportion { .. } => ImageMode::Raw,
    }
}

/// The passthrough of a JPEG without decoding it, when it applies (step 8 of the [module
/// docs](self)): what the whole decode would decide from the JPEG's header (its colour, size,
/// orientation, precision, the write mode), then the entropy-level check and restart rewrite
/// ([`crate::jpeg::entropy`]), or with [`ImageOptions::verify`] off nothing more. Gives the
/// stored size and the bytes to store (`None`: `bytes` as they are); `None` when the JPEG must
/// be decoded: no passthrough, or one the entropy pass cannot vouch for (the whole decode then
/// gives the verdict and the error's message).
fn fast_passthrough(
    bytes: &[u8],
    options: &ImageOptions,
    channels: Channels,
    draw: f64,
) -> Option<(u16, u16, Option<Vec<u8>>)> {
    if !options.jpeg_passthrough || !bytes.starts_with(&JPEG_MAGIC) {
        return None;
    }
    let header = jpeg_header(bytes)?;
    let colour = match channels {
        Channels::Rgb => jpeg::JpegColor::YCbCr,
        Channels::Grey => jpeg::JpegColor::Grey,
    };
    if header.lossless || header.precision != 8 || header.color != colour {
        return None;
    }
    if crate::jpeg::markers::parse(bytes).orientation().is_some_and(|o| o != 1) {
        return None;
    }
    let size = (header.width, header.height);
    if resize::target_size(size.0, size.1, options.max_resolution) != size
        || mode_of(options.write_mode, size, channels, draw) != ImageMode::Jpg
    {
        return None;
    }
    let (width, height) = check_size(size.0, size.1).ok()?;
    if !options.verify {
        return Some((width, height, None));
    }
    match crate::jpeg::entropy::check_with_restarts(bytes, options.jpeg_restart_interval)? {
        crate::jpeg::entropy::Checked::AsIs => Some((width, height, None)),
        crate::jpeg::entropy::Checked::Rewritten(data) => Some((width, height, Some(data))),
    }
}

/// The header of a JPEG as libjpeg-turbo reads it (strictly). `None` for a header it refuses.
fn jpeg_header(bytes: &[u8]) -> Option<crate::jpeg::JpegHeader> {
    with_decompressor(|d| d.header(bytes).ok())
}

/// Runs `f` with this thread's strict decompressor (creating one costs more than reading a
/// header or decoding a small JPEG). `None` when it cannot be had (created, or borrowed again
/// from inside `f`).
fn with_decompressor<T>(f: impl FnOnce(&mut crate::jpeg::Decompressor) -> Option<T>) -> Option<T> {
    thread_local! {
        static DECOMPRESSOR: std::cell::RefCell<Option<crate::jpeg::Decompressor>> =
            const { std::cell::RefCell::new(None) };
    }
    DECOMPRESSOR.with(|cell| {
        let mut d = cell.try_borrow_mut().ok()?;
        if d.is_none() {
            *d = crate::jpeg::Decompressor::new().ok();
        }
        f(d.as_mut()?)
    })
}

/// Re-encodes a YCbCr JPEG for an RGB field in YCbCr ([`planar`]): when the image is to be
/// stored as a JPEG, needs no rotation and is not passed through (it is downscaled, or
/// passthrough is off). `None` when that route does not apply or fails: the caller's RGB route
/// then decodes it, and reports what is wrong with a corrupt JPEG as it always has.
fn planar_reencode(
    bytes: &[u8],
    options: &ImageOptions,
    channels: Channels,
    draw: f64,
) -> Option<EncodedImage> {
    if channels != Channels::Rgb || !bytes.starts_with(&JPEG_MAGIC) {
        return None;
    }
    with_decompressor(|dec| {
        let header = dec.header(bytes).ok()?;
        if !planar::takes(&header) || crate::jpeg::markers::parse(bytes).orientation().is_some_and(|o| o != 1)
        {
            return None;
        }
        let size = (header.width, header.height);
        let target = resize::target_size(size.0, size.1, options.max_resolution);
        let (width, height) = check_size(target.0, target.1).ok()?;
        if mode_of(options.write_mode, target, channels, draw) != ImageMode::Jpg
            || (options.jpeg_passthrough && target == size)
        {
            return None;
        }
        let data = planar::reencode(
            dec,
            bytes,
            &header,
            target,
            options.jpeg_quality,
            options.jpeg_restart_interval,
        )
        .ok()?;
        Some(EncodedImage { mode: ImageMode::Jpg, width, height, data })
    })
}

/// Whether pixels carry an alpha channel (2 or 4 channels).
fn has_alpha(p: &Pixels) -> bool {
    matches!(p.channels, 2 | 4)
}

/// Flattens the alpha channel of grey+alpha or RGBA pixels (others are returned as they are):
/// with `background` `None` alpha is dropped and the colour channels kept, as FFCV does (Pillow's
/// `convert("RGB")`); with `Some([r, g, b])` each pixel is composited onto that colour, straight
/// alpha rounded to nearest, `out = (a·c + (255 − a)·bg + 127) / 255` (grey+alpha composites
/// each of R, G, B and gives RGB). Also returns whether any pixel had alpha below 255 (the
/// image was transparent somewhere, so the choice mattered).
pub fn flatten_alpha(p: &Pixels, background: Option<[u8; 3]>) -> (Pixels, bool) {
    let c = usize::from(p.channels);
    if !has_alpha(p) {
        return (p.clone(), false);
    }
    let transparent = p.data.chunks_exact(c).any(|px| px[c - 1] < 255);
    let data: Vec<u8> = match background {
        // Opaque pixels composite to their own colour: dropping alpha gives the same bytes.
        Some(bg) if transparent => {
            let over = |a: u8, v: u8, b: u8| -> u8 {
                let (a, v, b) = (u32::from(a), u32::from(v), u32::from(b));
                // At most (255·255 + 127) / 255 = 255.
                ((a * v + (255 - a) * b + 127) / 255) as u8
            };
            p.data
                .chunks_exact(c)
                .flat_map(|px| {
                    let a = px[c - 1];
                    let [r, g, b] = rgb_of(px);
                    [over(a, r, bg[0]), over(a, g, bg[1]), over(a, b, bg[2])]
                })
                .collect()
        }
        _ => p.data.chunks_exact(c).flat_map(|px| &px[..c - 1]).copied().collect(),
    };
    let channels = if background.is_some() && transparent { 3 } else { p.channels - 1 };
    (Pixels { width: p.width, height: p.height, channels, data }, transparent)
}

/// Decodes a stored image payload (as found in a row) to pixels of `channels` channels.
///
/// # Errors
/// [`Error::Image`] for a corrupt JPEG, or raw data whose length is not width × height × channels.
pub fn decode_stored(
    mode: ImageMode,
    width: u16,
    height: u16,
    data: &[u8],
    channels: Channels,
) -> Result<Pixels> {
    decode_stored_with(mode, width, height, data, channels, false)
}

/// [`decode_stored`], with libjpeg-turbo's fast integer IDCT when `fast_dct` (FFCV 1.0.2's
/// decode: [`ImageRef::decode_like_ffcv`](crate::ImageRef::decode_like_ffcv)).
pub(crate) fn decode_stored_with(
    mode: ImageMode,
    width: u16,
    height: u16,
    data: &[u8],
    channels: Channels,
    fast_dct: bool,
) -> Result<Pixels> {
    match mode {
        ImageMode::Raw => {
            let expected = usize::from(width) * usize::from(height) * channels as usize;
            if data.len() != expected {
                return Err(Error::Image(format!(
                    "raw image of {width}x{height}x{} needs {expected} bytes, found {}",
                    channels as u8,
                    data.len()
                )));
            }
            Ok(Pixels {
                width: u32::from(width),
                height: u32::from(height),
                channels: channels as u8,
                data: data.to_vec(),
            })
        }
        ImageMode::Jpg => {
            if !data.starts_with(&JPEG_MAGIC) {
                return Err(Error::Image(format!("stored JPEG is not a JPEG ({})", describe_start(data))));
            }
            // The stored image is upright (orientation was applied when writing): no rotation.
            let j = jpeg::decode_with(data, fast_dct)?;
            if (j.pixels.width, j.pixels.height) != (u32::from(width), u32::from(height)) {
                return Err(Error::Image(format!(
                    "stored JPEG is {}x{}, but the row says {width}x{height}",
                    j.pixels.width, j.pixels.height
                )));
            }
            Ok(to_channels(j.pixels, channels))
        }
    }
}

/// Decodes JPEG or PNG file bytes (recognised by their magic bytes) to upright pixels of
/// `channels` channels, exactly as [`encode_image`] sees them before the downscale with the
/// default options: strict JPEG decoding, EXIF orientation applied, alpha dropped (as FFCV
/// does), grey/RGB conversion.
///
/// # Errors
/// [`Error::Image`]: not a JPEG or PNG, corrupt or truncated data, too large (over 2 GiB of
/// pixels), an unsupported colour space or precision.
pub fn decode(bytes: &[u8], channels: Channels) -> Result<Pixels> {
    let pixels = match decode_source(bytes)? {
        Loaded::Pixels(p) => flatten_alpha(p, None).0,
        Loaded::Png(p) if has_alpha(&p) => flatten_alpha(&p, None).0,
        Loaded::Png(p) => p,
        Loaded::Jpeg(j) => match j.orientation {
            Some(o) => orient::apply(j.pixels, o),
            None => j.pixels,
        },
    };
    Ok(to_channels(pixels, channels))
}

/// SOI (a JPEG whose next bytes are not a marker is still a JPEG, a corrupt one: libjpeg says why).
const JPEG_MAGIC: [u8; 2] = [0xFF, 0xD8];
/// The PNG signature.
const PNG_MAGIC: [u8; 8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A];

/// A decoded source, before orientation and channel conversion.
enum Loaded<'a> {
    Pixels(&'a Pixels),
    Png(Pixels),
    Jpeg(jpeg::DecodedJpeg),
}

/// "starts with 89 50 4e 47 ..." or "0 bytes", for error messages.
fn describe_start(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "empty: 0 bytes".into();
    }
    let hex: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let more = if bytes.len() > 8 { "..." } else { "" };
    format!("starts with {}{more}", hex.join(" "))
}

fn decode_source(bytes: &[u8]) -> Result<Loaded<'static>> {
    if bytes.starts_with(&JPEG_MAGIC) {
        Ok(Loaded::Jpeg(jpeg::decode(bytes)?))
    } else if bytes.starts_with(&PNG_MAGIC) {
        Ok(Loaded::Png(png::decode(bytes)?))
    } else {
        Err(Error::Image(format!("not a JPEG or PNG ({})", describe_start(bytes))))
    }
}

/// A file's bytes, read into this thread's buffer (kept between images: a fresh buffer of an
/// image's size costs page faults on every image), which it gives back when dropped.
struct FileBuffer(Vec<u8>);

thread_local! {
    static FILE_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Largest buffer kept for the next file (a thread does not hold on to one huge image's bytes).
const KEPT_FILE_BUFFER: usize = 16 << 20;

impl FileBuffer {
    fn read(path: &std::path::Path) -> Result<FileBuffer> {
        use std::io::Read;
        // encode_image names the file.
        let failed = |e: std::io::Error| Error::Image(format!("cannot read the file: {e}"));
        let mut buf = FILE_BUFFER.with(std::cell::Cell::take);
        buf.clear();
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut buf)).map_err(failed)?;
        Ok(FileBuffer(buf))
    }
}

impl std::ops::Deref for FileBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for FileBuffer {
    fn drop(&mut self) {
        if self.0.capacity() <= KEPT_FILE_BUFFER {
            let buf = std::mem::take(&mut self.0);
            // During thread teardown the slot may be gone: the buffer is then simply freed.
            let _ = FILE_BUFFER.try_with(|slot| slot.set(buf));
        }
    }
}

/// Checks that given pixels are consistent: 1, 3 or 4 channels and `w × h × c` bytes.
fn check_pixels(p: &Pixels) -> Result<()> {
    if !matches!(p.channels, 1 | 3 | 4) {
        return Err(Error::Image(format!(
            "pixels with {} channels: must be 1 (grey), 3 (RGB) or 4 (RGBA)",
            p.channels
        )));
    }
    let expected = u64::from(p.width)
        .checked_mul(u64::from(p.height))
        .and_then(|n| n.checked_mul(u64::from(p.channels)));
    if expected != u64::try_from(p.data.len()).ok() {
        return Err(Error::Image(format!(
            "pixels of {}x{}x{} need {} bytes, found {}",
            p.width,
            p.height,
            p.channels,
            expected.map_or_else(|| "too many".to_string(), |n| n.to_string()),
            p.data.len()
        )));
    }
    Ok(())
}

/// Refuses a stored size of 0 or over 65535 on either side.
fn check_size(width: u32, height: u32) -> Result<(u16, u16)> {
    match (u16::try_from(width), u16::try_from(height)) {
        (Ok(w), Ok(h)) if w > 0 && h > 0 => Ok((w, h)),
        _ => Err(Error::Image(format!(
            "image size {width}x{height} cannot be stored: each side must be 1 to 65535 \
             (set max_resolution to downscale)"
        ))),
    }
}

/// ITU-R 601-2 luma as Pillow's `convert("L")`.
fn luma(r: u8, g: u8, b: u8) -> u8 {
    let l = (u32::from(r) * 299 + u32::from(g) * 587 + u32::from(b) * 114 + 500) / 1000;
    u8::try_from(l).unwrap_or(u8::MAX)
}

/// Converts pixels (1 to 4 channels; validated) to the field's channels (alpha, if any, dropped).
fn to_channels(p: Pixels, channels: Channels) -> Pixels {
    if p.channels == channels as u8 {
        return p;
    }
    to_channels_ref(&p, channels)
}

fn to_channels_ref(p: &Pixels, channels: Channels) -> Pixels {
    let c = usize::from(p.channels.max(1));
    let data: Vec<u8> = match (channels, p.channels) {
        (Channels::Rgb, 3) | (Channels::Grey, 1) => p.data.clone(),
        (Channels::Rgb, 1) => p.data.iter().flat_map(|&v| [v, v, v]).collect(),
        (Channels::Rgb, _) => p
            .data
            .chunks_exact(c)
            .flat_map(|px| {
                let [r, g, b] = rgb_of(px);
                [r, g, b]
            })
            .collect(),
        (Channels::Grey, _) => p
            .data
            .chunks_exact(c)
            .map(|px| {
                let [r, g, b] = rgb_of(px);
                luma(r, g, b)
            })
            .collect(),
    };
    Pixels { width: p.width, height: p.height, channels: channels as u8, data }
}

/// The RGB of a pixel of 2 (grey+alpha) or more channels.
fn rgb_of(px: &[u8]) -> [u8; 3] {
    match px {
        [r, g, b, ..] => [*r, *g, *b],
        [v, ..] => [*v, *v, *v],
        [] => [0, 0, 0],
    }
}
