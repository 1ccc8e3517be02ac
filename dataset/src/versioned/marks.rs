//! How a cleanup and the commits beside it keep out of each other's way on object storage,
//! where no lock spans machines (docs/FORMAT.md §13, "Cleanup"): two kinds of small objects.
//!
//! - A **deletion mark**, `_deleting/<folder>~<name>.<cleanup id>` (empty), is put by a cleanup
//!   before its last look at whether a file is still wanted, and removed after it deleted (or
//!   kept) the file. Each cleanup names its own marks: one cleanup that keeps the file must not
//!   remove the mark of another that is about to delete it.
//! - A **keep marker**, `_keeping/<id>.json`, is put by a commit before it checks that the files
//!   it adds (those its parent version does not name: a restore's old files, its uploads) are
//!   in the store, and removed after its conditional put of the manifest (or when it gives up).
//!   A cleanup never deletes a file a live keep marker names.
//!
//! Why no committed version can name a deleted file. The store is linearizable (S3, GCS and
//! Azure are strongly consistent for puts, deletes and listings). Take a commit adding file F
//! and a cleanup deleting F. The commit: puts its keep marker K (`kw`), lists `_deleting/`
//! (`cl`) and waits until the marks on F that listing shows are gone, checks that F is there,
//! puts the manifest, removes K.
//! The cleanup: puts its mark M (`mp`), lists `_keeping/` and reads each marker (`kl`), lists
//! the versions and reads the new manifests (`vl`), deletes F only if none of them names it
//! (`d`), removes M (`mr`).
//!
//! - If `kl` comes after `kw` and K is still listed, the cleanup keeps F.
//! - If `kl` comes after K's removal, that came after the manifest's put, so `vl` (after `kl`)
//!   sees the version and the cleanup keeps F. (This is why the markers are read before the
//!   versions: the other order can miss both.)
//! - If `kl` comes before `kw`, then `mp < kl < kw < cl`: the commit's listing shows M unless
//!   `mr` came first. Either way the commit checks F after `mr`, so after `d`: it sees F gone
//!   and commits nothing (or puts F back from its mirror, which a cleanup that reads K later
//!   then keeps). A mark that `cl` does not show was put after it, so its cleanup's `kl` sees
//!   K: the commit need not wait for it, and does not (cleanups could otherwise keep marking
//!   and keeping F for as long as the commit waits).
//!
//! Two bounds make dead processes harmless, and are what the argument assumes of live ones:
//! a cleanup deletes only within [`MARK_TIMEOUT`]` / 2` of putting its mark (by its own clock),
//! and a commit waits for a mark at most [`MARK_TIMEOUT`]; a commit puts its manifest only
//! within [`KEEP_TIMEOUT`]` / 2` of putting its keep marker, and a cleanup ignores (and removes)
//! a keep marker older than [`KEEP_TIMEOUT`] by the store's last-modified time. A machine whose
//! clock is ahead of the store's by more than half a bound could take a live marker for a dead
//! one (as the grace period already assumes clocks that roughly agree).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::{self, Store};

/// Where a cleanup marks the files it is about to delete.
pub const DELETING_DIR: &str = "_deleting";

/// Where a commit lists the files it is about to name.
pub const KEEPING_DIR: &str = "_keeping";

/// How long a commit waits for a cleanup's mark on one of its files to go. A cleanup deletes a
/// file only within half of it from putting the mark (a minute: far above a delete's latency,
/// short enough that a commit stuck behind a dead cleanup's mark still finishes).
pub const MARK_TIMEOUT: Duration = Duration::from_secs(60);

/// A mark older than this by the store's clock is a dead cleanup's: commits do not wait for it
/// and the next cleanup removes it.
pub const MARK_STALE: Duration = Duration::from_secs(120);

/// A keep marker older than this by the store's clock is a dead commit's: cleanups ignore and
/// remove it, so a crashed commit pins its files for an hour at most. A commit puts its manifest
/// only within half of it from putting the marker (it fails otherwise, committing nothing): an
/// hour is far above the listings and re-uploads between the two.
pub const KEEP_TIMEOUT: Duration = Duration::from_secs(3600);

/// The mark of file `rel` by the cleanup `cleanup_id` (`data/x.beton` as
/// `_deleting/data~x.beton.<cleanup id>`).
pub fn deleting_mark(rel: &str, cleanup_id: &str) -> String {
    format!("{DELETING_DIR}/{}.{cleanup_id}", rel.replace('/', "~"))
}

/// The file (as `data~x.beton`) a mark's name in [`DELETING_DIR`] stands for: the name without
/// the cleanup's id, which has no dot.
fn marked(mark: &str) -> &str {
    mark.rsplit_once('.').map_or(mark, |(file, _)| file)
}

/// What a keep marker holds.
#[derive(Serialize, Deserialize)]
struct KeepMarker {
    /// The version the commit would publish (for a person reading the store).
    #[serde(default)]
    version: u64,
    /// When it was written, in milliseconds since the epoch by the writer's clock (for a
    /// person: staleness goes by the store's last-modified time, the clock cleanup ages files by).
    #[serde(default)]
    written_ms: u64,
    /// The files the commit is about to name, relative to the dataset.
    files: Vec<String>,
}

