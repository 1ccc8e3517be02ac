//! Opening a `.beton` file: validate everything once, then trust.
//!
//! [`Dataset::open`] maps the file and checks the header, every descriptor, the row layout, the
//! bounds of the data table and every allocation-table entry (owner, pointer, size, one page per
//! allocation), the last on open or on first use ([`OpenOptions::defer_allocation_checks`]).
//! What is checked here the reading side (`mod.rs`) trusts.
//!
//! This module takes untrusted bytes and never panics on any input; the fuzz target
//! `fuzz/fuzz_targets/open_read.rs` holds it to that.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::file_id::{read_exact_at, FileId};
use super::{Dataset, Field, RemoteParts};
use crate::error::{Error, Result};
use crate::field::FieldType;
use crate::format::{self, FieldDesc, Header, RowLayout, Slot};
use crate::format::{ALLOC_ENTRY_SIZE, FIELD_DESC_SIZE, HEADER_SIZE, VERSION};
use crate::mmap::Bytes;
use crate::remote;

/// Options for opening a file.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    custom_layouts: HashMap<String, Slot>,
    defer_allocation_checks: bool,
    remote: Option<remote::RemoteOptions>,
}

impl OpenOptions {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares the row slot of a foreign custom field (type id 255 written by an FFCV `Field`
    /// class beton does not know): `size` bytes aligned to `align` (numpy's `itemsize` and
    /// `alignment` of that field's `metadata_type`; 1 for a structured dtype).
    pub fn custom_layout(mut self, name: &str, size: usize, align: usize) -> Self {
        self.custom_layouts.insert(name.to_string(), Slot { size, align });
        self
    }

    /// Checks the allocation table's entries on first use instead of on open: opening is then
    /// O(fields) however many payloads the file has, and a workload that reads only the data
    /// table (SQL over scalar columns) never reads the allocation table at all. A bad entry is
    /// then reported by the first payload read (and by [`crate::verify`]) as the same
    /// [`Error::Corrupt`] that open would give. Everything else is still checked on open.
    pub fn defer_allocation_checks(mut self, defer: bool) -> Self {
        self.defer_allocation_checks = defer;
        self
    }

    /// How a URL is read (cache directory and bound, requests in flight, retries) instead of
    /// [`remote::RemoteOptions::from_env`].
    pub fn remote_options(mut self, options: remote::RemoteOptions) -> Self {
        self.remote = Some(options);
        self
    }

    /// Opens and validates `path`: a local file, or a URL ([`OpenOptions::open_url`]).
    ///
    /// # Errors
    /// I/O errors, and every way the file breaks the format (see [`Dataset::open`]).
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Dataset> {
        let path = path.as_ref();
        if remote::is_url(path) {
            return self.open_url(&path.to_string_lossy());
        }
        let io = |e| Error::io(path, e);
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(Error::io(
                path,
                std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory, not a .beton file"),
            ));
        }
        let bytes = Bytes::map(path, &file, meta.len())?;
        let mut ds = Dataset::validate(path.to_path_buf(), bytes, self)?;
        ds.id = Some(FileId::of(&meta, ds.header.to_bytes()));
        ds.modified = meta.modified().ok();
        ds.file = Some(file);
        Ok(ds)
    }

