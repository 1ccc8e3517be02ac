//! YCbCr to RGB after the resize: the crop decoders take a JPEG's raw planes (luma and the
//! subsampled chroma, as libjpeg-turbo decodes them before upsampling and colour conversion),
//! resize each straight to the output size, and convert only the output's pixels here.
//!
//! The conversion is libjpeg-turbo's (`jdcolor.c`, JFIF full-range BT.601 in 16-bit fixed
//! point): `R = Y + (91881·Cr' + 2¹⁵) >> 16`, `G = Y + (−22554·Cb' − 46802·Cr' + 2¹⁵) >> 16`,
//! `B = Y + (116130·Cb' + 2¹⁵) >> 16` with `Cb' = Cb − 128`, `Cr' = Cr − 128`, clamped to
//! 0–255, so a 4:4:4 JPEG converts to exactly the pixels libjpeg-turbo's own RGB decode gives
//! (tested). The AVX2 kernel computes the same integers (tested against the scalar one).

/// `FIX(1.40200)`, `FIX(0.34414)`, `FIX(0.71414)`, `FIX(1.77200)` of `jdcolor.c` (`x · 2¹⁶`,
/// rounded).
pub(crate) const CR_R: i32 = 91881;
pub(crate) const CB_G: i32 = 22554;
pub(crate) const CR_G: i32 = 46802;
pub(crate) const CB_B: i32 = 116130;

