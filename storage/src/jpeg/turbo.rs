//! The TurboJPEG 3 wrapper: one owned handle type, the strict decompressor, encoding and the
//! lossless restart-marker rewrite. Every `unsafe` call into libjpeg-turbo in beton is here.

use std::ffi::{c_int, CStr};

use turbojpeg::raw;

use super::entropy::Template420;
use super::{MAX_PIXELS, SCAN_LIMIT};
use crate::error::{Error, Result};
use crate::recent::{Kept, Recent};

/// The colour space of a JPEG, as libjpeg-turbo identifies it from the frame header, the JFIF and
/// the Adobe markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JpegColor {
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

/// What libjpeg-turbo reads from a JPEG's header ([`Decompressor::header`]).
#[derive(Debug, Clone, Copy)]
pub struct JpegHeader {
    /// Width in pixels (never 0).
    pub width: u32,
    /// Height in pixels (never 0).
    pub height: u32,
    /// The colour space.
    pub color: JpegColor,
    /// TurboJPEG's chroma subsampling (`TJSAMP_*`: 0 4:4:4, 1 4:2:2, 2 4:2:0, 3 grey, 4 4:4:0,
    /// 5 4:1:1, 6 4:4:1; -1 unknown).
    pub subsampling: c_int,
    /// Lossless JPEG (SOF3).
    pub lossless: bool,
    /// Bits per sample.
    pub precision: c_int,
}

/// Pixel formats a [`Decompressor`] decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelFormat {
    /// 1 byte a pixel.
    Grey,
    /// 3 bytes a pixel, R G B.
    Rgb,
    /// 4 bytes a pixel, C M Y K as stored.
    Cmyk,
}

impl PixelFormat {
    /// Bytes a pixel.
    pub fn size(self) -> usize {
        match self {
            PixelFormat::Grey => 1,
            PixelFormat::Rgb => 3,
            PixelFormat::Cmyk => 4,
        }
    }

    fn raw(self) -> raw::TJPF {
        match self {
            PixelFormat::Grey => raw::TJPF_TJPF_GRAY,
            PixelFormat::Rgb => raw::TJPF_TJPF_RGB,
            PixelFormat::Cmyk => raw::TJPF_TJPF_CMYK,
        }
    }
}

/// A cropping region in pixels of the (scaled) image; all zeros (the default) is the whole image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rect {
    /// Left edge: a multiple of the scaled iMCU width (libjpeg-turbo refuses others).
    pub x: u32,
    /// Top edge.
    pub y: u32,
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

/// What a decode writes ([`Decompressor::output_of`]).
struct Output {
    header: JpegHeader,
    /// The scaled image, uncropped.
    scaled: (u32, u32),
    /// The output: the scaled image, cropped.
    size: (u32, u32),
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

    /// The message of the last error on this handle, on one line.
    fn error_message(&self) -> String {
        // SAFETY: self.0 is a live handle from tj3Init (never null, destroyed only in Drop).
        let msg = unsafe { raw::tj3GetErrorStr(self.0) };
        if msg.is_null() {
            return "unknown libjpeg-turbo error".into();
        }
        // SAFETY: tj3GetErrorStr returns a NUL-terminated string owned by the handle (or a
        // static buffer), valid until the next call on the handle; we copy it out at once.
        let msg = unsafe { CStr::from_ptr(msg) };
        msg.to_string_lossy().trim().replace('\n', " ")
    }

    /// "corrupt JPEG: ..." with the last error.
    fn corrupt(&self) -> Error {
        Error::Image(format!("corrupt JPEG: {}", self.error_message()))
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

/// A strict TurboJPEG decompressor: every libjpeg warning is an error, at most 500 scans and
/// 2^29 pixels. Neither `Send` nor `Sync`: one per thread (the loader keeps one in a
/// `thread_local!`). Reading a header
/// sets it up for that JPEG, and scaling and cropping stay set until changed.
pub struct Decompressor {
    handle: Handle,
    /// The geometry last set ([`Decompressor::set_geometry`]): every decode checks its output
    /// size against it and the header of the bytes it is given.
    denom: u32,
    region: Rect,
    /// Whether [`Decompressor::decompress_planes`] may decode a baseline JPEG by beton's own
    /// entropy decoder ([`entropy::decode_planes`](super::entropy::decode_planes)): not with
    /// the fast IDCT, nor where a test asks for libjpeg-turbo's own decode.
    own_planes: bool,
    fast_dct: bool,
}

impl std::fmt::Debug for Decompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decompressor").finish_non_exhaustive()
    }
}

impl Decompressor {
    /// A new strict decompressor.
    ///
    /// # Errors
    /// [`Error::Image`] when libjpeg-turbo cannot create one.
    pub fn new() -> Result<Decompressor> {
        let mut handle = Handle::new(raw::TJINIT_TJINIT_DECOMPRESS)?;
        handle.set(raw::TJPARAM_TJPARAM_STOPONWARNING, 1)?;
        handle.set(raw::TJPARAM_TJPARAM_SCANLIMIT, SCAN_LIMIT)?;
        handle.set(raw::TJPARAM_TJPARAM_MAXPIXELS, MAX_PIXELS)?;
        Ok(Decompressor {
            handle,
            denom: 1,
            region: Rect::default(),
            own_planes: own_planes_default(),
            fast_dct: false,
        })
    }

