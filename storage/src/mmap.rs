//! The one place this crate maps a file into memory.
//!
//! The invariant that makes the map sound: `.beton` files are write-once. beton's writer never
//! modifies a file in place; it writes a temporary file and renames it over the destination, so a
//! file that is mapped keeps its inode and contents until unmapped. The one exception is the split
//! region (`splits.rs`, FORMAT.md §12): its slots are rewritten in place with `pwrite`, never
//! truncating, and are read by copying a slot out and checking its CRC, so a read racing an
//! update sees whole old or whole new splits; nothing else in the file refers to those bytes.
//!
//! A file truncated in place by another program while mapped makes reads past its new end fault
//! (SIGBUS). `guard.rs` turns that fault into zeros plus a mark on the map, which every reader
//! checks ([`crate::Dataset::check_intact`]) before it trusts what it read, so the user gets
//! [`crate::Error::FileChanged`] instead of a dead process. A file rewritten in place with the
//! same length is not detected (nothing faults); beton itself never does that.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

#[cfg(unix)]
mod guard;

/// A read-only map and its SIGBUS guard (declared first: it is unregistered before the map is
/// unmapped).
pub(crate) struct Mapped {
    #[cfg(unix)]
    guard: guard::Guard,
    map: memmap2::Mmap,
}

/// Bytes of a dataset: a read-only map of a file, or an owned buffer (tests, fuzzing, files that
/// are empty and cannot be mapped).
pub(crate) enum Bytes {
    Mapped(Mapped),
    Owned(Vec<u8>),
}

impl Bytes {
    /// Maps `file` (opened from `path`, `len` bytes long) read-only.
    pub(crate) fn map(path: &Path, file: &File, len: u64) -> Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::Owned(Vec::new()));
        }
        // SAFETY: the map is read-only and the file is never modified in place by beton (see the
        // module doc: writes go to a temporary file renamed over the destination). Concurrent
        // in-place truncation by another program is the documented limit of any mmap reader.
        let map = unsafe { memmap2::MmapOptions::new().map(file) }.map_err(|e| Error::io(path, e))?;
        Ok(Bytes::Mapped(Mapped {
            #[cfg(unix)]
            guard: guard::Guard::register(map.as_ptr(), map.len()),
            map,
        }))
    }

    /// Whether a read through the map faulted because the file shrank under it (the read got
    /// zeros; see the module doc). Always false for owned bytes.
    pub(crate) fn is_damaged(&self) -> bool {
        match self {
            #[cfg(unix)]
            Bytes::Mapped(m) => m.guard.is_damaged(),
            #[cfg(not(unix))]
            Bytes::Mapped(_) => false,
            Bytes::Owned(_) => false,
        }
    }

    /// Tells the kernel that bytes `start..end` (the data pages) are read at random: quasi-random
    /// and random orders jump between pages, and read-ahead of neighbouring pages is the
    /// loader's business, not the kernel's guess. The header, data table and allocation table
    /// keep the default read-around, so scanning them (queries, open) streams from disk.
    pub(crate) fn advise_random(&self, start: u64, end: u64) {
        #[cfg(unix)]
        if let Bytes::Mapped(Mapped { map, .. }) = self {
            const OS_PAGE: u64 = 4096;
            let start = start.next_multiple_of(OS_PAGE);
            let end = end.min(map.len() as u64) / OS_PAGE * OS_PAGE;
            if end > start {
                let _ = map.advise_range(memmap2::Advice::Random, start as usize, (end - start) as usize);
            }
        }
        #[cfg(not(unix))]
        let _ = (start, end);
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => &m.map,
            Bytes::Owned(v) => v,
        }
    }
}
