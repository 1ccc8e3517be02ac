//! Committing a version: every new file first, then the manifest, published with no-overwrite
//! semantics (the store's `put_new` of `_versions/N.json`: a hard link on a local disk, a
//! conditional put on object storage, either failing when another writer made version N first). Nothing is ever modified in place, so a crash at any point leaves the last committed
//! version whole and at most some unreferenced files, which `cleanup` removes.

use std::collections::HashSet;

use super::manifest::{Manifest, Operation};
use super::marks;
pub(crate) use crate::error::io;
use crate::error::{Error, Result};
use crate::store::Store;
pub use crate::store::{crash_point, pause_point, unique_name, write_new_file, TMP_DIR};
pub(crate) use crate::store::{sync_dir, temp_file};

pub use super::layout::{manifest_name, TAGS_DIR, VERSIONS_DIR};

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
/// on object storage, after the steps marks.rs argues).
///
/// # Errors
/// I/O errors naming the path; [`Error::InvalidArgument`] on a file system without hard links;
/// the remote errors.
pub fn publish(store: &dyn Store, manifest: &Manifest) -> Result<Published> {
    // What readers refuse is never written.
    super::manifest::check_manifest(manifest).map_err(|why| Error::InvalidArgument {
        what: format!("commit to {}", store.location()),
        why: format!("{why}; nothing was committed"),
    })?;
    let keep = match store.url() {
        Some(_) => before_publish(store, manifest)?,
        None => None,
    };
    if keep.is_some() {
        crash_point();
        pause_point();
    }
    let name = manifest_name(manifest.version);
    let json = manifest.to_json();
    let published = store.put_new(&name, &json)?;
    // Only now: a cleanup that no longer sees the marker sees the version (marks.rs).
    drop(keep);
    if !published {
        return Ok(Published::Taken);
    }
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
fn before_publish<'a>(store: &'a dyn Store, manifest: &Manifest) -> Result<Option<marks::Keep<'a>>> {
    let files: Vec<&str> = manifest.files().collect();
    store.upload_missing(&files)?;
    let parent: HashSet<String> = manifest
        .parent
        .and_then(|p| read_manifest(store, p).ok())
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
    let mut out = Vec::new();
    for name in store.list(VERSIONS_DIR)? {
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

/// Reads the manifest of `version`.
///
/// # Errors
/// [`Error::InvalidArgument`] when there is no such version (listing the ones there are) or its
/// manifest is not valid.
pub fn read_manifest(store: &dyn Store, version: u64) -> Result<Manifest> {
    let name = manifest_name(version);
    let path = store.root().join(&name);
    let Some(bytes) = read_file(store, &name)? else {
        let there = list_versions(store)?;
        return Err(Error::InvalidArgument {
            what: "version".into(),
            why: format!(
                "{} has no version {version}; it has {}",
                store.location(),
                describe_versions(&there)
            ),
        });
    };
    let m = Manifest::from_json(&bytes, &path)?;
    if m.version != version {
        return Err(Error::InvalidArgument {
            what: format!("manifest {}", path.display()),
            why: format!("says it is version {}", m.version),
        });
    }
    Ok(m)
}

/// "versions 1 to 7" / "no versions".
fn describe_versions(v: &[u64]) -> String {
    match (v.first(), v.last()) {
        (Some(a), Some(b)) if a == b => format!("version {a}"),
        (Some(a), Some(b)) => format!("versions {a} to {b} ({} in all)", v.len()),
        _ => "no versions".into(),
    }
}
