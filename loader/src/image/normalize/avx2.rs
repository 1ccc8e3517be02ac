//! Normalisation with AVX2 + F16C: `(v - mean[c]) / std[c]` in `f32` (the same IEEE
//! operations as the lookup table, so the same values), then `f16` with round-to-nearest-even
//! (`vcvtps2ph`, as [`f32_to_f16`]).

use std::arch::x86_64::*;

use crate::image::codec::color::Source;
use crate::image::ops::{f32_to_f16, flip_horizontal, Layout, NormalizeImage};

/// Writes `src` (HWC `u8`, `h × w`) normalised by `n` into `dst`, mirrored when `flip`;
/// `false` (nothing written) when the CPU lacks AVX2 or F16C or the lengths do not match, for
/// the caller's table path.
///
/// With `recip` ([`NormalizeImage::reciprocals`]) a multiply replaces the division.
pub(super) fn write(
    n: &NormalizeImage,
    recip: Option<&[f32; 3]>,
    src: &mut [u8],
    (h, w): (usize, usize),
    flip: bool,
    dst: &mut [u8],
) -> bool {
    let size = n.elem().size();
    if src.len() != h * w * 3
        || dst.len() != src.len() * size
        || !crate::image::cpu::avx2()
        || !crate::image::cpu::f16c()
    {
        return false;
    }
    match n.layout {
        Layout::Hwc => {
            if flip {
                flip_horizontal(src, w);
            }
            // SAFETY: the CPU has AVX2 and F16C, and dst holds `size` bytes per value of src
            // (both checked above), which is what hwc_avx2 writes.
            unsafe {
                match recip {
                    Some(r) => hwc_avx2::<true>(src, &n.mean, r, size, dst),
                    None => hwc_avx2::<false>(src, &n.mean, &n.std, size, dst),
                }
            }
        }
        // SAFETY: the CPU has AVX2 and F16C, src is h × w × 3 bytes and dst holds `size`
        // bytes per value of src (all checked above), which is what chw_avx2 needs.
        Layout::Chw => unsafe {
            match recip {
                Some(r) => chw_avx2::<true>(src, (h, w), &n.mean, r, size, flip, dst),
                None => chw_avx2::<false>(src, (h, w), &n.mean, &n.std, size, flip, dst),
            }
        },
    }
    true
}

/// `(v - mean) / div`, or `(v - mean) * div` when `MUL` (`div` is then `1 / std`).
#[inline(always)]
fn scale<const MUL: bool>(x: __m256, div: __m256) -> __m256 {
    // SAFETY: only reached from the target_feature(avx2) kernels below.
    unsafe {
        if MUL {
            _mm256_mul_ps(x, div)
        } else {
            _mm256_div_ps(x, div)
        }
    }
}

/// The scalar form of [`store8`], for the kernels' tails: `v` normalised into the `size`
/// bytes of `dst` at byte `at`.
#[inline(always)]
fn store1<const MUL: bool>(v: u8, mean: f32, div: f32, size: usize, dst: &mut [u8], at: usize) {
    let x = f32::from(v) - mean;
    let x = if MUL { x * div } else { x / div };
    if size == 2 {
        dst[at..at + 2].copy_from_slice(&f32_to_f16(x).to_le_bytes());
    } else {
        dst[at..at + 4].copy_from_slice(&x.to_le_bytes());
    }
}

