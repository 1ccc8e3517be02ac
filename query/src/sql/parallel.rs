//! GROUP BY and ORDER BY … LIMIT on all cores (rayon): the rows cut into morsels of a fixed size,
//! each morsel worked on by whichever thread takes it, the morsels' results combined in morsel
//! order. The morsel boundaries depend on the number of rows only, never on the number of
//! threads, so every result here is the same at any thread count:
//!
//! - group ids ([`Groups::dense`]): each morsel lists its distinct key values in order of first
//!   appearance, with their rows counted; the lists, read in morsel order, number the groups in
//!   order of first appearance over the whole table (a value first seen in morsel `m` is seen in
//!   no earlier morsel). No per-row group vector is written: an aggregate looks each row's group
//!   up in a table of `max - min + 1` entries, and `count(*)` is the counts already made.
//! - aggregates ([`Groups::per_group`]): each morsel adds into its own accumulator per group, the
//!   accumulators then merged in morsel order. Counts and integer sums (in `i128`) are exact, so
//!   any order gives them; a float sum is the sum of its morsels' sums (each in row order), added
//!   in morsel order, at one thread as at many. With more than [`MAX_PARTIAL_GROUPS`] groups, one
//!   pass in row order instead (still independent of the thread count).
//! - top k ([`smallest`]): each morsel keeps its `k` smallest `(key, row)` pairs, and the `k`
//!   smallest of those are the `k` smallest overall: exactly the one-pass heap's rows, ties in row
//!   order.
//!
//! Measured against the commit before (`query/examples/group_ab.rs`, 10 M rows, 1000 labels, the
//! 2-core VM shared with builds, load about 5; medians of 6 interleaved processes of 7 rounds):
//! `GROUP BY label` with `count(*)` 70 -> 22 ms (CPU 48 -> 15 ms), with `avg(score)` too 113 -> 64
//! ms (CPU 76 -> 41 ms), on one thread as on two: the work saved is the 40 MB group vector and a
//! second read of the key. What two threads gain could not be told apart from the load there.

use std::borrow::Cow;
use std::collections::BinaryHeap;
use std::ops::Range;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef};
use arrow_buffer::ScalarBuffer;
use arrow_schema::DataType;
use rayon::prelude::*;

/// Rows per morsel, as the fused WHERE's (`fused.rs`): large enough that the per-morsel tables
/// below cost little beside the rows, small enough to spread 1 M rows over 16 threads.
pub(super) const MORSEL: usize = 64 * 1024;

/// At most this many groups take the per-morsel accumulators of [`Groups::per_group`]: a morsel's
/// accumulators then cost at most 1/16 of its rows.
pub(crate) const MAX_PARTIAL_GROUPS: usize = MORSEL / 16;

/// At most this `k` takes the per-chunk heaps of [`smallest`] (each chunk keeps `k` of at least a
/// morsel's rows, and the merge sorts `k` per chunk).
const MAX_PARALLEL_K: usize = MORSEL / 8;

/// The morsels of `n` rows, in order.
fn morsels(n: usize) -> impl IndexedParallelIterator<Item = Range<usize>> {
    (0..n.div_ceil(MORSEL)).into_par_iter().map(move |m| m * MORSEL..((m + 1) * MORSEL).min(n))
}

/// The group of every row in scope, and the first row of each group (groups are numbered in order
/// of first appearance).
pub(crate) struct Groups {
    first: Vec<u32>,
    ids: Ids,
    /// Rows per group, when grouping counted them on the way.
    counts: Option<Vec<i64>>,
}

/// Where a row's group is found.
enum Ids {
    /// Every one of `n` rows is in group 0 (no GROUP BY).
    One(usize),
    /// Row `i` is in group `ids[i]`.
    Listed(Vec<u32>),
    /// Row `i` is in group `slot[values[i] - min]` (one dense integer key).
    Dense { values: ScalarBuffer<i64>, min: i64, slot: Vec<u32> },
}

impl Groups {
    /// One group of all `num_rows` rows, even of none (`SELECT count(*) … WHERE false` is one row).
    pub(crate) fn one(num_rows: usize) -> Groups {
        Groups { first: vec![0], ids: Ids::One(num_rows), counts: Some(vec![num_rows as i64]) }
    }

    /// Groups listed per row: `ids[i]` is row `i`'s group, `first[g]` the first row of group `g`.
    pub(crate) fn listed(ids: Vec<u32>, first: Vec<u32>) -> Groups {
        Groups { first, ids: Ids::Listed(ids), counts: None }
    }

