//! Float32 dot products of many rows with a few query vectors, the hot loop of exact nearest
//! neighbours and near-duplicate search over float32 vector columns: each row is read once for
//! its norm and up to three query vectors (then once per four more), with independent chains of
//! 8-lane fused multiply-adds; callers pass blocks of rows small enough to stay in L1.
//!
//! The results are *approximate* (float32 sums, fused multiply-adds where the CPU has them):
//! callers bound their error with [`error_bound`] and recompute the candidates they keep with
//! the exact float64 kernel (`functions::Metric`), so what users see does not depend on the
//! CPU. The AVX2 + FMA path is chosen at run time; other CPUs run the same code without FMA.

/// Elements summed per accumulator step (one AVX2 register of float32).
const LANES: usize = 8;

/// `a * b + c`, fused when `FMA` (the caller runs with the `fma` target feature).
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Accumulators per row in the portable loop: independent chains of [`LANES`] sums.
const CHAINS: usize = 4;

/// The dot product of `x` and `q` (of one length).
#[inline(always)]
fn dot<const FMA: bool>(x: &[f32], q: &[f32]) -> f32 {
    let mut acc = [[0.0f32; LANES]; CHAINS];
    let (cx, cq) = (x.chunks_exact(LANES * CHAINS), q.chunks_exact(LANES * CHAINS));
    let (rx, rq) = (cx.remainder(), cq.remainder());
    for (a, b) in cx.zip(cq) {
        for c in 0..CHAINS {
            for l in 0..LANES {
                acc[c][l] = madd::<FMA>(a[c * LANES + l], b[c * LANES + l], acc[c][l]);
            }
        }
    }
    let (ex, eq) = (rx.chunks_exact(LANES), rq.chunks_exact(LANES));
    let (tx, tq) = (ex.remainder(), eq.remainder());
    for (a, b) in ex.zip(eq) {
        for l in 0..LANES {
            acc[0][l] = madd::<FMA>(a[l], b[l], acc[0][l]);
        }
    }
    let mut sum = [0.0f32; LANES];
    for c in acc {
        for l in 0..LANES {
            sum[l] += c[l];
        }
    }
    let mut s = sum.iter().sum::<f32>();
    for (a, b) in tx.iter().zip(tq) {
        s = madd::<FMA>(*a, *b, s);
    }
    s
}

/// For each of `rows` (each of the query vectors' length): its squared norm into `norms[r]`
/// and its dot product with each query vector into `dots[r * queries.len() + j]`.
#[inline(always)]
fn block_with<const FMA: bool>(rows: &[&[f32]], queries: &[&[f32]], norms: &mut [f32], dots: &mut [f32]) {
    let m = queries.len();
    for (r, x) in rows.iter().enumerate() {
        norms[r] = dot::<FMA>(x, x);
        for (j, q) in queries.iter().enumerate() {
            dots[r * m + j] = dot::<FMA>(x, q);
        }
    }
}

/// The dot products of `x` with each of `ys` (all of one length) in AVX2 registers, `x` read
/// once for all of them (two chains each: eight accumulators for four). The compiler, left to
/// itself, vectorises the portable loop in 128-bit halves.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
fn dots_avx2_fma<const N: usize>(x: &[f32], ys: [&[f32]; N]) -> [f32; N] {
    use std::arch::x86_64::*;
    const STEP: usize = 2 * LANES;
    // What makes the loads below sound (four compares per 128-element row: not measurable).
    assert!(ys.iter().all(|y| y.len() == x.len()), "vectors of one length");
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    let full = x.len() / STEP * STEP;
    let mut i = 0;
    while i < full {
        for c in 0..2 {
            // SAFETY: i + c * LANES + LANES <= full <= x.len(), and every y is as long as x
            // (asserted above); the loads take any alignment.
            let vx = unsafe { _mm256_loadu_ps(x.as_ptr().add(i + c * LANES)) };
            for (acc, y) in acc.iter_mut().zip(&ys) {
                // SAFETY: `y` is as long as `x`: in bounds as above.
                let vy = unsafe { _mm256_loadu_ps(y.as_ptr().add(i + c * LANES)) };
                acc[c] = _mm256_fmadd_ps(vx, vy, acc[c]);
            }
        }
        i += STEP;
    }
    if i + LANES <= x.len() {
        // SAFETY: as above, for the LANES from i.
        let vx = unsafe { _mm256_loadu_ps(x.as_ptr().add(i)) };
        for (acc, y) in acc.iter_mut().zip(&ys) {
            // SAFETY: `y` is as long as `x`: in bounds as above.
            let vy = unsafe { _mm256_loadu_ps(y.as_ptr().add(i)) };
            acc[0] = _mm256_fmadd_ps(vx, vy, acc[0]);
        }
        i += LANES;
    }
    let mut out = [0.0f32; N];
    for ((o, acc), y) in out.iter_mut().zip(acc).zip(&ys) {
        let v = _mm256_add_ps(acc[0], acc[1]);
        let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_movehdup_ps(h));
        let mut s = _mm_cvtss_f32(h);
        for (a, b) in x[i..].iter().zip(&y[i..]) {
            s = a.mul_add(*b, s);
        }
        *o = s;
    }
    out
}