    /// Uses libjpeg-turbo's fast integer IDCT (`TJPARAM_FASTDCT`), as FFCV's loader does.
    ///
    /// # Errors
    /// [`Error::Image`] when libjpeg-turbo refuses the parameter.
    pub fn set_fast_dct(&mut self, fast: bool) -> Result<()> {
        self.handle.set(raw::TJPARAM_TJPARAM_FASTDCT, c_int::from(fast))?;
        self.fast_dct = fast;
        Ok(())
    }

    /// Whether [`Decompressor::decompress_planes`] may decode a baseline JPEG with beton's own
    /// entropy decoder and libjpeg-turbo's SIMD IDCT (the default; the same planes, byte for
    /// byte) or must call libjpeg-turbo's whole decode (tests and benchmarks compare the two).
    pub fn set_own_planes(&mut self, own: bool) {
        self.own_planes = own;
    }

    /// Whether beton's own planes decoder is in use (see [`Decompressor::set_own_planes`]):
    /// callers that decode planes straight from a JPEG's scan (the loader's seek windows)
    /// follow it.
    pub fn own_planes(&self) -> bool {
        self.own_planes && !self.fast_dct
    }

    /// Reads the header of `data`.
    ///
    /// # Errors
    /// [`Error::Image`]: "corrupt JPEG: ..." for a header libjpeg-turbo cannot read or a size of
    /// 0, "unsupported JPEG colour space" for one it does not know.
    pub fn header(&mut self, data: &[u8]) -> Result<JpegHeader> {
        let len = raw::size_t::try_from(data.len()).map_err(|_| Error::Image("JPEG too large".into()))?;
        // SAFETY: the handle is live; data.as_ptr() is valid for data.len() bytes, which
        // libjpeg-turbo only reads, and the slice outlives the call.
        let rc = unsafe { raw::tj3DecompressHeader(self.handle.0, data.as_ptr(), len) };
        if rc != 0 {
            return Err(self.handle.corrupt());
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
            subsampling: h.get(raw::TJPARAM_TJPARAM_SUBSAMP),
            lossless: h.get(raw::TJPARAM_TJPARAM_LOSSLESS) == 1,
            precision: h.get(raw::TJPARAM_TJPARAM_PRECISION),
        })
    }

    /// Sets the scale 1/`denom` and the cropping region (`Rect::default()`: uncropped) of the
    /// next decode of the JPEG whose header was just read.
    ///
    /// # Errors
    /// [`Error::Image`] when libjpeg-turbo refuses the factor or the region (a left edge off the
    /// scaled iMCU grid, a region outside the scaled image).
    pub fn set_geometry(&mut self, denom: u32, region: Rect) -> Result<()> {
        let sf = raw::tjscalingfactor { num: 1, denom: denom as c_int };
        let crop = raw::tjregion {
            x: region.x as c_int,
            y: region.y as c_int,
            w: region.width as c_int,
            h: region.height as c_int,
        };
        // SAFETY: the handle is live and has read a header; both calls take values.
        let rc = unsafe {
            if raw::tj3SetScalingFactor(self.handle.0, sf) != 0 {
                -1
            } else {
                raw::tj3SetCroppingRegion(self.handle.0, crop)
            }
        };
        if rc != 0 {
            return Err(Error::Image(format!("libjpeg-turbo: {}", self.handle.error_message())));
        }
        (self.denom, self.region) = (denom, region);
        Ok(())
    }

    /// What a decode of `data` writes with the geometry set: its header re-read from `data`
    /// itself (libjpeg-turbo decodes the bytes it is given, whatever header was read before),
    /// the geometry checked against it again, and the scaled size (whole, uncropped) and output
    /// size (cropped). Memory safety of the decodes rests on this: libjpeg-turbo writes as
    /// many rows and columns as the JPEG and the geometry say, not as the buffer holds.
    fn output_of(&mut self, data: &[u8]) -> Result<Output> {
        let header = self.header(data)?;
        self.set_geometry(self.denom, self.region)?;
        let scaled = |d: u32| d.div_ceil(self.denom);
        let (sw, sh) = (scaled(header.width), scaled(header.height));
        let r = self.region;
        let out = if r == Rect::default() {
            (sw, sh)
        } else {
            let w = if r.width == 0 { sw - r.x } else { r.width };
            let h = if r.height == 0 { sh - r.y } else { r.height };
            (w, h)
        };
        Ok(Output { header, scaled: (sw, sh), size: out })
    }

    /// Decompresses `data` to `format` into `dst`, `width × height` pixels packed (the header
    /// and the geometry set by [`Decompressor::set_geometry`] must give exactly that size).
    ///
    /// # Errors
    /// [`Error::Image`]: "corrupt JPEG: ..." for any libjpeg error or warning, or `dst` not
    /// `width × height` pixels.
    pub fn decompress(
        &mut self,
        data: &[u8],
        dst: &mut [u8],
        (width, height): (u32, u32),
        format: PixelFormat,
    ) -> Result<()> {
        let out = self.output_of(data)?.size;
        if out != (width, height) {
            return Err(Error::Image(format!(
                "internal: JPEG decodes to {}x{} here, the caller expects {width}x{height}",
                out.0, out.1
            )));
        }
        let pitch = width as usize * format.size();
        if dst.len() != pitch * height as usize {
            return Err(Error::Image("internal: JPEG output buffer of the wrong size".into()));
        }
        let pitch = c_int::try_from(pitch).map_err(|_| Error::Image("JPEG too large".into()))?;
        let len = raw::size_t::try_from(data.len()).map_err(|_| Error::Image("JPEG too large".into()))?;
        // SAFETY: the handle is live; `data` is valid for reading data.len() bytes. `dst` holds
        // exactly `height` rows of `pitch` = width × bytes-per-pixel of `format` (checked above),
        // and `output_of` re-read the header of these very bytes (tj3Decompress8 decodes them)
        // and checked that with the geometry on the handle they decode to exactly width × height.
        let rc = unsafe {
            raw::tj3Decompress8(self.handle.0, data.as_ptr(), len, dst.as_mut_ptr(), pitch, format.raw())
        };
        if rc != 0 {
            return Err(self.handle.corrupt());
        }
        Ok(())
    }

    /// Decompresses `data` (whose header was just read) at the scale set by
    /// [`Decompressor::set_geometry`] into its raw planes: no chroma upsampling, no colour
    /// conversion. `buf` holds `geometry.len()` planes, each `(offset, width, height)` in `buf`,
    /// where each plane's size is [`plane_size`] of its component at the scaled size.
    ///
    /// # Errors
    /// [`Error::Image`]: "corrupt JPEG: ..." for any libjpeg error or warning; an internal error
    /// for a plane outside `buf` or other than 1 to 3 planes.
    pub fn decompress_planes(
        &mut self,
        data: &[u8],
        buf: &mut [u8],
        geometry: &[(usize, u32, u32)],
    ) -> Result<()> {
        let mut ptrs = [std::ptr::null_mut::<u8>(); 3];
        let mut strides = [0 as c_int; 3];
        if geometry.is_empty() || geometry.len() > 3 {
            return Err(Error::Image("internal: a JPEG has 1 to 3 planes here".into()));
        }
        let Output { header, scaled, .. } = self.output_of(data)?;
        let planes = if header.color == JpegColor::Grey { 1 } else { 3 };
        let expected = (0..planes).map(|c| plane_size(c, scaled, header.subsampling));
        if self.region != Rect::default()
            || geometry.len() != planes
            || !geometry.iter().map(|&(_, w, h)| (w, h)).eq(expected)
        {
            return Err(Error::Image("internal: JPEG planes other than the caller's geometry".into()));
        }
        // Beton's decoder where it takes the JPEG (the same planes; what it declines, corrupt
        // data among it, libjpeg-turbo decodes or refuses just below).
        if self.own_planes()
            && header.subsampling >= 0
            && super::entropy::decode_planes(data, self.denom, buf, geometry).is_some()
        {
            #[cfg(test)]
            OWN_PLANES_DECODED.with(|n| n.set(n.get() + 1));
            return Ok(());
        }
        for (c, &(offset, w, h)) in geometry.iter().enumerate() {
            let plane = buf
                .get_mut(offset..offset + w as usize * h as usize)
                .ok_or_else(|| Error::Image("internal: plane buffer too small".into()))?;
            ptrs[c] = plane.as_mut_ptr();
            strides[c] = w as c_int;
        }
        let len = raw::size_t::try_from(data.len()).map_err(|_| Error::Image("JPEG too large".into()))?;
        // SAFETY: the handle is live; `data` is valid for reading data.len() bytes. Plane c
        // starts at ptrs[c], inside `buf`, and holds h_c rows of w_c = strides[c] bytes (checked
        // above), and `output_of` re-read the header of these very bytes and checked that
        // (w_c, h_c) is tj3YUVPlaneWidth/Height of component c at the scaled size, uncropped:
        // exactly what libjpeg-turbo writes for them.
        let rc = unsafe {
            raw::tj3DecompressToYUVPlanes8(
                self.handle.0,
                data.as_ptr(),
                len,
                ptrs.as_mut_ptr(),
                strides.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(self.handle.corrupt());
        }
        Ok(())
    }
}

