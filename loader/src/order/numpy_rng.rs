//! numpy's `default_rng(seed)` as far as `permutation` draws from it, so that FFCV's RANDOM
//! (`np.random.default_rng(seed + epoch).permutation(indices)`, `ffcv/traversal_order/random.py`)
//! runs natively, with the same permutation and without a Python list of every row.
//!
//! Three pieces of numpy (1.17 and later; the values are pinned by the golden tests, computed
//! with numpy 2.4):
//!
//! - `SeedSequence(seed).generate_state(4, uint64)` (`numpy/random/bit_generator.pyx`): the seed
//!   as little-endian 32-bit words, hashed into a pool of 4 words, expanded into 8 words;
//! - `PCG64` (`numpy/random/src/pcg64/pcg64.h`): a 128-bit LCG with the XSL-RR output, seeded
//!   by `pcg_setseq_128_srandom_r`, and its 32-bit draws, which hand out each 64-bit output as
//!   two halves (low first);
//! - `random_interval(max)` (`numpy/random/src/distributions/distributions.c`): the smallest
//!   all-ones mask covering `max`, drawing 32-bit values (64-bit above `2^32 - 1`) until the
//!   masked value is at most `max`; `Generator.shuffle` calls it for `i = n - 1` down to `1`
//!   and swaps `i` with the draw (`_shuffle_raw` in `_generator.pyx`).

/// numpy's `SeedSequence` constants (`bit_generator.pyx`).
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;

/// PCG's default 128-bit multiplier (`PCG_DEFAULT_MULTIPLIER_128`).
const PCG_MULTIPLIER: u128 = (2_549_297_995_355_413_924 << 64) | 4_865_540_595_714_422_341;

/// `SeedSequence(entropy).generate_state(4, np.uint64)`: the four words `PCG64` is seeded with.
fn seed_sequence_state(entropy: u128) -> [u64; 4] {
    // The entropy as 32-bit words, least significant first; 0 is one word.
    let mut words = Vec::with_capacity(4);
    let mut e = entropy;
    loop {
        words.push(e as u32);
        e >>= 32;
        if e == 0 {
            break;
        }
    }
    let mut hash_const = INIT_A;
    let mut hashmix = |value: u32| {
        let mut v = value ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_A);
        v = v.wrapping_mul(hash_const);
        v ^ (v >> XSHIFT)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        r ^ (r >> XSHIFT)
    };
    let mut pool = [0u32; POOL_SIZE];
    for (i, p) in pool.iter_mut().enumerate() {
        *p = hashmix(words.get(i).copied().unwrap_or(0));
    }
    for src in 0..POOL_SIZE {
        for dst in 0..POOL_SIZE {
            if src != dst {
                pool[dst] = mix(pool[dst], hashmix(pool[src]));
            }
        }
    }
    for &w in words.iter().skip(POOL_SIZE) {
        for p in pool.iter_mut() {
            *p = mix(*p, hashmix(w));
        }
    }
    let mut hash_const = INIT_B;
    let mut state = [0u32; 8];
    for (k, s) in state.iter_mut().enumerate() {
        let mut v = pool[k % POOL_SIZE] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hash_const);
        *s = v ^ (v >> XSHIFT);
    }
    std::array::from_fn(|k| u64::from(state[2 * k]) | (u64::from(state[2 * k + 1]) << 32))
}

/// numpy's `PCG64` bit generator with its 32-bit buffer.
#[derive(Clone)]
pub(crate) struct Pcg64 {
    state: u128,
    inc: u128,
    /// The high half of the last 64-bit output, when a 32-bit draw left it.
    spare: Option<u32>,
}

