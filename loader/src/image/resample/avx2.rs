//! The resampler's AVX2 kernels (vertical pass, 3- and 1-channel horizontal passes); the
//! callers in the parent module check the CPU first ([`crate::image::cpu`]).

use std::arch::x86_64::*;

use smallvec::SmallVec;

use super::layout::Blocks1;
use super::scalar::horizontal_from;
use super::weights::{to_u8, Axis, BITS, HALF};

/// [`super::vertical_rows`] with AVX2: every output row of `len >= 32` bytes, the tap-pair
/// count dispatched once.
///
/// # Safety
/// The CPU must have AVX2; every window (rows `y.starts[r] − sub .. + y.taps`) must exist in
/// `src` with columns `from .. from + len`; `out` must hold `y.starts.len()` rows of `len`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn vertical_plane(
    src: &[u8],
    stride: usize,
    from: usize,
    y: &Axis,
    sub: usize,
    out: &mut [u8],
    len: usize,
) {
    // SAFETY: the same contract.
    unsafe {
        match y.taps.div_ceil(2) {
            1 => vertical_plane_pairs::<1>(src, stride, from, y, sub, out, len),
            2 => vertical_plane_pairs::<2>(src, stride, from, y, sub, out, len),
            3 => vertical_plane_pairs::<3>(src, stride, from, y, sub, out, len),
            4 => vertical_plane_pairs::<4>(src, stride, from, y, sub, out, len),
            _ => {
                for (r, row) in out.chunks_exact_mut(len).enumerate() {
                    vertical_any(src, stride, y.starts[r] as usize - sub, from, y.weights(r), row);
                }
            }
        }
    }
}

/// [`vertical_plane`] with `P` tap pairs.
///
/// # Safety
/// As [`vertical_plane`], and `y.taps.div_ceil(2) == P`.
#[target_feature(enable = "avx2")]
unsafe fn vertical_plane_pairs<const P: usize>(
    src: &[u8],
    stride: usize,
    from: usize,
    y: &Axis,
    sub: usize,
    out: &mut [u8],
    len: usize,
) {
    debug_assert!(len >= 32 && out.len() == y.starts.len() * len);
    for (r, row) in out.chunks_exact_mut(len).enumerate() {
        // SAFETY: the window of row r lies in src (the contract), and the row is len bytes.
        unsafe { vertical_pairs::<P>(src, stride, y.starts[r] as usize - sub, from, y.weights(r), row) };
    }
}

/// The starts of the 32-byte blocks that cover `len >= 32` bytes, the last one overlapping
/// its predecessor when `len` is not a multiple of 32.
fn blocks32(len: usize) -> impl Iterator<Item = usize> {
    (0..len / 32).map(|k| 32 * k).chain((len % 32 != 0).then_some(len - 32))
}

/// Tap pair `k` (taps `2k`, `2k + 1`) of `w`: the rows (an odd last tap pairs with itself at
/// weight zero) and the weights as one `i32` to broadcast (the first tap's in the low half).
#[inline(always)]
fn pair(w: &[i16], k: usize) -> (usize, usize, i32) {
    let (a, b) = (w[2 * k], w.get(2 * k + 1).copied().unwrap_or(0));
    let k1 = if 2 * k + 1 < w.len() { 2 * k + 1 } else { 2 * k };
    (2 * k, k1, i32::from(a as u16) | (i32::from(b as u16) << 16))
}

/// 32 output bytes at `j` from tap pair rows `(a, b)` weighed by `wp`, added into `acc`.
///
/// # Safety
/// AVX2; `base + a·stride + j` and `base + b·stride + j` must be valid for 32 bytes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn vertical_step(
    base: *const u8,
    stride: usize,
    j: usize,
    (a, b): (usize, usize),
    wp: __m256i,
    acc: &mut [__m256i; 4],
) {
    let zero = _mm256_setzero_si256();
    // SAFETY: the caller's contract.
    let (ra, rb) = unsafe {
        (
            _mm256_loadu_si256(base.add(a * stride + j).cast()),
            _mm256_loadu_si256(base.add(b * stride + j).cast()),
        )
    };
    // Interleave the rows' bytes, widen to i16 pairs, multiply-add with the pair.
    let lo = _mm256_unpacklo_epi8(ra, rb);
    let hi = _mm256_unpackhi_epi8(ra, rb);
    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), wp));
    acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), wp));
    acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), wp));
    acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), wp));
}