    /// Groups of one integer key without nulls whose values span at most `max(2^16, n)` integers,
    /// numbered in order of first appearance (as the hashing path numbers them); `None` when it
    /// does not apply. Morsels whose values span less than a morsel's worth of integers are
    /// counted in parallel, others in the merge (one thread).
    pub(crate) fn dense(key: &ArrayRef) -> Option<Groups> {
        if !key.data_type().is_integer() || key.null_count() > 0 || key.is_empty() {
            return None;
        }
        // Exact for every integer type but u64 values past i64::MAX, which become NULL (then: None).
        let values = arrow_cast::cast(key.as_ref(), &DataType::Int64).ok()?;
        let values = values.as_primitive::<Int64Type>();
        if values.null_count() > 0 {
            return None;
        }
        let values = values.values().clone();
        // One read of each morsel from memory: its bounds, then (from cache) its distinct values
        // counted in a table indexed from its own minimum, when they span less than a morsel's
        // worth of integers (a per-thread table, cleared through the morsel's list of values).
        let parts: Vec<Part> = morsels(values.len())
            .map_init(
                || vec![0u32; MORSEL],
                |counts, r| {
                    let v = &values[r.clone()];
                    let (lo, hi) = v.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                    let narrow = i128::from(hi) - i128::from(lo) < MORSEL as i128;
                    let seen = narrow.then(|| first_appearances(v, lo, counts, r.start));
                    Part { rows: r, lo, hi, seen }
                },
            )
            .collect();
        let min = parts.iter().map(|p| p.lo).min()?;
        let max = parts.iter().map(|p| p.hi).max()?;
        let range = (i128::from(max) - i128::from(min) + 1) as u128;
        if range > (1u128 << 16).max(values.len() as u128) {
            return None;
        }
        let range = range as usize;
        // The morsels' values in morsel order: groups numbered by first appearance. A morsel of
        // wide-spread values is counted here, against a table of the whole key's range.
        let mut slot = vec![u32::MAX; range];
        let (mut first, mut counts, mut wide) = (Vec::new(), Vec::new(), None);
        for Part { rows: r, seen, .. } in parts {
            let seen = seen.unwrap_or_else(|| {
                let table = wide.get_or_insert_with(|| vec![0u32; range]);
                first_appearances(&values[r.clone()], min, table, r.start)
            });
            for seen in seen {
                let s = &mut slot[seen.value.wrapping_sub(min) as u64 as usize];
                if *s == u32::MAX {
                    *s = first.len() as u32;
                    first.push(seen.first);
                    counts.push(0);
                }
                counts[*s as usize] += i64::from(seen.count);
            }
        }
        Some(Groups { first, ids: Ids::Dense { values, min, slot }, counts: Some(counts) })
    }

    /// The first row of each group, by group id.
    pub(crate) fn first(&self) -> &[u32] {
        &self.first
    }

    /// Number of groups.
    pub(crate) fn num_groups(&self) -> usize {
        self.first.len()
    }

    fn num_rows(&self) -> usize {
        match &self.ids {
            Ids::One(n) => *n,
            Ids::Listed(ids) => ids.len(),
            Ids::Dense { values, .. } => values.len(),
        }
    }

    /// Calls `f(row, group)` for the rows of `rows`, in order. One loop per kind of ids, so each
    /// caller's `f` is inlined into a tight loop.
    #[inline(always)]
    fn each(&self, rows: Range<usize>, mut f: impl FnMut(usize, usize)) {
        let start = rows.start;
        match &self.ids {
            Ids::One(_) => rows.for_each(|i| f(i, 0)),
            Ids::Listed(ids) => {
                for (i, &g) in ids[rows].iter().enumerate() {
                    f(start + i, g as usize);
                }
            }
            Ids::Dense { values, min, slot } => {
                for (i, &v) in values[rows].iter().enumerate() {
                    // Every value was seen, so its slot is set.
                    f(start + i, slot[v.wrapping_sub(*min) as u64 as usize] as usize);
                }
            }
        }
    }

