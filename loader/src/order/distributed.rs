//! One rank's part of an epoch, in batches: [`plan_epoch`] and [`EpochPlan`].
//!
//! The semantics (PyTorch's `DistributedSampler` padding, QUASI_RANDOM's disjoint pages, FFCV's
//! partial and dropped batches) are in the [order module docs](super).

use std::sync::{Arc, Mutex, OnceLock};

use super::context::EpochContext;
use super::sequence::{Ids, RankSeq};
use super::Order;
use crate::error::{Error, Result};
use crate::pages::PageMap;

/// The sample ids one rank reads in one epoch, cut into batches.
///
/// All batches hold `batch_size` ids except possibly the last (never with `drop_last`). A plan
/// the loader makes for a built-in order is generated as its batches are read
/// ([`batch_into`](Self::batch_into)); the methods that hand out slices ([`samples`],
/// [`batch`], [`batches`]) generate and keep the whole plan first (8 bytes a sample).
///
/// [`samples`]: Self::samples
/// [`batch`]: Self::batch
/// [`batches`]: Self::batches
pub struct EpochPlan {
    source: Source,
    /// Samples in the plan (after `drop_last`).
    len: usize,
    batch_size: usize,
    /// The whole plan of a lazy one, once something asked for it.
    all: OnceLock<Vec<u64>>,
}

enum Source {
    /// Every sample id, computed.
    Samples(Vec<u64>),
    /// A rank's sequence of positions, generated as it is read.
    Lazy(Mutex<Lazy>),
}

/// A generated plan: positions from `seq`, mapped to ids by `ids`, then (a list with repeats)
/// to rows by `rows`.
struct Lazy {
    seq: RankSeq,
    ids: Ids,
    rows: Option<Arc<Vec<u64>>>,
}

impl Lazy {
    fn extend(&mut self, range: std::ops::Range<usize>, out: &mut Vec<u64>) {
        let (ids, rows) = (self.ids.view(), self.rows.as_deref());
        self.seq.extend(
            range,
            |p| {
                let id = ids.get(p);
                rows.map_or(id, |r| r[id as usize])
            },
            out,
        );
    }
}

impl EpochPlan {
    /// A plan generated as it is read: `seq`'s positions among `ids` (then rows of `rows`), cut
    /// into batches of `batch_size`, the partial last one dropped with `drop_last`.
    pub(crate) fn lazy(
        seq: RankSeq,
        ids: Ids,
        rows: Option<Arc<Vec<u64>>>,
        batch_size: usize,
        drop_last: bool,
    ) -> EpochPlan {
        let len = if drop_last { seq.len() / batch_size * batch_size } else { seq.len() };
        EpochPlan {
            source: Source::Lazy(Mutex::new(Lazy { seq, ids, rows })),
            len,
            batch_size,
            all: OnceLock::new(),
        }
    }

    fn of_samples(samples: Vec<u64>, batch_size: usize) -> EpochPlan {
        EpochPlan { len: samples.len(), source: Source::Samples(samples), batch_size, all: OnceLock::new() }
    }

    /// Number of sample ids, over all batches.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the plan reads nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The batch size the plan was cut with.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Number of batches: `len() / batch_size`, rounded up.
    pub fn num_batches(&self) -> usize {
        self.len.div_ceil(self.batch_size)
    }

    /// The samples of batch `i`.
    fn range(&self, i: usize) -> std::ops::Range<usize> {
        let start = i * self.batch_size;
        start..(start + self.batch_size).min(self.len)
    }

    /// Batch `i`.
    ///
    /// # Panics
    ///
    /// If `i >= num_batches()`.
    pub fn batch(&self, i: usize) -> &[u64] {
        assert!(i < self.num_batches(), "batch {i} of an epoch plan of {} batches", self.num_batches());
        &self.samples()[self.range(i)]
    }

    /// Appends batch `i`'s ids to `out`, generating the plan only as far as batch `i`: what the
    /// loader's workers read.
    ///
    /// # Panics
    ///
    /// If `i >= num_batches()`.
    pub fn batch_into(&self, i: usize, out: &mut Vec<u64>) {
        assert!(i < self.num_batches(), "batch {i} of an epoch plan of {} batches", self.num_batches());
        let range = self.range(i);
        match (&self.source, self.all.get()) {
            (Source::Samples(s), _) => out.extend_from_slice(&s[range]),
            (Source::Lazy(_), Some(all)) => out.extend_from_slice(&all[range]),
            (Source::Lazy(lazy), None) => lazy.lock().unwrap_or_else(|e| e.into_inner()).extend(range, out),
        }
    }

    /// The same plan with every id replaced by `f(id)`.
    pub(crate) fn map_ids(self, f: impl Fn(u64) -> u64) -> EpochPlan {
        let mut samples = match self.source {
            Source::Samples(s) => s,
            Source::Lazy(_) => self.samples().to_vec(),
        };
        for id in &mut samples {
            *id = f(*id);
        }
        EpochPlan::of_samples(samples, self.batch_size)
    }

