//! Reading an open `.beton` file: everything was validated when it was opened (`open.rs`), so
//! any sample's scalars are read from its row in O(1), and payloads are slices of the map found
//! through an index of the allocation table that is built on first use (nothing is built for
//! files that are only queried). Row pointers are checked against that index on every read, so a
//! corrupt row is an error, never a wrong slice.
//!
//! This module takes untrusted bytes and never panics on any input; the fuzz target
//! `fuzz/fuzz_targets/open_read.rs` holds it to that.

mod file_id;
mod open;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::field::{DType, DecodeContext, FieldType};
use crate::format::{AllocEntry, Header};
use crate::format::{ALLOC_ENTRY_SIZE, ARGS_SIZE};
use crate::mmap::Bytes;
use crate::remote;
/// The values a reader hands out (their home is [`crate::value`]; also here, where they were).
pub use crate::value::{ImageRef, Value};
pub use file_id::FileId;
pub use open::OpenOptions;

/// One field of an open dataset.
#[derive(Debug, Clone)]
pub struct Field {
    name: String,
    ty: FieldType,
    offset: usize,
    /// The descriptor's type id as stored.
    type_id: u8,
    /// Its argument blob, `None` when all zeros (a number field's: opening 2,000 data files of
    /// two such fields kept 4 MB of zeros).
    arguments: Option<Box<[u8; ARGS_SIZE]>>,
}

impl Field {
    /// The field's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the field holds.
    pub fn field_type(&self) -> &FieldType {
        &self.ty
    }

    /// Byte offset of the field's slot in a data-table row.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The descriptor's type id as stored.
    pub fn type_id(&self) -> u8 {
        self.type_id
    }

    /// The descriptor's 1024-byte argument blob as stored.
    pub fn arguments(&self) -> &[u8; ARGS_SIZE] {
        static ZEROS: [u8; ARGS_SIZE] = [0; ARGS_SIZE];
        self.arguments.as_deref().unwrap_or(&ZEROS)
    }
}

/// Index from sample to its allocations, built on first payload access: the allocation entries
/// ordered by (sample_id, ptr, size) and, per sample, where its entries start. A lookup scans
/// only that sample's entries (one per payload field), so it is O(1) in the size of the file.
struct AllocIndex {
    /// `None` when the file's own table is already in that order (beton's files, FFCV's with one
    /// worker): it is read in place. Otherwise a sorted copy (FFCV with several workers).
    sorted: Option<Vec<AllocEntry>>,
    /// `starts[i]..starts[i + 1]` are sample i's entries; `num_samples + 1` items.
    starts: Vec<u64>,
}

/// Bytes of a `.beton` file starting at byte `offset`, to read payloads from
/// ([`Dataset::get_in`]).
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    /// File offset of `bytes[0]`.
    pub offset: u64,
    /// The bytes.
    pub bytes: &'a [u8],
}

/// An open, validated `.beton` file.
pub struct Dataset {
    path: PathBuf,
    /// The file this handle opened (`None` for bytes in memory).
    id: Option<FileId>,
    /// Its modification time when it was opened (`None` for bytes in memory).
    modified: Option<std::time::SystemTime>,
    /// The open file, for reads that must not go through the map (the split region, FORMAT.md
    /// §12, which may be a hole), and to map when first read.
    file: Option<File>,
    /// The file's bytes: a local file's mapped when first read ([`Dataset::bytes`]), so that a
    /// query a columnar copy serves maps none of a version's 2,000 data files; given at open for
    /// a remote replica and for bytes in memory.
    bytes: OnceLock<Bytes>,
    /// The file's length (the bytes' once mapped).
    len: u64,
    /// Why the map made on first read could not be made: the bytes then read as zeros and
    /// [`Dataset::check_intact`] reports this, as it reports a file that shrank under its map.
    map_failed: OnceLock<(std::io::ErrorKind, String)>,
    header: Header,
    fields: Vec<Field>,
    row_size: usize,
    table_start: u64,
    table_end: u64,
    /// Where pages may start: the end of the data table rounded up to a page.
    first_page_bound: u64,
    num_allocations: u64,
    /// The allocation table's entries, checked once (on open, or on first use when deferred).
    alloc_check: OnceLock<std::result::Result<AllocMeta, (u64, String)>>,
    index: OnceLock<AllocIndex>,
    /// For a dataset on remote storage: its replica, whose payload blocks are fetched on read.
    remote: Option<RemoteParts>,
}

