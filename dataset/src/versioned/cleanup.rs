//! Removing old versions and the files no version references (docs/FORMAT.md §13, "Cleanup").
//!
//! Cleanup may remove only files that no version committed before, during or after it can
//! reference (Lance's and Delta's rule). It decides from the versions and tags it lists, and
//! never deletes a file that a manifest existing when it deletes names:
//!
//! - On a local disk it holds the directory's lock exclusively (lock.rs) from before it lists
//!   the versions until its last delete. Every edit holds the lock shared from before it reads
//!   its base version or writes its first file until its manifest is published, so none is
//!   half done while cleanup looks: a restore has either published (its version is kept, being
//!   the latest) or not yet read the old manifest (which cleanup may remove: the restore then
//!   fails, naming the version); files an edit wrote are referenced by its published manifest.
//! - On object storage (no lock across machines) it marks each file, then looks a last time at
//!   the keep markers of commits in progress and at the versions, and deletes only what none
//!   names; a commit puts its keep marker before it checks that its files are there, waiting
//!   for the marks on them to go (marks.rs argues why no committed version names a deleted
//!   file; docs/FORMAT.md §13 "Cleanup").

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::commit::{self, io, list_own_versions, read_manifest_on, Line};
use super::layout::MAIN;
use super::{lines, lock, marks, read_tag_targets, CleanupReport, VersionedDataset};
use super::{COLUMNS_DIR, DATA_DIR, DELETIONS_DIR, ROW_IDS_DIR, SPLITS_DIR};
use crate::error::{Error, Result};
use crate::store::Store;

/// The files the versions a cleanup keeps (and any published while it runs) reference.
struct Reachable {
    files: HashSet<String>,
    /// Versions read into `files` or removed, by line key.
    seen: BTreeSet<(String, u64)>,
}

impl Reachable {
    /// Reads the manifests of versions not seen yet: those published since the last look, on
    /// any line (a branch made since included).
    fn refresh(&mut self, store: &dyn Store) -> Result<()> {
        for line in lines::all_lines(store)? {
            for v in list_own_versions(store, &line)? {
                if self.seen.insert((line.key().to_string(), v)) {
                    self.files.extend(files_of(store, &line, v)?);
                }
            }
        }
        Ok(())
    }

    fn contains(&self, rel: &str) -> bool {
        named(&self.files, rel)
    }
}

/// The files version `v` of `line` names, its group copies included. On object storage, none when a cleanup on another
/// machine removed the version since it was listed: a version that is gone needs no file kept
/// (and what a newer one names, the next listing shows). On a local disk no other cleanup runs
/// (lock.rs).
fn files_of(store: &dyn Store, line: &Line, v: u64) -> Result<Vec<String>> {
    if !store.fetch(&line.manifest_name(v))? {
        return Ok(Vec::new());
    }
    let m = read_manifest_on(store, line, v)?;
    // Group copies live as long as a version names them (a data file's own copy lives as long
    // as its data file: `named`).
    Ok(m.files().chain(m.copies()).map(str::to_string).collect())
}

/// Writes the checkpoint of version `v` of `line` (its manifest whole) when its manifest is a
/// delta on a version in `removed`, unless there is one.
fn checkpoint_if_needed(store: &dyn Store, line: &Line, v: u64, removed: &BTreeSet<u64>) -> Result<()> {
    let m = read_manifest_on(store, line, v)?;
    if m.lineage.depth > 0
        && m.parent.is_some_and(|p| removed.contains(&p) && line.owner(p) == line.id.as_deref())
    {
        store.put_new(&line.checkpoint_name(v), &m.to_json())?;
    }
    Ok(())
}

/// Whether `files` name `rel`, or the data file `rel` is the columnar copy of (which lives as
/// long as its data file).
fn named(files: &HashSet<String>, rel: &str) -> bool {
    files.contains(rel) || rel.strip_suffix(crate::columnar::SUFFIX).is_some_and(|d| files.contains(d))
}