    /// Every row's group id (a list made for the dense key, in parallel morsels).
    pub(crate) fn ids(&self) -> Cow<'_, [u32]> {
        if let Ids::Listed(ids) = &self.ids {
            return Cow::Borrowed(ids);
        }
        let mut ids = vec![0u32; self.num_rows()];
        ids.par_chunks_mut(MORSEL).enumerate().for_each(|(m, out)| {
            let start = m * MORSEL;
            self.each(start..start + out.len(), |i, g| out[i - start] = g as u32);
        });
        Cow::Owned(ids)
    }

    /// Rows per group (`count(*)`).
    pub(crate) fn counts(&self) -> Vec<i64> {
        match &self.counts {
            Some(counts) => counts.clone(),
            None => self.per_group(0i64, |c, _| *c += 1, |c, d| *c += d),
        }
    }

    /// One accumulator per group: `add(acc, row)` for every row into its group's, from `zero`.
    /// With at most [`MAX_PARTIAL_GROUPS`] groups, per morsel in parallel, the morsels'
    /// accumulators merged (`merge(acc, morsel's)`) in morsel order, whatever the number of threads;
    /// with more, one pass in row order.
    pub(crate) fn per_group<T: Copy + Send + Sync>(
        &self,
        zero: T,
        add: impl Fn(&mut T, usize) + Sync,
        merge: impl Fn(&mut T, T),
    ) -> Vec<T> {
        let num_groups = self.num_groups();
        let mut out = vec![zero; num_groups];
        if num_groups > MAX_PARTIAL_GROUPS {
            self.each(0..self.num_rows(), |i, g| add(&mut out[g], i));
            return out;
        }
        let parts: Vec<Vec<T>> = morsels(self.num_rows())
            .map(|r| {
                let mut acc = vec![zero; num_groups];
                self.each(r, |i, g| add(&mut acc[g], i));
                acc
            })
            .collect();
        for part in parts {
            for (o, p) in out.iter_mut().zip(part) {
                merge(o, p);
            }
        }
        out
    }
}

/// A morsel of a dense key: its rows, its bounds, its distinct values when counted in parallel.
struct Part {
    rows: Range<usize>,
    lo: i64,
    hi: i64,
    seen: Option<Vec<Seen>>,
}

/// A distinct key value of a morsel, its first row and its number of rows.
struct Seen {
    value: i64,
    first: u32,
    count: u32,
}

/// The distinct values of `values` in order of first appearance, rows counted in `counts` (indexed
/// by `value - min`, long enough for every value, all zero on entry and on return); `base` is the
/// row of `values[0]`.
fn first_appearances(values: &[i64], min: i64, counts: &mut [u32], base: usize) -> Vec<Seen> {
    let mut seen = Vec::new();
    for (i, &v) in values.iter().enumerate() {
        let c = &mut counts[v.wrapping_sub(min) as u64 as usize];
        if *c == 0 {
            seen.push(Seen { value: v, first: (base + i) as u32, count: 0 });
        }
        *c += 1;
    }
    for s in &mut seen {
        s.count = std::mem::take(&mut counts[s.value.wrapping_sub(min) as u64 as usize]);
    }
    seen
}

/// The rows of the `k` smallest keys, smallest first, ties in row order (the `k` smallest
/// `(key, row)` pairs): per chunk of rows in parallel, then the `k` smallest of the chunks' `k`;
/// one pass with a heap on one thread, for a large `k` or for few rows. The same rows either way,
/// whatever the chunks, so these are a few per thread rather than morsels (each chunk's heap
/// refills, about `k ln(chunk / k)` replacements).
pub(crate) fn smallest<T: Sync>(values: &[T], key: impl Fn(&T) -> u64 + Sync, k: usize) -> Vec<u32> {
    let threads = rayon::current_num_threads();
    let chunk = values.len().div_ceil(4 * threads).max(MORSEL);
    let pairs = if threads > 1 && values.len() > chunk && k <= MAX_PARALLEL_K {
        let mut pairs: Vec<(u64, u32)> = values
            .par_chunks(chunk)
            .enumerate()
            .flat_map_iter(|(c, v)| heap_of_smallest(v.iter().map(&key), c * chunk, k).into_vec())
            .collect();
        // Pairs are distinct (one per row): any sort gives one order.
        pairs.sort_unstable();
        pairs.truncate(k);
        pairs
    } else {
        heap_of_smallest(values.iter().map(key), 0, k).into_sorted_vec()
    };
    pairs.into_iter().map(|(_, i)| i).collect()
}