    /// Opens the `.beton` object at `url` (`s3://`, `gs://`, `az://`, `http(s)://`, `file://`)
    /// through a local replica (see [`crate::remote`]): fetches its header, descriptors,
    /// allocation table and data table with range requests, then validates it as
    /// [`OpenOptions::open`] does. Payloads are fetched when read. Errors name the URL.
    ///
    /// # Errors
    /// [`Error::RemoteNotFound`], [`Error::RemoteDenied`], [`Error::RemoteUnavailable`] (after
    /// retries: within [`RemoteOptions::open_retry_for`](crate::RemoteOptions::open_retry_for)
    /// for a store that does not answer), [`Error::Remote`], and every error of
    /// [`OpenOptions::open`].
    pub fn open_url(&self, url: &str) -> Result<Dataset> {
        let options = match &self.remote {
            Some(o) => o.clone(),
            None => remote::RemoteOptions::from_env()?,
        };
        let (source, info) = remote::open_source(url, &options)?;
        let replica = remote::Replica::create(source, info, options)?;
        let len = replica.len();
        let (file, local) = replica.file();
        let file = file.try_clone().map_err(|e| Error::io(local, e))?;
        // The first 64 KiB (the header, and the descriptors: it holds 60), then the rest of the
        // descriptors and the allocation table at the end, then the data table. The spare
        // pages after it (named splits) are fetched when read.
        let mut leases = vec![replica.ensure(std::slice::from_ref(&(0..64 << 10)))?];
        let mut buf = [0u8; HEADER_SIZE];
        if let Some(h) = read_exact_at(&file, &mut buf, 0).ok().and_then(|()| Header::parse(&buf)) {
            let descriptors = format::data_table_start(h.num_fields);
            leases.push(replica.ensure(&[0..descriptors, h.alloc_table_ptr..len])?);
        }
        let bytes = Bytes::map(local, &file, len)?;
        let mut ds = Dataset::validate(PathBuf::from(url), bytes, self)?;
        leases.push(replica.ensure(&[0..ds.table_end, ds.header.alloc_table_ptr..len])?);
        ds.file = Some(file);
        ds.remote = Some(RemoteParts { replica, recent: remote::RecentLeases::default(), _metadata: leases });
        Ok(ds)
    }

    /// Validates a dataset held in memory (tests and fuzzing); errors name the path `<memory>`.
    ///
    /// # Errors
    /// As [`OpenOptions::open`].
    pub fn open_bytes(&self, bytes: Vec<u8>) -> Result<Dataset> {
        Dataset::validate(PathBuf::from("<memory>"), Bytes::Owned(bytes), self)
    }
}

impl Dataset {
    /// Opens `path` with default options.
    ///
    /// Checks, in order: the 24-byte header; version 2; `alloc_table_ptr` ≠ 0 (0 is the mark of a
    /// write that never finished); the descriptors fit in the file; every name is ASCII; every
    /// type id and argument blob; page size a power of two; the data table ends within the file
    /// and before the allocation table; the allocation table is whole 24-byte entries; and every
    /// entry belongs to a sample, lies inside the data pages and within one page.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::UnsupportedVersion`], [`Error::InterruptedWrite`],
    /// [`Error::UnknownCustomField`] or [`Error::Corrupt`] naming the byte offset.
    pub fn open(path: impl AsRef<Path>) -> Result<Dataset> {
        OpenOptions::new().open(path)
    }

