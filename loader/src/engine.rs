//! The loader: builds the batches of an epoch on a pool of threads, in parallel, into reused
//! output slots, and hands them out in order.
//!
//! Each epoch iterator ([`Epoch`]) starts `threads` workers. A worker takes the next batch
//! number, waits until it is within `batches_ahead` of the consumer (back-pressure), takes a
//! free slot, decodes every sample of the batch straight into it and files it; the consumer
//! takes batches strictly in order. With `os_cache = false` a prefetch thread reads the pages of
//! upcoming batches first (`cache.rs`). Dropping an [`Epoch`] mid-way stops and joins all of its
//! threads. Every random choice comes from (seed, epoch, sample index), so the batches are the
//! same whatever the thread count or timing.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use beton_dataset::IndexSet;
use beton_storage::{Dataset, Window};
use smallvec::SmallVec;

use crate::cache::{PageCache, Schedule};
use crate::decode::{default_decoder, ColumnSpec, FieldDecoder, SampleContext};
use crate::error::{Error, Result};
use crate::order::{plan_epoch, EpochContext, EpochPlan, Order, OrderOption};
use crate::pages::PageMap;
use crate::parts::{FieldSource, Parts};
use crate::slots::{Batch, Slot, SlotPool};
use crate::state::LoaderState;

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
struct Counters {
    samples: AtomicU64,
    payload_bytes: AtomicU64,
    pages_read: AtomicU64,
    page_bytes_read: AtomicU64,
    cache_hits: AtomicU64,
    direct_reads: AtomicU64,
    direct_bytes: AtomicU64,
    worker_busy_ns: AtomicU64,
    worker_wait_ns: AtomicU64,
}

fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, AtomicOrdering::Relaxed);
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// One field the loader decodes, and where its columns are in a slot.
#[derive(Clone)]
struct Pipeline {
    /// The field's index in the (first) data file; `usize::MAX` for a column-file field.
    field: usize,
    /// The field's name.
    name: String,
    /// Over a version: where the field comes from in each data file.
    sources: Option<Arc<Vec<FieldSource>>>,
    /// For an extra view of a field: the name its columns take instead of the field's.
    view: Option<String>,
    decoder: Arc<dyn FieldDecoder>,
    /// What a NULL of the field is decoded as ([`LoaderBuilder::fill_null`]); a NULL without
    /// one is an error at build.
    fill: Option<beton_storage::Value<'static>>,
    first_column: usize,
    num_columns: usize,
}

/// Builder methods that each set one field: `name(arg: Type) => field = value;` makes
/// `pub fn name(mut self, arg: Type) -> Self`, which sets `self.field = value`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) => $($field:ident).+ = $value:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$($field).+ = $value;
                self
            }
        )*
    };
}

/// FFCV's arguments that shape every epoch, as the builder takes them and the loader runs them.
struct Settings {
    batch_size: usize,
    /// Worker threads; 0 in the builder: one per core.
    threads: usize,
    order: Arc<dyn Order>,
    seed: u64,
    drop_last: bool,
    batches_ahead: usize,
    /// This process's place in torch.distributed's world.
    rank: usize,
    world_size: usize,
}

/// Builder of a [`Loader`]; FFCV's `Loader` arguments.
pub struct LoaderBuilder {
    ds: Arc<Dataset>,
    /// Over a version: its data files and schema.
    parts: Option<Arc<Parts>>,
    indices: Option<IndexSet>,
    /// Rows with repeats ([`LoaderBuilder::index_list`]).
    list: Option<Vec<u64>>,
    settings: Settings,
    os_cache: bool,
    cache_pages: Option<usize>,
    fields: Option<Vec<String>>,
    decoders: Vec<(String, Arc<dyn FieldDecoder>)>,
    views: Vec<(String, String, Arc<dyn FieldDecoder>)>,
    fills: Vec<(String, beton_storage::Value<'static>)>,
    epochs: Option<u64>,
}

impl LoaderBuilder {
    /// The samples to read (default: every row). Usually a query's answer or a named split.
    pub fn indices(mut self, indices: IndexSet) -> Self {
        self.indices = Some(indices);
        self.list = None;
        self
    }