impl VersionedDataset {
    /// Removes the versions older than the newest `keep_versions` (tagged versions are kept)
    /// and every file of the directory that no remaining version references, as well as
    /// writers' temporary files, when older than `grace` (a writer still running may be about
    /// to commit the files it wrote). Returns what was removed. On object storage the store's
    /// files are listed, aged by their last-modified times, and deleted from the store and the
    /// mirror.
    ///
    /// Safe beside edits in other threads and processes, `grace` zero included: a version
    /// committed before, during or after it stays whole (the module's doc says how; on a local
    /// disk cleanup waits for edits in progress to publish).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `keep_versions` 0; I/O errors; the remote errors.
    pub fn cleanup(&self, keep_versions: usize, grace: Duration) -> Result<CleanupReport> {
        if keep_versions == 0 {
            return Err(Error::InvalidArgument {
                what: "keep_versions".into(),
                why: "must be at least 1".into(),
            });
        }
        let store = &*self.store;
        let dir = self.dir();
        let remote = store.url().is_some();
        let _cleanup = lock::cleanup(dir)?;
        let tags = read_tag_targets(store)?;
        let live: Vec<Line> = std::iter::once(Line::main()).chain(self.branch_lines()?).collect();
        // Versions other lines need: the starts of branches, the ancestry of every head (a
        // merge's common ancestor is among them), tagged ones.
        let mut needed: HashSet<(String, u64)> = HashSet::new();
        for line in &live {
            for (id, v) in &line.starts {
                needed.insert((id.clone().unwrap_or_else(|| MAIN.to_string()), *v));
            }
            let head = super::latest(store, line)?;
            let m = read_manifest_on(store, line, head)?;
            needed.extend(lines::ancestry(&m, line.line_of(head).key()));
        }
        for tag in tags.values() {
            needed.insert((tag.line.clone().unwrap_or_else(|| MAIN.to_string()), tag.version));
        }
        let mut reachable = Reachable { files: HashSet::new(), seen: BTreeSet::new() };
        let mut report = CleanupReport::default();
        for line in lines::all_lines(store)? {
            let key = line.key().to_string();
            let is_live = live.iter().any(|l| l.id == line.id);
            let all = list_own_versions(store, &line)?;
            let kept = |k: usize, v: u64| {
                (is_live && k.saturating_add(keep_versions) >= all.len())
                    || needed.contains(&(key.clone(), v))
            };
            for (k, &v) in all.iter().enumerate() {
                if kept(k, v) {
                    reachable.files.extend(files_of(store, &line, v)?);
                }
                reachable.seen.insert((key.clone(), v));
            }
            // A version kept whose manifest is a delta on one removed gets its checkpoint first,
            // so that readers find it whole before its base goes (stored.rs).
            let removed: BTreeSet<u64> =
                all.iter().enumerate().filter(|&(k, &v)| !kept(k, v)).map(|(_, &v)| v).collect();
            for (k, &v) in all.iter().enumerate() {
                if kept(k, v) {
                    checkpoint_if_needed(store, &line, v, &removed)?;
                }
            }
            // Recorded before any goes: a commit then knows a missing version was removed, not
            // never published (`latest_after`).
            if let (Some(&newest), false) = (removed.last(), remote) {
                commit::record_removed(store, &line, newest)?;
            }
            let mut gone = Vec::new();
            // Newest first: a version a tag made since the listing keeps (object storage)
            // still has its base, for its checkpoint.
            for (k, &v) in all.iter().enumerate().rev() {
                if kept(k, v) {
                    continue;
                }
                // On object storage a tag made since the listing keeps its version (on a local
                // disk tags are made under the lock this cleanup holds).
                let tagged = |t: &lines::Tag| t.version == v && t.line.as_deref().unwrap_or(MAIN) == key;
                if remote && read_tag_targets(store)?.values().any(tagged) {
                    checkpoint_if_needed(store, &line, v, &removed)?;
                    reachable.files.extend(files_of(store, &line, v)?);
                    continue;
                }
                commit::crash_point();
                store.remove(&line.manifest_name(v))?;
                store.remove(&line.checkpoint_name(v))?;
                gone.push(v);
            }
            // The report names main's versions (a branch's are removed alongside).
            if line.is_main() {
                gone.reverse();
                report.versions = gone;
            }
        }
        // Versions published since the listing (by a writer that does not take the lock).
        reachable.refresh(store)?;
        let now = SystemTime::now();
        // A clock behind the file's (another machine's, the store's) makes it young: kept.
        let aged = |t: SystemTime| now.duration_since(t).unwrap_or_default() >= grace;
        if remote {
            cleanup_store(store, &mut reachable, aged, &mut report)?;
            return Ok(report);
        }
        let old = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).is_ok_and(aged);
        for folder in [DATA_DIR, DELETIONS_DIR, ROW_IDS_DIR, SPLITS_DIR, COLUMNS_DIR, commit::TMP_DIR] {
            let Ok(entries) = std::fs::read_dir(dir.join(folder)) else { continue };
            for entry in entries.flatten() {
                let rel = format!("{folder}/{}", entry.file_name().to_string_lossy());
                let path = entry.path();
                if reachable.contains(&rel) || !old(&path) || !path.is_file() {
                    continue;
                }
                // A writer's temporary file is in use while it holds its lock (storage's temp.rs).
                if let Ok(f) = std::fs::File::open(&path) {
                    if f.try_lock().is_err() {
                        continue;
                    }
                }
                let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                commit::crash_point();
                std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
                report.files.push(rel);
                report.bytes += bytes;
            }
        }
        Ok(report)
    }
}

