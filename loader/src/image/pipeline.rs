//! [`ImagePipeline`]: an image decoder, then per-sample operations, then optionally
//! [`NormalizeImage`], run as one [`FieldDecoder`] on the worker thread that decodes the sample.
//!
//! ```
//! use beton_loader::image::{
//!     Cutout, ImagePipeline, Layout, NormalizeImage, RandomResizedCropRGBImageDecoder,
//!     RandomHorizontalFlip,
//! };
//! let pipeline = ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((224, 224)))
//!     .then(RandomHorizontalFlip::default())
//!     .then(Cutout { crop_size: 16, fill: [0, 0, 0] })
//!     .normalize(NormalizeImage::imagenet().layout(Layout::Chw));
//! // loader_builder.decoder("image", std::sync::Arc::new(pipeline))
//! # let _ = pipeline;
//! ```
//!
//! Without normalisation the decoder writes into the batch slot and the operations work there;
//! with it, the `u8` image lives in a per-thread scratch buffer and only the floats are written
//! to the slot, through a per-channel lookup table (256 entries: one multiply-add per value is
//! done once per pipeline, not per pixel).

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, RwLock};

use beton_storage::{Dataset, Value};

use super::color::{self, Source};
use super::decoders::{CenterCropRGBImageDecoder, PlanarDecode, RandomResizedCropRGBImageDecoder};
use super::lut::{self, byte_tables, ByteTables};
use super::ops::{flip_horizontal, ImageMut, ImageOp};
use super::rng::SampleRng;
use crate::decode::{ColumnSpec, ElemType, FieldDecoder, SampleContext};
use crate::error::{Error, Result};

/// Float type of [`NormalizeImage`]'s output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatType {
    /// `f32`.
    F32,
    /// IEEE half (`f16`), rounded to nearest even.
    F16,
}

/// Memory layout of [`NormalizeImage`]'s output, per sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[3, h, w]` (PyTorch's default).
    Chw,
    /// `[h, w, 3]` (channels last, what FFCV's `ToTorchImage(channels_last=True)` hands out).
    Hwc,
}

/// FFCV's `NormalizeImage(mean, std, type)`: `(x − mean) / std` per channel, with `mean` and
/// `std` in pixel units (0–255, e.g. ImageNet's `[0.485, 0.456, 0.406] · 255`).
#[derive(Debug, Clone, Copy)]
pub struct NormalizeImage {
    /// Per-channel mean, pixel units.
    pub mean: [f32; 3],
    /// Per-channel standard deviation, pixel units.
    pub std: [f32; 3],
    /// Output float type.
    pub dtype: FloatType,
    /// Output layout.
    pub layout: Layout,
}

impl NormalizeImage {
    /// `(x − mean) / std` to `f32`, CHW.
    pub fn new(mean: [f32; 3], std: [f32; 3]) -> Self {
        NormalizeImage { mean, std, dtype: FloatType::F32, layout: Layout::Chw }
    }

    /// ImageNet's mean and std (FFCV's examples' `IMAGENET_MEAN`, `IMAGENET_STD` × 255).
    pub fn imagenet() -> Self {
        Self::new(
            [0.485 * 255.0, 0.456 * 255.0, 0.406 * 255.0],
            [0.229 * 255.0, 0.224 * 255.0, 0.225 * 255.0],
        )
    }

    /// Sets the output float type.
    pub fn dtype(mut self, dtype: FloatType) -> Self {
        self.dtype = dtype;
        self
    }

