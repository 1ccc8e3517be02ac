//! PyTorch's `DistributedSampler(drop_last=False)` split of an epoch order among ranks: the
//! default [`Order::rank_order`](super::Order::rank_order), and QUASI_RANDOM's fallback when a
//! set spans fewer pages than there are ranks.

/// Rank `rank`'s part of `order` as PyTorch's `DistributedSampler(drop_last=False)` takes it:
/// the order padded cyclically from its start to a multiple of `world_size`, every
/// `world_size`-th element from position `rank`.
pub(crate) fn strided_split(order: &[u64], rank: usize, world_size: usize) -> Vec<u64> {
    let n = order.len();
    let per_rank = n.div_ceil(world_size);
    // Position p of the padded order is order[p % n].
    (0..per_rank).map(|k| order[(rank + k * world_size) % n]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_split_is_torchs_distributed_sampler() {
        // torch: 10 ids on 4 ranks pad to 12 with ids[:2]; rank r takes [r::4].
        let order: Vec<u64> = (100..110).collect();
        let parts: Vec<Vec<u64>> = (0..4).map(|r| strided_split(&order, r, 4)).collect();
        assert_eq!(
            parts,
            [vec![100, 104, 108], vec![101, 105, 109], vec![102, 106, 100], vec![103, 107, 101]]
        );
        // Padding longer than the order repeats it cyclically: 2 ids on 5 ranks.
        let parts: Vec<Vec<u64>> = (0..5).map(|r| strided_split(&[7, 8], r, 5)).collect();
        assert_eq!(parts, [[7], [8], [7], [8], [7]]);
        assert!(strided_split(&[], 0, 3).is_empty());
    }
}
