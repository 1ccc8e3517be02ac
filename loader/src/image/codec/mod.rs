//! The loader's JPEG decoding: crop-aware, DCT-scaled, into packed RGB or raw planes, on
//! beton-storage's codec layer ([`beton_storage::jpeg`]: the TurboJPEG wrapper and the marker
//! parser), with restart-marker slicing ([`restart`]) and the colour conversion of planes
//! ([`color`]).
//!
//! To hand out a `w × h` crop of a JPEG at output size `ow × oh`, this decodes
//!
//! - at the smallest scale of 1/8, 1/4, 1/2 and 1 at which the crop is still at least the output
//!   size (libjpeg-turbo computes the scaled image in the DCT domain: a 1/8 decode is just the
//!   DC coefficients). Those four scales are the ones libjpeg-turbo has SIMD inverse DCTs for;
//!   its other factors (3/8, 5/8, ...) use plain C IDCTs.
//! - only the rows and columns of the crop (`tj3SetCroppingRegion`): rows above are skipped
//!   without IDCT, rows below are not read, columns outside are not converted. The left edge is
//!   moved left to the scaled iMCU boundary libjpeg-turbo requires, and the fractional crop
//!   inside the decoded region is returned for the resize.
//!
//! [`decode_crop_planes`] is the crop decoders' usual path: the crop's MCUs cut out as a JPEG
//! of their own (the restart intervals of a JPEG with restart markers, what beton writes:
//! [`restart`]; through a seek index for one without, what FFCV writes: [`seek`], which at
//! scales 1, 1/2 and 1/4 decodes them straight from the original instead) and decoded
//! to their raw planes (Y, Cb, Cr at their own resolutions, or grey), with no chroma upsampling
//! and no colour conversion: the resize takes each plane to the output size and [`color`]
//! converts only the output's pixels. [`decode_crop`] decodes to packed RGB (the path for what
//! the planes do not take: JPEGs without restart markers that cannot be indexed, CMYK,
//! unusual sampling factors; libjpeg-turbo's cropping skips the rows below the crop).
//!
//! Every libjpeg warning is an error (`TJPARAM_STOPONWARNING`, as beton-storage's strict decoder),
//! so a truncated or corrupt payload is refused rather than half-grey. One decompressor per
//! thread, reused ([`crate::image::scratch`]), never shared. This code never panics on bad bytes.

use beton_storage::jpeg::{Decompressor, JpegColor, JpegHeader, PixelFormat, PlaneLayout, Rect};

use crate::error::{from_codec, Error, Result};
use crate::image::ops::Crop;
use crate::image::scratch::{self, with_decompressor};

pub(crate) mod color;
pub(crate) mod restart;
pub(crate) mod seek;

/// The DCT scaling denominators used, largest (smallest image) first.
const DENOMS: [u32; 4] = [8, 4, 2, 1];

/// A decoded region of a JPEG: tightly packed RGB, `width × height`, and where the requested
/// crop lies in it, in (fractional) pixels of the region: `[left, top, width, height]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    pub width: u32,
    pub height: u32,
    pub crop: [f64; 4],
}

fn jpeg_error(why: impl std::fmt::Display) -> Error {
    Error::Decode(format!("corrupt JPEG: {why}"))
}

/// Reads the header of `data` with `d`; only 8-bit lossy JPEGs are decoded here.
fn header(d: &mut Decompressor, data: &[u8]) -> Result<JpegHeader> {
    let h = d.header(data).map_err(from_codec)?;
    if h.precision != 8 || h.lossless {
        return Err(Error::Decode("unsupported JPEG: only 8-bit lossy JPEGs are supported".into()));
    }
    Ok(h)
}

/// Checks the header's size against the row's and whether the colour space decodes to RGB
/// here; `Ok(None)` for CMYK / YCCK (the caller takes beton-storage's full decoder).
fn check_header(d: &mut Decompressor, data: &[u8], width: u32, height: u32) -> Result<Option<JpegHeader>> {
    let h = header(d, data)?;
    if (h.width, h.height) != (width, height) {
        return Err(jpeg_error(format!(
            "the JPEG is {}x{}, its row says {width}x{height}",
            h.width, h.height
        )));
    }
    if matches!(h.color, JpegColor::Cmyk | JpegColor::Ycck) {
        return Ok(None);
    }
    Ok(Some(h))
}

