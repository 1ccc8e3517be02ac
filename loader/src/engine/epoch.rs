//! An epoch's batches, in order, as the consumer takes them ([`Epoch`]).

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::slots::Batch;
use crate::state::LoaderState;

use super::batch::Shared;
use super::stats::EpochStats;
use super::Fingerprint;

/// One epoch's batches, in order. Dropping it stops and joins its threads; batches already
/// handed out stay valid.
pub struct Epoch {
    pub(super) shared: Arc<Shared>,
    pub(super) threads: Vec<JoinHandle<()>>,
    pub(super) consumer_wait: Duration,
    pub(super) batches: u64,
    pub(super) failed: bool,
    /// The state at the epoch's start, but for its fingerprint (`fingerprint`, when asked for).
    pub(super) state: LoaderState,
    pub(super) fingerprint: Arc<Fingerprint>,
}

impl Epoch {
    /// Batches in the whole epoch (including any already consumed before a resume).
    pub fn num_batches(&self) -> usize {
        self.shared.plan.num_batches()
    }

    /// The counters so far.
    pub fn stats(&self) -> EpochStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(AtomicOrdering::Relaxed);
        EpochStats {
            batches: self.batches,
            samples: get(&c.samples),
            payload_bytes: get(&c.payload_bytes),
            pages_read: get(&c.pages_read),
            page_bytes_read: get(&c.page_bytes_read),
            cache_hits: get(&c.cache_hits),
            direct_reads: get(&c.direct_reads),
            direct_bytes: get(&c.direct_bytes),
            cache_pages: self.shared.cache.as_ref().map_or(0, |c| c.allocated() as u64),
            slots: self.shared.pool.allocated() as u64,
            worker_busy: Duration::from_nanos(get(&c.worker_busy_ns)),
            worker_wait: Duration::from_nanos(get(&c.worker_wait_ns)),
            consumer_wait: self.consumer_wait,
        }
    }

    /// The state to save to resume after the batches consumed so far.
    pub fn state(&self) -> LoaderState {
        let mut state = self.state.clone();
        state.batches_consumed = self.shared.lock().consumed as u64;
        state.indices_fingerprint = self.fingerprint.get();
        state
    }

    fn stop(&mut self) {
        {
            let mut gate = self.shared.lock();
            gate.stop = true;
            for (_, entry) in std::mem::take(&mut gate.ready) {
                if let Ok(slot) = entry {
                    self.shared.pool.give_back(slot);
                }
            }
        }
        self.shared.changed.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Iterator for Epoch {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.failed {
            return None;
        }
        let shared = &self.shared;
        let started = Instant::now();
        let mut gate = shared.lock();
        let b = gate.consumed;
        if b >= shared.plan.num_batches() {
            return None;
        }
        let entry = loop {
            if let Some(entry) = gate.ready.remove(&b) {
                break entry;
            }
            if gate.live_workers == 0 {
                break Err(Error::Decode(format!(
                    "the loader's worker threads stopped before building batch {b} of epoch {}",
                    shared.epoch
                )));
            }
            gate = shared.changed.wait(gate).unwrap_or_else(|e| e.into_inner());
        };
        gate.consumed += 1;
        drop(gate);
        shared.changed.notify_all();
        self.consumer_wait += started.elapsed();
        match entry {
            Ok(slot) => {
                self.batches += 1;
                let len = slot.indices.len();
                Some(Ok(Batch::new(
                    slot,
                    shared.pool.clone(),
                    Arc::clone(&shared.columns),
                    len,
                    shared.epoch,
                    b,
                )))
            }
            Err(e) => {
                self.failed = true;
                self.stop();
                Some(Err(e))
            }
        }
    }
}

impl Drop for Epoch {
    fn drop(&mut self) {
        self.stop();
    }
}
