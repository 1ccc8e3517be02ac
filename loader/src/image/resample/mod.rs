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
//!
//! This file runs the passes; `weights.rs` computes the fixed-point weights, `layout.rs` lays
//! them out for the AVX2 kernels, `scalar.rs` and `avx2.rs` are the kernels.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod layout;
mod scalar;
#[cfg(test)]
mod tests;
mod weights;

use std::cell::RefCell;

use crate::error::{Error, Result};
use layout::Blocks1;
use scalar::{horizontal, vertical};
use weights::Axis;
pub(crate) use weights::Filter;

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
                3 => layout::pack3(&self.x, &mut self.packed),
                1 => {
                    let x0 = self.columns().0;
                    self.blocks.pack(&self.x, x0);
                }
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
