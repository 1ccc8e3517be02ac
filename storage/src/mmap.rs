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
        #[cfg(test)]
        if tests::FAIL_MAPS.with(std::cell::Cell::get) {
            return Err(Error::io(path, std::io::Error::from_raw_os_error(12)));
        }
        // SAFETY: the map is read-only and the file is never modified in place by beton (see the
        // module doc: writes go to a temporary file renamed over the destination). Concurrent
        // in-place truncation by another program is the documented limit of any mmap reader.
        // (The length the caller read: memmap2 would ask the file system again, one more
        // system call per data file of the 2,000 a version's first query opens.)
        let map =
            unsafe { memmap2::MmapOptions::new().len(usize::try_from(len).unwrap_or(usize::MAX)).map(file) }
                .map_err(|e| Error::io(path, e))?;
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

/// A whole file mapped read-only under the same SIGBUS guard as a dataset's bytes: for other
/// write-once files that readers map (the query crate's columnar copies). Reads of a file that
/// shrank under the map give zeros and mark it; check [`MappedFile::is_damaged`] after reading.
pub struct MappedFile {
    bytes: Bytes,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile").field("len", &self.as_slice().len()).finish()
    }
}

impl MappedFile {
    /// Maps the file at `path` (an empty file gives no bytes).
    ///
    /// # Errors
    /// [`Error::Io`] naming the path.
    pub fn open(path: &Path) -> Result<MappedFile> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(MappedFile { bytes: Bytes::map(path, &file, len)? })
    }

    /// The file's bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// Whether a read through the map faulted because the file shrank under it.
    pub fn is_damaged(&self) -> bool {
        self.bytes.is_damaged()
    }

    /// Asks the kernel to read the bytes at `range` (of the map's bytes, any subslice) ahead, in
    /// large requests, before they are touched: a column about to be scanned is read from disk
    /// at the disk's bandwidth instead of one fault-around block at a time, and its pages mapped
    /// in one call. Advice only: errors (a file that shrank: no SIGBUS here, an error) are
    /// ignored, and a range outside the map is left alone.
    ///
    /// Returns false when the range is known not to be readable: mapping its pages failed (the
    /// file shrank under the map). Reading it would read zeros; the caller reads elsewhere.
    pub fn will_need(&self, range: &[u8]) -> bool {
        #[cfg(unix)]
        if let Bytes::Mapped(Mapped { map, .. }) = &self.bytes {
            let base = map.as_ptr() as usize;
            let start = range.as_ptr() as usize;
            if start >= base && start + range.len() <= base + map.len() && !range.is_empty() {
                let (offset, len) = (start - base, range.len());
                // Read-ahead advice walks the page cache one page at a time even where every
                // page is there (~45 ms of CPU for 1.6 GB on the VM): given only when pages
                // sampled over the range are not all cached. Not for a small range (a group
                // copy member's rows of a column, 2,000 at a version's first query): mapping
                // its pages below reads them, as the fault path reads around.
                if len >= SMALL_RANGE && !sampled_pages_cached(range) {
                    let _ = map.advise_range(memmap2::Advice::WillNeed, offset, len);
                }
                // And map its pages now instead of one fault per 64 KiB as the scan touches
                // them (Linux 5.14+; elsewhere the scan faults as before). Mapping is the
                // kernel's CPU time (~70 ms for 1.6 GB of cached pages on the VM), so a large
                // range is mapped in pieces on every core.
                #[cfg(target_os = "linux")]
                {
                    use rayon::prelude::*;
                    const PIECE: usize = 32 << 20;
                    let populate =
                        |at: usize, n: usize| match map.advise_range(memmap2::Advice::PopulateRead, at, n) {
                            Ok(()) => true,
                            // EINVAL: a kernel without the advice. Anything else (EFAULT past the
                            // end of the file, EIO): the range cannot be read.
                            Err(e) => e.raw_os_error() == Some(libc::EINVAL),
                        };
                    if len <= 2 * PIECE {
                        return populate(offset, len);
                    }
                    return (0..len.div_ceil(PIECE))
                        .into_par_iter()
                        .all(|k| populate(offset + k * PIECE, PIECE.min(len - k * PIECE)));
                }
            }
        }
        #[cfg(not(unix))]
        let _ = range;
        true
    }

    /// The file's bytes as an Arrow buffer that keeps the map alive: arrays decoded from it
    /// (Arrow IPC with aligned buffers) read the file in place, with no copy.
    pub fn into_arrow_buffer(self: std::sync::Arc<Self>) -> arrow_buffer::Buffer {
        let bytes = self.as_slice();
        let len = bytes.len();
        let ptr = std::ptr::NonNull::new(bytes.as_ptr().cast_mut()).unwrap_or(std::ptr::NonNull::dangling());
        // SAFETY: `ptr` points at `len` bytes owned by `self` (the map, or an owned empty
        // vector), which the buffer keeps alive through the `Arc` it holds; they are never
        // written (a read-only map of a write-once file; a file truncated by another program
        // reads as zeros under the guard, never as freed memory). The test
        // `arrow_buffers_outlive_the_handle` reads a buffer after its last other owner is gone.
        unsafe { arrow_buffer::Buffer::from_custom_allocation(ptr, len, self) }
    }
}

