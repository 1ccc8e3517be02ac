//! JPEG decoding and encoding through libjpeg-turbo's TurboJPEG 3 API.
//!
//! Decoding goes through `turbojpeg::raw` (the C API) rather than the crate's safe
//! `Decompressor`, because the safe wrapper does not expose `TJPARAM_STOPONWARNING`: without it
//! libjpeg-turbo treats a truncated or corrupt entropy-coded segment ("Premature end of JPEG
//! file", "Corrupt JPEG data: ...") as a *warning* and hands back a half-grey image. Here every
//! warning is fatal, so such a file is an error. Encoding and the lossless rewrite that adds
//! restart markers use the same C API (the safe `Compressor` sets no restart interval).

use std::ffi::{c_int, CStr};

use turbojpeg::raw;

use super::{Pixels, MAX_PIXEL_BYTES};
use crate::error::{Error, Result};

/// Most progressive scans a JPEG may have (libjpeg-turbo's own tools use 500 as the guard against
/// the "many scans" denial of service; real encoders write about 10).
const SCAN_LIMIT: c_int = 500;

/// The colour space of a JPEG, as libjpeg-turbo identifies it from the frame header, the JFIF and
/// the Adobe markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JpegColor {
    /// 1 component.
    Grey,
    /// 3 components, YCbCr (JFIF, the common case).
    YCbCr,
    /// 3 components stored as RGB (Adobe transform 0, or component ids 'R','G','B').
    Rgb,
    /// 4 components, CMYK.
    Cmyk,
    /// 4 components, YCCK (Adobe transform 2).
    Ycck,
}

/// What the header says about a JPEG.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JpegHeader {
    pub width: u32,
    pub height: u32,
    pub color: JpegColor,
    pub lossless: bool,
    pub precision: c_int,
}

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

/// An owned TurboJPEG instance.
struct Handle(raw::tjhandle);

impl Handle {
    fn new(init: raw::TJINIT) -> Result<Handle> {
        let init = c_int::try_from(init).map_err(|_| Error::Image("libjpeg-turbo: bad init type".into()))?;
        // SAFETY: tj3Init has no preconditions; it returns a new handle or null on failure.
        let ptr = unsafe { raw::tj3Init(init) };
        if ptr.is_null() {
            return Err(Error::Image("libjpeg-turbo: cannot create a TurboJPEG instance".into()));
        }
        Ok(Handle(ptr))
    }

    /// The message of the last error on this handle.
    fn error_message(&self) -> String {
        // SAFETY: self.0 is a live handle from tj3Init (never null, destroyed only in Drop).
        let msg = unsafe { raw::tj3GetErrorStr(self.0) };
        if msg.is_null() {
            return "unknown libjpeg-turbo error".into();
        }
        // SAFETY: tj3GetErrorStr returns a NUL-terminated string owned by the handle (or a
        // static buffer), valid until the next call on the handle; we copy it out at once.
        let msg = unsafe { CStr::from_ptr(msg) };
        msg.to_string_lossy().trim().to_string()
    }

    fn set(&mut self, param: raw::TJPARAM, value: c_int) -> Result<()> {
        let param =
            c_int::try_from(param).map_err(|_| Error::Image("libjpeg-turbo: bad parameter".into()))?;
        // SAFETY: self.0 is a live handle; tj3Set only reads the integers passed.
        let rc = unsafe { raw::tj3Set(self.0, param, value) };
        if rc != 0 {
            return Err(Error::Image(format!("libjpeg-turbo: {}", self.error_message())));
        }
        Ok(())
    }

    fn get(&self, param: raw::TJPARAM) -> c_int {
        let Ok(param) = c_int::try_from(param) else {
            return -1;
        };
        // SAFETY: self.0 is a live handle; tj3Get only reads the parameter value.
        unsafe { raw::tj3Get(self.0, param) }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: self.0 came from tj3Init, is not null and is destroyed exactly once, here.
        unsafe { raw::tj3Destroy(self.0) }
    }
}

/// A strict decompressor: every libjpeg warning is an error.
struct Decompressor {
    handle: Handle,
}

impl Decompressor {
    fn new() -> Result<Decompressor> {
        let mut handle = Handle::new(raw::TJINIT_TJINIT_DECOMPRESS)?;
        handle.set(raw::TJPARAM_TJPARAM_STOPONWARNING, 1)?;
        handle.set(raw::TJPARAM_TJPARAM_SCANLIMIT, SCAN_LIMIT)?;
        // The pixel cap again, in libjpeg-turbo itself (4 bytes a pixel at most, for CMYK).
        let max_pixels = c_int::try_from(MAX_PIXEL_BYTES / 4).unwrap_or(c_int::MAX);
        handle.set(raw::TJPARAM_TJPARAM_MAXPIXELS, max_pixels)?;
        Ok(Decompressor { handle })
    }