/// What a remote dataset holds besides its map: the replica, the leases of its last payload
/// reads, and its metadata's blocks, pinned while it is open.
struct RemoteParts {
    replica: std::sync::Arc<remote::Replica>,
    recent: remote::RecentLeases,
    _metadata: Vec<remote::Lease>,
}

/// What checking the allocation table finds out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AllocMeta {
    /// Entries already in (sample, ptr, size) order.
    sorted: bool,
    /// The first page holding an allocation (the allocation table's offset when there is none).
    first_page: u64,
}

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("path", &self.path)
            .field("header", &self.header)
            .field("fields", &self.fields.iter().map(|f| &f.name).collect::<Vec<_>>())
            .finish()
    }
}

impl Dataset {
    /// The file's bytes, mapped on first use (with the data pages advised random, as at open).
    fn bytes(&self) -> &Bytes {
        self.bytes.get_or_init(|| {
            let Some(file) = &self.file else {
                unreachable!("a dataset without an open file is given its bytes at open")
            };
            match Bytes::map(&self.path, file, self.len) {
                Ok(bytes) => {
                    bytes.advise_random(self.first_page_bound, self.header.alloc_table_ptr);
                    bytes
                }
                Err(e) => {
                    let (kind, why) = match &e {
                        Error::Io { source, .. } => (source.kind(), source.to_string()),
                        other => (std::io::ErrorKind::Other, other.to_string()),
                    };
                    let _ = self.map_failed.set((kind, format!("mapping it failed: {why}")));
                    // Zeroed pages from the allocator, untouched: not resident.
                    Bytes::Owned(vec![0; self.len as usize])
                }
            }
        })
    }

    /// Whether a read so far got zeros instead of the file's bytes: it shrank under the map, or
    /// the map could not be made.
    fn damaged(&self) -> Option<Error> {
        if let Some((kind, why)) = self.map_failed.get() {
            return Some(Error::io(&self.path, std::io::Error::new(*kind, why.clone())));
        }
        self.bytes
            .get()
            .is_some_and(Bytes::is_damaged)
            .then(|| Error::FileChanged { path: self.path.clone() })
    }

