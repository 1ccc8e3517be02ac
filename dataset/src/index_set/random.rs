//! Seeded shuffles, samples and splits whose output is fixed by the seed across releases.
//!
//! Every draw comes from [`crate::random::Stream`] (ChaCha8 with beton's own bounded draws, so an
//! upgrade of `rand` cannot move an id from one split to another); the prefix walks and the part
//! sizes are here. The golden tests below pin the outputs.

use std::collections::{BTreeMap, HashMap};

use super::IndexSet;
use crate::error::{Error, Result};
use crate::random::{splitmix64, Stream};

/// How far the fractions of a split may sum past 1 (floating-point slack for `[0.7, 0.2, 0.1]`).
const SUM_TOLERANCE: f64 = 1e-9;

/// A prefix of at most `len / SPARSE_RATIO` ids is drawn with a map of the displaced positions
/// instead of a full copy of the ids: O(n) memory instead of O(len), the same output.
const SPARSE_RATIO: usize = 8;

/// SplitMix64's increment, `2^64 / φ` rounded to odd.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The seed of stratum `rank` in a stratified split: output `rank + 1` of a SplitMix64 generator
/// started at `seed`, so strata draw independent streams.
fn stratum_seed(seed: u64, rank: u64) -> u64 {
    splitmix64(seed.wrapping_add(GOLDEN_GAMMA.wrapping_mul(rank.wrapping_add(1))))
}

/// The first `n` values of the forward Fisher–Yates permutation of `(0..len).map(at)` drawn
/// from `seed`: step `i` (for `i` in `0..min(n, len - 1)`) swaps position `i` with position
/// `i + below(len - i)`; the last step of a full shuffle has one choice and draws nothing.
fn permuted_prefix(len: usize, n: usize, seed: u64, at: impl Fn(usize) -> u64) -> Vec<u64> {
    debug_assert!(n <= len);
    let steps = n.min(len.saturating_sub(1));
    let mut stream = Stream::from_seed(seed);
    if n.saturating_mul(SPARSE_RATIO) <= len {
        // Only positions < n are read back, and positions >= i untouched so far still hold
        // their original value, so a map of the swapped-out values stands in for the copy.
        // (`steps < n` only when n == len, which this path never takes for len > 0.)
        let mut displaced: HashMap<usize, u64> = HashMap::with_capacity(n);
        let mut out = Vec::with_capacity(n);
        for i in 0..steps {
            let j = i + stream.below((len - i) as u64) as usize;
            let at_i = displaced.remove(&i).unwrap_or_else(|| at(i));
            let at_j = if j == i { at_i } else { displaced.insert(j, at_i).unwrap_or_else(|| at(j)) };
            out.push(at_j);
        }
        return out;
    }
    let mut v: Vec<u64> = (0..len).map(at).collect();
    for i in 0..steps {
        let j = i + stream.below((len - i) as u64) as usize;
        v.swap(i, j);
    }
    v.truncate(n);
    v
}

/// Checks the fractions of a split and returns their sum.
fn check_fractions(fractions: &[f64]) -> Result<f64> {
    for (i, &f) in fractions.iter().enumerate() {
        if !(f.is_finite() && f >= 0.0) {
            return Err(Error::InvalidArgument {
                what: format!("fractions[{i}]"),
                why: format!("{f} is not a finite number >= 0"),
            });
        }
    }
    if fractions.len() >= UNASSIGNED as usize {
        return Err(Error::InvalidArgument {
            what: "fractions".into(),
            why: format!("{} parts; at most {} are supported", fractions.len(), UNASSIGNED - 1),
        });
    }
    let sum: f64 = fractions.iter().sum();
    if sum > 1.0 + SUM_TOLERANCE {
        return Err(Error::InvalidArgument {
            what: "fractions".into(),
            why: format!("{fractions:?} sum to {sum}, more than 1"),
        });
    }
    Ok(sum)
}