/// Whether decompressors decode planes with beton's entropy decoder: yes, unless the
/// environment says `BETON_JPEG_DECODER=libjpeg-turbo` (read once; for comparisons, and a way
/// back should a JPEG ever decode differently).
fn own_planes_default() -> bool {
    static OWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| std::env::var("BETON_JPEG_DECODER").map_or(true, |v| v != "libjpeg-turbo"))
}

/// Raw planes laid out one after another in one buffer, as
/// [`Decompressor::decompress_planes`] and [`entropy::decode_planes`](super::entropy::decode_planes)
/// take them: Y, Cb and Cr (or one grey plane), each [`plane_size`] bytes, packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneLayout {
    /// How many planes: 1 or 3.
    pub count: usize,
    /// Per plane (the first `count`): `(offset in the buffer, width, height)`.
    pub planes: [(usize, u32, u32); 3],
    /// The buffer's size in bytes.
    pub bytes: usize,
}

impl PlaneLayout {
    /// The planes of a JPEG with header `header` decoded at `size` (its own size, a scaled or a
    /// window's): one for a grey JPEG, three otherwise; `None` when a plane would be empty
    /// (a subsampling TurboJPEG does not name) or the buffer's size does not fit.
    pub fn of(header: &JpegHeader, size: (u32, u32)) -> Option<PlaneLayout> {
        PlaneLayout::new(if header.color == JpegColor::Grey { 1 } else { 3 }, header.subsampling, size)
    }

