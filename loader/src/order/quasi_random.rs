//! QUASI_RANDOM: FFCV's page-local shuffle through a buffer of pages, on one rank or many.
//!
//! The algorithm and its distributed form are described in the [order module docs](super).
//! Grouping by page is a counting sort over the dense page ids of the [`PageMap`] (a comparison
//! sort when the map has many more pages than the epoch has ids); the walk is O(ids + pages)
//! with one bounded draw per id for the within-page shuffles and one per id for the buffer.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::context::EpochContext;
use super::strided::strided_split;
use crate::pages::PageMap;
use crate::random::{lane, Stream};

/// Counting sort while the page map has at most this many pages per id of the epoch (plus
/// [`COUNTING_SORT_SLACK`]): beyond, a sort of the ids is cheaper than a pass over every page.
const COUNTING_SORT_PAGES_PER_ID: u64 = 4;
const COUNTING_SORT_SLACK: u64 = 1024;

/// Ids grouped by page, pages ascending, ids ascending within a page, no empty page: group `g`
/// is `ids[starts[g]..starts[g + 1]]`.
#[derive(Debug, PartialEq, Eq)]
struct Groups {
    starts: Vec<usize>,
    ids: Vec<u64>,
}

impl Groups {
    fn len(&self) -> usize {
        self.starts.len() - 1
    }

    fn size(&self, g: usize) -> usize {
        self.starts[g + 1] - self.starts[g]
    }

    /// The groups whose `keep` is true, in the same order.
    fn select(&self, keep: impl Fn(usize) -> bool) -> Groups {
        let mut out = Groups { starts: vec![0], ids: Vec::new() };
        for g in (0..self.len()).filter(|&g| keep(g)) {
            out.ids.extend_from_slice(&self.ids[self.starts[g]..self.starts[g + 1]]);
            out.starts.push(out.ids.len());
        }
        out
    }
}

/// Groups strictly increasing `ids` by page; every id must be mapped.
fn group_by_page(ids: &[u64], pages: &PageMap) -> Groups {
    let budget =
        (ids.len() as u64).saturating_mul(COUNTING_SORT_PAGES_PER_ID).saturating_add(COUNTING_SORT_SLACK);
    if pages.num_pages() <= budget {
        group_by_counting(ids, pages)
    } else {
        group_by_sorting(ids, pages)
    }
}

fn group_by_counting(ids: &[u64], pages: &PageMap) -> Groups {
    // offsets[p]: ids on page p, then where page p's next id goes.
    let mut offsets = vec![0usize; pages.num_pages() as usize];
    for &id in ids {
        offsets[pages.page_unchecked(id) as usize] += 1;
    }
    let mut starts = Vec::new();
    let mut at = 0;
    for o in offsets.iter_mut() {
        let count = *o;
        if count > 0 {
            starts.push(at);
        }
        *o = at;
        at += count;
    }
    starts.push(at);
    let mut grouped = vec![0u64; ids.len()];
    for &id in ids {
        let o = &mut offsets[pages.page_unchecked(id) as usize];
        grouped[*o] = id;
        *o += 1;
    }
    Groups { starts, ids: grouped }
}

fn group_by_sorting(ids: &[u64], pages: &PageMap) -> Groups {
    let mut keyed: Vec<(u64, u64)> = ids.iter().map(|&id| (pages.page_unchecked(id), id)).collect();
    keyed.sort_unstable();
    let mut starts = vec![0];
    for i in 1..keyed.len() {
        if keyed[i].0 != keyed[i - 1].0 {
            starts.push(i);
        }
    }
    if keyed.is_empty() {
        starts.clear();
        starts.push(0);
    } else {
        starts.push(keyed.len());
    }
    Groups { starts, ids: keyed.into_iter().map(|(_, id)| id).collect() }
}

