//! Resizing a crop of packed `u8` pixels (1 or 3 channels) into the output slot: a separable
//! convolution (Pillow's and `fast_image_resize`'s method), the vertical pass first into a
//! per-thread scratch buffer, then the horizontal pass, with 14-bit fixed-point weights that sum
//! to exactly one (so constant colours stay exact) and AVX2 kernels for three channels.
//!
//! beton has its own because this runs for every sample with a new fractional crop: the weights
//! are computed into reused buffers (no allocation per call), every window is checked to lie in
//! the image when it is built (so the kernels' reads are in bounds by construction), and the
//! three-channel horizontal pass does four taps per multiply-add. The scalar kernels compute the
//! same integers as the AVX2 ones (tested equal).

use std::cell::RefCell;

use crate::error::{Error, Result};

/// Fixed-point bits of the weights.
const BITS: u32 = 14;
/// A weight of one.
const ONE: i32 = 1 << BITS;
/// Added before the final shift: round half up.
const HALF: i32 = 1 << (BITS - 1);

/// A resampling filter: its kernel and its support (radius) at scale 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Filter {
    /// Catmull-Rom (Keys' cubic, a = -0.5), support 2.
    CatmullRom,
    /// The triangle, support 1.
    Bilinear,
    /// The box `(-0.5, 0.5]`, support 0.5: area averaging when shrinking.
    Box,
}