/// A keep marker this process put, removed when dropped.
pub(super) struct Keep<'a> {
    store: &'a dyn Store,
    rel: String,
    /// Taken before the put: the marker is at most this old.
    put_at: Instant,
}

impl<'a> Keep<'a> {
    /// Puts a keep marker naming `files` of the dataset in `store`, for `version`.
    ///
    /// # Errors
    /// The remote errors, naming the marker's URL.
    pub(super) fn put(store: &'a dyn Store, version: u64, files: &[&str]) -> Result<Keep<'a>> {
        let rel = format!("{KEEPING_DIR}/{}.json", store::unique_name());
        let written_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let marker = KeepMarker { version, written_ms, files: files.iter().map(|f| f.to_string()).collect() };
        let bytes = serde_json::to_vec(&marker).expect("a keep marker serialises");
        let put_at = Instant::now();
        store.put(&rel, &bytes)?;
        Ok(Keep { store, rel, put_at })
    }

    /// Whether a cleanup may take this marker for a dead commit's by now (see
    /// [`KEEP_TIMEOUT`]): the commit must then not put its manifest.
    pub(super) fn expiring(&self) -> bool {
        self.put_at.elapsed() >= KEEP_TIMEOUT / 2
    }
}

impl Drop for Keep<'_> {
    fn drop(&mut self) {
        // Best effort: a marker left behind only keeps its files from cleanup for KEEP_TIMEOUT,
        // and failing here would hide whether the commit it guarded landed.
        let _ = self.store.remove(&self.rel);
    }
}

/// Waits until the cleanups that had marked one of `files` of the dataset in `store` when this
/// commit's keep marker was already up have removed their marks, for [`MARK_TIMEOUT`] at most
/// (each deletes within half of that or not at all). Only the marks of the first listing count:
/// a cleanup that marks a file later reads the keep marker and keeps it. (Waiting for every
/// mark would never end while cleanups keep marking and keeping the file.)
///
/// # Errors
/// The remote errors, naming the listing's URL.
pub(super) fn settle(store: &dyn Store, files: &[&str]) -> Result<()> {
    let wanted: HashSet<String> = files.iter().map(|f| f.replace('/', "~")).collect();
    let marks = || -> Result<HashSet<String>> {
        let now = SystemTime::now();
        Ok(store
            .list_entries(DELETING_DIR)?
            .into_iter()
            .filter(|e| {
                let name = e.name.strip_prefix(DELETING_DIR).and_then(|n| n.strip_prefix('/'));
                wanted.contains(marked(name.unwrap_or(&e.name)))
            })
            .filter(|e| now.duration_since(e.modified).unwrap_or_default() < MARK_STALE)
            .map(|e| e.name)
            .collect())
    };
    let started = Instant::now();
    let mut waiting = marks()?;
    let mut pause = Duration::from_millis(5);
    while !waiting.is_empty() && started.elapsed() <= MARK_TIMEOUT {
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(500));
        // A mark's name is never used again once removed: its cleanup's id is new per pass.
        let now = marks()?;
        waiting.retain(|m| now.contains(m));
    }
    Ok(())
}

/// The keep markers a cleanup has read, by name: a marker is written once and never changed,
/// so each is fetched once per cleanup however often `_keeping/` is listed.
#[derive(Default)]
pub(super) struct Keeps {
    read: HashMap<String, Vec<String>>,
}

impl Keeps {
    /// The files the live keep markers of the dataset in `store` name, from a fresh listing;
    /// stale markers (older than [`KEEP_TIMEOUT`]) are removed instead. A marker removed between
    /// the listing and its read was its commit's last step, after its put: the versions, looked
    /// at next, show what it named.
    ///
    /// # Errors
    /// The remote errors; [`Error::Corrupt`] naming a live marker that is not one (the cleanup
    /// then deletes nothing more: what it protects is unknown).
    pub(super) fn look(&mut self, store: &dyn Store) -> Result<HashSet<String>> {
        let now = SystemTime::now();
        let mut files = HashSet::new();
        for entry in store.list_entries(KEEPING_DIR)? {
            if now.duration_since(entry.modified).unwrap_or_default() > KEEP_TIMEOUT {
                self.read.remove(&entry.name);
                store.remove(&entry.name)?;
                continue;
            }
            let named = match self.read.entry(entry.name) {
                Entry::Occupied(known) => known.into_mut(),
                Entry::Vacant(new) => {
                    let Some(bytes) = store.read_fresh(new.key())? else {
                        continue;
                    };
                    let marker: KeepMarker = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
                        path: format!("{}{}", store.location(), new.key()).into(),
                        what: format!(
                            "not a keep marker ({e}); cleanup deletes nothing while it is younger than {} s",
                            KEEP_TIMEOUT.as_secs()
                        ),
                    })?;
                    new.insert(marker.files)
                }
            };
            files.extend(named.iter().cloned());
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_names_its_file_whatever_the_cleanup() {
        let a = deleting_mark("data/x.beton", "0123abcd");
        assert_eq!(a, "_deleting/data~x.beton.0123abcd");
        assert_eq!(marked(a.strip_prefix("_deleting/").unwrap()), "data~x.beton");
        assert_eq!(marked("splits~abc.ff"), "splits~abc");
        assert_ne!(marked("data~x.beton.cols.ff"), "data~x.beton");
    }
}
