//! One rank's part of an epoch, in batches: [`plan_epoch`] and [`EpochPlan`].
//!
//! The semantics (PyTorch's `DistributedSampler` padding, QUASI_RANDOM's disjoint pages, FFCV's
//! partial and dropped batches) are in the [order module docs](super).

use super::context::EpochContext;
use super::Order;
use crate::error::{Error, Result};
use crate::pages::PageMap;

/// The sample ids one rank reads in one epoch, cut into batches.
///
/// All batches hold `batch_size` ids except possibly the last (never with `drop_last`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochPlan {
    samples: Vec<u64>,
    batch_size: usize,
}

impl EpochPlan {
    /// Number of sample ids, over all batches.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the plan reads nothing.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The batch size the plan was cut with.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Number of batches: `len() / batch_size`, rounded up.
    pub fn num_batches(&self) -> usize {
        self.samples.len().div_ceil(self.batch_size)
    }

    /// Batch `i`.
    ///
    /// # Panics
    ///
    /// If `i >= num_batches()`.
    pub fn batch(&self, i: usize) -> &[u64] {
        assert!(i < self.num_batches(), "batch {i} of an epoch plan of {} batches", self.num_batches());
        let start = i * self.batch_size;
        &self.samples[start..(start + self.batch_size).min(self.samples.len())]
    }

    /// The same plan with every id replaced by `f(id)`.
    pub(crate) fn map_ids(mut self, f: impl Fn(u64) -> u64) -> EpochPlan {
        for id in &mut self.samples {
            *id = f(*id);
        }
        self
    }

    /// The batches in order.
    pub fn batches(&self) -> std::slice::Chunks<'_, u64> {
        self.samples.chunks(self.batch_size)
    }

    /// The batches from batch `first` on (none if `first >= num_batches()`): what is left after
    /// `first` batches were consumed.
    pub fn batches_from(&self, first: usize) -> std::slice::Chunks<'_, u64> {
        let start = first.saturating_mul(self.batch_size).min(self.samples.len());
        self.samples[start..].chunks(self.batch_size)
    }

    /// Every sample id, batch after batch.
    pub fn samples(&self) -> &[u64] {
        &self.samples
    }

    /// The distinct pages the plan reads, ascending (ids `pages` does not map are skipped).
    pub fn pages_touched(&self, pages: &PageMap) -> Vec<u64> {
        let mut touched: Vec<u64> = self.samples.iter().filter_map(|&id| pages.page(id)).collect();
        touched.sort_unstable();
        touched.dedup();
        touched
    }
}

impl<'a> IntoIterator for &'a EpochPlan {
    type Item = &'a [u64];
    type IntoIter = std::slice::Chunks<'a, u64>;

    /// The batches in order, as [`EpochPlan::batches`].
    fn into_iter(self) -> Self::IntoIter {
        self.batches()
    }
}

/// Rank `rank` of `world_size`'s plan for the epoch `ctx` describes, under `order`.
///
/// Every rank calling this with the same `order` and `ctx` gets its part of one agreed split,
/// with no communication; every rank gets the same number of batches. See the
/// [module docs](super) for the padding, QUASI_RANDOM's disjoint pages and `drop_last`. A single
/// process is rank 0 of 1.
///
/// # Errors
///
/// [`Error::InvalidArgument`] if `batch_size` or `world_size` is 0, `rank >= world_size`, or
/// `ctx.indices` holds an id that `ctx.pages` does not map.
pub fn plan_epoch(
    order: &dyn Order,
    ctx: &EpochContext<'_>,
    rank: usize,
    world_size: usize,
    drop_last: bool,
) -> Result<EpochPlan> {
    let invalid = |what: &str, why: String| Err(Error::InvalidArgument { what: what.into(), why });
    if ctx.batch_size == 0 {
        return invalid("batch_size", "must be at least 1".into());
    }
    if world_size == 0 {
        return invalid("world_size", "must be at least 1".into());
    }
    if rank >= world_size {
        return invalid("rank", format!("{rank} is not below world_size {world_size}"));
    }
    if let Some(max) = ctx.indices.max_id().filter(|&m| m >= ctx.pages.num_samples()) {
        return invalid(
            "indices",
            format!("id {max} is past the page map of {} samples", ctx.pages.num_samples()),
        );
    }
    let mut samples = order.rank_order(ctx, rank, world_size);
    if drop_last {
        samples.truncate(samples.len() / ctx.batch_size * ctx.batch_size);
    }
    Ok(EpochPlan { samples, batch_size: ctx.batch_size })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_cut_the_plan() {
        let plan = EpochPlan { samples: (0..10).collect(), batch_size: 4 };
        assert_eq!(plan.num_batches(), 3);
        assert_eq!(plan.batch(2), [8, 9]);
        assert_eq!(plan.batches().collect::<Vec<_>>(), [&[0, 1, 2, 3][..], &[4, 5, 6, 7], &[8, 9]]);
        assert_eq!(plan.batches_from(1).collect::<Vec<_>>(), [&[4, 5, 6, 7][..], &[8, 9]]);
        assert_eq!(plan.batches_from(3).count(), 0);
        assert_eq!(plan.batches_from(usize::MAX).count(), 0);
        assert_eq!((&plan).into_iter().count(), 3);
    }

    #[test]
    #[should_panic(expected = "batch 3 of an epoch plan of 3 batches")]
    fn batch_past_the_end_panics() {
        EpochPlan { samples: (0..10).collect(), batch_size: 4 }.batch(3);
    }
}
