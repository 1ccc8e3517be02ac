//! Datasets on object storage: a sparse local replica, filled on demand.
//!
//! `Dataset::open("s3://bucket/ds.beton")` (also `gs://`, `az://`, `http(s)://`, `file://`)
//! does not download the file. It makes a *replica*: a sparse file of the object's length in
//! the cache directory (`BETON_CACHE_DIR`, default `~/.cache/beton`), cut into blocks of
//! [`BLOCK_SIZE`] bytes, each missing, being fetched, or present. Opening fetches the header,
//! the descriptors, the data table and the allocation table with range requests and keeps them
//! (SQL over the table needs nothing else); a payload's blocks are fetched when it is first
//! read. The replica is then memory-mapped like a local file, so everything above storage
//! reads `&[u8]` as before; what changes is that a read of payload bytes first asks for their
//! blocks ([`Replica::ensure`]).
//!
//! - **Coalescing.** Missing blocks next to each other become one range request (up to
//!   [`RemoteOptions::request_bytes`]); one call's requests run concurrently, at most
//!   [`RemoteOptions::in_flight`] at a time. A block another thread is fetching is waited
//!   for, never fetched twice.
//! - **Leases.** Present blocks a reader uses are pinned by a [`Lease`] while it reads; only
//!   unpinned blocks are evicted. The loader holds one per batch; `Dataset::get` keeps the
//!   leases of a handle's last [`RECENT_LEASES`] payload reads, so a borrowed value stays valid
//!   while it is used.
//! - **One bounded cache.** The bytes present in all replicas of the process, and the whole
//!   files handed to the cache by a dataset directory's mirror ([`cache::adopt`]: its
//!   manifests, column files and the data files it wrote), stay under
//!   [`RemoteOptions::cache_bytes`] (`BETON_CACHE_SIZE`): fetching past it first evicts the
//!   least recently used of them, unpinned blocks (whose disk space is given back with
//!   `fallocate(PUNCH_HOLE)`) or whole files (fetched again when next read). An epoch whose
//!   working set is larger than the cache re-fetches; it never fails for room. Pinned blocks
//!   may take the cache past its bound until released.
//! - **Reuse.** A replica is named by its URL and the object's version (ETag, length), locked
//!   while open (a second process gets a private one), and leaves a list of its present blocks
//!   when closed, written after the data is synced: the next open of the same object fetches
//!   only what is still missing. A crash leaves no list, so nothing unsynced is trusted.
//! - **Consistency.** Every range request is conditional on the ETag seen at open: an object
//!   replaced under an open dataset is an error naming its URL, never a mix of two files.

use std::collections::VecDeque;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::error::{Error, Result};

mod options;
mod source;
#[cfg(feature = "remote")]
mod store;

pub use options::{RemoteOptions, BLOCK_SIZE};
use source::{ObjectInfo, Source};

/// Payload reads whose blocks a [`crate::Dataset`] handle keeps pinned for the values it lent.
pub const RECENT_LEASES: usize = 64;

/// Whether `path` names an object on remote storage (`scheme://…`, scheme letters only) rather
/// than a local path.
pub fn is_url(path: &Path) -> bool {
    path.to_str().and_then(|s| s.split_once("://")).is_some_and(|(scheme, _)| {
        scheme.len() >= 2 && scheme.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    })
}

/// Requests and bytes a replica fetched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteStats {
    /// Range requests that returned data.
    pub requests: u64,
    /// Bytes they returned.
    pub bytes: u64,
    /// Blocks evicted from this replica to keep the cache under its bound.
    pub evicted_blocks: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Missing,
    Fetching,
    Present,
}

struct Blocks {
    status: Vec<Status>,
    pins: Vec<u32>,
    /// When each block was last used (a process-wide tick), for eviction.
    used: Vec<u64>,
}

/// A sparse local copy of one remote object; see the [module docs](self).
pub(crate) struct Replica {
    source: Box<dyn Source>,
    len: u64,
    /// The replica file (read and written; locked while this handle lives).
    file: File,
    path: PathBuf,
    /// Whether this replica is this process's own (another process held the shared one):
    /// deleted on drop instead of kept.
    private: bool,
    version: String,
    options: RemoteOptions,
    blocks: Mutex<Blocks>,
    ready: Condvar,
    requests: AtomicU64,
    bytes: AtomicU64,
    evicted: AtomicU64,
}

