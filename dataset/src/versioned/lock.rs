//! Edits and `cleanup` of one dataset directory kept apart (docs/FORMAT.md §13, "Cleanup").
//!
//! On a local disk a lock file, `DIR/_lock`, is `flock`ed: every edit holds it **shared** from
//! before it reads the version it builds on or writes its first new file until its manifest is
//! published (or it gives up), and `cleanup` holds it **exclusive** while it lists the versions
//! and tags, decides what is reachable and deletes. So cleanup never sees an edit half done: a
//! file an edit is about to reference (a file it wrote, a file of the old version a restore
//! brings back) is either referenced by a published manifest when cleanup looks, or not yet
//! looked at by the edit, which then finds its base as cleanup left it. Edits do not exclude
//! each other (shared), and readers take no lock. The kernel drops a lock with its process, so
//! a killed writer never blocks cleanup.
//!
//! A mirror of a dataset on object storage locks its mirror directory, which keeps apart the
//! processes of one machine sharing a cache; across machines cleanup marks what it deletes and
//! commits name what they are about to reference instead (marks.rs).

use std::fs::File;
use std::path::Path;

use super::commit::io;
use crate::error::Result;

/// The lock file, in the dataset directory.
pub const LOCK_FILE: &str = "_lock";

/// A lock held on a dataset directory, released when dropped.
#[derive(Debug)]
#[must_use = "the lock is released when this is dropped"]
pub struct Held {
    _file: File,
}

/// Takes the shared lock of an edit of the dataset at `dir` (made if missing), waiting while
/// a cleanup holds the lock.
///
/// # Errors
/// I/O errors creating or locking `DIR/_lock`.
pub fn edit(dir: &Path) -> Result<Held> {
    let file = open(dir)?;
    file.lock_shared().map_err(|e| io(&dir.join(LOCK_FILE), e))?;
    Ok(Held { _file: file })
}

/// Takes the exclusive lock of a cleanup of the dataset at `dir`, waiting for the edits in
/// progress to publish or give up.
///
/// # Errors
/// I/O errors creating or locking `DIR/_lock`.
pub fn cleanup(dir: &Path) -> Result<Held> {
    let file = open(dir)?;
    file.lock().map_err(|e| io(&dir.join(LOCK_FILE), e))?;
    Ok(Held { _file: file })
}

fn open(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io(&path, e))
}
