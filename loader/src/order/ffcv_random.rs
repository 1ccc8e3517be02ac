//! FFCV's RANDOM, natively: `np.random.default_rng(seed + epoch).permutation(indices)`, the
//! order the Python `Loader` has always given for RANDOM on one process (FFCV 1.0.2's
//! `traversal_order/random.py`), without numpy, a Python list of every row, or the whole
//! permutation before the first batch.
//!
//! numpy shuffles *backwards* (`_shuffle_raw`: for `i = n - 1` down to `1`, swap `i` with
//! `random_interval(i)`), so the first elements are fixed by the last steps: unlike RANDOM's
//! forward walk, element 0 depends on every draw. What can still be avoided before the first
//! batch is the walk's cost, one random access into the array per step, and a copy of every
//! step's pick. [`FfcvShuffle`]:
//!
//! 1. **draws**: runs numpy's generator once over the epoch, keeping only a checkpoint of it
//!    every [`CHUNK`] steps (a [`Picker`] clone);
//! 2. **trace**: the first `trace` elements, by undoing the swaps in reverse order for just
//!    those elements. Element `p`'s value sits at position `p` at the end; undoing the swap of
//!    step `i` (`i = 1, 2, …`) moves an element at `i` to `j_i` and one at `j_i` to `i`; once
//!    every swap is undone the element is back where it started, and that position is its
//!    value. The picks are drawn again chunk by chunk from the checkpoints, lowest steps first,
//!    on a second thread, while this one follows the elements through them with a two-level
//!    bitmap of the positions being followed and a map of where each one is;
//! 3. **apply** (on its own thread): the shuffle itself, drawing as numpy does, a chunk of picks
//!    at a time so that each swap's read is prefetched ahead.
//!
//! Memory: the permutation (4 bytes an id, made by the apply), the bitmaps (n / 8 + n / 64
//! bits) and a few chunks of picks; no array of every pick. Elements below `trace` come from
//! the trace; later ones wait for the apply. Sets smaller than [`EAGER_BELOW`], or of more than
//! `2^32` ids, are shuffled whole at the first read, as numpy does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::numpy_rng::{epoch_entropy, Pcg64, Picker};
use super::sequence::{PosArray, Positions};

/// Elements traced before the whole permutation is there, at least (the rank's first batches:
/// see `OrderOption::rank_seq`; later ones wait for the shuffle, as all of them did before).
/// Tracing `k` of `n` costs about `k · (1 + ln(n / k))` map updates beside the pass over the
/// picks, and a look at the fine bitmap for about `8 k (1 + ln(n / 8 k))` steps.
pub(crate) const TRACE_AT_LEAST: usize = 1 << 13;

/// Below this many ids the permutation is made whole at the first read: its walk is short.
pub(crate) const EAGER_BELOW: usize = 1 << 20;

/// Steps a checkpoint of the picks covers: 256 KB of picks, in cache while they are traced.
const CHUNK: u32 = 1 << 16;

/// Chunks of picks drawn ahead of the trace.
const CHUNKS_AHEAD: usize = 4;

/// How far ahead of a swap the apply prefetches the slot it will read.
const PREFETCH_AHEAD: usize = 32;

/// FFCV's permutation of `0..n` for `(seed, epoch)`; see the [module docs](self).
pub(crate) struct FfcvShuffle {
    n: usize,
    entropy: u128,
    /// Elements traced before the whole permutation is there (0: shuffle at once).
    trace: usize,
    state: State,
}

enum State {
    NotStarted,
    /// The first `trace` elements; the rest comes from the apply thread.
    Traced {
        first: Vec<u64>,
        apply: Apply,
    },
    Full(PosArray),
}

/// The background shuffle: its thread, and the flag that stops it when the plan is dropped.
struct Apply {
    thread: Option<JoinHandle<Option<PosArray>>>,
    cancel: Arc<AtomicBool>,
}

impl Drop for Apply {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl FfcvShuffle {
    /// The permutation of epoch `epoch` of `n` ids; elements below `trace` are traced before the
    /// whole permutation is there when `n >= EAGER_BELOW`. Nothing is drawn until the first read.
    pub(crate) fn new(n: usize, seed: u64, epoch: u64, trace: usize) -> Self {
        let trace = if n < EAGER_BELOW { 0 } else { trace.min(n) };
        FfcvShuffle { n, entropy: epoch_entropy(seed, epoch), trace, state: State::NotStarted }
    }