/// Part sizes for `len` ids by the largest-remainder (Hamilton) method: each part gets
/// `floor(len × f)`, then the parts with the largest fractional remainders (ties: the earlier
/// part) get one more until the sizes sum to `min(round(len × sum), len)`.
fn part_sizes(len: usize, fractions: &[f64], sum: f64) -> Vec<usize> {
    let quotas: Vec<f64> = fractions.iter().map(|&f| len as f64 * f).collect();
    let total = ((len as f64 * sum).round() as usize).min(len);
    let mut sizes: Vec<usize> = quotas.iter().map(|q| q.floor() as usize).collect();
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (quotas[a] - quotas[a].floor(), quotas[b] - quotas[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    let assigned: usize = sizes.iter().sum();
    if assigned < total {
        // At most one per part in exact arithmetic; `cycle` keeps rounding slack harmless.
        for &p in order.iter().cycle().take(total - assigned) {
            sizes[p] += 1;
        }
    } else {
        // Floors can overshoot only through the 1e-9 tolerance on huge sets: take back from the
        // smallest remainders.
        let mut excess = assigned - total;
        while excess > 0 {
            for &p in order.iter().rev() {
                if excess > 0 && sizes[p] > 0 {
                    sizes[p] -= 1;
                    excess -= 1;
                }
            }
        }
    }
    sizes
}

/// Cuts `prefix` into consecutive runs of `sizes` and sorts each into a set: the way to build
/// parts that are small against the set.
fn cut(prefix: &[u64], sizes: &[usize]) -> Vec<IndexSet> {
    let mut rest = prefix;
    sizes
        .iter()
        .map(|&s| {
            let (part, tail) = rest.split_at(s);
            rest = tail;
            let mut ids = part.to_vec();
            ids.sort_unstable();
            IndexSet { ids }
        })
        .collect()
}

/// The label of a position that is in no part.
const UNASSIGNED: u32 = u32::MAX;

/// Labels positions with their part: the first `sizes[0]` values of the permutation of
/// `(0..len).map(at)` (which are positions into `labels`) get part 0, the next `sizes[1]` part 1,
/// and so on.
fn label(len: usize, sizes: &[usize], seed: u64, at: impl Fn(usize) -> u64, labels: &mut [u32]) {
    let prefix = permuted_prefix(len, sizes.iter().sum(), seed, at);
    let mut rest = prefix.as_slice();
    for (part, &s) in sizes.iter().enumerate() {
        let (run, tail) = rest.split_at(s);
        for &p in run {
            labels[p as usize] = part as u32;
        }
        rest = tail;
    }
}

/// Gathers the ids into their labelled parts in one pass, so each part comes out sorted without
/// a sort: the way to build parts that cover much of the set (O(len) instead of O(n log n)).
fn collect_parts(ids: &[u64], labels: &[u32], sizes: &[usize]) -> Vec<IndexSet> {
    let mut parts: Vec<Vec<u64>> = sizes.iter().map(|&s| Vec::with_capacity(s)).collect();
    for (&id, &l) in ids.iter().zip(labels) {
        if l != UNASSIGNED {
            parts[l as usize].push(id);
        }
    }
    parts.into_iter().map(|ids| IndexSet { ids }).collect()
}

impl IndexSet {
    /// Parts of the given sizes: part `k` is the next `sizes[k]` ids of `shuffled(seed)`, sorted.
    fn parts(&self, sizes: &[usize], seed: u64) -> Vec<IndexSet> {
        let (len, total) = (self.len(), sizes.iter().sum::<usize>());
        if total.saturating_mul(SPARSE_RATIO) <= len {
            return cut(&permuted_prefix(len, total, seed, |i| self.ids[i]), sizes);
        }
        // Permuting positions instead of ids gives the same parts, as labels.
        let mut labels = vec![UNASSIGNED; len];
        label(len, sizes, seed, |i| i as u64, &mut labels);
        collect_parts(&self.ids, &labels, sizes)
    }

    /// The ids in a random order fixed by `seed`: a uniform permutation (forward Fisher–Yates
    /// over ChaCha8, see the [module docs](crate::index_set)), the same for a seed in every
    /// release.
    pub fn shuffled(&self, seed: u64) -> Vec<u64> {
        permuted_prefix(self.len(), self.len(), seed, |i| self.ids[i])
    }

    /// A uniformly random subset of `n` ids fixed by `seed`, sorted: the first `n` of
    /// [`shuffled`](Self::shuffled)`(seed)`. Memory is O(n) when `n` is small against `len()`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `n > len()`.
    pub fn sample(&self, n: usize, seed: u64) -> Result<IndexSet> {
        if n > self.len() {
            return Err(Error::InvalidArgument {
                what: "n".into(),
                why: format!("cannot sample {n} ids from an index set of {}", self.len()),
            });
        }
        Ok(self.parts(&[n], seed).pop().unwrap_or_default())
    }

    /// Splits the set at random into disjoint parts of the given fractions (train / val / test).
    ///
    /// Part sizes come from the largest-remainder method on `len() × fraction`: they sum to
    /// `round(len() × Σ fractions)`, each is `floor` or `ceil` of its quota, and ties go to the
    /// earlier part. Part `k` is the next `size_k` ids of [`shuffled`](Self::shuffled)`(seed)`,
    /// sorted. Fractions that sum to less than 1 leave the rest of the ids out.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming `fractions[i]` if one is negative, NaN or infinite, or
    /// naming `fractions` if they sum to more than `1 + 1e-9`.
    pub fn split(&self, fractions: &[f64], seed: u64) -> Result<Vec<IndexSet>> {
        let sum = check_fractions(fractions)?;
        Ok(self.parts(&part_sizes(self.len(), fractions, sum), seed))
    }

    /// Splits like [`split`](Self::split), but separately within each stratum, so every part
    /// keeps the strata's proportions (a class-balanced train / val split).
    ///
    /// `keys[i]` is the stratum of the `i`-th id (`self.get(i)`), e.g. its label. Strata are
    /// ranked by key order; stratum `r` is split as its own index set with a seed derived from
    /// `seed` and `r` (SplitMix64), and part `k` is the union of the strata's parts `k`. Within a
    /// stratum of `s` ids, part `k` has `floor` or `ceil` of `s × fractions[k]` ids, so totals can
    /// differ from a plain `split` by up to one per stratum.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `keys.len() != self.len()`, or for the fractions as
    /// [`split`](Self::split).
    pub fn stratified_split<K: Ord>(
        &self,
        keys: &[K],
        fractions: &[f64],
        seed: u64,
    ) -> Result<Vec<IndexSet>> {
        if keys.len() != self.len() {
            return Err(Error::InvalidArgument {
                what: "keys".into(),
                why: format!("{} keys for an index set of {} ids; need one per id", keys.len(), self.len()),
            });
        }
        let sum = check_fractions(fractions)?;
        let mut strata: BTreeMap<&K, Vec<usize>> = BTreeMap::new();
        for (position, key) in keys.iter().enumerate() {
            strata.entry(key).or_default().push(position);
        }
        let mut labels = vec![UNASSIGNED; self.len()];
        let mut totals = vec![0; fractions.len()];
        for (rank, positions) in strata.into_values().enumerate() {
            let sizes = part_sizes(positions.len(), fractions, sum);
            let seed = stratum_seed(seed, rank as u64);
            label(positions.len(), &sizes, seed, |i| positions[i] as u64, &mut labels);
            totals.iter_mut().zip(&sizes).for_each(|(t, s)| *t += s);
        }
        Ok(collect_parts(&self.ids, &labels, &totals))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn sizes(parts: &[IndexSet]) -> Vec<usize> {
        parts.iter().map(IndexSet::len).collect()
    }

    fn is_invalid(r: Result<impl std::fmt::Debug>, what: &str) -> bool {
        matches!(r, Err(Error::InvalidArgument { what: w, .. }) if w == what)
    }

    // ---- golden outputs: a change here breaks every stored split and resume state ----
    //
    // The values were computed by an independent Python model of the documented algorithm
    // (rand_core's PCG32 seed expansion, the ChaCha8 block function, Lemire's draw, forward
    // Fisher–Yates, SplitMix64 stratum seeds) and agree with this code.

    #[test]
    fn golden_shuffles() {
        let set = IndexSet::all(10);
        assert_eq!(set.shuffled(0), GOLDEN_SHUFFLE_0);
        assert_eq!(set.shuffled(1), GOLDEN_SHUFFLE_1);
        assert_eq!(set.shuffled(0xdead_beef), GOLDEN_SHUFFLE_DEADBEEF);
    }

    const GOLDEN_SHUFFLE_0: [u64; 10] = [7, 5, 0, 3, 9, 2, 4, 6, 1, 8];
    const GOLDEN_SHUFFLE_1: [u64; 10] = [4, 1, 6, 0, 5, 8, 7, 2, 9, 3];
    const GOLDEN_SHUFFLE_DEADBEEF: [u64; 10] = [9, 6, 2, 4, 8, 5, 0, 3, 7, 1];

    #[test]
    fn golden_sample_and_splits() {
        let set = IndexSet::from(100..120);
        assert_eq!(set.sample(5, 7).unwrap().as_slice(), GOLDEN_SAMPLE_7);
        let parts = set.split(&[0.5, 0.25, 0.2], 7).unwrap();
        let parts: Vec<&[u64]> = parts.iter().map(IndexSet::as_slice).collect();
        assert_eq!(parts, GOLDEN_SPLIT_7);
        let keys: Vec<u8> = (0..20).map(|i| (i % 3) as u8).collect();
        let parts = set.stratified_split(&keys, &[0.5, 0.5], 7).unwrap();
        let parts: Vec<&[u64]> = parts.iter().map(IndexSet::as_slice).collect();
        assert_eq!(parts, GOLDEN_STRATIFIED_7);
        // Samples small against the set take the map-based path.
        assert_eq!(IndexSet::all(100).sample(3, 7).unwrap().as_slice(), [15, 17, 71]);
        let squares: IndexSet = (0..1000u64).map(|x| x * x).collect();
        assert_eq!(squares.sample(20, 123).unwrap().as_slice(), GOLDEN_SAMPLE_SQUARES_123);
    }

    const GOLDEN_SAMPLE_SQUARES_123: &[u64] = &[
        784, 8836, 26244, 28224, 31684, 40000, 58081, 63001, 112896, 121801, 277729, 344569, 442225, 538756,
        546121, 577600, 727609, 767376, 972196, 978121,
    ];

    const GOLDEN_SAMPLE_7: &[u64] = &[103, 104, 113, 114, 115];
    const GOLDEN_SPLIT_7: [&[u64]; 3] = [
        &[103, 104, 107, 110, 112, 113, 114, 115, 118, 119],
        &[102, 105, 108, 111, 116],
        &[100, 101, 106, 117],
    ];
    const GOLDEN_STRATIFIED_7: [&[u64]; 2] = [
        &[100, 101, 102, 107, 109, 111, 113, 114, 115, 118, 119],
        &[103, 104, 105, 106, 108, 110, 112, 116, 117],
    ];

    // ---- determinism ----

    #[test]
    fn same_seed_same_output_different_seed_different_output() {
        let set: IndexSet = (0..1000u64).map(|x| x * 3).collect();
        assert_eq!(set.shuffled(5), set.shuffled(5));
        assert_ne!(set.shuffled(5), set.shuffled(6));
        assert_eq!(set.sample(100, 5).unwrap(), set.sample(100, 5).unwrap());
        assert_ne!(set.sample(100, 5).unwrap(), set.sample(100, 6).unwrap());
        assert_eq!(set.split(&[0.3, 0.3], 5).unwrap(), set.split(&[0.3, 0.3], 5).unwrap());
        assert_ne!(set.split(&[0.3, 0.3], 5).unwrap(), set.split(&[0.3, 0.3], 6).unwrap());
        let keys: Vec<u64> = (0..1000).map(|i| i % 7).collect();
        let a = set.stratified_split(&keys, &[0.5], 5).unwrap();
        assert_eq!(a, set.stratified_split(&keys, &[0.5], 5).unwrap());
        assert_ne!(a, set.stratified_split(&keys, &[0.5], 6).unwrap());
    }

    #[test]
    fn strata_draw_different_streams() {
        // Two strata with the same layout must not be split the same way.
        let set = IndexSet::all(200);
        let keys: Vec<u8> = (0..200).map(|i| u8::from(i >= 100)).collect();
        let part = &set.stratified_split(&keys, &[0.5], 3).unwrap()[0];
        let low: Vec<u64> = part.iter().filter(|&x| x < 100).collect();
        let high: Vec<u64> = part.iter().filter(|&x| x >= 100).map(|x| x - 100).collect();
        assert_eq!((low.len(), high.len()), (50, 50));
        assert_ne!(low, high);
        let seeds: BTreeSet<u64> = (0..1000).map(|r| stratum_seed(3, r)).collect();
        assert_eq!(seeds.len(), 1000);
    }

    #[test]
    fn shuffles_of_three_are_uniform() {
        let set = IndexSet::all(3);
        let mut counts = BTreeMap::new();
        for seed in 0..60_000 {
            *counts.entry(set.shuffled(seed)).or_insert(0u32) += 1;
        }
        assert_eq!(counts.len(), 6);
        // 10,000 expected each; 5 sigma is about 450.
        for (perm, &c) in &counts {
            assert!((9_550..10_450).contains(&c), "{perm:?}: {c}");
        }
    }

    #[test]
    fn sample_of_one_is_uniform() {
        let set = IndexSet::all(5);
        let mut counts = [0u32; 5];
        for seed in 0..50_000 {
            counts[set.sample(1, seed).unwrap().get(0).unwrap() as usize] += 1;
        }
        for c in counts {
            assert!((9_550..10_450).contains(&c), "{counts:?}");
        }
    }

    // ---- sizes ----

    #[test]
    fn part_sizes_use_largest_remainders() {
        let s = |len, f: &[f64]| part_sizes(len, f, check_fractions(f).unwrap());
        assert_eq!(s(1000, &[0.8, 0.1, 0.1]), [800, 100, 100]);
        assert_eq!(s(10, &[0.7, 0.2, 0.1]), [7, 2, 1]);
        assert_eq!(s(3, &[0.5, 0.5]), [2, 1]); // tie: the earlier part
        assert_eq!(s(10, &[1.0 / 3.0; 3]), [4, 3, 3]);
        assert_eq!(s(11, &[1.0 / 3.0; 3]), [4, 4, 3]);
        assert_eq!(s(7, &[0.15, 0.15, 0.15]), [1, 1, 1]); // round(3.15) = 3 = the floors
        assert_eq!(s(5, &[0.5, 0.0]), [3, 0]); // round(2.5) = 3
        assert_eq!(s(0, &[0.5, 0.5]), [0, 0]);
        assert_eq!(s(100, &[]), Vec::<usize>::new());
        assert_eq!(s(1, &[0.5, 0.5 + 1e-9]), [0, 1]); // total clamped to len
    }

    #[test]
    fn part_sizes_take_back_overshoot_from_tolerance() {
        // 0.5 + 1e-9 of 4e9 is 2e9 + 4: floors sum past len, the clamp must give some back.
        let len = 4_000_000_000usize;
        let f = [0.5, 0.5 + 1e-9];
        let sizes = part_sizes(len, &f, check_fractions(&f).unwrap());
        assert_eq!(sizes.iter().sum::<usize>(), len);
    }

    #[test]
    fn split_of_everything_partitions_the_set() {
        let set: IndexSet = (0..97u64).map(|x| x * x).collect();
        let parts = set.split(&[0.6, 0.2, 0.2], 11).unwrap();
        assert_eq!(sizes(&parts), [58, 20, 19]);
        let union = parts.iter().fold(IndexSet::empty(), |acc, p| &acc | p);
        assert_eq!(union, set);
        // Consecutive runs of the shuffle.
        let shuffle = set.shuffled(11);
        let mut first: Vec<u64> = shuffle[..58].to_vec();
        first.sort_unstable();
        assert_eq!(parts[0].as_slice(), first);
    }

    // ---- errors ----

    #[test]
    fn rejects_bad_fractions() {
        let set = IndexSet::all(10);
        assert!(is_invalid(set.split(&[0.5, -0.1], 0), "fractions[1]"));
        assert!(is_invalid(set.split(&[f64::NAN], 0), "fractions[0]"));
        assert!(is_invalid(set.split(&[0.1, f64::INFINITY], 0), "fractions[1]"));
        assert!(is_invalid(set.split(&[0.6, 0.5], 0), "fractions"));
        assert!(is_invalid(set.split(&[1.0 + 1e-8], 0), "fractions"));
        assert!(set.split(&[0.7, 0.2, 0.1], 0).is_ok());
        assert!(set.split(&[1.0 + 1e-10], 0).is_ok());
        let keys = [0u8; 10];
        assert!(is_invalid(set.stratified_split(&keys, &[2.0], 0), "fractions"));
        let msg = set.split(&[0.6, 0.5], 0).unwrap_err().to_string();
        assert!(msg.contains("more than 1"), "{msg}");
    }

    #[test]
    fn rejects_sample_larger_than_set() {
        let set = IndexSet::all(10);
        assert!(is_invalid(set.sample(11, 0), "n"));
        assert_eq!(set.sample(10, 0).unwrap(), set);
        assert_eq!(set.sample(0, 0).unwrap(), IndexSet::empty());
        assert_eq!(IndexSet::empty().sample(0, 0).unwrap(), IndexSet::empty());
    }

    #[test]
    fn rejects_keys_of_the_wrong_length() {
        let set = IndexSet::all(10);
        assert!(is_invalid(set.stratified_split(&[0u8; 9], &[0.5], 0), "keys"));
        assert!(is_invalid(set.stratified_split(&[0u8; 11], &[0.5], 0), "keys"));
        let msg = set.stratified_split(&[0u8; 9], &[0.5], 0).unwrap_err().to_string();
        assert!(msg.contains("9 keys") && msg.contains("10 ids"), "{msg}");
    }

    // ---- properties ----

    fn fractions() -> impl Strategy<Value = Vec<f64>> {
        (proptest::collection::vec(0.0f64..1.0, 0..5), 0.0f64..=1.0).prop_map(|(w, total)| {
            let s: f64 = w.iter().sum();
            if s == 0.0 {
                w
            } else {
                w.iter().map(|x| x / s * total).collect()
            }
        })
    }

    fn set() -> impl Strategy<Value = IndexSet> {
        proptest::collection::btree_set(0u64..100_000, 0..400).prop_map(|s| s.into_iter().collect())
    }

    proptest! {
        #[test]
        fn shuffled_is_a_permutation(set in set(), seed in any::<u64>()) {
            let mut s = set.shuffled(seed);
            s.sort_unstable();
            prop_assert_eq!(s, set.into_vec());
        }

        #[test]
        fn sparse_and_dense_prefixes_agree(set in set(), n in 0usize..400, seed in any::<u64>()) {
            let n = n.min(set.len());
            let full = set.shuffled(seed);
            prop_assert_eq!(permuted_prefix(set.len(), n, seed, |i| set.as_slice()[i]), &full[..n]);
            // Both ways of building parts agree: sorted runs of the shuffle.
            let positions = permuted_prefix(set.len(), n, seed, |i| i as u64);
            let mut labels = vec![UNASSIGNED; set.len()];
            label(set.len(), &[n / 2, n - n / 2], seed, |i| i as u64, &mut labels);
            let by_labels = collect_parts(set.as_slice(), &labels, &[n / 2, n - n / 2]);
            let by_sorting = cut(&full[..n], &[n / 2, n - n / 2]);
            prop_assert_eq!(by_labels, by_sorting);
            let ids: Vec<u64> = positions.iter().map(|&p| set.get(p as usize).unwrap()).collect();
            prop_assert_eq!(ids, &full[..n]);
        }

        #[test]
        fn sample_is_a_subset_of_the_right_size(set in set(), n in 0usize..400, seed in any::<u64>()) {
            let n = n.min(set.len());
            let s = set.sample(n, seed).unwrap();
            let mut first_n = set.shuffled(seed)[..n].to_vec();
            first_n.sort_unstable();
            prop_assert_eq!(s.as_slice(), first_n);
            prop_assert_eq!(s.len(), n);
            prop_assert!(s.is_subset(&set));
            prop_assert!(IndexSet::from_sorted(s.into_vec()).is_ok());
        }

        #[test]
        fn split_parts_are_disjoint_sized_subsets(set in set(), f in fractions(), seed in any::<u64>()) {
            let parts = set.split(&f, seed).unwrap();
            prop_assert_eq!(parts.len(), f.len());
            let sum: f64 = f.iter().sum();
            let total = ((set.len() as f64 * sum).round() as usize).min(set.len());
            prop_assert_eq!(parts.iter().map(IndexSet::len).sum::<usize>(), total);
            prop_assert_eq!(&parts, &cut(&set.shuffled(seed)[..total], &sizes(&parts)));
            let mut seen = IndexSet::empty();
            for (p, &fk) in parts.iter().zip(&f) {
                prop_assert!((p.len() as f64 - set.len() as f64 * fk).abs() < 1.0);
                prop_assert!(p.is_subset(&set));
                prop_assert!((&seen & p).is_empty());
                seen = &seen | p;
            }
        }

        #[test]
        fn stratified_parts_keep_proportions(
            set in set(),
            labels in proptest::collection::vec(0u8..4, 400),
            f in fractions(),
            seed in any::<u64>(),
        ) {
            let keys = &labels[..set.len()];
            let parts = set.stratified_split(keys, &f, seed).unwrap();
            prop_assert_eq!(parts.len(), f.len());
            let mut seen = IndexSet::empty();
            for p in &parts {
                prop_assert!(p.is_subset(&set));
                prop_assert!((&seen & p).is_empty());
                seen = &seen | p;
            }
            for label in 0..4u8 {
                let stratum: IndexSet =
                    set.iter().zip(keys).filter(|(_, &k)| k == label).map(|(id, _)| id).collect();
                for (p, &fk) in parts.iter().zip(&f) {
                    let got = (p & &stratum).len() as f64;
                    let want = stratum.len() as f64 * fk;
                    prop_assert!((got - want).abs() <= 1.0, "label {label}: {got} vs {want}");
                }
            }
        }
    }
}
