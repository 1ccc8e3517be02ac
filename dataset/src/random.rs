//! The seeded random stream beton's index sets and loader draw from, fixed by the seed across
//! releases: shuffles, samples and splits here, orders and augmentations in beton-loader.
//!
//! Only the ChaCha8 keystream comes from a dependency (`rand_chacha`, value-stable by rand's
//! policy, and `seed_from_u64`'s PCG32 expansion is documented as value-stable too); the bounded
//! draws (Lemire's method), the Fisher–Yates walk and the seed mixing (SplitMix64) are written
//! here, so no upgrade of `rand` can move an id from one split to another or a sample from one
//! batch to another. The golden tests below, and those of the index sets and the loader's orders,
//! pin the outputs.
//!
//! # Example
//!
//! ```
//! use beton_dataset::random::Stream;
//!
//! let mut v = [1, 2, 3, 4, 5];
//! Stream::new(7, 0, 0).shuffle(&mut v); // seed 7, epoch 0, lane 0
//! v.sort_unstable();
//! assert_eq!(v, [1, 2, 3, 4, 5]);
//! assert!(Stream::from_seed(7).below(10) < 10);
//! ```

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded random stream: ChaCha8 with beton's own bounded draws and shuffle.
pub struct Stream(ChaCha8Rng);

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").finish_non_exhaustive()
    }
}

impl Stream {
    /// The stream `ChaCha8Rng::seed_from_u64(seed)`: the one every seeded index-set operation
    /// ([`IndexSet::shuffled`](crate::IndexSet::shuffled), `sample`, `split`) draws from.
    pub fn from_seed(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    /// Lane `lane` of epoch `epoch` under `seed`: the stream of [`lane_seed`]`(seed, epoch, lane)`,
    /// one of many independent streams of one `(seed, epoch)` (the loader's orders and image
    /// augmentations each draw from their own lane).
    pub fn new(seed: u64, epoch: u64, lane: u64) -> Self {
        Self::from_seed(lane_seed(seed, epoch, lane))
    }

    /// The next raw 64-bit word of the keystream.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Where the stream is, in 32-bit words of the ChaCha8 keystream (each [`next_u64`] takes
    /// two): [`seek`](Self::seek) comes back to it, so a walk that knows where its draws start
    /// can make them out of order (the loader's QUASI_RANDOM shuffles each page when it opens).
    ///
    /// [`next_u64`]: Self::next_u64
    pub fn word_pos(&self) -> u128 {
        self.0.get_word_pos()
    }

    /// Moves the stream to `word_pos` (from [`word_pos`](Self::word_pos)): the draws that
    /// follow are the ones that followed there.
    pub fn seek(&mut self, word_pos: u128) {
        self.0.set_word_pos(word_pos);
    }

    /// A uniform integer in `0..n`, without bias: Lemire's multiply-and-reject ("Fast Random
    /// Integer Generation in an Interval", ACM TOMACS 2019, algorithm 5). The high word of
    /// `x * n` is the candidate; draws whose low word falls in the first `2^64 mod n` values are
    /// rejected, which leaves every candidate with exactly `floor(2^64 / n)` draws.
    ///
    /// # Panics
    /// In debug builds, if `n == 0` (release builds return 0).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = u128::from(self.0.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n; // 2^64 mod n
            while (m as u64) < threshold {
                m = u128::from(self.0.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// Shuffles `v` in place: forward Fisher–Yates, step `i` swaps positions `i` and
    /// `i + below(len - i)` for `i` in `0..len - 1` (the last step has one choice and draws
    /// nothing), the same walk as [`IndexSet::shuffled`](crate::IndexSet::shuffled).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in 0..v.len().saturating_sub(1) {
            let j = i + self.below((v.len() - i) as u64) as usize;
            v.swap(i, j);
        }
    }
}

/// Start of the seed chain of [`lane_seed`]: "beton-lo" (it began as the loader's) as a
/// big-endian u64, so that no lane is a bare SplitMix64 chain another hash might share (and seed
/// 0 is not SplitMix64's fixed point 0).
const LANE_SALT: u64 = u64::from_be_bytes(*b"beton-lo");

/// The seed of lane `lane` of epoch `epoch`: a SplitMix64 chain over `(seed, epoch, lane)`, so
/// neighbouring seeds, epochs and lanes give unrelated streams.
pub fn lane_seed(seed: u64, epoch: u64, lane: u64) -> u64 {
    [seed, epoch, lane].into_iter().fold(LANE_SALT, |h, w| splitmix64(h ^ w))
}

/// SplitMix64's output function (Steele, Lea, Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014; constants from Vigna's `splitmix64.c`): a bijective 64-bit mixer.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The values were computed by an independent Python model of the documented algorithm
    // (rand_core's PCG32 seed expansion, the ChaCha8 block function, Lemire's draw) and agree
    // with this code. A change here breaks every stored split, order and resume state.

    #[test]
    fn golden_chacha8_stream() {
        // The raw stream, so a failure says whether rand_chacha or our code moved.
        let mut s = Stream::from_seed(0);
        let words: Vec<u64> = (0..3).map(|_| s.next_u64()).collect();
        assert_eq!(words, GOLDEN_STREAM_0);
    }

    const GOLDEN_STREAM_0: [u64; 3] = [13080132717333068652, 8594738769458413623, 12896916468484187878];

    #[test]
    fn golden_bounded_draws() {
        let mut s = Stream::from_seed(42);
        let draws: Vec<u64> = [1, 2, 3, 10, 1 << 32, (1 << 63) + 1, u64::MAX].map(|n| s.below(n)).to_vec();
        assert_eq!(draws, GOLDEN_BELOW_42);
    }

    const GOLDEN_BELOW_42: [u64; 7] = [0, 1, 1, 6, 1239501272, 7414417601956746306, 14227028876630821887];

    #[test]
    fn seeking_back_replays_the_draws() {
        let mut s = Stream::from_seed(3);
        s.below(7);
        let at = s.word_pos();
        assert_eq!(at, 2, "one draw without rejection is one 64-bit word");
        let want: Vec<u64> = (0..40).map(|_| s.below(1000)).collect();
        let mut t = Stream::from_seed(3);
        t.seek(at);
        assert_eq!((0..40).map(|_| t.below(1000)).collect::<Vec<_>>(), want);
    }

    #[test]
    fn below_stays_in_range() {
        let mut s = Stream::from_seed(9);
        for n in [1, 2, 3, 7, 1000, (1 << 63) - 1, 1 << 63, (1 << 63) + 1, u64::MAX - 1, u64::MAX] {
            for _ in 0..1000 {
                assert!(s.below(n) < n, "n = {n}");
            }
        }
    }

    #[test]
    fn below_rejects_for_bias_where_needed() {
        // n = 3 · 2^62 is 3/4 of 2^64, so the candidate is floor(3x / 4) and without rejection
        // every r ≡ 0 (mod 3) would have two preimages x: half of all draws instead of a third.
        let mut s = Stream::from_seed(1);
        let n = 3u64 << 62;
        let zeros = (0..30_000).filter(|_| s.below(n) % 3 == 0).count();
        // 10,000 expected, sd ≈ 82; the biased draw gives 15,000.
        assert!((9_600..10_400).contains(&zeros), "{zeros}");
    }
}
