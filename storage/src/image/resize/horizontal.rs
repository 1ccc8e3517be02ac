//! The horizontal pass of [`resize_plane`](super::resize_plane)'s area averaging, eight output
//! pixels at a time, with exactly the arithmetic of `fast_image_resize` 6's `Convolution(Box)`
//! on one 8-bit channel, so that the writer's pixels (and the checksums of its files) are what
//! they were.
//!
//! Why: at the writer's downscales (a ~500 px photo to 256 px: two or three source pixels per
//! output pixel) `fast_image_resize`'s horizontal pass runs its scalar remainder loop for every
//! pixel (its SIMD loops take 8 or 16 taps at a time) and a horizontal sum of four empty vectors;
//! it was 11.7 % of `write-imagefolder`'s time, the largest part after the source's decoding.
//! Here one AVX2 gather loads the 4 source bytes under each of 8 output pixels (two gathers for
//! windows of 5–8), two `madd`s weigh them, and the rounding and clamping are `fast_image_resize`'s
//! (`(2^(p-1) + Σ pixel·coefficient) >> p`, clamped to 0–255). Its vertical pass (SIMD across the
//! row) is still `fast_image_resize`'s own, and runs first, as it does for 8-bit images.
//!
//! The coefficients are its `precompute_coefficients` (box filter, support 0.5, the kernel scaled
//! with the downscale) and `Normalizer16` (i16 with the most precision the largest weight allows),
//! ported step for step: the same `f64` operations in the same order. The test
//! `the_horizontal_pass_is_fast_image_resizes` compares whole resizes with `fast_image_resize`'s
//! over sizes, crops, and both the SIMD and the scalar path.

/// Coefficients of a horizontal pass: for each output pixel, the first source pixel of its
/// window and its weights, as `fast_image_resize` computes them.
#[derive(Debug)]
pub(super) struct Taps {
    /// Fixed-point bits of the weights.
    precision: u8,
    /// Source pixels read per output pixel: 4 or 8 (the widest window, rounded up).
    window: usize,
    /// Each output pixel's first source pixel (relative to `first`), non-decreasing.
    starts: Vec<i32>,
    /// Each output pixel's number of weights.
    sizes: Vec<u8>,
    /// Each output pixel's weights, `window` of them (zeros past its size).
    weights: Vec<i16>,
    /// The weights of each block of 8 output pixels as the AVX2 pass loads them: for each pair of
    /// taps (0, 2), (1, 3), then (4, 6), (5, 7), the two weights of each of the 8 pixels.
    interleaved: Vec<i16>,
    /// The first source column any output pixel reads, and one past the last.
    pub(super) first: u32,
    pub(super) last: u32,
}

impl Taps {
    /// The taps of `fast_image_resize`'s `Convolution(Box)` from the source columns `0..in1` of
    /// a row of `in_size` pixels to `out_size` pixels; `None` where a window is wider than 8
    /// (downscales of more than ~7×), or nothing is resized.
    pub(super) fn area(in_size: u32, in1: f64, out_size: u32) -> Option<Taps> {
        let Coefficients { values: coeffs, window_size, bounds } =
            precompute_coefficients(in_size, in1, out_size)?;
        let precision = precision(&coeffs)?;
        let window = match bounds.iter().map(|&(_, size)| size).max()? {
            0..=4 => 4,
            5..=8 => 8,
            _ => return None,
        };
        let first = bounds.iter().map(|&(start, _)| start).min()?;
        let last = bounds.iter().map(|&(start, size)| start + size).max()?;
        // Normalizer16::new's i16 weights, each output's `window` of them.
        let fixed = (1 << precision) as f64;
        let n = out_size as usize;
        let mut weights = vec![0i16; n * window];
        for (k, (chunk, &(_, size))) in coeffs.chunks_exact(window_size).zip(&bounds).enumerate() {
            for (w, &v) in weights[k * window..].iter_mut().zip(chunk.iter().take(size as usize)) {
                *w = (v * fixed).round() as i16;
            }
        }
        let starts: Vec<i32> = bounds.iter().map(|&(start, _)| (start - first) as i32).collect();
        // The AVX2 pass checks a block's last start against the row's end: starts must not
        // decrease (they follow the output pixels' centres).
        if starts.windows(2).any(|w| w[0] > w[1]) {
            return None;
        }
        let sizes = bounds.iter().map(|&(_, size)| size as u8).collect();
        let mut interleaved = Vec::with_capacity(n / 8 * window * 8);
        for block in weights.chunks_exact(8 * window) {
            for (a, b) in [(0, 2), (1, 3), (4, 6), (5, 7)].into_iter().take(window / 2) {
                for w in block.chunks_exact(window) {
                    interleaved.extend([w[a], w[b]]);
                }
            }
        }
        Some(Taps { precision, window, starts, sizes, weights, interleaved, first, last })
    }

