//! The worker side of an epoch: the state its threads share ([`Shared`]), how one batch is
//! built into a slot (every sample's bytes read once, each field decoded into its columns), the
//! remote prefetch, and the pipelines' column specs over a dataset's data files.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use beton_storage::{Dataset, Window};
use smallvec::SmallVec;

use crate::cache::{PageCache, Schedule};
use crate::decode::{ColumnSpec, FieldDecoder, SampleContext};
use crate::error::{Error, Result};
use crate::order::EpochPlan;
use crate::parts::{FieldSource, Parts};
use crate::slots::{Slot, SlotPool};

use super::stats::{add, nanos, Counters};

/// One field the loader decodes, and where its columns are in a slot.
#[derive(Clone)]
pub(super) struct Pipeline {
    /// The field's name.
    pub(super) name: String,
    /// Where the field comes from in each data file.
    pub(super) sources: Arc<Vec<FieldSource>>,
    /// For an extra view of a field: the name its columns take instead of the field's.
    pub(super) view: Option<String>,
    pub(super) decoder: Arc<dyn FieldDecoder>,
    /// What a NULL of the field is decoded as ([`super::LoaderBuilder::fill_null`]); a NULL without
    /// one is an error at build.
    pub(super) fill: Option<beton_storage::Value<'static>>,
    pub(super) first_column: usize,
    pub(super) num_columns: usize,
}

pub(super) struct Gate {
    /// Batches handed to the consumer (the next one it takes).
    pub(super) consumed: usize,
    /// Batches whose pages the prefetcher has handled.
    pub(super) prefetched: usize,
    pub(super) ready: BTreeMap<usize, Result<Slot>>,
    pub(super) stop: bool,
    /// Worker threads that have not exited: when none is left and the batch the consumer waits
    /// for was never filed, the consumer gets an error instead of waiting forever.
    pub(super) live_workers: usize,
}

pub(super) struct Shared {
    /// Whether a dataset read is on remote storage: batches fetch their payloads first.
    pub(super) remote: bool,
    /// The data files.
    pub(super) parts: Arc<Parts>,
    pub(super) plan: EpochPlan,
    pub(super) pipelines: Vec<Pipeline>,
    pub(super) columns: Arc<Vec<ColumnSpec>>,
    pub(super) cache: Option<Arc<PageCache>>,
    pub(super) schedule: Option<Schedule>,
    pub(super) pool: SlotPool,
    pub(super) seed: u64,
    pub(super) epoch: u64,
    pub(super) batch_size: usize,
    pub(super) ahead: usize,
    pub(super) next: AtomicUsize,
    pub(super) gate: Mutex<Gate>,
    pub(super) changed: Condvar,
    pub(super) counters: Counters,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `ready(gate)` or stop; returns false on stop.
    pub(super) fn wait_for(&self, ready: impl Fn(&Gate) -> bool) -> bool {
        let started = Instant::now();
        let mut gate = self.lock();
        while !gate.stop && !ready(&gate) {
            gate = self.changed.wait(gate).unwrap_or_else(|e| e.into_inner());
        }
        add(&self.counters.worker_wait_ns, nanos(started.elapsed()));
        !gate.stop
    }

    pub(super) fn prefetch_loop(&self) {
        // Whatever ends this thread early (a panic included), workers waiting for pages must
        // not wait forever: the batch not yet prefetched gets an error.
        let _guard = PrefetchGuard(self);
        let (Some(cache), Some(schedule)) = (&self.cache, &self.schedule) else { return };
        let start = self.lock().prefetched;
        for b in start..self.plan.num_batches() {
            if !self.wait_for(|g| b < g.consumed + self.ahead) {
                return;
            }
            let in_flight = self.lock().consumed;
            let result = cache.prefetch(schedule, b, in_flight);
            let mut gate = self.lock();
            match result {
                Ok(done) => {
                    add(&self.counters.pages_read, done.pages_read);
                    add(&self.counters.page_bytes_read, done.bytes_read);
                    gate.prefetched = b + 1;
                }
                Err(e) => {
                    gate.ready.insert(b, Err(e));
                    gate.prefetched = usize::MAX;
                }
            }
            drop(gate);
            self.changed.notify_all();
        }
    }