/// Rounds, shifts and packs four accumulators to 32 bytes at `out + j`.
///
/// # Safety
/// AVX2; `out + j` must be valid for writing 32 bytes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn vertical_store(acc: [__m256i; 4], out: *mut u8, j: usize) {
    let half = _mm256_set1_epi32(HALF);
    let s = acc.map(|v| _mm256_srai_epi32::<{ BITS as i32 }>(_mm256_add_epi32(v, half)));
    // The unpacks and packs both work within 128-bit lanes, so the bytes come back in order.
    let p = _mm256_packus_epi16(_mm256_packs_epi32(s[0], s[1]), _mm256_packs_epi32(s[2], s[3]));
    // SAFETY: the caller's contract.
    unsafe { _mm256_storeu_si256(out.add(j).cast(), p) };
}

/// One output row of [`vertical_plane`] with `P` tap pairs, their weights broadcast once for
/// the row: `out[j] = Σ_k w[k] · src[(start + k) · stride + from + j]`, in 32-byte blocks
/// (the last overlapping its predecessor); returns how many bytes it wrote: all, or none
/// when `out` is under 32 bytes.
///
/// # Safety
/// The CPU must have AVX2; `src` must hold rows `start .. start + w.len()` of `stride` bytes
/// with columns `from .. from + out.len()` in each; `w.len().div_ceil(2) == P`.
#[target_feature(enable = "avx2")]
unsafe fn vertical_pairs<const P: usize>(
    src: &[u8],
    stride: usize,
    start: usize,
    from: usize,
    w: &[i16],
    out: &mut [u8],
) -> usize {
    let pairs: [(usize, usize, __m256i); P] = std::array::from_fn(|k| {
        let (a, b, wp) = pair(w, k);
        (a, b, _mm256_set1_epi32(wp))
    });
    // SAFETY: the same contract; `pairs` are those of `w`.
    unsafe { vertical_with(src, stride, start, from, &pairs, out) }
}

/// [`vertical_pairs`] for any number of taps.
///
/// # Safety
/// As [`vertical_pairs`], without the condition on `P`.
#[target_feature(enable = "avx2")]
unsafe fn vertical_any(
    src: &[u8],
    stride: usize,
    start: usize,
    from: usize,
    w: &[i16],
    out: &mut [u8],
) -> usize {
    let pairs: SmallVec<[(usize, usize, __m256i); 16]> = (0..w.len().div_ceil(2))
        .map(|k| {
            let (a, b, wp) = pair(w, k);
            (a, b, _mm256_set1_epi32(wp))
        })
        .collect();
    // SAFETY: the same contract; `pairs` are those of `w`.
    unsafe { vertical_with(src, stride, start, from, &pairs, out) }
}

/// The vertical pass over `out` in 32-byte blocks with tap `pairs` ([`pair`] of the row's
/// weights, broadcast); the length of `pairs` is a constant once inlined into
/// [`vertical_pairs`].
///
/// # Safety
/// As [`vertical_any`], with every row a pair names among the window's.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn vertical_with(
    src: &[u8],
    stride: usize,
    start: usize,
    from: usize,
    pairs: &[(usize, usize, __m256i)],
    out: &mut [u8],
) -> usize {
    let len = out.len();
    if len < 32 {
        return 0;
    }
    // SAFETY: row `start` exists and `from` is inside it (see the function's contract).
    let base = unsafe { src.as_ptr().add(start * stride + from) };
    for j in blocks32(len) {
        let mut acc = [_mm256_setzero_si256(); 4];
        for &(a, b, wp) in pairs {
            // SAFETY: rows a and b are among 0 .. taps after `start`, and bytes j .. j + 32
            // lie in the columns from .. from + len of each (j + 32 <= len).
            unsafe { vertical_step(base, stride, j, (a, b), wp, &mut acc) };
        }
        // SAFETY: j + 32 <= len.
        unsafe { vertical_store(acc, out.as_mut_ptr(), j) };
    }
    len
}

