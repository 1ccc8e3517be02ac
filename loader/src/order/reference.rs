//! The orders as they were computed before they were generated lazily (issue 39): whole, over
//! the ids, in one go. Kept as the oracle of the differential tests: the lazy walks must give
//! exactly these sequences (the golden tests pin a few; these pin every input proptest draws).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::context::EpochContext;
use crate::pages::PageMap;
use crate::random::{lane, Stream};

/// Counting sort while the page map has at most this many pages per id of the epoch (plus
/// [`COUNTING_SORT_SLACK`]): beyond, a sort of the ids is cheaper than a pass over every page.
const COUNTING_SORT_PAGES_PER_ID: u64 = 4;
const COUNTING_SORT_SLACK: u64 = 1024;

/// Ids grouped by page, pages ascending, ids ascending within a page, no empty page: group `g`
/// is `ids[starts[g]..starts[g + 1]]`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Groups {
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
pub(crate) fn group_by_page(ids: &[u64], pages: &PageMap) -> Groups {
    let budget =
        (ids.len() as u64).saturating_mul(COUNTING_SORT_PAGES_PER_ID).saturating_add(COUNTING_SORT_SLACK);
    if pages.num_pages() <= budget {
        group_by_counting(ids, pages)
    } else {
        group_by_sorting(ids, pages)
    }
}

pub(crate) fn group_by_counting(ids: &[u64], pages: &PageMap) -> Groups {
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

pub(crate) fn group_by_sorting(ids: &[u64], pages: &PageMap) -> Groups {
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
pub(crate) fn walk(mut groups: Groups, buffer_pages: usize, mut stream: Stream) -> Vec<u64> {
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
pub(crate) fn order(ctx: &EpochContext<'_>, buffer_pages: usize) -> Vec<u64> {
    let groups = group_by_page(ctx.indices.as_slice(), ctx.pages);
    walk(groups, buffer_pages, Stream::new(ctx.seed, ctx.epoch, lane::QUASI_RANDOM))
}

/// Which rank reads each group: the groups in a `(seed, epoch)` permutation, each to the rank
/// with the fewest ids so far, ties to the lowest rank. Returns the owners and each rank's ids.
pub(crate) fn assign(groups: &Groups, seed: u64, epoch: u64, world_size: usize) -> (Vec<usize>, Vec<usize>) {
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
pub(crate) fn rank_order(
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

/// PyTorch's `DistributedSampler(drop_last=False)` split of an order.
pub(crate) fn strided_split(order: &[u64], rank: usize, world_size: usize) -> Vec<u64> {
    let n = order.len();
    (0..n.div_ceil(world_size)).map(|k| order[(rank + k * world_size) % n]).collect()
}

/// RANDOM's order: the set's ids shuffled.
pub(crate) fn random(ctx: &EpochContext<'_>) -> Vec<u64> {
    ctx.indices.shuffled(crate::random::lane_seed(ctx.seed, ctx.epoch, lane::RANDOM))
}
