//! The JPEG codec layer shared by the writer and the loader: one TurboJPEG wrapper and one
//! marker parser, the only places in beton that call libjpeg-turbo or read JPEG markers.
//!
//! - [`Decompressor`]: a strict TurboJPEG 3 decompressor (every libjpeg *warning* is an error,
//!   so a truncated or corrupt JPEG is refused instead of coming back half grey). It reads the
//!   header ([`JpegHeader`]), decodes whole or at a DCT scale of 1/2, 1/4, 1/8 and to a cropping
//!   region (the loader's crop decoders), or to raw Y / Cb / Cr planes without upsampling or
//!   colour conversion.
//! - [`markers`]: one walk over the marker segments before the first scan: what the frame
//!   header (SOF), the restart interval (DRI), the scan header (SOS), EXIF and the Adobe segment
//!   say. The writer reads orientation, CMYK inversion and the restart interval from it; the
//!   loader's restart-marker slicing reads the frame and scan from it.
//! - [`entropy`]: one entropy-level pass over a baseline JPEG that checks every Huffman code and
//!   gives it restart markers (the writer's fast passthrough; no IDCT, no colour conversion),
//!   and [`entropy::optimize_tables`], which writes a scan again with optimal Huffman tables
//!   (the writer's encodes with restart markers), and [`entropy::decode_planes`], beton's own
//!   baseline decoder to raw planes (its Huffman decoding, libjpeg-turbo's SIMD IDCT: the planes
//!   `tj3DecompressToYUVPlanes8` gives, byte for byte), which [`Decompressor::decompress_planes`]
//!   uses at scales 1, 1/2 and 1/4, and [`entropy::SeekIndex::window_planes`] for a window of a
//!   JPEG without restart markers.
//! - [`with_restarts`]: the lossless rewrite that gives a JPEG a restart marker every few MCUs
//!   (the writer's passthrough; the loader's tests make such JPEGs with it). Encoding (the
//!   writer's `jpg` mode) is crate-private: only the writer encodes.
//!
//! Decoding goes through `turbojpeg::raw` (the C API) rather than the crate's safe
//! `Decompressor`, because the safe wrapper exposes neither `TJPARAM_STOPONWARNING` nor planar
//! decoding of a scaled image, and its `Compressor` sets no restart interval.
//!
//! Everything here takes untrusted bytes and never panics: bad input is an
//! [`Error::Image`](crate::Error::Image).

pub mod entropy;
pub mod markers;
mod turbo;

#[cfg(test)]
pub(crate) use turbo::lossless_crop;
pub(crate) use turbo::{compress, compress_planes};
pub use turbo::{
    plane_size, with_restarts, Decompressor, JpegColor, JpegHeader, PixelFormat, PlaneLayout, Rect,
};

/// Most progressive scans a JPEG may have (libjpeg-turbo's own tools use 500 as the guard against
/// the "many scans" denial of service; real encoders write about 10).
const SCAN_LIMIT: std::ffi::c_int = 500;

/// Most pixels libjpeg-turbo may decode for one image: the writer's 2 GiB cap on decoded pixel
/// bytes (`image::MAX_PIXEL_BYTES`) at 4 bytes a pixel (CMYK).
const MAX_PIXELS: std::ffi::c_int = 1 << 29;