    /// `count` planes (1 or 3) of a `size` image with TurboJPEG subsampling `subsampling`.
    pub fn new(count: usize, subsampling: c_int, size: (u32, u32)) -> Option<PlaneLayout> {
        let mut layout = PlaneLayout { count, planes: [(0, 0, 0); 3], bytes: 0 };
        for (c, plane) in layout.planes.iter_mut().enumerate().take(count) {
            let (w, h) = plane_size(c, size, subsampling);
            if w == 0 || h == 0 {
                return None;
            }
            *plane = (layout.bytes, w, h);
            let len = usize::try_from(u64::from(w) * u64::from(h)).ok()?;
            layout.bytes = layout.bytes.checked_add(len)?;
        }
        (count == 1 || count == 3).then_some(layout)
    }

    /// The planes' `(offset, width, height)`.
    pub fn geometry(&self) -> &[(usize, u32, u32)] {
        &self.planes[..self.count]
    }
}

/// The size of plane `component` of a `width × height` image with TurboJPEG subsampling
/// `subsampling` (`tj3YUVPlaneWidth` / `tj3YUVPlaneHeight`); `(0, 0)` for arguments TurboJPEG
/// refuses.
pub fn plane_size(component: usize, (width, height): (u32, u32), subsampling: c_int) -> (u32, u32) {
    // SAFETY: pure functions of their arguments.
    let (pw, ph) = unsafe {
        (
            raw::tj3YUVPlaneWidth(component as c_int, width as c_int, subsampling),
            raw::tj3YUVPlaneHeight(component as c_int, height as c_int, subsampling),
        )
    };
    (u32::try_from(pw).unwrap_or(0), u32::try_from(ph).unwrap_or(0))
}

/// Encodes `height` rows of `width` pixels of `channels` bytes (1: grey, TJSAMP_GRAY; 3: RGB,
/// 4:2:0 as cv2.imencode and FFCV) at `quality` (1–100), with a restart marker every
/// `restart_interval` MCUs (0: none) and, then, optimised Huffman tables (which win back the
/// markers' bytes).
pub(crate) fn compress(
    data: &[u8],
    (width, height, channels): (u32, u32, u8),
    quality: u8,
    restart_interval: u16,
) -> Result<Vec<u8>> {
    let (format, subsamp) = match channels {
        1 => (raw::TJPF_TJPF_GRAY, raw::TJSAMP_TJSAMP_GRAY),
        3 => (raw::TJPF_TJPF_RGB, raw::TJSAMP_TJSAMP_420),
        c => return Err(Error::Image(format!("cannot JPEG-encode {c} channels"))),
    };
    let (w32, h32) = (width, height);
    let width = usize::try_from(width).map_err(|_| Error::Image("image too wide".into()))?;
    let height = usize::try_from(height).map_err(|_| Error::Image("image too tall".into()))?;
    let pitch =
        width.checked_mul(usize::from(channels)).ok_or_else(|| Error::Image("image too large".into()))?;
    if width == 0 || height == 0 || pitch.checked_mul(height) != Some(data.len()) {
        return Err(Error::Image(format!(
            "cannot JPEG-encode: {} bytes for {w32}x{h32}x{channels}",
            data.len()
        )));
    }
    let too_large = |_| Error::Image("image too large to JPEG-encode".into());
    let (w, h, p) = (
        c_int::try_from(width).map_err(too_large)?,
        c_int::try_from(height).map_err(too_large)?,
        c_int::try_from(pitch).map_err(too_large)?,
    );
    encode(quality, subsamp as c_int, restart_interval, |handle, out| {
        // SAFETY: the handle is live and set up for compression. `data` holds exactly height rows
        // of pitch = width × channels bytes (checked above), only read. libjpeg-turbo allocates
        // the output (tj3Alloc) and stores its pointer and size in `out`, which frees it.
        unsafe {
            raw::tj3Compress8(handle, data.as_ptr(), w, p, h, format as c_int, &mut out.ptr, &mut out.len)
        }
    })
}

/// One encode with this thread's compressor set up for `quality`, `subsamp` and
/// `restart_interval` (optimised tables as [`with_optimal_tables`] says): `run` calls
/// libjpeg-turbo on the handle, which writes into `out`, and gives its return code.
fn encode(
    quality: u8,
    subsamp: c_int,
    restart_interval: u16,
    run: impl Fn(raw::tjhandle, &mut JpegBuf) -> c_int,
) -> Result<Vec<u8>> {
    with_optimal_tables(restart_interval, |optimize| {
        with_compressor(|handle| {
            set_encoding(handle, quality, subsamp, restart_interval, optimize)?;
            let mut out = JpegBuf::default();
            if run(handle.0, &mut out) != 0 {
                return Err(Error::Image(format!("JPEG encoding failed: {}", handle.error_message())));
            }
            Ok(out.to_vec())
        })
    })
}