    /// The same with an explicit `trace` whatever `n` (tests of the traced path on small sets).
    #[cfg(test)]
    pub(crate) fn with_trace(n: usize, seed: u64, epoch: u64, trace: usize) -> Self {
        FfcvShuffle { n, entropy: epoch_entropy(seed, epoch), trace: trace.min(n), state: State::NotStarted }
    }

    fn start(&mut self) {
        let narrow = self.n as u64 <= u64::from(u32::MAX) + 1;
        if self.trace == 0 || !narrow {
            self.state = State::Full(eager(self.entropy, self.n));
            return;
        }
        // 1. The draws, keeping a checkpoint every CHUNK steps (chunk c: steps c·CHUNK and up).
        let mut picker = Picker::new(Pcg64::new(self.entropy), self.n);
        let num_chunks = (self.n as u64).div_ceil(u64::from(CHUNK)) as usize;
        let mut checkpoints = Vec::with_capacity(num_chunks);
        let mut scratch = vec![0u32; CHUNK as usize];
        for c in (0..num_chunks).rev() {
            checkpoints.push(picker.clone());
            picker.fill_down(c as u32 * CHUNK, &mut scratch);
        }
        checkpoints.reverse();
        // 2. The first elements, through the picks drawn again from the checkpoints.
        let first = trace(&checkpoints, self.n, self.trace);
        // 3. The whole shuffle, on another thread.
        let cancel = Arc::new(AtomicBool::new(false));
        let thread = {
            let (entropy, cancel, n) = (self.entropy, Arc::clone(&cancel), self.n);
            std::thread::Builder::new()
                .name("beton-ffcv-random".into())
                .spawn(move || apply(entropy, n, &cancel))
        };
        self.state = match thread {
            Ok(thread) => State::Traced { first, apply: Apply { thread: Some(thread), cancel } },
            // No thread to be had: the shuffle on this one.
            Err(_) => State::Full(eager(self.entropy, self.n)),
        };
    }
}

/// numpy's shuffle of `0..n`, drawing as it goes.
fn eager(entropy: u128, n: usize) -> PosArray {
    let mut rng = Pcg64::new(entropy);
    let mut slots = PosArray::identity(n);
    for i in (1..n).rev() {
        let j = rng.interval(i as u64) as usize;
        slots.swap(i, j);
    }
    slots
}

/// numpy's shuffle of `0..n` (`n <= 2^32`) a chunk of picks at a time, each swap's read
/// prefetched; `None` when cancelled.
fn apply(entropy: u128, n: usize, cancel: &AtomicBool) -> Option<PosArray> {
    let mut slots = PosArray::identity(n);
    let mut picker = Picker::new(Pcg64::new(entropy), n);
    let mut picks = vec![0u32; CHUNK as usize];
    while picker.next_step() > 0 {
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
        let top = picker.next_step();
        let lo = top.saturating_sub(CHUNK - 1).max(1);
        picker.fill_down(lo, &mut picks);
        for i in (lo..=top).rev() {
            let k = (i - lo) as usize;
            if let Some(&ahead) = k.checked_sub(PREFETCH_AHEAD).and_then(|a| picks.get(a)) {
                slots.prefetch(ahead as usize);
            }
            slots.swap(i as usize, picks[k] as usize);
        }
    }
    Some(slots)
}

/// The positions being followed by [`trace`]: a bit per position, and a bit per 8 positions
/// saying whether any of them is followed. Most steps look at the second only (n / 64 bytes:
/// 1.6 MB at 10^8, in cache), where the first is 12.5 MB.
struct Followed {
    fine: Vec<u64>,
    coarse: Vec<u64>,
}

impl Followed {
    fn new(n: usize) -> Self {
        Followed { fine: vec![0; n.div_ceil(64)], coarse: vec![0; n.div_ceil(8 * 64)] }
    }

    #[inline]
    fn contains(&self, p: usize) -> bool {
        let c = p / 8;
        self.coarse[c / 64] >> (c % 64) & 1 == 1 && self.fine[p / 64] >> (p % 64) & 1 == 1
    }

