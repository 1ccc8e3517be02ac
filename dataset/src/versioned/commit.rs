//! Committing a version: every new file first, then the manifest, published with no-overwrite
//! semantics (the store's `put_new` of `_versions/N.json`: a hard link on a local disk, a
//! conditional put on object storage, either failing when another writer made version N first). Nothing is ever modified in place, so a crash at any point leaves the last committed
//! version whole and at most some unreferenced files, which `cleanup` removes.

use std::collections::HashSet;

use super::manifest::{Manifest, Operation};
use super::marks;
use super::stored::{self, Parsed};
pub(crate) use crate::error::io;
use crate::error::{Error, Result};
use crate::store::Store;
pub use crate::store::{crash_point, pause_point, unique_name, write_new_file, TMP_DIR};
pub(crate) use crate::store::{sync_dir, temp_file};

pub use super::layout::{
    checkpoint_name, manifest_name, Line, CHECKPOINTS_DIR, CLEANUP_FILE, TAGS_DIR, VERSIONS_DIR,
};

/// What publishing a manifest came to.
#[derive(Debug)]
pub enum Published {
    /// This manifest is now the version it names.
    Done,
    /// Another writer committed that version number first.
    Taken,
}

/// Publishes `manifest` as `_versions/N.json` (N = its version) unless that exists: the
/// store's no-overwrite put ([`Store::put_new`]: `link(2)` on a local disk, a conditional put
/// on object storage, after the steps marks.rs argues). Stored as its changes to `base` (the
/// version it was made from) where stored.rs's rules allow, else whole; its
/// [`Manifest::lineage`] says which once published.
///
/// # Errors
/// I/O errors naming the path; [`Error::InvalidArgument`] on a file system without hard links;
/// the remote errors.
pub fn publish(store: &dyn Store, manifest: &mut Manifest, base: Option<&Manifest>) -> Result<Published> {
    publish_on(store, &Line::main(), manifest, base)
}

/// [`publish`] on `line`: as its version `manifest.version` (`_lines/ID/_versions/N.json` for
/// a branch's).
///
/// # Errors
/// As [`publish`].
pub fn publish_on(
    store: &dyn Store,
    line: &Line,
    manifest: &mut Manifest,
    base: Option<&Manifest>,
) -> Result<Published> {
    // What readers refuse is never written.
    // A base was read or committed, so checked: only what the edit changed is checked again.
    let checked = match base {
        Some(base) => super::manifest::check_child(manifest, base),
        None => super::manifest::check_manifest(manifest),
    };
    checked.map_err(|why| Error::InvalidArgument {
        what: format!("commit to {}", store.location()),
        why: format!("{why}; nothing was committed"),
    })?;
    let keep = match store.url() {
        Some(_) => before_publish(store, line, manifest)?,
        None => None,
    };
    if keep.is_some() {
        crash_point();
        pause_point();
    }
    let name = line.manifest_name(manifest.version);
    let (json, lineage) = stored::encode_for_commit(manifest, base);
    let published = store.put_new(&name, &json)?;
    // Only now: a cleanup that no longer sees the marker sees the version (marks.rs).
    drop(keep);
    if !published {
        return Ok(Published::Taken);
    }
    manifest.lineage = lineage;
    store.published(&name, &json)?;
    Ok(Published::Done)
}

