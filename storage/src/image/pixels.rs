//! Decoded pixels ([`Pixels`]) and the bound on their size: what this folder's codecs (`jpeg.rs`,
//! `png.rs`) and transforms (`orient.rs`, `resize.rs`) take and return. Their own file, so that
//! those depend on it and not on `mod.rs`, which drives them.

/// Most bytes of decoded pixels accepted from one image (2 GiB): bigger images are an error,
/// not an allocation failure.
pub(crate) const MAX_PIXEL_BYTES: u64 = 1 << 31;

/// Decoded pixels, row-major HWC `u8`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pixels {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// 1 (grey), 3 (RGB) or 4 (RGBA; flattened when stored, see
    /// [`flatten_alpha`](super::flatten_alpha)); 2 (grey+alpha) as a PNG decodes.
    pub channels: u8,
    /// `width × height × channels` bytes.
    pub data: Vec<u8>,
}