/// Decodes the whole JPEG (`width × height` by its row) into `dst` (RGB, packed); `Ok(false)`
/// when its colour space is CMYK or YCCK (not decoded here).
pub(crate) fn decode_full(data: &[u8], width: u32, height: u32, dst: &mut [u8]) -> Result<bool> {
    with_decompressor(|d| {
        if check_header(d, data, width, height)?.is_none() {
            return Ok(false);
        }
        d.set_geometry(1, Rect::default()).map_err(from_codec)?;
        d.decompress(data, dst, (width, height), PixelFormat::Rgb).map_err(from_codec)?;
        Ok(true)
    })
}

/// Decodes the part of the JPEG that `crop` needs for an output of `out_w × out_h`, at the
/// smallest DCT scale that keeps the crop at least `oversample ×` that size, into `buf` (resized
/// to fit); `Ok(None)` when its colour space is CMYK or YCCK (not decoded here).
///
/// A JPEG with restart markers (beton's writer puts them in) is first cut down to the restart
/// intervals around the crop ([`restart::slice`]), so only those are entropy-decoded; if that
/// slice cannot be made or decoded, the whole JPEG is decoded as below.
pub(crate) fn decode_crop(
    data: &[u8],
    width: u32,
    height: u32,
    crop: Crop,
    (out_w, out_h): (u32, u32),
    oversample: f64,
    buf: &mut Vec<u8>,
) -> Result<Option<Region>> {
    let denom = scale_for(crop, (out_w, out_h), oversample);
    let sliced = scratch::SLICE.with(|cell| {
        let (bytes, markers) = &mut *cell.borrow_mut();
        // A margin of 4 pixels at the decode scale keeps the cut edges (which the chroma
        // upsampler treats as image edges) out of the region decoded below.
        let s = restart::slice(data, (width, height), crop, 4 * denom, bytes, markers)?;
        let sub = Crop { x: crop.x - s.x, y: crop.y - s.y, ..crop };
        decode_region(bytes, s.width, s.height, sub, denom, buf).ok().flatten()
    });
    match sliced {
        Some(region) => Ok(Some(region)),
        None => decode_region(data, width, height, crop, denom, buf),
    }
}

/// Raw planes of a JPEG decoded by [`decode_crop_planes`]: luma (or grey) then, for YCbCr, the
/// two chroma planes at their own (subsampled) resolution.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planes {
    /// 1 (grey) or 3 (Y, Cb, Cr).
    pub count: usize,
    /// Per plane: `(offset in the buffer, width, height)`.
    pub geometry: [(usize, u32, u32); 3],
    /// Per plane: the crop `[left, top, width, height]` in its (fractional) pixels.
    pub crop: [[f64; 4]; 3],
}

/// The scale denominator [`decode_crop`] and [`decode_crop_planes`] decode `crop` at.
fn scale_for(crop: Crop, (out_w, out_h): (u32, u32), oversample: f64) -> u32 {
    DENOMS
        .into_iter()
        .find(|&n| {
            let enough = |crop: u32, out: u32| f64::from(crop) >= f64::from(out) * f64::from(n) * oversample;
            enough(crop.width, out_w) && enough(crop.height, out_h)
        })
        .unwrap_or(1)
}

/// TurboJPEG's `TJSAMP_GRAY`.
const TJSAMP_GRAY: i32 = 3;

/// Luma pixels per chroma pixel (horizontally, vertically) of TurboJPEG's subsampling `subsamp`
/// (`tjMCUWidth / 8`, `tjMCUHeight / 8`); `None` for grey and unknown ones.
fn chroma_factors(subsamp: i32) -> Option<(u32, u32)> {
    let s = usize::try_from(subsamp).ok()?;
    let f = [(1, 1), (2, 1), (2, 2), (0, 0), (1, 2), (4, 1), (1, 4)].get(s).copied()?;
    (f.0 > 0).then_some(f)
}

