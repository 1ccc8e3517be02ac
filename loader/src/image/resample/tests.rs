//! The resampler against its promises: windows inside the input, weights summing to one, the
//! AVX2 kernels equal to the scalar ones, buffers never overrun.

use super::weights::{floor, to_u8, ONE};
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
            let sum: i32 =
                r.y.weights(row)
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
    use beton_testkit::Guarded;
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
        let src = beton_testkit::Guarded::with(&row[x0..]);
        let run = |blocks: &Blocks1, len: usize| {
            let mut dst = beton_testkit::Guarded::with(&vec![0u8; len]);
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
    for crop in [[-1.0, 0.0, 5.0, 5.0], [6.0, 0.0, 5.0, 5.0], [0.0, 0.0, 0.0, 5.0], [0.0, 0.0, 5.0, 11.0]] {
        assert!(resize(&src, (10, 10), 3, crop, &mut dst, (5, 5), Filter::Box).is_err(), "{crop:?}");
    }
    assert!(resize(&src, (10, 9), 3, [0.0, 0.0, 5.0, 5.0], &mut dst, (5, 5), Filter::Box).is_err());
    assert!(resize(&src, (10, 10), 3, [0.0, 0.0, 5.0, 5.0], &mut dst, (5, 4), Filter::Box).is_err());
    assert!(resize(&src, (10, 10), 2, [0.0, 0.0, 5.0, 5.0], &mut dst, (5, 5), Filter::Box).is_err());
}
