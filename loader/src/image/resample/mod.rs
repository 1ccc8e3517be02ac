//! Resizing a crop of packed `u8` pixels (1 or 3 channels) into the output slot: a separable
//! convolution (Pillow's and `fast_image_resize`'s method) through a per-thread scratch image,
//! with 14-bit fixed-point weights that sum to exactly one (so constant colours stay exact) and
//! AVX2 kernels. Three channels run the vertical pass first; one channel (a JPEG's Y, Cb or Cr
//! plane, a grey image) runs first whichever pass leaves fewer rows for the horizontal one,
//! which costs more per row ([`resize_planes`] resizes a JPEG's planes, the two chroma planes
//! sharing their weights).
//!
//! beton has its own because this runs for every sample with a new fractional crop: the weights
//! are computed into reused buffers (no allocation per call), every window is checked to lie in
//! the image when it is built (so the kernels' reads are in bounds by construction), the
//! three-channel horizontal pass does four taps per multiply-add, and the one-channel one eight
//! outputs per multiply-add (byte shuffles gather each output's taps). The scalar kernels compute
//! the same integers as the AVX2 ones (tested equal), and the pass order is the same on every
//! CPU.

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
    /// Scratch: per output its first input, first offset (then `ONE / sum`), inputs used − 1,
    /// weight sum, largest weight and peak position, then the float weights tap by tap.
    scratch: Vec<f64>,
    /// Scratch: the sums of the rounded weights, then the rounded weights tap by tap.
    rounded: Vec<i32>,
}

/// `v.floor()` without a libm call (x86-64 has no floor instruction before SSE4.1), for `|v| <
/// 2^52`.
#[inline(always)]
fn floor(v: f64) -> f64 {
    // Branch-free: the comparison is as often true as not.
    let t = v as i64 as f64;
    t - f64::from(u8::from(t > v))
}

impl Axis {
    /// The weights for resizing inputs `in0 .. in0 + len` (fractional, within `0 .. in_size`)
    /// to `out` outputs with `filter`, widened by the downscale factor (antialiasing).
    fn compute(&mut self, in_size: u32, in0: f64, len: f64, out: u32, filter: Filter) {
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
    /// The one-channel horizontal pass laid out for its AVX2 kernel.
    blocks: Blocks1,
    /// What the weights and layouts above were computed for.
    geometry: Option<Geometry>,
}

/// The one-channel horizontal pass as the AVX2 kernel runs it: outputs in blocks of eight, four
/// per 128-bit lane, each lane reading one 16-byte load of the row that holds all of its four
/// windows. Per block and tap pair, a byte shuffle that spreads the loaded bytes into the `i16`
/// pairs each output weighs, and those weights.
#[derive(Debug, Default)]
struct Blocks1 {
    /// Tap pairs: `taps.div_ceil(2)`.
    pairs: usize,
    /// Per block: the offsets (from the row's first byte) of the low and high lane's loads, or
    /// `u32::MAX` twice when a lane's windows do not fit in 16 bytes (the block runs scalar).
    loads: Vec<[u32; 2]>,
    /// Per block, per pair: 32 shuffle indices.
    shuffles: Vec<i8>,
    /// Per block, per pair: 16 weights (`w[2p], w[2p + 1]` of outputs 0 to 7); when `wide`,
    /// per output its weights padded to 16.
    weights: Vec<i16>,
    /// Whether the wide kernel runs (windows of 9 to 16 taps, or spread too far for blocks).
    wide: bool,
}

thread_local! {
    static RESAMPLER: RefCell<Resampler> = RefCell::new(Resampler::default());
}

/// Bytes of padding after the scratch image (the horizontal kernel's loads run up to 16 bytes
/// past the last tap it weighs).
const PAD: usize = 32;

/// Checks that `crop` of a `src_w × src_h × channels` image in `src` can be resized to
/// `dst_w × dst_h × channels` in `dst_len` bytes.
fn check(
    src_len: usize,
    (src_w, src_h): (u32, u32),
    channels: u8,
    crop: [f64; 4],
    dst_len: usize,
    (dst_w, dst_h): (u32, u32),
) -> Result<()> {
    let c = usize::from(channels);
    let [left, top, width, height] = crop;
    let fits = |at: f64, len: f64, size: u32| at >= 0.0 && len > 0.0 && at + len <= f64::from(size) + 1e-9;
    if !matches!(channels, 1 | 3)
        || src_w == 0
        || src_h == 0
        || dst_w == 0
        || dst_h == 0
        || src_len != src_w as usize * src_h as usize * c
        || dst_len != dst_w as usize * dst_h as usize * c
        || !fits(left, width, src_w)
        || !fits(top, height, src_h)
    {
        return Err(Error::Decode(format!(
            "resize: crop {crop:?} of a {src_w}x{src_h}x{channels} image ({src_len} bytes) to \
             {dst_w}x{dst_h} ({dst_len} bytes) does not fit"
        )));
    }
    Ok(())
}

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
    check(src.len(), (src_w, src_h), channels, crop, dst.len(), (dst_w, dst_h))?;
    RESAMPLER.with(|r| {
        let r = &mut *r.borrow_mut();
        let c = usize::from(channels);
        r.prepare(Geometry { src: (src_w, src_h), crop, dst: (dst_w, dst_h), filter, channels: c });
        r.run(src, src_w as usize, c, dst, (dst_w as usize, dst_h as usize));
    });
    Ok(())
}