/// # Safety
/// The CPU must have AVX2 and F16C; `src.len() == h * w * 3` and `dst.len() == src.len() *
/// size` with `size` 2 (`f16`) or 4 (`f32`). `std` is `1 / std` when `MUL`.
#[target_feature(enable = "avx2,f16c")]
unsafe fn chw_avx2<const MUL: bool>(
    src: &[u8],
    (h, w): (usize, usize),
    mean: &[f32; 3],
    std: &[f32; 3],
    size: usize,
    flip: bool,
    dst: &mut [u8],
) {
    // Eight pixels (24 bytes, loaded as 16 + 8) a round, split into their R, G and B bytes
    // by byte shuffles (-1 writes a zero): channel c of pixel k is byte 3k + c.
    let pick = |c: usize, from: usize| -> __m128i {
        let idx: [i8; 16] = std::array::from_fn(|k| {
            let b = 3 * k + c;
            if k < 8 && b >= from && b < from + 16 {
                (b - from) as i8
            } else {
                -1
            }
        });
        // SAFETY: idx holds 16 bytes, read unaligned.
        unsafe { _mm_loadu_si128(idx.as_ptr().cast()) }
    };
    let lo = [pick(0, 0), pick(1, 0), pick(2, 0)];
    let hi = [pick(0, 16), pick(1, 16), pick(2, 16)];
    let m = mean.map(|v| _mm256_set1_ps(v));
    let s = std.map(|v| _mm256_set1_ps(v));
    let reverse = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    let plane = h * w * size;
    let blocks = w / 8;
    for y in 0..h {
        let row = &src[y * w * 3..(y + 1) * w * 3];
        for b in 0..blocks {
            let x = b * 8;
            // Output pixels x..x+8 come from source pixels x..x+8, or w-8-x..w-x reversed.
            let from = if flip { w - 8 - x } else { x };
            // SAFETY: from + 8 <= w, so the 16 + 8 bytes read at 3·from lie in `row`. Each
            // store writes 8 values of `size` bytes at ((y·w + x)·size) in plane c, inside
            // dst (x + 8 <= w, y < h, dst.len() = 3 · plane).
            unsafe {
                let a = _mm_loadu_si128(row.as_ptr().add(from * 3).cast());
                let b8 = _mm_loadl_epi64(row.as_ptr().add(from * 3 + 16).cast());
                for c in 0..3 {
                    let v = _mm_or_si128(_mm_shuffle_epi8(a, lo[c]), _mm_shuffle_epi8(b8, hi[c]));
                    let mut f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
                    if flip {
                        f = _mm256_permutevar8x32_ps(f, reverse);
                    }
                    let out = dst.as_mut_ptr().add(c * plane + (y * w + b * 8) * size);
                    store8::<MUL>(f, m[c], s[c], size, out);
                }
            }
        }
        for x in blocks * 8..w {
            let from = if flip { w - 1 - x } else { x };
            for c in 0..3 {
                let at = c * plane + (y * w + x) * size;
                store1::<MUL>(row[from * 3 + c], mean[c], std[c], size, dst, at);
            }
        }
    }
}

/// [`super::Prepared::write_planes`] for a CHW layout: `false` (nothing written) for HWC,
/// packed RGB, without AVX2 + F16C, or when the lengths do not match.
pub(super) fn write_planes(
    n: &NormalizeImage,
    recip: Option<&[f32; 3]>,
    src: Source<'_>,
    (h, w): (usize, usize),
    flip: bool,
    dst: &mut [u8],
) -> bool {
    let size = n.elem().size();
    let (planes, grey) = match src {
        Source::Ycc(p) => (p, false),
        Source::Grey(p) => ([p; 3], true),
        Source::Rgb(_) => return false,
    };
    if n.layout != Layout::Chw
        || !src.holds(h * w)
        || dst.len() != 3 * h * w * size
        || !crate::image::cpu::avx2()
        || !crate::image::cpu::f16c()
    {
        return false;
    }
    // SAFETY: the CPU has AVX2 and F16C; each source plane is h × w bytes and dst holds
    // 3 · h · w values of `size` bytes (all checked above), which is what the kernel needs.
    unsafe {
        match recip {
            Some(r) => chw_planes_avx2::<true>(planes, grey, (h, w), &n.mean, r, size, flip, dst),
            None => chw_planes_avx2::<false>(planes, grey, (h, w), &n.mean, &n.std, size, flip, dst),
        }
    }
    true
}

/// Writes 8 normalised values of `v` (`f32`) at `out`.
///
/// (Streaming stores, which skip reading each line of the slot in before overwriting it,
/// made the end-to-end image pipeline slower on the development VM: 17 % of the workers'
/// time in this kernel instead of 15 %.)
///
/// # Safety
/// AVX2 + F16C; `out` valid for 8 values of `size` bytes.
#[target_feature(enable = "avx2,f16c")]
#[inline]
unsafe fn store8<const MUL: bool>(v: __m256, m: __m256, s: __m256, size: usize, out: *mut u8) {
    let x = scale::<MUL>(_mm256_sub_ps(v, m), s);
    // SAFETY: the caller's contract.
    unsafe {
        if size == 2 {
            _mm_storeu_si128(out.cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x));
        } else {
            _mm256_storeu_ps(out.cast(), x);
        }
    }
}

