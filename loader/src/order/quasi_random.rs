//! QUASI_RANDOM: FFCV's page-local shuffle through a buffer of pages, on one rank or many.
//!
//! The algorithm and its distributed form are described in the [order module docs](super):
//! shuffle the ids of every page (pages ascending), permute the pages, then draw through a buffer
//! of pages, all from one stream. Here it runs over positions among the epoch's ids, and lazily:
//!
//! - **Grouping** ([`Groups`]): a page map stored as runs (any file laid out in order) gives each
//!   page's positions as one range, found by a binary search per page, O(pages); other maps go
//!   through a counting sort (a comparison sort when the map has many more pages than the epoch
//!   has ids) into a grouped array of positions.
//! - **Page shuffles when a page opens** ([`Walk`]): the stream's draws for each page's shuffle
//!   are where they would be had every page been shuffled first. One pass over the stream finds
//!   where each page's draws start ([`Stream::word_pos`]) without shuffling anything (each draw's
//!   rejections, rare as they are, are counted); the pages are then permuted from where that
//!   pass ends, and a page's shuffle is stepped, from its own seeked copy of the stream, only as
//!   the buffer walk takes its ids. The walk's sequence is the same as the eager one (the
//!   differential tests check it against the old whole-epoch code, kept in `reference.rs`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::sequence::{IdsView, PosArray, Positions, RankSeq, Slots, View};
use crate::pages::PageMap;
use crate::random::{lane, Stream};

/// Counting sort while the page map has at most this many pages per id of the epoch (plus
/// [`COUNTING_SORT_SLACK`]): beyond, a sort of the ids is cheaper than a pass over every page.
const COUNTING_SORT_PAGES_PER_ID: u64 = 4;
const COUNTING_SORT_SLACK: u64 = 1024;

/// The epoch's positions grouped by page, pages ascending, positions ascending within a page,
/// no empty group: group `g` is slots `ranges[g].0..ranges[g].0 + ranges[g].1` of `slots`.
pub(crate) struct Groups {
    ranges: Vec<(usize, usize)>,
    /// The grouped positions, or `None` when slot `s` holds position `s` (pages as runs).
    grouped: Option<PosArray>,
    /// Positions in all.
    n: usize,
}

impl Groups {
    fn len(&self) -> usize {
        self.ranges.len()
    }

    fn slots(&mut self) -> PosArray {
        self.grouped.take().unwrap_or_else(|| PosArray::identity(self.n))
    }
}

/// Groups the positions of `ids` by page.
///
/// # Panics
/// If an id is not mapped by `pages` ([`plan_epoch`](super::plan_epoch) checks it first).
pub(crate) fn group(ids: IdsView<'_>, pages: &PageMap) -> Groups {
    let n = ids.len();
    if let Some(bounds) = pages.runs() {
        let mapped = pages.num_samples();
        assert!(ids.rank_of(mapped) == n, "an id is past the page map of {mapped} samples");
        let mut ranges = Vec::new();
        let mut lo = 0;
        for &end in bounds.iter().skip(1) {
            let hi = ids.rank_of(end);
            if hi > lo {
                ranges.push((lo, hi - lo));
            }
            lo = hi;
        }
        return Groups { ranges, grouped: None, n };
    }
    // Pages that never decrease along the ids: runs of positions all the same.
    let page = |k: usize| pages.page_unchecked(ids.get(k as u64));
    if (1..n).all(|k| page(k - 1) <= page(k)) {
        let mut ranges = Vec::new();
        let mut lo = 0;
        for k in 1..=n {
            if k == n || page(k) != page(lo) {
                ranges.push((lo, k - lo));
                lo = k;
            }
        }
        return Groups { ranges, grouped: None, n };
    }
    let budget = (n as u64).saturating_mul(COUNTING_SORT_PAGES_PER_ID).saturating_add(COUNTING_SORT_SLACK);
    let (ranges, grouped) = if pages.num_pages() <= budget {
        group_by_counting(n, page, pages)
    } else {
        group_by_sorting(n, page)
    };
    Groups { ranges, grouped: Some(PosArray::from_values(grouped.into_iter(), n)), n }
}