/// One plane for [`resize_planes`]: `size.0 × size.1` bytes in `data`, the `crop` of it to
/// resize with `filter`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plane<'a> {
    pub data: &'a [u8],
    pub size: (u32, u32),
    pub crop: [f64; 4],
    pub filter: Filter,
}

/// Resizes each of `planes` (one channel each) to `dst_w × dst_h`, into consecutive parts of
/// `dst`. Planes with the same geometry as the one before them (the two chroma planes of a
/// JPEG) reuse its weights.
///
/// # Errors
/// As [`resize`], for any plane; `dst` not `planes.len()` planes long.
pub(crate) fn resize_planes(planes: &[Plane<'_>], dst: &mut [u8], (dst_w, dst_h): (u32, u32)) -> Result<()> {
    let n = dst_w as usize * dst_h as usize;
    if dst.len() != planes.len() * n {
        return Err(Error::Decode(format!(
            "resize: {} bytes for {} planes of {dst_w}x{dst_h}",
            dst.len(),
            planes.len()
        )));
    }
    // Each plane through `resize`: `prepare` keeps the weights when a plane's geometry is the
    // one before it.
    for (p, out) in planes.iter().zip(dst.chunks_exact_mut(n.max(1))) {
        resize(p.data, p.size, 1, p.crop, out, (dst_w, dst_h), p.filter)?;
    }
    Ok(())
}

/// What a resize's weights depend on.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Geometry {
    src: (u32, u32),
    crop: [f64; 4],
    dst: (u32, u32),
    filter: Filter,
    channels: usize,
}

impl Resampler {
    /// Computes the weights (and the AVX2 kernels' layouts of them) for `g`, unless they are
    /// already those of `g`.
    fn prepare(&mut self, g: Geometry) {
        if self.geometry == Some(g) {
            return;
        }
        let [left, top, width, height] = g.crop;
        self.x.compute(g.src.0, left, width, g.dst.0, g.filter);
        self.y.compute(g.src.1, top, height, g.dst.1, g.filter);
        #[cfg(target_arch = "x86_64")]
        if crate::image::cpu::avx2() {
            match g.channels {
                3 => self.pack_horizontal(),
                1 => self.pack_horizontal1(self.columns().0),
                _ => {}
            }
        }
        self.geometry = Some(g);
    }

    /// The first input column any output reads, and one past the last.
    fn columns(&self) -> (usize, usize) {
        let x0 = self.x.starts.iter().copied().min().unwrap_or(0) as usize;
        let x1 = self.x.starts.iter().copied().max().unwrap_or(0) as usize + self.x.taps;
        (x0, x1)
    }

