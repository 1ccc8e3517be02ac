//! Cutting a crop's part out of a JPEG that has restart markers, without decoding anything.
//!
//! Most of a JPEG decode at training quality is entropy (Huffman) decoding (about two thirds for
//! q90 at 512 px), and a decoder must entropy-decode every byte before the rows it wants: the
//! coefficients are one bit stream. A *restart marker* (RSTn, every `Ri` MCUs as the DRI segment
//! says) restarts that stream (DC predictions reset, byte aligned), so the intervals between
//! markers are independent. beton's writer puts a marker after every MCU (or few MCUs); for a
//! crop, [`slice`] then copies out only the intervals that cover the crop (plus a margin), as a
//! new, smaller, valid baseline JPEG: the same header with the new width and height in SOF, the
//! intervals with their markers renumbered `RST0, RST1, ...`, and EOI. libjpeg-turbo decodes that
//! instead, so entropy decoding costs the crop's area rather than everything above and left of
//! its end.
//!
//! The cut is on MCU boundaries, so every 8×8 block (and its DCT-domain scaling) is the same as
//! in the whole image; a margin of at least one pixel at the decode scale keeps libjpeg-turbo's
//! edge handling of the chroma upsampler (which treats the first and last row and column of an
//! image specially) out of the crop. The pixels of the crop are therefore those of a whole decode.
//!
//! Anything unexpected (no DRI, progressive or arithmetic coding, several scans, an interval
//! length that does not divide or is not a multiple of the MCU row, marker numbers out of order,
//! too few markers) makes [`slice`] return `None` and the caller decodes the original bytes,
//! which reports corruption the usual way. This code only reads `data` with checked indexing.

use beton_storage::jpeg::markers;

use crate::image::ops::Crop;

/// Where a slice lies in the original image, in pixels: the slice JPEG is `width × height` and its
/// pixel (0, 0) is the original's (`x`, `y`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slice {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

/// What [`parse`] learns from the header of a baseline, single-scan JPEG with restart markers.
#[derive(Debug)]
struct Header {
    /// Byte offset of SOF's height field (width follows it).
    sof_size_at: usize,
    width: u32,
    height: u32,
    /// MCU size in pixels.
    mcu_w: u32,
    mcu_h: u32,
    /// MCUs per restart interval (DRI).
    interval: u32,
    /// First byte of the entropy-coded data (after the SOS segment).
    scan_at: usize,
}

/// Reads the markers up to SOS ([`markers::parse`]); `None` unless this is a baseline or
/// extended Huffman-coded, single-scan (all components interleaved), 8-bit JPEG with a non-zero
/// restart interval.
fn parse(data: &[u8]) -> Option<Header> {
    let m = markers::parse(data);
    let (frame, scan) = (m.frame?, m.scan?);
    if m.stray_marker || !frame.is_sequential_huffman() {
        return None;
    }
    let comps = frame.num_components;
    if frame.precision != 8 || frame.height == 0 || frame.width == 0 || !(1..=4).contains(&comps) {
        return None;
    }
    let (mut hmax, mut vmax) = (1, 1);
    for &(h, v) in &frame.sampling[..usize::from(comps)] {
        let (h, v) = (u32::from(h), u32::from(v));
        if !(1..=4).contains(&h) || !(1..=4).contains(&v) {
            return None;
        }
        hmax = hmax.max(h);
        vmax = vmax.max(v);
    }
    // A single-component scan is not interleaved: its MCU is one 8×8 block.
    let (mcu_w, mcu_h) = if comps == 1 { (8, 8) } else { (8 * hmax, 8 * vmax) };
    if scan.num_components != comps || scan.spectral != Some([0, 63, 0]) || m.restart_interval == 0 {
        return None;
    }
    Some(Header {
        sof_size_at: frame.size_at,
        width: u32::from(frame.width),
        height: u32::from(frame.height),
        mcu_w,
        mcu_h,
        interval: u32::from(m.restart_interval),
        scan_at: scan.data_at,
    })
}

/// Whether `data` is a JPEG [`slice`] can cut (a baseline, single-scan JPEG with restart
/// markers), whatever the crop.
pub(crate) fn has_restarts(data: &[u8]) -> bool {
    parse(data).is_some()
}

