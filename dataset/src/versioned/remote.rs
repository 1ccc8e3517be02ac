//! Dataset directories on object storage (`s3://bucket/ds/`, `gs://`, `az://`, `file://`): the
//! same layout (docs/FORMAT.md §13) as objects, worked on through a local **mirror** directory.
//!
//! Every file of a dataset directory but its tags is immutable once written, so the mirror
//! caches them safely: a manifest, deletion, row-id, split or column file is fetched whole the
//! first time it is read; data files are not fetched but opened by URL (range requests into the
//! replica cache, `beton_storage::remote`), or from the mirror when a process wrote them there
//! (kept up to `BETON_CACHE_SIZE`, the oldest removed after each commit past it).
//! Edits run against the mirror as against a local directory, writing new files there; a commit
//! then uploads each file the new manifest references that the store does not have yet
//! (multipart for large ones) and publishes the manifest with a conditional put
//! (`If-None-Match: *`) of `_versions/N.json`: the store refuses it when another writer made
//! version N first, which is the local `link(2)`'s no-overwrite guarantee, so concurrent writers
//! rebase or conflict exactly as on a local disk. Listings of versions and tags always ask the
//! store. `cleanup` lists the store's folders and deletes what no kept version references and
//! is older than its grace period (by the store's last-modified times), in the store and the
//! mirror. With no lock across machines, a cleanup marks each file in `_deleting/` before its
//! last look, and a commit names the files it adds in `_keeping/` before it checks that they
//! are there (putting back any a cleanup removed that the mirror has): marks.rs.
//!
//! A mirror is registered per process by its path, so that the module's functions, which take
//! a dataset directory, know when it stands for a URL.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use beton_storage::remote::objects;

use super::commit::{self, Published};
use super::manifest::{Manifest, Operation};
use super::marks;
use crate::error::{Error, Result};