/// Ranges below this are mapped without read-ahead advice first ([`MappedFile::will_need`]).
#[cfg(unix)]
const SMALL_RANGE: usize = 2 << 20;

/// Whether the pages of `range` (bytes of a file map) sampled evenly over it (its first and last
/// page, 16 for a range over 2 MiB) are in the page cache (`mincore`); false where that cannot
/// be told.
#[cfg(unix)]
fn sampled_pages_cached(range: &[u8]) -> bool {
    const OS_PAGE: usize = 4096;
    let (start, end) = (range.as_ptr() as usize, range.as_ptr() as usize + range.len());
    let (first, last) = (start / OS_PAGE * OS_PAGE, (end - 1) / OS_PAGE * OS_PAGE);
    let samples = if range.len() > 2 << 20 { 16 } else { 2 };
    (0..samples).all(|k| {
        let page = (first + (last - first) / (samples - 1) * k) / OS_PAGE * OS_PAGE;
        let mut resident = 0u8;
        // SAFETY: `page` is page-aligned and inside the pages of `range`, which lies in a live
        // map (the caller's); mincore only reads the page tables and page cache, and writes one
        // byte into `resident`.
        let ok = unsafe { libc::mincore(page as *mut libc::c_void, OS_PAGE, &mut resident) } == 0;
        ok && resident & 1 == 1
    })
}

/// Makes room for `n` more open files in this process, before a caller opens that many at once
/// (a version's 2,000 data files, each held open while its table lives): raises the soft limit
/// on open files towards the hard one where `n` would pass it (as Go's runtime does at start),
/// and grows the descriptor table once. A process with several threads otherwise waits for an
/// RCU grace period each time the table doubles as the files open (measured 25-45 ms over
/// 2,000 files on a 2-core VM; 26-29 ms to open them all with the table grown first). Best
/// effort: where it cannot, the opens find out as before.
#[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
pub fn reserve_descriptors(n: usize) {
    #[cfg(unix)]
    {
        // SAFETY: getrlimit/setrlimit read and write the plain struct given; fcntl(F_DUPFD)
        // duplicates descriptor 0 (or fails, leaving nothing) and close closes only the
        // duplicate it returned.
        unsafe {
            let lowest = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 0);
            if lowest < 0 {
                return;
            }
            libc::close(lowest);
            let target = lowest as u64 + n as u64;
            let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return;
            }
            if (limit.rlim_cur as u64) <= target + 16 && limit.rlim_cur < limit.rlim_max {
                let wanted = (target + 64).min(limit.rlim_max as u64);
                let raised = libc::rlimit { rlim_cur: wanted as libc::rlim_t, rlim_max: limit.rlim_max };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    limit = raised;
                }
            }
            let top = target.min((limit.rlim_cur as u64).saturating_sub(1));
            let grown = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, top as libc::c_int);
            if grown >= 0 {
                libc::close(grown);
            }
        }
    }
    #[cfg(not(unix))]
    let _ = n;
}