    fn validate(path: PathBuf, bytes: Bytes, options: &OpenOptions) -> Result<Dataset> {
        let data = bytes.as_slice();
        let len = data.len() as u64;
        let corrupt = |offset: u64, what: String| Error::Corrupt { path: path.clone(), offset, what };
        let header = Header::parse(data).ok_or_else(|| {
            corrupt(0, format!("file is {len} bytes, shorter than the {HEADER_SIZE}-byte header"))
        })?;
        if header.version != VERSION {
            return Err(Error::UnsupportedVersion { path, version: header.version, expected: VERSION });
        }
        if header.alloc_table_ptr == 0 {
            return Err(Error::InterruptedWrite { path });
        }
        let table_start = format::data_table_start(header.num_fields);
        if table_start > len {
            return Err(corrupt(
                HEADER_SIZE as u64,
                format!(
                    "header announces {} field descriptors ({} bytes), but the file is {len} bytes",
                    header.num_fields,
                    FIELD_DESC_SIZE * header.num_fields as usize
                ),
            ));
        }

        let mut fields = Vec::with_capacity(header.num_fields as usize);
        for k in 0..header.num_fields as usize {
            let offset = HEADER_SIZE + k * FIELD_DESC_SIZE;
            let desc = FieldDesc::parse(&data[offset..])
                .ok_or_else(|| corrupt(offset as u64, format!("field descriptor {k} is cut short")))?;
            let name_bytes = desc.name_bytes();
            if !name_bytes.is_ascii() {
                return Err(corrupt(
                    offset as u64 + 1,
                    format!("field {k}: name {:?} is not ASCII", String::from_utf8_lossy(name_bytes)),
                ));
            }
            let name = String::from_utf8_lossy(name_bytes).into_owned();
            let ty = FieldType::from_descriptor(
                desc.type_id,
                &desc.arguments,
                options.custom_layouts.get(&name).copied(),
            )
            .map_err(|why| match why {
                None => Error::UnknownCustomField { path: path.clone(), field: name.clone() },
                Some(why) => corrupt(offset as u64, format!("field {k} '{name}': {why}")),
            })?;
            fields.push(Field { name, ty, offset: 0, desc });
        }

        let page_size = header.page_size as u64;
        if !page_size.is_power_of_two() {
            return Err(corrupt(4, format!("page_size {page_size} is not a power of two")));
        }
        let slots: Vec<Slot> = fields.iter().map(|f| f.ty.slot()).collect();
        let layout = RowLayout::new(&slots)
            .ok_or_else(|| corrupt(HEADER_SIZE as u64, "row layout overflows".to_string()))?;
        for (f, &offset) in fields.iter_mut().zip(&layout.offsets) {
            f.offset = offset;
        }
        if layout.size == 0 && header.num_samples > 0 {
            return Err(corrupt(
                8,
                format!(
                    "{} samples with rows of 0 bytes: a file with samples must have fields",
                    header.num_samples
                ),
            ));
        }
        let table_end = header
            .num_samples
            .checked_mul(layout.size as u64)
            .and_then(|n| n.checked_add(table_start))
            .filter(|&end| end <= len)
            .ok_or_else(|| {
                corrupt(
                    table_start,
                    format!(
                        "data table of {} rows × {} bytes from byte {table_start} runs past the end \
                         of the file ({len} bytes)",
                        header.num_samples, layout.size
                    ),
                )
            })?;
        let alloc_start = header.alloc_table_ptr;
        if alloc_start > len {
            return Err(corrupt(
                16,
                format!("alloc_table_ptr {alloc_start} is past the end of the file ({len} bytes)"),
            ));
        }
        if alloc_start < table_end {
            return Err(corrupt(
                16,
                format!(
                    "alloc_table_ptr {alloc_start} points inside the data table, which ends at byte \
                     {table_end}"
                ),
            ));
        }
        let table_bytes = len - alloc_start;
        if table_bytes % ALLOC_ENTRY_SIZE as u64 != 0 {
            return Err(corrupt(
                alloc_start,
                format!(
                    "allocation table ({table_bytes} bytes from byte {alloc_start} to the end) is not \
                     a whole number of {ALLOC_ENTRY_SIZE}-byte entries"
                ),
            ));
        }
        let num_allocations = table_bytes / ALLOC_ENTRY_SIZE as u64;
        let data_start = format::align_to_page(table_end, page_size)
            .ok_or_else(|| corrupt(4, "first page offset overflows".to_string()))?;

        bytes.advise_random(data_start, alloc_start);
        Ok(Dataset {
            path,
            id: None,
            modified: None,
            file: None,
            bytes,
            header,
            fields,
            row_size: layout.size,
            table_start,
            table_end,
            first_page_bound: data_start,
            num_allocations,
            alloc_check: OnceLock::new(),
            index: OnceLock::new(),
            remote: None,
        })
        .and_then(|ds| {
            if !options.defer_allocation_checks {
                ds.alloc_meta()?;
            }
            ds.check_intact()?;
            Ok(ds)
        })
    }
}