/// What a mirror stands for.
struct Remote {
    /// The dataset's URL, ending in `/`.
    base: String,
    /// Files (relative paths) known to be in the store: fetched, uploaded or listed there.
    known: HashSet<String>,
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Remote>> {
    static REGISTRY: OnceLock<Mutex<HashMap<PathBuf, Remote>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Remote>> {
    registry().lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `path` is a URL (`scheme://...`) rather than a local path.
pub fn is_url(path: &Path) -> bool {
    beton_storage::remote::is_url(path)
}

/// The local mirror of the dataset directory at `url` (made when missing, under
/// `BETON_CACHE_DIR/datasets/`), registered for this process.
///
/// # Errors
/// [`Error::InvalidArgument`] for a URL that is not UTF-8; I/O errors making the folder.
pub fn mirror(url: &Path) -> Result<PathBuf> {
    let url = url.to_str().ok_or_else(|| Error::InvalidArgument {
        what: format!("dataset URL {}", url.display()),
        why: "is not UTF-8".into(),
    })?;
    let base = if url.ends_with('/') { url.to_string() } else { format!("{url}/") };
    let cache = beton_storage::RemoteOptions::from_env()?.cache_dir;
    // A readable tail of the URL and a hash of all of it.
    let hash =
        base.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let tail: String = base
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
        .take(48)
        .collect();
    let dir = cache.join("datasets").join(format!("{tail}-{hash:016x}"));
    std::fs::create_dir_all(&dir).map_err(|e| commit::io(&dir, e))?;
    lock().entry(dir.clone()).or_insert_with(|| Remote { base, known: HashSet::new() });
    Ok(dir)
}

/// The URL `dir` mirrors, when it is a mirror.
pub fn url_of(dir: &Path) -> Option<String> {
    lock().get(dir).map(|r| r.base.clone())
}

/// Whether the store has a version of the dataset at `url` (one listing of its `_versions/`;
/// no mirror is made). `Ok(false)` when it has none, or when the store cannot list the URL as a
/// folder (a 404, an HTTP server without listings): the URL may then name a file.
///
/// # Errors
/// What keeps the listing from answering, naming the listing's URL: access refused (401/403)
/// unless `url` itself is an object this process may read (a file, whose folder it may not
/// list); a store that cannot be reached or keeps failing, after the retry budget
/// (`BETON_REMOTE_OPEN_RETRY_SECONDS` for a store that never answered). Never a wait of the
/// whole budget for a refusal, never "not a dataset" for a store that did not answer.
pub fn has_versions(url: &Path) -> Result<bool> {
    let Some(url) = url.to_str() else { return Ok(false) };
    let base = if url.ends_with('/') { url.to_string() } else { format!("{url}/") };
    match objects::list(&format!("{base}{}/", commit::VERSIONS_DIR)) {
        Ok(names) => Ok(names.iter().any(|n| n.ends_with(".json"))),
        // No such folder, or not a store that lists (a plain HTTP server: 405, 501).
        Err(beton_storage::Error::RemoteNotFound { .. } | beton_storage::Error::Remote { .. }) => Ok(false),
        // Refused: a dataset we may not read, or a file we may read in a folder we may not list.
        Err(denied @ beton_storage::Error::RemoteDenied { .. }) => {
            match url.ends_with('/') || !objects::exists(url).unwrap_or(false) {
                true => Err(denied.into()),
                false => Ok(false),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// How errors name the dataset at `dir`: its URL for a mirror, else the directory.
pub fn shown(dir: &Path) -> String {
    url_of(dir).unwrap_or_else(|| dir.display().to_string())
}

/// The URL of file `rel` of the dataset `dir` mirrors.
pub(super) fn file_url(dir: &Path, rel: &str) -> Option<String> {
    url_of(dir).map(|base| format!("{base}{rel}"))
}

/// `file`'s path in the dataset `dir` mirrors when it is the URL of a data file already in the
/// store's `data/` (uploaded there by a worker, as Ray's write tasks do): committing it then
/// copies nothing.
pub fn data_file_in_store(dir: &Path, file: &Path) -> Option<String> {
    let base = url_of(dir)?;
    let rel = file.to_str()?.strip_prefix(&base)?;
    let name = rel.strip_prefix("data/")?;
    let plain = !name.is_empty() && !name.contains('/') && name.ends_with(".beton") && !name.starts_with('.');
    if !plain {
        return None;
    }
    if let Some(r) = lock().get_mut(dir) {
        r.known.insert(rel.to_string());
    }
    Some(rel.to_string())
}

/// Makes the immutable file `rel` of a mirrored dataset present in the mirror (fetched whole
/// when missing). `Ok(false)` when the store has no such file; `Ok(true)` for local datasets.
///
/// # Errors
/// The remote errors, naming the URL; I/O errors writing the mirror.
pub fn fetch(dir: &Path, rel: &str) -> Result<bool> {
    let Some(url) = file_url(dir, rel) else { return Ok(true) };
    let path = dir.join(rel);
    if path.exists() {
        return Ok(true);
    }
    let Some(bytes) = objects::get(&url)? else { return Ok(false) };
    // Written aside and renamed: a concurrent fetch of the same file writes the same bytes.
    let parent = path.parent().unwrap_or(dir).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|e| commit::io(&parent, e))?;
    let tmp = commit::temp_file(dir)?;
    std::io::Write::write_all(&mut tmp.as_file(), &bytes).map_err(|e| commit::io(tmp.path(), e))?;
    tmp.persist(&path).map_err(|e| commit::io(&path, e.error))?;
    if let Some(r) = lock().get_mut(dir) {
        r.known.insert(rel.to_string());
    }
    Ok(true)
}

/// Where to open data file `rel`: the mirror's copy when this process has one, else its URL.
pub fn data_file(dir: &Path, rel: &str) -> PathBuf {
    let local = dir.join(rel);
    match file_url(dir, rel) {
        Some(url) if !local.exists() => PathBuf::from(url),
        _ => local,
    }
}

/// The names in folder `folder` (`_versions`, `_tags`) of a mirrored dataset, from the store;
/// `None` for a local dataset.
///
/// # Errors
/// The remote errors, naming the URL.
pub fn list(dir: &Path, folder: &str) -> Option<Result<Vec<String>>> {
    let url = file_url(dir, &format!("{folder}/"))?;
    Some(objects::list(&url).map_err(Error::from))
}

/// The files in folder `folder` of a mirrored dataset, from the store: names relative to the
/// dataset (`data/x.beton`), sizes and last-modified times. `None` for a local dataset.
///
/// # Errors
/// The remote errors, naming the URL.
pub fn list_entries(dir: &Path, folder: &str) -> Option<Result<Vec<objects::Entry>>> {
    let url = file_url(dir, &format!("{folder}/"))?;
    let listed = objects::list_entries(&url).map_err(Error::from);
    Some(listed.map(|entries| {
        entries.into_iter().map(|e| objects::Entry { name: format!("{folder}/{}", e.name), ..e }).collect()
    }))
}

/// Deletes file `rel` of a mirrored dataset from the store, then the mirror's copy. `None` for
/// a local dataset.
///
/// # Errors
/// The remote errors, naming the URL; I/O errors removing the mirror's copy.
pub fn remove(dir: &Path, rel: &str) -> Option<Result<()>> {
    let url = file_url(dir, rel)?;
    Some((|| {
        objects::delete(&url)?;
        if let Some(r) = lock().get_mut(dir) {
            r.known.remove(rel);
        }
        let local = dir.join(rel);
        match std::fs::remove_file(&local) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(commit::io(&local, e)),
            _ => Ok(()),
        }
    })())
}

/// The bytes of the mutable file `rel` (a tag) of a mirrored dataset, from the store.
pub fn read_fresh(dir: &Path, rel: &str) -> Option<Result<Option<Vec<u8>>>> {
    let url = file_url(dir, rel)?;
    Some(objects::get(&url).map_err(Error::from))
}

/// Writes `bytes` as file `rel` of a mirrored dataset unless the store has it already
/// (`Ok(false)`); `None` for a local dataset.
pub fn put_new(dir: &Path, rel: &str, bytes: Vec<u8>) -> Option<Result<bool>> {
    let url = file_url(dir, rel)?;
    Some(objects::put(&url, bytes, true).map_err(Error::from))
}

/// Writes `bytes` as file `rel` of a mirrored dataset, replacing any; `None` for a local
/// dataset.
pub fn put(dir: &Path, rel: &str, bytes: Vec<u8>) -> Option<Result<()>> {
    let url = file_url(dir, rel)?;
    Some(objects::put(&url, bytes, false).map(|_| ()).map_err(Error::from))
}

/// Publishes `manifest` for a mirrored dataset: uploads every file it references that the
/// store lacks, then puts `_versions/N.json` only if absent. `None` for a local dataset.
pub fn publish(dir: &Path, manifest: &Manifest) -> Option<Result<Published>> {
    let base = url_of(dir)?;
    Some(publish_to(dir, &base, manifest))
}

fn publish_to(dir: &Path, base: &str, manifest: &Manifest) -> Result<Published> {
    // Files this process wrote into the mirror and has not uploaded. One listing per folder
    // tells which the store has (a file fetched or written by an earlier process).
    let local: Vec<&str> = manifest
        .files()
        .filter(|rel| dir.join(rel).exists())
        .filter(|rel| lock().get(dir).is_some_and(|r| !r.known.contains(*rel)))
        .collect();
    let mut listed: HashMap<&str, HashSet<String>> = HashMap::new();
    for rel in local {
        let folder = rel.split('/').next().unwrap_or("");
        if !listed.contains_key(folder) {
            let names = objects::list(&format!("{base}{folder}/"))?;
            listed.insert(folder, names.into_iter().map(|n| format!("{folder}/{n}")).collect());
        }
        if !listed[folder].contains(rel) {
            objects::upload(&format!("{base}{rel}"), &dir.join(rel))?;
            listed.get_mut(folder).expect("listed").insert(rel.to_string());
        }
        if let Some(r) = lock().get_mut(dir) {
            r.known.insert(rel.to_string());
        }
    }
    // The files the parent version does not name (a restore's, files uploaded above): no
    // cleanup keeps them for the parent's sake. A keep marker names them from before they are
    // checked until after the put, so that a cleanup either keeps them or is seen deleting
    // them (marks.rs argues the order). Small ones are fetched into the mirror first, so that
    // one a cleanup removed can be put back; a data file this process has no copy of cannot.
    let parent: HashSet<String> = manifest
        .parent
        .and_then(|p| commit::read_manifest(dir, p).ok())
        .map(|m| m.files().map(str::to_string).collect())
        .unwrap_or_default();
    let fresh: Vec<&str> = manifest.files().filter(|f| !parent.contains(*f)).collect();
    for rel in &fresh {
        if !rel.starts_with("data/") && !fetch(dir, rel)? {
            return Err(gone(base, manifest, rel));
        }
    }
    let keep = match fresh.is_empty() {
        true => None,
        false => {
            let keep = marks::Keep::put(base, manifest.version, &fresh)?;
            marks::settle(base, &fresh)?;
            if let Some(lost) = put_back(dir, base, &fresh)? {
                return Err(gone(base, manifest, lost));
            }
            Some(keep)
        }
    };
    if keep.as_ref().is_some_and(marks::Keep::expiring) {
        return Err(Error::InvalidArgument {
            what: format!("commit of version {} to {base}", manifest.version),
            why: format!(
                "checking its files took over {} s, after which a cleanup may ignore what it keeps; \
                 nothing was committed",
                (marks::KEEP_TIMEOUT / 2).as_secs()
            ),
        });
    }
    commit::crash_point();
    commit::pause_point();
    let name = commit::manifest_name(manifest.version);
    let published = objects::put(&format!("{base}{name}"), manifest.to_json(), true)?;
    // Only now: a cleanup that no longer sees the marker sees the version (marks.rs).
    drop(keep);
    if !published {
        return Ok(Published::Taken);
    }
    // The mirror's copy of what the store now holds (never modified: a plain write).
    let path = dir.join(&name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| commit::io(parent, e))?;
    }
    std::fs::write(&path, manifest.to_json()).map_err(|e| commit::io(&path, e))?;
    if let Some(r) = lock().get_mut(dir) {
        r.known.insert(name);
    }
    let budget = beton_storage::RemoteOptions::from_env().map_or(u64::MAX, |o| o.cache_bytes);
    trim_written(dir, manifest, budget);
    Ok(Published::Done)
}

/// Lists the folders of `files` afresh and uploads again each file the store lacks that the
/// mirror at `dir` has (a file is immutable: its copy is its bytes): the first the store lacks
/// that the mirror has no copy of.
fn put_back<'a>(dir: &Path, base: &str, files: &[&'a str]) -> Result<Option<&'a str>> {
    let mut listed: HashMap<&str, HashSet<String>> = HashMap::new();
    for &rel in files {
        let folder = rel.split('/').next().unwrap_or("");
        if !listed.contains_key(folder) {
            let names = objects::list(&format!("{base}{folder}/"))?;
            listed.insert(folder, names.into_iter().map(|n| format!("{folder}/{n}")).collect());
        }
        if listed[folder].contains(rel) {
            continue;
        }
        let local = dir.join(rel);
        if !local.is_file() {
            return Ok(Some(rel));
        }
        objects::upload(&format!("{base}{rel}"), &local)?;
    }
    Ok(None)
}

/// The error of a commit that would name `rel`, which a cleanup removed from the store and this
/// process has no copy of: the version it comes from cannot be brought back, as when a cleanup
/// removed its manifest ("has no version").
fn gone(base: &str, manifest: &Manifest, rel: &str) -> Error {
    let kind = match rel.split('/').next() {
        Some(super::DATA_DIR) => "data file",
        Some(super::DELETIONS_DIR) => "deletion file",
        Some(super::ROW_IDS_DIR) => "row-id file",
        Some(super::SPLITS_DIR) => "split file",
        Some(super::COLUMNS_DIR) => "column file",
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

/// Keeps the data files the mirror holds because its processes wrote them (each in the store
/// now: `manifest` lists it) within `budget` bytes (`BETON_CACHE_SIZE`): past it the oldest go,
/// with their columnar copies, and reads of them go by URL through the replica cache, as for
/// any data file. Without this, writing a dataset to object storage would leave all of it in
/// the cache folder. A process reading one of them keeps its open map.
fn trim_written(dir: &Path, manifest: &Manifest, budget: u64) {
    let mut held: Vec<(std::time::SystemTime, u64, PathBuf)> = manifest
        .files()
        .filter(|rel| rel.starts_with("data/"))
        .filter_map(|rel| {
            let path = dir.join(rel);
            let meta = std::fs::metadata(&path).ok()?;
            Some((meta.modified().unwrap_or(std::time::UNIX_EPOCH), meta.len(), path))
        })
        .collect();
    held.sort();
    let mut total: u64 = held.iter().map(|(_, len, _)| len).sum();
    for (_, len, path) in held {
        if total <= budget {
            break;
        }
        // Best effort: a file that cannot be removed stays, and is read from the mirror.
        if std::fs::remove_file(&path).is_ok() {
            let _ = std::fs::remove_file(crate::columnar::path_of(&path));
            total -= len;
        }
    }
}