    /// The samples to read as a list, FFCV's `indices`: a row may appear several times
    /// (oversampling), each appearance read once per epoch, and SEQUENTIAL reads the list in
    /// the order given (`[5, 3, 1]` gives 5, 3, 1). The other orders treat every appearance as
    /// a sample of its own (RANDOM spreads repeats over the epoch). A strictly increasing list
    /// is the same as its [`IndexSet`].
    pub fn index_list(mut self, rows: Vec<u64>) -> Self {
        self.list = Some(rows);
        self.indices = None;
        self
    }

    setters! {
        /// Samples per batch (default 32).
        batch_size(n: usize) => settings.batch_size = n;
        /// Worker threads (default: the number of cores; 0 also means that).
        threads(n: usize) => settings.threads = n;
        /// The traversal order (default SEQUENTIAL).
        order(order: OrderOption) => settings.order = Arc::new(order);
        /// The seed of every random choice (default 0).
        seed(seed: u64) => settings.seed = seed;
        /// Drop the last batch when it is partial (default true, as FFCV).
        drop_last(drop_last: bool) => settings.drop_last = drop_last;
        /// Batches built ahead of the consumer (default 3, as FFCV).
        batches_ahead(n: usize) => settings.batches_ahead = n;
        /// `true` (default): read through the map, the OS page cache shared by processes. `false`:
        /// the process cache, reading pages ahead of use into a bounded pool.
        os_cache(os_cache: bool) => os_cache = os_cache;
        /// Bound of the process cache in pages (default: `2 × batch_size + 16`, the QUASI_RANDOM
        /// buffer plus batches in flight, at most the file's pages).
        cache_pages(n: usize) => cache_pages = Some(n);
        /// The number of epochs the loader runs (default: no limit, as FFCV's). Past it,
        /// [`Loader::next_epoch`] is an error rather than a silent extra epoch, and
        /// [`Loader::remaining_epochs`] counts down.
        epochs(n: u64) => epochs = Some(n);
    }

    /// A custom traversal order.
    pub fn custom_order(mut self, order: Arc<dyn Order>) -> Self {
        self.settings.order = order;
        self
    }

    /// This process is rank `rank` of `world_size` (torch.distributed's numbers).
    pub fn distributed(mut self, rank: usize, world_size: usize) -> Self {
        self.settings.rank = rank;
        self.settings.world_size = world_size;
        self
    }

    /// Decode only these fields (default: every field with a default decoder, plus those given
    /// a decoder).
    pub fn fields(mut self, names: &[&str]) -> Self {
        self.fields = Some(names.iter().map(|s| s.to_string()).collect());
        self
    }

    /// Decode a NULL of field `name` (over a version: a row appended without the field) as
    /// `value`, an int, float or bool of the field's type. Without it, a NULL in a field the
    /// loader decodes is an error at build, naming the field and the samples.
    pub fn fill_null(mut self, name: &str, value: beton_storage::Value<'static>) -> Self {
        self.fills.push((name.to_string(), value));
        self
    }

    /// Decode field `name` with `decoder`.
    pub fn decoder(mut self, name: &str, decoder: Arc<dyn FieldDecoder>) -> Self {
        self.decoders.push((name.to_string(), decoder));
        self
    }

    /// Adds an extra view of field `field`, decoded by `decoder` into columns named `name`
    /// (e.g. a second random crop of the same image, as self-supervised methods train on). Each
    /// view draws its own randomness.
    pub fn view(mut self, name: &str, field: &str, decoder: Arc<dyn FieldDecoder>) -> Self {
        self.views.push((name.to_string(), field.to_string(), decoder));
        self
    }