/// Group ranges and grouped positions, by a counting sort over the map's page ids.
fn group_by_counting(
    n: usize,
    page: impl Fn(usize) -> u64,
    pages: &PageMap,
) -> (Vec<(usize, usize)>, Vec<u64>) {
    // offsets[p]: positions on page p, then where page p's next position goes.
    let mut offsets = vec![0usize; pages.num_pages() as usize];
    for k in 0..n {
        offsets[page(k) as usize] += 1;
    }
    let mut ranges = Vec::new();
    let mut at = 0;
    for o in offsets.iter_mut() {
        let count = *o;
        if count > 0 {
            ranges.push((at, count));
        }
        *o = at;
        at += count;
    }
    let mut grouped = vec![0u64; n];
    for k in 0..n {
        let o = &mut offsets[page(k) as usize];
        grouped[*o] = k as u64;
        *o += 1;
    }
    (ranges, grouped)
}

/// The same by sorting `(page, position)` pairs.
fn group_by_sorting(n: usize, page: impl Fn(usize) -> u64) -> (Vec<(usize, usize)>, Vec<u64>) {
    let mut keyed: Vec<(u64, u64)> = (0..n).map(|k| (page(k), k as u64)).collect();
    keyed.sort_unstable();
    let mut ranges = Vec::new();
    let mut lo = 0;
    for k in 1..=keyed.len() {
        if k == keyed.len() || keyed[k].0 != keyed[lo].0 {
            ranges.push((lo, k - lo));
            lo = k;
        }
    }
    (ranges, keyed.into_iter().map(|(_, k)| k).collect())
}

/// FFCV's `generate_order_inner` over some groups, generated as it is read: see the
/// [module docs](self).
pub(crate) struct Walk {
    /// The groups walked (every group, or one rank's), ascending.
    ranges: Vec<(usize, usize)>,
    slots: PosArray,
    buffer_pages: usize,
    /// The walk's stream, as `Stream::new(seed, epoch, lane)`.
    seed: u64,
    epoch: u64,
    lane: u64,
    len: usize,
    running: Option<Running>,
}

/// A walk under way.
struct Running {
    /// Where each group's shuffle draws start in the stream.
    starts: Vec<u128>,
    /// The buffer walk's draws (after every page shuffle and the page permutation).
    stream: Stream,
    page_order: Vec<usize>,
    next_page: usize,
    buffer: Vec<Open>,
    /// The positions handed out so far, in order (in 32 bits where they fit).
    out: Slots,
}

/// A buffered page: its group, the next of its slots to hand out, its shuffle's stream.
struct Open {
    group: usize,
    at: usize,
    stream: Stream,
}

impl Walk {
    /// The walk over `ranges` of `slots` with the stream of `(seed, epoch, lane)`, nothing
    /// drawn yet.
    fn new(
        ranges: Vec<(usize, usize)>,
        slots: PosArray,
        buffer_pages: usize,
        seed: u64,
        epoch: u64,
        lane: u64,
    ) -> Self {
        let len = ranges.iter().map(|r| r.1).sum();
        Walk { ranges, slots, buffer_pages: buffer_pages.max(1), seed, epoch, lane, len, running: None }
    }

    fn start(&self) -> Running {
        let new = || Stream::new(self.seed, self.epoch, self.lane);
        let (starts, mut stream) = shuffle_starts(&self.ranges, new, |s: &mut Stream, m| {
            s.below(m);
        });
        let mut page_order: Vec<usize> = (0..self.ranges.len()).collect();
        stream.shuffle(&mut page_order);
        let out = Slots::for_positions(self.slots.len());
        Running { starts, stream, page_order, next_page: 0, buffer: Vec::new(), out }
    }

    /// Hands out the walk's next position.
    fn step(&mut self) {
        let Some(r) = self.running.as_mut() else { return };
        while r.buffer.len() < self.buffer_pages {
            let Some(&group) = r.page_order.get(r.next_page) else { break };
            r.next_page += 1;
            let mut stream = Stream::new(self.seed, self.epoch, self.lane);
            stream.seek(r.starts[group]);
            r.buffer.push(Open { group, at: 0, stream });
        }
        // Groups are never empty, so positions left means a non-empty buffer.
        let k = r.stream.below(r.buffer.len() as u64) as usize;
        let open = &mut r.buffer[k];
        let (start, len) = self.ranges[open.group];
        // The page's shuffle, one step: position `at` is final once step `at` is done.
        if open.at + 1 < len {
            let j = open.at + open.stream.below((len - open.at) as u64) as usize;
            self.slots.swap(start + open.at, start + j);
        }
        r.out.push(self.slots.get(start + open.at));
        open.at += 1;
        if open.at == len {
            r.buffer.swap_remove(k);
        }
    }
}