impl Pcg64 {
    /// `PCG64(SeedSequence(entropy))`: what `np.random.default_rng(entropy)` draws from.
    pub(crate) fn new(entropy: u128) -> Self {
        let [s0, s1, i0, i1] = seed_sequence_state(entropy);
        let initstate = (u128::from(s0) << 64) | u128::from(s1);
        let initseq = (u128::from(i0) << 64) | u128::from(i1);
        let mut rng = Pcg64 { state: 0, inc: (initseq << 1) | 1, spare: None };
        rng.step();
        rng.state = rng.state.wrapping_add(initstate);
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULTIPLIER).wrapping_add(self.inc);
    }

    /// The next 64-bit output (`pcg64_next64`; the 32-bit buffer is left as it is).
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.step();
        let s = self.state;
        (((s >> 64) as u64) ^ (s as u64)).rotate_right((s >> 122) as u32)
    }

    /// The next 32-bit output (`pcg64_next32`): the low half of a fresh 64-bit output, its high
    /// half kept for the next call.
    #[inline]
    pub(crate) fn next_u32(&mut self) -> u32 {
        if let Some(high) = self.spare.take() {
            return high;
        }
        let x = self.next_u64();
        self.spare = Some((x >> 32) as u32);
        x as u32
    }

    /// A uniform integer in `0..=max` as numpy's `random_interval` draws it.
    #[inline]
    pub(crate) fn interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mask = u64::MAX >> max.leading_zeros();
        if max <= u64::from(u32::MAX) {
            loop {
                let v = u64::from(self.next_u32()) & mask;
                if v <= max {
                    return v;
                }
            }
        }
        loop {
            let v = self.next_u64() & mask;
            if v <= max {
                return v;
            }
        }
    }
}

/// numpy's shuffle of `n <= 2^32` items as a resumable walk over its picks: step `i` (for
/// `i = n - 1` down to `1`) swaps `i` with `random_interval(i)`. A clone is a checkpoint: it
/// draws the same picks from where it was.
///
/// The picks are numpy's, drawn faster than a loop of [`Pcg64::interval`]: below `2^32` every
/// pick takes 32-bit halves, low first, of the 64-bit outputs in order, and within a range of
/// `i` sharing one mask each half is tried without a branch (stored, and `i` moves on only when
/// it is accepted) where the loop's rejection branch, taken up to half the time, is
/// mispredicted; the generator's multiply chain and the picks' chain then overlap.
#[derive(Clone)]
pub(crate) struct Picker {
    rng: Pcg64,
    /// The next step to draw (0: done).
    i: u32,
    /// The high half of an output whose low half ended a call or a range of `i`.
    carry: Option<u32>,
}

impl Picker {
    /// The walk of a shuffle of `n` items (`1 <= n <= 2^32`) drawing from `rng`, which must
    /// have no 32-bit half pending (a fresh generator).
    pub(crate) fn new(rng: Pcg64, n: usize) -> Self {
        debug_assert!(rng.spare.is_none() && n >= 1 && n as u64 <= u64::from(u32::MAX) + 1);
        Picker { rng, i: (n - 1) as u32, carry: None }
    }

    /// The next step to draw (0 when every step is drawn).
    pub(crate) fn next_step(&self) -> u32 {
        self.i
    }

    /// Draws the picks of steps `next_step()` down to `lo.max(1)`: step `i`'s into
    /// `out[i - lo]` (`out` holds at least `next_step() - lo + 1`). Nothing when `lo` is above
    /// `next_step()`.
    pub(crate) fn fill_down(&mut self, lo: u32, out: &mut [u32]) {
        let lo = lo.max(1);
        let mut i = self.i;
        while i >= lo {
            let mask = u32::MAX >> i.leading_zeros();
            // The inner loop runs while `i` keeps its mask and is in this call's range.
            let floor = (mask >> 1).max(lo - 1);
            if let Some(v) = self.carry.take() {
                let m = v & mask;
                out[(i - lo) as usize] = m;
                i -= u32::from(m <= i);
                continue;
            }
            while i > floor {
                let x = self.rng.next_u64();
                let m = x as u32 & mask;
                out[(i - lo) as usize] = m;
                i -= u32::from(m <= i);
                if i <= floor {
                    self.carry = Some((x >> 32) as u32);
                    break;
                }
                let m = (x >> 32) as u32 & mask;
                out[(i - lo) as usize] = m;
                i -= u32::from(m <= i);
            }
        }
        self.i = i;
    }
}