    /// Sets the output layout.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    fn elem(&self) -> ElemType {
        match self.dtype {
            FloatType::F32 => ElemType::F32,
            FloatType::F16 => ElemType::F16,
        }
    }

    /// `1 / std` per channel when `(v − mean) · (1 / std)` gives exactly the output value of
    /// `(v − mean) / std` for every pixel value `v` and channel (bit for bit in `f32`; after
    /// rounding for `f16`, where a last-bit difference in `f32` rarely survives): a multiply then
    /// replaces the division, which costs about ten times as much. `None` otherwise.
    pub(crate) fn reciprocals(&self) -> Option<[f32; 3]> {
        let inv = self.std.map(|s| 1.0 / s);
        let exact = (0..3).all(|c| {
            (0..256).all(|v| {
                let x = v as f32 - self.mean[c];
                let (div, mul) = (x / self.std[c], x * inv[c]);
                match self.dtype {
                    FloatType::F32 => div.to_bits() == mul.to_bits(),
                    FloatType::F16 => f32_to_f16(div) == f32_to_f16(mul),
                }
            })
        });
        exact.then_some(inv)
    }

    /// The little-endian bytes of the output value for each channel and pixel value.
    pub(crate) fn table(&self) -> Table {
        let mut t = [[[0u8; 4]; 256]; 3];
        for (c, row) in t.iter_mut().enumerate() {
            for (v, cell) in row.iter_mut().enumerate() {
                let x = (v as f32 - self.mean[c]) / self.std[c];
                *cell = match self.dtype {
                    FloatType::F32 => x.to_le_bytes(),
                    FloatType::F16 => {
                        let [a, b] = f32_to_f16(x).to_le_bytes();
                        [a, b, 0, 0]
                    }
                };
            }
        }
        t
    }
}

/// A [`NormalizeImage`] ready to run: its lookup tables (by value, and by output byte for the
/// AVX-512 kernels) and [`NormalizeImage::reciprocals`], computed once per pipeline.
pub(crate) struct Prepared {
    pub(crate) n: NormalizeImage,
    table: Box<Table>,
    bytes: Box<ByteTables>,
    recip: Option<[f32; 3]>,
}

impl Prepared {
    pub(crate) fn new(n: NormalizeImage) -> Prepared {
        let table = Box::new(n.table());
        let bytes = byte_tables(&table);
        Prepared { n, table, bytes, recip: n.reciprocals() }
    }