/// The `k` smallest `(key, row)` pairs of `keys`, whose first is row `base`, in a max-heap.
fn heap_of_smallest(keys: impl Iterator<Item = u64>, base: usize, k: usize) -> BinaryHeap<(u64, u32)> {
    let mut heap = BinaryHeap::with_capacity(k + 1);
    for (i, key) in keys.enumerate() {
        let row = (base + i) as u32;
        if heap.len() < k {
            heap.push((key, row));
        } else if let Some(mut top) = heap.peek_mut() {
            // A later row never displaces an equal key: ties stay in row order.
            if key < top.0 {
                *top = (key, row);
            }
        }
    }
    heap
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use arrow_array::{Int64Array, UInt32Array};
    use arrow_ord::sort::{lexsort_to_indices, SortColumn};
    use arrow_schema::SortOptions;
    use proptest::prelude::*;

    use super::*;

    fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(f)
    }

    /// The one-pass grouping (the sequential path before morsels): ids and first rows in order
    /// of first appearance.
    fn sequential_groups(values: &[i64]) -> (Vec<u32>, Vec<u32>) {
        let mut slot = HashMap::new();
        let (mut ids, mut first) = (Vec::new(), Vec::new());
        for (i, v) in values.iter().enumerate() {
            let g = *slot.entry(*v).or_insert_with(|| {
                first.push(i as u32);
                first.len() as u32 - 1
            });
            ids.push(g);
        }
        (ids, first)
    }

    /// Keys with runs and repeats across morsel boundaries: `values` cycled with a stride.
    fn keys(n: usize, values: &[i64], stride: usize) -> Vec<i64> {
        (0..n).map(|i| values[(i / stride.max(1) * 7 + i % 3) % values.len()]).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn dense_groups_and_counts_match_one_pass_at_any_thread_count(
            n in prop_oneof![1usize..300, (2 * MORSEL - 50)..(3 * MORSEL + 50)],
            values in proptest::collection::vec(-40i64..40, 1..12),
            wide in any::<bool>(),
            stride in 1usize..100_000,
        ) {
            let mut k = keys(n, &values, stride);
            if wide {
                // A range of about `n` (past one morsel for the larger `n`): the one-pass table.
                k[n / 2] = n as i64 - 50;
            }
            let key: ArrayRef = Arc::new(Int64Array::from(k.clone()));
            let (ids, first) = sequential_groups(&k);
            let mut counts = vec![0i64; first.len()];
            ids.iter().for_each(|&g| counts[g as usize] += 1);
            for threads in [1, 3] {
                let groups = in_pool(threads, || Groups::dense(&key)).expect("a dense key");
                prop_assert_eq!(groups.first(), first.as_slice());
                prop_assert_eq!(&in_pool(threads, || groups.ids()).into_owned(), &ids);
                prop_assert_eq!(&groups.counts(), &counts);
                // Counted by per_group instead of by grouping: the same.
                let listed = Groups::listed(ids.clone(), first.clone());
                prop_assert_eq!(&in_pool(threads, || listed.counts()), &counts);
            }
        }

        #[test]
        fn float_sums_are_morsel_sums_at_any_thread_count(
            n in prop_oneof![1usize..300, (MORSEL - 5)..(3 * MORSEL + 50)],
            num_groups in prop_oneof![1usize..20, Just(MAX_PARTIAL_GROUPS + 1)],
            seed in any::<u64>(),
        ) {
            // Groups as grouping gives them: numbered by first appearance, every one with rows.
            let k: Vec<i64> = (0..n).map(|i| (((i as u64 * 2654435761) ^ seed) % num_groups as u64) as i64).collect();
            let (ids, first) = sequential_groups(&k);
            let num_groups = first.len();
            let x: Vec<f64> = (0..n).map(|i| ((i as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 * 1e-7 - 3e8).collect();
            // The reference: per morsel in row order, morsels in order (one pass for many groups).
            let mut want = vec![0f64; num_groups];
            if num_groups > MAX_PARTIAL_GROUPS {
                ids.iter().zip(&x).for_each(|(&g, v)| want[g as usize] += v);
            } else {
                for (ids, x) in ids.chunks(MORSEL).zip(x.chunks(MORSEL)) {
                    let mut part = vec![0f64; num_groups];
                    ids.iter().zip(x).for_each(|(&g, v)| part[g as usize] += v);
                    want.iter_mut().zip(part).for_each(|(w, p)| *w += p);
                }
            }
            let groups = Groups::listed(ids, first);
            for threads in [1, 3] {
                let got = in_pool(threads, || groups.per_group(0f64, |s, i| *s += x[i], |s, t| *s += t));
                let (got, want): (Vec<u64>, Vec<u64>) =
                    (got.iter().map(|s| s.to_bits()).collect(), want.iter().map(|s| s.to_bits()).collect());
                prop_assert_eq!(got, want);
            }
        }

        #[test]
        fn smallest_is_the_sorts_first_k_at_any_thread_count(
            n in prop_oneof![1usize..300, (2 * MORSEL - 5)..(3 * MORSEL + 50)],
            distinct in 1u64..50_000,
            k in prop_oneof![0usize..20, Just(MAX_PARALLEL_K), Just(MAX_PARALLEL_K + 1)],
            seed in any::<u64>(),
        ) {
            let values: Vec<u64> = (0..n as u64).map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed) % distinct).collect();
            let k = k.min(n);
            let sorted = lexsort_to_indices(
                &[
                    SortColumn { values: Arc::new(arrow_array::UInt64Array::from(values.clone())), options: Some(SortOptions::default()) },
                    SortColumn { values: Arc::new(UInt32Array::from_iter_values(0..n as u32)), options: Some(SortOptions::default()) },
                ],
                Some(k),
            )
            .unwrap();
            for threads in [1, 3] {
                prop_assert_eq!(in_pool(threads, || smallest(&values, |&v| v, k)), sorted.values().to_vec());
            }
        }
    }
}
