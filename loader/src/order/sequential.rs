//! SEQUENTIAL: the ids ascending, the same every epoch (FFCV's `traversal_order/sequential.py`).

use super::context::EpochContext;

/// The ids in increasing order.
pub(super) fn order(ctx: &EpochContext<'_>) -> Vec<u64> {
    ctx.indices.as_slice().to_vec()
}

#[cfg(test)]
mod tests {
    use beton_dataset::IndexSet;

    use super::*;
    use crate::PageMap;

    #[test]
    fn golden_sequential_is_the_ids_ascending_every_epoch() {
        let indices: IndexSet = [9, 2, 4, 7].into_iter().collect();
        let pages = PageMap::from_pages(vec![0; 10]);
        for epoch in 0..3 {
            let ctx = EpochContext { indices: &indices, pages: &pages, seed: 1, epoch, batch_size: 2 };
            assert_eq!(order(&ctx), [2, 4, 7, 9]);
        }
    }
}
