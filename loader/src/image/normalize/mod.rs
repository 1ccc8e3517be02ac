//! [`NormalizeImage`]'s kernels: a prepared normalisation ([`Prepared`]) writes an RGB image, or
//! the resized Y Cb Cr / grey planes of a crop decoder, as floats into the batch slot. The same
//! values every way: AVX-512 VBMI table lookups ([`vbmi`], CHW or HWC), AVX2 + F16C arithmetic
//! ([`avx2`]), or the lookup table ([`write_with`]); [`crate::image::cpu`] picks.

use crate::image::codec::color::{self, Source};
use crate::image::ops::{flip_horizontal, FloatType, Layout, NormalizeImage, Table};

#[cfg(target_arch = "x86_64")]
mod avx2;
mod vbmi;

use vbmi::{byte_tables, ByteTables};

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
    /// `flip` (a fused `RandomHorizontalFlip`): as table lookups with AVX-512 VBMI, eight
    /// values at a time with AVX2 and F16C, otherwise through the lookup table (the same
    /// values every way). `src` is scratch: it may be left flipped.
    pub(crate) fn write(&self, src: &mut [u8], (h, w): (usize, usize), flip: bool, dst: &mut [u8]) {
        if vbmi::write(Source::Rgb(src), (h, w), &self.bytes, self.n.elem().size(), self.n.layout, flip, dst)
        {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if avx2::write(&self.n, self.recip.as_ref(), src, (h, w), flip, dst) {
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
    /// crop decoder's planar path hands over ([`crate::image::decoders::crop_resize_planes`]). The
    /// values are exactly those of converting the planes to RGB `u8` ([`color::to_rgb`]) and
    /// normalising that; they run as one pass with AVX-512 VBMI (CHW or HWC) or AVX2 + F16C
    /// (CHW), otherwise through `image` (this thread's HWC scratch).
    pub(crate) fn write_planes(
        &self,
        src: Source<'_>,
        (h, w): (usize, usize),
        flip: bool,
        image: &mut Vec<u8>,
        dst: &mut [u8],
    ) {
        if vbmi::write(src, (h, w), &self.bytes, self.n.elem().size(), self.n.layout, flip, dst) {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if avx2::write_planes(&self.n, self.recip.as_ref(), src, (h, w), flip, dst) {
            return;
        }
        image.resize(3 * h * w, 0);
        color::to_rgb(src, image);
        self.write(image, (h, w), flip, dst);
    }
}

/// [`NormalizeImage::write`] for `N`-byte output values: fixed-size copies, no division per
/// value (this runs for every value of every image).
pub(crate) fn write_with<const N: usize>(
    t: &Table,
    layout: Layout,
    src: &[u8],
    pixels: usize,
    dst: &mut [u8],
) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2/F16C paths write exactly what the lookup tables write, flipped or not (every
    /// value; widths that are and are not multiples of 8; both types and layouts; unusual means
    /// and deviations), and decline what they cannot do.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn simd_normalisation_equals_the_tables() {
        if !(crate::image::cpu::avx2() && crate::image::cpu::f16c()) {
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
                            assert!(avx2::write(&n, None, &mut src[..len].to_vec(), (h, w), flip, &mut fast));
                            if let Some(r) = n.reciprocals() {
                                let mut mul = vec![0u8; len * size];
                                assert!(avx2::write(
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
                    assert!(!avx2::write(&n, None, &mut src[..6].to_vec(), (1, 2), false, short));
                    assert!(!avx2::write(
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
                            if avx2::write_planes(&norm, recip.as_ref(), src, (h, w), flip, &mut avx2) {
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
}