/// Runs an encode (`encode(optimize)`, with libjpeg-turbo's Huffman optimisation or not) so that
/// a JPEG with restart markers gets optimised Huffman tables (which win back the markers' bytes)
/// without libjpeg-turbo's statistics pass: encoded with the standard tables, then given the
/// tables libjpeg-turbo would have computed by [`optimize_tables`](super::entropy::optimize_tables)
/// (the same bytes; tested). Should that pass decline, libjpeg-turbo optimises. Without markers,
/// the standard tables, as FFCV (OpenCV) writes.
fn with_optimal_tables(restart_interval: u16, encode: impl Fn(bool) -> Result<Vec<u8>>) -> Result<Vec<u8>> {
    #[cfg(test)]
    if restart_interval > 0 && LIBJPEG_OPTIMISES.with(std::cell::Cell::get) {
        return encode(true);
    }
    let jpeg = encode(false)?;
    if restart_interval == 0 {
        return Ok(jpeg);
    }
    match super::entropy::optimize_tables(&jpeg) {
        Some(optimised) => Ok(optimised),
        None => encode(true),
    }
}

/// Encodes a `width × height` image given as its Y, Cb and Cr planes (one plane, Y, for
/// `TJSAMP_GRAY`) with chroma subsampling `subsamp`: no colour conversion, no chroma
/// downsampling. Plane `c` is `plane_size(c, (width, height), subsamp)` bytes, packed (its
/// stride is its width), padding included: a 4:2:0 Y plane of an odd width has one column more.
/// Quality and restart markers as [`compress`].
pub(crate) fn compress_planes(
    planes: &[&[u8]],
    size: (u32, u32),
    subsamp: c_int,
    quality: u8,
    restart_interval: u16,
) -> Result<Vec<u8>> {
    compress_planes_with(planes, size, subsamp, quality, restart_interval, own_encoder())
}

/// [`compress_planes`], by beton's encoder where `own` and it applies, else by libjpeg-turbo.
fn compress_planes_with(
    planes: &[&[u8]],
    (width, height): (u32, u32),
    subsamp: c_int,
    quality: u8,
    restart_interval: u16,
    own: bool,
) -> Result<Vec<u8>> {
    let count = if subsamp == raw::TJSAMP_TJSAMP_GRAY as c_int { 1 } else { 3 };
    let bad =
        || Error::Image(format!("cannot JPEG-encode planes of a {width}x{height} image (TJSAMP {subsamp})"));
    if planes.len() != count || width == 0 || height == 0 {
        return Err(bad());
    }
    let mut ptrs = [std::ptr::null::<u8>(); 3];
    let mut strides = [0 as c_int; 3];
    for (c, plane) in planes.iter().enumerate() {
        let (pw, ph) = plane_size(c, (width, height), subsamp);
        if pw == 0 || ph == 0 || plane.len() as u64 != u64::from(pw) * u64::from(ph) {
            return Err(bad());
        }
        ptrs[c] = plane.as_ptr();
        strides[c] = c_int::try_from(pw).map_err(|_| bad())?;
    }
    let (w, h) = (c_int::try_from(width).map_err(|_| bad())?, c_int::try_from(height).map_err(|_| bad())?);
    if own && subsamp == raw::TJSAMP_TJSAMP_420 as c_int && restart_interval > 0 {
        if let Some(jpeg) = template(quality, restart_interval)
            .and_then(|t| super::entropy::encode_420(&t, [planes[0], planes[1], planes[2]], (width, height)))
        {
            #[cfg(test)]
            OWN_ENCODES.with(|n| n.set(n.get() + 1));
            return Ok(jpeg);
        }
    }
    encode(quality, subsamp, restart_interval, |handle, out| {
        // SAFETY: the handle is live and set up for compression with `subsamp`. Plane c starts at
        // ptrs[c] and holds exactly ph_c rows of pw_c = strides[c] bytes, where (pw_c, ph_c) is
        // tj3YUVPlaneWidth/Height of component c at width × height and `subsamp` (checked
        // above): what libjpeg-turbo reads, only reads. It allocates the output (tj3Alloc) and
        // stores its pointer and size in `out`, which frees it.
        unsafe {
            raw::tj3CompressFromYUVPlanes8(
                handle,
                ptrs.as_ptr(),
                w,
                strides.as_ptr(),
                h,
                &mut out.ptr,
                &mut out.len,
            )
        }
    })
}

/// Whether [`compress_planes`] encodes 4:2:0 planes with restart markers itself
/// ([`encode_420`](super::entropy::encode_420): the same bytes as libjpeg-turbo's
/// optimised encode, without its second entropy pass), unless the environment says
/// `BETON_JPEG_ENCODER=libjpeg-turbo` (read once; for comparisons, and a way out should a
/// difference ever be found).
fn own_encoder() -> bool {
    #[cfg(test)]
    if LIBJPEG_OPTIMISES.with(std::cell::Cell::get) {
        return false;
    }
    static OWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| std::env::var("BETON_JPEG_ENCODER").map_or(true, |v| v != "libjpeg-turbo"))
}