/// Planes (Y Cb Cr, or the same grey plane three times when `grey`) to normalised CHW:
/// sixteen pixels a round, converted to R, G, B bytes as [`crate::image::codec::color`] does, then
/// each channel's 16 values normalised as [`chw_avx2`] does, mirrored when `flip`.
///
/// # Safety
/// The CPU must have AVX2 and F16C; each plane is `h × w` bytes; `dst.len() == 3 · h · w ·
/// size` with `size` 2 (`f16`) or 4 (`f32`). `std` is `1 / std` when `MUL`.
#[target_feature(enable = "avx2,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn chw_planes_avx2<const MUL: bool>(
    planes: [&[u8]; 3],
    grey: bool,
    (h, w): (usize, usize),
    mean: &[f32; 3],
    std: &[f32; 3],
    size: usize,
    flip: bool,
    dst: &mut [u8],
) {
    let m = mean.map(|v| _mm256_set1_ps(v));
    let s = std.map(|v| _mm256_set1_ps(v));
    let reverse = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    let plane = h * w * size;
    let blocks = w / 16;
    for y in 0..h {
        let rows = planes.map(|p| &p[y * w..(y + 1) * w]);
        for b in 0..blocks {
            let x = b * 16;
            // Output pixels x..x+16 come from source pixels x..x+16, or w-16-x..w-x reversed.
            let from = if flip { w - 16 - x } else { x };
            // SAFETY: from + 16 <= w: 16 bytes of each row are read.
            let rgb = unsafe {
                let at = |r: &[u8]| r.as_ptr().add(from);
                if grey {
                    let v = _mm_loadu_si128(at(rows[0]).cast());
                    [v, v, v]
                } else {
                    crate::image::codec::color::simd::rgb16(at(rows[0]), at(rows[1]), at(rows[2]))
                }
            };
            for c in 0..3 {
                let lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(rgb[c]));
                let hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(rgb[c])));
                let (first, second) = if flip {
                    (_mm256_permutevar8x32_ps(hi, reverse), _mm256_permutevar8x32_ps(lo, reverse))
                } else {
                    (lo, hi)
                };
                // SAFETY: pixels x .. x + 16 of row y of plane c lie inside dst (x + 16 <= w,
                // y < h, dst.len() = 3 · plane).
                unsafe {
                    let out = dst.as_mut_ptr().add(c * plane + (y * w + x) * size);
                    store8::<MUL>(first, m[c], s[c], size, out);
                    store8::<MUL>(second, m[c], s[c], size, out.add(8 * size));
                }
            }
        }
        for x in blocks * 16..w {
            let from = if flip { w - 1 - x } else { x };
            let px = if grey {
                [rows[0][from]; 3]
            } else {
                crate::image::codec::color::pixel(rows[0][from], rows[1][from], rows[2][from])
            };
            for c in 0..3 {
                store1::<MUL>(px[c], mean[c], std[c], size, dst, c * plane + (y * w + x) * size);
            }
        }
    }
}

/// # Safety
/// The CPU must have AVX2 and F16C, and `dst.len() == src.len() * size` with `size` 2 (`f16`)
/// or 4 (`f32`). `std` is `1 / std` when `MUL`.
#[target_feature(enable = "avx2,f16c")]
unsafe fn hwc_avx2<const MUL: bool>(
    src: &[u8],
    mean: &[f32; 3],
    std: &[f32; 3],
    size: usize,
    dst: &mut [u8],
) {
    // 24 values (8 pixels) a round, in three vectors of 8 whose lane k holds channel
    // (8j + k) mod 3.
    let lanes = |off: usize| -> (__m256, __m256) {
        let m: [f32; 8] = std::array::from_fn(|k| mean[(off + k) % 3]);
        let s: [f32; 8] = std::array::from_fn(|k| std[(off + k) % 3]);
        // SAFETY: both arrays hold 8 f32, read unaligned.
        unsafe { (_mm256_loadu_ps(m.as_ptr()), _mm256_loadu_ps(s.as_ptr())) }
    };
    let pattern = [lanes(0), lanes(8), lanes(16)];
    let rounds = src.len() / 24;
    for r in 0..rounds {
        for (j, (m, s)) in pattern.iter().enumerate() {
            let at = r * 24 + j * 8;
            // SAFETY: at + 8 <= rounds * 24 <= src.len(): 8 bytes are read. The store writes
            // 8 values of `size` bytes at at * size, inside dst (dst.len() = src.len() * size).
            unsafe {
                let bytes = _mm_loadl_epi64(src.as_ptr().add(at).cast());
                let v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
                store8::<MUL>(v, *m, *s, size, dst.as_mut_ptr().add(at * size));
            }
        }
    }
    for (k, &v) in src.iter().enumerate().skip(rounds * 24) {
        store1::<MUL>(v, mean[k % 3], std[k % 3], size, dst, k * size);
    }
}