    fn corrupt(&self) -> Error {
        Error::Image(format!("corrupt JPEG: {}", self.handle.error_message()))
    }

    fn header(&mut self, data: &[u8]) -> Result<JpegHeader> {
        let len = raw::size_t::try_from(data.len()).map_err(|_| Error::Image("JPEG too large".into()))?;
        // SAFETY: the handle is live; data.as_ptr() is valid for data.len() bytes, which
        // libjpeg-turbo only reads, and the slice outlives the call.
        let rc = unsafe { raw::tj3DecompressHeader(self.handle.0, data.as_ptr(), len) };
        if rc != 0 {
            return Err(self.corrupt());
        }
        let h = &self.handle;
        let width = u32::try_from(h.get(raw::TJPARAM_TJPARAM_JPEGWIDTH)).unwrap_or(0);
        let height = u32::try_from(h.get(raw::TJPARAM_TJPARAM_JPEGHEIGHT)).unwrap_or(0);
        if width == 0 || height == 0 {
            return Err(Error::Image(format!("corrupt JPEG: size {width}x{height}")));
        }
        let cs = h.get(raw::TJPARAM_TJPARAM_COLORSPACE);
        let color = match u32::try_from(cs) {
            Ok(raw::TJCS_TJCS_GRAY) => JpegColor::Grey,
            Ok(raw::TJCS_TJCS_YCbCr) => JpegColor::YCbCr,
            Ok(raw::TJCS_TJCS_RGB) => JpegColor::Rgb,
            Ok(raw::TJCS_TJCS_CMYK) => JpegColor::Cmyk,
            Ok(raw::TJCS_TJCS_YCCK) => JpegColor::Ycck,
            _ => return Err(Error::Image(format!("unsupported JPEG colour space (TJCS {cs})"))),
        };
        Ok(JpegHeader {
            width,
            height,
            color,
            lossless: h.get(raw::TJPARAM_TJPARAM_LOSSLESS) == 1,
            precision: h.get(raw::TJPARAM_TJPARAM_PRECISION),
        })
    }

    /// Decodes to `format` with `bpp` bytes a pixel; returns the tightly packed pixels.
    fn decompress(
        &mut self,
        data: &[u8],
        header: &JpegHeader,
        format: raw::TJPF,
        bpp: usize,
    ) -> Result<Vec<u8>> {
        let too_large = || {
            Error::Image(format!(
                "JPEG too large: {}x{} is over the limit of {MAX_PIXEL_BYTES} bytes of pixels",
                header.width, header.height
            ))
        };
        let w = usize::try_from(header.width).map_err(|_| too_large())?;
        let h = usize::try_from(header.height).map_err(|_| too_large())?;
        let row = w.checked_mul(bpp).ok_or_else(too_large)?;
        let total = row.checked_mul(h).ok_or_else(too_large)?;
        if u64::try_from(total).unwrap_or(u64::MAX) > MAX_PIXEL_BYTES {
            return Err(too_large());
        }
        let pitch = c_int::try_from(row).map_err(|_| too_large())?;
        let len = raw::size_t::try_from(data.len()).map_err(|_| Error::Image("JPEG too large".into()))?;
        let mut out = vec![0u8; total];
        // SAFETY: the handle is live. `data` is valid for reading data.len() bytes. `out` holds
        // exactly pitch × height bytes, where pitch = width × bytes-per-pixel of `format`, and
        // tj3Decompress8 re-reads the same header (width, height, no scaling, no cropping), so it
        // writes at most height rows of pitch bytes into `out`.
        let rc = unsafe {
            raw::tj3Decompress8(self.handle.0, data.as_ptr(), len, out.as_mut_ptr(), pitch, format)
        };
        if rc != 0 {
            return Err(self.corrupt());
        }
        Ok(out)
    }
}

/// Markers found before the first scan that matter here.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Markers<'a> {
    /// The TIFF structure of the first APP1 "Exif" segment.
    pub exif: Option<&'a [u8]>,
    /// The transform byte of an Adobe APP14 segment.
    pub adobe_transform: Option<u8>,
}