    /// Runs the resize [`Resampler::prepare`]d for this geometry.
    fn run(&mut self, src: &[u8], src_w: usize, c: usize, dst: &mut [u8], (dst_w, dst_h): (usize, usize)) {
        let (x0, x1) = self.columns();
        if let Some(rows) = self.horizontal_first(c, dst_h) {
            self.run_horizontal_first(src, src_w, rows, x0, dst, (dst_w, dst_h));
            return;
        }
        let row_bytes = (x1 - x0) * c;
        // Every byte the passes weigh is written by the vertical pass first; the padding is only
        // ever multiplied by zero weights.
        if self.temp.len() < dst_h * row_bytes + PAD {
            self.temp.resize(dst_h * row_bytes + PAD, 0);
        }
        vertical_rows(src, src_w * c, x0 * c, &self.y, 0, &mut self.temp[..dst_h * row_bytes], row_bytes);
        #[cfg(target_arch = "x86_64")]
        if c == 3 && crate::image::cpu::avx2() {
            let (temp, x, packed) = (&self.temp, &self.x, &self.packed);
            let row = |r: usize| &temp[r * row_bytes..];
            let mut pairs = dst.chunks_exact_mut(dst_w * 6);
            for (p, two) in pairs.by_ref().enumerate() {
                let (a, b) = two.split_at_mut(dst_w * 3);
                // SAFETY: the CPU has AVX2 (checked above); each row runs to the end of temp,
                // which holds PAD bytes after the last row, and every window lies inside the row
                // (Axis::compute), so the 16-byte loads stay in it; the outputs are dst_w pixels.
                unsafe {
                    avx2::horizontal3_avx2([row(2 * p), row(2 * p + 1)], row_bytes, x, x0, packed, [a, b])
                };
            }
            let last = pairs.into_remainder();
            if !last.is_empty() {
                // SAFETY: as above, for the last row.
                unsafe { avx2::horizontal3_avx2([row(dst_h - 1)], row_bytes, x, x0, packed, [last]) };
            }
            return;
        }
        // Each row runs on to the end of temp (its padding included), so that the kernels'
        // 16-byte loads fit more often.
        let (temp, x) = (&self.temp, &self.x);
        if c == 1 && horizontal1_rows(|r| &temp[r * row_bytes..], x, x0, &self.blocks, dst, dst_w) {
            return;
        }
        for (r, out) in dst.chunks_exact_mut(dst_w * c).enumerate() {
            let row = &self.temp[r * row_bytes..(r + 1) * row_bytes];
            horizontal(row, c, &self.x, x0, out);
        }
    }

    /// The input rows `y0 .. y1` any output reads when one channel is resized horizontally
    /// first, which it is when they are fewer than the output's (an enlarged plane: a JPEG's
    /// chroma, most crops of small images), as the horizontal pass costs more per row than
    /// the vertical one; `None`: vertically first. The same on every CPU (the order changes the
    /// rounding between the passes).
    fn horizontal_first(&self, c: usize, dst_h: usize) -> Option<(usize, usize)> {
        let y0 = self.y.starts.iter().copied().min().unwrap_or(0) as usize;
        let y1 = self.y.starts.iter().copied().max().unwrap_or(0) as usize + self.y.taps;
        (c == 1 && y1 - y0 < dst_h).then_some((y0, y1))
    }

