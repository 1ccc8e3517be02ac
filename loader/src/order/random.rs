//! RANDOM: a uniform permutation of the ids per epoch, from `(seed, epoch)` only.
//!
//! FFCV's `traversal_order/random.py` draws `np.random.permutation` seeded with `seed + epoch`
//! (the Python `Loader` runs exactly that: `ffcv_random.rs`); beton's own RANDOM (the Rust API,
//! the CLI, and the Python `Loader` distributed) is [`IndexSet::shuffled`] (beton's pinned
//! forward Fisher–Yates over ChaCha8) with a seed mixed from `(seed, epoch)`, so seed 1 epoch 0
//! and seed 0 epoch 1 are unrelated.
//!
//! The walk is generated as the epoch is read ([`Shuffle`]): step `i` swaps position `i` with a
//! uniform pick of `i..n` and fixes it, so element `k` is known after `k + 1` steps, and the
//! permutation lives in a [`PosArray`] (4 bytes a row, pages faulted in as steps touch them).
//!
//! [`IndexSet::shuffled`]: beton_dataset::IndexSet::shuffled

use super::sequence::{PosArray, Positions};
use crate::random::{lane, lane_seed, Stream};

/// RANDOM's permutation of `0..n` for `(seed, epoch)`, stepped as far as it is read.
pub(crate) struct Shuffle {
    slots: PosArray,
    /// Steps done: elements `..done` are final (and the last one once `done == n - 1`).
    done: usize,
    stream: Stream,
}

impl Shuffle {
    /// The permutation of epoch `epoch`, nothing drawn yet.
    pub(crate) fn new(n: usize, seed: u64, epoch: u64) -> Self {
        Shuffle {
            slots: PosArray::identity(n),
            done: 0,
            stream: Stream::from_seed(lane_seed(seed, epoch, lane::RANDOM)),
        }
    }
}

impl Positions for Shuffle {
    fn len(&self) -> usize {
        self.slots.len()
    }

    fn get(&mut self, k: usize) -> u64 {
        let n = self.slots.len();
        // IndexSet::shuffled's walk: step i swaps i with i + below(n - i), for i < n - 1.
        let upto = (k + 1).min(n.saturating_sub(1));
        while self.done < upto {
            let i = self.done;
            let j = i + self.stream.below((n - i) as u64) as usize;
            self.slots.swap(i, j);
            self.done += 1;
        }
        self.slots.get(k)
    }
}

#[cfg(test)]
mod tests {
    use beton_dataset::IndexSet;

    use super::*;

    fn order(indices: &IndexSet, seed: u64, epoch: u64) -> Vec<u64> {
        let mut s = Shuffle::new(indices.len(), seed, epoch);
        (0..indices.len()).map(|k| indices.as_slice()[s.get(k) as usize]).collect()
    }

    #[test]
    fn golden_random_orders() {
        let indices = IndexSet::from(100..110);
        for (seed, epoch, want) in GOLDEN {
            assert_eq!(order(&indices, seed, epoch), want, "seed {seed}, epoch {epoch}");
        }
    }

    /// (seed, epoch, RANDOM's order of 100..110).
    const GOLDEN: [(u64, u64, [u64; 10]); 3] = [
        (0, 0, [100, 107, 108, 106, 103, 102, 109, 101, 104, 105]),
        (0, 1, [107, 102, 105, 100, 109, 106, 104, 103, 108, 101]),
        (42, 3, [104, 102, 108, 106, 101, 107, 103, 109, 100, 105]),
    ];

    #[test]
    fn is_index_set_shuffled_read_in_any_order() {
        // The crate's walk and query's IndexSet::shuffled are the same permutation, however
        // the elements are asked for (a distributed rank reads every world-th).
        for n in [0u64, 1, 2, 3, 50, 1000] {
            let indices = IndexSet::from(0..n);
            let want = indices.shuffled(lane_seed(5, 2, lane::RANDOM));
            assert_eq!(order(&indices, 5, 2), want);
            let mut s = Shuffle::new(n as usize, 5, 2);
            for k in (0..n as usize).rev().step_by(3) {
                assert_eq!(s.get(k), want[k], "n {n}, element {k}");
            }
        }
    }
}
