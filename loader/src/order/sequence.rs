//! Epoch orders generated as they are read: what lets a loader over 10^8 rows start at once.
//!
//! An order is computed over *positions* `0..n` among the epoch's ids (the `k`-th smallest id of
//! the set), then mapped to ids; shuffling positions and mapping them is the same as shuffling
//! the ids (a shuffle never looks at the values), and positions fit in 32 bits for any set of
//! fewer than 2^32 ids, where ids need 64. A [`Positions`] hands out element `k` of the order,
//! generating only as far as `k`: RANDOM's forward Fisher–Yates fixes position `i` at step `i`,
//! so the first batch costs one batch of steps, not the whole permutation.
//!
//! [`PosArray`] is where a permutation lives: one slot per position, `u32` where they fit, each
//! slot holding its value XOR its index, so that an array of zeros, which the allocator hands out
//! as untouched pages of the OS, is the identity. Building the identity costs nothing; a page is
//! only faulted in when a step writes to it.

use std::sync::Arc;

use beton_dataset::IndexSet;

/// The ids a loader reads, owned: every row `0..n` (not stored: 10^8 rows would be 800 MB of
/// ids), or a set.
#[derive(Clone, Debug)]
pub(crate) enum Ids {
    All(u64),
    Set(Arc<IndexSet>),
}

impl Ids {
    /// The ids by position.
    pub(crate) fn view(&self) -> IdsView<'_> {
        match self {
            Ids::All(n) => IdsView::All(*n),
            Ids::Set(s) => IdsView::of(s),
        }
    }
}

/// The ids an epoch orders, by position: every row `0..n` (not stored), or a set's ids.
#[derive(Clone, Copy, Debug)]
pub(crate) enum IdsView<'a> {
    /// The ids `0..n`: position and id are the same.
    All(u64),
    /// Strictly increasing ids.
    Slice(&'a [u64]),
}

impl<'a> IdsView<'a> {
    /// The ids of a set.
    pub(crate) fn of(set: &'a IndexSet) -> Self {
        IdsView::Slice(set.as_slice())
    }

    /// Number of ids.
    pub(crate) fn len(&self) -> usize {
        match *self {
            IdsView::All(n) => n as usize,
            IdsView::Slice(s) => s.len(),
        }
    }

    /// The id at `position` (< `len()`).
    #[inline]
    pub(crate) fn get(&self, position: u64) -> u64 {
        match *self {
            IdsView::All(_) => position,
            IdsView::Slice(s) => s[position as usize],
        }
    }

    /// How many ids are below `id`.
    pub(crate) fn rank_of(&self, id: u64) -> usize {
        match *self {
            IdsView::All(n) => id.min(n) as usize,
            IdsView::Slice(s) => s.partition_point(|&x| x < id),
        }
    }
}

/// One slot per position, holding a position: `u32` when every position fits, else `u64`.
#[derive(Debug)]
pub(crate) enum Slots {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl Slots {
    /// No slots yet, for positions below `n`: `u32` when they fit.
    pub(crate) fn for_positions(n: usize) -> Self {
        if fits_u32(n) {
            Slots::Narrow(Vec::new())
        } else {
            Slots::Wide(Vec::new())
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Slots::Narrow(v) => v.len(),
            Slots::Wide(v) => v.len(),
        }
    }

    /// The value stored in slot `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> u64 {
        match self {
            Slots::Narrow(v) => u64::from(v[i]),
            Slots::Wide(v) => v[i],
        }
    }

    /// Appends `value` (below the `n` of [`Slots::for_positions`], so it fits).
    pub(crate) fn push(&mut self, value: u64) {
        match self {
            Slots::Narrow(v) => v.push(value as u32),
            Slots::Wide(v) => v.push(value),
        }
    }
}

/// A permutation of positions being built in place; see the [module docs](self).
#[derive(Debug)]
pub(crate) struct PosArray {
    slots: Slots,
    /// Slot `i` stores its value XOR `i` (the identity is all zeros), or the value itself.
    relative: bool,
}

impl PosArray {
    /// The identity on `0..n`, without touching memory: a zeroed allocation (`calloc`, whose
    /// large blocks are fresh pages of the OS, faulted in when first written).
    pub(crate) fn identity(n: usize) -> Self {
        let slots = if fits_u32(n) { Slots::Narrow(vec![0; n]) } else { Slots::Wide(vec![0; n]) };
        PosArray { slots, relative: true }
    }

    /// An array holding `values` (positions below `n`) as they are.
    pub(crate) fn from_values(values: impl ExactSizeIterator<Item = u64>, n: usize) -> Self {
        let slots = if fits_u32(n) {
            Slots::Narrow(values.map(|v| v as u32).collect())
        } else {
            Slots::Wide(values.collect())
        };
        PosArray { slots, relative: false }
    }