    /// Checks the arguments and builds the loader.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the argument: batch size 0, more than
    /// [`beton_storage::MAX_THREADS`] threads, rank outside the world,
    /// indices past the dataset, an unknown field, a field with no decoder.
    pub fn build(self) -> Result<Loader> {
        let invalid = |what: &str, why: String| Error::InvalidArgument { what: what.into(), why };
        if self.settings.batch_size == 0 {
            return Err(invalid("batch_size", "must be at least 1".into()));
        }
        if self.settings.threads > beton_storage::MAX_THREADS {
            return Err(invalid(
                "threads",
                format!(
                    "{} is more than the {} threads beton runs at once (0 means one per core)",
                    self.settings.threads,
                    beton_storage::MAX_THREADS
                ),
            ));
        }
        if self.settings.world_size == 0 || self.settings.rank >= self.settings.world_size {
            return Err(invalid(
                "distributed",
                format!("rank {} of world size {}", self.settings.rank, self.settings.world_size),
            ));
        }
        let n = self.parts.as_ref().map_or(self.ds.num_samples(), |p| p.num_rows());
        // A list that is not strictly increasing (repeats, or another order): the orders run
        // over positions in the list as given (each appearance its own sample, on its row's
        // page), mapped back to rows per batch, so SEQUENTIAL reads the list in its order.
        let (indices, repeated) = match self.list {
            Some(rows) if rows.windows(2).all(|w| w[0] < w[1]) => (rows.into_iter().collect(), None),
            Some(rows) => (IndexSet::all(rows.len() as u64), Some(Arc::new(rows))),
            None => (self.indices.unwrap_or_else(|| IndexSet::all(n)), None),
        };
        let max = match &repeated {
            Some(rows) => rows.iter().max().copied(),
            None => indices.max_id(),
        };
        if let Some(max) = max {
            if max >= n {
                return Err(invalid("indices", format!("row {max} is past the last row ({n} rows)")));
            }
        }
        // The fields and their types: the file's, or the version's schema.
        let schema: Vec<(String, beton_storage::FieldType)> = match &self.parts {
            Some(parts) => parts.schema().to_vec(),
            None => self.ds.fields().iter().map(|f| (f.name().to_string(), f.field_type().clone())).collect(),
        };
        let names: Vec<String> = match &self.fields {
            Some(names) => names.clone(),
            None => {
                let mut names: Vec<String> = schema
                    .iter()
                    .filter(|(_, ty)| default_decoder(ty).is_some())
                    .map(|(name, _)| name.clone())
                    .collect();
                for (name, _) in &self.decoders {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
                names
            }
        };
        // A field: its index in the (first) data file and, over a version, its source per file.
        let locate = |name: &str| -> Result<(usize, Option<Arc<Vec<FieldSource>>>)> {
            match &self.parts {
                None => Ok((self.ds.field_index(name)?, None)),
                Some(parts) => {
                    if !schema.iter().any(|(n, _)| n == name) {
                        return Err(Error::Storage(beton_storage::Error::NoSuchField {
                            name: name.to_string(),
                            available: schema.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
                        }));
                    }
                    let field = self.ds.field_index(name).unwrap_or(usize::MAX);
                    Ok((field, Some(Arc::new(parts.resolve(name)?))))
                }
            }
        };
        let mut pipelines = Vec::new();
        for name in &names {
            let (field, sources) = locate(name)?;
            let decoder = match self.decoders.iter().rev().find(|(n, _)| n == name) {
                Some((_, d)) => Arc::clone(d),
                None => schema
                    .iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, ty)| default_decoder(ty))
                    .ok_or_else(|| {
                        invalid(
                            "fields",
                            format!("field '{name}' has no default decoder (images need an image decoder)"),
                        )
                    })?,
            };
            pipelines.push(Pipeline {
                field,
                name: name.clone(),
                sources,
                view: None,
                decoder,
                fill: None,
                first_column: 0,
                num_columns: 0,
            });
        }
        for (k, (name, source, decoder)) in self.views.iter().enumerate() {
            let (field, sources) = locate(source)?;
            if schema.iter().any(|(n, _)| n == name) || self.views[..k].iter().any(|v| &v.0 == name) {
                return Err(invalid("view", format!("'{name}' is already the name of a field or view")));
            }
            let decoder = Arc::clone(decoder);
            pipelines.push(Pipeline {
                field,
                name: source.clone(),
                sources,
                view: Some(name.clone()),
                decoder,
                fill: None,
                first_column: 0,
                num_columns: 0,
            });
        }
        // NULLs (rows appended without a field): a value to decode them as, or an error now
        // rather than at some batch of some epoch.
        for (name, value) in &self.fills {
            let Some((_, ty)) = schema.iter().find(|(n, _)| n == name) else {
                return Err(invalid("fill_null", format!("no field '{name}'")));
            };
            let fits = matches!(
                (ty, value),
                (beton_storage::FieldType::Int, beton_storage::Value::Int(_))
                    | (beton_storage::FieldType::Float, beton_storage::Value::Float(_))
                    | (beton_storage::FieldType::Bool, beton_storage::Value::Bool(_))
            );
            if !fits {
                return Err(invalid(
                    "fill_null",
                    format!("field '{name}' is a {}: a NULL of it is filled with one of its values ({value:?} is not; ints, floats and bools can be filled)", ty.name()),
                ));
            }
        }
        if let Some(parts) = &self.parts {
            let selected: Option<&[u64]> = match &repeated {
                Some(rows) => Some(rows),
                None if indices.len() as u64 == n => None,
                None => Some(indices.as_slice()),
            };
            for p in &mut pipelines {
                p.fill = self.fills.iter().rev().find(|(n, _)| *n == p.name).map(|(_, v)| *v);
                if p.fill.is_some() {
                    continue;
                }
                let (first, count) = parts.null_samples(&p.name, selected, 8);
                if count > 0 {
                    let shown: Vec<String> = first.iter().map(u64::to_string).collect();
                    return Err(invalid(
                        &format!("field '{}'", p.name),
                        format!(
                            "is NULL in {count} of the samples to load (sample {}{}): the loader decodes \
                             a value for every sample. Set the values (update), leave the field out of \
                             the loader, or give the value a NULL is decoded as (fill_null; Python: \
                             Loader(fill_nulls={{'{}': ...}}))",
                            shown.join(", "),
                            if count > first.len() as u64 { ", ..." } else { "" },
                            p.name
                        ),
                    ));
                }
            }
        }
        let threads = match self.settings.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let pages = match &self.parts {
            Some(parts) => parts.page_map(),
            None => PageMap::from_dataset(&self.ds),
        };
        let pages = Arc::new(match &repeated {
            Some(rows) => PageMap::from_pages(rows.iter().map(|&r| pages.page(r).unwrap_or(0)).collect()),
            None => pages,
        });
        let datasets: Vec<&Dataset> = match &self.parts {
            Some(parts) => parts.parts().iter().map(|p| p.ds.as_ref()).collect(),
            None => vec![self.ds.as_ref()],
        };
        // A remote dataset's replica is already a cache on local disk (read through its map):
        // its batches are fetched ahead in the epoch's order instead (`remote_prefetch_loop`).
        let remote = datasets.iter().any(|d| d.is_remote());
        let cache = if self.os_cache || remote {
            None
        } else {
            let pages: u64 = datasets.iter().map(|d| d.num_pages()).sum();
            let bound =
                self.cache_pages.unwrap_or(2 * self.settings.batch_size + 16).min(pages.max(1) as usize);
            Some(Arc::new(PageCache::new(&datasets, bound)?))
        };
        Ok(Loader {
            ds: self.ds,
            parts: self.parts,
            indices: Arc::new(indices),
            repeated,
            pages,
            pipelines,
            settings: Settings {
                threads,
                batches_ahead: self.settings.batches_ahead.max(1),
                ..self.settings
            },
            cache,
            pool: SlotPool::default(),
            next_epoch: 0,
            resume_at: 0,
            epochs: self.epochs,
        })
    }
}

