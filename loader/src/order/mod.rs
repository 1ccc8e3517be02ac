//! Traversal orders: which samples an epoch reads, in which order, on which rank.
//!
//! An order ([`OrderOption`], FFCV's `OrderOption`, or any [`Order`]) turns the loader's
//! [`IndexSet`] into the sequence of sample ids of one epoch; [`plan_epoch`] splits that among
//! the ranks of a distributed run and cuts this rank's part into batches, an [`EpochPlan`].
//!
//! # The orders
//!
//! - **SEQUENTIAL**: the ids ascending, the same every epoch.
//! - **RANDOM**: a uniform permutation of the ids per epoch, drawn from `(seed, epoch)` only, so
//!   every rank computes the same one. It is [`IndexSet::shuffled`] with a seed derived from
//!   `(seed, epoch)` by SplitMix64.
//! - **FFCV's RANDOM** ([`OrderOption::FfcvRandom`]): the permutation FFCV 1.0.2 draws,
//!   `np.random.default_rng(seed + epoch).permutation(ids)`, numpy's generator and shuffle
//!   written out (`numpy_rng.rs`); what the Python `Loader` runs for RANDOM on one process.
//! - **QUASI_RANDOM**: FFCV 1.0.2's page-local shuffle (`generate_order_inner` in
//!   `ffcv/traversal_order/quasi_random.py`): the ids are grouped by the page they live on
//!   ([`PageMap`]); the ids within each page are shuffled, then the pages are permuted. A buffer
//!   holds up to `buffer_pages` pages (default `2 × batch_size`, FFCV's): each draw picks one of
//!   the buffered pages uniformly and takes its next id; a page leaves the buffer when it has no
//!   ids left, and the buffer refills from the page permutation. At any moment at most
//!   `buffer_pages` pages are open, so a reader that caches pages needs only that many. Pages
//!   with no id of the set are left out. Unlike FFCV's, the randomness is ChaCha8 from
//!   `(seed, epoch)` (not numba's global generators), a page leaves the buffer by swap-remove
//!   (the choice stays uniform over the buffered pages), and it works distributed (below).
//!
//! All are pinned by golden tests: a fixed expected output for a small input, so that no
//! upgrade of a dependency can silently change an order.
//!
//! # Distributed: what each rank reads
//!
//! [`plan_epoch`] gives rank `r` of `world_size` its part of the epoch:
//!
//! - **SEQUENTIAL, RANDOM and custom orders**: exactly PyTorch's
//!   `DistributedSampler(drop_last=False)`. The epoch order of `n` ids is padded to
//!   `ceil(n / world_size) × world_size` ids by repeating it from its start (cyclically when the
//!   padding is longer than the order, e.g. 2 ids on 5 ranks), and rank `r` takes the elements at
//!   positions `r, r + world_size, r + 2·world_size, …`. Every rank gets `ceil(n / world_size)`
//!   ids; fewer than `world_size` ids are repeated.
//! - **QUASI_RANDOM**: each rank reads a *disjoint set of pages*, so that no page is read by two
//!   ranks. The pages holding ids of the set are permuted with `(seed, epoch)` and assigned in
//!   that order, each to the rank with the fewest ids so far (ties to the lowest rank); each rank
//!   then runs the buffer walk above over its own pages (with its own stream, lane
//!   `QUASI_RANDOM + r`, so one rank of one is exactly the single-process order). Ranks differ in
//!   length by at most the ids of one page; every rank is padded to the longest rank's length by
//!   repeating *its own* sequence from its start (cyclically if needed), so padding never reads
//!   another rank's pages. Every rank computes the same assignment on its own: no communication.
//!   When the set spans fewer pages than there are ranks, disjoint pages cannot give every rank
//!   something to read, and the ranks fall back to the `DistributedSampler` split of the
//!   single-process QUASI_RANDOM order (sharing pages).
//!
//! # Generated as they are read
//!
//! The built-in orders are computed over positions among the ids (`u32` where they fit) and only
//! as far as the batches read (`sequence.rs`): RANDOM steps its forward
//! Fisher–Yates one element at a time, QUASI_RANDOM shuffles a page when the walk opens it, and
//! FFCV's RANDOM (a backward shuffle, whose first element depends on every draw) draws the whole
//! epoch, then traces its first elements while the shuffle finishes on another thread. A loader
//! over 10^8 rows starts in well under a second; `docs/PERFORMANCE.md` has the figures. The
//! sequences are the same as when each was computed whole (differential tests against that
//! code, kept in `reference.rs`).
//!
//! Then the rank's sequence is cut into batches of `batch_size`: all full but the last, which is
//! partial when `batch_size` does not divide the length, and dropped with `drop_last` (FFCV's
//! `Loader(drop_last=True)`, its default): 600 ids in batches of 7 are 85 batches with
//! `drop_last`, 86 without; in batches of 60, 10 either way. Every rank has the same number of
//! ids, so the same number of batches. An empty index set gives zero batches.
//!
//! [`IndexSet`]: beton_dataset::IndexSet
//! [`IndexSet::shuffled`]: beton_dataset::IndexSet::shuffled
//! [`PageMap`]: crate::PageMap