    /// [`Resampler::run`] for one channel, the horizontal pass first: input rows `y0 .. y1`
    /// (all that any output reads) to `dst_w` columns in the scratch image, then the vertical
    /// pass from it into `dst`.
    fn run_horizontal_first(
        &mut self,
        src: &[u8],
        src_w: usize,
        (y0, y1): (usize, usize),
        x0: usize,
        dst: &mut [u8],
        (dst_w, dst_h): (usize, usize),
    ) {
        let rows = y1 - y0;
        if self.temp.len() < rows * dst_w {
            self.temp.resize(rows * dst_w, 0);
        }
        let (x, temp) = (&self.x, &mut self.temp[..rows * dst_w]);
        // Each input row runs on to the end of `src`, so that the kernels' loads fit more often.
        let row = |y: usize| &src[(y0 + y) * src_w + x0..];
        if !horizontal1_rows(row, x, x0, &self.blocks, temp, dst_w) {
            for (y, out) in temp.chunks_exact_mut(dst_w).enumerate() {
                horizontal(row(y), 1, x, x0, out);
            }
        }
        debug_assert_eq!(dst.len(), dst_w * dst_h);
        vertical_rows(&self.temp[..rows * dst_w], dst_w, 0, &self.y, y0, dst, dst_w);
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

    /// The one-channel horizontal pass as [`avx2::horizontal1_avx2`] reads it ([`Blocks1`]);
    /// the scratch rows hold input columns `x0 ..`.
    #[cfg(target_arch = "x86_64")]
    fn pack_horizontal1(&mut self, x0: usize) {
        let x = &self.x;
        let b = &mut self.blocks;
        b.pairs = x.taps.div_ceil(2);
        b.loads.clear();
        b.shuffles.clear();
        b.weights.clear();
        // A lane's four windows must lie in the 16 bytes from its first window's start; when
        // some do not and every window fits 16 bytes, the wide kernel runs instead (one output
        // at a time, sixteen taps).
        let fits_at = |first: usize| {
            (0..2).all(|lane| {
                x.starts[first + 4 * lane + 3] as usize - x.starts[first + 4 * lane] as usize + 2 * b.pairs
                    <= 16
            })
        };
        let blocks = x.starts.len() / 8;
        b.wide = x.taps <= 16 && (b.pairs > 4 || !(0..blocks).all(|k| fits_at(8 * k)));
        if b.wide {
            for i in 0..x.starts.len() {
                let w = x.weights(i);
                b.weights.extend((0..16).map(|k| w.get(k).copied().unwrap_or(0)));
            }
            return;
        }
        let pairs = b.pairs;
        b.loads.resize(blocks, [u32::MAX; 2]);
        b.shuffles.resize(blocks * pairs * 32, -1);
        b.weights.resize(blocks * pairs * 16, 0);
        for block in 0..blocks {
            let first = 8 * block;
            let base = [x.starts[first] as usize, x.starts[first + 4] as usize];
            if !fits_at(first) {
                // Runs scalar: its shuffles and weights are not read.
                b.loads[block] = [u32::MAX; 2];
                continue;
            }
            b.loads[block] = [(base[0] - x0) as u32, (base[1] - x0) as u32];
            for j in 0..8 {
                let i = first + j;
                let d = (x.starts[i] as usize - base[j / 4]) as i8;
                let w = x.weights(i);
                for p in 0..pairs {
                    let at = (block * pairs + p) * 8 + j;
                    // Bytes d + 2p and d + 2p + 1 widened to i16 (-1: a zero byte, for the
                    // missing partner of an odd last tap, whose weight is zero too).
                    let second = 2 * p + 1 < w.len();
                    let d = d + 2 * p as i8;
                    b.shuffles[4 * at..4 * at + 4].copy_from_slice(&[
                        d,
                        -1,
                        if second { d + 1 } else { -1 },
                        -1,
                    ]);
                    b.weights[2 * at] = w[2 * p];
                    b.weights[2 * at + 1] = if second { w[2 * p + 1] } else { 0 };
                }
            }
        }
    }
}

/// The one-channel horizontal pass with AVX2 ([`avx2::horizontal1_avx2`], two rows a call):
/// output row `r` (`dst_w` bytes of `dst`) from `row(r)`, which holds input columns `x0 ..`.
/// `false` (nothing written) without AVX2, for the caller's scalar pass.
fn horizontal1_rows<'a>(
    row: impl Fn(usize) -> &'a [u8],
    x: &Axis,
    x0: usize,
    blocks: &Blocks1,
    dst: &mut [u8],
    dst_w: usize,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if crate::image::cpu::avx2() {
        let rows = dst.len() / dst_w;
        let mut pairs = dst.chunks_exact_mut(2 * dst_w);
        for (p, two) in pairs.by_ref().enumerate() {
            let (a, b) = two.split_at_mut(dst_w);
            // SAFETY: the CPU has AVX2, all the kernel asks.
            unsafe { avx2::horizontal1_avx2([row(2 * p), row(2 * p + 1)], x, x0, blocks, [a, b]) };
        }
        let last = pairs.into_remainder();
        if !last.is_empty() {
            // SAFETY: as above.
            unsafe { avx2::horizontal1_avx2([row(rows - 1)], x, x0, blocks, [last]) };
        }
        return true;
    }
    let _ = (row, x, x0, blocks, dst, dst_w);
    false
}

/// Rounds, shifts and clamps a fixed-point sum to a byte.
#[inline(always)]
fn to_u8(sum: i32) -> u8 {
    ((sum + HALF) >> BITS).clamp(0, 255) as u8
}

/// The vertical pass for every output row: row `r` of `out` (rows of `len` bytes) is
/// [`vertical`] with the window `y.starts[r] - sub ..` of `src`'s rows.
fn vertical_rows(src: &[u8], stride: usize, from: usize, y: &Axis, sub: usize, out: &mut [u8], len: usize) {
    #[cfg(target_arch = "x86_64")]
    if len >= 32 && crate::image::cpu::avx2() {
        // Every window's rows exist in src with columns from .. from + len (checked per row by
        // the kernel's caller contract, asserted here once for the last rows).
        let rows_needed = y.starts.iter().map(|&s| s as usize - sub + y.taps).max().unwrap_or(0);
        assert!(
            rows_needed == 0 || (rows_needed - 1) * stride + from + len <= src.len(),
            "vertical pass outside its input"
        );
        assert!(out.len() == y.starts.len() * len, "vertical pass output of the wrong size");
        // SAFETY: the CPU has AVX2; every window's rows (start − sub .. + taps) exist in src
        // with columns from .. from + len (asserted above), out holds one row of len per output.
        unsafe { avx2::vertical_plane(src, stride, from, y, sub, out, len) };
        return;
    }
    for (r, row) in out.chunks_exact_mut(len).enumerate() {
        vertical(src, stride, y.starts[r] as usize - sub, from, y.weights(r), row);
    }
}

