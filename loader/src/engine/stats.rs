//! The counters of an epoch: what its workers did, how long they waited (see
//! [`super::Epoch::stats`]).

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::Duration;

/// Counters of one epoch (see [`Epoch::stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpochStats {
    /// Batches handed to the consumer.
    pub batches: u64,
    /// Samples decoded.
    pub samples: u64,
    /// Payload bytes decoded from.
    pub payload_bytes: u64,
    /// Pages read into the process cache (`os_cache = false`).
    pub pages_read: u64,
    /// Bytes of those pages.
    pub page_bytes_read: u64,
    /// Samples served from a cached page.
    pub cache_hits: u64,
    /// Samples read with their own `pread` because their page was not cached.
    pub direct_reads: u64,
    /// Bytes of those reads.
    pub direct_bytes: u64,
    /// Page buffers the process cache holds (its peak; at most its bound).
    pub cache_pages: u64,
    /// Output slots the loader has allocated.
    pub slots: u64,
    /// Time workers spent building batches, summed over workers.
    pub worker_busy: Duration,
    /// Time workers spent waiting (back-pressure, prefetch).
    pub worker_wait: Duration,
    /// Time the consumer spent waiting for the next batch.
    pub consumer_wait: Duration,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) samples: AtomicU64,
    pub(super) payload_bytes: AtomicU64,
    pub(super) pages_read: AtomicU64,
    pub(super) page_bytes_read: AtomicU64,
    pub(super) cache_hits: AtomicU64,
    pub(super) direct_reads: AtomicU64,
    pub(super) direct_bytes: AtomicU64,
    pub(super) worker_busy_ns: AtomicU64,
    pub(super) worker_wait_ns: AtomicU64,
}

pub(super) fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, AtomicOrdering::Relaxed);
}

pub(super) fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}