/// Asks the kernel to back the whole 2 MiB pages inside `buf` with transparent huge pages when
/// they are first touched. For large buffers about to be written once, such as a query's result
/// vector's spare capacity (`Vec::spare_capacity_mut`): each 4 KiB page of fresh memory otherwise costs a page fault (on the VM the queries
/// were measured on, writing 22 MB of fresh row ids took 3 ms in 4 KiB pages, 1 ms in huge
/// ones). Advice only (Linux's `MADV_HUGEPAGE`; ignored where transparent huge pages are off,
/// and elsewhere): it never changes what the buffer holds.
pub fn advise_huge_pages<T>(buf: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE_PAGE: usize = 2 << 20;
        let start = buf.as_ptr() as usize;
        let end = start + std::mem::size_of_val(buf);
        let (first, last) = (start.next_multiple_of(HUGE_PAGE), end / HUGE_PAGE * HUGE_PAGE);
        if last > first {
            // SAFETY: [first, last) is page-aligned and lies inside `buf`, memory this call
            // borrows mutably (so no one else reads it meanwhile); MADV_HUGEPAGE changes how
            // its pages are backed, never their contents (test `huge_page_advice_keeps_contents`).
            let _ = unsafe { libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

#[cfg(test)]
pub(crate) mod tests {
    thread_local! {
        /// Makes this thread's maps fail as the kernel's do when a process has used up its maps
        /// (ENOMEM): the failure a map made on first read must report.
        pub(crate) static FAIL_MAPS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    use super::*;

    #[test]
    fn huge_page_advice_keeps_contents() {
        // Values written before the advice (several huge pages and partial ones), and after it
        // into the spare room it was given for.
        let mut v: Vec<u64> = Vec::with_capacity(4_000_000);
        v.extend(0..3_000_000);
        advise_huge_pages(&mut v[..]);
        advise_huge_pages(v.spare_capacity_mut());
        v.extend(3_000_000..4_000_000);
        assert!(v.iter().enumerate().all(|(i, x)| *x == i as u64));
        advise_huge_pages::<u8>(&mut []);
        advise_huge_pages(&mut [1u8]);
    }

    #[test]
    #[cfg(unix)]
    fn thousands_of_maps_are_all_guarded() {
        // A version of 10,000 data files maps each: every map gets a slot (4,096 slots left the
        // rest unguarded, and a file truncated under one of those killed the process).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let maps: Vec<MappedFile> = (0..5_000).map(|_| MappedFile::open(&path).unwrap()).collect();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
        let last = maps.last().unwrap();
        // A read through the map of a file cut to nothing: zeros, and that map marked.
        let byte = last.as_slice()[4096];
        assert_eq!(byte, 0);
        assert!(last.is_damaged() && !maps[0].is_damaged());
    }

    #[test]
    fn arrow_buffers_outlive_the_handle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, (0..=255u8).cycle().take(10_000).collect::<Vec<u8>>()).unwrap();
        let mapped = MappedFile::open(&path).unwrap();
        // Advice for bytes of the map, and for bytes elsewhere (ignored): never a fault.
        mapped.will_need(&mapped.as_slice()[100..9000]);
        mapped.will_need(&[1, 2, 3]);
        mapped.will_need(&[]);
        let buffer = std::sync::Arc::new(mapped).into_arrow_buffer();
        let sliced = buffer.slice_with_length(256, 300);
        drop(buffer);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(sliced.len(), 300);
        assert_eq!(sliced.as_slice()[..3], [0, 1, 2]);
        assert_eq!(sliced.as_slice()[299], 43);
        std::fs::write(&path, b"").unwrap();
        let empty = std::sync::Arc::new(MappedFile::open(&path).unwrap()).into_arrow_buffer();
        assert!(empty.is_empty());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_large_range_is_mapped_in_pieces_and_a_shrunk_file_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let len = (160 << 20) + 12_345; // five 32 MiB pieces and a short last one
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(len).unwrap(); // sparse: reads as zeros, costs no disk
        let mapped = MappedFile::open(&path).unwrap();
        assert!(mapped.will_need(mapped.as_slice()));
        assert!(mapped.will_need(&mapped.as_slice()[4097..(100 << 20) + 3]));
        // Cut under the map: the pieces past the end cannot be mapped, and it says so.
        file.set_len(len / 2).unwrap();
        assert!(!mapped.will_need(mapped.as_slice()));
        assert!(mapped.will_need(&mapped.as_slice()[..(len / 4) as usize]), "what is left still reads");
    }

    #[test]
    #[cfg(unix)]
    fn cached_pages_are_told_from_pages_not_read_yet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 3 << 20]).unwrap(); // written: in the page cache
        let mapped = MappedFile::open(&path).unwrap();
        assert!(sampled_pages_cached(mapped.as_slice()));
        assert!(sampled_pages_cached(&mapped.as_slice()[5000..5001]));
        // A hole never read: not cached (sparse, no page cache pages behind it).
        let sparse = dir.path().join("sparse");
        std::fs::File::create(&sparse).unwrap().set_len(8 << 20).unwrap();
        let mapped = MappedFile::open(&sparse).unwrap();
        assert!(!sampled_pages_cached(mapped.as_slice()));
        assert!(mapped.will_need(mapped.as_slice()), "advised and mapped");
    }

    #[test]
    #[cfg(unix)]
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
    fn descriptors_reserved_let_that_many_files_open() {
        // In a child process of this test binary (the limit is the process's): there the soft
        // limit is lowered to 40 more than what is open, and 300 files must open after
        // `reserve_descriptors(300)`; without it the 41st open fails with EMFILE.
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: reads the limit into the struct given.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
        if (limit.rlim_max as u64) < 1024 {
            return; // a hard limit too low to raise the soft one past 300 open files
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "mmap::tests::reserve_descriptors_in_a_child", "--ignored", "--nocapture"])
            .env("BETON_TEST_DESCRIPTORS_CHILD", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
    }

    /// [`descriptors_reserved_let_that_many_files_open`]'s child (ignored unless it runs it).
    #[test]
    #[ignore]
    #[cfg(unix)]
    #[allow(clippy::unnecessary_cast)]
    fn reserve_descriptors_in_a_child() {
        assert_eq!(std::env::var("BETON_TEST_DESCRIPTORS_CHILD").as_deref(), Ok("1"), "run by its parent");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        let open_now = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count()) as u64;
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: reads and writes the limit through the struct given.
        unsafe {
            assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
            limit.rlim_cur = (open_now + 40) as libc::rlim_t;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
        reserve_descriptors(300);
        let files: Vec<_> =
            (0..300).map(|k| std::fs::File::open(&path).map_err(|e| format!("open {k}: {e}"))).collect();
        assert!(files.iter().all(Result::is_ok), "{:?}", files.iter().find(|f| f.is_err()));
    }
}
