//! [`EpochContext`]: what every order sees of an epoch. Its own file so that the orders and the
//! epoch planner, which the [`Order`](super::Order) trait ties together, all read it without
//! depending on each other.

use beton_dataset::IndexSet;

use crate::pages::PageMap;

/// What an order sees of an epoch: the ids to order, where they live, and the randomness.
#[derive(Clone, Copy, Debug)]
pub struct EpochContext<'a> {
    /// The ids the loader reads (a query's answer, or every sample). Each must be mapped by
    /// `pages` (below [`PageMap::num_samples`]): [`plan_epoch`](super::plan_epoch) checks this
    /// and returns an error; calling QUASI_RANDOM's
    /// [`Order::epoch_order`](super::Order::epoch_order) directly with an unmapped id panics.
    pub indices: &'a IndexSet,
    /// The page of every sample of the dataset.
    pub pages: &'a PageMap,
    /// The run's seed: with `epoch`, the only source of randomness.
    pub seed: u64,
    /// The epoch, from 0.
    pub epoch: u64,
    /// Samples per batch (QUASI_RANDOM's default buffer is `2 × batch_size` pages).
    pub batch_size: usize,
}
