//! Per-sample random streams for image decoders and operations.
//!
//! Every random choice of the image pipeline (the crop, the fused flip, each operation's draws)
//! comes from a ChaCha8 stream seeded by a SplitMix64 chain over `(seed, epoch, lane, index,
//! k)`, the loader's own construction (`crate::random`). A sample's crop therefore depends on the
//! seed, the epoch and the sample's row id alone: not on the thread that decodes it, nor on the
//! batch it lands in.

use crate::decode::SampleContext;
use crate::random::{lane, lane_seed, Stream};

/// A random stream of one sample for one purpose.
pub struct SampleRng(Stream);

impl std::fmt::Debug for SampleRng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SampleRng")
    }
}

impl SampleRng {
    fn with_lane(ctx: &SampleContext, lane: u64, k: u64) -> Self {
        SampleRng(Stream::new(lane_seed(ctx.seed, ctx.epoch, lane), ctx.index, k))
    }

    /// The stream of operation number `k` of a pipeline, for the sample of `ctx`.
    pub fn for_op(ctx: &SampleContext, k: u64) -> Self {
        Self::with_lane(ctx, lane::IMAGE_OPS, k)
    }

    /// The crop stream of a decoder.
    pub(crate) fn for_crop(ctx: &SampleContext) -> Self {
        Self::with_lane(ctx, lane::IMAGE_CROP, 0)
    }

    /// The fused-flip stream of a decoder.
    pub(crate) fn for_flip(ctx: &SampleContext) -> Self {
        Self::with_lane(ctx, lane::IMAGE_FLIP, 0)
    }

    /// A uniform integer in `0..n`; `n = 0` gives 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        self.0.below(n)
    }

    /// A uniform `f64` in `[0, 1)` with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        self.0.below(1 << 53) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform `f64` in `[lo, hi)`.
    pub fn uniform_in(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// True with probability `p` (one draw, whatever `p`).
    pub fn chance(&mut self, p: f64) -> bool {
        self.uniform() < p
    }
}