/// Walks the marker segments up to the first SOS. Never fails: anything malformed just ends the
/// walk (the decoder proper reports corrupt files).
pub(crate) fn scan_markers(data: &[u8]) -> Markers<'_> {
    let mut found = Markers::default();
    if !data.starts_with(&[0xFF, 0xD8]) {
        return found;
    }
    let mut pos = 2usize;
    loop {
        if data.get(pos) != Some(&0xFF) {
            break;
        }
        while data.get(pos) == Some(&0xFF) {
            pos += 1;
        }
        let Some(&marker) = data.get(pos) else { break };
        pos += 1;
        match marker {
            0x01 | 0xD0..=0xD8 => continue,
            0xD9 | 0xDA => break,
            _ => {}
        }
        let Some(&[hi, lo]) = data.get(pos..pos.saturating_add(2)) else { break };
        let seg_len = usize::from(u16::from_be_bytes([hi, lo]));
        if seg_len < 2 {
            break;
        }
        let Some(end) = pos.checked_add(seg_len) else { break };
        let Some(seg) = data.get(pos + 2..end) else { break };
        if marker == 0xE1 && found.exif.is_none() {
            if let Some(tiff) = seg.strip_prefix(b"Exif\0\0") {
                found.exif = Some(tiff);
            }
        }
        if marker == 0xEE && seg.starts_with(b"Adobe") {
            if let Some(&t) = seg.get(11) {
                found.adobe_transform = Some(t);
            }
        }
        pos = end;
    }
    found
}

/// The EXIF orientation tag (1–8) from a TIFF structure; `None` when absent, unreadable or out of
/// range (a broken EXIF block does not make the image unreadable).
pub(crate) fn exif_orientation(tiff: &[u8]) -> Option<u32> {
    let exif = exif::Reader::new().read_raw(tiff.to_vec()).ok()?;
    let field = exif.get_field(exif::Tag::Orientation, exif::In::PRIMARY)?;
    field.value.get_uint(0).filter(|o| (1..=8).contains(o))
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
        dec.handle.set(raw::TJPARAM_TJPARAM_FASTDCT, 1)?;
    }
    let header = dec.header(data)?;
    if header.precision > 8 {
        return Err(Error::Image(format!(
            "unsupported JPEG: {}-bit samples (only 8-bit JPEGs are supported)",
            header.precision
        )));
    }
    let markers = scan_markers(data);
    let (channels, data_out) = match header.color {
        JpegColor::Grey => (1, dec.decompress(data, &header, raw::TJPF_TJPF_GRAY, 1)?),
        JpegColor::YCbCr | JpegColor::Rgb => (3, dec.decompress(data, &header, raw::TJPF_TJPF_RGB, 3)?),
        JpegColor::Cmyk | JpegColor::Ycck => {
            let cmyk = dec.decompress(data, &header, raw::TJPF_TJPF_CMYK, 4)?;
            // libjpeg never inverts: it hands back the stored values (for YCCK, the CMYK that the
            // YCC transform encoded). Adobe (Photoshop) files store inverted CMYK, so an Adobe
            // marker (always present for YCCK) means inverted, as Pillow reads them.
            let inverted = markers.adobe_transform.is_some() || header.color == JpegColor::Ycck;
            (3, cmyk_to_rgb(&cmyk, inverted))
        }
    };
    let orientation = markers.exif.and_then(exif_orientation);
    Ok(DecodedJpeg {
        pixels: Pixels { width: header.width, height: header.height, channels, data: data_out },
        header,
        orientation,
    })
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
    let (format, subsamp) = match pixels.channels {
        1 => (raw::TJPF_TJPF_GRAY, raw::TJSAMP_TJSAMP_GRAY),
        3 => (raw::TJPF_TJPF_RGB, raw::TJSAMP_TJSAMP_420),
        c => return Err(Error::Image(format!("cannot JPEG-encode {c} channels"))),
    };
    let width = usize::try_from(pixels.width).map_err(|_| Error::Image("image too wide".into()))?;
    let height = usize::try_from(pixels.height).map_err(|_| Error::Image("image too tall".into()))?;
    let pitch = width
        .checked_mul(usize::from(pixels.channels))
        .ok_or_else(|| Error::Image("image too large".into()))?;
    if width == 0 || height == 0 || pitch.checked_mul(height) != Some(pixels.data.len()) {
        return Err(Error::Image(format!(
            "cannot JPEG-encode: {} bytes for {}x{}x{}",
            pixels.data.len(),
            pixels.width,
            pixels.height,
            pixels.channels
        )));
    }
    let too_large = |_| Error::Image("image too large to JPEG-encode".into());
    let (w, h, p) = (
        c_int::try_from(width).map_err(too_large)?,
        c_int::try_from(height).map_err(too_large)?,
        c_int::try_from(pitch).map_err(too_large)?,
    );
    let mut handle = Handle::new(raw::TJINIT_TJINIT_COMPRESS)?;
    handle.set(raw::TJPARAM_TJPARAM_QUALITY, c_int::from(quality.clamp(1, 100)))?;
    handle.set(raw::TJPARAM_TJPARAM_SUBSAMP, subsamp as c_int)?;
    set_restarts(&mut handle, restart_interval)?;
    let mut out = JpegBuf::default();
    // SAFETY: the handle is live and set up for compression. `pixels.data` holds exactly
    // height rows of pitch = width × channels bytes (checked above), only read. libjpeg-turbo
    // allocates the output (tj3Alloc) and stores its pointer and size in `out`, which frees it.
    let rc = unsafe {
        raw::tj3Compress8(
            handle.0,
            pixels.data.as_ptr(),
            w,
            p,
            h,
            format as c_int,
            &mut out.ptr,
            &mut out.len,
        )
    };
    if rc != 0 {
        return Err(Error::Image(format!("JPEG encoding failed: {}", handle.error_message())));
    }
    Ok(out.to_vec())
}