/// What [`encode_420`](super::entropy::encode_420) encodes with at `quality` and a restart
/// marker every `interval` MCUs: the [`Template420`] of a 16×16 mid-grey JPEG libjpeg-turbo
/// writes with those settings, made once per thread and setting (`None`, also kept, where
/// libjpeg-turbo fails or the template is declined).
fn template(quality: u8, interval: u16) -> Option<std::rc::Rc<Template420>> {
    thread_local! {
        /// Templates by (quality, interval).
        static TEMPLATES: Kept<(u8, u16), Template420> =
            const { std::cell::RefCell::new(Recent::new(8)) };
    }
    let key = (quality, interval);
    TEMPLATES.with(|t| {
        t.borrow_mut().get_or_insert_with(
            |k| *k == key,
            || {
                // (libjpeg-turbo's own encode: `own = false` does not come back here.)
                let (y, c) = ([128u8; 256], [128u8; 64]);
                let s420 = raw::TJSAMP_TJSAMP_420 as c_int;
                let made = compress_planes_with(&[&y, &c, &c], (16, 16), s420, quality, interval, false)
                    .ok()
                    .and_then(|jpeg| Template420::new(&jpeg))
                    .map(std::rc::Rc::new);
                (key, made)
            },
        )
    })
}

#[cfg(test)]
thread_local! {
    /// Tests: how many times [`compress_planes`] encoded with beton's encoder on this thread.
    pub(crate) static OWN_ENCODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Tests: how many times [`Decompressor::decompress_planes`] took beton's planes decoder on
    /// this thread.
    pub(crate) static OWN_PLANES_DECODED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Tests: libjpeg-turbo optimises the tables itself (what [`with_optimal_tables`] must equal).
    pub(crate) static LIBJPEG_OPTIMISES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread's compressor (creating a TurboJPEG instance, tj3Init, costs more
/// than encoding a small image). A call made while the thread's is in use gets a new one.
fn with_compressor<T>(f: impl FnOnce(&mut Handle) -> Result<T>) -> Result<T> {
    thread_local! {
        static COMPRESSOR: std::cell::RefCell<Option<Handle>> = const { std::cell::RefCell::new(None) };
    }
    COMPRESSOR.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let handle = match slot.as_mut() {
                Some(h) => h,
                None => slot.insert(Handle::new(raw::TJINIT_TJINIT_COMPRESS)?),
            };
            f(handle)
        }
        Err(_) => f(&mut Handle::new(raw::TJINIT_TJINIT_COMPRESS)?),
    })
}