/// FFCV's `generate_order_inner` over `groups`: shuffle each page's ids (pages ascending),
/// permute the pages, then draw through a buffer of at most `buffer_pages` (≥ 1) pages.
fn walk(mut groups: Groups, buffer_pages: usize, mut stream: Stream) -> Vec<u64> {
    let n = groups.ids.len();
    for g in 0..groups.len() {
        stream.shuffle(&mut groups.ids[groups.starts[g]..groups.starts[g + 1]]);
    }
    let mut page_order: Vec<usize> = (0..groups.len()).collect();
    stream.shuffle(&mut page_order);
    let mut next_page = page_order.into_iter();
    // (next position, end) of each buffered page.
    let mut buffer: Vec<(usize, usize)> = Vec::with_capacity(buffer_pages.min(groups.len()));
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        while buffer.len() < buffer_pages {
            let Some(g) = next_page.next() else { break };
            buffer.push((groups.starts[g], groups.starts[g + 1]));
        }
        // Groups are never empty, so ids left means a non-empty buffer.
        let k = stream.below(buffer.len() as u64) as usize;
        let (at, end) = &mut buffer[k];
        out.push(groups.ids[*at]);
        *at += 1;
        if at == end {
            buffer.swap_remove(k);
        }
    }
    out
}

/// The single-process QUASI_RANDOM order of an epoch.
pub(super) fn order(ctx: &EpochContext<'_>, buffer_pages: usize) -> Vec<u64> {
    let groups = group_by_page(ctx.indices.as_slice(), ctx.pages);
    walk(groups, buffer_pages, Stream::new(ctx.seed, ctx.epoch, lane::QUASI_RANDOM))
}

/// Which rank reads each group: the groups in a `(seed, epoch)` permutation, each to the rank
/// with the fewest ids so far, ties to the lowest rank. Returns the owners and each rank's ids.
fn assign(groups: &Groups, seed: u64, epoch: u64, world_size: usize) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..groups.len()).collect();
    Stream::new(seed, epoch, lane::ASSIGN_PAGES).shuffle(&mut order);
    let mut owner = vec![0; groups.len()];
    let mut load: BinaryHeap<Reverse<(usize, usize)>> = (0..world_size).map(|r| Reverse((0, r))).collect();
    let mut totals = vec![0; world_size];
    for g in order {
        let Some(Reverse((ids, rank))) = load.pop() else { break };
        owner[g] = rank;
        totals[rank] = ids + groups.size(g);
        load.push(Reverse((totals[rank], rank)));
    }
    (owner, totals)
}

/// Rank `rank`'s QUASI_RANDOM sequence: its own pages, padded from its own start to the longest
/// rank's length (see the [module docs](super)).
pub(super) fn rank_order(
    ctx: &EpochContext<'_>,
    buffer_pages: usize,
    rank: usize,
    world_size: usize,
) -> Vec<u64> {
    if world_size == 1 {
        return order(ctx, buffer_pages);
    }
    let groups = group_by_page(ctx.indices.as_slice(), ctx.pages);
    if groups.len() < world_size {
        let single = walk(groups, buffer_pages, Stream::new(ctx.seed, ctx.epoch, lane::QUASI_RANDOM));
        return strided_split(&single, rank, world_size);
    }
    let (owner, totals) = assign(&groups, ctx.seed, ctx.epoch, world_size);
    let mine = groups.select(|g| owner[g] == rank);
    drop(groups);
    let stream = Stream::new(ctx.seed, ctx.epoch, lane::QUASI_RANDOM.wrapping_add(rank as u64));
    let mut seq = walk(mine, buffer_pages, stream);
    let own = seq.len();
    let longest = totals.iter().copied().max().unwrap_or(0);
    // own > 0: with at least as many pages as ranks, every rank's first pick is a page.
    for i in own..longest {
        seq.push(seq[i % own]);
    }
    seq
}

#[cfg(test)]
mod tests {
    use beton_dataset::IndexSet;
    use proptest::prelude::*;

    use super::*;

    fn ctx<'a>(indices: &'a IndexSet, pages: &'a PageMap, seed: u64, epoch: u64) -> EpochContext<'a> {
        EpochContext { indices, pages, seed, epoch, batch_size: 1 }
    }

    /// 20 samples, 4 a page (pages 0..5), with sample 13 left out of the set.
    fn fixture() -> (IndexSet, PageMap) {
        let indices: IndexSet = (0..20u64).filter(|&i| i != 13).collect();
        (indices, PageMap::from_pages((0..20).map(|i| i / 4).collect()))
    }

    #[test]
    fn golden_quasi_random_orders() {
        let (indices, pages) = fixture();
        assert_eq!(order(&ctx(&indices, &pages, 0, 0), 2), GOLDEN_0_0_B2);
        assert_eq!(order(&ctx(&indices, &pages, 0, 1), 2), GOLDEN_0_1_B2);
        assert_eq!(order(&ctx(&indices, &pages, 7, 0), 3), GOLDEN_7_0_B3);
    }