impl Positions for Walk {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&mut self, k: usize) -> u64 {
        if self.running.is_none() {
            self.running = Some(self.start());
        }
        while self.running.as_ref().is_some_and(|r| r.out.len() <= k) {
            self.step();
        }
        self.running.as_ref().map_or(0, |r| r.out.get(k))
    }
}

/// Draws below which the page shuffles' starts are found on one thread.
const PARALLEL_DRAWS: u64 = 1 << 22;

/// Where each group's shuffle starts in the stream `new()` makes (its draws made and dropped:
/// `Stream::shuffle` draws `below(len - i)` for `i` in `0..len - 1`), and the stream after them.
///
/// On several threads when there are many draws: a draw takes one 64-bit word (two 32-bit
/// words of the keystream) unless it rejects one, which is rare (a chance below `len / 2^64`),
/// so each thread seeks to where its groups would start had nothing before them been
/// rejected, and finds their starts; a thread whose guess a rejection before it proved wrong
/// is done again from the right place. The result is the one pass's, whichever way.
/// `draw(stream, m)` makes one draw below `m` (a parameter so that the tests can make rejections
/// common).
fn shuffle_starts(
    ranges: &[(usize, usize)],
    new: impl Fn() -> Stream + Sync,
    draw: impl Fn(&mut Stream, u64) + Sync,
) -> (Vec<u128>, Stream) {
    let draws = |g: &[(usize, usize)]| g.iter().map(|&(_, len)| len.saturating_sub(1) as u64).sum::<u64>();
    // Starts of `groups` from `at`, and where the stream ends.
    let run = |groups: &[(usize, usize)], at: u128| -> (Vec<u128>, u128) {
        let mut stream = new();
        stream.seek(at);
        let mut starts = Vec::with_capacity(groups.len());
        for &(_, len) in groups {
            starts.push(stream.word_pos());
            for m in (2..=len as u64).rev() {
                draw(&mut stream, m);
            }
        }
        (starts, stream.word_pos())
    };
    let total = draws(ranges);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(16);
    let (starts, end) = if threads < 2 || total < PARALLEL_DRAWS {
        run(ranges, 0)
    } else {
        // Cut the groups into `threads` parts of about equal draws, each guessing its start.
        let mut parts: Vec<(&[(usize, usize)], u128)> = Vec::new();
        let (mut from, mut acc, mut before) = (0, 0u64, 0u64);
        for (g, &(_, len)) in ranges.iter().enumerate() {
            acc += len.saturating_sub(1) as u64;
            if acc * threads as u64 >= total * (parts.len() as u64 + 1) || g + 1 == ranges.len() {
                parts.push((&ranges[from..=g], 2 * u128::from(before)));
                (from, before) = (g + 1, acc);
            }
        }
        let guessed: Vec<Option<(Vec<u128>, u128)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = parts
                .iter()
                .map(|&(groups, at)| {
                    std::thread::Builder::new().spawn_scoped(scope, move || run(groups, at)).ok()
                })
                .collect();
            handles.into_iter().map(|h| h.and_then(|h| h.join().ok())).collect()
        });
        let mut starts = Vec::with_capacity(ranges.len());
        let mut at = 0u128;
        for ((groups, guess), done) in parts.iter().zip(guessed) {
            let (part, end) = match done {
                Some(result) if *guess == at => result,
                // A rejection before this part (or no thread for it): from where it starts.
                _ => run(groups, at),
            };
            starts.extend(part);
            at = end;
        }
        (starts, at)
    };
    let mut stream = new();
    stream.seek(end);
    (starts, stream)
}

/// Which rank reads each group: the groups in a `(seed, epoch)` permutation, each to the rank
/// with the fewest ids so far, ties to the lowest rank. Returns the owners and each rank's ids.
fn assign(sizes: &[usize], seed: u64, epoch: u64, world_size: usize) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    Stream::new(seed, epoch, lane::ASSIGN_PAGES).shuffle(&mut order);
    let mut owner = vec![0; sizes.len()];
    let mut load: BinaryHeap<Reverse<(usize, usize)>> = (0..world_size).map(|r| Reverse((0, r))).collect();
    let mut totals = vec![0; world_size];
    for g in order {
        let Some(Reverse((ids, rank))) = load.pop() else { break };
        owner[g] = rank;
        totals[rank] = ids + sizes[g];
        load.push(Reverse((totals[rank], rank)));
    }
    (owner, totals)
}