mod context;
mod distributed;
mod ffcv_random;
mod numpy_rng;
mod quasi_random;
mod random;
#[cfg(test)]
mod reference;
pub(crate) mod sequence;
mod strided;

use std::sync::Arc;

pub use context::EpochContext;
pub use distributed::{plan_epoch, EpochPlan};
use sequence::{Identity, IdsView, RankSeq};

use crate::pages::PageMap;

/// A traversal order: FFCV's `TraversalOrder`, for orders beyond [`OrderOption`]'s.
///
/// An implementation must be a pure function of the context (every rank calls it and must get
/// the same answer). The ids it returns need not be a permutation of `ctx.indices` (an order
/// may repeat or skip ids), but must be ids `pages` maps.
pub trait Order: Send + Sync {
    /// A name for the order and its parameters, recorded in [`LoaderState`](crate::LoaderState)
    /// so a run is not resumed under another order.
    fn name(&self) -> String;

    /// The ids of one epoch in the order they are read, by a single process.
    fn epoch_order(&self, ctx: &EpochContext<'_>) -> Vec<u64>;

    /// Rank `rank`'s part of the epoch (`rank < world_size`), unbatched. Every rank's part must
    /// have the same length. The default is PyTorch's `DistributedSampler(drop_last=False)`
    /// over [`epoch_order`](Self::epoch_order); see the [module docs](self).
    fn rank_order(&self, ctx: &EpochContext<'_>, rank: usize, world_size: usize) -> Vec<u64> {
        strided::strided_split(&self.epoch_order(ctx), rank, world_size)
    }

    /// The built-in order this is, if it is one: the loader then generates its plans lazily,
    /// without an [`EpochContext`] (no index set or page map of every row).
    #[doc(hidden)]
    fn as_option(&self) -> Option<OrderOption> {
        None
    }
}

/// The built-in orders, FFCV's `OrderOption`; see the [module docs](self) for each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OrderOption {
    /// The ids ascending, every epoch (FFCV's default).
    #[default]
    Sequential,
    /// A uniform permutation per epoch.
    Random,
    /// FFCV's RANDOM: `np.random.default_rng(seed + epoch).permutation(ids)`, the same
    /// permutation as FFCV 1.0.2 (and numpy) for the same seed.
    FfcvRandom,
    /// Page-local shuffling through a buffer of pages.
    QuasiRandom {
        /// Pages open at once; `None` is FFCV's `2 × batch_size`. `Some(0)` is taken as 1.
        buffer_pages: Option<usize>,
    },
}

impl OrderOption {
    /// QUASI_RANDOM's buffer size for a batch size.
    fn buffer_pages(buffer_pages: Option<usize>, batch_size: usize) -> usize {
        buffer_pages.unwrap_or(batch_size.saturating_mul(2)).max(1)
    }

    /// Whether the order groups ids by page (and so needs a [`PageMap`]).
    pub(crate) fn needs_pages(&self) -> bool {
        matches!(self, OrderOption::QuasiRandom { .. })
    }