    /// Writes the normalised `h × w` RGB image `src` into `dst`, mirrored left to right when
    /// `flip` (a fused `RandomHorizontalFlip`): as table lookups with AVX-512 VBMI (CHW), eight
    /// values at a time with AVX2 and F16C, otherwise through the lookup table (the same
    /// values every way). `src` is scratch: it may be left flipped.
    pub(crate) fn write(&self, src: &mut [u8], (h, w): (usize, usize), flip: bool, dst: &mut [u8]) {
        if self.n.layout == Layout::Chw
            && lut::chw(Source::Rgb(src), (h, w), &self.bytes, self.n.elem().size(), flip, dst)
        {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if simd::write(&self.n, self.recip.as_ref(), src, (h, w), flip, dst) {
            return;
        }
        if flip {
            flip_horizontal(src, w);
        }
        match self.n.dtype {
            FloatType::F16 => write_with::<2>(&self.table, self.n.layout, src, h * w, dst),
            FloatType::F32 => write_with::<4>(&self.table, self.n.layout, src, h * w, dst),
        }
    }

    /// [`Prepared::write`] of the image whose resized planes (Y Cb Cr or grey, `h × w` each) a
    /// crop decoder's planar path hands over ([`super::decoders::crop_resize_planes`]). The
    /// values are exactly those of converting the planes to RGB `u8` ([`color::to_rgb`]) and
    /// normalising that; for a CHW layout the two run as one pass (AVX-512 VBMI or AVX2 +
    /// F16C), otherwise through `image` (this thread's HWC scratch).
    pub(crate) fn write_planes(
        &self,
        src: Source<'_>,
        (h, w): (usize, usize),
        flip: bool,
        image: &mut Vec<u8>,
        dst: &mut [u8],
    ) {
        if self.n.layout == Layout::Chw && lut::chw(src, (h, w), &self.bytes, self.n.elem().size(), flip, dst)
        {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if simd::write_planes(&self.n, self.recip.as_ref(), src, (h, w), flip, dst) {
            return;
        }
        image.resize(3 * h * w, 0);
        color::to_rgb(src, image);
        self.write(image, (h, w), flip, dst);
    }
}

/// [`NormalizeImage::write`] for `N`-byte output values: fixed-size copies, no division per
/// value (this runs for every value of every image).
fn write_with<const N: usize>(t: &Table, layout: Layout, src: &[u8], pixels: usize, dst: &mut [u8]) {
    if pixels == 0 {
        return;
    }
    match layout {
        Layout::Hwc => {
            for (px, out) in src.chunks_exact(3).zip(dst.chunks_exact_mut(3 * N)) {
                let (r, rest) = out.split_at_mut(N);
                let (g, b) = rest.split_at_mut(N);
                r.copy_from_slice(&t[0][usize::from(px[0])][..N]);
                g.copy_from_slice(&t[1][usize::from(px[1])][..N]);
                b.copy_from_slice(&t[2][usize::from(px[2])][..N]);
            }
        }
        Layout::Chw => {
            for (c, (table, out)) in t.iter().zip(dst.chunks_exact_mut(pixels * N)).enumerate() {
                for (px, o) in src.chunks_exact(3).zip(out.chunks_exact_mut(N)) {
                    o.copy_from_slice(&table[usize::from(px[c])][..N]);
                }
            }
        }
    }
}

/// HWC normalisation with AVX2 + F16C: `(v - mean[c]) / std[c]` in `f32` (the same IEEE
/// operations as the lookup table, so the same values), then `f16` with round-to-nearest-even
/// (`vcvtps2ph`, as [`f32_to_f16`]).
#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::{f32_to_f16, flip_horizontal, Layout, NormalizeImage, Source};

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
            || !is_x86_feature_detected!("avx2")
            || !is_x86_feature_detected!("f16c")
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
            || !is_x86_feature_detected!("avx2")
            || !is_x86_feature_detected!("f16c")
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
    /// sixteen pixels a round, converted to R, G, B bytes as [`crate::image::color`] does, then
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
                        crate::image::color::simd::rgb16(at(rows[0]), at(rows[1]), at(rows[2]))
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
                    crate::image::color::pixel(rows[0][from], rows[1][from], rows[2][from])
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
}

/// Output bytes (little-endian, `f16` in the first two) per channel and pixel value.
pub(crate) type Table = [[[u8; 4]; 256]; 3];

/// `f32` to IEEE half, round to nearest even; overflow to infinity, NaN stays NaN.
pub(crate) fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let round = |v: u32, shift: u32| {
        let (q, rem, half) = (v >> shift, v & ((1 << shift) - 1), 1 << (shift - 1));
        if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal: units of 2^-24.
        return sign | round(man | 0x80_0000, (14 - e) as u32) as u16;
    }
    // A mantissa carry rounds up into the exponent (and to infinity past 65504), as it should.
    sign | round(((e as u32) << 23) | man, 13) as u16
}

/// The output size each epoch's `columns` declared, for `decode` (which only sees slot bytes).
type Sizes = RwLock<Vec<(u64, (usize, usize))>>;

thread_local! {
    /// The `u8` image of a normalising pipeline before normalisation.
    static IMAGE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// An image decoder followed by per-sample operations and an optional normalisation, itself a
/// [`FieldDecoder`]. Operation `k` draws from [`SampleRng::for_op`]`(ctx, k)`.
pub struct ImagePipeline {
    decoder: Arc<dyn FieldDecoder>,
    /// The decoder's planar path, when it is a crop decoder.
    planar: Option<Arc<dyn PlanarDecode>>,
    ops: Vec<Arc<dyn ImageOp>>,
    /// The normalisation, prepared.
    normalize: Option<Prepared>,
    sizes: Sizes,
}

impl std::fmt::Debug for ImagePipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImagePipeline")
            .field("ops", &self.ops)
            .field("normalize", &self.normalize.as_ref().map(|p| p.n))
            .finish_non_exhaustive()
    }
}