/// FFCV's loader over one `.beton` file: see the crate doc.
pub struct Loader {
    ds: Arc<Dataset>,
    /// Over a version: its data files.
    parts: Option<Arc<Parts>>,
    indices: Arc<IndexSet>,
    /// A [`LoaderBuilder::index_list`] that is not strictly increasing, as given; plans and
    /// `indices` are positions in it.
    repeated: Option<Arc<Vec<u64>>>,
    pages: Arc<PageMap>,
    pipelines: Vec<Pipeline>,
    /// `threads` is the number of workers (never 0), `batches_ahead` at least 1.
    settings: Settings,
    cache: Option<Arc<PageCache>>,
    pool: SlotPool,
    next_epoch: u64,
    resume_at: usize,
    epochs: Option<u64>,
}

impl Loader {
    /// A builder over `ds` with FFCV's defaults.
    pub fn builder(ds: Arc<Dataset>) -> LoaderBuilder {
        LoaderBuilder {
            ds,
            parts: None,
            indices: None,
            list: None,
            settings: Settings {
                batch_size: 32,
                threads: 0,
                order: Arc::new(OrderOption::Sequential),
                seed: 0,
                drop_last: true,
                batches_ahead: 3,
                rank: 0,
                world_size: 1,
            },
            os_cache: true,
            cache_pages: None,
            fields: None,
            decoders: Vec::new(),
            views: Vec::new(),
            fills: Vec::new(),
            epochs: None,
        }
    }