/// A commit's steps on object storage before its conditional put of `manifest`: the files it
/// references that the store lacks are uploaded; the files its parent version does not name
/// (a restore's, the uploads) get a keep marker from before they are checked until after the
/// put (returned: dropped after the put), so that a cleanup either keeps them or is seen
/// deleting them (the module's doc argues the order). Small ones are fetched into the mirror
/// first, so that one a cleanup removed can be put back; a data file this process has no copy
/// of cannot.
///
/// # Errors
/// [`Error::InvalidArgument`] when a file the manifest names is gone for good ([`gone`]) or
/// the checks outlived the marker; the remote errors.
fn before_publish<'a>(
    store: &'a dyn Store,
    line: &Line,
    manifest: &Manifest,
) -> Result<Option<marks::Keep<'a>>> {
    let files: Vec<&str> = manifest.files().collect();
    store.upload_missing(&files)?;
    let parent: HashSet<String> = manifest
        .parent
        .and_then(|p| read_manifest_on(store, line, p).ok())
        .map(|m| m.files().map(str::to_string).collect())
        .unwrap_or_default();
    let fresh: Vec<&str> = files.into_iter().filter(|f| !parent.contains(*f)).collect();
    for rel in &fresh {
        if !rel.starts_with("data/") && !store.fetch(rel)? {
            return Err(gone(store, manifest, rel));
        }
    }
    if fresh.is_empty() {
        return Ok(None);
    }
    let keep = marks::Keep::put(store, manifest.version, &fresh)?;
    marks::settle(store, &fresh)?;
    if let Some(lost) = store.put_back(&fresh)? {
        return Err(gone(store, manifest, lost));
    }
    if keep.expiring() {
        return Err(Error::InvalidArgument {
            what: format!("commit of version {} to {}", manifest.version, store.location()),
            why: format!(
                "checking its files took over {} s, after which a cleanup may ignore what it keeps; \
                 nothing was committed",
                (marks::KEEP_TIMEOUT / 2).as_secs()
            ),
        });
    }
    Ok(Some(keep))
}

/// The error of a commit that would name `rel`, which a cleanup removed from the store and this
/// process has no copy of: the version it comes from cannot be brought back, as when a cleanup
/// removed its manifest ("has no version").
fn gone(store: &dyn Store, manifest: &Manifest, rel: &str) -> Error {
    let base = store.location();
    let kind = match rel.split('/').next() {
        Some(super::layout::DATA_DIR) => "data file",
        Some(super::layout::DELETIONS_DIR) => "deletion file",
        Some(super::layout::ROW_IDS_DIR) => "row-id file",
        Some(super::layout::SPLITS_DIR) => "split file",
        Some(super::layout::COLUMNS_DIR) => "column file",
        _ => "file",
    };
    let (what, whose) = match manifest.operation {
        Operation::Restore { version } => {
            (format!("restore of version {version} of {base}"), format!("version {version}'s {kind} {rel}"))
        }
        _ => (
            format!("commit of version {} to {base}", manifest.version),
            format!("the {kind} {rel} it would name"),
        ),
    };
    Error::InvalidArgument {
        what,
        why: format!(
            "{whose} is no longer in the store (a cleanup removed it, running beside this edit or \
             before it) and this process has no copy to put back; nothing was committed"
        ),
    }
}

/// Every committed version number, ascending.
///
/// # Errors
/// I/O errors reading `_versions/`; the remote errors.
pub fn list_versions(store: &dyn Store) -> Result<Vec<u64>> {
    list_own_versions(store, &Line::main())
}

/// The versions of `line`: its own and those of the lines it starts from up to where it starts,
/// ascending.
///
/// # Errors
/// As [`list_versions`].
pub fn list_versions_on(store: &dyn Store, line: &Line) -> Result<Vec<u64>> {
    let mut out = match line.parent_line() {
        Some(parent) => {
            let mut v = list_versions_on(store, &parent)?;
            v.retain(|&n| n <= line.start());
            v
        }
        None => Vec::new(),
    };
    out.extend(list_own_versions(store, line)?);
    Ok(out)
}

