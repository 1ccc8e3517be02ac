//! What keeps a dataset directory's metadata from being read as different data
//! (docs/FORMAT.md §13, "Integrity"): the checksum of each manifest and of each deletion,
//! row-id, split and column file it names, verified on every read; the length of each data
//! file; the consistency of a manifest's entries (no file, fragment or row id twice, counts that
//! fit); and files that must stay inside the directory (no symbolic link leading out).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Column files up to this size are checked against their checksum whenever they are read;
/// a larger one (a column of images, say) is read as it is used, like a data file, and its
/// checksum is checked by `beton verify` (what reading every byte at each open would cost).
/// Deletion, row-id and split files are always checked.
pub const CHECKED_ON_READ: u64 = 64 << 20;

/// The checksum of `bytes` as manifests write it: `crc32:` and the CRC-32 (ISO-HDLC, zlib's)
/// in 8 lowercase hex digits.
pub fn checksum(bytes: &[u8]) -> String {
    format!("crc32:{:08x}", crc32fast::hash(bytes))
}

/// Fails with [`Error::Corrupt`] naming `path` when `bytes` do not have the checksum `expected`
/// (none: a file named by a manifest written before checksums, not checked).
pub(crate) fn verify(path: &Path, bytes: &[u8], expected: Option<&str>) -> Result<()> {
    let Some(expected) = expected else { return Ok(()) };
    if !expected.starts_with("crc32:") {
        return Err(corrupt(
            path,
            format!("the manifest gives its checksum as {expected:?}, not crc32:<8 hex digits>"),
        ));
    }
    let actual = checksum(bytes);
    if actual != expected {
        return Err(corrupt(
            path,
            format!("its checksum is {actual}, the manifest says {expected}: the file changed after it was written"),
        ));
    }
    Ok(())
}

/// [`Error::Corrupt`] naming `path`.
pub(crate) fn corrupt(path: &Path, what: String) -> Error {
    Error::Corrupt { path: path.to_path_buf(), what }
}

/// `dir/rel`, refused when it resolves (through symbolic links) outside `dir`: a dataset
/// unpacked from an archive must not read `/etc/...`. A path that does not exist is returned as
/// it is (opening it then says it is missing).
///
/// # Errors
/// [`Error::Corrupt`] naming the link and where it leads.
pub(crate) fn inside(dir: &Path, rel: &str) -> Result<PathBuf> {
    inside_with(dir, rel, &Default::default())
}

/// The directories among `rels`' (paths relative to `dir`) with no symbolic link on the way
/// from `dir`: what [`inside_with`] need not look at again for each of 2,000 data files.
pub(crate) fn unlinked_dirs<'a>(dir: &Path, rels: impl Iterator<Item = &'a str>) -> HashSet<String> {
    let parents: HashSet<&str> = rels.filter_map(|rel| rel.rsplit_once('/').map(|(d, _)| d)).collect();
    parents.into_iter().filter(|d| !linked(dir, d, &HashSet::new())).map(str::to_string).collect()
}

/// Whether `rel`'s directory is one of `unlinked` (every directory on its way checked by
/// [`unlinked_dirs`]) and its last component a name: opened without following a link, `rel` is
/// then inside `dir`.
pub(crate) fn in_unlinked_dir(rel: &str, unlinked: &HashSet<String>) -> bool {
    match rel.rsplit_once('/') {
        Some((parent, name)) => name != ".." && !name.is_empty() && unlinked.contains(parent),
        None => false,
    }
}

/// Whether a component of `rel` (plain components) below `dir` is `..` or a symbolic link,
/// the directories in `unlinked` (prefixes of `rel`) taken as none.
fn linked(dir: &Path, rel: &str, unlinked: &HashSet<String>) -> bool {
    let mut at = dir.to_path_buf();
    let mut end = 0;
    rel.split('/').any(|part| {
        end += part.len();
        let known = unlinked.contains(&rel[..end]);
        end += 1;
        part == ".." || {
            at.push(part);
            !known && std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink())
        }
    })
}

/// [`inside`], the directories in `unlinked` ([`unlinked_dirs`]) known to be no links.
///
/// # Errors
/// As [`inside`].
pub(crate) fn inside_with(dir: &Path, rel: &str, unlinked: &HashSet<String>) -> Result<PathBuf> {
    let path = dir.join(rel);
    // `rel` is plain components (the manifest's paths are checked): without a link on the way,
    // the path is inside. (Two lstat calls for `data/x.beton`, not two realpath walks.)
    let linked = linked(dir, rel, unlinked);
    if !linked {
        return Ok(path);
    }
    let Ok(target) = std::fs::canonicalize(&path) else { return Ok(path) };
    let root = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    if !target.starts_with(&root) {
        return Err(corrupt(
            &path,
            format!(
                "leads outside the dataset directory (to {}) through a symbolic link; a dataset's \
                 files must be inside it",
                target.display()
            ),
        ));
    }
    Ok(path)
}