    /// Output pixels per row.
    fn width(&self) -> usize {
        self.starts.len()
    }
}

/// `fast_image_resize`'s `Coefficients`: each output's weights (`window_size` of them, zeros
/// past its bound) and bound (first source pixel, weights used).
struct Coefficients {
    values: Vec<f64>,
    window_size: usize,
    bounds: Vec<(u32, u32)>,
}

/// `fast_image_resize`'s `precompute_coefficients(in_size, 0, in1, out_size, box, 0.5,
/// adaptive_kernel_size = true)`, step for step.
fn precompute_coefficients(in_size: u32, in1: f64, out_size: u32) -> Option<Coefficients> {
    let (filter_support, in0) = (0.5f64, 0.0f64);
    let scale = (in1 - in0) / out_size as f64;
    if in_size == 0 || out_size == 0 || scale <= 0. || !scale.is_finite() {
        return None;
    }
    let filter_scale = scale.max(1.0);
    let filter_radius = filter_support * filter_scale;
    let window_size = filter_radius.ceil() as usize * 2 + 1;
    let recip_filter_scale = 1.0 / filter_scale;
    let mut coeffs: Vec<f64> = Vec::with_capacity(window_size * out_size as usize);
    let mut bounds: Vec<(u32, u32)> = Vec::with_capacity(out_size as usize);
    for out_x in 0..out_size {
        let in_center = in0 + (out_x as f64 + 0.5) * scale;
        let x_min = (in_center - filter_radius).floor().max(0.) as u32;
        let x_max = (in_center + filter_radius).ceil().min(in_size as f64) as u32;
        let cur_index = coeffs.len();
        let mut ww: f64 = 0.0;
        let center = in_center - 0.5;
        let mut bound_start = x_min;
        let mut bound_end = x_max;
        for x in x_min..x_max {
            let w = box_filter((x as f64 - center) * recip_filter_scale);
            if x == bound_start && w == 0. {
                bound_start += 1;
            } else {
                coeffs.push(w);
                ww += w;
            }
        }
        // (As there: over every weight so far, from the last.)
        for &c in coeffs.iter().rev() {
            if bound_end <= bound_start || c != 0. {
                break;
            }
            bound_end -= 1;
        }
        if ww != 0.0 {
            coeffs[cur_index..].iter_mut().for_each(|w| *w /= ww);
        }
        coeffs.resize(cur_index + window_size, 0.);
        bounds.push((bound_start, bound_end - bound_start));
    }
    Some(Coefficients { values: coeffs, window_size, bounds })
}

/// `Normalizer16::new`'s fixed-point bits for `coeffs`: the most whose largest weight still fits
/// an `i16` (`None` below 1, which its rounding needs).
fn precision(coeffs: &[f64]) -> Option<u8> {
    const PRECISION_BITS: u8 = 32 - 8 - 2;
    const MAX_COEFFS_PRECISION: u8 = 16 - 1;
    // (Its `max_by(partial_cmp)`, or 0 without weights; a box's weights are not negative.)
    let max_weight = coeffs.iter().copied().fold(0.0, f64::max);
    let mut precision = 0u8;
    for cur_precision in 0..PRECISION_BITS {
        precision = cur_precision;
        let next_value: i32 = (max_weight * (1 << (precision + 1)) as f64).round() as i32;
        if next_value >= (1 << MAX_COEFFS_PRECISION) {
            break;
        }
    }
    (precision >= 1).then_some(precision)
}

/// `fast_image_resize`'s box filter.
fn box_filter(x: f64) -> f64 {
    if x > -0.5 && x <= 0.5 {
        1.0
    } else {
        0.0
    }
}

/// Writes `rows` rows of `taps.width()` pixels to `dst` (packed) from rows of `src` `stride`
/// bytes apart, each starting at the taps' first column.
///
/// # Panics
/// If `src` or `dst` is too short, or a row shorter than the taps read.
pub(super) fn convolve(taps: &Taps, src: &[u8], stride: usize, rows: usize, dst: &mut [u8]) {
    let width = taps.width();
    let span = (taps.last - taps.first) as usize;
    assert!(span <= stride || rows <= 1, "rows of {stride} bytes for taps over {span}");
    assert!(rows == 0 || src.len() >= (rows - 1) * stride + span, "{} source bytes", src.len());
    assert!(dst.len() >= rows * width, "{} output bytes for {rows} rows of {width}", dst.len());
    #[cfg(target_arch = "x86_64")]
    if simd() {
        // SAFETY: AVX2 is present (checked); the lengths are as asserted above.
        unsafe { convolve_avx2(taps, src, stride, rows, dst) };
        return;
    }
    for r in 0..rows {
        convolve_scalar(taps, &src[r * stride..], &mut dst[r * width..(r + 1) * width], 0);
    }
}