    /// A builder over a version of a dataset directory ([`Parts::of_version`]): sample indices
    /// are positions in the version. The process cache (`os_cache(false)`) reads every data
    /// file of the version under one bound.
    pub fn builder_parts(parts: Parts) -> LoaderBuilder {
        let mut builder = Self::builder(Arc::clone(&parts.parts()[0].ds));
        builder.parts = Some(Arc::new(parts));
        builder
    }

    /// The plan of `epoch` for this rank.
    ///
    /// # Errors
    /// As [`plan_epoch`].
    pub fn plan(&self, epoch: u64) -> Result<EpochPlan> {
        let ctx = self.context(epoch);
        let plan = plan_epoch(
            self.settings.order.as_ref(),
            &ctx,
            self.settings.rank,
            self.settings.world_size,
            self.settings.drop_last,
        )?;
        Ok(match &self.repeated {
            Some(rows) => plan.map_ids(|position| rows[position as usize]),
            None => plan,
        })
    }

    fn context(&self, epoch: u64) -> EpochContext<'_> {
        EpochContext {
            indices: &self.indices,
            pages: &self.pages,
            seed: self.settings.seed,
            epoch,
            batch_size: self.settings.batch_size,
        }
    }

    /// Batches per epoch on this rank.
    ///
    /// # Errors
    /// As [`plan_epoch`].
    pub fn num_batches(&self) -> Result<usize> {
        Ok(self.plan(self.next_epoch)?.num_batches())
    }

    /// Epochs left to run when the loader was built with [`LoaderBuilder::epochs`].
    pub fn remaining_epochs(&self) -> Option<u64> {
        self.epochs.map(|n| n.saturating_sub(self.next_epoch))
    }

    /// The epoch the next [`next_epoch`](Self::next_epoch) call runs.
    pub fn epoch(&self) -> u64 {
        self.next_epoch
    }

    /// Runs the next epoch (FFCV: each `for batch in loader` is one epoch).
    ///
    /// # Errors
    /// As [`plan_epoch`]; column errors from the decoders.
    pub fn next_epoch(&mut self) -> Result<Epoch> {
        let epoch = self.next_epoch;
        if let Some(n) = self.epochs.filter(|&n| epoch >= n) {
            return Err(Error::InvalidArgument {
                what: "epoch".into(),
                why: format!(
                    "the loader was built for {n} epochs (0 to {}); epoch {epoch} is past them",
                    n.saturating_sub(1)
                ),
            });
        }
        let skip = std::mem::take(&mut self.resume_at);
        self.next_epoch += 1;
        self.run_epoch(epoch, skip)
    }

    /// Runs epoch `epoch` from its batch `first` on, without changing what
    /// [`next_epoch`](Self::next_epoch) runs.
    ///
    /// # Errors
    /// As [`next_epoch`](Self::next_epoch), and [`Error::InvalidArgument`] when `first` is past
    /// the epoch's batches.
    pub fn run_epoch(&self, epoch: u64, first: usize) -> Result<Epoch> {
        let plan = self.plan(epoch)?;
        if first > plan.num_batches() {
            return Err(Error::InvalidArgument {
                what: "first batch".into(),
                why: format!("{first} is past the epoch's {} batches", plan.num_batches()),
            });
        }
        let mut pipelines = self.pipelines.clone();
        let mut columns = Vec::new();
        for p in &mut pipelines {
            let mut cols = match (&self.parts, &p.sources) {
                (Some(parts), Some(sources)) => version_columns(parts, p, sources, epoch)?,
                _ => p.decoder.columns(&self.ds, p.field, epoch)?,
            };
            if let Some(view) = &p.view {
                // `image` → `view`, `image.len` → `view.len`.
                let field = p.name.as_str();
                for c in &mut cols {
                    c.name = match c.name.strip_prefix(field) {
                        Some(rest) => format!("{view}{rest}"),
                        None => format!("{view}.{}", c.name),
                    };
                }
            }
            p.first_column = columns.len();
            p.num_columns = cols.len();
            columns.extend(cols);
        }
        // Sizes may come from the file (the longest payload, an array's shape): checked here,
        // before any buffer is sized from them, so later arithmetic on them cannot overflow.
        for c in &columns {
            if c.batch_bytes(self.settings.batch_size).is_none() {
                return Err(Error::InvalidArgument {
                    what: format!("batch column '{}'", c.name),
                    why: format!("{:?} per sample × {} samples overflows", c.shape, self.settings.batch_size),
                });
            }
        }
        let schedule = self.cache.as_ref().map(|cache| {
            // A sample's page key: its data file's page, over a version.
            let page_of = |index: u64| {
                let (k, row) = self.parts.as_ref().map_or((0, index), |p| p.locate(index));
                let ds = self.parts.as_ref().map_or(&self.ds, |p| &p.parts()[k].ds);
                ds.sample_span(row).map(|(start, _)| cache.page_of(k, start).0)
            };
            Schedule::new(page_of, plan.batches())
        });
        let remote = match &self.parts {
            Some(parts) => parts.parts().iter().any(|p| p.ds.is_remote()),
            None => self.ds.is_remote(),
        };
        let shared = Arc::new(Shared {
            remote,
            ds: Arc::clone(&self.ds),
            parts: self.parts.clone(),
            plan,
            pipelines,
            columns: Arc::new(columns),
            cache: self.cache.clone(),
            schedule,
            pool: self.pool.clone(),
            seed: self.settings.seed,
            epoch,
            batch_size: self.settings.batch_size,
            ahead: self.settings.batches_ahead,
            next: AtomicUsize::new(first),
            gate: Mutex::new(Gate {
                consumed: first,
                prefetched: first,
                ready: BTreeMap::new(),
                stop: false,
                live_workers: 0,
            }),
            changed: Condvar::new(),
            counters: Counters::default(),
        });
        let state = self.state_of(epoch);
        let workers = self.settings.threads.min(shared.plan.num_batches().max(1));
        shared.lock().live_workers = workers;
        // Threads go into the epoch as they start: if a spawn fails, dropping it stops and joins
        // the ones already running.
        let mut out = Epoch {
            shared: Arc::clone(&shared),
            threads: Vec::with_capacity(workers + 1),
            consumer_wait: Duration::ZERO,
            batches: 0,
            failed: false,
            state,
        };
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|e| Error::Io { path: "<thread>".into(), source: e })
        };
        if shared.cache.is_some() {
            let s = Arc::clone(&shared);
            out.threads.push(spawn("beton-prefetch".into(), Box::new(move || s.prefetch_loop()))?);
        } else if shared.remote {
            let s = Arc::clone(&shared);
            out.threads
                .push(spawn("beton-remote-prefetch".into(), Box::new(move || s.remote_prefetch_loop()))?);
        }
        for k in 0..workers {
            let s = Arc::clone(&shared);
            match spawn(format!("beton-worker-{k}"), Box::new(move || s.worker_loop())) {
                Ok(t) => out.threads.push(t),
                Err(e) => {
                    // Workers that never started are not waited for.
                    shared.lock().live_workers -= workers - k;
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Resumes from a state saved with [`Epoch::state`]: the next [`next_epoch`](Self::next_epoch)
    /// runs the saved epoch from the first batch not consumed.
    ///
    /// # Errors
    /// [`Error::StateMismatch`] naming the first setting that differs from the saved run's
    /// (indices, world size, rank, order, batch size, drop_last, seed).
    pub fn resume(&mut self, state: &LoaderState) -> Result<()> {
        let current = self.state_of(state.epoch);
        state.validate_against(&current)?;
        let plan = self.plan(state.epoch)?;
        if state.batches_consumed as usize > plan.num_batches() {
            return Err(Error::InvalidState(format!(
                "{} batches consumed, but epoch {} has {}",
                state.batches_consumed,
                state.epoch,
                plan.num_batches()
            )));
        }
        self.next_epoch = state.epoch;
        self.resume_at = state.batches_consumed as usize;
        Ok(())
    }

    /// The rows this loader reads, one per sample, in the order of [`indices`](Self::indices)
    /// (an [`index_list`](LoaderBuilder::index_list) as given, repeats included).
    pub fn index_rows(&self) -> Vec<u64> {
        match &self.repeated {
            Some(rows) => rows.to_vec(),
            None => self.indices.as_slice().to_vec(),
        }
    }

    /// Sets the epoch the next [`next_epoch`](Self::next_epoch) runs, from its first batch (a
    /// loader rebuilt between epochs goes on where the old one stopped).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.next_epoch = epoch;
        self.resume_at = 0;
    }

    /// The dataset.
    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.ds
    }

    /// The samples this loader reads (for an [`index_list`](LoaderBuilder::index_list) with
    /// repeats or out of order, positions in the list; [`index_rows`](Self::index_rows) gives
    /// its rows).
    pub fn indices(&self) -> &IndexSet {
        &self.indices
    }

    /// The state at the start of `epoch`; a list with repeats is part of its fingerprint.
    fn state_of(&self, epoch: u64) -> LoaderState {
        let mut state = LoaderState::new(
            self.settings.order.as_ref(),
            &self.context(epoch),
            self.settings.rank,
            self.settings.world_size,
            self.settings.drop_last,
        );
        if let Some(rows) = &self.repeated {
            state.indices_fingerprint ^= fnv1a(bytemuck::cast_slice(rows.as_slice()));
        }
        state
    }
}