/// The MCU columns and rows that cover `crop` widened by `margin` pixels on each side (clamped
/// to the `width × height` image), for MCUs of `mcu_w × mcu_h` pixels; `None` for a crop outside
/// the image.
pub(crate) fn mcu_span(
    crop: Crop,
    margin: u32,
    (width, height): (u32, u32),
    (mcu_w, mcu_h): (u32, u32),
) -> Option<(std::ops::Range<u32>, std::ops::Range<u32>)> {
    let x0 = crop.x.saturating_sub(margin);
    let y0 = crop.y.saturating_sub(margin);
    let x1 = crop.x.checked_add(crop.width)?.saturating_add(margin).min(width);
    let y1 = crop.y.checked_add(crop.height)?.saturating_add(margin).min(height);
    if x0 >= x1 || y0 >= y1 {
        return None;
    }
    Some((x0 / mcu_w..x1.div_ceil(mcu_w), y0 / mcu_h..y1.div_ceil(mcu_h)))
}

/// Writes into `out` a JPEG of the restart intervals of `data` that cover `crop` widened by
/// `margin` pixels on each side (clamped to the image), and says where it lies; `None` when
/// `data` is not a JPEG this can slice (see the module doc), its size is not `width × height`,
/// or the slice would be the whole image.
pub(crate) fn slice(
    data: &[u8],
    (width, height): (u32, u32),
    crop: Crop,
    margin: u32,
    out: &mut Vec<u8>,
    markers: &mut Vec<usize>,
) -> Option<Slice> {
    let h = parse(data)?;
    if (h.width, h.height) != (width, height) {
        return None;
    }
    let mcus_x = h.width.div_ceil(h.mcu_w);
    let mcus_y = h.height.div_ceil(h.mcu_h);
    let total = u64::from(mcus_x) * u64::from(mcus_y);
    let (cols, rows) = mcu_span(crop, margin, (width, height), (h.mcu_w, h.mcu_h))?;
    let (mut c0, mut c1, mut r0, mut r1) = (cols.start, cols.end, rows.start, rows.end);
    let ri = h.interval;
    // Intervals of a few MCUs within rows that they divide, or of whole MCU rows.
    let row_intervals = if ri <= mcus_x && mcus_x % ri == 0 {
        c0 = c0 / ri * ri;
        c1 = (c1.div_ceil(ri) * ri).min(mcus_x);
        false
    } else if ri % mcus_x == 0 {
        let rows = ri / mcus_x;
        (c0, c1) = (0, mcus_x);
        r0 = r0 / rows * rows;
        r1 = (r1.div_ceil(rows) * rows).min(mcus_y);
        true
    } else {
        return None;
    };
    if u64::from(c1 - c0) * u64::from(r1 - r0) >= total {
        return None;
    }
    // Interval `i` covers MCUs `i·ri .. (i+1)·ri` in raster order. The intervals wanted are one
    // run `first..end` per MCU row, or, for row intervals, one run spanning all the rows.
    let (rows, span) = if row_intervals { (r0..r0 + 1, r1 - r0) } else { (r0..r1, 1) };
    let run = |r: u32| -> (u64, u64) {
        let (mx, ri) = (u64::from(mcus_x), u64::from(ri));
        let (top, bottom) = (u64::from(r), u64::from(r + span - 1));
        ((top * mx + u64::from(c0)) / ri, (bottom * mx + u64::from(c1)).div_ceil(ri))
    };
    let last_needed = run(rows.end - 1).1 - 1;
    let count = total.div_ceil(u64::from(ri));
    // Find the markers up to the end of the last interval needed. markers[i] is where RST i
    // (mod 8) begins, i.e. the end of interval i's bytes; the end of the last interval of the
    // image is the marker that ends the scan (EOI).
    markers.clear();
    let scan = data.get(h.scan_at..)?;
    let mut at = 0;
    while (markers.len() as u64) <= last_needed {
        let ff = markers::next_ff(scan, at)?;
        let mut next = ff + 1;
        while *scan.get(next)? == 0xFF {
            next += 1;
        }
        match *scan.get(next)? {
            0x00 => {}
            m @ 0xD0..=0xD7 => {
                if u64::from(m - 0xD0) != markers.len() as u64 % 8 || markers.len() as u64 + 1 >= count {
                    return None;
                }
                markers.push(ff);
            }
            _ => {
                // The end of the scan: it must come after the last interval.
                if markers.len() as u64 + 1 != count {
                    return None;
                }
                markers.push(ff);
                break;
            }
        }
        at = next + 1;
    }
    if (markers.len() as u64) <= last_needed {
        return None;
    }
    let bytes_of = |i: u64| -> Option<&[u8]> {
        let i = usize::try_from(i).ok()?;
        let start = if i == 0 { 0 } else { markers.get(i - 1)? + 2 };
        scan.get(start..*markers.get(i)?)
    };
    // The new JPEG: the header with the slice's size, the intervals, EOI.
    let sx = c0 * h.mcu_w;
    let sy = r0 * h.mcu_h;
    let sw = (c1 * h.mcu_w).min(width) - sx;
    let sh = (r1 * h.mcu_h).min(height) - sy;
    out.clear();
    out.extend_from_slice(data.get(..h.scan_at)?);
    out.get_mut(h.sof_size_at..h.sof_size_at + 4)?.copy_from_slice(&[
        (sh >> 8) as u8,
        sh as u8,
        (sw >> 8) as u8,
        sw as u8,
    ]);
    let mut n = 0u64;
    for (first, end) in rows.map(run) {
        for i in first..end {
            if n > 0 {
                out.extend_from_slice(&[0xFF, 0xD0 + ((n - 1) % 8) as u8]);
            }
            out.extend_from_slice(bytes_of(i)?);
            n += 1;
        }
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    Some(Slice { x: sx, y: sy, width: sw, height: sh })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::image::codec::testing::{crop_in, damage, damaged};
    use std::ffi::c_int;
    use turbojpeg::raw;

    /// `pixels` (`h` rows of `w` pixels: RGB, or grey when one byte each) compressed by
    /// libjpeg-turbo with `subsamp` (grey pixels make a grey JPEG whatever it says), `quality`,
    /// and a restart marker every `interval` MCUs, every `-interval` MCU rows when negative,
    /// none when 0. The safe `turbojpeg` API cannot set restart markers, hence the raw calls.
    pub(crate) fn compress(
        pixels: &[u8],
        w: usize,
        h: usize,
        subsamp: c_int,
        quality: c_int,
        interval: i32,
    ) -> Vec<u8> {
        let channels = pixels.len() / (w * h);
        assert!(pixels.len() == w * h * channels && (channels == 1 || channels == 3), "test pixels");
        let (subsamp, format) = match channels {
            1 => (raw::TJSAMP_TJSAMP_GRAY as c_int, raw::TJPF_TJPF_GRAY),
            _ => (subsamp, raw::TJPF_TJPF_RGB),
        };
        // SAFETY: (test) a fresh handle; `pixels` holds h rows of w × channels bytes (asserted);
        // the output is allocated by libjpeg-turbo, copied and freed with tj3Free.
        unsafe {
            let t = raw::tj3Init(raw::TJINIT_TJINIT_COMPRESS as c_int);
            assert!(!t.is_null());
            raw::tj3Set(t, raw::TJPARAM_TJPARAM_QUALITY as c_int, quality);
            raw::tj3Set(t, raw::TJPARAM_TJPARAM_SUBSAMP as c_int, subsamp);
            if interval >= 0 {
                raw::tj3Set(t, raw::TJPARAM_TJPARAM_RESTARTBLOCKS as c_int, interval);
            } else {
                raw::tj3Set(t, raw::TJPARAM_TJPARAM_RESTARTROWS as c_int, -interval);
            }
            let mut dst: *mut u8 = std::ptr::null_mut();
            let mut size: raw::size_t = 0;
            let rc = raw::tj3Compress8(
                t,
                pixels.as_ptr(),
                w as c_int,
                (w * channels) as c_int,
                h as c_int,
                format as c_int,
                &mut dst,
                &mut size,
            );
            assert_eq!(rc, 0);
            let v = std::slice::from_raw_parts(dst, size as usize).to_vec();
            raw::tj3Free(dst.cast());
            raw::tj3Destroy(t);
            v
        }
    }

    /// A noisy `w × h` picture as a JPEG with `subsamp` at quality 90, with restart markers as
    /// [`compress`] takes them.
    pub(crate) fn jpeg_with_restarts(
        w: usize,
        h: usize,
        subsamp: c_int,
        interval: i32,
        grey: bool,
    ) -> Vec<u8> {
        let channels = if grey { 1 } else { 3 };
        let pixels: Vec<u8> = (0..w * h * channels)
            .map(|i| {
                let (p, c) = (i / channels, i % channels);
                let (x, y) = (p % w, p / w);
                ((x * 7 + y * 3 + c * 50) as u8).wrapping_add(((x * y) % 13) as u8 * 9)
            })
            .collect();
        compress(&pixels, w, h, subsamp, 90, interval)
    }

    /// The whole JPEG decoded to RGB (grey replicated by libjpeg-turbo).
    fn decode(data: &[u8]) -> (usize, usize, Vec<u8>) {
        let img = turbojpeg::decompress(data, turbojpeg::PixelFormat::RGB).unwrap();
        (img.width, img.height, img.pixels)
    }

    #[test]
    fn a_slice_decodes_to_the_same_pixels_as_the_whole_image_there() {
        use raw::{TJSAMP_TJSAMP_420 as S420, TJSAMP_TJSAMP_422 as S422, TJSAMP_TJSAMP_444 as S444};
        let (mut out, mut markers) = (Vec::new(), Vec::new());
        for (subsamp, grey) in [(S420, false), (S422, false), (S444, false), (S444, true)] {
            for interval in [1, 2, 3, -1, -2] {
                let (w, h) = (203usize, 157usize);
                let data = jpeg_with_restarts(w, h, subsamp as c_int, interval, grey);
                let (_, _, whole) = decode(&data);
                for crop in [
                    Crop { x: 40, y: 30, width: 90, height: 60 },
                    Crop { x: 0, y: 0, width: 20, height: 20 },
                    Crop { x: 150, y: 100, width: 53, height: 57 },
                    Crop { x: 17, y: 77, width: 1, height: 1 },
                ] {
                    let what = format!("subsamp {subsamp} grey {grey} interval {interval} {crop:?}");
                    let Some(s) = slice(&data, (w as u32, h as u32), crop, 8, &mut out, &mut markers) else {
                        // Intervals that neither divide nor span the MCU rows (13 or 26 MCUs) cannot
                        // be cut.
                        let mcus_x = if subsamp == S444 { 26 } else { 13 };
                        assert!(interval > 0 && mcus_x % interval != 0, "{what}: no slice");
                        continue;
                    };
                    assert!(s.width < w as u32 || s.height < h as u32, "{what}: {s:?}");
                    assert!(s.x <= crop.x && s.y <= crop.y, "{what}: {s:?}");
                    assert!(s.x + s.width >= crop.x + crop.width && s.y + s.height >= crop.y + crop.height);
                    let (sw, sh, part) = decode(&out);
                    assert_eq!((sw, sh), (s.width as usize, s.height as usize), "{what}");
                    for y in crop.y..crop.y + crop.height {
                        for x in crop.x..crop.x + crop.width {
                            let a = &whole[(y as usize * w + x as usize) * 3..][..3];
                            let (px, py) = ((x - s.x) as usize, (y - s.y) as usize);
                            let b = &part[(py * sw + px) * 3..][..3];
                            assert_eq!(a, b, "{what}: pixel ({x}, {y})");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn jpegs_it_cannot_slice_give_none() {
        let (mut out, mut markers) = (Vec::new(), Vec::new());
        let crop = Crop { x: 10, y: 10, width: 20, height: 20 };
        let plain = turbojpeg::compress(
            turbojpeg::Image {
                pixels: &[128u8; 64 * 64 * 3][..],
                width: 64,
                pitch: 192,
                height: 64,
                format: turbojpeg::PixelFormat::RGB,
            },
            90,
            turbojpeg::Subsamp::Sub2x2,
        )
        .unwrap();
        assert!(slice(&plain, (64, 64), crop, 8, &mut out, &mut markers).is_none(), "no DRI");
        let data = jpeg_with_restarts(64, 64, raw::TJSAMP_TJSAMP_420 as c_int, 1, false);
        assert!(slice(&data, (64, 64), crop, 8, &mut out, &mut markers).is_some());
        assert!(slice(&data, (64, 63), crop, 8, &mut out, &mut markers).is_none(), "wrong size");
        assert!(slice(&data, (64, 64), Crop::full(64, 64), 8, &mut out, &mut markers).is_none(), "whole");
        // Truncated before the crop's intervals end, or marker numbers out of order.
        assert!(slice(&data[..data.len() / 3], (64, 64), crop, 8, &mut out, &mut markers).is_none());
        let mut swapped = data.clone();
        let rst = swapped.windows(2).position(|w| w == [0xFF, 0xD0]).unwrap();
        swapped[rst + 1] = 0xD3;
        assert!(slice(&swapped, (64, 64), crop, 8, &mut out, &mut markers).is_none(), "RST order");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

        /// Damaged JPEGs (bytes overwritten, cut short) never panic the slicer, and whatever it
        /// returns is a slice inside the image that covers the crop.
        #[test]
        fn damaged_jpegs_never_panic(damage in damage(3000), crop in crop_in(96, 80)) {
            let data = jpeg_with_restarts(96, 80, raw::TJSAMP_TJSAMP_420 as c_int, 1, false);
            let data = damaged(data, &damage);
            let (mut out, mut markers) = (Vec::new(), Vec::new());
            if let Some(s) = slice(&data, (96, 80), crop, 8, &mut out, &mut markers) {
                proptest::prop_assert!(s.x <= crop.x && s.y <= crop.y);
                proptest::prop_assert!(s.x + s.width <= 96 && s.y + s.height <= 80);
                proptest::prop_assert!(s.x + s.width >= crop.x + crop.width);
            }
        }
    }
}
