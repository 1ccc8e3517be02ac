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

mod batch;
mod epoch;
mod stats;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use beton_dataset::IndexSet;
use beton_storage::Dataset;

use crate::cache::{PageCache, Schedule};
use crate::decode::{default_decoder, FieldDecoder};
use crate::error::{Error, Result};
use crate::order::sequence::Ids;
use crate::order::{no_pages, plan_epoch, Ctx, EpochContext, EpochPlan, Order, OrderOption};
use crate::pages::PageMap;
use crate::parts::{FieldSource, Parts};
use crate::slots::SlotPool;
use crate::state::LoaderState;

use batch::{fnv1a, version_columns, Gate, Pipeline, Shared};
pub use epoch::Epoch;
use stats::Counters;
pub use stats::EpochStats;

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
    /// The data files and schema: a `.beton` file's one, or a version's.
    parts: Arc<Parts>,
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
        let n = self.parts.num_rows();
        // A list that is not strictly increasing (repeats, or another order): the orders run
        // over positions in the list as given (each appearance its own sample, on its row's
        // page), mapped back to rows per batch, so SEQUENTIAL reads the list in its order.
        // Every row is not a set of every row: 10^8 rows would be 800 MB of ids.
        let (ids, repeated) = match self.list {
            Some(rows) if rows.windows(2).all(|w| w[0] < w[1]) => {
                (Ids::Set(Arc::new(IndexSet::from_increasing(rows))), None)
            }
            Some(rows) => (Ids::All(rows.len() as u64), Some(Arc::new(rows))),
            None => (self.indices.map_or(Ids::All(n), |set| Ids::Set(Arc::new(set))), None),
        };
        let max = match (&repeated, &ids) {
            (Some(rows), _) => rows.iter().max().copied(),
            (None, Ids::Set(set)) => set.max_id(),
            (None, Ids::All(_)) => None,
        };
        if let Some(max) = max {
            if max >= n {
                return Err(invalid("indices", format!("row {max} is past the last row ({n} rows)")));
            }
        }
        // The fields and their types: the file's, or the version's schema.
        let schema: Vec<(String, beton_storage::FieldType)> = self.parts.schema().to_vec();
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
        // A field: its source in each data file.
        let locate = |name: &str| -> Result<Arc<Vec<FieldSource>>> {
            if !schema.iter().any(|(n, _)| n == name) {
                return Err(Error::Storage(beton_storage::Error::NoSuchField {
                    name: name.to_string(),
                    available: schema.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
                }));
            }
            Ok(Arc::new(self.parts.resolve(name)?))
        };
        let mut pipelines = Vec::new();
        for name in &names {
            let sources = locate(name)?;
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
            let sources = locate(source)?;
            if schema.iter().any(|(n, _)| n == name) || self.views[..k].iter().any(|v| &v.0 == name) {
                return Err(invalid("view", format!("'{name}' is already the name of a field or view")));
            }
            let decoder = Arc::clone(decoder);
            pipelines.push(Pipeline {
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
        {
            let parts = &self.parts;
            let selected: Option<&[u64]> = match (&repeated, &ids) {
                (Some(rows), _) => Some(rows),
                (None, Ids::Set(set)) if set.len() as u64 != n => Some(set.as_slice()),
                (None, _) => None,
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
        let datasets: Vec<&Dataset> = self.parts.parts().iter().map(|p| p.ds.as_ref()).collect();
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
        let fingerprint =
            Arc::new(Fingerprint { ids: ids.clone(), repeated: repeated.clone(), value: OnceLock::new() });
        Ok(Loader {
            parts: self.parts,
            ids,
            all_rows: OnceLock::new(),
            repeated,
            pages: OnceLock::new(),
            fingerprint,
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
    /// The data files: a `.beton` file's one, or a version's.
    parts: Arc<Parts>,
    /// The samples read: every row, or a set.
    ids: Ids,
    /// `ids` as a set when they are every row, made when first asked for.
    all_rows: OnceLock<IndexSet>,
    /// A [`LoaderBuilder::index_list`] that is not strictly increasing, as given; plans and
    /// `indices` are positions in it.
    repeated: Option<Arc<Vec<u64>>>,
    /// The page of every sample, made when an order first needs it (QUASI_RANDOM, custom).
    pages: OnceLock<Arc<PageMap>>,
    /// The resume state's fingerprint of the samples, computed when first asked for.
    fingerprint: Arc<Fingerprint>,
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
        Self::builder_parts(Parts::single(ds))
    }

    /// A builder over a version of a dataset directory ([`Parts::of_version`]), or any
    /// [`Parts`]: sample indices are positions in the version. The process cache
    /// (`os_cache(false)`) reads every data file of the version under one bound.
    pub fn builder_parts(parts: Parts) -> LoaderBuilder {
        LoaderBuilder {
            parts: Arc::new(parts),
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

    /// The plan of `epoch` for this rank. A built-in order's plan is generated as its batches
    /// are read ([`EpochPlan::batch_into`]): making it costs next to nothing at any size.
    ///
    /// # Errors
    /// As [`plan_epoch`].
    pub fn plan(&self, epoch: u64) -> Result<EpochPlan> {
        let s = &self.settings;
        if let Some(order) = s.order.as_option() {
            let pages = if order.needs_pages() { self.pages() } else { no_pages() };
            let ctx = Ctx { seed: s.seed, epoch, batch_size: s.batch_size };
            let seq = order.rank_seq(self.ids.view(), &pages, ctx, s.rank, s.world_size);
            return Ok(EpochPlan::lazy(
                seq,
                self.ids.clone(),
                self.repeated.clone(),
                s.batch_size,
                s.drop_last,
            ));
        }
        let pages = self.pages();
        let ctx = self.context(epoch, &pages);
        let plan = plan_epoch(s.order.as_ref(), &ctx, s.rank, s.world_size, s.drop_last)?;
        Ok(match &self.repeated {
            Some(rows) => plan.map_ids(|position| rows[position as usize]),
            None => plan,
        })
    }

    /// The page of every sample read (of every position in a list with repeats).
    fn pages(&self) -> Arc<PageMap> {
        Arc::clone(self.pages.get_or_init(|| {
            let pages = self.parts.page_map();
            Arc::new(match &self.repeated {
                Some(rows) => PageMap::from_pages(rows.iter().map(|&r| pages.page(r).unwrap_or(0)).collect()),
                None => pages,
            })
        }))
    }

    fn context<'a>(&'a self, epoch: u64, pages: &'a PageMap) -> EpochContext<'a> {
        EpochContext {
            indices: self.indices(),
            pages,
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
            let mut cols = version_columns(&self.parts, p, &p.sources, epoch)?;
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
                let (k, row) = self.parts.locate(index);
                let ds = &self.parts.parts()[k].ds;
                ds.sample_span(row).map(|(start, _)| cache.page_of(k, start).0)
            };
            Schedule::new(page_of, plan.batches())
        });
        let remote = self.parts.parts().iter().any(|p| p.ds.is_remote());
        let shared = Arc::new(Shared {
            remote,
            parts: Arc::clone(&self.parts),
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
        let state = self.state_without_fingerprint(epoch);
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
            fingerprint: Arc::clone(&self.fingerprint),
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
        match (&self.repeated, &self.ids) {
            (Some(rows), _) => rows.to_vec(),
            (None, Ids::All(n)) => (0..*n).collect(),
            (None, Ids::Set(set)) => set.as_slice().to_vec(),
        }
    }

    /// Sets the epoch the next [`next_epoch`](Self::next_epoch) runs, from its first batch (a
    /// loader rebuilt between epochs goes on where the old one stopped).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.next_epoch = epoch;
        self.resume_at = 0;
    }

    /// The first data file (the dataset itself, for a `.beton` file).
    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.parts.parts()[0].ds
    }

    /// The data files and schema the loader reads.
    pub fn parts(&self) -> &Parts {
        &self.parts
    }

    /// The samples this loader reads (for an [`index_list`](LoaderBuilder::index_list) with
    /// repeats or out of order, positions in the list; [`index_rows`](Self::index_rows) gives
    /// its rows). Every row of the dataset is made into a set when first asked for.
    pub fn indices(&self) -> &IndexSet {
        match &self.ids {
            Ids::Set(set) => set,
            Ids::All(n) => self.all_rows.get_or_init(|| IndexSet::all(*n)),
        }
    }

    /// The state at the start of `epoch`, its fingerprint left for [`Fingerprint::get`]: that
    /// is one pass over every id, paid when a state is saved or resumed, not by every epoch.
    fn state_without_fingerprint(&self, epoch: u64) -> LoaderState {
        let s = &self.settings;
        LoaderState {
            seed: s.seed,
            epoch,
            batches_consumed: 0,
            indices_fingerprint: 0,
            indices_len: self.ids.view().len() as u64,
            world_size: s.world_size,
            rank: s.rank,
            order: s.order.name(),
            batch_size: s.batch_size,
            drop_last: s.drop_last,
        }
    }

    /// The state at the start of `epoch` (as [`LoaderState::new`] makes it); a list with
    /// repeats is part of its fingerprint.
    fn state_of(&self, epoch: u64) -> LoaderState {
        let mut state = self.state_without_fingerprint(epoch);
        state.indices_fingerprint = self.fingerprint.get();
        state
    }
}

/// The fingerprint of a loader's samples in its resume state ([`LoaderState::indices_fingerprint`]),
/// computed once, when first needed.
pub(super) struct Fingerprint {
    ids: Ids,
    repeated: Option<Arc<Vec<u64>>>,
    value: OnceLock<u64>,
}

impl Fingerprint {
    /// [`IndexSet::fingerprint`] of the samples, XOR the FNV-1a hash of a list with repeats.
    pub(super) fn get(&self) -> u64 {
        *self.value.get_or_init(|| {
            let set = match &self.ids {
                Ids::All(n) => IndexSet::fingerprint_of_all(*n),
                Ids::Set(set) => set.fingerprint(),
            };
            match &self.repeated {
                Some(rows) => set ^ fnv1a(bytemuck::cast_slice(rows.as_slice())),
                None => set,
            }
        })
    }
}