struct Gate {
    /// Batches handed to the consumer (the next one it takes).
    consumed: usize,
    /// Batches whose pages the prefetcher has handled.
    prefetched: usize,
    ready: BTreeMap<usize, Result<Slot>>,
    stop: bool,
    /// Worker threads that have not exited: when none is left and the batch the consumer waits
    /// for was never filed, the consumer gets an error instead of waiting forever.
    live_workers: usize,
}

struct Shared {
    /// Whether a dataset read is on remote storage: batches fetch their payloads first.
    remote: bool,
    ds: Arc<Dataset>,
    parts: Option<Arc<Parts>>,
    plan: EpochPlan,
    pipelines: Vec<Pipeline>,
    columns: Arc<Vec<ColumnSpec>>,
    cache: Option<Arc<PageCache>>,
    schedule: Option<Schedule>,
    pool: SlotPool,
    seed: u64,
    epoch: u64,
    batch_size: usize,
    ahead: usize,
    next: AtomicUsize,
    gate: Mutex<Gate>,
    changed: Condvar,
    counters: Counters,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `ready(gate)` or stop; returns false on stop.
    fn wait_for(&self, ready: impl Fn(&Gate) -> bool) -> bool {
        let started = Instant::now();
        let mut gate = self.lock();
        while !gate.stop && !ready(&gate) {
            gate = self.changed.wait(gate).unwrap_or_else(|e| e.into_inner());
        }
        add(&self.counters.worker_wait_ns, nanos(started.elapsed()));
        !gate.stop
    }

