//! [`NormalizeImage`](crate::image::NormalizeImage) as table lookups with AVX-512 VBMI: 64 values a round.
//!
//! The normalised value of a pixel depends only on its channel and its byte, so the output is a
//! 256-entry table per channel (computed once with the same `f32` arithmetic and `f16` rounding
//! as every other path, so the bytes are the same). `vpermi2b` looks up 128 entries of a byte
//! table in one instruction; two of them and a blend on the index's top bit give 256. Each
//! output byte position (2 for `f16`, 4 for `f32`) has its own table, and byte permutes
//! interleave the results into values. The RGB bytes come either from a JPEG's resized planes
//! (converted as [`color`](crate::image::codec::color) does, 64 pixels a round) or from packed RGB (de-interleaved by
//! byte permutes); row tails are masked loads and stores, flips a byte permute of the source.
//!
//! Used where the CPU has AVX-512 F, BW and VBMI (Intel Ice Lake and later, AMD Zen 4 and
//! later); the AVX2 kernels of [`avx2`](super::avx2) otherwise. Tested equal to the table path.

use crate::image::codec::color::Source;
use crate::image::ops::{Layout, Table};

/// The output's bytes per channel, byte position and pixel value: `bytes[c][b][v]` is byte `b`
/// of the output value of pixel value `v` in channel `c`.
pub(crate) type ByteTables = [[[u8; 256]; 4]; 3];

/// `t` by byte position.
pub(crate) fn byte_tables(t: &Table) -> Box<ByteTables> {
    let mut out = Box::new([[[0u8; 256]; 4]; 3]);
    for (c, planes) in out.iter_mut().enumerate() {
        for (b, plane) in planes.iter_mut().enumerate() {
            for (v, cell) in plane.iter_mut().enumerate() {
                *cell = t[c][v][b];
            }
        }
    }
    out
}