static TICK: AtomicU64 = AtomicU64::new(1);

/// The replicas this process has open, by path, so that handles of one object share one.
#[allow(clippy::type_complexity)]
static OPEN: Mutex<Vec<(PathBuf, Weak<Replica>)>> = Mutex::new(Vec::new());

impl Replica {
    /// Opens (or reuses) the replica of `source`'s object, described by `info`, in
    /// `options.cache_dir`.
    ///
    /// Handles of the same object version in one process share one replica (its blocks, its
    /// requests); another process gets a private one while this one holds it.
    pub(crate) fn create(
        source: Box<dyn Source>,
        info: ObjectInfo,
        options: RemoteOptions,
    ) -> Result<Arc<Replica>> {
        let name = replica_name(source.url(), &info);
        let key = options.cache_dir.join(&name);
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|(_, r)| r.strong_count() > 0);
        if let Some(live) = open.iter().find(|(k, _)| *k == key).and_then(|(_, r)| r.upgrade()) {
            return Ok(live);
        }
        let replica = Self::create_file(source, info, options, &name)?;
        open.push((key, Arc::downgrade(&replica)));
        Ok(replica)
    }

    fn create_file(
        source: Box<dyn Source>,
        info: ObjectInfo,
        options: RemoteOptions,
        name: &str,
    ) -> Result<Arc<Replica>> {
        let dir = &options.cache_dir;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut private = false;
        let (file, path) = {
            let shared = dir.join(name);
            let file = open_rw(&shared)?;
            match file.try_lock() {
                Ok(()) => (file, shared),
                Err(_) => {
                    // Another process holds it: a private replica of our own, removed on drop.
                    private = true;
                    let own = dir.join(format!("{name}.{}", std::process::id()));
                    let file = open_rw(&own)?;
                    let _ = file.try_lock();
                    (file, own)
                }
            }
        };
        let n = info.len.div_ceil(BLOCK_SIZE) as usize;
        let mut status = vec![Status::Missing; n];
        let sidecar = sidecar_path(&path);
        let current_len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        if !private && current_len == info.len {
            // What the last handle left: present blocks, written after the data was synced.
            // Removed now, so a crash before this handle's own list leaves none.
            if let Some(present) = read_sidecar(&sidecar, &info) {
                for (k, s) in status.iter_mut().enumerate() {
                    if present.get(k / 8).is_some_and(|b| b & (1 << (k % 8)) != 0) {
                        *s = Status::Present;
                    }
                }
            }
        }
        let _ = std::fs::remove_file(&sidecar);
        if current_len != info.len {
            file.set_len(0).and_then(|()| file.set_len(info.len)).map_err(|e| Error::io(&path, e))?;
        }
        let present = status.iter().filter(|s| **s == Status::Present).count() as u64;
        let replica = Arc::new(Replica {
            source,
            len: info.len,
            file,
            path,
            private,
            version: info.version,
            options,
            blocks: Mutex::new(Blocks { status, pins: vec![0; n], used: vec![0; n] }),
            ready: Condvar::new(),
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        });
        budget::register(&replica, present * BLOCK_SIZE);
        Ok(replica)
    }

    pub(crate) fn url(&self) -> &str {
        self.source.url()
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The replica file (for `pread`) and its path.
    pub(crate) fn file(&self) -> (&File, &Path) {
        (&self.file, &self.path)
    }

    pub(crate) fn options(&self) -> &RemoteOptions {
        &self.options
    }

    pub(crate) fn stats(&self) -> RemoteStats {
        RemoteStats {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            evicted_blocks: self.evicted.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Blocks> {
        self.blocks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn block_bytes(&self, k: usize) -> u64 {
        let start = k as u64 * BLOCK_SIZE;
        (start + BLOCK_SIZE).min(self.len) - start
    }

    /// Makes bytes `ranges` of the object present in the replica and pins their blocks until
    /// the returned lease drops. Ranges past the object's end are clipped.
    ///
    /// # Errors
    /// [`Error::RemoteUnavailable`]/[`Error::Remote`]/[`Error::RemoteDenied`]/
    /// [`Error::RemoteNotFound`] naming the URL when a request fails after its retries;
    /// [`Error::Io`] writing the replica.
    pub(crate) fn ensure(self: &Arc<Self>, ranges: &[Range<u64>]) -> Result<Lease> {
        let lease = Lease { replica: Arc::clone(self), blocks: Vec::new() };
        self.acquire(self.blocks_of(ranges), lease)
    }

    /// The blocks holding `ranges` (clipped to the object), ascending, each once.
    fn blocks_of(&self, ranges: &[Range<u64>]) -> Vec<usize> {
        let mut blocks: Vec<usize> = Vec::new();
        for r in ranges {
            let (start, end) = (r.start.min(self.len), r.end.min(self.len));
            if start < end {
                blocks.extend((start / BLOCK_SIZE) as usize..=((end - 1) / BLOCK_SIZE) as usize);
            }
        }
        blocks.sort_unstable();
        blocks.dedup();
        blocks
    }

    /// The range requests that fetch `blocks` (ascending): runs of consecutive blocks, each cut
    /// at the largest request.
    fn requests(&self, blocks: &[usize]) -> Vec<Range<u64>> {
        let per_request = (self.options.request_bytes / BLOCK_SIZE).max(1) as usize;
        let mut requests = Vec::new();
        let mut run_start = 0;
        for i in 1..=blocks.len() {
            if i == blocks.len() || blocks[i] != blocks[i - 1] + 1 || i - run_start == per_request {
                let (a, z) = (blocks[run_start], blocks[i - 1]);
                requests.push(a as u64 * BLOCK_SIZE..((z as u64 + 1) * BLOCK_SIZE).min(self.len));
                run_start = i;
            }
        }
        requests
    }

    fn acquire(self: &Arc<Self>, mut wanted: Vec<usize>, mut lease: Lease) -> Result<Lease> {
        let tick = TICK.fetch_add(1, Ordering::Relaxed);
        loop {
            let mut mine = Vec::new();
            let mut waiting = Vec::new();
            {
                let mut b = self.lock();
                for &k in &wanted {
                    match b.status[k] {
                        Status::Present => {
                            b.pins[k] += 1;
                            b.used[k] = tick;
                            lease.blocks.push(k);
                        }
                        Status::Missing => {
                            b.status[k] = Status::Fetching;
                            mine.push(k);
                        }
                        Status::Fetching => waiting.push(k),
                    }
                }
            }
            if !mine.is_empty() {
                self.fetch_blocks(&mine, tick, &mut lease)?;
            }
            if waiting.is_empty() {
                return Ok(lease);
            }
            // Blocks another thread is fetching: wait until they are present (or its fetch
            // failed: they are missing again, and the next round fetches them here).
            let mut b = self.lock();
            while waiting.iter().any(|&k| b.status[k] == Status::Fetching) {
                b = self
                    .ready
                    .wait_timeout(b, Duration::from_millis(200))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            drop(b);
            wanted = waiting;
        }
    }

    /// Fetches `blocks` (claimed by this thread, ascending), writes them into the replica and
    /// pins them into `lease`. Each request's blocks become present as soon as it completes, so
    /// a reader waiting for one of them does not wait for the whole call. On error the blocks
    /// not fetched are missing again (and their room in the budget given back).
    fn fetch_blocks(&self, blocks: &[usize], tick: u64, lease: &mut Lease) -> Result<()> {
        let bytes: u64 = blocks.iter().map(|&k| self.block_bytes(k)).sum();
        budget::reserve(self, bytes);
        let ranges = self.requests(blocks);
        let mut written = 0;
        let result = self.source.fetch(&ranges, self.options.in_flight, &mut |i, data| {
            let range = &ranges[i];
            if data.len() as u64 != range.end - range.start {
                return Err(Error::Remote {
                    url: self.url().to_string(),
                    what: format!(
                        "bytes {}..{}: the server sent {} bytes instead of {} (the object is shorter than when it was opened?)",
                        range.start,
                        range.end,
                        data.len(),
                        range.end - range.start
                    ),
                });
            }
            write_all_at(&self.file, &data, range.start).map_err(|e| Error::io(&self.path, e))?;
            self.requests.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
            written += data.len() as u64;
            let mut b = self.lock();
            for k in (range.start / BLOCK_SIZE) as usize..range.end.div_ceil(BLOCK_SIZE) as usize {
                b.status[k] = Status::Present;
                b.pins[k] += 1;
                b.used[k] = tick;
                lease.blocks.push(k);
            }
            drop(b);
            self.ready.notify_all();
            Ok(())
        });
        if result.is_err() {
            let mut b = self.lock();
            for &k in blocks {
                if b.status[k] == Status::Fetching {
                    b.status[k] = Status::Missing;
                }
            }
            drop(b);
            self.ready.notify_all();
            budget::release(bytes - written);
        }
        result
    }

    /// What reading `ranges` would fetch now: `(requests, bytes)` of its missing blocks,
    /// coalesced as [`Replica::ensure`] would.
    pub(crate) fn plan(&self, ranges: &[Range<u64>]) -> (u64, u64) {
        let mut missing = self.blocks_of(ranges);
        let b = self.lock();
        missing.retain(|&k| b.status[k] != Status::Present);
        drop(b);
        let requests = self.requests(&missing);
        (requests.len() as u64, requests.iter().map(|r| r.end - r.start).sum())
    }

    /// Evicts unpinned present blocks used before `before` (oldest first) until `bytes` are
    /// freed; returns the bytes freed. Called by the budget, which holds its own lock.
    fn evict_older(&self, candidates: &[(u64, usize)], bytes: u64) -> u64 {
        let mut b = self.lock();
        let mut freed = 0;
        for &(tick, k) in candidates {
            if freed >= bytes {
                break;
            }
            // Still as seen (not used or pinned since the budget looked).
            if b.status[k] == Status::Present && b.pins[k] == 0 && b.used[k] == tick {
                b.status[k] = Status::Missing;
                let start = k as u64 * BLOCK_SIZE;
                punch_hole(&self.file, start, self.block_bytes(k));
                freed += self.block_bytes(k);
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        freed
    }

    /// Unpinned present blocks as `(last use, block)`.
    fn evictable(&self) -> Vec<(u64, usize)> {
        let b = self.lock();
        (0..b.status.len())
            .filter(|&k| b.status[k] == Status::Present && b.pins[k] == 0)
            .map(|k| (b.used[k], k))
            .collect()
    }

    fn present_bytes(&self) -> u64 {
        let b = self.lock();
        (0..b.status.len()).filter(|&k| b.status[k] == Status::Present).map(|k| self.block_bytes(k)).sum()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let present = self.present_bytes();
        budget::release(present);
        if self.private {
            let _ = std::fs::remove_file(&self.path);
            return;
        }
        // The list of present blocks, only after their bytes are on disk.
        if self.file.sync_data().is_ok() {
            let b = self.lock();
            let mut bits = vec![0u8; b.status.len().div_ceil(8)];
            for (k, s) in b.status.iter().enumerate() {
                if *s == Status::Present {
                    bits[k / 8] |= 1 << (k % 8);
                }
            }
            drop(b);
            write_sidecar(&sidecar_path(&self.path), self.len, &self.version, &bits);
        }
    }
}

/// Blocks of a replica pinned while their bytes are read; see the [module docs](self).
pub struct Lease {
    replica: Arc<Replica>,
    blocks: Vec<usize>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("url", &self.replica.url()).field("blocks", &self.blocks.len()).finish()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.blocks.is_empty() {
            return;
        }
        let mut b = self.replica.lock();
        for &k in &self.blocks {
            b.pins[k] = b.pins[k].saturating_sub(1);
        }
    }
}

/// The last leases of a handle's payload reads (see [`RECENT_LEASES`]).
#[derive(Default)]
pub(crate) struct RecentLeases(Mutex<VecDeque<Lease>>);

impl RecentLeases {
    pub(crate) fn keep(&self, lease: Lease) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == RECENT_LEASES {
            q.pop_front();
        }
        q.push_back(lease);
    }
}

/// The process-wide bound on the cache folder's bytes: every live replica's present blocks and
/// the whole files handed to it with [`cache::adopt`] (a dataset mirror's files), one bound
/// ([`RemoteOptions::cache_bytes`]) evicting the least recently used of either.
mod budget {
    use super::*;

    /// A whole file in the cache folder that the bound covers (with the files that go with it).
    struct Adopted {
        tick: u64,
        paths: Vec<PathBuf>,
        bytes: u64,
    }

    struct State {
        used: u64,
        replicas: Vec<Weak<Replica>>,
        files: Vec<Adopted>,
    }

    static STATE: Mutex<State> = Mutex::new(State { used: 0, replicas: Vec::new(), files: Vec::new() });

    fn lock() -> MutexGuard<'static, State> {
        STATE.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn register(replica: &Arc<Replica>, present: u64) {
        let mut s = lock();
        s.replicas.retain(|r| r.strong_count() > 0);
        s.replicas.push(Arc::downgrade(replica));
        s.used += present;
    }

    pub(super) fn release(bytes: u64) {
        let mut s = lock();
        s.used = s.used.saturating_sub(bytes);
    }

    /// Takes `bytes` for `asking`'s blocks from the budget ([`make_room`] first).
    pub(super) fn reserve(asking: &Replica, bytes: u64) {
        take(asking.options.cache_bytes, bytes, None);
    }

    /// Counts the file `paths[0]` (`bytes`, removed with the rest of `paths` when evicted) in
    /// the budget, making room for it first.
    pub(super) fn adopt(paths: Vec<PathBuf>, bytes: u64, limit: u64) {
        let tick = TICK.fetch_add(1, Ordering::Relaxed);
        take(limit, bytes, Some(Adopted { tick, paths, bytes }));
    }

    /// Forgets an adopted file removed by its owner (no eviction will remove it again).
    pub(super) fn forget(path: &Path) {
        let mut s = lock();
        if let Some(k) = s.files.iter().position(|f| f.paths[0] == path) {
            let gone = s.files.swap_remove(k);
            s.used = s.used.saturating_sub(gone.bytes);
        }
    }

    /// Whether the file `path` is adopted (counted and evictable).
    #[cfg(test)]
    pub(super) fn holds(path: &Path) -> bool {
        lock().files.iter().any(|f| f.paths[0] == path)
    }

    fn take(limit: u64, bytes: u64, file: Option<Adopted>) {
        let mut s = lock();
        // Dropped after the lock (below): the last reference to a replica may be one of these,
        // and its drop takes the lock.
        let mut live = make_room(&mut s, limit, bytes);
        s.used += bytes;
        if let Some(file) = file {
            s.files.push(file);
            // A file larger than what eviction could free goes too (the newest, so the last).
            if s.used > limit {
                live.extend(make_room(&mut s, limit, 0));
            }
        }
        drop(s);
        drop(live);
    }

    /// When `bytes` more would not fit under `limit`: evicts the least recently used unpinned
    /// replica blocks and adopted files (down to 90 % of the bound, so that eviction runs once
    /// per many fetches). Pinned blocks are never evicted: when they alone fill the bound, the
    /// cache goes past it until they are released. An adopted file is removed from disk (a
    /// process that has it open or mapped keeps reading it; the next reader fetches it again).
    fn make_room(s: &mut State, limit: u64, bytes: u64) -> Vec<Arc<Replica>> {
        if s.used + bytes <= limit {
            return Vec::new();
        }
        let target = (limit - limit / 10).saturating_sub(bytes);
        let live: Vec<Arc<Replica>> = s.replicas.iter().filter_map(Weak::upgrade).collect();
        // (last use, replica or `usize::MAX` for a file, block or file index)
        let mut all: Vec<(u64, usize, usize)> = Vec::new();
        for (r, replica) in live.iter().enumerate() {
            all.extend(replica.evictable().into_iter().map(|(tick, k)| (tick, r, k)));
        }
        all.extend(s.files.iter().enumerate().map(|(k, f)| (f.tick, usize::MAX, k)));
        all.sort_unstable();
        let mut need = s.used.saturating_sub(target);
        let mut by_replica: Vec<Vec<(u64, usize)>> = vec![Vec::new(); live.len()];
        let mut files: Vec<usize> = Vec::new();
        let mut planned = 0;
        for &(tick, r, k) in &all {
            if planned >= need {
                break;
            }
            match r {
                usize::MAX => {
                    files.push(k);
                    planned += s.files[k].bytes;
                }
                _ => {
                    by_replica[r].push((tick, k));
                    planned += live[r].block_bytes(k);
                }
            }
        }
        files.sort_unstable();
        for k in files.into_iter().rev() {
            let gone = s.files.swap_remove(k);
            // Best effort: a file already removed by its owner frees its bytes all the same.
            for path in &gone.paths {
                let _ = std::fs::remove_file(path);
            }
            s.used = s.used.saturating_sub(gone.bytes);
            need = need.saturating_sub(gone.bytes);
        }
        for (replica, candidates) in live.iter().zip(&by_replica) {
            if need == 0 {
                break;
            }
            if !candidates.is_empty() {
                let freed = replica.evict_older(candidates, need);
                s.used = s.used.saturating_sub(freed);
                need = need.saturating_sub(freed);
            }
        }
        live
    }
}

/// The one cache of remote data: whole files that live in the cache folder beside the
/// replicas (a dataset mirror's manifests, column files and the data files a process wrote)
/// counted under the same bound as the replicas' blocks, so that `BETON_CACHE_SIZE` bounds the
/// whole folder's use by this process.
pub mod cache {
    use std::path::{Path, PathBuf};

    /// Hands the file `path` (in the cache folder, complete, and a copy of something the store
    /// holds) to the cache: counted under [`super::RemoteOptions::cache_bytes`] of the
    /// environment and removed, with `also` (files derived from it), when it is the least
    /// recently used thing there and room is needed. Its owner must expect it gone: read it
    /// again from the store when it is missing.
    pub fn adopt(path: &Path, also: Vec<PathBuf>) {
        let Ok(meta) = std::fs::metadata(path) else { return };
        let limit = super::RemoteOptions::from_env().map_or(u64::MAX, |o| o.cache_bytes);
        let mut paths = vec![path.to_path_buf()];
        paths.extend(also);
        super::budget::adopt(paths, meta.len(), limit);
    }

    /// Stops counting the adopted file `path`, which its owner removed.
    pub fn forget(path: &Path) {
        super::budget::forget(path);
    }
}

/// `<hash of the URL>-<hash of the version>-<file name>`: one replica per object version.
fn replica_name(url: &str, info: &ObjectInfo) -> String {
    let base: String = url
        .rsplit('/')
        .next()
        .unwrap_or("object")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' { c } else { '_' })
        .take(80)
        .collect();
    let version = format!("{}:{}", info.len, info.version);
    format!("{:08x}-{:08x}-{base}", crc32fast::hash(url.as_bytes()), crc32fast::hash(version.as_bytes()))
}

fn sidecar_path(replica: &Path) -> PathBuf {
    let mut name = replica.as_os_str().to_owned();
    name.push(".blocks");
    PathBuf::from(name)
}

const SIDECAR_MAGIC: &[u8; 8] = b"BTNBLK01";

fn write_sidecar(path: &Path, len: u64, version: &str, bits: &[u8]) {
    let mut out = Vec::with_capacity(32 + version.len() + bits.len());
    out.extend_from_slice(SIDECAR_MAGIC);
    out.extend_from_slice(&BLOCK_SIZE.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(version.len() as u64).to_le_bytes());
    out.extend_from_slice(version.as_bytes());
    out.extend_from_slice(bits);
    out.extend_from_slice(&crc32fast::hash(&out).to_le_bytes());
    let tmp = path.with_extension("blocks.tmp");
    if std::fs::write(&tmp, &out).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// The present-block bits of a sidecar that matches `info` (and this block size), checked.
fn read_sidecar(path: &Path, info: &ObjectInfo) -> Option<Vec<u8>> {
    let data = std::fs::read(path).ok()?;
    let (body, crc) = data.split_at_checked(data.len().checked_sub(4)?)?;
    if crc32fast::hash(body).to_le_bytes() != crc[..] || !body.starts_with(SIDECAR_MAGIC) {
        return None;
    }
    let word = |at: usize| body.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let (block, len, vlen) = (word(8)?, word(16)?, word(24)? as usize);
    let version = body.get(32..32usize.checked_add(vlen)?)?;
    let bits = &body[32 + vlen..];
    let n = info.len.div_ceil(BLOCK_SIZE) as usize;
    (block == BLOCK_SIZE
        && len == info.len
        && version == info.version.as_bytes()
        && bits.len() == n.div_ceil(8))
    .then(|| bits.to_vec())
}

fn open_rw(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

fn write_all_at(file: &File, data: &[u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, data, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Seek, Write};
        let mut f = file;
        f.seek(std::io::SeekFrom::Start(offset))?;
        f.write_all(data)
    }
}

/// Gives back the disk space of `len` bytes from `offset` (they read as zeros after). Best
/// effort: where the file system cannot punch holes the bytes stay on disk, marked missing.
fn punch_hole(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: fallocate on a file descriptor this process owns (the replica, open for
        // writing); it reads no memory. Punching keeps the size (KEEP_SIZE), so the map over
        // the replica never faults; the evicted block is marked missing under the replica's
        // lock before this call and is never pinned (test `evicted_blocks_are_fetched_again`).
        let _ = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// Opens the object at `url` for reading: its length and version, and the [`Source`] to read
/// it. Without the `remote` feature, an error that says so.
pub(crate) fn open_source(url: &str, options: &RemoteOptions) -> Result<(Box<dyn Source>, ObjectInfo)> {
    #[cfg(feature = "remote")]
    {
        store::open(url, options)
    }
    #[cfg(not(feature = "remote"))]
    {
        let _ = options;
        Err(Error::Remote {
            url: url.to_string(),
            what: "this build of beton cannot read remote storage (built without the `remote` feature of beton-storage)".into(),
        })
    }
}

/// Whole objects, for what lives beside data files in a dataset directory on object storage
/// (manifests, deletions, column files, tags): read and written whole, listed, and the
/// no-overwrite put that commits a version. Without the `remote` feature each fails, saying so.
pub mod objects {
    use std::path::Path;

    #[cfg(feature = "remote")]
    use super::RemoteOptions;
    use crate::error::Result;

    /// Calls `store::$f($args.., options)` with the environment's options; without the `remote`
    /// feature, the error saying this build cannot.
    macro_rules! remote {
        ($url:expr, $f:ident($($arg:expr),*)) => {{
            #[cfg(feature = "remote")]
            return super::store::$f($($arg,)* &RemoteOptions::from_env()?);
            #[cfg(not(feature = "remote"))]
            {
                let _ = ($($arg,)*);
                Err(unsupported($url))
            }
        }};
    }

    /// Whether there is an object at `url` (a `HEAD` request).
    ///
    /// # Errors
    /// The remote errors, naming the URL.
    pub fn exists(url: &str) -> Result<bool> {
        remote!(url, object_exists(url))
    }

    /// The whole object at `url`; `None` when there is none.
    ///
    /// # Errors
    /// The remote errors, naming the URL.
    pub fn get(url: &str) -> Result<Option<Vec<u8>>> {
        remote!(url, get_object(url))
    }

    /// The names of the objects under the folder `url` (ending in `/`), relative to it, sorted.
    ///
    /// # Errors
    /// The remote errors, naming the URL.
    pub fn list(url: &str) -> Result<Vec<String>> {
        remote!(url, list_objects(url))
    }

    pub use super::source::Entry;

    /// The objects under the folder `url` (ending in `/`) with their sizes and last-modified
    /// times, sorted by name.
    ///
    /// # Errors
    /// The remote errors, naming the URL.
    pub fn list_entries(url: &str) -> Result<Vec<Entry>> {
        remote!(url, list_entries(url))
    }

    /// Deletes the object `url` (one that is not there counts as deleted).
    ///
    /// # Errors
    /// The remote errors, naming the URL.
    pub fn delete(url: &str) -> Result<()> {
        remote!(url, delete_object(url))
    }

    /// Writes `bytes` as the object `url`; with `if_absent` only when there is none (S3's
    /// `If-None-Match: *`), returning `false` when there is one.
    ///
    /// # Errors
    /// The remote errors, naming the URL.
    pub fn put(url: &str, bytes: Vec<u8>, if_absent: bool) -> Result<bool> {
        remote!(url, put_object(url, bytes, if_absent))
    }

    /// Uploads the local file `file` as the object `url` (multipart above 16 MiB).
    ///
    /// # Errors
    /// I/O errors reading it; the remote errors, naming the URL.
    pub fn upload(url: &str, file: &Path) -> Result<()> {
        remote!(url, upload_file(url, file))
    }

    #[cfg(not(feature = "remote"))]
    fn unsupported(url: &str) -> crate::error::Error {
        crate::error::Error::Remote {
            url: url.to_string(),
            what: "this build of beton cannot use remote storage (built without the `remote` feature of beton-storage)".into(),
        }
    }
}

#[cfg(test)]
mod tests;
