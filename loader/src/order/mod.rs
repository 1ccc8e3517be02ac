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
//! All three are pinned by golden tests: a fixed expected output for a small input, so that no
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
mod quasi_random;
mod random;
mod sequential;
mod strided;

pub use context::EpochContext;
pub use distributed::{plan_epoch, EpochPlan};

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
}

/// The built-in orders, FFCV's `OrderOption`; see the [module docs](self) for each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OrderOption {
    /// The ids ascending, every epoch (FFCV's default).
    #[default]
    Sequential,
    /// A uniform permutation per epoch.
    Random,
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
}

impl Order for OrderOption {
    fn name(&self) -> String {
        match self {
            OrderOption::Sequential => "SEQUENTIAL".into(),
            OrderOption::Random => "RANDOM".into(),
            OrderOption::QuasiRandom { buffer_pages: None } => "QUASI_RANDOM".into(),
            OrderOption::QuasiRandom { buffer_pages: Some(b) } => format!("QUASI_RANDOM(buffer_pages={b})"),
        }
    }

    fn epoch_order(&self, ctx: &EpochContext<'_>) -> Vec<u64> {
        match *self {
            OrderOption::Sequential => sequential::order(ctx),
            OrderOption::Random => random::order(ctx),
            OrderOption::QuasiRandom { buffer_pages } => {
                quasi_random::order(ctx, Self::buffer_pages(buffer_pages, ctx.batch_size))
            }
        }
    }

    fn rank_order(&self, ctx: &EpochContext<'_>, rank: usize, world_size: usize) -> Vec<u64> {
        match *self {
            OrderOption::QuasiRandom { buffer_pages } => quasi_random::rank_order(
                ctx,
                Self::buffer_pages(buffer_pages, ctx.batch_size),
                rank,
                world_size,
            ),
            _ => strided::strided_split(&self.epoch_order(ctx), rank, world_size),
        }
    }
}