    #[inline]
    fn flip(&mut self, p: usize) {
        self.fine[p / 64] ^= 1 << (p % 64);
        let c = p / 8;
        let byte = self.fine[p / 64] >> (c % 8 * 8) & 0xff;
        if byte == 0 {
            self.coarse[c / 64] &= !(1 << (c % 64));
        } else {
            self.coarse[c / 64] |= 1 << (c % 64);
        }
    }
}

/// Where the elements followed by [`trace`] are.
struct Tracer {
    followed: Followed,
    /// `at[p]`: the element at position `p`, for the followed positions.
    at: HashMap<usize, usize>,
    k: usize,
}

impl Tracer {
    fn new(n: usize, k: usize) -> Self {
        let mut t = Tracer { followed: Followed::new(n), at: HashMap::with_capacity(2 * k), k };
        for p in 0..k {
            t.followed.flip(p);
            t.at.insert(p, p);
        }
        t
    }

    /// The element followed at `from` moves to `to`, where none is.
    fn step(&mut self, from: usize, to: usize) {
        if let Some(e) = self.at.remove(&from) {
            self.at.insert(to, e);
        }
        self.followed.flip(from);
        self.followed.flip(to);
    }

    /// Undoes the swaps of steps `lo..lo + picks.len()` (step `i`'s pick `picks[i - lo]`), in
    /// that order.
    fn undo(&mut self, lo: usize, picks: &[u32]) {
        for (d, &j) in picks.iter().enumerate() {
            let (i, j) = (lo + d, j as usize);
            if i >= self.k {
                // From step k on, nothing followed is at i (an element only ever moves to the
                // step's position or below it): a step moves one only when its pick is followed.
                if self.followed.contains(j) {
                    self.step(j, i);
                }
                continue;
            }
            match (self.followed.contains(i), self.followed.contains(j)) {
                (true, true) => {
                    if let (Some(a), Some(b)) = (self.at.get(&i).copied(), self.at.get(&j).copied()) {
                        self.at.insert(i, b);
                        self.at.insert(j, a);
                    }
                }
                (true, false) => self.step(i, j),
                (false, true) => self.step(j, i),
                (false, false) => {}
            }
        }
    }

    fn first(self) -> Vec<u64> {
        let mut first = vec![0u64; self.k];
        for (position, element) in self.at {
            first[element] = position as u64;
        }
        first
    }
}

/// Elements `0..k` of the permutation of `n` whose picks `checkpoints[c]` draws from step
/// `c · CHUNK` up; see the [module docs](self). The chunks are drawn on another thread, ahead.
fn trace(checkpoints: &[Picker], n: usize, k: usize) -> Vec<u64> {
    let mut tracer = Tracer::new(n, k);
    // Chunk c's picks, steps max(c·CHUNK, 1) up to the chunk's top.
    let draw = |c: usize, buf: &mut Vec<u32>| -> usize {
        let lo = (c as u32 * CHUNK).max(1);
        let mut picker = checkpoints[c].clone();
        let top = picker.next_step();
        buf.clear();
        buf.resize((top + 1).saturating_sub(lo) as usize, 0);
        picker.fill_down(lo, buf);
        lo as usize
    };
    std::thread::scope(|scope| {
        let (to_trace, chunks) = std::sync::mpsc::sync_channel::<(usize, Vec<u32>)>(CHUNKS_AHEAD);
        let (to_draw, spent) = std::sync::mpsc::channel::<Vec<u32>>();
        let drawer =
            std::thread::Builder::new().name("beton-ffcv-picks".into()).spawn_scoped(scope, move || {
                for c in 0..checkpoints.len() {
                    let mut buf = spent.try_recv().unwrap_or_default();
                    let lo = draw(c, &mut buf);
                    if to_trace.send((lo, buf)).is_err() {
                        return;
                    }
                }
            });
        if drawer.is_err() {
            // No thread to be had: drawn here, in turn.
            let mut buf = Vec::new();
            for c in 0..checkpoints.len() {
                let lo = draw(c, &mut buf);
                tracer.undo(lo, &buf);
            }
            return;
        }
        for (lo, buf) in chunks {
            tracer.undo(lo, &buf);
            let _ = to_draw.send(buf);
        }
    });
    tracer.first()
}

impl Positions for FfcvShuffle {
    fn len(&self) -> usize {
        self.n
    }