/// One output row of the vertical pass, scalar (rows under 32 bytes, or no AVX2):
/// `out[j] = Σ_k w[k] · src[(start + k) · stride + from + j]`.
fn vertical(src: &[u8], stride: usize, start: usize, from: usize, w: &[i16], out: &mut [u8]) {
    for j in 0..out.len() {
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
    horizontal_from(row, c, x, x0, 0, out);
}

/// [`horizontal`] for the outputs `first ..` (`out` holds them).
fn horizontal_from(row: &[u8], c: usize, x: &Axis, x0: usize, first: usize, out: &mut [u8]) {
    for (px, i) in out.chunks_exact_mut(c).zip(first..) {
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
mod avx2;

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
        if let Some((y0, y1)) = r.horizontal_first(c, out.1) {
            let mut temp = vec![0u8; (y1 - y0) * out.0];
            for (y, t) in temp.chunks_exact_mut(out.0).enumerate() {
                horizontal(&src[(y0 + y) * w + x0..], 1, &r.x, x0, t);
            }
            let mut dst = vec![0u8; out.0 * out.1];
            for (row, d) in dst.chunks_exact_mut(out.0).enumerate() {
                for (j, v) in d.iter_mut().enumerate() {
                    let start = r.y.starts[row] as usize - y0;
                    let sum: i32 =
                        r.y.weights(row)
                            .iter()
                            .enumerate()
                            .map(|(k, &wk)| i32::from(wk) * i32::from(temp[(start + k) * out.0 + j]))
                            .sum();
                    *v = to_u8(sum);
                }
            }
            return dst;
        }
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

    /// The AVX2 kernels compute exactly the scalar kernels' bytes: three channels and one
    /// (whose kernel runs blocks of eight outputs, and the scalar kernel for blocks whose windows
    /// spread too far: the large downscales below).
    #[test]
    fn simd_equals_scalar() {
        #[cfg(target_arch = "x86_64")]
        if !crate::image::cpu::avx2() {
            return crate::skip_test("simd_equals_scalar", "this CPU has no AVX2");
        }
        for c in [3usize, 1] {
            for (w, h) in [(97usize, 61usize), (300, 200), (16, 16), (5, 3), (1000, 40)] {
                let src = picture(w, h, c);
                for filter in [Filter::CatmullRom, Filter::Bilinear, Filter::Box] {
                    for (crop, out) in [
                        ([0.0, 0.0, w as f64, h as f64], (160usize, 120usize)),
                        ([1.25, 0.5, w as f64 / 2.0, h as f64 / 3.0], (33, 47)),
                        ([0.0, 0.0, w as f64, h as f64], (7, 5)),
                        ([w as f64 * 0.25, h as f64 * 0.25, w as f64 / 1.7, h as f64 / 2.0], (w / 3 + 1, 20)),
                        ([0.0, 0.0, w as f64, h as f64], (w / 2 + 1, h / 2 + 1)),
                        // Box windows of 6: three tap pairs whose blocks spread too far (scalar).
                        ([0.0, 0.0, w as f64, h as f64], (w / 6 + 1, h / 6 + 1)),
                    ] {
                        let mut fast = vec![0u8; out.0 * out.1 * c];
                        resize(
                            &src,
                            (w as u32, h as u32),
                            c as u8,
                            crop,
                            &mut fast,
                            (out.0 as u32, out.1 as u32),
                            filter,
                        )
                        .unwrap();
                        let slow = scalar_resize(&src, (w, h), c, crop, out, filter);
                        assert_eq!(fast, slow, "{w}x{h}x{c} {filter:?} {crop:?} -> {out:?}");
                    }
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

    /// The kernels read and write only inside the slices they are given: every source and
    /// destination here ends where an inaccessible page begins, so a stray byte faults the test
    /// process; over sizes below and around the 16- and 32-byte vectors, both pass orders,
    /// enlarging and shrinking, one and three channels, and planes resized together.
    #[test]
    fn kernels_stay_inside_their_buffers() {
        use crate::image::guarded::Guarded;
        for c in [1usize, 3] {
            for (w, h) in
                [(1usize, 1usize), (3, 2), (7, 5), (15, 9), (16, 16), (17, 3), (33, 20), (61, 40), (300, 7)]
            {
                let src = Guarded::with(&picture(w, h, c));
                let (fw, fh) = (w as f64, h as f64);
                for (crop, out) in [
                    ([0.0, 0.0, fw, fh], (160usize, 120usize)),
                    ([fw * 0.3, fh * 0.2, fw * 0.7, fh * 0.8], (41, 33)),
                    ([0.0, 0.0, fw, fh], (w / 2 + 1, h / 2 + 1)),
                    ([fw * 0.5, 0.0, fw * 0.5, fh], (8, 17)),
                    ([0.0, fh * 0.5, fw, fh * 0.5], (31, 2)),
                ] {
                    for filter in [Filter::CatmullRom, Filter::Bilinear, Filter::Box] {
                        let mut dst = Guarded::with(&vec![0u8; out.0 * out.1 * c]);
                        resize(
                            src.as_ref(),
                            (w as u32, h as u32),
                            c as u8,
                            crop,
                            dst.as_mut(),
                            (out.0 as u32, out.1 as u32),
                            filter,
                        )
                        .unwrap();
                        assert_eq!(
                            dst.as_ref(),
                            scalar_resize(&picture(w, h, c), (w, h), c, crop, out, filter).as_slice()
                        );
                    }
                }
                if c == 1 {
                    // Three planes, the last two sharing their geometry (a JPEG's chroma).
                    let planes = [
                        Guarded::with(&picture(w, h, 1)),
                        Guarded::with(&picture(w, h, 1)),
                        Guarded::with(&picture(w, h, 1)),
                    ];
                    let crop = [0.0, 0.0, fw, fh];
                    let list: Vec<Plane<'_>> = planes
                        .iter()
                        .map(|p| Plane {
                            data: p.as_ref(),
                            size: (w as u32, h as u32),
                            crop,
                            filter: Filter::CatmullRom,
                        })
                        .collect();
                    let mut dst = Guarded::with(&vec![0u8; 3 * 37 * 23]);
                    resize_planes(&list, dst.as_mut(), (37, 23)).unwrap();
                }
            }
        }
    }

    /// The one-channel horizontal kernels' only safety condition is AVX2: they check the
    /// lengths they write by and the layout they read, so a caller's mistake (a short output
    /// row, the layout of another geometry) panics instead of writing or reading astray.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn one_channel_kernels_check_their_lengths() {
        if !crate::image::cpu::avx2() {
            return crate::skip_test("one_channel_kernels_check_their_lengths", "this CPU has no AVX2");
        }
        let row = picture(100, 1, 1);
        let mut r = Resampler::default();
        // 100 to 70 and 160 columns: the paired kernel; to 40: the wide one (10 taps).
        for (out, wide) in [(70u32, false), (160, false), (40, true)] {
            let g = |dst| Geometry {
                src: (100, 1),
                crop: [0.0, 0.0, 100.0, 1.0],
                dst: (dst, 1),
                filter: Filter::CatmullRom,
                channels: 1,
            };
            r.prepare(g(out));
            assert_eq!(r.blocks.wide, wide, "{out}");
            let x0 = r.columns().0;
            // Source and output end at an inaccessible page: a stray access faults the test.
            let src = crate::image::guarded::Guarded::with(&row[x0..]);
            let run = |blocks: &Blocks1, len: usize| {
                let mut dst = crate::image::guarded::Guarded::with(&vec![0u8; len]);
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    // SAFETY: the CPU has AVX2 (checked above); what is tested is that the
                    // kernel refuses the wrong lengths.
                    unsafe { avx2::horizontal1_avx2([src.as_ref()], &r.x, x0, blocks, [dst.as_mut()]) }
                }))
                .is_ok()
            };
            assert!(run(&r.blocks, out as usize), "{out}: the right lengths run");
            assert!(!run(&r.blocks, out as usize - 1), "{out}: a short output row panics");
            // The layout of another geometry of the same kernel (other output counts).
            let mut other = Resampler::default();
            other.prepare(g(if wide { out - 10 } else { out + 24 }));
            assert_eq!(other.blocks.wide, wide);
            assert!(!run(&other.blocks, out as usize), "{out}: a foreign layout panics");
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
