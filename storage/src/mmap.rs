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
        #[cfg(unix)]
        {
            // Random access is the common pattern (quasi-random and random orders); read-ahead of
            // whole neighbouring pages is the loader's business, not the kernel's guess.
            let _ = map.advise(memmap2::Advice::Random);
        }
        Ok(Bytes::Mapped(map))
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}