    fn get(&mut self, k: usize) -> u64 {
        if let State::NotStarted = self.state {
            self.start();
        }
        match &mut self.state {
            State::Full(slots) => slots.get(k),
            State::Traced { first, .. } if k < first.len() => first[k],
            State::Traced { apply, .. } => {
                let done = apply.thread.take().map(|t| t.join());
                let slots = match done {
                    Some(Ok(Some(slots))) => slots,
                    // The thread panicked (out of memory): the shuffle on this one instead.
                    _ => eager(self.entropy, self.n),
                };
                let v = slots.get(k);
                self.state = State::Full(slots);
                v
            }
            State::NotStarted => unreachable!("started above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn all(mut s: FfcvShuffle) -> Vec<u64> {
        (0..s.len()).map(|k| s.get(k)).collect()
    }

    /// `np.random.default_rng(seed).permutation(n).tolist()`, numpy 2.4.6.
    const GOLDEN: [(u64, usize, &[u64]); 5] = [
        (0, 10, &[4, 6, 2, 7, 3, 5, 9, 0, 8, 1]),
        (1, 10, &[8, 4, 7, 0, 1, 2, 5, 9, 6, 3]),
        (3, 1, &[0]),
        (3, 2, &[1, 0]),
        (
            7,
            33,
            &[
                14, 10, 22, 4, 26, 31, 30, 13, 18, 3, 17, 12, 19, 24, 0, 27, 25, 8, 7, 1, 15, 6, 16, 23, 20,
                5, 32, 29, 2, 28, 21, 9, 11,
            ],
        ),
    ];

    /// `np.random.default_rng(11).permutation(64)`: FFCV's RANDOM over 64 samples, seed 11, epoch 0.
    const GOLDEN_11_64: [u64; 64] = [
        57, 56, 11, 63, 5, 4, 52, 36, 26, 41, 6, 29, 1, 15, 9, 24, 3, 47, 61, 32, 42, 44, 46, 43, 18, 37, 50,
        33, 45, 7, 60, 8, 55, 0, 34, 59, 51, 38, 2, 17, 23, 40, 53, 35, 21, 27, 22, 62, 28, 49, 12, 25, 54,
        58, 20, 31, 13, 48, 19, 30, 10, 39, 16, 14,
    ];

    #[test]
    fn golden_numpy_permutations() {
        for (seed, n, want) in GOLDEN {
            assert_eq!(all(FfcvShuffle::new(n, seed, 0, 0)), want, "seed {seed}, n {n}");
            // seed + epoch is numpy's seed.
            if seed > 0 {
                assert_eq!(all(FfcvShuffle::new(n, seed - 1, 1, 0)), want);
            }
            for trace in [1, n / 2, n] {
                assert_eq!(all(FfcvShuffle::with_trace(n, seed, 0, trace)), want, "traced {trace}");
            }
        }
        assert_eq!(all(FfcvShuffle::new(64, 11, 0, 0)), GOLDEN_11_64);
        assert!(all(FfcvShuffle::new(0, 1, 0, 0)).is_empty());
    }

    proptest! {
        #[test]
        fn traced_and_applied_elements_are_the_eager_shuffle(
            n in 0usize..3000,
            seed in any::<u64>(),
            trace in 1usize..200,
            reads in proptest::collection::vec(0usize..3000, 0..20),
        ) {
            let eager = all(FfcvShuffle::new(n, seed, 2, 0));
            let mut traced = FfcvShuffle::with_trace(n, seed, 2, trace);
            // Read in any order: a few random elements first, then everything.
            for k in reads.into_iter().filter(|&k| k < n) {
                prop_assert_eq!(traced.get(k), eager[k]);
            }
            prop_assert_eq!(all(traced), eager);
        }
    }

    #[test]
    fn traced_shuffles_over_many_chunks_are_the_eager_one() {
        let n = 5 * CHUNK as usize + 123;
        let eager = all(FfcvShuffle::new(n, 8, 3, 0));
        for trace in [1, 3000, n] {
            let mut s = FfcvShuffle::with_trace(n, 8, 3, trace);
            assert_eq!(s.get(0), eager[0]);
            assert_eq!(all(s), eager, "traced {trace}");
        }
        assert_eq!(all(FfcvShuffle::new(n, 8, 3, 1 << 13)), eager);
    }

    #[test]
    fn dropping_a_traced_shuffle_stops_its_thread() {
        let mut s = FfcvShuffle::with_trace(200_000, 4, 0, 10);
        let first = s.get(0);
        drop(s);
        assert_eq!(all(FfcvShuffle::with_trace(200_000, 4, 0, 10))[0], first);
    }
}