/// Rows [`block_avx2_fma`] reads ahead of the one it scores.
#[cfg(target_arch = "x86_64")]
const PREFETCH_ROWS: usize = 8;

/// [`block_with`] in AVX2 registers: each row read once for its norm and three query vectors,
/// then once per four more.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn block_avx2_fma(rows: &[&[f32]], queries: &[&[f32]], norms: &mut [f32], dots: &mut [f32]) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    let m = queries.len();
    for (r, x) in rows.iter().enumerate() {
        // Rows a few ahead, into L1 while this one is scored: the hardware prefetcher alone
        // leaves a quarter of the memory bandwidth unused here.
        if let Some(ahead) = rows.get(r + PREFETCH_ROWS) {
            for line in ahead.chunks(16) {
                _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast());
            }
        }
        let out = &mut dots[r * m..(r + 1) * m];
        let head = m.min(3);
        norms[r] = match queries[..head] {
            [a, b, c] => {
                let [n, p, q, t] = dots_avx2_fma(x, [x, a, b, c]);
                out[..3].copy_from_slice(&[p, q, t]);
                n
            }
            [a, b] => {
                let [n, p, q] = dots_avx2_fma(x, [x, a, b]);
                out[..2].copy_from_slice(&[p, q]);
                n
            }
            [a] => {
                let [n, p] = dots_avx2_fma(x, [x, a]);
                out[0] = p;
                n
            }
            _ => dots_avx2_fma(x, [x])[0],
        };
        for (qs, out) in queries[head..].chunks(4).zip(out[head..].chunks_mut(4)) {
            match *qs {
                [a, b, c, d] => out.copy_from_slice(&dots_avx2_fma(x, [a, b, c, d])),
                [a, b, c] => out.copy_from_slice(&dots_avx2_fma(x, [a, b, c])),
                [a, b] => out.copy_from_slice(&dots_avx2_fma(x, [a, b])),
                [a] => out.copy_from_slice(&dots_avx2_fma(x, [a])),
                _ => {}
            }
        }
    }
}

/// Squared norms of `rows` and their dot products with `queries` (row-major, `rows.len() *
/// queries.len()`), in float32: see the module's note on their accuracy.
///
/// # Panics
/// When a row or query vector is not of length `d`, or an output is too short.
pub(crate) fn block(rows: &[&[f32]], queries: &[&[f32]], norms: &mut [f32], dots: &mut [f32], d: usize) {
    assert!(rows.iter().chain(queries).all(|v| v.len() == d), "vectors of one length");
    assert!(norms.len() >= rows.len() && dots.len() >= rows.len() * queries.len());
    if rows.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        #[allow(unsafe_code)] // a target-feature call (see the crate's note)
        // SAFETY: the CPU has AVX2 and FMA (checked just above), all the function needs.
        unsafe {
            block_avx2_fma(rows, queries, norms, dots)
        };
        return;
    }
    block_with::<false>(rows, queries, norms, dots);
}

/// A bound on the error of [`block`]'s float32 sums of `d` products, relative to `‖x‖ ‖q‖`
/// (products summed in any order, with or without FMA, the query rounded to float32): the
/// textbook `γ(d) = d u / (1 - d u)`, doubled for safety, plus the rounding of the float64
/// arithmetic callers do on top.
pub(crate) fn error_bound(d: usize) -> f64 {
    let u = f64::from(f32::EPSILON) / 2.0;
    let n = (d + 4) as f64;
    2.0 * n * u / (1.0 - n * u) + 1e-12
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(x: &[f32], q: &[f32]) -> f64 {
        x.iter().zip(q).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum()
    }

    #[test]
    fn block_matches_float64_sums_within_the_bound_for_any_shape() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        };
        for d in [1, 3, 8, 13, 64, 130] {
            for (rows, m) in [(1, 1), (3, 2), (4, 3), (5, 4), (9, 5), (2, 8), (3, 0)] {
                let data: Vec<Vec<f32>> =
                    (0..rows).map(|_| (0..d).map(|_| next() * 100.0).collect()).collect();
                let qs: Vec<Vec<f32>> = (0..m).map(|_| (0..d).map(|_| next()).collect()).collect();
                let rv: Vec<&[f32]> = data.iter().map(Vec::as_slice).collect();
                let qv: Vec<&[f32]> = qs.iter().map(Vec::as_slice).collect();
                let (mut norms, mut dots) = (vec![f32::NAN; rows], vec![f32::NAN; rows * m]);
                block(&rv, &qv, &mut norms, &mut dots, d);
                let g = error_bound(d);
                for r in 0..rows {
                    let nx = reference(&data[r], &data[r]);
                    assert!((f64::from(norms[r]) - nx).abs() <= g * nx, "d {d} row {r}");
                    for j in 0..m {
                        let nq = reference(&qs[j], &qs[j]);
                        let want = reference(&data[r], &qs[j]);
                        let err = (f64::from(dots[r * m + j]) - want).abs();
                        assert!(err <= g * (nx * nq).sqrt(), "d {d} row {r} query {j}: {err}");
                    }
                }
            }
        }
    }
}