    fn prefetch_loop(&self) {
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
    fn remote_prefetch_loop(&self) {
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
    fn remote_windows(&self) -> (u64, u64) {
        let parts = self.parts.as_ref().map_or(1, |p| p.parts().len());
        let (mut cache, mut request, mut carried) = (u64::MAX, 0, u64::MAX);
        for o in (0..parts).filter_map(|k| self.dataset(k).remote_options()) {
            cache = cache.min(o.cache_bytes);
            request = request.max(o.request_bytes);
            carried = carried.min(o.request_bytes.saturating_mul(o.in_flight as u64));
        }
        let largest = (cache / 4).min(carried / 2).max(1);
        (request.clamp(1, largest), largest)
    }

    /// Data file `part` (the dataset itself outside a version).
    fn dataset(&self, part: usize) -> &Dataset {
        self.parts.as_ref().map_or(&self.ds, |p| &p.parts()[part].ds)
    }

    /// Sample `index`'s data file, and its payload span there.
    fn span(&self, index: u64) -> Option<(usize, std::ops::Range<u64>)> {
        let (part, row) = self.parts.as_ref().map_or((0, index), |p| p.locate(index));
        self.dataset(part).sample_span(row).map(|(a, z)| (part, a..z))
    }

    /// The (data file, page) holding sample `index`'s payloads.
    fn page_key(&self, index: u64) -> Option<(usize, u64)> {
        let (part, span) = self.span(index)?;
        Some((part, span.start / self.dataset(part).page_size().max(1)))
    }

    /// The payload spans of the samples of batches `from..` of this epoch, by (data file, page).
    fn epoch_pages(&self, from: usize) -> std::collections::HashMap<(usize, u64), Vec<std::ops::Range<u64>>> {
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

    /// Makes the payloads of `batches` present in the replicas of the remote datasets they read
    /// (one call per data file: its requests coalesced and concurrent), and keeps them while
    /// the leases live. Nothing for local files.
    fn fetch_batches(&self, batches: std::ops::Range<usize>) -> Result<Vec<beton_storage::Lease>> {
        if !self.remote {
            return Ok(Vec::new());
        }
        let ids = batches.flat_map(|b| self.plan.batch(b).iter().copied());
        let mut leases = Vec::new();
        match &self.parts {
            None => leases.extend(self.ds.fetch_samples(ids)?),
            Some(parts) => {
                let mut rows: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
                for index in ids {
                    let (part, row) = parts.locate(index);
                    rows.entry(part).or_default().push(row);
                }
                for (part, rows) in rows {
                    leases.extend(parts.parts()[part].ds.fetch_samples(rows)?);
                }
            }
        }
        Ok(leases)
    }

    fn worker_loop(&self) {
        let _guard = WorkerGuard(self);
        let mut scratch = Vec::new();
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
                match self.build(b, &mut slot, &mut scratch, &current) {
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
    fn file(&self, b: usize, entry: Result<Slot>) {
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

    /// Decodes batch `b` into `slot`.
    fn build(
        &self,
        b: usize,
        slot: &mut Slot,
        scratch: &mut Vec<u8>,
        current: &Cell<Option<(u64, usize)>>,
    ) -> Result<()> {
        let ids = self.plan.batch(b);
        // Remote payloads: present, and kept until the batch is built.
        let _leases = self.fetch_batches(b..b + 1)?;
        slot.indices.clear();
        slot.indices.extend_from_slice(ids);
        let mut columns = slot.columns_mut();
        let sample_bytes: Vec<usize> = self.columns.iter().map(ColumnSpec::sample_bytes).collect();
        let (mut hits, mut direct, mut direct_bytes, mut payload) = (0u64, 0u64, 0u64, 0u64);
        for (position, &index) in ids.iter().enumerate() {
            // Over a version: the sample's data file and row there.
            let (part, row) = match &self.parts {
                Some(parts) => parts.locate(index),
                None => (0, index),
            };
            let ds = match &self.parts {
                Some(parts) => &parts.parts()[part].ds,
                None => &self.ds,
            };
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
                let value = match p.sources.as_deref().map(|s| &s[part]) {
                    None => ds.get_in(row, p.field, window)?,
                    Some(FieldSource::Field(field)) => ds.get_in(row, *field, window)?,
                    Some(FieldSource::Column { nulls: Some(nulls), .. }) if nulls.is_null(row as usize) => {
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
                    Some(FieldSource::Column { values, ty, field, .. }) => {
                        match beton_dataset::versioned::values::cell(values, ty, row as usize)? {
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
        match &self.parts {
            Some(parts) => parts.check_intact()?,
            None => self.ds.check_intact()?,
        }
        let c = &self.counters;
        add(&c.samples, ids.len() as u64);
        add(&c.payload_bytes, payload);
        add(&c.cache_hits, hits);
        add(&c.direct_reads, direct);
        add(&c.direct_bytes, direct_bytes);
        Ok(())
    }
}

/// One epoch's batches, in order. Dropping it stops and joins its threads; batches already
/// handed out stay valid.
pub struct Epoch {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    consumer_wait: Duration,
    batches: u64,
    failed: bool,
    state: LoaderState,
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

/// Counts a worker out when its thread ends, however it ends, and wakes the consumer.
struct WorkerGuard<'a>(&'a Shared);

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
struct PrefetchGuard<'a>(&'a Shared);

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
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A pipeline's columns over a version: the decoder sizes them from every data file holding the
/// field and every column file giving its values ([`crate::decode::FieldData`]).
fn version_columns(
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
            FieldSource::Column { values, field, .. } => (field.map(|f| (part.ds.as_ref(), f)), Some(values)),
        })
        .collect();
    p.decoder.columns_of(&crate::decode::FieldData::of_parts(&p.name, ty, spans), epoch)
}
