//! The weights of a resize: the filters, one axis's windows and 14-bit fixed-point weights
//! ([`Axis`]), and the rounding of a weighted sum back to a byte ([`to_u8`]).

/// Fixed-point bits of the weights.
pub(super) const BITS: u32 = 14;
/// A weight of one.
pub(super) const ONE: i32 = 1 << BITS;
/// Added before the final shift: round half up.
pub(super) const HALF: i32 = 1 << (BITS - 1);

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
pub(super) struct Axis {
    pub(super) taps: usize,
    pub(super) starts: Vec<u32>,
    pub(super) weights: Vec<i16>,
    /// Scratch: per output its first input, first offset (then `ONE / sum`), inputs used − 1,
    /// weight sum, largest weight and peak position, then the float weights tap by tap.
    scratch: Vec<f64>,
    /// Scratch: the sums of the rounded weights, then the rounded weights tap by tap.
    rounded: Vec<i32>,
}

/// `v.floor()` without a libm call (x86-64 has no floor instruction before SSE4.1), for `|v| <
/// 2^52`.
#[inline(always)]
pub(super) fn floor(v: f64) -> f64 {
    // Branch-free: the comparison is as often true as not.
    let t = v as i64 as f64;
    t - f64::from(u8::from(t > v))
}

impl Axis {
    /// The weights for resizing inputs `in0 .. in0 + len` (fractional, within `0 .. in_size`)
    /// to `out` outputs with `filter`, widened by the downscale factor (antialiasing).
    pub(super) fn compute(&mut self, in_size: u32, in0: f64, len: f64, out: u32, filter: Filter) {
        #[cfg(target_arch = "x86_64")]
        if crate::image::cpu::avx2() && crate::image::cpu::fma() {
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
    pub(super) fn compute_any(
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
        // Scratch, per output: first input, offset of the first input from the centre, inputs
        // used − 1, weight sum, largest weight, peak position; then the weights tap by tap.
        let s = &mut self.scratch;
        s.resize(n * (taps + 6), 0.0);
        let (lo, rest) = s.split_at_mut(n);
        let (first, rest) = rest.split_at_mut(n);
        let (count, rest) = rest.split_at_mut(n);
        let (sums, rest) = rest.split_at_mut(n);
        let (largest, rest) = rest.split_at_mut(n);
        let (peak, cols) = rest.split_at_mut(n);
        for i in 0..n {
            let center = in0 + (i as f64 + 0.5) * scale;
            let l = (floor(center - 0.5 - support) + 1.0).max(0.0).min(last);
            let top = center - 0.5 + support;
            let h = if closed { floor(top) } else { -floor(-top) - 1.0 };
            lo[i] = l;
            first[i] = l + 0.5 - center;
            // Inputs l ..= l + count[i].
            count[i] = (h.min(last) - l).max(0.0).min(most);
            // The input under the centre (the kernel's peak), from l.
            peak[i] = floor(center).max(l).min(l + count[i]) - l;
        }
        sums.fill(0.0);
        largest.fill(0.0);
        for k in 0..taps {
            let kf = k as f64;
            let col = &mut cols[k * n..(k + 1) * n];
            for i in 0..n {
                let w = kernel((first[i] + kf) * inv);
                let w = if kf <= count[i] { w } else { 0.0 };
                col[i] = w;
                sums[i] += w;
                largest[i] = largest[i].max(w.abs());
            }
        }
        // Each weight times ONE / sum, rounded half away from zero, as an i32 (exact: the
        // values are whole and far below 2^51, where adding 1.5 · 2^52 puts them in the low
        // bits of the mantissa), tap by tap; the sums of the rounded weights.
        let q = &mut self.rounded;
        q.resize((taps + 1) * n, 0);
        let (totals, q) = q.split_at_mut(n);
        totals.fill(0);
        // (`first` is not needed any more: it holds each output's `ONE / sum` now.)
        let unit: &mut [f64] = first;
        for i in 0..n {
            unit[i] = f64::from(ONE) / sums[i];
        }
        const MAGIC: f64 = 6_755_399_441_055_744.0;
        for k in 0..taps {
            for (((q, w), u), t) in q[k * n..(k + 1) * n]
                .iter_mut()
                .zip(&cols[k * n..(k + 1) * n])
                .zip(&*unit)
                .zip(totals.iter_mut())
            {
                let v = *w * *u;
                let r = floor(v.abs() + 0.5).copysign(v);
                *q = (r + MAGIC).to_bits() as i32;
                *t += *q;
            }
        }
        self.starts.clear();
        self.starts.resize(n, 0);
        self.weights.clear();
        self.weights.resize(taps * n, 0);
        let last_start = in_size - taps as u32;
        for (i, (start_out, row)) in
            self.starts.iter_mut().zip(self.weights.chunks_exact_mut(taps)).enumerate()
        {
            // (Whole numbers in 0 ..= in_size, so `as i32` is exact: a cheaper conversion.)
            let l = lo[i] as i32 as u32;
            // Windows near the end slide left so that all `taps` inputs exist.
            let start = l.min(last_start);
            *start_out = start;
            let skip = (l - start) as usize;
            let peak = peak[i] as i32 as usize + skip;
            let sum = sums[i];
            // (A window inside the image keeps most of the kernel's weight: a sum this small,
            // or weights this large after normalising, only come from a degenerate kernel and
            // would not fit the fixed point: the input under the centre alone.)
            if sum.abs() < 1e-3 || largest[i] > 1.75 * sum.abs() {
                row[peak] = ONE as i16;
                continue;
            }
            // Inputs past the window's last (zero weights) would fall outside the row.
            for (k, cell) in row[skip..].iter_mut().enumerate() {
                *cell = q[k * n + i] as i16;
            }
            // Rounding may leave the sum off by a few units: the peak (one of the largest
            // weights) takes them, so a constant input comes out exactly.
            row[peak] = (i32::from(row[peak]) + ONE - totals[i]) as i16;
        }
    }

    pub(super) fn weights(&self, i: usize) -> &[i16] {
        &self.weights[i * self.taps..(i + 1) * self.taps]
    }
}

/// Rounds, shifts and clamps a fixed-point sum to a byte.
#[inline(always)]
pub(super) fn to_u8(sum: i32) -> u8 {
    ((sum + HALF) >> BITS).clamp(0, 255) as u8
}