/// Sets a restart marker every `interval` MCUs (0: none) and, with markers, optimised Huffman
/// tables.
fn set_restarts(handle: &mut Handle, interval: u16) -> Result<()> {
    handle.set(raw::TJPARAM_TJPARAM_RESTARTBLOCKS, c_int::from(interval))?;
    handle.set(raw::TJPARAM_TJPARAM_OPTIMIZE, c_int::from(interval > 0))
}

/// A JPEG buffer allocated by libjpeg-turbo, freed on drop.
struct JpegBuf {
    ptr: *mut u8,
    len: raw::size_t,
}

impl Default for JpegBuf {
    fn default() -> Self {
        JpegBuf { ptr: std::ptr::null_mut(), len: 0 }
    }
}

impl JpegBuf {
    fn to_vec(&self) -> Vec<u8> {
        if self.ptr.is_null() {
            return Vec::new();
        }
        // SAFETY: libjpeg-turbo set ptr to a buffer it allocated holding len bytes of JPEG.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len as usize) }.to_vec()
    }
}

impl Drop for JpegBuf {
    fn drop(&mut self) {
        // SAFETY: ptr is null or was allocated by libjpeg-turbo (tj3Alloc) and is freed once.
        unsafe { raw::tj3Free(self.ptr.cast()) }
    }
}

/// The restart interval (DRI, in MCUs) of a JPEG, from the markers before its first scan; 0 when
/// it has none (or the markers cannot be read: the caller has decoded the JPEG already).
pub(crate) fn restart_interval(data: &[u8]) -> u16 {
    let be16 = |at: usize| Some(u16::from_be_bytes([*data.get(at)?, *data.get(at + 1)?]));
    let mut at = 2;
    while let (Some(0xFF), Some(&marker)) = (data.get(at), data.get(at + 1)) {
        match marker {
            0xFF => at += 1,
            0xDD => return be16(at + 4).unwrap_or(0),
            0xDA | 0xD9 => return 0,
            _ => match be16(at + 2) {
                Some(len) => at += 2 + usize::from(len),
                None => return 0,
            },
        }
    }
    0
}

/// Rewrites a JPEG losslessly (the same DCT coefficients, hence the same pixels) as a baseline,
/// Huffman-coded JPEG with a restart marker every `interval` MCUs and optimised tables; the
/// markers before the scan (JFIF, EXIF, ICC ...) are kept.
pub(crate) fn with_restarts(data: &[u8], interval: u16) -> Result<Vec<u8>> {
    let mut handle = Handle::new(raw::TJINIT_TJINIT_TRANSFORM)?;
    handle.set(raw::TJPARAM_TJPARAM_STOPONWARNING, 1)?;
    handle.set(raw::TJPARAM_TJPARAM_SCANLIMIT, SCAN_LIMIT)?;
    set_restarts(&mut handle, interval)?;
    let len = raw::size_t::try_from(data.len()).map_err(|_| Error::Image("JPEG too large".into()))?;
    // The identity transform: no crop, no flip, all markers copied.
    let transform = raw::tjtransform {
        r: raw::tjregion { x: 0, y: 0, w: 0, h: 0 },
        op: raw::TJXOP_TJXOP_NONE as c_int,
        options: 0,
        data: std::ptr::null_mut(),
        customFilter: None,
    };
    let mut out = JpegBuf::default();
    // SAFETY: the handle is live and set up for transforms; `data` is valid for reading len
    // bytes; one transform is passed (n = 1) with one output pointer and size, which
    // libjpeg-turbo allocates (tj3Alloc) and `out` frees; no custom filter.
    let rc =
        unsafe { raw::tj3Transform(handle.0, data.as_ptr(), len, 1, &mut out.ptr, &mut out.len, &transform) };
    if rc != 0 {
        return Err(Error::Image(format!("corrupt JPEG: {}", handle.error_message())));
    }
    Ok(out.to_vec())
}