/// Decodes the part of the JPEG that `crop` needs for an output of `out_w × out_h` (at the scale
/// [`decode_crop`] would choose) into its raw planes in `buf`: Y, Cb and Cr at their own
/// resolutions, or one grey plane, with no chroma upsampling and no colour conversion, so that
/// the resize can take each plane straight to the output size and the colour conversion runs
/// on output pixels only. A JPEG with restart markers is cut down to the crop's intervals
/// first ([`restart::slice`]), one without to the crop's MCUs through its seek index
/// ([`seek::Cache::window`]), or decoded whole when the cut would be all of it; a JPEG without restart
/// markers that has no index gives `Ok(None)` (libjpeg-turbo's cropped RGB decode skips more of
/// it than a whole decode to planes saves: 167 vs 180 µs for a 500×375 photo).
///
/// `Ok(None)` too when the JPEG is not YCbCr or grey with a known subsampling (RGB, CMYK and
/// YCCK JPEGs, unusual sampling factors) or its slice does not decode: the caller takes
/// [`decode_crop`], which also reports corrupt data.
pub(crate) fn decode_crop_planes(
    data: &[u8],
    width: u32,
    height: u32,
    crop: Crop,
    out: (u32, u32),
    oversample: f64,
    buf: &mut Vec<u8>,
) -> Result<Option<Planes>> {
    let denom = scale_for(crop, out, oversample);
    scratch::SLICE.with(|cell| {
        let (bytes, markers) = &mut *cell.borrow_mut();
        // The margin keeps the resize's taps on decoded pixels rather than on the slice's edge:
        // the outputs at the crop's edge weigh inputs up to `support − scale / 2 + 1/2` pixels
        // beyond it, which is 2 luma pixels for Catmull-Rom enlarging and 2.5 for the chroma
        // (2:1 subsampled, enlarged with the triangle filter), and under 4 for a downscale of
        // less than 2 (the DCT scale sees to that).
        let enlarged = crop.width <= out.0 * denom && crop.height <= out.1 * denom;
        let margin = if enlarged { 3 } else { 4 } * denom;
        let whole = (data, (0, 0), (width, height));
        let (source, at, size) = match restart::slice(data, (width, height), crop, margin, bytes, markers) {
            Some(s) => (&bytes[..], (s.x, s.y), (s.width, s.height)),
            // A crop whose slice would be the whole image (beton's JPEGs) decodes whole.
            None if restart::has_restarts(data) => whole,
            // Without restart markers (FFCV's JPEGs): the crop's MCUs through the seek index,
            // decoded straight into the planes, else cut out as a JPEG of their own.
            None => {
                if let Some(planes) =
                    seek_planes(data, (width, height), crop, margin, denom, buf).ok().flatten()
                {
                    return Ok(Some(planes));
                }
                match seek::cache().window(data, (width, height), crop, margin, bytes) {
                    Some(seek::Window::Slice(s)) => (&bytes[..], (s.x, s.y), (s.width, s.height)),
                    Some(seek::Window::Whole) => whole,
                    None => return Ok(None),
                }
            }
        };
        let crop = Crop { x: crop.x - at.0, y: crop.y - at.1, ..crop };
        Ok(planes_of(source, size, crop, denom, buf).ok().flatten())
    })
}

/// [`decode_crop_planes`] of `data`, a `width × height` JPEG (whole or a slice), at 1/`denom`.
fn planes_of(
    data: &[u8],
    (width, height): (u32, u32),
    crop: Crop,
    denom: u32,
    buf: &mut Vec<u8>,
) -> Result<Option<Planes>> {
    with_decompressor(|d| {
        let hd = header(d, data)?;
        if (hd.width, hd.height) != (width, height) {
            return Ok(None);
        }
        d.set_geometry(denom, Rect::default()).map_err(from_codec)?;
        let scaled = (width.div_ceil(denom), height.div_ceil(denom));
        let Some(layout) = plane_layout(&hd, scaled) else {
            return Ok(None);
        };
        buf.resize(layout.bytes, 0);
        d.decompress_planes(data, buf, layout.geometry()).map_err(from_codec)?;
        Ok(planes_with_crop(&layout, hd.subsampling, crop, denom, scaled))
    })
}