    /// Rank `rank`'s sequence of positions among `ids`, generated as it is read. `pages` maps
    /// every id (only QUASI_RANDOM reads it: see [`needs_pages`](Self::needs_pages)).
    pub(crate) fn rank_seq(
        &self,
        ids: IdsView<'_>,
        pages: &PageMap,
        ctx: Ctx,
        rank: usize,
        world: usize,
    ) -> RankSeq {
        let n = ids.len();
        match *self {
            OrderOption::Sequential => RankSeq::strided(Box::new(Identity(n)), rank, world),
            OrderOption::Random => {
                RankSeq::strided(Box::new(random::Shuffle::new(n, ctx.seed, ctx.epoch)), rank, world)
            }
            OrderOption::FfcvRandom => {
                // Traced before the whole shuffle is there: enough for the first batches of
                // every rank, while the shuffle finishes on its own thread.
                let trace =
                    ffcv_random::TRACE_AT_LEAST.max(ctx.batch_size.saturating_mul(world).saturating_mul(4));
                let shuffle = ffcv_random::FfcvShuffle::new(n, ctx.seed, ctx.epoch, trace);
                RankSeq::strided(Box::new(shuffle), rank, world)
            }
            OrderOption::QuasiRandom { buffer_pages } => quasi_random::rank_seq(
                ids,
                pages,
                (ctx.seed, ctx.epoch),
                Self::buffer_pages(buffer_pages, ctx.batch_size),
                rank,
                world,
            ),
        }
    }

    /// Rank `rank`'s ids for `ctx`, whole.
    fn materialise(&self, ctx: &EpochContext<'_>, rank: usize, world: usize) -> Vec<u64> {
        let ids = IdsView::of(ctx.indices);
        let c = Ctx { seed: ctx.seed, epoch: ctx.epoch, batch_size: ctx.batch_size };
        let mut seq = self.rank_seq(ids, ctx.pages, c, rank, world);
        let mut out = Vec::new();
        seq.extend(0..seq.len(), |p| ids.get(p), &mut out);
        out
    }
}

/// What a lazily generated order needs of an epoch besides its ids and pages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx {
    pub(crate) seed: u64,
    pub(crate) epoch: u64,
    pub(crate) batch_size: usize,
}

/// A page map for orders that never read one.
pub(crate) fn no_pages() -> Arc<PageMap> {
    Arc::new(PageMap::from_pages(Vec::new()))
}

impl Order for OrderOption {
    fn name(&self) -> String {
        match self {
            OrderOption::Sequential => "SEQUENTIAL".into(),
            OrderOption::Random => "RANDOM".into(),
            // The name the Python Loader's states have always carried for it: FFCV's RANDOM ran
            // as the Python order class `Random` before it ran natively, and a state saved
            // then resumes now.
            OrderOption::FfcvRandom => "python:Random".into(),
            OrderOption::QuasiRandom { buffer_pages: None } => "QUASI_RANDOM".into(),
            OrderOption::QuasiRandom { buffer_pages: Some(b) } => format!("QUASI_RANDOM(buffer_pages={b})"),
        }
    }

    fn epoch_order(&self, ctx: &EpochContext<'_>) -> Vec<u64> {
        self.materialise(ctx, 0, 1)
    }

    fn rank_order(&self, ctx: &EpochContext<'_>, rank: usize, world_size: usize) -> Vec<u64> {
        self.materialise(ctx, rank, world_size)
    }

    fn as_option(&self) -> Option<OrderOption> {
        Some(*self)
    }
}

#[cfg(test)]
mod tests {
    use beton_dataset::IndexSet;

    use super::*;

    #[test]
    fn golden_sequential_is_the_ids_ascending_every_epoch() {
        let indices: IndexSet = [9, 2, 4, 7].into_iter().collect();
        let pages = PageMap::from_pages(vec![0; 10]);
        for epoch in 0..3 {
            let ctx = EpochContext { indices: &indices, pages: &pages, seed: 1, epoch, batch_size: 2 };
            assert_eq!(OrderOption::Sequential.epoch_order(&ctx), [2, 4, 7, 9]);
        }
    }

    #[test]
    fn random_is_index_set_shuffled() {
        let indices: IndexSet = (0..300).filter(|i| i % 3 != 1).collect();
        let pages = PageMap::from_pages(vec![0; 300]);
        let ctx = EpochContext { indices: &indices, pages: &pages, seed: 4, epoch: 1, batch_size: 2 };
        assert_eq!(OrderOption::Random.epoch_order(&ctx), reference::random(&ctx));
    }
}