    /// Whether the file's bytes are mapped (or held) yet: a local file is mapped when first read.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        self.bytes.get().is_some()
    }

    /// Checks every allocation entry: its sample, its bounds, its page (FORMAT.md §6).
    fn check_allocations(&self) -> std::result::Result<AllocMeta, (u64, String)> {
        let (header, page_size, data_start) = (&self.header, self.page_size(), self.first_page_bound);
        let alloc_start = header.alloc_table_ptr;
        let mut alloc_sorted = true;
        let mut previous = None;
        // The first page holding an allocation: where the pages start (a writer may leave whole
        // pages between the data table and it, for named splits, FORMAT.md §12).
        let mut first_page = alloc_start;
        let alloc_bytes = &self.bytes().as_slice()[alloc_start as usize..];
        for (k, chunk) in alloc_bytes.chunks_exact(ALLOC_ENTRY_SIZE).enumerate() {
            let e = AllocEntry::parse(chunk).unwrap_or(AllocEntry { sample_id: 0, ptr: 0, size: 0 });
            let at = alloc_start + (k * ALLOC_ENTRY_SIZE) as u64;
            let problem = if e.sample_id >= header.num_samples {
                Some(format!(
                    "belongs to sample {}, past the last sample {}",
                    e.sample_id,
                    header.num_samples.saturating_sub(1).min(header.num_samples)
                ))
            } else if e.ptr < data_start {
                Some(format!("points before the first data page at byte {data_start}"))
            } else if e.ptr.checked_add(e.size).is_none_or(|end| end > alloc_start) {
                Some(format!("runs past the last data page, which ends at byte {alloc_start}"))
            } else if e.size > 0 && e.ptr / page_size != (e.ptr + e.size - 1) / page_size {
                Some(format!("straddles a page boundary (page size {page_size})"))
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err((
                    at,
                    format!(
                        "allocation entry {k} (sample {}, ptr {}, size {}) {problem}",
                        e.sample_id, e.ptr, e.size
                    ),
                ));
            }
            first_page = first_page.min(e.ptr - e.ptr % page_size);
            let key = (e.sample_id, e.ptr, e.size);
            alloc_sorted &= previous.is_none_or(|p| p <= key);
            previous = Some(key);
        }
        if let Some(e) = self.damaged() {
            return Err((0, format!("its allocation table could not be read: {e}")));
        }
        Ok(AllocMeta { sorted: alloc_sorted, first_page })
    }

    /// The checked allocation table (checking it on first use when deferred).
    pub(crate) fn alloc_meta(&self) -> Result<&AllocMeta> {
        self.alloc_check.get_or_init(|| self.check_allocations()).as_ref().map_err(|(offset, what)| {
            Error::Corrupt { path: self.path.clone(), offset: *offset, what: what.clone() }
        })
    }

    /// The file's path (`<memory>` for [`OpenOptions::open_bytes`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What identifies the file this handle opened (`None` for bytes in memory): writes through
    /// a handle check that its path still holds this file.
    pub fn file_id(&self) -> Option<FileId> {
        self.id
    }

    /// The file's modification time when this handle opened it (`None` for bytes in memory, or
    /// where the platform has none).
    pub fn modified(&self) -> Option<std::time::SystemTime> {
        self.modified
    }

    /// Checks that every read through this handle so far read the file's bytes: `Err` when
    /// the file was truncated by another program since it was opened and a read past its new
    /// end got zeros instead of crashing the process (see [`Error::FileChanged`]). Readers call
    /// this after reading and before handing out what they read; [`Dataset::get`] and
    /// [`crate::verify`] call it themselves, but bytes borrowed from a [`Value`] are read by the
    /// caller, who checks afterwards.
    ///
    /// # Errors
    /// [`Error::FileChanged`]; [`Error::Io`] when the map made on first read could not be made
    /// (the reads got zeros).
    pub fn check_intact(&self) -> Result<()> {
        self.damaged().map_or(Ok(()), Err)
    }

    /// `len` bytes from byte `offset`, read with `pread` from the file (not through its map: no
    /// fault on a hole the file system cannot back), or copied from bytes in memory.
    ///
    /// # Errors
    /// I/O errors, and [`Error::Corrupt`] for a range past the end of the file.
    pub(crate) fn read_at(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let past_end = || Error::Corrupt {
            path: self.path.clone(),
            offset,
            what: format!("{len} bytes from here run past the end of the file ({} bytes)", self.file_len()),
        };
        let end = offset.checked_add(len).filter(|&e| e <= self.file_len()).ok_or_else(past_end)?;
        let _lease = self.fetch_ranges(std::slice::from_ref(&(offset..end)))?;
        match &self.file {
            #[cfg(unix)]
            Some(file) => {
                let mut buf = vec![0u8; len as usize];
                std::os::unix::fs::FileExt::read_exact_at(file, &mut buf, offset).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        Error::FileChanged { path: self.path.clone() }
                    } else {
                        Error::io(&self.path, e)
                    }
                })?;
                Ok(buf)
            }
            _ => Ok(self.bytes().as_slice()[offset as usize..end as usize].to_vec()),
        }
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Number of samples (rows).
    pub fn num_samples(&self) -> u64 {
        self.header.num_samples
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> u64 {
        self.header.page_size as u64
    }

    /// The fields, in file order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// Position of the first field called `name`.
    ///
    /// # Errors
    /// [`Error::NoSuchField`] listing the fields there are.
    pub fn field_index(&self, name: &str) -> Result<usize> {
        self.fields.iter().position(|f| f.name == name).ok_or_else(|| Error::NoSuchField {
            name: name.to_string(),
            available: self.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Size of one data-table row in bytes.
    pub fn row_size(&self) -> usize {
        self.row_size
    }

    /// The whole data table: `num_samples × row_size` bytes, row-major.
    pub fn data_table(&self) -> &[u8] {
        let start = self.table_start as usize;
        &self.bytes().as_slice()[start..start + self.header.num_samples as usize * self.row_size]
    }

    /// Byte offset of the data table in the file.
    pub fn data_table_offset(&self) -> u64 {
        self.table_start
    }

    /// Byte offset just past the data table's last row.
    pub fn data_table_end(&self) -> u64 {
        self.table_end
    }

    /// Byte offset of the first data page: the first page holding an allocation, or the
    /// allocation table's offset when there is none. It is a multiple of the page size at or
    /// after the end of the data table rounded up to a page; a writer may leave whole pages in
    /// between (FORMAT.md §12).
    ///
    /// With [`OpenOptions::defer_allocation_checks`] this checks the allocation table on first
    /// call; if it is corrupt, this is the lowest offset pages may start at, and payload reads
    /// report the error.
    pub fn data_start(&self) -> u64 {
        self.alloc_meta().map_or(self.first_page_bound, |m| m.first_page)
    }

    /// Number of data pages (0 when the file has no payloads).
    pub fn num_pages(&self) -> u64 {
        if self.num_allocations == 0 {
            return 0;
        }
        (self.header.alloc_table_ptr.saturating_sub(self.data_start())).div_ceil(self.page_size())
    }

    /// Size of the file in bytes.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The whole file's bytes (pages are `page_size` slices from [`Dataset::data_start`]).
    pub fn file_bytes(&self) -> &[u8] {
        self.bytes().as_slice()
    }

    /// Whether the dataset was opened from remote storage ([`OpenOptions::open_url`]).
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// How a remote dataset is read (its cache bound, requests in flight, ...); `None` for a
    /// local file.
    pub fn remote_options(&self) -> Option<&remote::RemoteOptions> {
        self.remote.as_ref().map(|r| r.replica.options())
    }

    /// Range requests and bytes fetched so far for a remote dataset (`None` for a local file).
    pub fn remote_stats(&self) -> Option<remote::RemoteStats> {
        self.remote.as_ref().map(|r| r.replica.stats())
    }

    /// Makes byte ranges of a remote dataset's file present in its replica (see
    /// [`crate::remote`]), in as few concurrent range requests as their blocks allow, and keeps
    /// them until the lease drops: reads of [`Dataset::file_bytes`] inside these ranges then
    /// see the file's bytes. `None` for a local file, whose bytes are always there.
    ///
    /// # Errors
    /// The remote errors ([`Error::Remote`], ...), naming the URL.
    pub fn fetch_ranges(&self, ranges: &[std::ops::Range<u64>]) -> Result<Option<remote::Lease>> {
        match &self.remote {
            Some(r) => r.replica.ensure(ranges).map(Some),
            None => Ok(None),
        }
    }

    /// For a remote dataset, what reading the payloads of `samples` would fetch now:
    /// `(range requests, bytes)` for the blocks not yet present (`None` for a local file).
    pub fn remote_plan(&self, samples: impl IntoIterator<Item = u64>) -> Option<(u64, u64)> {
        let r = self.remote.as_ref()?;
        let ranges: Vec<_> =
            samples.into_iter().filter_map(|i| self.sample_span(i)).map(|(a, b)| a..b).collect();
        Some(r.replica.plan(&ranges))
    }

    /// [`Dataset::fetch_ranges`] for the payloads of `samples` (their [`Dataset::sample_span`]s):
    /// what a loader asks for before it decodes a batch.
    ///
    /// # Errors
    /// As [`Dataset::fetch_ranges`].
    pub fn fetch_samples(&self, samples: impl IntoIterator<Item = u64>) -> Result<Option<remote::Lease>> {
        if self.remote.is_none() {
            return Ok(None);
        }
        let ranges: Vec<_> =
            samples.into_iter().filter_map(|i| self.sample_span(i)).map(|(a, b)| a..b).collect();
        self.fetch_ranges(&ranges)
    }

    /// Number of allocation-table entries.
    pub fn num_allocations(&self) -> u64 {
        self.num_allocations
    }

    /// Whether the heap holds payloads that no field type this crate knows points to: those
    /// of custom fields (an FFCV `Field` whose `encode` calls `malloc`). Every known payload
    /// field owns exactly one allocation per sample, so any other count means custom payloads,
    /// whose pointers sit where only their `Field` class knows: a copy of the row bytes into
    /// another file would point into the wrong place.
    pub fn has_custom_payloads(&self) -> bool {
        let known =
            self.fields.iter().filter(|f| f.field_type().payload_ptr_offset().is_some()).count() as u64;
        self.num_allocations != known.saturating_mul(self.header.num_samples)
    }

    /// Allocation-table entry `k`, in file order (validated on open).
    ///
    /// # Panics
    /// If `k >= num_allocations()`.
    pub fn allocation(&self, k: u64) -> AllocEntry {
        assert!(k < self.num_allocations, "allocation {k} out of range");
        let at = (self.header.alloc_table_ptr + k * ALLOC_ENTRY_SIZE as u64) as usize;
        AllocEntry::parse(&self.bytes().as_slice()[at..]).expect("allocation table validated on open")
    }

    /// Row `index` of the data table.
    ///
    /// # Errors
    /// [`Error::SampleOutOfRange`].
    pub fn row(&self, index: u64) -> Result<&[u8]> {
        if index >= self.header.num_samples {
            return Err(Error::SampleOutOfRange { index, num_samples: self.header.num_samples });
        }
        let start = self.table_start as usize + index as usize * self.row_size;
        Ok(&self.bytes().as_slice()[start..start + self.row_size])
    }

    fn index(&self) -> &AllocIndex {
        self.index.get_or_init(|| {
            let Ok(meta) = self.alloc_meta() else {
                // A corrupt table (deferred checks): no sample has allocations; payload reads
                // report the error.
                return AllocIndex { sorted: None, starts: vec![0; self.header.num_samples as usize + 1] };
            };
            let sorted = (!meta.sorted).then(|| {
                let mut v: Vec<AllocEntry> = (0..self.num_allocations).map(|k| self.allocation(k)).collect();
                v.sort_unstable_by_key(|e| (e.sample_id, e.ptr, e.size));
                v
            });
            // Counting sort of entry positions by sample (ids were validated < num_samples).
            let mut starts = vec![0u64; self.header.num_samples as usize + 1];
            for k in 0..self.num_allocations {
                let id = match &sorted {
                    Some(v) => v[k as usize].sample_id,
                    None => self.allocation(k).sample_id,
                };
                starts[id as usize + 1] += 1;
            }
            for i in 1..starts.len() {
                starts[i] += starts[i - 1];
            }
            AllocIndex { sorted, starts }
        })
    }

    /// The allocations of sample `index`, ordered by pointer (empty for an index out of range).
    pub fn sample_allocations(&self, index: u64) -> Vec<AllocEntry> {
        self.sample_entries(index).collect()
    }

    fn sample_entries(&self, index: u64) -> impl Iterator<Item = AllocEntry> + '_ {
        // A file without payloads (a table of scalars) has no entries to index: no array of
        // every sample's (8 bytes a row: 800 MB at 10^8 rows) for a loader that asks each row.
        let idx = (self.num_allocations > 0).then(|| self.index());
        let range = match idx.map(|idx| (idx.starts.get(index as usize), idx.starts.get(index as usize + 1)))
        {
            Some((Some(&lo), Some(&hi))) => lo..hi,
            _ => 0..0,
        };
        range.map(move |k| match idx.and_then(|idx| idx.sorted.as_ref()) {
            Some(v) => v[k as usize],
            None => self.allocation(k),
        })
    }

    /// Size of the allocation of sample `index` at `ptr`: the entry of exactly `size` bytes when
    /// the row states one, else the non-empty entry. (An empty payload shares its pointer with the
    /// next payload of its sample, so (sample, ptr) alone can be ambiguous; image and NDArray
    /// payloads, whose rows state no size, are never empty.)
    fn allocation_size(&self, index: u64, ptr: u64, size: Option<u64>) -> Option<u64> {
        self.sample_entries(index)
            .find(|e| e.ptr == ptr && size.map_or(e.size > 0, |s| s == e.size))
            .map(|e| e.size)
    }

    fn row_offset(&self, index: u64, field: usize) -> u64 {
        self.table_start + index * self.row_size as u64 + self.fields[field].offset as u64
    }

    /// The byte range `[start, end)` of the file holding all of sample `index`'s payloads (one
    /// page at most, FORMAT.md §5), or `None` when it has none. A loader that reads samples with
    /// `pread` instead of the map reads this range and passes it to [`Dataset::get_in`].
    pub fn sample_span(&self, index: u64) -> Option<(u64, u64)> {
        self.sample_entries(index).fold(None, |span, e| {
            let (lo, hi) = span.unwrap_or((e.ptr, e.ptr + e.size));
            Some((lo.min(e.ptr), hi.max(e.ptr + e.size)))
        })
    }

    /// The payload of sample `index`, field `field`, whose row pointer is `ptr` (and size, when the
    /// row has one): the allocation at `ptr` owned by that sample, read from `window`.
    fn payload<'a>(
        &self,
        index: u64,
        field: usize,
        ptr: u64,
        size: Option<u64>,
        window: Window<'a>,
    ) -> Result<&'a [u8]> {
        self.alloc_meta()?;
        let size = self.allocation_size(index, ptr, size).ok_or_else(|| Error::Corrupt {
            path: self.path.clone(),
            offset: self.row_offset(index, field),
            what: format!(
                "sample {index}, field '{}': no allocation of this sample at pointer {ptr}{}",
                self.fields[field].name,
                size.map(|s| format!(" with the row's size {s}")).unwrap_or_default()
            ),
        })?;
        // A remote dataset's map reads zeros where blocks were never fetched: fetch them first,
        // and keep them while the value is used.
        if let Some(r) = &self.remote {
            if window.offset == 0 && std::ptr::eq(window.bytes, self.bytes().as_slice()) {
                r.recent.keep(r.replica.ensure(std::slice::from_ref(&(ptr..ptr.saturating_add(size))))?);
            }
        }
        // Validated on open: every allocation lies inside the file; a window may not hold it.
        ptr.checked_sub(window.offset)
            .and_then(|start| window.bytes.get(start as usize..(start + size) as usize))
            .ok_or_else(|| Error::InvalidArgument {
                what: "payload window".into(),
                why: format!(
                    "sample {index}, field '{}': bytes {ptr}..{} are outside the window {}..{}",
                    self.fields[field].name,
                    ptr + size,
                    window.offset,
                    window.offset + window.bytes.len() as u64
                ),
            })
    }

    /// The value of field `field` in sample `index`.
    ///
    /// # Errors
    /// [`Error::SampleOutOfRange`], [`Error::NoSuchField`] for a field position past the end, and
    /// [`Error::Corrupt`] when the row disagrees with the allocation table or the payload breaks
    /// its type (bad image mode, raw size ≠ width × height × channels, NDArray size ≠ its shape,
    /// JSON without its NUL or not UTF-8, bool not 0 or 1).
    pub fn get(&self, index: u64, field: usize) -> Result<Value<'_>> {
        self.get_in(index, field, Window { offset: 0, bytes: self.bytes().as_slice() })
    }

    /// The value of field `field` in sample `index`, with its payload read from `window` (bytes
    /// of the file from `window.offset`) instead of the map: a loader's own page cache, or the
    /// sample's [`sample_span`](Self::sample_span) read with `pread`.
    ///
    /// # Errors
    /// As [`Dataset::get`], and [`Error::InvalidArgument`] when the payload is not in `window`.
    pub fn get_in<'a>(&'a self, index: u64, field: usize, window: Window<'a>) -> Result<Value<'a>> {
        let value = self.read_value(index, field, window);
        // Checked after reading, error or not: a read that faulted got zeros, and whatever was
        // concluded from them (a value, or a "corrupt" row) is not about this file's bytes.
        self.check_intact()?;
        value
    }

    fn read_value<'a>(&'a self, index: u64, field: usize, window: Window<'a>) -> Result<Value<'a>> {
        let row = self.row(index)?;
        let f = self.fields.get(field).ok_or_else(|| Error::NoSuchField {
            name: format!("#{field}"),
            available: self.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "),
        })?;
        let kind = f.ty.kind();
        let slot = &row[f.offset..f.offset + kind.slot().size];
        let corrupt = |what: String| Error::Corrupt {
            path: self.path.clone(),
            offset: self.row_offset(index, field),
            what: format!("sample {index}, field '{}': {what}", f.name),
        };
        let payload = |ptr: u64, size: Option<u64>| self.payload(index, field, ptr, size, window);
        kind.decode(slot, &DecodeContext { payload: &payload, corrupt: &corrupt })
    }

    /// The value of the field called `name` in sample `index`.
    ///
    /// # Errors
    /// As [`Dataset::get`], and [`Error::NoSuchField`].
    pub fn get_by_name(&self, index: u64, name: &str) -> Result<Value<'_>> {
        self.get(index, self.field_index(name)?)
    }
}

/// Number of elements of a variable-length array value of element type `dtype`.
pub fn array_len(dtype: &DType, data: &[u8]) -> usize {
    data.len() / dtype.itemsize()
}