/// The planes of a JPEG with header `hd` decoded at `size` (its scaled size, or a window's),
/// laid out in one buffer; `None` for what the planes do not take (RGB, CMYK and YCCK JPEGs,
/// unusual sampling factors).
fn plane_layout(hd: &JpegHeader, size: (u32, u32)) -> Option<PlaneLayout> {
    let planar = (hd.color == JpegColor::YCbCr && chroma_factors(hd.subsampling).is_some())
        || (hd.color == JpegColor::Grey && hd.subsampling == TJSAMP_GRAY);
    planar.then(|| PlaneLayout::of(hd, size)).flatten()
}

/// The [`Planes`] of decoded planes laid out as `layout` of an image `(sw, sh)` (at
/// 1/`denom`), with `crop` (in pixels of the undecoded image) placed in each; `None` when it
/// leaves one empty.
fn planes_with_crop(
    layout: &PlaneLayout,
    subsamp: i32,
    crop: Crop,
    denom: u32,
    (sw, sh): (u32, u32),
) -> Option<Planes> {
    // The crop at the decode scale, inside the luma plane; each chroma plane's is that
    // divided by its subsampling (JFIF sites chroma samples at the centre of the luma
    // pixels they cover, so edge coordinates simply scale).
    let f = |v: u32| f64::from(v) / f64::from(denom);
    let (left, top) = (f(crop.x).min(f64::from(sw)), f(crop.y).min(f64::from(sh)));
    let luma = [left, top, f(crop.width).min(f64::from(sw) - left), f(crop.height).min(f64::from(sh) - top)];
    let (count, geometry) = (layout.count, layout.planes);
    let mut out = Planes { count, geometry, crop: [luma; 3] };
    if let Some((fx, fy)) = chroma_factors(subsamp).filter(|_| count == 3) {
        let (fx, fy) = (f64::from(fx), f64::from(fy));
        for (&(_, pw, ph), crop) in geometry.iter().zip(out.crop.iter_mut()).skip(1) {
            let (l, t) = ((luma[0] / fx).min(f64::from(pw)), (luma[1] / fy).min(f64::from(ph)));
            *crop = [l, t, (luma[2] / fx).min(f64::from(pw) - l), (luma[3] / fy).min(f64::from(ph) - t)];
        }
    }
    if out.crop[..count].iter().any(|c| !(c[2] > 0.0 && c[3] > 0.0)) {
        return None;
    }
    Some(out)
}

/// The MCUs of a JPEG without restart markers that `crop` (widened by `margin`) needs, decoded
/// at scale 1/`denom` straight into planes through its seek index: no window JPEG written, no
/// second header read ([`seek::Cache::planes`]). `Ok(None)`: not indexed, not a JPEG (or a
/// scale) the planes decoder takes, or a crop that needs the whole image; the caller goes on as
/// before.
fn seek_planes(
    data: &[u8],
    (width, height): (u32, u32),
    crop: Crop,
    margin: u32,
    denom: u32,
    buf: &mut Vec<u8>,
) -> Result<Option<Planes>> {
    with_decompressor(|d| {
        // (Before the seek index is looked up: the caller's window JPEG looks it up again.)
        if !d.own_planes() || !beton_storage::jpeg::entropy::decodes_at(denom) {
            return Ok(None);
        }
        let hd = header(d, data)?;
        if (hd.width, hd.height) != (width, height) {
            return Ok(None);
        }
        let layout = |size| plane_layout(&hd, size);
        let Some((layout, at, size)) =
            seek::cache().planes(data, (width, height), crop, margin, denom, buf, layout)
        else {
            return Ok(None);
        };
        let crop = Crop { x: crop.x - at.0, y: crop.y - at.1, ..crop };
        let scaled = (size.0.div_ceil(denom), size.1.div_ceil(denom));
        Ok(planes_with_crop(&layout, hd.subsampling, crop, denom, scaled))
    })
}