/// Sets every parameter an encode reads (a reused handle keeps the last encode's): quality,
/// subsampling, restart markers and whether libjpeg-turbo optimises the Huffman tables.
fn set_encoding(
    handle: &mut Handle,
    quality: u8,
    subsamp: c_int,
    restart_interval: u16,
    optimize: bool,
) -> Result<()> {
    handle.set(raw::TJPARAM_TJPARAM_QUALITY, c_int::from(quality.clamp(1, 100)))?;
    handle.set(raw::TJPARAM_TJPARAM_SUBSAMP, subsamp)?;
    handle.set(raw::TJPARAM_TJPARAM_RESTARTBLOCKS, c_int::from(restart_interval))?;
    handle.set(raw::TJPARAM_TJPARAM_OPTIMIZE, c_int::from(optimize))
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

/// Rewrites a JPEG losslessly (the same DCT coefficients, hence the same pixels) as a baseline,
/// Huffman-coded JPEG with a restart marker every `interval` MCUs and optimised tables; the
/// markers before the scan (JFIF, EXIF, ICC ...) are kept.
///
/// # Errors
/// [`Error::Image`] ("corrupt JPEG: ...") for a JPEG libjpeg-turbo cannot read without a warning.
pub fn with_restarts(data: &[u8], interval: u16) -> Result<Vec<u8>> {
    transform(data, interval, None)
}

/// `data` cropped losslessly to `region` (its left and top edges on the MCU grid), without
/// restart markers: the reference the entropy pass's windows are tested against.
#[cfg(test)]
pub(crate) fn lossless_crop(data: &[u8], region: Rect) -> Result<Vec<u8>> {
    transform(data, 0, Some(region))
}

/// libjpeg-turbo's lossless transform of `data`: a restart marker every `interval` MCUs, and
/// cropped to `region` when given; no flip, all markers copied.
fn transform(data: &[u8], interval: u16, region: Option<Rect>) -> Result<Vec<u8>> {
    let mut handle = Handle::new(raw::TJINIT_TJINIT_TRANSFORM)?;
    handle.set(raw::TJPARAM_TJPARAM_STOPONWARNING, 1)?;
    handle.set(raw::TJPARAM_TJPARAM_SCANLIMIT, SCAN_LIMIT)?;
    set_restarts(&mut handle, interval)?;
    let len = raw::size_t::try_from(data.len()).map_err(|_| Error::Image("JPEG too large".into()))?;
    let r = region.unwrap_or_default();
    let transform = raw::tjtransform {
        r: raw::tjregion { x: r.x as c_int, y: r.y as c_int, w: r.width as c_int, h: r.height as c_int },
        op: raw::TJXOP_TJXOP_NONE as c_int,
        options: if region.is_some() { raw::TJXOPT_CROP as c_int } else { 0 },
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
        return Err(handle.corrupt());
    }
    Ok(out.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jpeg(width: u32, height: u32) -> Vec<u8> {
        let pixels: Vec<u8> = (0..width * height * 3).map(|k| (k * 7 % 251) as u8).collect();
        compress(&pixels, (width, height, 3), 90, 0).unwrap()
    }

    /// libjpeg-turbo writes what the JPEG and the geometry say, not what the buffer holds: a
    /// decode whose size disagrees with the bytes it is given is refused before it runs, even
    /// when the header read before was another (smaller) JPEG's.
    #[test]
    fn a_decode_bigger_than_the_callers_size_is_refused() {
        let (small, big) = (jpeg(16, 16), jpeg(64, 48));
        let mut d = Decompressor::new().unwrap();
        let h = d.header(&small).unwrap();
        d.set_geometry(1, Rect::default()).unwrap();
        let mut out = vec![0u8; 16 * 16 * 3];
        let err = d.decompress(&big, &mut out, (h.width, h.height), PixelFormat::Rgb).unwrap_err();
        assert!(err.to_string().contains("decodes to 64x48"), "{err}");
        // The same through the planes: the caller's geometry is for the small JPEG.
        let planes: Vec<(usize, u32, u32)> = (0..3)
            .scan(0, |at, c| {
                let (w, h) = plane_size(c, (16, 16), h.subsampling);
                let g = (*at, w, h);
                *at += (w * h) as usize;
                Some(g)
            })
            .collect();
        let mut buf = vec![0u8; 16 * 16 * 2];
        assert!(d.decompress_planes(&big, &mut buf, &planes).is_err());
        // A region set for the big JPEG does not carry over to a smaller one.
        d.header(&big).unwrap();
        d.set_geometry(2, Rect { x: 16, y: 8, width: 16, height: 16 }).unwrap();
        let mut out = vec![0u8; 16 * 16 * 3];
        assert!(d.decompress(&small, &mut out, (16, 16), PixelFormat::Rgb).is_err());
        // The right sizes decode.
        let mut d = Decompressor::new().unwrap();
        d.header(&big).unwrap();
        d.set_geometry(2, Rect { x: 16, y: 8, width: 16, height: 16 }).unwrap();
        d.decompress(&big, &mut out, (16, 16), PixelFormat::Rgb).unwrap();
        let mut whole = vec![0u8; 64 * 48 * 3];
        d.set_geometry(1, Rect::default()).unwrap();
        d.decompress(&big, &mut whole, (64, 48), PixelFormat::Rgb).unwrap();
    }
}

#[cfg(test)]
mod optimised_tables {
    use super::*;

    /// The bundled ImageFolder's photos, decoded: real pictures to encode.
    fn photos() -> Vec<(u32, u32, Vec<u8>)> {
        let mut d = Decompressor::new().unwrap();
        beton_testkit::bundled_photos()
            .iter()
            .map(|p| {
                let data = std::fs::read(p).unwrap();
                let h = d.header(&data).unwrap();
                d.set_geometry(1, Rect::default()).unwrap();
                let mut out = vec![0u8; (h.width * h.height * 3) as usize];
                d.decompress(&data, &mut out, (h.width, h.height), PixelFormat::Rgb).unwrap();
                (h.width, h.height, out)
            })
            .collect()
    }

    fn both<T>(f: impl Fn() -> T) -> (T, T) {
        let ours = f();
        LIBJPEG_OPTIMISES.with(|c| c.set(true));
        let theirs = f();
        LIBJPEG_OPTIMISES.with(|c| c.set(false));
        (ours, theirs)
    }

    /// The writer's JPEGs with restart markers get their optimised tables from the entropy pass,
    /// not from libjpeg-turbo: the bytes must be libjpeg-turbo's own, for every photo, grey and
    /// colour, planes and pixels, odd sizes, 1x1, noise (long codes) and flat images (one
    /// symbol), several qualities and intervals.
    #[test]
    fn the_entropy_pass_writes_libjpeg_turbos_optimised_tables_byte_for_byte() {
        let mut images = photos();
        let mut next = beton_testkit::xorshift(0x9e37_79b9_7f4a_7c15);
        let mut noise = |n: usize| -> Vec<u8> { (0..n).map(|_| next() as u8).collect() };
        images.push((1, 1, vec![200, 10, 30]));
        images.push((17, 9, noise(17 * 9 * 3)));
        images.push((301, 77, noise(301 * 77 * 3)));
        images.push((64, 48, vec![128; 64 * 48 * 3]));
        let mut compared = 0;
        for (i, (w, h, rgb)) in images.iter().enumerate() {
            let (quality, interval) = [(90, 1), (75, 4), (100, 1), (50, 3), (95, 7)][i % 5];
            let (ours, theirs) = both(|| compress(rgb, (*w, *h, 3), quality, interval).unwrap());
            assert_eq!(ours, theirs, "{w}x{h} q{quality} every {interval} MCUs");
            let grey: Vec<u8> = rgb.chunks_exact(3).map(|p| p[1]).collect();
            let (ours, theirs) = both(|| compress(&grey, (*w, *h, 1), quality, interval).unwrap());
            assert_eq!(ours, theirs, "grey {w}x{h}");
            // 4:2:0 planes: Y padded to even sizes, Cb and Cr at half size.
            let s420 = raw::TJSAMP_TJSAMP_420 as c_int;
            let planes: Vec<Vec<u8>> = (0..3)
                .map(|c| {
                    let (pw, ph) = plane_size(c, (*w, *h), s420);
                    grey.iter().cycle().skip(c * 7).take((pw * ph) as usize).copied().collect()
                })
                .collect();
            let refs: Vec<&[u8]> = planes.iter().map(Vec::as_slice).collect();
            let (ours, theirs) = both(|| compress_planes(&refs, (*w, *h), s420, quality, interval).unwrap());
            assert_eq!(ours, theirs, "planes {w}x{h}");
            compared += 3;
        }
        assert!(compared > 150, "{compared}");
        // Without markers: the standard tables, one encode, as before.
        let (w, h, rgb) = &images[0];
        let plain = compress(rgb, (*w, *h, 3), 90, 0).unwrap();
        assert!(super::super::entropy::optimize_tables(&plain).is_some_and(|o| o.len() < plain.len()));
    }

    /// 4:2:0 planes with restart markers are encoded by beton's encoder: libjpeg-turbo's
    /// optimised encode of the same planes, byte for byte, at every size up to two MCUs each way
    /// and a few larger ones (every padding and dummy-block case: odd sizes, a last MCU column
    /// or row of one block), noise (long codes, big coefficients), flat planes, photos'
    /// planes, qualities 1 to 100 and several intervals.
    #[test]
    fn beton_encodes_420_planes_as_libjpeg_turbo_does() {
        let s420 = raw::TJSAMP_TJSAMP_420 as c_int;
        let mut next = beton_testkit::xorshift(0x2545_f491_4f6c_dd1d);
        let mut noise = move || next() as u8;
        let mut sizes: Vec<(u32, u32)> = (1..=33).flat_map(|w| [(w, 1 + w % 7), (w, 16 + w % 18)]).collect();
        sizes.extend([(1, 1), (2, 2), (8, 8), (9, 17), (255, 31), (301, 77), (640, 17)]);
        let photos = photos();
        let (mut compared, mut case) = (0, 0usize);
        for &(w, h) in &sizes {
            for kind in 0..3 {
                let planes: Vec<Vec<u8>> = (0..3)
                    .map(|c| {
                        let (pw, ph) = plane_size(c, (w, h), s420);
                        let n = (pw * ph) as usize;
                        match kind {
                            0 => (0..n).map(|_| noise()).collect(),
                            1 => vec![[128, 0, 255][c]; n],
                            _ => {
                                let (_, _, rgb) = &photos[case % photos.len()];
                                rgb.iter().skip(c).step_by(3).cycle().take(n).copied().collect()
                            }
                        }
                    })
                    .collect();
                let refs: Vec<&[u8]> = planes.iter().map(Vec::as_slice).collect();
                let (quality, interval) =
                    [(90, 1), (75, 2), (100, 1), (1, 3), (50, 5), (95, 16), (85, 7)][case % 7];
                case += 1;
                let before = OWN_ENCODES.with(std::cell::Cell::get);
                let (ours, theirs) =
                    both(|| compress_planes(&refs, (w, h), s420, quality, interval).unwrap());
                assert_eq!(
                    OWN_ENCODES.with(std::cell::Cell::get),
                    before + 1,
                    "{w}x{h}: not encoded by beton"
                );
                assert!(
                    ours == theirs,
                    "{w}x{h} kind {kind} q{quality} every {interval} MCUs: not libjpeg-turbo's bytes"
                );
                // Made in the memory reserved for it (not grown, which doubles it), and that
                // close to its size (a writer holds them all until it chooses its page size).
                let (len, reserved) = (ours.len(), ours.capacity());
                assert!(
                    reserved >= len && reserved <= len + len / 16 + 1100,
                    "{w}x{h} kind {kind} q{quality}: {reserved} bytes reserved for {len}"
                );
                compared += 1;
            }
        }
        assert!(compared > 200, "{compared}");
        // Without markers, or another subsampling: libjpeg-turbo's.
        let before = OWN_ENCODES.with(std::cell::Cell::get);
        let y = vec![7u8; 16 * 16];
        let c = vec![9u8; 8 * 8];
        compress_planes(&[&y, &c, &c], (16, 16), s420, 90, 0).unwrap();
        let s444 = raw::TJSAMP_TJSAMP_444 as c_int;
        compress_planes(&[&y, &y, &y], (16, 16), s444, 90, 1).unwrap();
        assert_eq!(OWN_ENCODES.with(std::cell::Cell::get), before);
        // Templates it declines: another sampling, no restart interval.
        let s444_template = compress_planes_with(&[&y, &y, &y], (16, 16), s444, 90, 1, false).unwrap();
        assert!(Template420::new(&s444_template).is_none());
        let no_markers = compress_planes_with(&[&y, &c, &c], (16, 16), s420, 90, 0, false).unwrap();
        assert!(Template420::new(&no_markers).is_none());
        let with_markers = compress_planes_with(&[&y, &c, &c], (16, 16), s420, 90, 1, false).unwrap();
        assert!(Template420::new(&with_markers).is_some());
    }

    #[test]
    fn a_jpeg_the_pass_declines_is_optimised_by_libjpeg_turbo() {
        let calls = std::cell::RefCell::new(Vec::new());
        let encode = |optimize: bool| {
            calls.borrow_mut().push(optimize);
            Ok(if optimize { b"libjpeg-turbo's".to_vec() } else { b"not a JPEG".to_vec() })
        };
        assert_eq!(with_optimal_tables(1, encode).unwrap(), b"libjpeg-turbo's");
        assert_eq!(*calls.borrow(), [false, true]);
        // Without markers: one encode, the standard tables.
        calls.borrow_mut().clear();
        assert_eq!(with_optimal_tables(0, encode).unwrap(), b"not a JPEG");
        assert_eq!(*calls.borrow(), [false]);
    }
}