    /// Number of slots.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The value in slot `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> u64 {
        let stored = self.slots.get(i);
        if self.relative {
            stored ^ i as u64
        } else {
            stored
        }
    }

    /// Puts `value` in slot `i`.
    #[inline]
    pub(crate) fn set(&mut self, i: usize, value: u64) {
        let stored = if self.relative { value ^ i as u64 } else { value };
        match &mut self.slots {
            // Both the value and the index are below the array's length, which fits u32.
            Slots::Narrow(v) => v[i] = stored as u32,
            Slots::Wide(v) => v[i] = stored,
        }
    }

    /// Swaps slots `i` and `j`.
    #[inline]
    pub(crate) fn swap(&mut self, i: usize, j: usize) {
        if i != j {
            let (a, b) = (self.get(i), self.get(j));
            self.set(i, b);
            self.set(j, a);
        }
    }

    /// Hints that slot `i` will be read soon (a prefetch), for walks whose next slots are known.
    #[inline]
    pub(crate) fn prefetch(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = match &self.slots {
                Slots::Narrow(v) => v.as_ptr().wrapping_add(i) as *const i8,
                Slots::Wide(v) => v.as_ptr().wrapping_add(i) as *const i8,
            };
            // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has (it is in the
            // target's baseline); a prefetch is a hint that reads nothing and never faults,
            // whatever the address, and `i` is in bounds for every caller anyway.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }
}

/// Whether every position (and slot index) of `n` slots fits in a `u32`.
fn fits_u32(n: usize) -> bool {
    n as u64 <= u64::from(u32::MAX) + 1
}

/// An epoch order generated on demand: element `k` is a position among the epoch's ids.
pub(crate) trait Positions: Send {
    /// Number of elements.
    fn len(&self) -> usize;

    /// Element `k` (`k < len()`), generating the order as far as it needs to. An element once
    /// generated never changes, so asking again (or out of order) gives the same answer.
    fn get(&mut self, k: usize) -> u64;
}

/// SEQUENTIAL: the positions in order.
pub(crate) struct Identity(pub(crate) usize);

impl Positions for Identity {
    fn len(&self) -> usize {
        self.0
    }

    fn get(&mut self, k: usize) -> u64 {
        k as u64
    }
}

/// Which elements of an order one rank reads (see the [order module docs](super)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    /// The whole order (one process, or a QUASI_RANDOM rank's own walk of exactly the longest
    /// rank's length).
    Whole,
    /// PyTorch's `DistributedSampler(drop_last=False)`: element `k` is `order[(rank + k·world) % n]`.
    Strided { rank: usize, world: usize },
    /// A QUASI_RANDOM rank's own walk of `own` elements, repeated from its start.
    Padded { own: usize },
}

/// One rank's sequence of positions: an order and the [`View`] of it the rank reads.
pub(crate) struct RankSeq {
    order: Box<dyn Positions>,
    view: View,
    len: usize,
}

impl RankSeq {
    /// The rank reads `view` of `order`, `len` elements in all.
    pub(crate) fn new(order: Box<dyn Positions>, view: View, len: usize) -> Self {
        RankSeq { order, view, len }
    }

    /// The rank's whole part of a `DistributedSampler` split of `order`.
    pub(crate) fn strided(order: Box<dyn Positions>, rank: usize, world: usize) -> Self {
        let len = order.len().div_ceil(world);
        let view = if world == 1 { View::Whole } else { View::Strided { rank, world } };
        RankSeq { order, view, len }
    }

    /// Elements the rank reads.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Element `k` (< `len()`) of the rank's sequence.
    #[inline]
    pub(crate) fn get(&mut self, k: usize) -> u64 {
        let at = match self.view {
            View::Whole => k,
            View::Strided { rank, world } => (rank + k * world) % self.order.len(),
            View::Padded { own } => k % own,
        };
        self.order.get(at)
    }

    /// Elements `range` of the rank's sequence, each mapped by `f`, appended to `out`.
    pub(crate) fn extend(
        &mut self,
        range: std::ops::Range<usize>,
        f: impl Fn(u64) -> u64,
        out: &mut Vec<u64>,
    ) {
        out.reserve(range.len());
        for k in range {
            out.push(f(self.get(k)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_array_is_zeros_and_swaps_round_trip() {
        for mut a in [PosArray::identity(10), PosArray { slots: Slots::Wide(vec![0; 10]), relative: true }] {
            assert_eq!((0..10).map(|i| a.get(i)).collect::<Vec<_>>(), (0..10).collect::<Vec<u64>>());
            a.swap(2, 7);
            a.swap(7, 7);
            a.set(0, 9);
            assert_eq!([a.get(0), a.get(2), a.get(7), a.get(9)], [9, 7, 2, 9]);
            a.prefetch(3);
        }
        let v = PosArray::from_values([5, 1, 3].into_iter(), 6);
        assert_eq!((v.len(), v.get(0), v.get(2)), (3, 5, 3));
    }

    #[test]
    fn views_read_the_documented_elements() {
        let order = || Box::new(Identity(10)) as Box<dyn Positions>;
        let take = |mut s: RankSeq| (0..s.len()).map(|k| s.get(k)).collect::<Vec<_>>();
        assert_eq!(take(RankSeq::strided(order(), 2, 4)), [2, 6, 0]);
        assert_eq!(take(RankSeq::strided(order(), 0, 1)), (0..10).collect::<Vec<_>>());
        assert_eq!(take(RankSeq::new(order(), View::Padded { own: 3 }, 7)), [0, 1, 2, 0, 1, 2, 0]);
        let mut out = vec![];
        RankSeq::strided(order(), 1, 3).extend(1..3, |p| p * 10, &mut out);
        assert_eq!(out, [40, 70]);
    }

    #[test]
    fn ids_views_agree() {
        let all = IdsView::All(5);
        let set = IndexSet::from(0..5);
        let slice = IdsView::of(&set);
        for p in 0..5 {
            assert_eq!(all.get(p), slice.get(p));
        }
        for id in 0..7 {
            assert_eq!(all.rank_of(id), slice.rank_of(id));
        }
        assert_eq!((all.len(), slice.len()), (5, 5));
    }
}