/// Whether this CPU runs the kernels here.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::image::cpu::avx512_vbmi()
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Writes the `h × w` image of `src` normalised through `tables` as values of `size` bytes (2
/// or 4) in `layout` (CHW planes, or HWC pixels) into `dst`, mirrored left to right when
/// `flip`; `false` (nothing written) when the CPU lacks AVX-512 VBMI or the lengths do not
/// match.
pub(crate) fn write(
    src: Source<'_>,
    (h, w): (usize, usize),
    tables: &ByteTables,
    size: usize,
    layout: Layout,
    flip: bool,
    dst: &mut [u8],
) -> bool {
    let n = h * w;
    if !src.holds(n) || !matches!(size, 2 | 4) || dst.len() != 3 * n * size || !available() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX-512 F, BW and VBMI (checked by `available`); the sources and
    // dst have the lengths the kernel needs (checked above).
    unsafe {
        simd::write(src, (h, w), tables, size, layout == Layout::Hwc, flip, dst)
    };
    true
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::{ByteTables, Source};
    use crate::image::codec::color::{CB_B, CB_G, CR_G, CR_R};

    /// A channel's tables for one byte position, as four 64-byte vectors.
    type Quarter = [__m512i; 4];

    /// Looks up the 64 bytes of `v` in the 256-entry table `t`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    #[inline]
    fn lookup(v: __m512i, t: &Quarter) -> __m512i {
        let low = _mm512_permutex2var_epi8(t[0], v, t[1]);
        let high = _mm512_permutex2var_epi8(t[2], v, t[3]);
        _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), low, high)
    }

    /// Element `k` of a two-source permute over `N` elements (`vpermi2b`, `vpermi2w`) that
    /// takes `a[from + k / 2]` for even `k` and `b[from + k / 2]` for odd: the interleave of two
    /// planes into values twice as wide.
    fn interleave_index<const N: usize>(from: usize) -> [usize; N] {
        std::array::from_fn(|k| from + k / 2 + if k % 2 == 0 { 0 } else { N })
    }

    /// Loads a 64-byte index table (64 bytes or 32 words).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn load<T: Copy, const N: usize>(idx: &[T; N]) -> __m512i {
        const { assert!(std::mem::size_of::<[T; N]>() == 64) };
        // SAFETY: 64 bytes (asserted at compile time), read unaligned.
        unsafe { _mm512_loadu_si512(idx.as_ptr().cast()) }
    }

    /// `n` bytes (at most 64) at `p`, the rest zero. (`p` may lie past the end of its buffer
    /// when `n` is 0: the callers form it with `wrapping_add`, and nothing is read then.)
    ///
    /// # Safety
    /// AVX-512 F + BW; `p` valid for reading `n` bytes.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    unsafe fn load_n(p: *const u8, n: usize) -> __m512i {
        let mask = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        // SAFETY: the masked load touches only the n bytes the caller vouches for.
        unsafe { _mm512_maskz_loadu_epi8(mask, p.cast()) }
    }

    /// Stores the first `n` bytes (any number) of `v` at `p` (which, as for [`load_n`], may lie
    /// past its buffer when `n` is 0).
    ///
    /// # Safety
    /// AVX-512 F + BW; `p` valid for writing `n.min(64)` bytes.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    unsafe fn store_n(p: *mut u8, v: __m512i, n: usize) {
        if n >= 64 {
            // SAFETY: 64 bytes are valid at p.
            unsafe { _mm512_storeu_si512(p.cast(), v) };
        } else if n > 0 {
            // SAFETY: the masked store writes only the first n bytes.
            unsafe { _mm512_mask_storeu_epi8(p.cast(), (1u64 << n) - 1, v) };
        }
    }

    /// R, G, B bytes of 64 pixels from their Y, Cb, Cr bytes, exactly as
    /// [`crate::image::codec::color::simd::rgb16`] (see there for the arithmetic).
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn rgb64(y: __m512i, cb: __m512i, cr: __m512i) -> [__m512i; 3] {
        let c128 = _mm512_set1_epi16(128);
        let half = _mm512_set1_epi32(1 << 15);
        let pair = |a: i32, b: i32| _mm512_set1_epi32((a & 0xFFFF) | (b << 16));
        let w_r = pair(0, CR_R - (1 << 16));
        let w_g = pair(-CB_G, -CR_G + (1 << 16));
        let w_b = pair(CB_B - (2 << 16), 0);
        // 32 pixels: R, G, B as i16 in pixel order.
        let half32 = |y: __m256i, cb: __m256i, cr: __m256i| -> [__m512i; 3] {
            let yv = _mm512_cvtepu8_epi16(y);
            let cbv = _mm512_sub_epi16(_mm512_cvtepu8_epi16(cb), c128);
            let crv = _mm512_sub_epi16(_mm512_cvtepu8_epi16(cr), c128);
            let lo = _mm512_unpacklo_epi16(cbv, crv);
            let hi = _mm512_unpackhi_epi16(cbv, crv);
            let rest = |w: __m512i| {
                let a = _mm512_srai_epi32::<16>(_mm512_add_epi32(_mm512_madd_epi16(lo, w), half));
                let b = _mm512_srai_epi32::<16>(_mm512_add_epi32(_mm512_madd_epi16(hi, w), half));
                _mm512_packs_epi32(a, b)
            };
            [
                _mm512_add_epi16(_mm512_add_epi16(yv, crv), rest(w_r)),
                _mm512_sub_epi16(_mm512_add_epi16(yv, rest(w_g)), crv),
                _mm512_add_epi16(_mm512_add_epi16(yv, _mm512_slli_epi16::<1>(cbv)), rest(w_b)),
            ]
        };
        let lo = |v: __m512i| _mm512_castsi512_si256(v);
        let hi = |v: __m512i| _mm512_extracti64x4_epi64::<1>(v);
        let a = half32(lo(y), lo(cb), lo(cr));
        let b = half32(hi(y), hi(cb), hi(cr));
        // packus interleaves 8-pixel groups of a and b per 128-bit lane: put them back.
        let order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
        std::array::from_fn(|c| _mm512_permutexvar_epi64(order, _mm512_packus_epi16(a[c], b[c])))
    }

    /// Byte indices that de-interleave channel `c` of 64 packed RGB pixels: into the first two
    /// 64-byte vectors (`first`), then from that and the third (`second`).
    fn deinterleave_index(c: usize) -> ([i8; 64], [i8; 64]) {
        let first = std::array::from_fn(|k| {
            let b = 3 * k + c;
            if b < 128 {
                b as i8
            } else {
                0
            }
        });
        let second = std::array::from_fn(|k| {
            let b = 3 * k + c;
            if b < 128 {
                k as i8
            } else {
                (64 + b - 128) as i8
            }
        });
        (first, second)
    }

    /// Indices that interleave three channels' values (of `size` bytes: 2 or 4) of 64 pixels
    /// into HWC order: output vector `j` (of six a half) takes the values of the half's pixels
    /// that fall in it, R and G through a two-source permute (`first`, R for indices below the
    /// vector's element count, G above), then B over them through a one-source permute
    /// (`second`) under `mask`.
    fn hwc_index(size: usize, j: usize) -> ([i16; 32], [i16; 32], u32) {
        let per = 64 / size;
        let (mut first, mut second, mut mask) = ([0i16; 32], [0i16; 32], 0u32);
        for m in 0..per {
            // Value m of output vector j of its half: pixel p's channel c (p counted within
            // the source vectors, which hold `per` values each).
            let at = j * per + m;
            let (p, c) = (at / 3, at % 3);
            match c {
                0 => first[m] = p as i16,
                1 => first[m] = (per + p) as i16,
                _ => {
                    second[m] = p as i16;
                    mask |= 1 << m;
                }
            }
        }
        (first, second, mask)
    }

    /// See [`super::write`] (`hwc`: the layout is HWC).
    ///
    /// # Safety
    /// AVX-512 F, BW and VBMI; the source and `dst` lengths as `super::write` checks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn write(
        src: Source<'_>,
        (h, w): (usize, usize),
        tables: &ByteTables,
        size: usize,
        hwc: bool,
        flip: bool,
        dst: &mut [u8],
    ) {
        let quarter = |t: &[u8; 256]| -> Quarter {
            std::array::from_fn(|q| {
                // SAFETY: each table is 256 bytes: four unaligned 64-byte loads.
                unsafe { _mm512_loadu_si512(t.as_ptr().add(64 * q).cast()) }
            })
        };
        let t: [[Quarter; 4]; 3] = std::array::from_fn(|c| std::array::from_fn(|b| quarter(&tables[c][b])));
        let bytes = [0, 32].map(|from| load(&interleave_index::<64>(from).map(|e| e as i8)));
        let words = [0, 16].map(|from| load(&interleave_index::<32>(from).map(|e| e as i16)));
        let split = [0, 1, 2].map(deinterleave_index).map(|(a, b)| (load(&a), load(&b)));
        let reverse: [i8; 64] = std::array::from_fn(|k| (63 - k) as i8);
        let reverse = load(&reverse);
        // HWC: per output vector of a source vector's pixels (3 of them), its permutes and mask;
        // for 2-byte values word permutes, for 4-byte ones dword permutes (indices halved).
        // Not built for CHW.
        let mut interleave = [(_mm512_setzero_si512(), _mm512_setzero_si512(), 0u32); 3];
        if hwc {
            for (j, entry) in interleave.iter_mut().enumerate() {
                let (first, second, mask) = hwc_index(size, j);
                *entry = if size == 2 {
                    (load(&first), load(&second), mask)
                } else {
                    let dwords = |i: [i16; 32]| -> [i32; 16] { std::array::from_fn(|k| i32::from(i[k])) };
                    (load(&dwords(first)), load(&dwords(second)), mask)
                };
            }
        }
        let plane = h * w * size;
        for y in 0..h {
            let mut x = 0;
            while x < w {
                let n = (w - x).min(64);
                // Output pixels x .. x + n come from source pixels x .. x + n, or (flipped)
                // w − x − n .. w − x, reversed.
                let from = if flip { w - x - n } else { x };
                // The n source pixels' R, G, B bytes (first n lanes).
                // SAFETY: pixels from .. from + n of row y exist in the source (from + n <= w).
                let mut rgb = unsafe {
                    match src {
                        Source::Ycc(p) => {
                            let at = |p: &[u8]| load_n(p.as_ptr().add(y * w + from), n);
                            rgb64(at(p[0]), at(p[1]), at(p[2]))
                        }
                        Source::Grey(p) => {
                            let v = load_n(p.as_ptr().add(y * w + from), n);
                            [v, v, v]
                        }
                        Source::Rgb(p) => {
                            let at = (y * w + from) * 3;
                            let part = |k: usize| {
                                load_n(p.as_ptr().wrapping_add(at + 64 * k), (3 * n).saturating_sub(64 * k))
                            };
                            let (a, b, c) = (part(0), part(1), part(2));
                            split.map(|(i1, i2)| {
                                _mm512_permutex2var_epi8(_mm512_permutex2var_epi8(a, i1, b), i2, c)
                            })
                        }
                    }
                };
                if flip {
                    // Lane k takes source lane n − 1 − k.
                    let shift = _mm512_set1_epi8((64 - n) as i8);
                    let idx = _mm512_sub_epi8(reverse, shift);
                    rgb = rgb.map(|v| _mm512_permutexvar_epi8(idx, v));
                }
                // Each channel's values of the n pixels, in pixel order, 64 bytes a vector
                // (`size` vectors: 2 of 2-byte values, 4 of 4-byte ones).
                // (A loop, not `array::from_fn`: its closure was not inlined into this function,
                // and the lookups went through a call: 4 % of a loader profile on its own, the
                // loader 6–8 % slower on 256-px images.)
                let mut values = [[_mm512_setzero_si512(); 4]; 3];
                for (c, out) in values.iter_mut().enumerate() {
                    let v = rgb[c];
                    let b0 = lookup(v, &t[c][0]);
                    let b1 = lookup(v, &t[c][1]);
                    let lo16 = _mm512_permutex2var_epi8(b0, bytes[0], b1);
                    let hi16 = _mm512_permutex2var_epi8(b0, bytes[1], b1);
                    if size == 2 {
                        (out[0], out[1]) = (lo16, hi16);
                        continue;
                    }
                    let b2 = lookup(v, &t[c][2]);
                    let b3 = lookup(v, &t[c][3]);
                    let lo16b = _mm512_permutex2var_epi8(b2, bytes[0], b3);
                    let hi16b = _mm512_permutex2var_epi8(b2, bytes[1], b3);
                    *out = [
                        _mm512_permutex2var_epi16(lo16, words[0], lo16b),
                        _mm512_permutex2var_epi16(lo16, words[1], lo16b),
                        _mm512_permutex2var_epi16(hi16, words[0], hi16b),
                        _mm512_permutex2var_epi16(hi16, words[1], hi16b),
                    ];
                }
                if hwc {
                    // 3n values of row y from pixel x on, contiguous: each source vector's
                    // pixels make three output vectors.
                    // SAFETY: pixels x .. x + n of row y lie inside dst (3 values each).
                    let out = unsafe { dst.as_mut_ptr().add((y * w + x) * 3 * size) };
                    let total = 3 * n * size;
                    let [r, g, b] = &values;
                    for (k, ((&r, &g), &b)) in r.iter().zip(g).zip(b).enumerate().take(size) {
                        for (j, &(first, second, mask)) in interleave.iter().enumerate() {
                            let v = if size == 2 {
                                let rg = _mm512_permutex2var_epi16(r, first, g);
                                _mm512_mask_permutexvar_epi16(rg, mask, second, b)
                            } else {
                                let rg = _mm512_permutex2var_epi32(r, first, g);
                                _mm512_mask_permutexvar_epi32(rg, mask as u16, second, b)
                            };
                            let at = 64 * (3 * k + j);
                            // SAFETY: `total` bytes are valid at out; this writes those of them
                            // from `at` on, at most 64.
                            unsafe { store_n(out.wrapping_add(at), v, total.saturating_sub(at)) };
                        }
                    }
                } else {
                    for (c, values) in values.iter().enumerate() {
                        // SAFETY: values x .. x + n of row y of plane c lie inside dst.
                        let out = unsafe { dst.as_mut_ptr().add(c * plane + (y * w + x) * size) };
                        for (k, &v) in values.iter().enumerate().take(size) {
                            // SAFETY: n · size bytes are valid at out; this writes those of
                            // them from 64k on, at most 64.
                            unsafe {
                                store_n(out.wrapping_add(64 * k), v, (n * size).saturating_sub(64 * k))
                            };
                        }
                    }
                }
                x += n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{FloatType, Layout, NormalizeImage};
    use beton_testkit::Guarded;

    /// The lookups equal the table path for every source kind, type, layout, width (whole
    /// rounds of 64 and tails) and flip.
    #[test]
    fn lookups_equal_the_table_path() {
        if !available() {
            crate::skip_test("lookups_equal_the_table_path", "this CPU has no AVX-512 VBMI");
            return;
        }
        for (h, w) in
            [(3usize, 160usize), (2, 37), (4, 64), (1, 200), (2, 1), (2, 11), (3, 22), (1, 43), (2, 127)]
        {
            let n = h * w;
            let planes: Vec<u8> = (0..3 * n).map(|i| ((i * 7919 + i / 3 * 101) % 256) as u8).collect();
            for dtype in [FloatType::F16, FloatType::F32] {
                let norm = NormalizeImage::imagenet().dtype(dtype).layout(Layout::Chw);
                let t = norm.table();
                let tables = byte_tables(&t);
                let size = if dtype == FloatType::F16 { 2 } else { 4 };
                for kind in 0..3 {
                    let mut rgb = vec![0u8; 3 * n];
                    let src = match kind {
                        0 => Source::planes(3, &planes),
                        1 => Source::planes(1, &planes[..n]),
                        _ => Source::Rgb(&planes),
                    };
                    crate::image::codec::color::to_rgb(src, &mut rgb);
                    // Sources and destination end at inaccessible pages: the masked tails
                    // must not touch a byte past them.
                    let guarded: Vec<Guarded> = match src {
                        Source::Ycc(p) => p.iter().map(|p| Guarded::with(p)).collect(),
                        Source::Grey(p) | Source::Rgb(p) => vec![Guarded::with(p)],
                    };
                    let src = match src {
                        Source::Ycc(_) => {
                            Source::Ycc([guarded[0].as_ref(), guarded[1].as_ref(), guarded[2].as_ref()])
                        }
                        Source::Grey(_) => Source::Grey(guarded[0].as_ref()),
                        Source::Rgb(_) => Source::Rgb(guarded[0].as_ref()),
                    };
                    for (flip, layout) in
                        [false, true].into_iter().flat_map(|f| [(f, Layout::Chw), (f, Layout::Hwc)])
                    {
                        let mut out = Guarded::with(&vec![0u8; 3 * n * size]);
                        assert!(write(src, (h, w), &tables, size, layout, flip, out.as_mut()));
                        let got = out.as_ref().to_vec();
                        let mut want = vec![0u8; 3 * n * size];
                        for y in 0..h {
                            for x in 0..w {
                                let from = if flip { w - 1 - x } else { x };
                                for c in 0..3 {
                                    let v = rgb[(y * w + from) * 3 + c];
                                    let at = match layout {
                                        Layout::Chw => (c * n + y * w + x) * size,
                                        Layout::Hwc => ((y * w + x) * 3 + c) * size,
                                    };
                                    want[at..at + size].copy_from_slice(&t[c][usize::from(v)][..size]);
                                }
                            }
                        }
                        assert_eq!(got, want, "{h}x{w} {dtype:?} kind {kind} flip {flip} {layout:?}");
                    }
                }
            }
        }
    }
}
