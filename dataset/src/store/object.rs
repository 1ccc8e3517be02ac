//! A dataset directory on object storage (`s3://bucket/ds/`, `gs://`, `az://`, `file://`): the
//! same layout (docs/FORMAT.md §13) as objects, worked on through a local **mirror** folder.
//!
//! Every file of a dataset directory but its tags is immutable once written, so the mirror
//! caches them safely: a manifest, deletion, row-id, split or column file is fetched whole the
//! first time it is read; data files are not fetched but opened by URL (range requests into the
//! replica cache, `beton_storage::remote`), or from the mirror when a process wrote them there.
//! What the mirror holds of the store joins the one cache (`beton_storage::remote::cache`),
//! under the bound that also covers the replicas (`BETON_CACHE_SIZE`), and is fetched again
//! when it was evicted. Edits run against the mirror as against a local directory, writing new
//! files there; a commit then uploads each file the new manifest references that the store does
//! not have yet ([`Store::upload_missing`]) and publishes the manifest with a conditional put
//! ([`Store::put_new`], `If-None-Match: *`): the store refuses it when another writer made
//! version N first, which is the local `link(2)`'s no-overwrite guarantee, so concurrent writers
//! rebase or conflict exactly as on a local disk. Listings of versions and tags always ask the
//! store.
//!
//! The mirror names its URL in a file of its own ([`MIRROR_FILE`]), so that the mirror folder,
//! opened as a path, is the same dataset.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use beton_storage::remote::{cache, objects};

use super::durable::temp_file;
use super::{Entry, Store};
use crate::error::{io, Error, Result};

/// The file of a mirror folder naming the URL it mirrors.
pub const MIRROR_FILE: &str = "_mirror_of";

/// A dataset on object storage, through its mirror; see the [module docs](self).
#[derive(Debug)]
pub struct ObjectStore {
    /// The dataset's URL, ending in `/`.
    base: String,
    /// The mirror folder.
    mirror: PathBuf,
    /// Files (relative paths) known to be in the store: fetched, uploaded or listed there.
    known: Mutex<HashSet<String>>,
    /// Files this handle uploaded from the mirror, kept out of the cache until a version names
    /// them ([`Store::published`]): a commit may still have to put one back from its copy.
    uploaded: Mutex<Vec<String>>,
}

pub use beton_storage::remote::is_url;

/// `url` ending in `/`.
pub(crate) fn folder_url(url: &str) -> String {
    if url.ends_with('/') {
        url.to_string()
    } else {
        format!("{url}/")
    }
}

impl ObjectStore {
    /// The store of the dataset directory at `url`, with its mirror (made when missing, under
    /// `BETON_CACHE_DIR/datasets/`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a URL that is not UTF-8; I/O errors making the folder.
    pub fn open(url: &Path) -> Result<ObjectStore> {
        let url = url.to_str().ok_or_else(|| Error::InvalidArgument {
            what: format!("dataset URL {}", url.display()),
            why: "is not UTF-8".into(),
        })?;
        let base = folder_url(url);
        let cache = beton_storage::RemoteOptions::from_env()?.cache_dir;
        // A readable tail of the URL and a hash of all of it.
        let hash = base
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        let tail: String = base
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
            .take(48)
            .collect();
        let mirror = cache.join("datasets").join(format!("{tail}-{hash:016x}"));
        std::fs::create_dir_all(&mirror).map_err(|e| io(&mirror, e))?;
        let named = mirror.join(MIRROR_FILE);
        if std::fs::read_to_string(&named).ok().as_deref() != Some(base.as_str()) {
            // Written aside and renamed over: concurrent opens of the URL write the same bytes.
            let tmp = temp_file(&mirror)?;
            std::io::Write::write_all(&mut tmp.as_file(), base.as_bytes()).map_err(|e| io(tmp.path(), e))?;
            tmp.persist(&named).map_err(|e| io(&named, e.error))?;
        }
        Ok(ObjectStore::with(base, mirror))
    }

    /// The store a mirror folder stands for, when `dir` is one.
    pub fn of_mirror(dir: &Path) -> Option<ObjectStore> {
        let base = std::fs::read_to_string(dir.join(MIRROR_FILE)).ok()?;
        is_url(Path::new(&base)).then(|| ObjectStore::with(base, dir.to_path_buf()))
    }

    fn with(base: String, mirror: PathBuf) -> ObjectStore {
        ObjectStore { base, mirror, known: Mutex::default(), uploaded: Mutex::default() }
    }

    fn known(&self) -> MutexGuard<'_, HashSet<String>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn url_of(&self, rel: &str) -> String {
        format!("{}{rel}", self.base)
    }

    /// The store's names in the folders of `rels`, one listing per folder.
    fn listed(&self, rels: &[&str]) -> Result<HashSet<String>> {
        let mut folders: Vec<&str> = rels.iter().map(|rel| rel.split('/').next().unwrap_or("")).collect();
        folders.sort_unstable();
        folders.dedup();
        let mut out = HashSet::new();
        for folder in folders {
            let names = objects::list(&self.url_of(&format!("{folder}/")))?;
            out.extend(names.into_iter().map(|n| format!("{folder}/{n}")));
        }
        Ok(out)
    }
}

impl Store for ObjectStore {
    fn root(&self) -> &Path {
        &self.mirror
    }

    fn url(&self) -> Option<&str> {
        Some(&self.base)
    }