    const GOLDEN_0_0_B2: [u64; 19] = [15, 0, 12, 14, 2, 10, 3, 1, 9, 8, 11, 6, 7, 4, 5, 18, 19, 17, 16];
    const GOLDEN_0_1_B2: [u64; 19] = [0, 2, 3, 4, 1, 14, 5, 12, 7, 15, 6, 19, 9, 16, 8, 18, 17, 11, 10];
    const GOLDEN_7_0_B3: [u64; 19] = [2, 3, 0, 10, 1, 4, 11, 7, 6, 14, 5, 15, 12, 17, 19, 9, 8, 18, 16];

    #[test]
    fn golden_quasi_random_distributed() {
        let (indices, pages) = fixture();
        let c = ctx(&indices, &pages, 0, 0);
        // Rank 0 reads pages 3, 0 and 2 (11 ids), rank 1 pages 1 and 4 (8 ids), then its own
        // first 3 again.
        assert_eq!(rank_order(&c, 2, 0, 2), GOLDEN_0_0_B2_RANK0);
        assert_eq!(rank_order(&c, 2, 1, 2), GOLDEN_0_0_B2_RANK1);
    }

    const GOLDEN_0_0_B2_RANK0: [u64; 11] = [14, 12, 15, 0, 10, 2, 11, 8, 3, 9, 1];
    const GOLDEN_0_0_B2_RANK1: [u64; 11] = [5, 6, 7, 16, 4, 18, 17, 19, 5, 6, 7];

    #[test]
    fn one_page_at_a_time_reads_pages_whole() {
        let (indices, pages) = fixture();
        let seq = order(&ctx(&indices, &pages, 3, 0), 1);
        let runs: Vec<u64> = seq.iter().map(|&id| pages.page(id).unwrap()).collect();
        let mut seen = runs.clone();
        seen.dedup();
        assert_eq!(seen.len(), 5, "each page one contiguous run: {runs:?}");
    }

    #[test]
    fn fewer_pages_than_ranks_falls_back_to_the_strided_split() {
        let indices = IndexSet::all(10);
        let pages = PageMap::from_pages(vec![0; 10]);
        let c = ctx(&indices, &pages, 1, 0);
        let single = order(&c, 2);
        for r in 0..3 {
            assert_eq!(rank_order(&c, 2, r, 3), strided_split(&single, r, 3));
        }
    }

    #[test]
    fn greedy_assignment_balances_by_ids() {
        // Pages of 5, 1, 1, 1, 1, 1 ids on 2 ranks: whatever the permutation, the ranks differ
        // by at most the largest page, and each total is the sum of its pages.
        let ids: Vec<u64> = (0..10).collect();
        let map = PageMap::from_pages(vec![0, 0, 0, 0, 0, 1, 2, 3, 4, 5]);
        let groups = group_by_page(&ids, &map);
        for seed in 0..50 {
            let (owner, totals) = assign(&groups, seed, 0, 2);
            assert_eq!(totals.iter().sum::<usize>(), 10);
            assert!(totals[0].abs_diff(totals[1]) <= 5, "{totals:?}");
            for (r, &t) in totals.iter().enumerate() {
                let sum: usize = (0..groups.len()).filter(|&g| owner[g] == r).map(|g| groups.size(g)).sum();
                assert_eq!(sum, t);
            }
        }
    }

    #[test]
    fn empty_set_groups_to_nothing() {
        let map = PageMap::from_pages(vec![3; 4]);
        assert_eq!(group_by_counting(&[], &map), group_by_sorting(&[], &map));
        assert_eq!(group_by_counting(&[], &map).len(), 0);
    }

    proptest! {
        #[test]
        fn counting_and_sorting_group_alike(
            ids in proptest::collection::btree_set(0u64..500, 0..300),
            map in proptest::collection::vec(0u64..40, 500),
        ) {
            let ids: Vec<u64> = ids.into_iter().collect();
            let map = PageMap::from_pages(map);
            let a = group_by_counting(&ids, &map);
            prop_assert_eq!(&a, &group_by_sorting(&ids, &map));
            for g in 0..a.len() {
                let run = &a.ids[a.starts[g]..a.starts[g + 1]];
                prop_assert!(!run.is_empty());
                prop_assert!(run.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(run.iter().all(|&id| map.page(id) == map.page(run[0])));
            }
        }
    }
}