    /// Over remote storage: fetches the payloads of coming batches in the epoch's order, ahead
    /// of the workers, which wait for it as they do for the process cache's prefetcher (so that
    /// they never fetch fragments of what it is about to fetch whole; they only re-fetch blocks
    /// evicted since, under a small cache).
    ///
    /// Each call takes the batches that fit a window of payload bytes and fetches, for each
    /// page they touch first, every range the rest of the epoch reads on it, in coalesced,
    /// concurrent requests. The window starts at one request, so the first batches arrive
    /// without sharing the bandwidth with later ones, and doubles with each call up to half of
    /// what the requests in flight can carry (`in_flight × request_bytes / 2`: 64 MiB by
    /// default), never past a quarter of the cache bound, so that what is fetched ahead stays
    /// cached until used. A call starts while the consumer is within `2 × batches_ahead`
    /// batches. The first error is filed as the error of the first batch of its call, and ends
    /// the thread.
    pub(super) fn remote_prefetch_loop(&self) {
        // As in `prefetch_loop`: whatever ends this thread early, the batch not yet fetched
        // gets an error instead of workers waiting for it forever.
        let _guard = PrefetchGuard(self);
        let (mut window, largest) = self.remote_windows();
        let n = self.plan.num_batches();
        let mut b = self.lock().consumed;
        let pages = self.epoch_pages(b);
        let mut fetched: std::collections::HashSet<(usize, u64)> = std::collections::HashSet::new();
        while b < n {
            if !self.wait_for(|g| b < g.consumed + 2 * self.ahead) {
                return;
            }
            // The pages these batches touch first, each with every range the rest of the
            // epoch reads on it: a page is fetched whole (in one request where its samples are
            // adjacent) when first needed, not cut into the pieces each window reads of it.
            let (mut end, mut bytes) = (b, 0);
            let mut ranges: BTreeMap<usize, Vec<std::ops::Range<u64>>> = BTreeMap::new();
            while end < n && (end == b || bytes < window) {
                for &index in self.plan.batch(end) {
                    let Some(key) = self.page_key(index) else { continue };
                    if let (true, Some(on_page)) = (fetched.insert(key), pages.get(&key)) {
                        bytes += on_page.iter().map(|r| r.end - r.start).sum::<u64>();
                        ranges.entry(key.0).or_default().extend(on_page.iter().cloned());
                    }
                }
                end += 1;
            }
            let result = ranges
                .iter()
                .try_for_each(|(&part, ranges)| self.dataset(part).fetch_ranges(ranges).map(drop))
                .map_err(Error::from);
            let failed = result.is_err();
            let mut gate = self.lock();
            match result {
                Ok(()) => gate.prefetched = end,
                Err(e) => {
                    gate.ready.insert(b, Err(e));
                    gate.prefetched = usize::MAX;
                }
            }
            drop(gate);
            self.changed.notify_all();
            if failed {
                return;
            }
            b = end;
            window = (window * 2).min(largest);
        }
    }

    /// The first and the largest window of the prefetcher, in payload bytes.
    pub(super) fn remote_windows(&self) -> (u64, u64) {
        let parts = self.parts.parts().len();
        let (mut cache, mut request, mut carried) = (u64::MAX, 0, u64::MAX);
        for o in (0..parts).filter_map(|k| self.dataset(k).remote_options()) {
            cache = cache.min(o.cache_bytes);
            request = request.max(o.request_bytes);
            carried = carried.min(o.request_bytes.saturating_mul(o.in_flight as u64));
        }
        let largest = (cache / 4).min(carried / 2).max(1);
        (request.clamp(1, largest), largest)
    }

    /// Data file `part`.
    pub(super) fn dataset(&self, part: usize) -> &Dataset {
        &self.parts.parts()[part].ds
    }

    /// Sample `index`'s data file, and its payload span there.
    pub(super) fn span(&self, index: u64) -> Option<(usize, std::ops::Range<u64>)> {
        let (part, row) = self.parts.locate(index);
        self.dataset(part).sample_span(row).map(|(a, z)| (part, a..z))
    }

    /// The (data file, page) holding sample `index`'s payloads.
    pub(super) fn page_key(&self, index: u64) -> Option<(usize, u64)> {
        let (part, span) = self.span(index)?;
        Some((part, span.start / self.dataset(part).page_size().max(1)))
    }

    /// The payload spans of the samples of batches `from..` of this epoch, by (data file, page).
    pub(super) fn epoch_pages(
        &self,
        from: usize,
    ) -> std::collections::HashMap<(usize, u64), Vec<std::ops::Range<u64>>> {
        let mut pages: std::collections::HashMap<(usize, u64), Vec<std::ops::Range<u64>>> =
            Default::default();
        for b in from..self.plan.num_batches() {
            for &index in self.plan.batch(b) {
                if let Some((part, span)) = self.span(index) {
                    let page = span.start / self.dataset(part).page_size().max(1);
                    pages.entry((part, page)).or_default().push(span);
                }
            }
        }
        pages
    }

    /// Makes the payloads of samples `ids` present in the replicas of the remote datasets they
    /// read (one call per data file: its requests coalesced and concurrent), and keeps them while
    /// the leases live. Nothing for local files.
    pub(super) fn fetch_samples(&self, ids: &[u64]) -> Result<Vec<beton_storage::Lease>> {
        if !self.remote {
            return Ok(Vec::new());
        }
        let mut leases = Vec::new();
        let mut rows: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        for &index in ids {
            let (part, row) = self.parts.locate(index);
            rows.entry(part).or_default().push(row);
        }
        for (part, rows) in rows {
            leases.extend(self.parts.parts()[part].ds.fetch_samples(rows)?);
        }
        Ok(leases)
    }