/// Rank `rank`'s QUASI_RANDOM sequence of positions among `ids`: on one rank the walk over every
/// page; on several, its own pages' walk padded from its own start to the longest rank's length
/// (see the [module docs](super)). Nothing is drawn until it is read.
pub(crate) fn rank_seq(
    ids: IdsView<'_>,
    pages: &PageMap,
    (seed, epoch): (u64, u64),
    buffer_pages: usize,
    rank: usize,
    world_size: usize,
) -> RankSeq {
    let mut groups = group(ids, pages);
    let slots = groups.slots();
    if world_size == 1 || groups.len() < world_size {
        let walk = Walk::new(groups.ranges, slots, buffer_pages, seed, epoch, lane::QUASI_RANDOM);
        return RankSeq::strided(Box::new(walk), rank, world_size);
    }
    let sizes: Vec<usize> = groups.ranges.iter().map(|r| r.1).collect();
    let (owner, totals) = assign(&sizes, seed, epoch, world_size);
    let mine: Vec<(usize, usize)> =
        groups.ranges.iter().zip(&owner).filter(|(_, &o)| o == rank).map(|(&r, _)| r).collect();
    let stream_lane = lane::QUASI_RANDOM.wrapping_add(rank as u64);
    let walk = Box::new(Walk::new(mine, slots, buffer_pages, seed, epoch, stream_lane));
    let own = totals[rank];
    let longest = totals.iter().copied().max().unwrap_or(0);
    // own > 0: with at least as many pages as ranks, every rank gets a page.
    RankSeq::new(walk, View::Padded { own: own.max(1) }, longest)
}

#[cfg(test)]
mod tests {
    use beton_dataset::IndexSet;
    use proptest::prelude::*;

    use super::super::context::EpochContext;
    use super::super::reference;
    use super::*;

    fn ctx<'a>(indices: &'a IndexSet, pages: &'a PageMap, seed: u64, epoch: u64) -> EpochContext<'a> {
        EpochContext { indices, pages, seed, epoch, batch_size: 1 }
    }

    /// Rank `rank`'s ids, read whole.
    fn rank_order(c: &EpochContext<'_>, buffer: usize, rank: usize, world: usize) -> Vec<u64> {
        let ids = IdsView::of(c.indices);
        let mut s = rank_seq(ids, c.pages, (c.seed, c.epoch), buffer, rank, world);
        (0..s.len()).map(|k| ids.get(s.get(k))).collect()
    }

    fn order(c: &EpochContext<'_>, buffer: usize) -> Vec<u64> {
        rank_order(c, buffer, 0, 1)
    }

    /// 20 samples, 4 a page (pages 0..5), with sample 13 left out of the set.
    fn fixture() -> (IndexSet, PageMap) {
        let indices: IndexSet = (0..20u64).filter(|&i| i != 13).collect();
        (indices, PageMap::from_pages((0..20).map(|i| i / 4).collect()))
    }

    /// The same pages as one id a sample, numbered backwards (not runs).
    fn fixture_per_sample() -> PageMap {
        PageMap::from_pages((0..20u64).map(|i| [9, 7, 5, 3, 1][i as usize / 4]).collect())
    }

    #[test]
    fn golden_quasi_random_orders() {
        let (indices, pages) = fixture();
        assert!(pages.runs().is_some());
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
        for map in [pages, fixture_per_sample()] {
            let seq = order(&ctx(&indices, &map, 3, 0), 1);
            let runs: Vec<u64> = seq.iter().map(|&id| map.page(id).unwrap()).collect();
            let mut seen = runs.clone();
            seen.dedup();
            assert_eq!(seen.len(), 5, "each page one contiguous run: {runs:?}");
        }
    }

    #[test]
    fn fewer_pages_than_ranks_falls_back_to_the_strided_split() {
        let indices = IndexSet::all(10);
        let pages = PageMap::from_pages(vec![0; 10]);
        let c = ctx(&indices, &pages, 1, 0);
        let single = order(&c, 2);
        for r in 0..3 {
            assert_eq!(rank_order(&c, 2, r, 3), reference::strided_split(&single, r, 3));
        }
    }