impl ImagePipeline {
    /// A pipeline over `decoder`, which must write one `u8` column `[h, w, 3]` (the RGB image
    /// decoders of this module).
    pub fn new(decoder: impl FieldDecoder + 'static) -> Self {
        // The crop decoders also decode to planes; one object serves as both.
        let decoder = Arc::new(decoder);
        let any: Arc<dyn Any + Send + Sync> = decoder.clone();
        let planar: Option<Arc<dyn PlanarDecode>> = match any.downcast::<RandomResizedCropRGBImageDecoder>() {
            Ok(d) => Some(d),
            Err(any) => any.downcast::<CenterCropRGBImageDecoder>().ok().map(|d| d as _),
        };
        ImagePipeline { decoder, planar, ops: Vec::new(), normalize: None, sizes: Sizes::default() }
    }

    /// Appends an operation.
    pub fn then(mut self, op: impl ImageOp + 'static) -> Self {
        self.ops.push(Arc::new(op));
        self
    }

    /// Appends an operation already shared (an operation object built once and used by several
    /// pipelines, as the Python bindings do).
    pub fn then_shared(mut self, op: Arc<dyn ImageOp>) -> Self {
        self.ops.push(op);
        self
    }

    /// Ends the pipeline with a normalisation to floats.
    pub fn normalize(mut self, n: NormalizeImage) -> Self {
        self.normalize = Some(Prepared::new(n));
        self
    }

    fn size(&self, epoch: u64) -> Result<(usize, usize)> {
        let sizes = self.sizes.read().map_err(|_| Error::Decode("image pipeline lock poisoned".into()))?;
        sizes
            .iter()
            .find(|(e, _)| *e == epoch)
            .map(|&(_, s)| s)
            .ok_or_else(|| Error::Decode(format!("image pipeline: no columns declared for epoch {epoch}")))
    }

    /// Runs the first `n` operations on `pixels`.
    fn run_ops(
        &self,
        n: usize,
        pixels: &mut [u8],
        (h, w): (usize, usize),
        ctx: &SampleContext,
    ) -> Result<()> {
        let mut image = ImageMut::new(pixels, h, w)?;
        for (k, op) in self.ops.iter().enumerate().take(n) {
            op.apply(&mut image, &mut SampleRng::for_op(ctx, k as u64));
        }
        Ok(())
    }

    /// How many operations run on the `u8` image before a normalisation, and whether the
    /// horizontal flips after them (folded into the normalisation's writes) mirror this sample:
    /// each draws from its own stream as its `apply` would, so the pixels are the same.
    fn split_flips(&self, ctx: &SampleContext) -> (usize, bool) {
        let kept = self.ops.iter().rposition(|op| op.horizontal_flip().is_none()).map_or(0, |k| k + 1);
        let flip = self.ops.iter().enumerate().skip(kept).fold(false, |flip, (k, op)| {
            let p = op.horizontal_flip().unwrap_or(0.0);
            flip ^ SampleRng::for_op(ctx, k as u64).chance(p)
        });
        (kept, flip)
    }
}

impl FieldDecoder for ImagePipeline {
    fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> Result<Vec<ColumnSpec>> {
        self.columns_of(&crate::decode::FieldData::of_file(ds, field), epoch)
    }

    fn columns_of(&self, field: &crate::decode::FieldData<'_>, epoch: u64) -> Result<Vec<ColumnSpec>> {
        let mut cols = self.decoder.columns_of(field, epoch)?;
        let (h, w) = match cols.as_slice() {
            [c] if c.elem == ElemType::U8 && c.shape.len() == 3 && c.shape[2] == 3 => {
                (c.shape[0], c.shape[1])
            }
            _ => {
                return Err(Error::InvalidArgument {
                    what: "ImagePipeline decoder".into(),
                    why: format!("it must write one u8 [h, w, 3] column, not {cols:?}"),
                })
            }
        };
        {
            let mut sizes =
                self.sizes.write().map_err(|_| Error::Decode("image pipeline lock poisoned".into()))?;
            sizes.retain(|(e, _)| *e != epoch);
            sizes.push((epoch, (h, w)));
            // Epochs run one after another; a few are kept for epochs still draining.
            if sizes.len() > 8 {
                sizes.remove(0);
            }
        }
        if let Some(Prepared { n, .. }) = &self.normalize {
            cols[0].elem = n.elem();
            cols[0].shape = match n.layout {
                Layout::Chw => vec![3, h, w],
                Layout::Hwc => vec![h, w, 3],
            };
        }
        Ok(cols)
    }

