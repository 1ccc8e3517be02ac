//! The one place this crate maps a file into memory.
//!
//! The invariant that makes the map sound: `.beton` files are write-once. beton's writer never
//! modifies a file in place; it writes a temporary file and renames it over the destination, so a
//! file that is mapped keeps its inode and contents until unmapped. The one exception is the split
//! region (`splits.rs`, FORMAT.md §12): its slots are rewritten in place with `pwrite`, never
//! truncating, and are read by copying a slot out and checking its CRC, so a read racing an
//! update sees whole old or whole new splits; nothing else in the file refers to those bytes. A file truncated or rewritten
//! in place by another program while mapped is outside what this crate (or any mmap reader, FFCV
//! included) can defend against; the kernel then delivers SIGBUS rather than wrong data.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

/// Bytes of a dataset: a read-only map of a file, or an owned buffer (tests, fuzzing, files that
/// are empty and cannot be mapped).
pub(crate) enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    /// Maps `path` read-only.
    pub(crate) fn map(path: &Path) -> Result<Bytes> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Ok(Bytes::Owned(Vec::new()));
        }
        // SAFETY: the map is read-only and the file is never modified in place by beton (see the
        // module doc: writes go to a temporary file renamed over the destination). Concurrent
        // in-place truncation by another program is the documented limit of any mmap reader.
        let map = unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(|e| Error::io(path, e))?;
        Ok(Bytes::Mapped(map))
    }

    /// Tells the kernel that bytes `start..end` (the data pages) are read at random: quasi-random
    /// and random orders jump between pages, and read-ahead of neighbouring pages is the
    /// loader's business, not the kernel's guess. The header, data table and allocation table
    /// keep the default read-around, so scanning them (queries, open) streams from disk.
    pub(crate) fn advise_random(&self, start: u64, end: u64) {
        #[cfg(unix)]
        if let Bytes::Mapped(map) = self {
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
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}