/// The seed numpy gets for `epoch`: FFCV's `seed + epoch`, a Python int (no wrap-around).
pub(crate) fn epoch_entropy(seed: u64, epoch: u64) -> u128 {
    u128::from(seed) + u128::from(epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Golden values from numpy 2.4.6:
    // np.random.SeedSequence(s).generate_state(4, np.uint64) and np.random.PCG64(s).random_raw(3).

    #[test]
    fn golden_seed_sequence() {
        let cases: [(u128, [u64; 4]); 3] = [
            (0, [15793235383387715774, 12390638538380655177, 2361836109651742017, 3188717715514472916]),
            (12345, [13091511679009522556, 13538552136045918767, 7269824232120749972, 4520223790601600371]),
            (
                (1 << 40) + 7,
                [974592680304384533, 11164224302760304993, 11068753026110695683, 4650291916314288918],
            ),
        ];
        for (entropy, want) in cases {
            assert_eq!(seed_sequence_state(entropy), want, "SeedSequence({entropy})");
        }
    }

    #[test]
    fn golden_pcg64_outputs() {
        let cases: [(u128, [u64; 3]); 2] = [
            (0, [11749869230777074271, 4976686463289251617, 755828109848996024]),
            ((1 << 64) + 5, [13699624189639919438, 7212933818401888033, 12639912000726136506]),
        ];
        for (entropy, want) in cases {
            let mut rng = Pcg64::new(entropy);
            assert_eq!([rng.next_u64(), rng.next_u64(), rng.next_u64()], want, "PCG64({entropy})");
        }
    }

    #[test]
    fn picker_draws_the_interval_loops_picks_in_any_chunks() {
        for (seed, n) in [(1u128, 1usize), (2, 2), (3, 3), (4, 1000), (5, 70_000), (6, (1 << 17) + 3)] {
            let mut a = Pcg64::new(seed);
            let mut want = vec![0u32; n];
            for i in (1..n).rev() {
                want[i] = a.interval(i as u64) as u32;
            }
            for chunk in [1u32, 2, 7, 1000, 1 << 16, u32::MAX] {
                let mut got = vec![0u32; n];
                let mut picker = Picker::new(Pcg64::new(seed), n);
                let mut checkpoint = None;
                while picker.next_step() > 0 {
                    let top = picker.next_step();
                    let lo = top.saturating_sub(chunk - 1).max(1);
                    checkpoint.get_or_insert_with(|| (picker.clone(), lo));
                    picker.fill_down(lo, &mut got[lo as usize..]);
                }
                assert_eq!(got, want, "seed {seed}, n {n}, chunks of {chunk}");
                // A clone draws the same picks again.
                if let Some((mut again, lo)) = checkpoint {
                    let mut first = vec![0u32; n];
                    again.fill_down(lo, &mut first[lo as usize..]);
                    assert_eq!(first[lo as usize..], want[lo as usize..]);
                }
            }
        }
    }

    #[test]
    fn interval_stays_in_range_and_takes_32_bit_halves_low_first() {
        let mut a = Pcg64::new(9);
        let mut b = Pcg64::new(9);
        let x = b.next_u64();
        assert_eq!(a.interval(u64::from(u32::MAX)), x & 0xffff_ffff);
        assert_eq!(a.interval(u64::from(u32::MAX)), x >> 32);
        for max in [1, 2, 3, 5, 1000, (1 << 32) + 1, u64::MAX - 1] {
            for _ in 0..200 {
                assert!(a.interval(max) <= max);
            }
        }
        assert_eq!(a.interval(0), 0);
    }
}