    fn fetch(&self, rel: &str) -> Result<bool> {
        let path = self.mirror.join(rel);
        if path.exists() {
            return Ok(true);
        }
        let Some(bytes) = objects::get(&self.url_of(rel))? else { return Ok(false) };
        // Written aside and renamed: a concurrent fetch of the same file writes the same bytes.
        let parent = path.parent().unwrap_or(&self.mirror).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|e| io(&parent, e))?;
        let tmp = temp_file(&self.mirror)?;
        std::io::Write::write_all(&mut tmp.as_file(), &bytes).map_err(|e| io(tmp.path(), e))?;
        tmp.persist(&path).map_err(|e| io(&path, e.error))?;
        self.known().insert(rel.to_string());
        cache::adopt(&path, Vec::new());
        Ok(true)
    }

    fn data_file(&self, rel: &str) -> PathBuf {
        let local = self.mirror.join(rel);
        match local.exists() {
            true => local,
            false => PathBuf::from(self.url_of(rel)),
        }
    }

    fn list(&self, folder: &str) -> Result<Vec<String>> {
        Ok(objects::list(&self.url_of(&format!("{folder}/")))?)
    }

    fn list_entries(&self, folder: &str) -> Result<Vec<Entry>> {
        let entries = objects::list_entries(&self.url_of(&format!("{folder}/")))?;
        Ok(entries.into_iter().map(|e| Entry { name: format!("{folder}/{}", e.name), ..e }).collect())
    }

    fn read_fresh(&self, rel: &str) -> Result<Option<Vec<u8>>> {
        Ok(objects::get(&self.url_of(rel))?)
    }

    fn put_new(&self, rel: &str, bytes: &[u8]) -> Result<bool> {
        let created = objects::put(&self.url_of(rel), bytes.to_vec(), true)?;
        if created {
            self.known().insert(rel.to_string());
        }
        Ok(created)
    }

    fn put(&self, rel: &str, bytes: &[u8]) -> Result<()> {
        objects::put(&self.url_of(rel), bytes.to_vec(), false)?;
        Ok(())
    }

    fn remove(&self, rel: &str) -> Result<()> {
        objects::delete(&self.url_of(rel))?;
        self.known().remove(rel);
        let local = self.mirror.join(rel);
        match std::fs::remove_file(&local) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&local, e)),
            _ => {
                cache::forget(&local);
                Ok(())
            }
        }
    }

    fn upload_missing(&self, rels: &[&str]) -> Result<()> {
        // Files this process wrote into the mirror and has not uploaded. One listing per folder
        // tells which the store has (a file fetched or written by an earlier process).
        let local: Vec<&str> = {
            let known = self.known();
            rels.iter()
                .copied()
                .filter(|rel| !known.contains(*rel) && self.mirror.join(rel).exists())
                .collect()
        };
        if local.is_empty() {
            return Ok(());
        }
        let listed = self.listed(&local)?;
        for rel in local {
            if !listed.contains(rel) {
                objects::upload(&self.url_of(rel), &self.mirror.join(rel))?;
            }
            self.known().insert(rel.to_string());
            self.uploaded.lock().unwrap_or_else(|e| e.into_inner()).push(rel.to_string());
        }
        Ok(())
    }

    fn put_back<'a>(&self, rels: &[&'a str]) -> Result<Option<&'a str>> {
        let listed = self.listed(rels)?;
        for &rel in rels {
            if listed.contains(rel) {
                continue;
            }
            let local = self.mirror.join(rel);
            if !local.is_file() {
                return Ok(Some(rel));
            }
            objects::upload(&self.url_of(rel), &local)?;
        }
        Ok(None)
    }

    fn published(&self, rel: &str, bytes: &[u8]) -> Result<()> {
        // The mirror's copy of what the store now holds, written aside and renamed as `fetch`
        // writes: a plain write made the file empty for a moment, and a racing writer of the
        // same dataset that fetched that version then (`fetch` trusts a file that exists) read
        // "not a manifest: EOF" (`tests/versioned_remote.rs`, two threads appending, under load).
        let path = self.mirror.join(rel);
        let parent = path.parent().unwrap_or(&self.mirror);
        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        let tmp = temp_file(&self.mirror)?;
        std::io::Write::write_all(&mut tmp.as_file(), bytes).map_err(|e| io(tmp.path(), e))?;
        tmp.persist(&path).map_err(|e| io(&path, e.error))?;
        cache::adopt(&path, Vec::new());
        // What was uploaded for it is in the store for good: a data file goes with its columnar copy.
        let uploaded = std::mem::take(&mut *self.uploaded.lock().unwrap_or_else(|e| e.into_inner()));
        for rel in uploaded {
            let path = self.mirror.join(&rel);
            let also = match rel.starts_with("data/") {
                true => vec![crate::columnar::path_of(&path)],
                false => Vec::new(),
            };
            cache::adopt(&path, also);
        }
        Ok(())
    }

    fn in_store(&self, file: &Path) -> Option<String> {
        let rel = file.to_str()?.strip_prefix(&self.base)?;
        let name = rel.strip_prefix("data/")?;
        let plain =
            !name.is_empty() && !name.contains('/') && name.ends_with(".beton") && !name.starts_with('.');
        if !plain {
            return None;
        }
        self.known().insert(rel.to_string());
        Some(rel.to_string())
    }
}