    /// The batches in order.
    pub fn batches(&self) -> std::slice::Chunks<'_, u64> {
        self.samples().chunks(self.batch_size)
    }

    /// The batches from batch `first` on (none if `first >= num_batches()`): what is left after
    /// `first` batches were consumed.
    pub fn batches_from(&self, first: usize) -> std::slice::Chunks<'_, u64> {
        let start = first.saturating_mul(self.batch_size).min(self.len);
        self.samples()[start..].chunks(self.batch_size)
    }

    /// Every sample id, batch after batch (a generated plan is generated whole, and kept).
    pub fn samples(&self) -> &[u64] {
        match &self.source {
            Source::Samples(s) => s,
            Source::Lazy(lazy) => self.all.get_or_init(|| {
                let mut out = Vec::with_capacity(self.len);
                lazy.lock().unwrap_or_else(|e| e.into_inner()).extend(0..self.len, &mut out);
                out
            }),
        }
    }

    /// The distinct pages the plan reads, ascending (ids `pages` does not map are skipped).
    pub fn pages_touched(&self, pages: &PageMap) -> Vec<u64> {
        let mut touched: Vec<u64> = self.samples().iter().filter_map(|&id| pages.page(id)).collect();
        touched.sort_unstable();
        touched.dedup();
        touched
    }
}

impl Clone for EpochPlan {
    /// A copy holding every sample id.
    fn clone(&self) -> Self {
        EpochPlan::of_samples(self.samples().to_vec(), self.batch_size)
    }
}

impl PartialEq for EpochPlan {
    fn eq(&self, other: &Self) -> bool {
        self.batch_size == other.batch_size && self.len == other.len && self.samples() == other.samples()
    }
}

impl Eq for EpochPlan {}

impl std::fmt::Debug for EpochPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let generated = matches!(self.source, Source::Lazy(_)) && self.all.get().is_none();
        f.debug_struct("EpochPlan")
            .field("len", &self.len)
            .field("batch_size", &self.batch_size)
            .field("generated_as_read", &generated)
            .finish()
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
    Ok(EpochPlan::of_samples(samples, ctx.batch_size))
}

#[cfg(test)]
mod tests {
    use beton_dataset::IndexSet;

    use super::super::sequence::IdsView;
    use super::super::{Ctx, OrderOption};
    use super::*;

    #[test]
    fn lazy_plans_hand_out_the_computed_batches() {
        let indices: IndexSet = (0..500).filter(|i| i % 7 != 3).collect();
        let pages = PageMap::from_pages((0..500).map(|i| (i / 9) ^ 1).collect());
        // A map from the plan's ids to rows (the loader's list with repeats maps positions).
        let rows: Arc<Vec<u64>> = Arc::new((0..500).map(|i| 1000 + i).collect());
        let orders = [
            OrderOption::Sequential,
            OrderOption::Random,
            OrderOption::FfcvRandom,
            OrderOption::QuasiRandom { buffer_pages: None },
            OrderOption::QuasiRandom { buffer_pages: Some(2) },
        ];
        for order in orders {
            for world in 1..=3 {
                for rank in 0..world {
                    for drop_last in [false, true] {
                        let ctx = EpochContext {
                            indices: &indices,
                            pages: &pages,
                            seed: 9,
                            epoch: 1,
                            batch_size: 16,
                        };
                        let want = plan_epoch(&order, &ctx, rank, world, drop_last).unwrap();
                        let lazy = |rows| {
                            let c = Ctx { seed: 9, epoch: 1, batch_size: 16 };
                            let seq = order.rank_seq(IdsView::of(&indices), &pages, c, rank, world);
                            EpochPlan::lazy(seq, Ids::Set(Arc::new(indices.clone())), rows, 16, drop_last)
                        };
                        let plan = lazy(None);
                        assert_eq!((plan.len(), plan.num_batches()), (want.len(), want.num_batches()));
                        // Batches read back to front (generated as far as the last at once).
                        for b in (0..plan.num_batches()).rev() {
                            let mut out = vec![7];
                            plan.batch_into(b, &mut out);
                            assert_eq!(&out[1..], want.batch(b), "{order:?} rank {rank}/{world} batch {b}");
                        }
                        assert_eq!(plan, want);
                        assert_eq!(plan.clone(), want);
                        let mapped = lazy(Some(Arc::clone(&rows)));
                        let want_rows: Vec<u64> = want.samples().iter().map(|&id| 1000 + id).collect();
                        assert_eq!(mapped.samples(), want_rows);
                    }
                }
            }
        }
    }

    #[test]
    fn batches_cut_the_plan() {
        let plan = EpochPlan::of_samples((0..10).collect(), 4);
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
        EpochPlan::of_samples((0..10).collect(), 4).batch(3);
    }
}
