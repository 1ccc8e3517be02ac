//! The horizontal weights laid out for the AVX2 kernels (`avx2.rs`): the three-channel pass's
//! packed pairs ([`pack3`]) and the one-channel pass's blocks of eight outputs ([`Blocks1`]).
//! Computed once per geometry by the resampler (`mod.rs`), read for every row.

use super::weights::Axis;

/// The horizontal weights `x` as the AVX2 kernel reads them: per output, per group of four
/// taps, 16 `i16`: `w0 w1` three times and two zeros, then `w2 w3` likewise.
#[cfg(target_arch = "x86_64")]
pub(super) fn pack3(x: &Axis, packed: &mut Vec<i16>) {
    let taps = x.taps;
    let groups = taps.div_ceil(4);
    packed.clear();
    for i in 0..x.starts.len() {
        let w = x.weights(i);
        let at = |k: usize| w.get(k).copied().unwrap_or(0);
        for g in 0..groups {
            for half in 0..2 {
                let (a, b) = (at(4 * g + 2 * half), at(4 * g + 2 * half + 1));
                packed.extend_from_slice(&[a, b, a, b, a, b, 0, 0]);
            }
        }
    }
}

/// The one-channel horizontal pass as the AVX2 kernel runs it: outputs in blocks of eight, four
/// per 128-bit lane, each lane reading one 16-byte load of the row that holds all of its four
/// windows. Per block and tap pair, a byte shuffle that spreads the loaded bytes into the `i16`
/// pairs each output weighs, and those weights.
#[derive(Debug, Default)]
pub(super) struct Blocks1 {
    /// Tap pairs: `taps.div_ceil(2)`.
    pub(super) pairs: usize,
    /// Per block: the offsets (from the row's first byte) of the low and high lane's loads, or
    /// `u32::MAX` twice when a lane's windows do not fit in 16 bytes (the block runs scalar).
    pub(super) loads: Vec<[u32; 2]>,
    /// Per block, per pair: 32 shuffle indices.
    pub(super) shuffles: Vec<i8>,
    /// Per block, per pair: 16 weights (`w[2p], w[2p + 1]` of outputs 0 to 7); when `wide`,
    /// per output its weights padded to 16.
    pub(super) weights: Vec<i16>,
    /// Whether the wide kernel runs (windows of 9 to 16 taps, or spread too far for blocks).
    pub(super) wide: bool,
}

impl Blocks1 {
    /// Lays out the one-channel horizontal pass with the weights `x` as
    /// [`horizontal1_avx2`](super::avx2::horizontal1_avx2) reads it; the scratch rows hold input
    /// columns `x0 ..`.
    #[cfg(target_arch = "x86_64")]
    pub(super) fn pack(&mut self, x: &Axis, x0: usize) {
        let b = self;
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
