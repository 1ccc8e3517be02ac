//! RANDOM: a uniform permutation of the ids per epoch, from `(seed, epoch)` only.
//!
//! FFCV's `traversal_order/random.py` draws `np.random.permutation` seeded with `seed + epoch`;
//! here the permutation is [`IndexSet::shuffled`] (beton's pinned Fisher–Yates over ChaCha8)
//! with a seed mixed from `(seed, epoch)`, so seed 1 epoch 0 and seed 0 epoch 1 are unrelated.
//!
//! [`IndexSet::shuffled`]: beton_dataset::IndexSet::shuffled

use super::context::EpochContext;
use crate::random::{lane, lane_seed};

/// The permutation of epoch `ctx.epoch`.
pub(super) fn order(ctx: &EpochContext<'_>) -> Vec<u64> {
    ctx.indices.shuffled(lane_seed(ctx.seed, ctx.epoch, lane::RANDOM))
}

#[cfg(test)]
mod tests {
    use beton_dataset::IndexSet;

    use super::*;
    use crate::random::Stream;
    use crate::PageMap;

    fn ctx<'a>(indices: &'a IndexSet, pages: &'a PageMap, seed: u64, epoch: u64) -> EpochContext<'a> {
        EpochContext { indices, pages, seed, epoch, batch_size: 4 }
    }

    #[test]
    fn golden_random_orders() {
        let indices = IndexSet::from(100..110);
        let pages = PageMap::from_pages(vec![0; 110]);
        for (seed, epoch, want) in GOLDEN {
            assert_eq!(order(&ctx(&indices, &pages, seed, epoch)), want, "seed {seed}, epoch {epoch}");
        }
    }

    /// (seed, epoch, RANDOM's order of 100..110).
    const GOLDEN: [(u64, u64, [u64; 10]); 3] = [
        (0, 0, [100, 107, 108, 106, 103, 102, 109, 101, 104, 105]),
        (0, 1, [107, 102, 105, 100, 109, 106, 104, 103, 108, 101]),
        (42, 3, [104, 102, 108, 106, 101, 107, 103, 109, 100, 105]),
    ];

    #[test]
    fn is_the_loaders_own_fisher_yates_too() {
        // The crate's Stream::shuffle and query's IndexSet::shuffled are the same walk.
        let indices = IndexSet::from(0..50);
        let pages = PageMap::from_pages(vec![0; 50]);
        let mut own: Vec<u64> = indices.as_slice().to_vec();
        Stream::new(5, 2, lane::RANDOM).shuffle(&mut own);
        assert_eq!(order(&ctx(&indices, &pages, 5, 2)), own);
    }
}