    #[test]
    fn shuffle_starts_on_many_threads_are_the_one_pass() {
        // Many draws (past PARALLEL_DRAWS) in groups of assorted sizes; with real draws (no
        // rejection in practice) and with draws that take a second word now and then (a
        // rejection: every later part's guess is wrong and is done again).
        let mut ranges: Vec<(usize, usize)> = (0..300).map(|g| (0, 1 + (g * 7919) % 40_000)).collect();
        ranges.insert(150, (0, 0));
        assert!(ranges.iter().map(|r| r.1 as u64).sum::<u64>() > PARALLEL_DRAWS);
        let new = || Stream::new(3, 1, lane::QUASI_RANDOM);
        let real = |s: &mut Stream, m: u64| {
            s.below(m);
        };
        let rejecting = |s: &mut Stream, m: u64| {
            if s.below(m) == 0 {
                s.next_u64();
            }
        };
        for draw in [&real as &(dyn Fn(&mut Stream, u64) + Sync), &rejecting] {
            let (starts, mut stream) = shuffle_starts(&ranges, new, draw);
            let mut one = new();
            for (g, &(_, len)) in ranges.iter().enumerate() {
                assert_eq!(starts[g], one.word_pos(), "group {g}");
                for m in (2..=len as u64).rev() {
                    draw(&mut one, m);
                }
            }
            assert_eq!(stream.next_u64(), one.next_u64());
        }
    }

    #[test]
    fn greedy_assignment_balances_by_ids() {
        // Pages of 5, 1, 1, 1, 1, 1 ids on 2 ranks: whatever the permutation, the ranks differ
        // by at most the largest page, and each total is the sum of its pages.
        let sizes = [5, 1, 1, 1, 1, 1];
        for seed in 0..50 {
            let (owner, totals) = assign(&sizes, seed, 0, 2);
            assert_eq!(totals.iter().sum::<usize>(), 10);
            assert!(totals[0].abs_diff(totals[1]) <= 5, "{totals:?}");
            for (r, &t) in totals.iter().enumerate() {
                let sum: usize = (0..sizes.len()).filter(|&g| owner[g] == r).map(|g| sizes[g]).sum();
                assert_eq!(sum, t);
            }
        }
    }

    #[test]
    fn empty_set_groups_to_nothing() {
        let map = PageMap::from_pages(vec![3, 1, 2, 0]);
        let none: IndexSet = IndexSet::empty();
        assert_eq!(group(IdsView::of(&none), &map).len(), 0);
        assert_eq!(group(IdsView::All(0), &PageMap::from_pages(vec![])).len(), 0);
        assert_eq!(group_by_counting(0, |_| 0, &map), group_by_sorting(0, |_| 0));
    }

    fn pages_strategy() -> impl Strategy<Value = PageMap> {
        prop_oneof![
            proptest::collection::vec(0u64..40, 500).prop_map(PageMap::from_pages),
            (1u64..60).prop_map(|len| PageMap::from_pages((0..500).map(|i| i / len).collect())),
        ]
    }

    proptest! {
        #[test]
        fn counting_and_sorting_group_alike(
            ids in proptest::collection::btree_set(0u64..500, 0..300),
            map in proptest::collection::vec(0u64..40, 500),
        ) {
            let ids: Vec<u64> = ids.into_iter().collect();
            let map = PageMap::from_pages(map);
            let page = |k: usize| map.page_unchecked(ids[k]);
            let a = group_by_counting(ids.len(), page, &map);
            prop_assert_eq!(&a, &group_by_sorting(ids.len(), page));
            for &(start, len) in &a.0 {
                let run = &a.1[start..start + len];
                prop_assert!(len > 0);
                prop_assert!(run.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(run.iter().all(|&k| page(k as usize) == page(run[0] as usize)));
            }
        }

        /// The lazy walk is the whole-epoch walk it replaced, on one rank or many, whatever the
        /// map's form, read in any order.
        #[test]
        fn lazy_walks_are_the_eager_ones(
            ids in proptest::collection::btree_set(0u64..500, 0..400),
            pages in pages_strategy(),
            buffer in 1usize..12,
            world in 1usize..5,
            seed in any::<u64>(),
            epoch in 0u64..3,
            reads in proptest::collection::vec(0usize..400, 0..10),
        ) {
            let indices: IndexSet = ids.into_iter().collect();
            let c = ctx(&indices, &pages, seed, epoch);
            for rank in 0..world {
                let want = reference::rank_order(&c, buffer, rank, world);
                let ids = IdsView::of(&indices);
                let mut s = rank_seq(ids, &pages, (seed, epoch), buffer, rank, world);
                prop_assert_eq!(s.len(), want.len());
                for k in reads.iter().copied().filter(|&k| k < want.len()) {
                    prop_assert_eq!(ids.get(s.get(k)), want[k]);
                }
                let got: Vec<u64> = (0..s.len()).map(|k| ids.get(s.get(k))).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