    pub(super) fn worker_loop(&self) {
        let _guard = WorkerGuard(self);
        let mut scratch = Vec::new();
        let mut ids = Vec::new();
        // The sample being decoded, to name it when a decoder panics.
        let current = Cell::new(None);
        loop {
            let b = self.next.fetch_add(1, AtomicOrdering::Relaxed);
            if b >= self.plan.num_batches() {
                return;
            }
            let prefetching = self.cache.is_some() || self.remote;
            if !self.wait_for(|g| b < g.consumed + self.ahead && (!prefetching || g.prefetched > b)) {
                return;
            }
            let started = Instant::now();
            current.set(None);
            // Everything that touches the batch runs under catch_unwind: a panic becomes this
            // batch's error, and the consumer gets it instead of waiting for a batch never filed.
            let entry = std::panic::catch_unwind(AssertUnwindSafe(|| {
                let mut slot = self.pool.take(&self.columns, self.batch_size)?;
                match self.build(b, &mut slot, &mut ids, &mut scratch, &current) {
                    Ok(()) => Ok(slot),
                    Err(e) => {
                        self.pool.give_back(slot);
                        Err(e)
                    }
                }
            }))
            .unwrap_or_else(|panic| {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a decoder panicked".into());
                let at = match current.get() {
                    Some((index, k)) => {
                        let name = self.pipelines.get(k).map_or("?", |p| p.name.as_str());
                        format!(", sample {index}, field '{name}'")
                    }
                    None => String::new(),
                };
                Err(Error::Decode(format!("panic while building batch {b}{at}: {why}")))
            });
            add(&self.counters.worker_busy_ns, nanos(started.elapsed()));
            self.file(b, entry);
        }
    }

    /// Files batch `b` (or its error) for the consumer.
    pub(super) fn file(&self, b: usize, entry: Result<Slot>) {
        let mut gate = self.lock();
        if gate.stop {
            if let Ok(slot) = entry {
                self.pool.give_back(slot);
            }
            return;
        }
        // The prefetcher may have filed an error for this batch already; it wins.
        if let Some(Err(_)) = gate.ready.get(&b) {
            if let Ok(slot) = entry {
                self.pool.give_back(slot);
            }
        } else {
            gate.ready.insert(b, entry);
        }
        drop(gate);
        self.changed.notify_all();
    }