/// An image's pixels as the colour conversion and the normalisation read them.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// Planes of equal size: Y, Cb, Cr.
    Ycc([&'a [u8]; 3]),
    /// One grey plane.
    Grey(&'a [u8]),
    /// Packed RGB.
    Rgb(&'a [u8]),
}

impl<'a> Source<'a> {
    /// The planes a crop decoder's planar path hands over: `count` planes of equal size one
    /// after another, Y Cb Cr (3) or grey (1).
    pub(crate) fn planes(count: usize, planes: &'a [u8]) -> Source<'a> {
        if count == 3 {
            let n = planes.len() / 3;
            Source::Ycc([&planes[..n], &planes[n..2 * n], &planes[2 * n..3 * n]])
        } else {
            Source::Grey(planes)
        }
    }

    /// Whether it holds `pixels` pixels (every plane the same size).
    pub(crate) fn holds(&self, pixels: usize) -> bool {
        match self {
            Source::Ycc(p) => p.iter().all(|p| p.len() == pixels),
            Source::Grey(p) => p.len() == pixels,
            Source::Rgb(p) => p.len() == 3 * pixels,
        }
    }
}

/// Writes the pixels of `src` as packed RGB into `rgb`.
///
/// # Panics
/// If `rgb` is not three times the pixel count of `src` (a bug in the caller).
pub(crate) fn to_rgb(src: Source<'_>, rgb: &mut [u8]) {
    match src {
        Source::Ycc([y, cb, cr]) => ycc_to_rgb(y, cb, cr, rgb),
        Source::Grey(y) => grey_to_rgb(y, rgb),
        Source::Rgb(p) => rgb.copy_from_slice(p),
    }
}

/// One pixel.
#[inline(always)]
pub(crate) fn pixel(y: u8, cb: u8, cr: u8) -> [u8; 3] {
    let (y, cb, cr) = (i32::from(y), i32::from(cb) - 128, i32::from(cr) - 128);
    let half = 1 << 15;
    let clamp = |v: i32| v.clamp(0, 255) as u8;
    [
        clamp(y + ((CR_R * cr + half) >> 16)),
        clamp(y + ((-CB_G * cb - CR_G * cr + half) >> 16)),
        clamp(y + ((CB_B * cb + half) >> 16)),
    ]
}

/// Writes the pixels of the planes `y`, `cb`, `cr` (the same length) as packed RGB into `rgb`
/// (three times as long).
///
/// # Panics
/// If the lengths do not match (a bug in the caller).
fn ycc_to_rgb(y: &[u8], cb: &[u8], cr: &[u8], rgb: &mut [u8]) {
    let n = y.len();
    assert!(cb.len() == n && cr.len() == n && rgb.len() == 3 * n, "colour planes of different sizes");
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if crate::image::cpu::avx2() {
        // SAFETY: the CPU has AVX2; the lengths were checked above.
        done = unsafe { simd::ycc_to_rgb_avx2(y, cb, cr, rgb) };
    }
    for i in done..n {
        rgb[3 * i..3 * i + 3].copy_from_slice(&pixel(y[i], cb[i], cr[i]));
    }
}

/// Writes the grey plane `y` as packed RGB (each value three times) into `rgb`.
///
/// # Panics
/// If `rgb` is not three times as long as `y`.
fn grey_to_rgb(y: &[u8], rgb: &mut [u8]) {
    assert_eq!(rgb.len(), 3 * y.len(), "grey plane and RGB of different sizes");
    for (px, &v) in rgb.chunks_exact_mut(3).zip(y) {
        px.fill(v);
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod simd {
    use std::arch::x86_64::*;

    use super::{CB_B, CB_G, CR_G, CR_R};

    /// Two `i16` weights as the `i32` a `vpmaddwd` pair takes (`a` on the low half).
    #[target_feature(enable = "avx2")]
    fn pair(a: i32, b: i32) -> __m256i {
        _mm256_set1_epi32((a & 0xFFFF) | (b << 16))
    }

    /// R, G and B of 16 pixels from their Y, Cb and Cr bytes (16 each at the pointers).
    ///
    /// The multipliers do not fit `i16`, so each is split into a multiple of 2¹⁶ (which the
    /// shift leaves whole) and a rest that fits: `91881 = 2¹⁶ + 26345`, `116130 = 2·2¹⁶ −
    /// 14942`, `−46802 = −2¹⁶ + 18734`. Then `(a·x + 2¹⁵) >> 16 = k·x + (r·x + 2¹⁵) >> 16`
    /// exactly, and `r·x` pairs go through `vpmaddwd`.
    ///
    /// # Safety
    /// The CPU must have AVX2; each pointer must be valid for reading 16 bytes.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) unsafe fn rgb16(y: *const u8, cb: *const u8, cr: *const u8) -> [__m128i; 3] {
        let c128 = _mm256_set1_epi16(128);
        let half = _mm256_set1_epi32(1 << 15);
        // (Cb', Cr') pairs times these give the rests of R, G and B.
        let w_r = pair(0, CR_R - (1 << 16));
        let w_g = pair(-CB_G, -CR_G + (1 << 16));
        let w_b = pair(CB_B - (2 << 16), 0);
        // SAFETY: the caller's contract.
        let (yv, cbv, crv) = unsafe {
            (
                _mm256_cvtepu8_epi16(_mm_loadu_si128(y.cast())),
                _mm256_cvtepu8_epi16(_mm_loadu_si128(cb.cast())),
                _mm256_cvtepu8_epi16(_mm_loadu_si128(cr.cast())),
            )
        };
        let cbv = _mm256_sub_epi16(cbv, c128);
        let crv = _mm256_sub_epi16(crv, c128);
        // Pixels 0-3 and 8-11 (lo), 4-7 and 12-15 (hi), as (Cb', Cr') pairs.
        let lo = _mm256_unpacklo_epi16(cbv, crv);
        let hi = _mm256_unpackhi_epi16(cbv, crv);
        let rest = |w: __m256i| {
            let a = _mm256_srai_epi32::<16>(_mm256_add_epi32(_mm256_madd_epi16(lo, w), half));
            let b = _mm256_srai_epi32::<16>(_mm256_add_epi32(_mm256_madd_epi16(hi, w), half));
            // Back in pixel order (both the unpacks and the pack work within lanes).
            _mm256_packs_epi32(a, b)
        };
        let r = _mm256_add_epi16(_mm256_add_epi16(yv, crv), rest(w_r));
        let g = _mm256_sub_epi16(_mm256_add_epi16(yv, rest(w_g)), crv);
        let b = _mm256_add_epi16(_mm256_add_epi16(yv, _mm256_slli_epi16::<1>(cbv)), rest(w_b));
        // Saturate to bytes: [r0-7 g0-7 | r8-15 g8-15] -> [r0-15 | g0-15]; b likewise.
        let rg = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi16(r, g));
        let bb = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi16(b, b));
        [_mm256_castsi256_si128(rg), _mm256_extracti128_si256::<1>(rg), _mm256_castsi256_si128(bb)]
    }

    /// [`super::ycc_to_rgb`] for the first `16·⌊n/16⌋` pixels; returns that count.
    ///
    /// # Safety
    /// The CPU must have AVX2; `cb` and `cr` must be as long as `y`, `rgb` three times as long.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn ycc_to_rgb_avx2(y: &[u8], cb: &[u8], cr: &[u8], rgb: &mut [u8]) -> usize {
        let n = y.len() / 16 * 16;
        debug_assert!(cb.len() >= n && cr.len() >= n && rgb.len() >= 3 * n);
        // Packed RGB of 16 pixels from R, G, B (16 bytes each): byte k of the output takes
        // channel k % 3 of pixel k / 3; each 16-byte third of the output gathers from the three
        // channel vectors with one shuffle each.
        let masks = rgb_masks();
        let mut i = 0;
        while i < n {
            // SAFETY: i + 16 <= n <= each plane's length.
            let [rv, gv, bv] = unsafe { rgb16(y.as_ptr().add(i), cb.as_ptr().add(i), cr.as_ptr().add(i)) };
            for (k, m) in masks.iter().enumerate() {
                let out = _mm_or_si128(
                    _mm_or_si128(_mm_shuffle_epi8(rv, m[0]), _mm_shuffle_epi8(gv, m[1])),
                    _mm_shuffle_epi8(bv, m[2]),
                );
                // SAFETY: bytes 3i .. 3i + 48 are inside rgb (3n <= rgb.len()).
                unsafe { _mm_storeu_si128(rgb.as_mut_ptr().add(3 * i + 16 * k).cast(), out) };
            }
            i += 16;
        }
        n
    }

    /// For each 16-byte third of 16 packed RGB pixels, the shuffles that pick its bytes out of
    /// the R, G and B vectors (-1: zero, filled by another channel's shuffle).
    #[target_feature(enable = "avx2")]
    fn rgb_masks() -> [[__m128i; 3]; 3] {
        let mut idx = [[[-1i8; 16]; 3]; 3];
        for k in 0..48 {
            let (third, at) = (k / 16, k % 16);
            idx[third][k % 3][at] = (k / 3) as i8;
        }
        // SAFETY: 16 bytes each, read unaligned.
        idx.map(|t| t.map(|m| unsafe { _mm_loadu_si128(m.as_ptr().cast()) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 kernel equals the scalar formula for every (Y, Cb, Cr) triple.
    #[test]
    fn simd_equals_scalar_for_every_value() {
        #[cfg(target_arch = "x86_64")]
        if !crate::image::cpu::avx2() {
            return crate::skip_test("simd_equals_scalar_for_every_value", "this CPU has no AVX2");
        }
        // All 2^24 triples, in planes of 2^16 + 5 pixels (a tail the scalar path finishes).
        let n = (1 << 16) + 5;
        let mut rgb = vec![0u8; 3 * n];
        for y in 0..=255u8 {
            let (ys, cbs, crs): (Vec<u8>, Vec<u8>, Vec<u8>) = (0..n)
                .map(|i| (y, (i % 256) as u8, ((i / 256) % 256) as u8))
                .fold((Vec::new(), Vec::new(), Vec::new()), |(mut a, mut b, mut c), (y, cb, cr)| {
                    a.push(y);
                    b.push(cb);
                    c.push(cr);
                    (a, b, c)
                });
            if y % 64 == 0 {
                // Planes and output ending at inaccessible pages: no byte past them is touched.
                use beton_testkit::Guarded;
                let (a, b, c) = (Guarded::with(&ys), Guarded::with(&cbs), Guarded::with(&crs));
                let mut out = Guarded::with(&rgb);
                ycc_to_rgb(a.as_ref(), b.as_ref(), c.as_ref(), out.as_mut());
            }
            ycc_to_rgb(&ys, &cbs, &crs, &mut rgb);
            for i in 0..n {
                assert_eq!(
                    &rgb[3 * i..3 * i + 3],
                    &pixel(ys[i], cbs[i], crs[i]),
                    "Y {y} Cb {} Cr {}",
                    cbs[i],
                    crs[i]
                );
            }
        }
    }

    /// A 4:4:4 JPEG (no chroma upsampling) converts to exactly libjpeg-turbo's RGB decode, and
    /// a grey one replicates its one plane. Both have restart markers, so that the crop decoders'
    /// planar path (what this conversion is for) decodes them, whole for a crop of all of it.
    #[test]
    fn equals_libjpeg_turbo_on_444_and_grey_jpegs() {
        use crate::image::codec::decode_crop_planes;
        use crate::image::codec::restart::tests::compress;
        use crate::image::ops::Crop;
        use std::ffi::c_int;
        let (w, h) = (67usize, 41usize);
        let pixels: Vec<u8> = (0..w * h * 3).map(|i| ((i * 7919 + i / 7 * 13) % 256) as u8).collect();
        let grey: Vec<u8> = pixels.iter().step_by(3).copied().collect();
        for (what, pixels) in [("4:4:4", &pixels), ("grey", &grey)] {
            let jpeg = compress(pixels, w, h, turbojpeg::raw::TJSAMP_TJSAMP_444 as c_int, 90, 1);
            let rgb: turbojpeg::Image<Vec<u8>> =
                turbojpeg::decompress(&jpeg, turbojpeg::PixelFormat::RGB).unwrap();
            let mut buf = Vec::new();
            let full = Crop::full(w as u32, h as u32);
            let planes =
                decode_crop_planes(&jpeg, w as u32, h as u32, full, (w as u32, h as u32), 1.0, &mut buf)
                    .unwrap()
                    .unwrap();
            let plane = |c: usize| {
                let (at, pw, ph) = planes.geometry[c];
                assert_eq!((pw, ph), (w as u32, h as u32));
                &buf[at..at + w * h]
            };
            let mut ours = vec![0u8; 3 * w * h];
            if planes.count == 3 {
                ycc_to_rgb(plane(0), plane(1), plane(2), &mut ours);
            } else {
                grey_to_rgb(plane(0), &mut ours);
            }
            assert_eq!(ours, rgb.pixels, "{what}");
        }
    }
}
