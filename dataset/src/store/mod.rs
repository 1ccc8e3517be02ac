//! Where a dataset's files live: one [`Store`] per dataset handle, chosen by the path it was
//! opened with ([`open`]) and passed on to every version and view opened from it.
//!
//! Versions, commits, conflicts, cleanup and diff (`crate::versioned`) are written against the
//! trait, which has two implementations:
//! - [`LocalStore`], a directory on a local disk: files are read where they are, and a new
//!   name is created with `link(2)`, which fails when the name exists (the no-overwrite point
//!   of a commit and of a tag);
//! - [`ObjectStore`], a dataset at a URL (`s3://`, `gs://`, `az://`, `file://`): files are
//!   worked on in a local mirror folder and published with object_store's conditional put
//!   (`If-None-Match: *`), which the store refuses when the name exists.
//!
//! Both have the same files under the same names (docs/FORMAT.md §13): every file but a tag is
//! immutable once written. What differs is where a file is read from ([`Store::fetch`],
//! [`Store::data_file`]), how a name is created without overwriting ([`Store::put_new`]), and
//! what a commit must upload first ([`Store::upload_missing`]).

mod durable;
mod local;
mod object;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use beton_storage::remote::objects::Entry;
pub use durable::{crash_point, pause_point, unique_name, write_new_file, TMP_DIR};
pub(crate) use durable::{sync_dir, temp_file};
pub use local::LocalStore;
pub(crate) use object::folder_url;
pub use object::{is_url, ObjectStore};

use crate::error::Result;

/// The files of one dataset directory, local or on object storage; see the [module docs](self).
///
/// `rel` arguments are paths relative to the dataset (`_versions/00000000000000000001.json`,
/// `data/x.beton`); `folder` arguments are top-level folders (`_versions`, `data`).
pub trait Store: Send + Sync + std::fmt::Debug {
    /// The local folder files are read from and written into first: the dataset directory
    /// itself, or the mirror of a dataset on object storage.
    fn root(&self) -> &Path;

    /// The dataset's URL (ending in `/`) when it is on object storage.
    fn url(&self) -> Option<&str>;

    /// How errors name the dataset: its URL, else its directory.
    fn location(&self) -> String {
        self.url().map_or_else(|| self.root().display().to_string(), str::to_string)
    }

    /// How errors name file `rel` of the dataset: its URL, else its path.
    fn shown(&self, rel: &str) -> String {
        match self.url() {
            Some(base) => format!("{base}{rel}"),
            None => self.root().join(rel).display().to_string(),
        }
    }

    /// Makes the immutable file `rel` present under [`Store::root`] (fetched whole when
    /// missing). `Ok(false)` when the store has no such file; a local store reads files where
    /// they are and answers `true` (a missing file is then its reader's "not found").
    ///
    /// # Errors
    /// The remote errors, naming the URL; I/O errors writing the mirror.
    fn fetch(&self, rel: &str) -> Result<bool>;

    /// Where to open data file `rel`: a local path, or the URL to open it by (range requests
    /// into the replica cache) when the mirror has no copy.
    fn data_file(&self, rel: &str) -> PathBuf;

    /// The names in `folder`, from the store (an object store's listing, never the mirror's);
    /// none for a folder that does not exist.
    ///
    /// # Errors
    /// I/O errors; the remote errors, naming the URL.
    fn list(&self, folder: &str) -> Result<Vec<String>>;

    /// The files in `folder` with their sizes and last-modified times, named relative to the
    /// dataset (`data/x.beton`).
    ///
    /// # Errors
    /// I/O errors; the remote errors, naming the URL.
    fn list_entries(&self, folder: &str) -> Result<Vec<Entry>>;

    /// The bytes of file `rel` as the store has them now (for a tag, the one file that
    /// changes); `None` when there is none.
    ///
    /// # Errors
    /// I/O errors; the remote errors, naming the URL.
    fn read_fresh(&self, rel: &str) -> Result<Option<Vec<u8>>>;

    /// Creates file `rel` holding `bytes`, durably, only when no file has that name:
    /// `Ok(false)` when one has (another writer made it first). The commit point of a version
    /// and of a tag.
    ///
    /// # Errors
    /// I/O errors naming the path ([`crate::Error::InvalidArgument`] on a file system without
    /// hard links); the remote errors, naming the URL.
    fn put_new(&self, rel: &str, bytes: &[u8]) -> Result<bool>;

    /// Writes `bytes` as file `rel`, replacing any.
    ///
    /// # Errors
    /// I/O errors; the remote errors, naming the URL.
    fn put(&self, rel: &str, bytes: &[u8]) -> Result<()>;

    /// Deletes file `rel` (from the store and the mirror); one that is not there counts as
    /// deleted.
    ///
    /// # Errors
    /// I/O errors; the remote errors, naming the URL.
    fn remove(&self, rel: &str) -> Result<()>;

    /// Makes every one of `rels` that [`Store::root`] holds present in the store before a
    /// manifest names it: an object store uploads the ones it lacks (one listing per folder;
    /// multipart for large files); a local directory is the store.
    ///
    /// # Errors
    /// I/O errors reading them; the remote errors, naming the URL.
    fn upload_missing(&self, rels: &[&str]) -> Result<()>;

    /// Lists the folders of `rels` afresh and uploads again each file the store lacks that the
    /// mirror has (a cleanup on another machine may have removed it): the first the store
    /// lacks that the mirror has no copy of. A local directory has no other machine: `None`.
    ///
    /// # Errors
    /// The remote errors, naming the URL.
    fn put_back<'a>(&self, rels: &[&'a str]) -> Result<Option<&'a str>>;

    /// After `put_new` created `rel` (holding `bytes`) as a version's commit point: an object
    /// store's mirror keeps a copy of it, and it and the files uploaded for it join the one
    /// cache ([`beton_storage::remote::cache`]), to be evicted under its bound. A local
    /// directory is the store: nothing to do.
    ///
    /// # Errors
    /// I/O errors writing the mirror's copy.
    fn published(&self, rel: &str, bytes: &[u8]) -> Result<()>;

    /// `file`'s path in the dataset when it is the URL of a data file already in the store's
    /// `data/` (uploaded there by a worker, as Ray's write tasks do): committing it then copies
    /// nothing. `None` for a local directory.
    fn in_store(&self, file: &Path) -> Option<String>;
}

/// The store of the dataset at `path`: an [`ObjectStore`] for a URL (its mirror made when
/// missing) or for a mirror folder itself, else a [`LocalStore`].
///
/// # Errors
/// [`crate::Error::InvalidArgument`] for a URL that is not UTF-8; I/O errors making the mirror.
pub fn open(path: &Path) -> Result<Arc<dyn Store>> {
    if is_url(path) {
        return Ok(Arc::new(ObjectStore::open(path)?));
    }
    if let Some(store) = ObjectStore::of_mirror(path) {
        return Ok(Arc::new(store));
    }
    Ok(Arc::new(LocalStore::new(path)))
}