/// The horizontal pass for three channels over `N` rows at once (the weights are loaded
/// once for all): `rows[r]` holds a scratch row (input columns `x0 ..`, `row_bytes` of them
/// used) and runs on to the end of the scratch buffer; `outs[r]` is its output row.
///
/// # Safety
/// The CPU must have AVX2; each row must extend at least 16 bytes past `row_bytes` (or into
/// the next rows) so that a 16-byte load at any tap group of a window inside the row is
/// inside it; `packed` must be [`pack3`](super::layout::pack3)'s layout of `x`; the
/// outputs must all be `3 × x.starts.len()` bytes.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn horizontal3_avx2<const N: usize>(
    rows: [&[u8]; N],
    row_bytes: usize,
    x: &Axis,
    x0: usize,
    packed: &[i16],
    outs: [&mut [u8]; N],
) {
    let groups = x.taps.div_ceil(4);
    // Low lane: pixels 0 and 1 of the group as i16 pairs R0 R1 G0 G1 B0 B1 0 0; high lane:
    // pixels 2 and 3 (the same 16 bytes are in both lanes).
    let shuffle = _mm256_setr_epi8(
        0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, //
        6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1,
    );
    let half = _mm_set1_epi32(HALF);
    let width = x.starts.len();
    debug_assert!(outs.iter().all(|o| o.len() == width * 3) && packed.len() >= width * groups * 16);
    for i in 0..width {
        let at = (x.starts[i] as usize - x0) * 3;
        let mut acc = [_mm256_setzero_si256(); N];
        for g in 0..groups {
            let off = at + 12 * g;
            // SAFETY: packed holds 16 i16 per group per output.
            let wv = unsafe { _mm256_loadu_si256(packed.as_ptr().add((i * groups + g) * 16).cast()) };
            for r in 0..N {
                debug_assert!(off + 16 <= rows[r].len() && (g == 0 || off < row_bytes));
                // SAFETY: the window starts inside the row and spans `taps` pixels inside it,
                // so group g starts before row_bytes; the row extends 16 bytes further.
                let v = unsafe { _mm_loadu_si128(rows[r].as_ptr().add(off).cast()) };
                let v = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(v), shuffle);
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(v, wv));
            }
        }
        for r in 0..N {
            let a = acc[r];
            let sum = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256::<1>(a));
            let s = _mm_srai_epi32::<{ BITS as i32 }>(_mm_add_epi32(sum, half));
            let px = _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(s, s), s));
            let out = &mut *outs[r];
            if i + 1 < width {
                // SAFETY: pixel i + 1 exists, so the 4 bytes at 3i are in `out`; its first
                // byte (the next pixel's red) is written again next round.
                unsafe { out.as_mut_ptr().add(i * 3).cast::<i32>().write_unaligned(px) };
            } else {
                out[i * 3..i * 3 + 3].copy_from_slice(&px.to_le_bytes()[..3]);
            }
        }
    }
}

/// The horizontal pass for one channel over `N` rows at once: eight outputs a round, four
/// per 128-bit lane, each lane's bytes from one 16-byte load spread into `i16` tap pairs by a
/// byte shuffle and multiply-added with their weights. Blocks whose windows do not fit
/// (large downscales), more than four tap pairs, and the last `width % 8` outputs take the
/// scalar kernel.
///
/// Each row holds input columns `x0 ..` (the windows of `x`; the 16-byte loads stop at the
/// shortest row's end, the outputs past that run scalar), `blocks` is
/// [`Blocks1::pack`]'s layout of `x` and `x0` (else the values are
/// wrong, or the scalar kernel panics, but no access strays), and the outputs are
/// `x.starts.len()` bytes each (asserted).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn horizontal1_avx2<const N: usize>(
    rows: [&[u8]; N],
    x: &Axis,
    x0: usize,
    blocks: &Blocks1,
    outs: [&mut [u8]; N],
) {
    // SAFETY: the CPU has AVX2; the pair count is that of `blocks` (or its wide layout).
    unsafe {
        if blocks.wide {
            return horizontal1_wide(rows, x, x0, &blocks.weights, outs);
        }
        match blocks.pairs {
            1 => horizontal1_pairs::<N, 1>(rows, x, x0, blocks, outs),
            2 => horizontal1_pairs::<N, 2>(rows, x, x0, blocks, outs),
            3 => horizontal1_pairs::<N, 3>(rows, x, x0, blocks, outs),
            4 => horizontal1_pairs::<N, 4>(rows, x, x0, blocks, outs),
            _ => {
                for (row, out) in rows.into_iter().zip(outs) {
                    horizontal_from(row, 1, x, x0, 0, out);
                }
            }
        }
    }
}

