//! What identifies the file a handle opened ([`FileId`]), read without going through the map.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};
use crate::format::HEADER_SIZE;

/// What identifies the file a handle opened: where it lives (device and inode), its length and
/// its header. A path that no longer holds the same file (replaced by a rename, or rewritten in
/// place with another header or length) has another id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    device: u64,
    inode: u64,
    len: u64,
    header: [u8; HEADER_SIZE],
}

impl FileId {
    pub(super) fn of(meta: &std::fs::Metadata, header: [u8; HEADER_SIZE]) -> FileId {
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let (device, inode) = (0, 0);
        FileId { device, inode, len: meta.len(), header }
    }

    /// The device the file lives on (0 where the platform has none).
    pub fn device(&self) -> u64 {
        self.device
    }

    /// The file's inode (0 where the platform has none).
    pub fn inode(&self) -> u64 {
        self.inode
    }

    /// The id of the file open as `file` now.
    ///
    /// # Errors
    /// I/O errors reading its metadata or header.
    pub fn of_file(path: &Path, file: &File) -> Result<FileId> {
        let io = |e| Error::io(path, e);
        let meta = file.metadata().map_err(io)?;
        let mut header = [0u8; HEADER_SIZE];
        read_exact_at(file, &mut header, 0).map_err(io)?;
        Ok(FileId::of(&meta, header))
    }
}

/// Reads `buf.len()` bytes at `offset` of `file` (`pread`; no seek on Unix).
pub(super) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek};
        let mut f = file;
        f.seek(std::io::SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}