    fn decode(&self, value: Value<'_>, ctx: &SampleContext, out: &mut [&mut [u8]]) -> Result<()> {
        let size = self.size(ctx.epoch)?;
        let Some(prepared) = &self.normalize else {
            self.decoder.decode(value, ctx, out)?;
            return match out.first_mut() {
                Some(pixels) => self.run_ops(self.ops.len(), pixels, size, ctx),
                None => Err(Error::Decode("no output column".into())),
            };
        };
        let want = size.0 * size.1 * 3 * prepared.n.elem().size();
        let dst = match out.first_mut() {
            Some(dst) if dst.len() == want => dst,
            _ => return Err(Error::Decode("output slot of the wrong size".into())),
        };
        let (kept, flip) = self.split_flips(ctx);
        IMAGE.with(|cell| {
            let image = &mut *cell.borrow_mut();
            // Only flips between the decoder and the normalisation: the decoder's planes go
            // straight to it.
            if let Some(planar) = self.planar.as_ref().filter(|_| kept == 0) {
                let flip = flip ^ planar.flips(ctx);
                let mut finish = |src: Source<'_>| prepared.write_planes(src, size, flip, image, dst);
                if planar.decode_planes(value, ctx, &mut finish)? {
                    return Ok(());
                }
            }
            image.resize(size.0 * size.1 * 3, 0);
            self.decoder.decode(value, ctx, &mut [image.as_mut_slice()])?;
            self.run_ops(kept, image, size, ctx)?;
            prepared.write(image, size, flip, dst);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2/F16C paths write exactly what the lookup tables write, flipped or not (every
    /// value; widths that are and are not multiples of 8; both types and layouts; unusual means
    /// and deviations), and decline what they cannot do.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn simd_normalisation_equals_the_tables() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c")) {
            crate::skip_test("simd_normalisation_equals_the_tables", "this CPU has no AVX2 + F16C");
            return;
        }
        let src: Vec<u8> = (0..3 * 40 * 41).map(|i| ((i * 7919) % 256) as u8).collect();
        for (mean, std) in [
            ([123.675, 116.28, 103.53], [58.395, 57.12, 57.375]),
            ([0.0, 255.0, 0.5], [1.0, 0.003, 1e-3]),
            ([-1e4, 3.3, 200.0], [7.0, 1e5, 0.1]),
        ] {
            for dtype in [FloatType::F16, FloatType::F32] {
                for layout in [Layout::Hwc, Layout::Chw] {
                    let n = NormalizeImage::new(mean, std).dtype(dtype).layout(layout);
                    let size = n.elem().size();
                    for (h, w) in [(40, 41), (41, 40), (3, 8), (2, 16), (5, 7), (1, 1), (0, 9), (9, 0)] {
                        for flip in [false, true] {
                            let len = h * w * 3;
                            let mut fast = vec![0u8; len * size];
                            assert!(simd::write(&n, None, &mut src[..len].to_vec(), (h, w), flip, &mut fast));
                            if let Some(r) = n.reciprocals() {
                                let mut mul = vec![0u8; len * size];
                                assert!(simd::write(
                                    &n,
                                    Some(&r),
                                    &mut src[..len].to_vec(),
                                    (h, w),
                                    flip,
                                    &mut mul
                                ));
                                assert_eq!(mul, fast, "multiply path {mean:?} {std:?} {dtype:?} {layout:?}");
                            }
                            let mut slow = vec![0u8; len * size];
                            let mut pixels = src[..len].to_vec();
                            if flip {
                                flip_horizontal(&mut pixels, w);
                            }
                            write_with_table(&n, &pixels, &mut slow);
                            assert_eq!(
                                fast, slow,
                                "{mean:?} {std:?} {dtype:?} {layout:?} {h}x{w} flip {flip}"
                            );
                        }
                    }
                    let short = &mut vec![0u8; 6 * size + 1];
                    assert!(!simd::write(&n, None, &mut src[..6].to_vec(), (1, 2), false, short));
                    assert!(!simd::write(
                        &n,
                        None,
                        &mut src[..6].to_vec(),
                        (1, 3),
                        false,
                        &mut vec![0u8; 9 * size]
                    ));
                }
            }
        }
    }

    /// The table path, whatever the CPU.
    #[cfg(target_arch = "x86_64")]
    fn write_with_table(n: &NormalizeImage, src: &[u8], dst: &mut [u8]) {
        let t = n.table();
        match n.dtype {
            FloatType::F16 => write_with::<2>(&t, n.layout, src, src.len() / 3, dst),
            FloatType::F32 => write_with::<4>(&t, n.layout, src, src.len() / 3, dst),
        }
    }

    /// Normalising planes (Y Cb Cr or grey) equals converting them to RGB bytes, then the table
    /// path (flip: mirrored), for every layout, type and width (the SIMD blocks of 16 and the
    /// tail), with the reciprocal and with the division.
    #[test]
    fn normalising_planes_equals_converting_then_normalising() {
        for (h, w) in [(5usize, 37usize), (3, 16), (2, 7), (4, 160)] {
            let n = h * w;
            let planes: Vec<u8> = (0..3 * n).map(|i| ((i * 7919 + i / 3 * 101) % 256) as u8).collect();
            for count in [3usize, 1] {
                let src = Source::planes(count, &planes[..count * n]);
                let mut rgb = vec![0u8; 3 * n];
                color::to_rgb(src, &mut rgb);
                for (dtype, layout, std) in [
                    (FloatType::F16, Layout::Chw, None),
                    (FloatType::F32, Layout::Chw, None),
                    (FloatType::F16, Layout::Hwc, None),
                    (FloatType::F16, Layout::Chw, Some([3.0, 7.0, 11.0])),
                ] {
                    let mut norm = NormalizeImage::imagenet().dtype(dtype).layout(layout);
                    if let Some(s) = std {
                        norm.std = s;
                    }
                    let (t, recip) = (norm.table(), norm.reciprocals());
                    for flip in [false, true] {
                        let size = if dtype == FloatType::F16 { 2 } else { 4 };
                        // What this CPU runs (the AVX-512 lookups where it has them)...
                        let mut got = vec![0u8; 3 * n * size];
                        let mut image = Vec::new();
                        Prepared::new(norm).write_planes(src, (h, w), flip, &mut image, &mut got);
                        // ... and the AVX2 kernel (CHW only), where the CPU has it.
                        #[cfg(target_arch = "x86_64")]
                        {
                            let mut avx2 = vec![0u8; 3 * n * size];
                            if simd::write_planes(&norm, recip.as_ref(), src, (h, w), flip, &mut avx2) {
                                assert_eq!(
                                    avx2, got,
                                    "AVX2 {h}x{w} count {count} {dtype:?} {layout:?} flip {flip}"
                                );
                            }
                        }
                        let mut src = rgb.clone();
                        if flip {
                            flip_horizontal(&mut src, w);
                        }
                        let mut want = vec![0u8; 3 * n * size];
                        match dtype {
                            FloatType::F16 => write_with::<2>(&t, layout, &src, n, &mut want),
                            FloatType::F32 => write_with::<4>(&t, layout, &src, n, &mut want),
                        }
                        assert_eq!(
                            got, want,
                            "{h}x{w} count {count} {dtype:?} {layout:?} flip {flip} std {std:?}"
                        );
                    }
                }
            }
        }
    }

    /// The multiply is taken only where it is exact: ImageNet's f16 (FFCV's usual output) takes
    /// it; f32, where it would change some values' last bit, keeps the division.
    #[test]
    fn reciprocals_only_where_exact() {
        let f16 = NormalizeImage::imagenet().dtype(FloatType::F16);
        assert!(f16.reciprocals().is_some());
        let f32n = NormalizeImage::imagenet().dtype(FloatType::F32);
        assert!(f32n.reciprocals().is_none());
        let differs = (0..3).any(|c| {
            (0..256).any(|v| {
                let x = v as f32 - f32n.mean[c];
                (x / f32n.std[c]).to_bits() != (x * (1.0 / f32n.std[c])).to_bits()
            })
        });
        assert!(differs, "the check refused a multiply that was exact");
    }

    /// Horizontal flips at the end of a pipeline are folded into the normalisation: the output
    /// equals running every operation on the `u8` image, then normalising, for each sample.
    #[test]
    fn folded_flips_equal_running_the_ops() {
        use crate::image::{Cutout, RandomHorizontalFlip};
        let img: Vec<u8> = (0..3 * 12 * 19).map(|i| ((i * 31) % 256) as u8).collect();
        let pipelines: Vec<Vec<Arc<dyn ImageOp>>> = vec![
            vec![Arc::new(RandomHorizontalFlip::default())],
            vec![
                Arc::new(RandomHorizontalFlip { flip_prob: 0.7 }),
                Arc::new(RandomHorizontalFlip::default()),
            ],
            vec![
                Arc::new(RandomHorizontalFlip::default()),
                Arc::new(Cutout { crop_size: 5, fill: [1, 2, 3] }),
                Arc::new(RandomHorizontalFlip { flip_prob: 0.3 }),
            ],
        ];
        for layout in [Layout::Chw, Layout::Hwc] {
            let n = NormalizeImage::imagenet().layout(layout).dtype(FloatType::F16);
            for ops in &pipelines {
                let p = ImagePipeline {
                    ops: ops.clone(),
                    ..ImagePipeline::new(super::super::SimpleRGBImageDecoder)
                };
                let mut flipped = 0;
                for index in 0..64 {
                    let ctx = SampleContext { index, seed: 3, epoch: 1, position: 0 };
                    let mut want_px = img.clone();
                    p.run_ops(ops.len(), &mut want_px, (12, 19), &ctx).unwrap();
                    let mut want = vec![0u8; img.len() * 2];
                    let t = n.table();
                    write_with::<2>(&t, n.layout, &want_px, 12 * 19, &mut want);
                    let (kept, flip) = p.split_flips(&ctx);
                    let mut got_px = img.clone();
                    p.run_ops(kept, &mut got_px, (12, 19), &ctx).unwrap();
                    let mut got = vec![0u8; img.len() * 2];
                    Prepared::new(n).write(&mut got_px, (12, 19), flip, &mut got);
                    assert_eq!(got, want, "{layout:?} {ops:?} sample {index}");
                    flipped += usize::from(flip);
                }
                assert!((8..56).contains(&flipped), "{flipped} of 64 flipped");
            }
        }
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        let cases: [(f32, u16); 12] = [
            (0.0, 0x0000),
            (-0.0, 0x8000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (65520.0, 0x7c00),
            (1e9, 0x7c00),
            (0.1, 0x2e66),
            (6.103_515_6e-5, 0x0400),
            (5.960_464_5e-8, 0x0001),
            (2.0e-8, 0x0000),
            (1.0 + 1.0 / 2048.0, 0x3c00), // halfway: to even
        ];
        for (x, want) in cases {
            assert_eq!(f32_to_f16(x), want, "{x}");
        }
        assert_eq!(f32_to_f16(f32::INFINITY), 0x7c00);
        assert_eq!(f32_to_f16(f32::NAN) & 0x7e00, 0x7e00);
    }
}