impl Filter {
    #[inline(always)]
    fn weight(self, x: f64) -> f64 {
        match self {
            Filter::CatmullRom => {
                // Both pieces, then selects (no branches that the taps would mispredict).
                const A: f64 = -0.5;
                let x = x.abs();
                let inner = ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
                let outer = (((x - 5.0) * x + 8.0) * x - 4.0) * A;
                let v = if x < 1.0 { inner } else { outer };
                if x < 2.0 {
                    v
                } else {
                    0.0
                }
            }
            Filter::Bilinear => (1.0 - x.abs()).max(0.0),
            Filter::Box => {
                if x > -0.5 && x <= 0.5 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

/// The weights of one axis: output `i` reads inputs `starts[i] .. starts[i] + taps` (always
/// inside the input) with the weights `weights[i * taps ..][..taps]`, which sum to [`ONE`].
#[derive(Debug, Default)]
struct Axis {
    taps: usize,
    starts: Vec<u32>,
    weights: Vec<i16>,
    /// Scratch: per output its first input, first offset, inputs used − 1 and weight sum, then
    /// the float weights tap by tap.
    scratch: Vec<f64>,
}

/// `v.floor()` without a libm call (x86-64 has no floor instruction before SSE4.1), for `|v| <
/// 2^52`.
#[inline(always)]
fn floor(v: f64) -> f64 {
    // Branch-free: the comparison is as often true as not.
    let t = v as i64 as f64;
    t - f64::from(u8::from(t > v))
}

/// Rounds half away from zero (without a libm call).
#[inline(always)]
fn round(v: f64) -> i32 {
    (v + 0.5f64.copysign(v)) as i32
}

impl Axis {
    /// The weights for resizing inputs `in0 .. in0 + len` (fractional, within `0 .. in_size`)
    /// to `out` outputs with `filter`, widened by the downscale factor (antialiasing).
    fn compute(&mut self, in_size: u32, in0: f64, len: f64, out: u32, filter: Filter) {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            unsafe { self.compute_avx2(in_size, in0, len, out, filter) };
            return;
        }
        self.compute_any(in_size, in0, len, out, filter, floor);
    }

    /// [`Axis::compute`] compiled for AVX2 (the loops over outputs vectorise; `floor` is one
    /// instruction).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn compute_avx2(&mut self, in_size: u32, in0: f64, len: f64, out: u32, filter: Filter) {
        self.compute_any(in_size, in0, len, out, filter, f64::floor);
    }

    #[inline(always)]
    fn compute_any(
        &mut self,
        in_size: u32,
        in0: f64,
        len: f64,
        out: u32,
        filter: Filter,
        floor: fn(f64) -> f64,
    ) {
        // One monomorphic copy per kernel, so that the kernel inlines into the loops.
        let geometry = (in_size, in0, len, out);
        match filter {
            Filter::CatmullRom => {
                self.compute_with(geometry, 2.0, false, |x| Filter::CatmullRom.weight(x), floor)
            }
            Filter::Bilinear => {
                self.compute_with(geometry, 1.0, false, |x| Filter::Bilinear.weight(x), floor)
            }
            Filter::Box => self.compute_with(geometry, 0.5, true, |x| Filter::Box.weight(x), floor),
        }
    }

    /// [`Axis::compute`] with the kernel `kernel` (of support `support` at scale 1), which is
    /// zero at and beyond `±support` except that, when `closed` (the box), it is not zero at
    /// `+support`. The loops run over all outputs at once (windows, then each tap's weights,
    /// then the sums), so that they vectorise; only the fixed-point rounding is per output.
    #[inline(always)]
    fn compute_with(
        &mut self,
        (in_size, in0, len, out): (u32, f64, f64, u32),
        support: f64,
        closed: bool,
        kernel: impl Fn(f64) -> f64,
        floor: fn(f64) -> f64,
    ) {
        let n = out as usize;
        let scale = len / f64::from(out);
        let fscale = scale.max(1.0);
        let support = support * fscale;
        let inv = 1.0 / fscale;
        let last = f64::from(in_size - 1);
        // Input x (covering x .. x + 1) is weighed by kernel((x + 0.5 - center) / fscale), so
        // the inputs that count have x + 0.5 - center in (-support, support) (or (.., support]
        // when `closed`): at most ceil(2 · support) of them.
        let taps = ((2.0 * support).ceil() as usize).clamp(1, in_size as usize);
        let most = (taps - 1) as f64;
        self.taps = taps;
        let s = &mut self.scratch;
        s.resize(n * (taps + 4), 0.0);
        let (lo, rest) = s.split_at_mut(n);
        let (first, rest) = rest.split_at_mut(n);
        let (count, rest) = rest.split_at_mut(n);
        let (sums, cols) = rest.split_at_mut(n);
        for i in 0..n {
            let center = in0 + (i as f64 + 0.5) * scale;
            let l = (floor(center - 0.5 - support) + 1.0).max(0.0).min(last);
            let top = center - 0.5 + support;
            let h = if closed { floor(top) } else { -floor(-top) - 1.0 };
            lo[i] = l;
            first[i] = l + 0.5 - center;
            // Inputs l ..= l + count[i].
            count[i] = (h.min(last) - l).max(0.0).min(most);
        }
        for k in 0..taps {
            let kf = k as f64;
            let col = &mut cols[k * n..(k + 1) * n];
            for i in 0..n {
                let w = kernel((first[i] + kf) * inv);
                col[i] = if kf <= count[i] { w } else { 0.0 };
            }
        }
        sums.fill(0.0);
        for k in 0..taps {
            for (sum, w) in sums.iter_mut().zip(&cols[k * n..(k + 1) * n]) {
                *sum += w;
            }
        }
        self.starts.clear();
        self.weights.clear();
        self.weights.resize(taps * n, 0);
        for i in 0..n {
            let l = lo[i] as u32;
            // Windows near the end slide left so that all `taps` inputs exist.
            let start = l.min(in_size - taps as u32);
            self.starts.push(start);
            let skip = (l - start) as usize;
            let row = &mut self.weights[i * taps..(i + 1) * taps];
            let used = count[i] as usize + 1;
            let sum = sums[i];
            let largest = (0..used).fold(0.0f64, |m, k| m.max(cols[k * n + i].abs()));
            // The input under the centre (the kernel's peak).
            let center = in0 + (i as f64 + 0.5) * scale;
            let peak = (floor(center).max(lo[i]).min(lo[i] + count[i]) - lo[i]) as usize + skip;
            // (A window inside the image keeps most of the kernel's weight: a sum this small,
            // or weights this large after normalising, only come from a degenerate kernel and
            // would not fit the fixed point: the input under the centre alone.)
            if sum.abs() < 1e-3 || largest > 1.75 * sum.abs() {
                row[peak] = ONE as i16;
                continue;
            }
            let unit = f64::from(ONE) / sum;
            let mut total = 0;
            for k in 0..used {
                let q = round(cols[k * n + i] * unit);
                row[skip + k] = q as i16;
                total += q;
            }
            // Rounding may leave the sum off by a few units: the peak (one of the largest
            // weights) takes them, so a constant input comes out exactly.
            row[peak] = (i32::from(row[peak]) + ONE - total) as i16;
        }
    }

    fn weights(&self, i: usize) -> &[i16] {
        &self.weights[i * self.taps..(i + 1) * self.taps]
    }
}

/// A thread's resampler: the weights and the scratch image, reused between calls.
#[derive(Debug, Default)]
struct Resampler {
    x: Axis,
    y: Axis,
    /// The vertical pass's output: `out_h` rows of the needed columns, plus padding for the
    /// 16-byte loads of the horizontal kernel.
    temp: Vec<u8>,
    /// The horizontal weights laid out for the AVX2 kernel.
    packed: Vec<i16>,
}

thread_local! {
    static RESAMPLER: RefCell<Resampler> = RefCell::new(Resampler::default());
}

/// Bytes of padding after the scratch image (the horizontal kernel's loads run up to 16 bytes
/// past the last tap it weighs).
const PAD: usize = 32;

/// Resizes the `crop` (`[left, top, width, height]`, fractional pixels, inside the image) of
/// the packed `src_w × src_h` image `src` of `channels` (1 or 3) to `dst_w × dst_h` into `dst`.
///
/// # Errors
/// Buffers whose sizes do not match their dimensions, an empty size, a crop outside the image.
pub(crate) fn resize(
    src: &[u8],
    (src_w, src_h): (u32, u32),
    channels: u8,
    crop: [f64; 4],
    dst: &mut [u8],
    (dst_w, dst_h): (u32, u32),
    filter: Filter,
) -> Result<()> {
    let c = usize::from(channels);
    let [left, top, width, height] = crop;
    let fits = |at: f64, len: f64, size: u32| at >= 0.0 && len > 0.0 && at + len <= f64::from(size) + 1e-9;
    if !matches!(channels, 1 | 3)
        || src_w == 0
        || src_h == 0
        || dst_w == 0
        || dst_h == 0
        || src.len() != src_w as usize * src_h as usize * c
        || dst.len() != dst_w as usize * dst_h as usize * c
        || !fits(left, width, src_w)
        || !fits(top, height, src_h)
    {
        return Err(Error::Decode(format!(
            "resize: crop {crop:?} of a {src_w}x{src_h}x{channels} image ({} bytes) to \
             {dst_w}x{dst_h} ({} bytes) does not fit",
            src.len(),
            dst.len()
        )));
    }
    RESAMPLER.with(|r| {
        let r = &mut *r.borrow_mut();
        r.x.compute(src_w, left, width, dst_w, filter);
        r.y.compute(src_h, top, height, dst_h, filter);
        r.run(src, src_w as usize, c, dst, (dst_w as usize, dst_h as usize));
    });
    Ok(())
}

impl Resampler {
    fn run(&mut self, src: &[u8], src_w: usize, c: usize, dst: &mut [u8], (dst_w, dst_h): (usize, usize)) {
        // The columns any output reads.
        let x0 = self.x.starts.iter().copied().min().unwrap_or(0) as usize;
        let x1 = self.x.starts.iter().copied().max().unwrap_or(0) as usize + self.x.taps;
        let row_bytes = (x1 - x0) * c;
        // Every byte the passes weigh is written by the vertical pass first; the padding is only
        // ever multiplied by zero weights.
        if self.temp.len() < dst_h * row_bytes + PAD {
            self.temp.resize(dst_h * row_bytes + PAD, 0);
        }
        let stride = src_w * c;
        for r in 0..dst_h {
            let start = self.y.starts[r] as usize;
            let out = &mut self.temp[r * row_bytes..(r + 1) * row_bytes];
            vertical(src, stride, start, x0 * c, self.y.weights(r), out);
        }
        #[cfg(target_arch = "x86_64")]
        if c == 3 && is_x86_feature_detected!("avx2") {
            self.pack_horizontal();
            let (temp, x, packed) = (&self.temp, &self.x, &self.packed);
            let row = |r: usize| &temp[r * row_bytes..];
            let mut pairs = dst.chunks_exact_mut(dst_w * 6);
            for (p, two) in pairs.by_ref().enumerate() {
                let (a, b) = two.split_at_mut(dst_w * 3);
                // SAFETY: the CPU has AVX2 (checked above); each row runs to the end of temp,
                // which holds PAD bytes after the last row, and every window lies inside the row
                // (Axis::compute), so the 16-byte loads stay in it; the outputs are dst_w pixels.
                unsafe {
                    simd::horizontal3_avx2([row(2 * p), row(2 * p + 1)], row_bytes, x, x0, packed, [a, b])
                };
            }
            let last = pairs.into_remainder();
            if !last.is_empty() {
                // SAFETY: as above, for the last row.
                unsafe { simd::horizontal3_avx2([row(dst_h - 1)], row_bytes, x, x0, packed, [last]) };
            }
            return;
        }
        for (r, out) in dst.chunks_exact_mut(dst_w * c).enumerate() {
            let row = &self.temp[r * row_bytes..(r + 1) * row_bytes];
            horizontal(row, c, &self.x, x0, out);
        }
    }

    /// The horizontal weights as the AVX2 kernel reads them: per output, per group of four
    /// taps, 16 `i16`: `w0 w1` three times and two zeros, then `w2 w3` likewise.
    #[cfg(target_arch = "x86_64")]
    fn pack_horizontal(&mut self) {
        let taps = self.x.taps;
        let groups = taps.div_ceil(4);
        self.packed.clear();
        for i in 0..self.x.starts.len() {
            let w = self.x.weights(i);
            let at = |k: usize| w.get(k).copied().unwrap_or(0);
            for g in 0..groups {
                for half in 0..2 {
                    let (a, b) = (at(4 * g + 2 * half), at(4 * g + 2 * half + 1));
                    self.packed.extend_from_slice(&[a, b, a, b, a, b, 0, 0]);
                }
            }
        }
    }
}

/// Rounds, shifts and clamps a fixed-point sum to a byte.
#[inline(always)]
fn to_u8(sum: i32) -> u8 {
    ((sum + HALF) >> BITS).clamp(0, 255) as u8
}

/// One output row of the vertical pass: `out[j] = Σ_k w[k] · src[(start + k) · stride + from + j]`.
fn vertical(src: &[u8], stride: usize, start: usize, from: usize, w: &[i16], out: &mut [u8]) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2; rows start .. start + w.len() exist in src and the columns
        // from .. from + out.len() lie in each (Axis::compute keeps windows inside the image
        // and `from + out.len()` is within the row), which is all vertical_avx2 reads.
        done = unsafe { simd::vertical_avx2(src, stride, start, from, w, out) };
    }
    for j in done..out.len() {
        let sum: i32 = w
            .iter()
            .enumerate()
            .map(|(k, &wk)| i32::from(wk) * i32::from(src[(start + k) * stride + from + j]))
            .sum();
        out[j] = to_u8(sum);
    }
}