    /// Decodes batch `b` into `slot` (`ids` holds its sample ids meanwhile).
    pub(super) fn build(
        &self,
        b: usize,
        slot: &mut Slot,
        ids: &mut Vec<u64>,
        scratch: &mut Vec<u8>,
        current: &Cell<Option<(u64, usize)>>,
    ) -> Result<()> {
        ids.clear();
        self.plan.batch_into(b, ids);
        // Remote payloads: present, and kept until the batch is built.
        let _leases = self.fetch_samples(ids)?;
        slot.indices.clear();
        slot.indices.extend_from_slice(ids);
        let mut columns = slot.columns_mut();
        let sample_bytes: Vec<usize> = self.columns.iter().map(ColumnSpec::sample_bytes).collect();
        let (mut hits, mut direct, mut direct_bytes, mut payload) = (0u64, 0u64, 0u64, 0u64);
        for (position, &index) in ids.iter().enumerate() {
            // Over a version: the sample's data file and row there.
            let (part, row) = self.parts.locate(index);
            let ds = &self.parts.parts()[part].ds;
            // The sample's bytes: the map, a cached page, or a pread of its span.
            let mut held = None;
            let window = match (&self.cache, ds.sample_span(row)) {
                (Some(cache), Some((start, end))) => {
                    payload += end - start;
                    let (page, page_start) = cache.page_of(part, start);
                    match cache.get(page) {
                        Some(buf) => {
                            hits += 1;
                            held = Some(buf);
                            let bytes = held.as_ref().map_or(&[][..], |b| b.as_slice());
                            Window { offset: page_start, bytes }
                        }
                        None => {
                            direct += 1;
                            direct_bytes += end - start;
                            cache.pread(part, start, (end - start) as usize, scratch)?;
                            Window { offset: start, bytes: scratch.as_slice() }
                        }
                    }
                }
                (None, span) => {
                    payload += span.map_or(0, |(s, e)| e - s);
                    Window { offset: 0, bytes: ds.file_bytes() }
                }
                (Some(_), None) => Window { offset: 0, bytes: &[] },
            };
            for (k, p) in self.pipelines.iter().enumerate() {
                // A view draws its own randomness: its seed is the loader's mixed with its name.
                let seed = match &p.view {
                    None => self.seed,
                    Some(name) => crate::random::lane_seed(self.seed, fnv1a(name.as_bytes()), u64::MAX),
                };
                let ctx = SampleContext { index, seed, epoch: self.epoch, position };
                current.set(Some((index, k)));
                let value = match &p.sources[part] {
                    FieldSource::Field(field) => ds.get_in(row, *field, window)?,
                    FieldSource::Column { nulls: Some(nulls), .. } if nulls.is_null(row as usize) => {
                        match &p.fill {
                            Some(v) => *v,
                            None => {
                                return Err(Error::InvalidArgument {
                                    what: format!("field '{}' of sample {index}", p.name),
                                    why: "is NULL, and the loader has no value to decode it as (fill_null)"
                                        .into(),
                                })
                            }
                        }
                    }
                    FieldSource::Column { values, ty, field, .. } => {
                        let cell = match values.locate(row as usize) {
                            Some((array, at)) => beton_dataset::versioned::values::cell(array, ty, at)?,
                            None => None,
                        };
                        match cell {
                            Some(v) => v,
                            // A row the patch leaves alone: the data file's value.
                            None => match field {
                                Some(f) => ds.get_in(row, *f, window)?,
                                None => {
                                    return Err(Error::InvalidArgument {
                                        what: format!("field '{}' of sample {index}", p.name),
                                        why: "its column file has no value and its data file no field".into(),
                                    })
                                }
                            },
                        }
                    }
                };
                let cols = p.first_column..p.first_column + p.num_columns;
                // Inline for up to four columns: no allocation per sample.
                let mut outs: SmallVec<[&mut [u8]; 4]> = columns[cols.clone()]
                    .iter_mut()
                    .zip(&sample_bytes[cols])
                    .map(|(c, &n)| &mut c[position * n..(position + 1) * n])
                    .collect();
                p.decoder.decode(value, &ctx, &mut outs).map_err(|e| Error::Sample {
                    index,
                    field: p.name.clone(),
                    source: Box::new(e),
                })?;
            }
            drop(held);
        }
        // A read through the map past the end of a file truncated since it was opened got
        // zeros instead of a signal (beton_storage's SIGBUS guard): such a batch is an error.
        self.parts.check_intact()?;
        let c = &self.counters;
        add(&c.samples, ids.len() as u64);
        add(&c.payload_bytes, payload);
        add(&c.cache_hits, hits);
        add(&c.direct_reads, direct);
        add(&c.direct_bytes, direct_bytes);
        Ok(())
    }
}
/// Counts a worker out when its thread ends, however it ends, and wakes the consumer.
pub(super) struct WorkerGuard<'a>(&'a Shared);

impl Drop for WorkerGuard<'_> {
    fn drop(&mut self) {
        let mut gate = self.0.lock();
        gate.live_workers = gate.live_workers.saturating_sub(1);
        drop(gate);
        self.0.changed.notify_all();
    }
}

/// When the prefetch thread ends before the last batch (a panic), files an error for the first
/// batch it did not prefetch and releases the workers waiting on it.
pub(super) struct PrefetchGuard<'a>(&'a Shared);

impl Drop for PrefetchGuard<'_> {
    fn drop(&mut self) {
        let mut gate = self.0.lock();
        let b = gate.prefetched;
        if !gate.stop && b < self.0.plan.num_batches() && std::thread::panicking() {
            gate.ready
                .insert(b, Err(Error::Decode(format!("the prefetch thread panicked before batch {b}"))));
            gate.prefetched = usize::MAX;
        }
        drop(gate);
        self.0.changed.notify_all();
    }
}
/// FNV-1a of `bytes` (a view name's salt; stable across releases).
pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A pipeline's columns over a version: the decoder sizes them from every data file holding the
/// field and every column file giving its values ([`crate::decode::FieldData`]).
pub(super) fn version_columns(
    parts: &Parts,
    p: &Pipeline,
    sources: &[FieldSource],
    epoch: u64,
) -> Result<Vec<ColumnSpec>> {
    let ty = parts.schema().iter().find(|(n, _)| *n == p.name).map(|(_, t)| t).ok_or_else(|| {
        Error::InvalidArgument {
            what: format!("field '{}'", p.name),
            why: "not in the version's schema".into(),
        }
    })?;
    let spans = sources
        .iter()
        .zip(parts.parts())
        .map(|(source, part)| match source {
            FieldSource::Field(field) => (Some((part.ds.as_ref(), *field)), None),
            FieldSource::Column { values, field, .. } => {
                (field.map(|f| (part.ds.as_ref(), f)), Some(values.as_ref()))
            }
        })
        .collect();
    p.decoder.columns_of(&crate::decode::FieldData::of_parts(&p.name, ty, spans), epoch)
}