/// [`decode_crop`] of `data` (not sliced) at scale 1/`denom`.
fn decode_region(
    data: &[u8],
    width: u32,
    height: u32,
    crop: Crop,
    denom: u32,
    buf: &mut Vec<u8>,
) -> Result<Option<Region>> {
    with_decompressor(|d| {
        let Some(hd) = check_header(d, data, width, height)? else {
            return Ok(None);
        };
        let subsamp = hd.subsampling;
        let scaled = |v: u32| v.div_ceil(denom);
        let (sw, sh) = (scaled(width), scaled(height));
        let f = |v: u32| f64::from(v) / f64::from(denom);
        let (fx, fy, fw, fh) = (f(crop.x), f(crop.y), f(crop.width), f(crop.height));
        // The scaled iMCU width (TJSCALED(tjMCUWidth[subsamp], 1/denom)); unknown subsampling
        // cannot be cropped by libjpeg-turbo, so the whole (scaled) width is decoded.
        let mcu = usize::try_from(subsamp)
            .ok()
            .and_then(|s| [8u32, 16, 16, 8, 8, 32, 8].get(s).copied())
            .map(scaled);
        let x0 = match mcu {
            // libjpeg-turbo's fancy upsampling treats the region's first column as an image edge
            // (it differs from a whole decode there by a few levels): keep it out of the crop by
            // starting one iMCU further left when the crop would begin on it.
            Some(m) => {
                let x0 = (fx.floor() as u32 / m) * m;
                if x0 > 0 && fx - f64::from(x0) < 1.0 {
                    x0 - m
                } else {
                    x0
                }
            }
            None => 0,
        };
        let x1 = if mcu.is_some() { ((fx + fw).ceil() as u32).min(sw) } else { sw };
        let y0 = (fy.floor() as u32).min(sh.saturating_sub(1));
        let y1 = ((fy + fh).ceil() as u32).clamp(y0 + 1, sh);
        let x1 = x1.max(x0 + 1).min(sw);
        let (rw, rh) = (x1 - x0, y1 - y0);
        let region = Rect { x: x0, y: y0, width: rw, height: rh };
        let clamp = |v: f64, max: u32| v.clamp(0.0, f64::from(max));
        let left = clamp(fx - f64::from(x0), rw);
        let top = clamp(fy - f64::from(y0), rh);
        let out = Region {
            width: rw,
            height: rh,
            crop: [left, top, fw.min(f64::from(rw) - left), fh.min(f64::from(rh) - top)],
        };
        buf.resize(rw as usize * rh as usize * 3, 0);
        let cropped = d
            .set_geometry(denom, region)
            .and_then(|()| d.decompress(data, buf, (rw, rh), PixelFormat::Rgb))
            .map_err(from_codec);
        if let Err(e) = cropped {
            // libjpeg-turbo refuses some partial decodes (unusual sampling factors): decode the
            // whole scaled image once before calling the payload corrupt.
            d.set_geometry(denom, Rect::default()).map_err(|_| e)?;
            buf.resize(sw as usize * sh as usize * 3, 0);
            d.decompress(data, buf, (sw, sh), PixelFormat::Rgb).map_err(from_codec)?;
            return Ok(Some(Region {
                width: sw,
                height: sh,
                crop: [
                    clamp(fx, sw),
                    clamp(fy, sh),
                    fw.min(f64::from(sw) - clamp(fx, sw)),
                    fh.min(f64::from(sh) - clamp(fy, sh)),
                ],
            }));
        }
        Ok(Some(out))
    })
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
pub(crate) mod tests {
    pub(crate) use super::testing::*;
    use super::*;

    /// The whole image at scale 1/`denom`, for comparison.
    fn scaled(data: &[u8], denom: u32) -> (u32, u32, Vec<u8>) {
        with_decompressor(|d| {
            let h = header(d, data)?;
            let (sw, sh) = (h.width.div_ceil(denom), h.height.div_ceil(denom));
            d.set_geometry(denom, Rect::default()).map_err(from_codec)?;
            let mut out = vec![0; sw as usize * sh as usize * 3];
            d.decompress(data, &mut out, (sw, sh), PixelFormat::Rgb).map_err(from_codec)?;
            Ok((sw, sh, out))
        })
        .unwrap()
    }

    #[test]
    fn decodes_only_the_crop_at_the_smallest_scale_that_covers_the_output() {
        use turbojpeg::Subsamp::*;
        for (subsamp, restarts) in
            [None, Sub2x1, Sub2x2, Sub1x2].into_iter().flat_map(|s| [(s, false), (s, true)])
        {
            let data = jpeg(517, 389, subsamp);
            // With restart markers the crop's intervals are cut out first (checked: a slice is
            // made), and the pixels must still be those of the whole image.
            let data = if restarts { with_restarts(&data) } else { data };
            for (crop, out, denom) in [
                (Crop { x: 37, y: 21, width: 300, height: 250 }, (64, 60), 4),
                (Crop { x: 101, y: 3, width: 400, height: 380 }, (40, 40), 8),
                (Crop { x: 5, y: 50, width: 200, height: 200 }, (100, 90), 2),
                (Crop { x: 13, y: 7, width: 200, height: 150 }, (224, 224), 1),
            ] {
                let mut buf = Vec::new();
                let sliced =
                    restart::slice(&data, (517, 389), crop, 4 * denom, &mut Vec::new(), &mut Vec::new());
                assert_eq!(sliced.is_some(), restarts, "{subsamp:?} {crop:?}: {sliced:?}");
                let r = decode_crop(&data, 517, 389, crop, out, 1.0, &mut buf).unwrap().unwrap();
                let f = f64::from(denom);
                // The crop, scaled, lies in the region, which is at most an iMCU wider on the left
                // and a pixel more on each other side.
                assert!((r.crop[2] - f64::from(crop.width) / f).abs() < 1e-9, "{subsamp:?} {crop:?}: {r:?}");
                assert!(r.crop[0] >= 0.0 && r.crop[0] < 32.0 / f + 1.0, "{subsamp:?} {crop:?}: {r:?}");
                assert!(f64::from(r.width) <= r.crop[0] + r.crop[2] + 1.0, "{subsamp:?} {crop:?}: {r:?}");
                assert!(f64::from(r.height) <= r.crop[3] + 2.0, "{subsamp:?} {crop:?}: {r:?}");
                // Its pixels are those of the whole image decoded at that scale.
                let (sw, _, whole) = scaled(&data, denom);
                let x0 = ((f64::from(crop.x) / f).floor() - r.crop[0].floor()) as usize;
                let y0 = (f64::from(crop.y) / f).floor() as usize;
                let mut worst = 0;
                // Column 0 of the region may differ (an edge for the upsampler): it is never in
                // the crop.
                assert!(r.crop[0] >= 1.0 || (crop.x as f64 / f) < 1.0, "{subsamp:?} {crop:?}: {r:?}");
                for y in 0..r.height as usize {
                    for x in 3..r.width as usize * 3 {
                        let a = buf[y * r.width as usize * 3 + x];
                        let b = whole[(y0 + y) * sw as usize * 3 + x0 * 3 + x];
                        worst = worst.max(a.abs_diff(b));
                    }
                }
                assert!(worst <= 1, "{subsamp:?} {crop:?} at 1/{denom}: differs by {worst}");
            }
        }
    }

    #[test]
    fn corrupt_and_mismatched_payloads_are_errors() {
        let data = jpeg(64, 48, turbojpeg::Subsamp::Sub2x2);
        let mut buf = Vec::new();
        let crop = Crop::full(64, 48);
        let err = decode_crop(&data, 64, 47, crop, (8, 8), 1.0, &mut buf).unwrap_err().to_string();
        assert!(err.contains("64x48") && err.contains("64x47"), "{err}");
        for cut in [0, 2, 100, data.len() / 2, data.len() - 2] {
            let err = decode_crop(&data[..cut], 64, 48, crop, (8, 8), 1.0, &mut buf).unwrap_err();
            assert!(err.to_string().starts_with("corrupt JPEG"), "{cut}: {err}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Damaged JPEGs (bytes overwritten, cut short) give an error or pixels, never a panic,
        /// whatever the crop and output size.
        #[test]
        fn damaged_jpegs_never_panic(
            damage in damage(4000), crop in crop_in(120, 90), restarts in proptest::prelude::any::<bool>(),
            ow in 1u32..80, oh in 1u32..80,
        ) {
            let data = damaged_jpeg(&damage, restarts);
            let mut buf = Vec::new();
            if let Ok(Some(r)) = decode_crop(&data, 120, 90, crop, (ow, oh), 1.0, &mut buf) {
                proptest::prop_assert_eq!(buf.len(), r.width as usize * r.height as usize * 3);
            }
        }
    }
}