/// [`horizontal1_avx2`] for windows of up to 16 taps, one output at a time: its 16 bytes
/// widened to `i16`, multiply-added with its 16 weights (zero past its taps), summed.
///
/// # Safety
/// As [`horizontal1_avx2`]; `weights` holds 16 per output (asserted).
#[target_feature(enable = "avx2")]
unsafe fn horizontal1_wide<const N: usize>(
    rows: [&[u8]; N],
    x: &Axis,
    x0: usize,
    weights: &[i16],
    outs: [&mut [u8]; N],
) {
    let width = x.starts.len();
    assert!(weights.len() == 16 * width && outs.iter().all(|o| o.len() == width));
    let room = rows.iter().map(|r| r.len()).min().unwrap_or(0).checked_sub(16);
    for i in 0..width {
        let at = x.starts[i] as usize - x0;
        if room.is_none_or(|room| at > room) {
            for r in 0..N {
                horizontal_from(rows[r], 1, x, x0, i, &mut outs[r][i..=i]);
            }
            continue;
        }
        // SAFETY: 16 weights per output (asserted).
        let w = unsafe { _mm256_loadu_si256(weights.as_ptr().add(16 * i).cast()) };
        for r in 0..N {
            // SAFETY: at <= room = (shortest row) − 16: the 16 bytes from it lie inside the
            // row.
            let v = _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(rows[r].as_ptr().add(at).cast()) });
            let p = _mm256_madd_epi16(v, w);
            let s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256::<1>(p));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
            outs[r][i] = to_u8(_mm_cvtsi128_si32(s));
        }
    }
}

/// [`horizontal1_avx2`] with `P` tap pairs.
///
/// # Safety
/// As [`horizontal1_avx2`]; `blocks` has `P` pairs (asserted, with its lengths).
#[target_feature(enable = "avx2")]
unsafe fn horizontal1_pairs<const N: usize, const P: usize>(
    rows: [&[u8]; N],
    x: &Axis,
    x0: usize,
    blocks: &Blocks1,
    outs: [&mut [u8]; N],
) {
    let width = x.starts.len();
    let half = _mm256_set1_epi32(HALF);
    let gather = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
    let count = blocks.loads.len();
    assert!(outs.iter().all(|o| o.len() == width) && blocks.pairs == P && count == width / 8);
    assert!(blocks.weights.len() == count * P * 16 && blocks.shuffles.len() == count * P * 32);
    // 16-byte loads must end inside every row: at offsets up to `room` (none when a row is
    // shorter than 16 bytes).
    let room = rows.iter().map(|r| r.len()).min().unwrap_or(0).checked_sub(16);
    for (b, &[lo, hi]) in blocks.loads.iter().enumerate() {
        let first = 8 * b;
        if lo == u32::MAX || room.is_none_or(|room| hi as usize > room) {
            for r in 0..N {
                horizontal_from(rows[r], 1, x, x0, first, &mut outs[r][first..first + 8]);
            }
            continue;
        }
        // SAFETY: lo <= hi <= room = (shortest row) − 16: 16 bytes from each lie inside
        // every row.
        let v: [__m256i; N] = std::array::from_fn(|r| unsafe {
            let row = rows[r].as_ptr();
            _mm256_loadu2_m128i(row.add(hi as usize).cast(), row.add(lo as usize).cast())
        });
        let mut acc = [_mm256_setzero_si256(); N];
        for p in 0..P {
            let at = (b * P + p) * 16;
            // SAFETY: shuffles holds 32 bytes and weights 16 i16 per block and pair (asserted).
            let (m, w) = unsafe {
                (
                    _mm256_loadu_si256(blocks.shuffles.as_ptr().add(2 * at).cast()),
                    _mm256_loadu_si256(blocks.weights.as_ptr().add(at).cast()),
                )
            };
            for r in 0..N {
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_shuffle_epi8(v[r], m), w));
            }
        }
        for r in 0..N {
            let s = _mm256_srai_epi32::<{ BITS as i32 }>(_mm256_add_epi32(acc[r], half));
            let s = _mm256_packs_epi32(s, s);
            let s = _mm256_packus_epi16(s, s);
            // Lane 0's first 4 bytes are outputs 0-3, lane 1's outputs 4-7: together.
            let s = _mm256_permutevar8x32_epi32(s, gather);
            let out = &mut outs[r][first..first + 8];
            // SAFETY: `out` is 8 bytes.
            unsafe { _mm_storel_epi64(out.as_mut_ptr().cast(), _mm256_castsi256_si128(s)) };
        }
    }
    for r in 0..N {
        horizontal_from(rows[r], 1, x, x0, count * 8, &mut outs[r][count * 8..]);
    }
}