/// [`VersionedDataset::cleanup`]'s files for a dataset on object storage: the store's listing
/// of each folder, files no version references and old enough by their last-modified time
/// (uploads of a writer that has not committed yet are young) deleted from the store and the
/// mirror. Before each delete the file is marked, then the keep markers and the versions are
/// looked at a last time, in that order (marks.rs says why).
fn cleanup_store(
    store: &dyn Store,
    reachable: &mut Reachable,
    aged: impl Fn(SystemTime) -> bool,
    report: &mut CleanupReport,
) -> Result<()> {
    // Marks a cleanup that died left (old enough that no commit waits for them).
    let now = SystemTime::now();
    for mark in store.list_entries(marks::DELETING_DIR)? {
        if now.duration_since(mark.modified).unwrap_or_default() > marks::MARK_STALE {
            store.remove(&mark.name)?;
        }
    }
    // This cleanup's marks are its own: another cleanup that keeps a file removes only its mark.
    let id = commit::unique_name();
    let mut keeps = marks::Keeps::default();
    for folder in [DATA_DIR, DELETIONS_DIR, ROW_IDS_DIR, SPLITS_DIR, COLUMNS_DIR] {
        for entry in store.list_entries(folder)? {
            if reachable.contains(&entry.name) || !aged(entry.modified) {
                continue;
            }
            let mark = marks::deleting_mark(&entry.name, &id);
            let marked = Instant::now();
            store.put(&mark, &[])?;
            let decided = (|| {
                let kept = keeps.look(store)?;
                reachable.refresh(store)?;
                commit::pause_point();
                // A commit stops waiting for a mark after MARK_TIMEOUT: past half of it this
                // cleanup leaves the file to a later one.
                let delete = !reachable.contains(&entry.name)
                    && !named(&kept, &entry.name)
                    && marked.elapsed() < marks::MARK_TIMEOUT / 2;
                if delete {
                    commit::crash_point();
                    store.remove(&entry.name)?;
                }
                Ok::<bool, Error>(delete)
            })();
            // Removed whatever happened: a mark left behind holds up the commits naming the file.
            let unmarked = store.remove(&mark);
            if decided? {
                report.bytes += entry.size;
                report.files.push(entry.name);
            }
            unmarked?;
        }
    }
    Ok(())
}
