//! The scalar kernels of the two passes: what runs without AVX2, for rows too short for it,
//! and for the AVX2 kernels' outputs whose windows do not fit their loads. They compute the same
//! integers as the AVX2 kernels (tested equal).

use super::weights::{to_u8, Axis};

/// One output row of the vertical pass, scalar (rows under 32 bytes, or no AVX2):
/// `out[j] = Σ_k w[k] · src[(start + k) · stride + from + j]`.
pub(super) fn vertical(src: &[u8], stride: usize, start: usize, from: usize, w: &[i16], out: &mut [u8]) {
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
pub(super) fn horizontal(row: &[u8], c: usize, x: &Axis, x0: usize, out: &mut [u8]) {
    horizontal_from(row, c, x, x0, 0, out);
}

/// [`horizontal`] for the outputs `first ..` (`out` holds them).
pub(super) fn horizontal_from(row: &[u8], c: usize, x: &Axis, x0: usize, first: usize, out: &mut [u8]) {
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