/// One output row of the horizontal pass, scalar: `row` holds input columns `x0 ..`.
fn horizontal(row: &[u8], c: usize, x: &Axis, x0: usize, out: &mut [u8]) {
    for (i, px) in out.chunks_exact_mut(c).enumerate() {
        let start = x.starts[i] as usize - x0;
        let w = x.weights(i);
        for (ch, v) in px.iter_mut().enumerate() {
            let sum: i32 = w
                .iter()
                .enumerate()
                .map(|(k, &wk)| i32::from(wk) * i32::from(row[(start + k) * c + ch]))
                .sum();
            *v = to_u8(sum);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::{Axis, BITS, HALF};

    /// The vertical pass over `out` when it is at least 32 bytes long (in 32-byte blocks, the
    /// last one overlapping its predecessor); returns how many bytes it wrote: all or none.
    ///
    /// # Safety
    /// The CPU must have AVX2; `src` must hold rows `start .. start + w.len()` of `stride` bytes
    /// with columns `from .. from + out.len()` in each.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn vertical_avx2(
        src: &[u8],
        stride: usize,
        start: usize,
        from: usize,
        w: &[i16],
        out: &mut [u8],
    ) -> usize {
        let len = out.len();
        if len < 32 {
            return 0;
        }
        let taps = w.len();
        let zero = _mm256_setzero_si256();
        let half = _mm256_set1_epi32(HALF);
        // Tap pairs (k, k + 1): the rows, and the weights as one i32 to broadcast (row k's in
        // the low half; an odd last tap pairs with itself at weight zero).
        let pair = |k: usize| -> (usize, usize, __m256i) {
            let (a, b) = (w[k], w.get(k + 1).copied().unwrap_or(0));
            let k1 = if k + 1 < taps { k + 1 } else { k };
            (k, k1, _mm256_set1_epi32(i32::from(a as u16) | (i32::from(b as u16) << 16)))
        };
        // SAFETY: row `start` exists and `from` is inside it (see the function's contract).
        let base = unsafe { src.as_ptr().add(start * stride + from) };
        let mut j = 0;
        loop {
            let mut acc = [zero; 4];
            for (ka, kb, wp) in (0..taps).step_by(2).map(pair) {
                // SAFETY: rows ka and kb are among 0 .. taps after `start`, and bytes j .. j + 32
                // lie in the columns from .. from + len of each (j + 32 <= len).
                let (a, b) = unsafe {
                    (
                        _mm256_loadu_si256(base.add(ka * stride + j).cast()),
                        _mm256_loadu_si256(base.add(kb * stride + j).cast()),
                    )
                };
                // Interleave the rows' bytes, widen to i16 pairs, multiply-add with the pair.
                let lo = _mm256_unpacklo_epi8(a, b);
                let hi = _mm256_unpackhi_epi8(a, b);
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), wp));
                acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), wp));
                acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), wp));
                acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), wp));
            }
            let s = acc.map(|v| _mm256_srai_epi32::<{ BITS as i32 }>(_mm256_add_epi32(v, half)));
            // The unpacks and packs both work within 128-bit lanes, so the bytes come back in order.
            let p = _mm256_packus_epi16(_mm256_packs_epi32(s[0], s[1]), _mm256_packs_epi32(s[2], s[3]));
            // SAFETY: j + 32 <= len.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(j).cast(), p) };
            if j + 32 == len {
                return len;
            }
            j = (j + 32).min(len - 32);
        }
    }

    /// The horizontal pass for three channels over `N` rows at once (the weights are loaded
    /// once for all): `rows[r]` holds a scratch row (input columns `x0 ..`, `row_bytes` of them
    /// used) and runs on to the end of the scratch buffer; `outs[r]` is its output row.
    ///
    /// # Safety
    /// The CPU must have AVX2; each row must extend at least 16 bytes past `row_bytes` (or into
    /// the next rows) so that a 16-byte load at any tap group of a window inside the row is
    /// inside it; `packed` must be [`super::Resampler::pack_horizontal`]'s layout of `x`; the
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picture(w: usize, h: usize, c: usize) -> Vec<u8> {
        (0..w * h * c).map(|i| ((i * 7919 + i / 5 * 31) % 256) as u8).collect()
    }

    /// Every window lies in the input, every weight row sums to exactly one, for many sizes,
    /// crops (fractional, enlarging and shrinking) and filters.
    #[test]
    fn windows_are_inside_and_weights_sum_to_one() {
        let mut a = Axis::default();
        for filter in [Filter::CatmullRom, Filter::Bilinear, Filter::Box] {
            for in_size in [1u32, 2, 3, 7, 64, 257] {
                for out in [1u32, 2, 5, 160, 333] {
                    for (f0, fl) in [(0.0, 1.0), (0.25, 0.5), (0.1, 0.013), (0.5, 0.5), (0.0, 0.3)] {
                        let len = (f64::from(in_size) * fl).max(0.01);
                        let in0 = (f64::from(in_size) * f0).min(f64::from(in_size) - len);
                        a.compute(in_size, in0, len, out, filter);
                        assert_eq!(a.starts.len(), out as usize);
                        for i in 0..out as usize {
                            assert!(
                                a.starts[i] as usize + a.taps <= in_size as usize,
                                "{filter:?} {in_size} {out}"
                            );
                            let sum: i32 = a.weights(i).iter().map(|&w| i32::from(w)).sum();
                            assert_eq!(sum, ONE, "{filter:?} in {in_size} out {out} crop {in0}+{len} #{i}");
                        }
                    }
                }
            }
        }
    }

    /// fast_image_resize 6.1.0 reads out of bounds (and panics in debug builds) on this crop:
    /// a fractional left edge while enlarging. Here it is just a crop.
    #[test]
    fn fractional_crops_while_enlarging() {
        let src = picture(256, 192, 3);
        let mut dst = vec![0u8; 160 * 160 * 3];
        for left in [1.25, 60.25, 0.5, 3.75] {
            resize(&src, (256, 192), 3, [left, 0.0, 80.0, 80.0], &mut dst, (160, 160), Filter::CatmullRom)
                .unwrap();
        }
    }

    /// The weights do not depend on the CPU: the AVX2 build of the weight loops and the
    /// portable one (with its own `floor`) give the same starts and weights.
    #[test]
    fn weights_are_the_same_on_every_cpu() {
        let (mut fast, mut portable) = (Axis::default(), Axis::default());
        for filter in [Filter::CatmullRom, Filter::Bilinear, Filter::Box] {
            for (in_size, in0, len, out) in [
                (300u32, 1.3, 290.0, 160u32),
                (200, 0.0, 140.0, 160),
                (7, 0.25, 3.5, 333),
                (2000, 17.0, 1900.0, 224),
            ] {
                fast.compute(in_size, in0, len, out, filter);
                portable.compute_any(in_size, in0, len, out, filter, floor);
                assert_eq!(
                    (fast.taps, &fast.starts, &fast.weights),
                    (portable.taps, &portable.starts, &portable.weights)
                );
            }
        }
    }

    /// Constant colours come out exactly, whatever the filter and geometry.
    #[test]
    fn constant_colours_are_exact() {
        for c in [1usize, 3] {
            let src: Vec<u8> = (0..40 * 30).flat_map(|_| [17u8, 200, 255][..c].to_vec()).collect();
            for filter in [Filter::CatmullRom, Filter::Bilinear, Filter::Box] {
                for (crop, out) in [
                    ([0.0, 0.0, 40.0, 30.0], (13u32, 9u32)),
                    ([3.5, 2.25, 10.0, 7.0], (64, 64)),
                    ([0.0, 0.0, 40.0, 30.0], (40, 30)),
                    ([39.0, 29.0, 1.0, 1.0], (5, 3)),
                ] {
                    let mut dst = vec![0u8; (out.0 * out.1) as usize * c];
                    resize(&src, (40, 30), c as u8, crop, &mut dst, out, filter).unwrap();
                    for px in dst.chunks_exact(c) {
                        assert_eq!(px, &[17u8, 200, 255][..c], "{filter:?} {crop:?} {out:?}");
                    }
                }
            }
        }
    }

    /// The scalar kernels alone, for comparison with what [`resize`] does (AVX2 where it can).
    fn scalar_resize(
        src: &[u8],
        (w, h): (usize, usize),
        c: usize,
        crop: [f64; 4],
        out: (usize, usize),
        filter: Filter,
    ) -> Vec<u8> {
        let mut r = Resampler::default();
        r.x.compute(w as u32, crop[0], crop[2], out.0 as u32, filter);
        r.y.compute(h as u32, crop[1], crop[3], out.1 as u32, filter);
        let x0 = *r.x.starts.iter().min().unwrap() as usize;
        let x1 = *r.x.starts.iter().max().unwrap() as usize + r.x.taps;
        let rb = (x1 - x0) * c;
        let mut temp = vec![0u8; rb];
        let mut dst = vec![0u8; out.0 * out.1 * c];
        for row in 0..out.1 {
            for (j, v) in temp.iter_mut().enumerate() {
                let sum: i32 = r
                    .y
                    .weights(row)
                    .iter()
                    .enumerate()
                    .map(|(k, &wk)| {
                        i32::from(wk) * i32::from(src[(r.y.starts[row] as usize + k) * w * c + x0 * c + j])
                    })
                    .sum();
                *v = to_u8(sum);
            }
            horizontal(&temp, c, &r.x, x0, &mut dst[row * out.0 * c..(row + 1) * out.0 * c]);
        }
        dst
    }

    /// The AVX2 kernels compute exactly the scalar kernels' bytes.
    #[test]
    fn simd_equals_scalar() {
        for (w, h) in [(97usize, 61usize), (300, 200), (16, 16), (5, 3)] {
            let src = picture(w, h, 3);
            for filter in [Filter::CatmullRom, Filter::Bilinear, Filter::Box] {
                for (crop, out) in [
                    ([0.0, 0.0, w as f64, h as f64], (160usize, 120usize)),
                    ([1.25, 0.5, w as f64 / 2.0, h as f64 / 3.0], (33, 47)),
                    ([0.0, 0.0, w as f64, h as f64], (7, 5)),
                ] {
                    let mut fast = vec![0u8; out.0 * out.1 * 3];
                    resize(
                        &src,
                        (w as u32, h as u32),
                        3,
                        crop,
                        &mut fast,
                        (out.0 as u32, out.1 as u32),
                        filter,
                    )
                    .unwrap();
                    let slow = scalar_resize(&src, (w, h), 3, crop, out, filter);
                    assert_eq!(fast, slow, "{w}x{h} {filter:?} {crop:?} -> {out:?}");
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Any crop inside any image, to any size, with any filter: no panic, no read outside
        /// the buffers (the windows are checked, the debug assertions run in debug builds), and
        /// the AVX2 path equals the scalar one.
        #[test]
        fn any_geometry(
            w in 1usize..90, h in 1usize..90, grey in proptest::bool::ANY,
            fx in 0.0f64..1.0, fy in 0.0f64..1.0, fw in 0.0f64..1.0, fh in 0.0f64..1.0,
            ow in 1usize..200, oh in 1usize..200, f in 0usize..3,
        ) {
            let c = if grey { 1 } else { 3 };
            let src = picture(w, h, c);
            let cw = (fw * w as f64).max(0.05);
            let ch = (fh * h as f64).max(0.05);
            let crop = [fx * (w as f64 - cw), fy * (h as f64 - ch), cw, ch];
            let filter = [Filter::CatmullRom, Filter::Bilinear, Filter::Box][f];
            let mut dst = vec![0u8; ow * oh * c];
            resize(&src, (w as u32, h as u32), c as u8, crop, &mut dst, (ow as u32, oh as u32), filter).unwrap();
            proptest::prop_assert_eq!(dst, scalar_resize(&src, (w, h), c, crop, (ow, oh), filter));
        }
    }

    /// Bad geometry is an error, not a panic.
    #[test]
    fn bad_geometry_is_an_error() {
        let src = picture(10, 10, 3);
        let mut dst = vec![0u8; 5 * 5 * 3];
        for crop in [[-1.0, 0.0, 5.0, 5.0], [6.0, 0.0, 5.0, 5.0], [0.0, 0.0, 0.0, 5.0], [0.0, 0.0, 5.0, 11.0]]
        {
            assert!(resize(&src, (10, 10), 3, crop, &mut dst, (5, 5), Filter::Box).is_err(), "{crop:?}");
        }
        assert!(resize(&src, (10, 9), 3, [0.0, 0.0, 5.0, 5.0], &mut dst, (5, 5), Filter::Box).is_err());
        assert!(resize(&src, (10, 10), 3, [0.0, 0.0, 5.0, 5.0], &mut dst, (5, 4), Filter::Box).is_err());
        assert!(resize(&src, (10, 10), 2, [0.0, 0.0, 5.0, 5.0], &mut dst, (5, 5), Filter::Box).is_err());
    }
}