/// The versions in `line`'s own folder, ascending.
///
/// # Errors
/// As [`list_versions`].
pub fn list_own_versions(store: &dyn Store, line: &Line) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for name in store.list(&line.versions_dir())? {
        let Some(stem) = name.strip_suffix(".json") else { continue };
        if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(v) = stem.parse() {
                out.push(v);
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// `read` of the local copy of the immutable file `rel` of the dataset, fetched first on object
/// storage (and fetched again once when the cache evicted the mirror's copy between the fetch and
/// the read); `None` when the store has no such file.
///
/// # Errors
/// `read`'s errors; the remote errors.
pub(crate) fn read_fetched<T>(
    store: &dyn Store,
    rel: &str,
    read: impl Fn(&std::path::Path) -> Result<T>,
) -> Result<Option<T>> {
    let path = super::integrity::inside(store.root(), rel)?;
    let mut tries = if store.url().is_some() { 2 } else { 1 };
    loop {
        if !store.fetch(rel)? {
            return Ok(None);
        }
        match read(&path) {
            Err(e) if tries > 1 && crate::error::is_not_found(&e) => tries -= 1,
            other => return other.map(Some),
        }
    }
}

/// The bytes of the immutable file `rel` of the dataset ([`read_fetched`]); `None` when there
/// is no such file.
///
/// # Errors
/// I/O errors naming the path; the remote errors.
pub(crate) fn read_file(store: &dyn Store, rel: &str) -> Result<Option<Vec<u8>>> {
    match read_fetched(store, rel, |path| std::fs::read(path).map_err(|e| io(path, e))) {
        Err(e) if crate::error::is_not_found(&e) => Ok(None),
        other => other,
    }
}

/// Reads the manifest of `version`: its file, and when that is a delta, the deltas before it
/// back to a whole manifest (a checkpoint, one a cleanup wrote, or one read recently), applied
/// in order (stored.rs).
///
/// # Errors
/// [`Error::InvalidArgument`] when there is no such version (listing the ones there are) or its
/// manifest is not valid; [`Error::Corrupt`] for a delta whose base is gone with no checkpoint
/// in its place, or that does not fit its base.
pub fn read_manifest(store: &dyn Store, version: u64) -> Result<Manifest> {
    read_manifest_on(store, &Line::main(), version)
}

/// [`read_manifest`] of version `version` of `line` (its own, or of a line it starts from).
///
/// # Errors
/// As [`read_manifest`].
pub fn read_manifest_on(store: &dyn Store, line: &Line, version: u64) -> Result<Manifest> {
    let mut deltas: Vec<(Manifest, stored::Delta, std::path::PathBuf, u64)> = Vec::new();
    let mut top = None;
    let mut v = version;
    let mut base = loop {
        let name = line.manifest_name(v);
        let path = store.root().join(&name);
        let read = match read_stored(store, &name)? {
            Some(read) => read,
            None if deltas.is_empty() => {
                let there = list_versions_on(store, line)?;
                return Err(Error::InvalidArgument {
                    what: "version".into(),
                    why: format!(
                        "{} has no version {version}; it has {}",
                        store.location(),
                        describe_versions(&there)
                    ),
                });
            }
            None => break checkpoint_of(store, line, version, v, &mut deltas)?,
        };
        let bytes = match read {
            Stored::Cached(m) => break m,
            Stored::Bytes(bytes, identity) => {
                top.get_or_insert((path.clone(), identity));
                bytes
            }
        };
        let (m, delta) = match stored::parse(&bytes, &path)? {
            Parsed::Whole(m) => (m, None),
            Parsed::Delta(m, d) => (m, Some(d)),
        };
        if m.version != v {
            return Err(Error::InvalidArgument {
                what: format!("manifest {}", path.display()),
                why: format!("says it is version {}", m.version),
            });
        }
        match delta {
            None => break std::sync::Arc::new(m),
            Some(d) => {
                v = d.base;
                deltas.push((m, d, path, bytes.len() as u64));
            }
        }
    };
    while let Some((m, d, path, len)) = deltas.pop() {
        base = std::sync::Arc::new(stored::apply(m, &d, &base, &path, len)?);
    }
    // Checked once, whole (a manifest found among those kept was checked when it was kept).
    if let Some((path, identity)) = top {
        stored::check(&base, &path)?;
        recent::keep(path, identity, std::sync::Arc::clone(&base));
    }
    Ok((*base).clone())
}

/// The whole manifest in place of version `gone`, the base of the last delta of `deltas`, which
/// a cleanup removed after writing the checkpoint of the version built on it (popped from
/// `deltas`).
fn checkpoint_of(
    store: &dyn Store,
    line: &Line,
    version: u64,
    gone: u64,
    deltas: &mut Vec<(Manifest, stored::Delta, std::path::PathBuf, u64)>,
) -> Result<std::sync::Arc<Manifest>> {
    let (m, _, path, _) = deltas.last().expect("a delta was read");
    let on = m.version;
    let name = line.checkpoint_name(on);
    let Some(bytes) = read_file(store, &name)? else {
        return Err(super::integrity::corrupt(
            path,
            format!(
                "version {version} cannot be read: the manifest of version {on} holds its changes to version \
                 {gone}, which is gone, and there is no checkpoint of version {on} ({name})"
            ),
        ));
    };
    let path = store.root().join(&name);
    let whole = Manifest::from_json(&bytes, &path)?;
    if whole.version != on {
        return Err(super::integrity::corrupt(&path, format!("holds version {}, not {on}", whole.version)));
    }
    deltas.pop();
    Ok(std::sync::Arc::new(whole))
}

/// A manifest file read: its bytes and identity, or the manifest resolved from it recently.
enum Stored {
    Bytes(Vec<u8>, recent::Identity),
    Cached(std::sync::Arc<Manifest>),
}

/// The manifest file `rel` ([`read_fetched`]); `None` when there is none.
fn read_stored(store: &dyn Store, rel: &str) -> Result<Option<Stored>> {
    let read = |path: &std::path::Path| {
        let meta = std::fs::metadata(path).map_err(|e| io(path, e))?;
        let identity = recent::Identity::of(&meta);
        if let Some(m) = recent::find(path, &identity) {
            return Ok(Stored::Cached(m));
        }
        Ok(Stored::Bytes(std::fs::read(path).map_err(|e| io(path, e))?, identity))
    };
    match read_fetched(store, rel, read) {
        Err(e) if crate::error::is_not_found(&e) => Ok(None),
        other => other,
    }
}

/// Manifests resolved recently, by the path and identity of their file (manifests are never
/// modified: a file of the same path and identity holds the same version), so that opening the
/// next version reads its delta alone, and listing versions resolves each chain once.
mod recent {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use super::Manifest;

    /// Manifests kept (the least recently used goes first).
    const KEPT: usize = 8;

    /// A file's length, modification time, device and inode.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(super) struct Identity(u64, Option<std::time::SystemTime>, u64, u64);

    impl Identity {
        pub(super) fn of(meta: &std::fs::Metadata) -> Identity {
            use std::os::unix::fs::MetadataExt;
            Identity(meta.len(), meta.modified().ok(), meta.dev(), meta.ino())
        }
    }

    type Entry = (PathBuf, Identity, Arc<Manifest>);

    static KEPT_MANIFESTS: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

    pub(super) fn find(path: &Path, identity: &Identity) -> Option<Arc<Manifest>> {
        let mut kept = KEPT_MANIFESTS.lock().unwrap_or_else(|e| e.into_inner());
        let k = kept.iter().position(|(p, i, _)| p == path && i == identity)?;
        let entry = kept.remove(k);
        let m = Arc::clone(&entry.2);
        kept.push(entry);
        Some(m)
    }

    pub(super) fn keep(path: PathBuf, identity: Identity, m: Arc<Manifest>) {
        let mut kept = KEPT_MANIFESTS.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(p, _, _)| *p != path);
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push((path, identity, m));
    }
}

/// "versions 1 to 7" / "no versions".
fn describe_versions(v: &[u64]) -> String {
    match (v.first(), v.last()) {
        (Some(a), Some(b)) if a == b => format!("version {a}"),
        (Some(a), Some(b)) => format!("versions {a} to {b} ({} in all)", v.len()),
        _ => "no versions".into(),
    }
}

/// The newest version a cleanup of the dataset on a local disk removed ([`CLEANUP_FILE`]), if
/// any did.
///
/// # Errors
/// I/O errors; [`Error::InvalidArgument`] for a file that does not say.
pub(crate) fn newest_removed(store: &dyn Store, line: &Line) -> Result<Option<u64>> {
    #[derive(serde::Deserialize)]
    struct Removed {
        newest_removed_version: u64,
    }
    let file = line.cleanup_file();
    let Some(bytes) = store.read_fresh(&file)? else { return Ok(None) };
    let read: Removed = serde_json::from_slice(&bytes).map_err(|e| Error::InvalidArgument {
        what: format!("cleanup record {}", store.shown(&file)),
        why: format!("{e} (remove the file: the next commit lists the versions instead)"),
    })?;
    Ok(Some(read.newest_removed_version))
}

/// Records that a cleanup is about to remove versions up to `newest` (kept when an earlier
/// cleanup removed newer ones).
pub(crate) fn record_removed(store: &dyn Store, line: &Line, newest: u64) -> Result<()> {
    // An unreadable record is an error, not overwritten: a lower mark would let a commit take
    // a removed version for one never published.
    let newest = newest_removed(store, line)?.map_or(newest, |before| before.max(newest));
    store.put(&line.cleanup_file(), format!("{{\"newest_removed_version\": {newest}}}\n").as_bytes())
}