/// Output pixels `from..` of one row, one at a time (`fast_image_resize`'s own arithmetic).
fn convolve_scalar(taps: &Taps, row: &[u8], out: &mut [u8], from: usize) {
    let round = 1i32 << (taps.precision - 1);
    for (x, out) in out.iter_mut().enumerate().skip(from) {
        let start = taps.starts[x] as usize;
        let size = usize::from(taps.sizes[x]);
        let weights = &taps.weights[x * taps.window..][..size];
        let sum = row[start..start + size]
            .iter()
            .zip(weights)
            .fold(round, |acc, (&p, &w)| acc + i32::from(p) * i32::from(w));
        *out = (sum >> taps.precision).clamp(0, 255) as u8;
    }
}

/// Whether the AVX2 pass is taken (the CPU has AVX2, and tests have not turned it off).
#[cfg(target_arch = "x86_64")]
fn simd() -> bool {
    #[cfg(test)]
    if SCALAR.with(std::cell::Cell::get) {
        return false;
    }
    std::is_x86_feature_detected!("avx2")
}

#[cfg(test)]
thread_local! {
    /// Tests: take the scalar pass on this thread.
    pub(super) static SCALAR: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// [`convolve`] with AVX2: for each row, blocks of 8 output pixels whose windows lie in `src`,
/// then the rest one at a time.
///
/// # Safety
/// AVX2 is present; `src` holds `rows` rows `stride` bytes apart (the last may end where the
/// taps' span does); `dst` holds `rows × taps.width()` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn convolve_avx2(taps: &Taps, src: &[u8], stride: usize, rows: usize, dst: &mut [u8]) {
    use std::arch::x86_64::*;
    let width = taps.width();
    let blocks = width / 8;
    let low_bytes = _mm256_set1_epi32(0x00FF_00FF);
    let round = _mm256_set1_epi32(1 << (taps.precision - 1));
    let shift = _mm_cvtsi32_si128(i32::from(taps.precision));
    // Dword 0 and 4 (each 4 packed pixels) to the low 8 bytes.
    let gather_low = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
    for r in 0..rows {
        let row = &src[r * stride..];
        let out = &mut dst[r * width..(r + 1) * width];
        let mut block = 0;
        while block < blocks {
            let x = block * 8;
            // The block's last window (starts do not decrease) must lie in the row's slice: a
            // gather reads `window` bytes from each start.
            if taps.starts[x + 7] as usize + taps.window > row.len() {
                break;
            }
            // SAFETY: starts[x..x + 8] and the block's interleaved weights are in bounds (the
            // taps' own vectors, built for `blocks` blocks); each gather reads 4 bytes at
            // row + start (+ 4), within `row` (checked above); AVX2 is present (caller).
            unsafe {
                let starts = _mm256_loadu_si256(taps.starts.as_ptr().add(x).cast());
                let weights = taps.interleaved.as_ptr().add(block * taps.window * 8).cast::<__m256i>();
                let base = row.as_ptr().cast::<i32>();
                let pixels = _mm256_i32gather_epi32::<1>(base, starts);
                let mut sum = _mm256_add_epi32(
                    _mm256_madd_epi16(_mm256_and_si256(pixels, low_bytes), _mm256_loadu_si256(weights)),
                    _mm256_madd_epi16(_mm256_srli_epi16::<8>(pixels), _mm256_loadu_si256(weights.add(1))),
                );
                if taps.window == 8 {
                    let pixels = _mm256_i32gather_epi32::<1>(base.cast::<u8>().add(4).cast(), starts);
                    sum = _mm256_add_epi32(
                        sum,
                        _mm256_add_epi32(
                            _mm256_madd_epi16(
                                _mm256_and_si256(pixels, low_bytes),
                                _mm256_loadu_si256(weights.add(2)),
                            ),
                            _mm256_madd_epi16(
                                _mm256_srli_epi16::<8>(pixels),
                                _mm256_loadu_si256(weights.add(3)),
                            ),
                        ),
                    );
                }
                let values = _mm256_sra_epi32(_mm256_add_epi32(sum, round), shift);
                // Saturating packs clamp to 0–255 as fast_image_resize's clip table does.
                let words = _mm256_packs_epi32(values, values);
                let bytes = _mm256_packus_epi16(words, words);
                let eight = _mm256_permutevar8x32_epi32(bytes, gather_low);
                _mm_storel_epi64(out.as_mut_ptr().add(x).cast(), _mm256_castsi256_si128(eight));
            }
            block += 1;
        }
        convolve_scalar(taps, row, out, block * 8);
    }
}
