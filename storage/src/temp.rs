//! The writer's temporary files, and cleaning up after writers that were killed.
//!
//! A write goes to `.NAME.XXXXXX.tmp` (and `.NAME.XXXXXX.pages.tmp` while the number of samples
//! is unknown) beside `NAME`, renamed over it at the end. A writer holds an exclusive lock
//! (`flock`) on each of its temporary files for as long as it runs; the kernel drops the lock
//! when the process dies, however it dies. So a temporary file nobody holds a lock on, and that
//! is not brand new (a writer locks its file right after creating it), was left by a writer
//! that is gone: the next write to the same destination removes it, and `beton info`/`verify`
//! list it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A temporary file younger than this is never taken for stale: its writer may not have locked
/// it yet.
const MIN_AGE: Duration = Duration::from_secs(2);

/// The directory and file name of `dest`.
fn split(dest: &Path) -> (PathBuf, String) {
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "dataset".into());
    (dir, name)
}

/// The prefix of the temporary files of writes to `dest` (`.NAME.`) and their directory.
pub(crate) fn prefix(dest: &Path) -> (PathBuf, String) {
    let (dir, name) = split(dest);
    (dir, format!(".{name}."))
}

/// Temporary files of writes to `dest` whose writer is gone (no lock held, not brand new).
pub fn stale_temp_files(dest: &Path) -> Vec<PathBuf> {
    let (dir, prefix) = prefix(dest);
    stale_in(&dir, |name| name.starts_with(&prefix) && name.ends_with(".tmp"))
}

/// Temporary files of killed writers to any destination in directory `dir`: names of the
/// writer's form (`.NAME.XXXXXX.tmp` or `.NAME.XXXXXX.pages.tmp`, `XXXXXX` six letters or
/// digits) that no writer holds.
pub fn stale_temp_files_in(dir: &Path) -> Vec<PathBuf> {
    stale_in(dir, |name| {
        let Some(rest) = name.strip_prefix('.') else { return false };
        let rest = rest.strip_suffix(".pages.tmp").or_else(|| rest.strip_suffix(".tmp"));
        rest.and_then(|r| r.rsplit_once('.')).is_some_and(|(dest, random)| {
            !dest.is_empty() && random.len() == 6 && random.bytes().all(|b| b.is_ascii_alphanumeric())
        })
    })
}

/// The stale files of `dir` whose names `wanted` picks, sorted.
fn stale_in(dir: &Path, wanted: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut stale: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| wanted(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .filter(|p| is_stale(p))
        .collect();
    stale.sort();
    stale
}

fn is_stale(path: &Path) -> bool {
    let Ok(file) = File::open(path) else { return false };
    let old_enough = file
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age >= MIN_AGE);
    // Holding the lock for a moment is harmless: a live writer holds it for its whole run.
    old_enough && file.try_lock().is_ok()
}

/// Removes the temporary files that writers to `dest` left when they were killed; returns the
/// ones removed. Errors are ignored (another process may be removing them too).
pub(crate) fn remove_stale_temp_files(dest: &Path) -> Vec<PathBuf> {
    stale_temp_files(dest).into_iter().filter(|p| std::fs::remove_file(p).is_ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary file that is locked, or brand new, is not stale; an old unlocked one is, and
    /// files of other destinations are not looked at.
    #[test]
    fn finds_only_unlocked_old_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("d.beton");
        let make = |name: &str, age: u64| {
            let p = dir.path().join(name);
            let f = File::create(&p).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(age)).unwrap();
            (p, f)
        };
        let (dead, _f1) = make(".d.beton.abc123.tmp", 60);
        let (live, f2) = make(".d.beton.def456.tmp", 60);
        f2.lock().unwrap();
        let (_young, _f3) = make(".d.beton.ghi789.tmp", 0);
        let (_other, _f4) = make(".e.beton.abc123.tmp", 60);
        let (dead_pages, _f5) = make(".d.beton.jkl000.pages.tmp", 60);
        assert_eq!(stale_temp_files(&dest), vec![dead.clone(), dead_pages.clone()]);
        assert_eq!(remove_stale_temp_files(&dest), vec![dead.clone(), dead_pages]);
        assert!(!dead.exists() && live.exists());
        assert!(stale_temp_files(&dest).is_empty());
        // By directory: the other destination's file, not the locked or young ones, nor files
        // of other programs.
        let (_junk, _f6) = make(".editor-swap.tmp", 60);
        assert_eq!(stale_temp_files_in(dir.path()), vec![_other.clone()]);
    }
}
