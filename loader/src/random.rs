//! The seeded random streams every order and augmentation draws from, fixed by `(seed, epoch)`
//! across releases: beton-dataset's [`beton_dataset::random`] (ChaCha8, Lemire's bounded draws,
//! Fisher–Yates and the SplitMix64 lane seeds, shared with the index sets' shuffles and splits),
//! and the loader's lanes. The golden tests here and those of the orders pin the outputs.

pub(crate) use beton_dataset::random::{lane_seed, Stream};

/// Lanes: independent streams of one `(seed, epoch)`.
pub(crate) mod lane {
    /// RANDOM's permutation.
    pub const RANDOM: u64 = 0;
    /// QUASI_RANDOM's assignment of pages to ranks.
    pub const ASSIGN_PAGES: u64 = 1;
    /// QUASI_RANDOM's buffer walk over the pages of rank `r` is lane `QUASI_RANDOM + r`; a
    /// single process is rank 0, so one rank of one reads exactly the single-process order.
    pub const QUASI_RANDOM: u64 = 2;
    /// Image decoders' crops (`image::rng`); far above `QUASI_RANDOM + rank`.
    pub const IMAGE_CROP: u64 = u64::from_be_bytes(*b"img-crop");
    /// Image decoders' fused horizontal flips.
    pub const IMAGE_FLIP: u64 = u64::from_be_bytes(*b"img-flip");
    /// Image pipelines' operations (one stream per operation and sample).
    pub const IMAGE_OPS: u64 = u64::from_be_bytes(*b"img-ops\0");
}

#[cfg(test)]
mod tests {
    use beton_dataset::random::splitmix64;

    use super::*;

    #[test]
    fn golden_lane_seeds_and_draws() {
        // Pins the seed derivation and the draws; the orders' golden tests pin the walks.
        assert_eq!(splitmix64(0), 0);
        assert_eq!(splitmix64(1), 0x5692_161d_100b_05e5);
        assert_eq!([lane_seed(0, 0, 0), lane_seed(1, 2, 3)], [15651252335489412921, 6178692122516921073]);
        let mut s = Stream::new(0, 0, 0);
        let draws: Vec<u64> = [1, 2, 10, 1000, u64::MAX].map(|n| s.below(n)).to_vec();
        assert_eq!(draws, GOLDEN_DRAWS);
    }

    const GOLDEN_DRAWS: [u64; 5] = [0, 1, 7, 477, 7178070831425242749];

    #[test]
    fn lanes_and_epochs_give_different_streams() {
        let seeds: std::collections::BTreeSet<u64> =
            (0..50).flat_map(|e| (0..20).map(move |l| lane_seed(3, e, l))).collect();
        assert_eq!(seeds.len(), 1000);
        assert_ne!(lane_seed(0, 1, 0), lane_seed(1, 0, 0));
    }
}
