//! Writing `.beton` files: parallel encoding, deterministic layout, atomic publication.
//!
//! Samples are encoded in chunks on a rayon pool (JPEG encoding is the cost), then laid out one
//! by one in sample order, as FFCV does with one worker: each sample's payloads go back to back
//! in the current page, or all together in a fresh page when they do not fit (FFCV's rule: a
//! sample never straddles pages). Because layout is sequential and every random choice is drawn
//! from (seed, sample index), the bytes do not depend on the number of threads. Without a page
//! size, the first samples are held until one is chosen from their payload (`writer/pages.rs`),
//! which depends on the samples alone.
//!
//! The file is written to a temporary file beside the destination, fsynced, then renamed over it
//! (and the directory fsynced), so an error, a panic or a crash never leaves a partial `.beton`
//! at the destination and never harms a file already there.

mod pages;

use std::cell::Cell;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::field::{EncodeContext, FieldType};
use crate::format::{self, AllocEntry, FieldDesc, Header, RowLayout, Slot};
use crate::format::{MAX_PAGE_SIZE, MIN_PAGE_SIZE, NAME_SIZE, VERSION};
use crate::image::{self, ImageOptions};
/// The values a writer takes (their home is [`crate::value`]; also here, where they were).
pub use crate::value::SampleValue;
use pages::{PageWriter, Pending};
pub use pages::{DECIDE_BYTES, MIN_AUTO_PAGE_SIZE};

/// One field of the schema being written: its name, type and (for image fields) options.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSpec {
    /// ASCII name, 1 to 16 bytes, unique.
    pub name: String,
    /// What the field holds.
    pub ty: FieldType,
    /// Encoding options, used by image fields only.
    pub image: ImageOptions,
}

impl FieldSpec {
    /// A field of type `ty` with default image options.
    pub fn new(name: impl Into<String>, ty: FieldType) -> Self {
        FieldSpec { name: name.into(), ty, image: ImageOptions::default() }
    }

    /// An RGB image field (FFCV's RGBImageField) with `options`.
    pub fn rgb_image(name: impl Into<String>, options: ImageOptions) -> Self {
        FieldSpec { name: name.into(), ty: FieldType::RgbImage, image: options }
    }

    /// A single-channel image field (beton extension) with `options`.
    pub fn grey_image(name: impl Into<String>, options: ImageOptions) -> Self {
        FieldSpec { name: name.into(), ty: FieldType::GreyImage, image: options }
    }
}

/// Progress of a write: samples encoded so far, and the total when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Samples encoded and laid out.
    pub done: u64,
    /// All samples, when the source's length is known.
    pub total: Option<u64>,
}

/// A progress callback; returning `false` cancels the write (nothing is published).
pub type ProgressFn = Arc<dyn Fn(Progress) -> bool + Send + Sync>;

/// Writer options; [`WriterOptions::default`] matches FFCV's defaults but for the page size,
/// which it chooses from the payload.
#[derive(Clone)]
pub struct WriterOptions {
    /// Page size, a power of two in [2 MiB, 4 GiB) (FFCV's writer's range), or 0 (the
    /// default): chosen from the payload, so that a small file is not padded to whole 8 MiB
    /// pages. A file of under [`DECIDE_BYTES`] of payload takes the largest power of two from
    /// [`MIN_AUTO_PAGE_SIZE`] to 8 MiB whose file is within 3 % of the smallest any of them
    /// gives; a larger file takes FFCV's 8 MiB (docs/FORMAT.md §5). FFCV 1.0.2 reads both.
    pub page_size: u64,
    /// Encoding threads; 0 uses every core. The output does not depend on it.
    pub num_threads: usize,
    /// Seed of per-sample random choices (the `Proportion` write mode).
    pub seed: u64,
    /// Samples encoded per parallel step (memory holds about two chunks of encoded samples).
    pub chunk_size: usize,
    /// Called after every chunk.
    pub progress: Option<ProgressFn>,
    /// Bytes to leave free between the data table and the first page for named splits
    /// (FORMAT.md §12); pages still start on a page boundary, so the room is at least this.
    /// `None` (the default) leaves 64 KiB + 2 bytes per sample: room for about eight splits
    /// spanning the whole dataset as bitmaps. `Some(0)` gives FFCV's exact layout (the room is
    /// then whatever the page alignment leaves).
    pub splits_reserve: Option<u64>,
    /// Leave out samples whose values cannot be read or encoded (a corrupt or unreadable image
    /// file), listing them in [`WriteReport::skipped`], instead of failing the whole write.
    /// Later samples move up one index each; a failing source callback still fails the write.
    pub skip_bad: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            page_size: 0,
            num_threads: 0,
            seed: 0,
            chunk_size: 256,
            progress: None,
            splits_reserve: None,
            skip_bad: false,
        }
    }
}

impl std::fmt::Debug for WriterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterOptions")
            .field("page_size", &self.page_size)
            .field("num_threads", &self.num_threads)
            .field("seed", &self.seed)
            .field("splits_reserve", &self.splits_reserve)
            .field("chunk_size", &self.chunk_size)
            .field("progress", &self.progress.is_some())
            .field("skip_bad", &self.skip_bad)
            .finish()
    }
}

/// What a finished write produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// The destination.
    pub path: PathBuf,
    /// Samples written.
    pub num_samples: u64,
    /// Data pages written.
    pub num_pages: u64,
    /// The file's page size: the one given, or the one chosen from the payload.
    pub page_size: u64,
    /// Size of the file.
    pub file_len: u64,
    /// Samples left out with [`WriterOptions::skip_bad`]: their index in the source, and why.
    pub skipped: Vec<(u64, String)>,
    /// Images written with transparency flattened: sources with a pixel whose alpha is below
    /// 255 (PNGs with alpha or `tRNS`, RGBA pixels). How: [`WriteReport::alpha_flattening`].
    pub alpha_flattened: u64,
    /// How the image fields flatten transparency (their [`ImageOptions::alpha_background`]):
    /// `"alpha dropped (FFCV's behaviour)"` or `"composited onto (r, g, b)"`, one entry per
    /// image field (`"image: ..."`) when the fields differ; empty without image fields.
    pub alpha_flattening: String,
}

/// A source error type the writer accepts from callbacks and iterators.
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// Writes one `.beton` file.
pub struct Writer {
    path: PathBuf,
    fields: Vec<FieldSpec>,
    layout: RowLayout,
    options: WriterOptions,
    pool: rayon::ThreadPool,
    /// Images whose transparency was flattened, over the samples encoded so far.
    alpha_flattened: AtomicU64,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.path)
            .field("fields", &self.fields)
            .field("options", &self.options)
            .finish()
    }
}

/// Where a write's pages stand: its first samples held until the page size is chosen, or
/// pages being written.
enum Paging {
    Choosing(Pending),
    Writing(PageWriter),
}

/// A sample after encoding: its row (payload pointers still 0) and payloads with the row offset
/// of their pointer.
struct Encoded {
    row: Vec<u8>,
    payloads: Vec<(usize, Vec<u8>)>,
    /// Row offsets of pointers no field type knows of (custom fields' payloads), made
    /// absolute when the file is finished like those the field types name.
    custom_ptrs: Vec<usize>,
}

/// What a write placed before the file is finished: the rows, the pages' allocations and where
/// the pages start.
struct Placed {
    rows: Vec<u8>,
    allocs: Vec<AllocEntry>,
    num_samples: u64,
    num_pages: u64,
    page_size: u64,
    data_start: u64,
    spill: Option<tempfile::NamedTempFile>,
    skipped: Vec<(u64, String)>,
    /// Offsets in `rows` of custom fields' payload pointers (relative to the first page).
    custom_ptrs: Vec<usize>,
}

impl Writer {
    /// Prepares a writer for `path` with `fields` in order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for names that are empty, longer than 16 bytes, not ASCII,
    /// containing NUL or repeated; more than 65535 fields; a page size that is neither 0 nor a
    /// power of two in [2 MiB, 4 GiB); a JPEG quality outside 1–100 or a proportion outside [0, 1].
    pub fn new(path: impl AsRef<Path>, fields: Vec<FieldSpec>, options: WriterOptions) -> Result<Writer> {
        let invalid = |what: &str, why: String| Error::InvalidArgument { what: what.to_string(), why };
        if fields.is_empty() {
            return Err(invalid("schema", "no fields: a dataset needs at least one field".into()));
        }
        if fields.len() > u16::MAX as usize {
            return Err(invalid("schema", format!("{} fields, at most 65535", fields.len())));
        }
        for (k, f) in fields.iter().enumerate() {
            let what = format!("field name {:?}", f.name);
            if f.name.is_empty() || f.name.len() > NAME_SIZE {
                return Err(invalid(
                    &what,
                    format!("must be 1 to {NAME_SIZE} bytes (FFCV truncates longer names)"),
                ));
            }
            if !f.name.is_ascii() || f.name.contains('\0') {
                return Err(invalid(&what, "must be ASCII without NUL".into()));
            }
            if fields[..k].iter().any(|g| g.name == f.name) {
                return Err(invalid(&what, "is used twice".into()));
            }
            if let FieldType::Custom(custom) = &f.ty {
                let slot = custom.slot;
                if ![1, 2, 4, 8].contains(&slot.align) {
                    return Err(invalid(
                        &what,
                        format!("custom slot alignment {} is not 1, 2, 4 or 8", slot.align),
                    ));
                }
            }
            if f.ty.is_image() {
                let option = |name: &str| format!("{name} of field '{}'", f.name);
                let q = f.image.jpeg_quality;
                if !(1..=100).contains(&q) {
                    return Err(invalid(&option("jpeg_quality"), format!("{q} is not in 1..=100")));
                }
                if let image::WriteMode::Proportion { probability } = f.image.write_mode {
                    if !(0.0..=1.0).contains(&probability) {
                        return Err(invalid(
                            &option("proportion"),
                            format!("{probability} is not in [0, 1]"),
                        ));
                    }
                }
                if f.image.max_resolution == Some(0) {
                    return Err(invalid(&option("max_resolution"), "must be at least 1".into()));
                }
            }
        }
        let ps = options.page_size;
        if ps != 0 && (!ps.is_power_of_two() || !(MIN_PAGE_SIZE..MAX_PAGE_SIZE).contains(&ps)) {
            return Err(invalid(
                "page_size",
                format!(
                    "{ps} must be a power of two in [{MIN_PAGE_SIZE}, {MAX_PAGE_SIZE}), or 0 to choose \
                     it from the payload"
                ),
            ));
        }
        let slots: Vec<Slot> = fields.iter().map(|f| f.ty.slot()).collect();
        let layout =
            RowLayout::new(&slots).ok_or_else(|| invalid("schema", "row layout overflows".into()))?;
        if options.num_threads > MAX_THREADS {
            return Err(invalid(
                "num_threads",
                format!("{} is more than the {MAX_THREADS} threads beton runs at once", options.num_threads),
            ));
        }
        let path = destination(path.as_ref())?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.num_threads)
            .thread_name(|i| format!("beton-writer-{i}"))
            .build()
            .map_err(|e| invalid("num_threads", e.to_string()))?;
        Ok(Writer { path, fields, layout, options, pool, alpha_flattened: AtomicU64::new(0) })
    }

    /// Writes `num_samples` samples, sample `i` from `source(i)` (called from the encoding
    /// threads, in any order).
    ///
    /// # Errors
    /// The first error in sample order: [`Error::Source`], [`Error::InvalidSample`],
    /// [`Error::SampleTooLarge`], [`Error::Cancelled`] or [`Error::Io`]. Nothing is left at the
    /// destination then.
    pub fn write_indexed<F>(self, num_samples: u64, source: F) -> Result<WriteReport>
    where
        F: Fn(u64) -> std::result::Result<Vec<SampleValue>, SourceError> + Sync,
    {
        let chunk = self.options.chunk_size.max(1) as u64;
        let starts = (0..num_samples).step_by(chunk as usize);
        let chunks = starts.map(move |first| (first, (first..(first + chunk).min(num_samples)).collect()));
        self.write_chunks(Some(num_samples), chunks, |i: u64| source(i))
    }

    /// Writes the samples of `samples`, in order. Items are pulled on the calling thread and
    /// encoded in parallel a chunk at a time. The pages go to a scratch file next to the
    /// destination until the number of samples (which decides where the first page starts) is
    /// known, unless the iterator's size hint is exact.
    ///
    /// # Errors
    /// As [`Writer::write_indexed`].
    pub fn write_iter<I>(self, samples: I) -> Result<WriteReport>
    where
        I: IntoIterator<Item = std::result::Result<Vec<SampleValue>, SourceError>>,
    {
        let mut it = samples.into_iter();
        let total = match it.size_hint() {
            (lo, Some(hi)) if lo == hi => Some(lo as u64),
            _ => None,
        };
        let chunk = self.options.chunk_size.max(1);
        let mut first = 0u64;
        let chunks = std::iter::from_fn(move || {
            let items: Vec<_> = it.by_ref().take(chunk).collect();
            (!items.is_empty()).then(|| {
                let start = first;
                first += items.len() as u64;
                (start, items)
            })
        });
        self.write_chunks(total, chunks, |item| item)
    }

    /// The write itself: `chunks` gives (index of the first sample, items); `resolve` turns an
    /// item into a sample on the encoding threads.
    fn write_chunks<T, C, R>(self, total: Option<u64>, chunks: C, resolve: R) -> Result<WriteReport>
    where
        T: Send,
        C: Iterator<Item = (u64, Vec<T>)>,
        R: Fn(T) -> std::result::Result<Vec<SampleValue>, SourceError> + Sync,
    {
        let (dir, prefix, temp) = self.temp_file()?;
        let table_start = format::data_table_start(self.fields.len() as u16);
        // With the number of samples known, pages go straight to their place in the file;
        // otherwise to a scratch file, copied over at the end.
        let spill = match total {
            Some(_) => None,
            None => {
                let spill = tempfile::Builder::new()
                    .prefix(&prefix)
                    .suffix(".pages.tmp")
                    .tempfile_in(&dir)
                    .map_err(|e| Error::io(&dir, e))?;
                spill.as_file().lock().map_err(|e| Error::io(spill.path(), e))?;
                Some(spill)
            }
        };
        // Pages of `page_size` bytes, where they go.
        let start_pages = |page_size: u64| -> Result<PageWriter> {
            // (A scratch file, copied over and removed at the end, is not written back early:
            // its pages would go to disk for nothing.)
            let (file, base, write_back) = match (&spill, total) {
                (Some(s), _) => (s.as_file().try_clone(), 0, false),
                (None, n) => {
                    let base = self.data_start(table_start, n.unwrap_or(0), page_size)?;
                    (temp.as_file().try_clone(), base, true)
                }
            };
            let file = file.map_err(|e| Error::io(temp.path(), e))?;
            PageWriter::new(file, base, page_size, temp.path().to_path_buf(), write_back)
        };
        // Without a page size, the first samples are held until it is chosen (pages.rs).
        let mut paging = match self.options.page_size {
            0 => Paging::Choosing(Pending::default()),
            page_size => Paging::Writing(start_pages(page_size)?),
        };

        let mut rows: Vec<u8> = Vec::with_capacity(total.unwrap_or(0) as usize * self.layout.size);
        let mut allocs: Vec<AllocEntry> = Vec::new();
        let mut custom_ptrs: Vec<usize> = Vec::new();
        let mut done = 0u64;
        let mut skipped = Vec::new();
        // Chunk k is encoded on the pool while the calling thread pulls chunk k + 1, then chunk
        // k + 1 is encoded while the calling thread lays out and writes chunk k: the items are
        // pulled in order, one at a time, on one thread (a source that runs user code, such as
        // a Python dataset's `__getitem__`, never runs concurrently with itself), encoding
        // stays parallel, and writing no longer waits for the encoders, nor they for it.
        let mut chunks = chunks.fuse();
        let encode_chunk = |first: u64, items: Vec<T>| -> Vec<Result<Encoded>> {
            self.pool.install(|| {
                items
                    .into_par_iter()
                    .enumerate()
                    .map(|(k, item)| {
                        let index = first + k as u64;
                        let sample = resolve(item).map_err(|source| Error::Source { index, source })?;
                        self.encode(index, sample)
                    })
                    .collect()
            })
        };
        std::thread::scope(|scope| -> Result<()> {
            let mut encoding =
                chunks.next().map(|(first, items)| (first, scope.spawn(move || encode_chunk(first, items))));
            while let Some((first, handle)) = encoding.take() {
                let next = chunks.next();
                let encoded = handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                // (An error below returns while the next chunk encodes: the scope waits for it.)
                encoding =
                    next.map(|(first, items)| (first, scope.spawn(move || encode_chunk(first, items))));
                for (k, e) in encoded.into_iter().enumerate() {
                    let index = first + k as u64;
                    let mut e = match e {
                        Ok(e) => e,
                        Err(e @ (Error::InvalidSample { .. } | Error::Io { .. }))
                            if self.options.skip_bad =>
                        {
                            skipped.push((index, e.to_string()));
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    // Samples after a skipped one move up: the file's sample ids have no gaps.
                    match &mut paging {
                        Paging::Writing(pages) => {
                            let payloads = e.payloads.iter().map(|(at, p)| (*at, p.as_slice()));
                            pages.place(done, payloads, &mut e.row, &mut allocs)?;
                        }
                        Paging::Choosing(pending) => pending.push(std::mem::take(&mut e.payloads)),
                    }
                    custom_ptrs.extend(e.custom_ptrs.iter().map(|p| rows.len() + p));
                    rows.extend_from_slice(&e.row);
                    done += 1;
                    if let Paging::Choosing(pending) = &mut paging {
                        if pending.is_full() {
                            // A large file: FFCV's page size, written as it streams.
                            let page_size = pending.streaming_page_size();
                            let mut pages = start_pages(page_size)?;
                            std::mem::take(pending).write(
                                &mut pages,
                                &mut rows,
                                self.layout.size,
                                &mut allocs,
                            )?;
                            paging = Paging::Writing(pages);
                        }
                    }
                }
                if let Some(progress) = &self.options.progress {
                    if !progress(Progress { done: done + skipped.len() as u64, total }) {
                        return Err(Error::Cancelled { done, path: self.path.clone() });
                    }
                }
            }
            Ok(())
        })?;
        let num_samples = done;
        if let Some(n) = total {
            let given = num_samples + skipped.len() as u64;
            if n != given {
                return Err(Error::InvalidArgument {
                    what: "sample source".into(),
                    why: format!("announced {n} samples but gave {given}"),
                });
            }
        }
        // Where the pages go: for a known count, after the room of all announced samples
        // (skipped ones leave it a little larger than needed: whole zero pages, as FORMAT.md
        // §12 allows).
        let room = total.unwrap_or(num_samples);
        let pages = match paging {
            Paging::Writing(pages) => pages,
            Paging::Choosing(pending) => {
                let page_size = pending.choose(|p| self.data_start(table_start, room, p).ok());
                let mut pages = start_pages(page_size)?;
                pending.write(&mut pages, &mut rows, self.layout.size, &mut allocs)?;
                pages
            }
        };
        let page_size = pages.page_size();
        let num_pages = pages.finish()?;
        let data_start = self.data_start(table_start, room, page_size)?;
        let placed = Placed {
            rows,
            allocs,
            num_samples,
            num_pages,
            page_size,
            data_start,
            spill,
            skipped,
            custom_ptrs,
        };
        self.finish(dir, temp, placed)
    }

    /// Creates the temporary file the write goes to, beside the destination (stale ones of
    /// killed writers removed first): its folder, name prefix and the file, locked.
    fn temp_file(&self) -> Result<(PathBuf, String, tempfile::NamedTempFile)> {
        let (dir, prefix) = crate::temp::prefix(&self.path);
        // Temporary files of writers to this destination that were killed: nobody else will.
        crate::temp::remove_stale_temp_files(&self.path);
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        #[cfg(unix)]
        {
            // A normal file's permissions (0666 less the umask), not a temp file's 0600: the rename
            // publishes this very inode.
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let temp = builder.tempfile_in(&dir).map_err(|e| Error::io(&dir, e))?;
        // Held until this process ends or the file is renamed: it tells later writers that
        // this temporary file is in use (temp.rs).
        temp.as_file().lock().map_err(|e| Error::io(temp.path(), e))?;
        Ok((dir, prefix, temp))
    }

    /// Writes the header, descriptors, rows, split reserve or page gap and allocation table
    /// around the placed pages, fsyncs, and renames the file to its destination.
    fn finish(self, dir: PathBuf, temp: tempfile::NamedTempFile, placed: Placed) -> Result<WriteReport> {
        let Placed {
            mut rows,
            mut allocs,
            num_samples,
            num_pages,
            page_size,
            data_start,
            spill,
            skipped,
            custom_ptrs,
        } = placed;
        let table_start = format::data_table_start(self.fields.len() as u16);

        // Payload pointers were laid out relative to the first page; make them absolute.
        let ptr_offsets: Vec<usize> = self
            .fields
            .iter()
            .zip(&self.layout.offsets)
            .filter_map(|(f, &o)| f.ty.payload_ptr_offset().map(|p| o + p))
            .collect();
        if !ptr_offsets.is_empty() {
            for row in rows.chunks_exact_mut(self.layout.size) {
                for &o in &ptr_offsets {
                    let rel = u64::from_le_bytes(row[o..o + 8].try_into().expect("8 bytes"));
                    row[o..o + 8].copy_from_slice(&(rel + data_start).to_le_bytes());
                }
            }
        }
        for &o in &custom_ptrs {
            let rel = u64::from_le_bytes(rows[o..o + 8].try_into().expect("8 bytes"));
            rows[o..o + 8].copy_from_slice(&(rel + data_start).to_le_bytes());
        }
        for a in &mut allocs {
            a.ptr += data_start;
        }

        let tpath = temp.path().to_path_buf();
        let io = |e| Error::io(&tpath, e);
        let mut out = BufWriter::with_capacity(1 << 20, temp.as_file());
        let alloc_table_ptr = if num_pages == 0 {
            match self.splits_reserve(num_samples) {
                0 => table_start + rows.len() as u64,
                // The split region starts 8-aligned (FORMAT.md §12).
                reserve => (table_start + rows.len() as u64).next_multiple_of(8) + reserve,
            }
        } else {
            data_start + num_pages * page_size
        };
        let header = Header {
            version: VERSION,
            num_fields: self.fields.len() as u16,
            page_size: page_size as u32,
            num_samples,
            alloc_table_ptr,
        };
        out.seek(SeekFrom::Start(0)).map_err(io)?;
        out.write_all(&header.to_bytes()).map_err(io)?;
        for f in &self.fields {
            let mut name = [0u8; NAME_SIZE];
            name[..f.name.len()].copy_from_slice(f.name.as_bytes());
            let desc = FieldDesc { type_id: f.ty.type_id(), name, arguments: f.ty.to_arguments() };
            out.write_all(&desc.to_bytes()).map_err(io)?;
        }
        out.write_all(&rows).map_err(io)?;
        if num_pages == 0 {
            // The split reserve is written, not left as a hole: a full disk fails this write
            // with an error, not a later read of the region with a signal.
            let reserve = alloc_table_ptr - (table_start + rows.len() as u64);
            std::io::copy(&mut std::io::repeat(0).take(reserve), &mut out).map_err(io)?;
        } else {
            // Zero gap up to the first page (its bytes may already be there: pages written in
            // place start at data_start, after this gap).
            let gap = data_start - (table_start + rows.len() as u64);
            std::io::copy(&mut std::io::repeat(0).take(gap), &mut out).map_err(io)?;
            if let Some(spill) = &spill {
                let mut src = spill.reopen().map_err(|e| Error::io(spill.path(), e))?;
                out.flush().map_err(io)?;
                std::io::copy(&mut src, out.get_mut()).map_err(io)?;
            }
        }
        out.seek(SeekFrom::Start(alloc_table_ptr)).map_err(io)?;
        for a in &allocs {
            out.write_all(&a.to_bytes()).map_err(io)?;
        }
        out.flush().map_err(io)?;
        drop(out);
        let file_len = alloc_table_ptr + (allocs.len() * format::ALLOC_ENTRY_SIZE) as u64;
        temp.as_file().set_len(file_len).map_err(io)?;
        temp.as_file().sync_all().map_err(io)?;
        drop(spill);
        temp.persist(&self.path).map_err(|e| Error::io(&self.path, e.error))?;
        #[cfg(unix)]
        if let Ok(d) = File::open(&dir) {
            // Make the rename itself durable.
            let _ = d.sync_all();
        }
        let alpha_flattened = self.alpha_flattened.load(Ordering::Relaxed);
        let alpha_flattening = self.alpha_flattening();
        Ok(WriteReport {
            path: self.path,
            num_samples,
            num_pages,
            page_size,
            file_len,
            skipped,
            alpha_flattened,
            alpha_flattening,
        })
    }

    /// Writes `num_samples` samples of a table-only schema (fields without payloads: int,
    /// float, bool, custom), field `k` of sample `i` being `value(k, i)`, straight into the data
    /// table: no allocation per sample, in parallel, at memory speed (`from_arrow` of a table).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a field with payloads (use [`Writer::write_indexed`]);
    /// the first [`Error::InvalidSample`] in sample order; [`Error::Io`]. Nothing is left at
    /// the destination then.
    pub fn write_fixed<F>(self, num_samples: u64, value: F) -> Result<WriteReport>
    where
        F: Fn(usize, u64) -> SampleValue + Sync,
    {
        if let Some(f) = self.fields.iter().find(|f| f.ty.payload_ptr_offset().is_some()) {
            return Err(Error::InvalidArgument {
                what: format!("field '{}'", f.name),
                why: format!("a {} has payloads; write_fixed writes table-only schemas", f.ty.name()),
            });
        }
        let size = self.layout.size;
        let len = usize::try_from(num_samples).ok().and_then(|n| n.checked_mul(size));
        let mut rows = Vec::new();
        let reserved = len.map(|len| rows.try_reserve_exact(len).map(|()| len));
        let Some(Ok(len)) = reserved else {
            return Err(Error::InvalidArgument {
                what: "sample source".into(),
                why: format!("{num_samples} rows of {size} bytes do not fit in memory"),
            });
        };
        rows.resize(len, 0);
        let (dir, _, temp) = self.temp_file()?;
        // Chunks of `chunk_size` rows in order (progress after each, as write_indexed reports),
        // each filled by the pool in blocks.
        let chunk = self.options.chunk_size.max(1);
        const BLOCK: usize = 4096;
        for (c, rows) in rows.chunks_mut(size * chunk).enumerate() {
            let first = (c * chunk) as u64;
            let results: Vec<Result<()>> = self.pool.install(|| {
                rows.par_chunks_mut(size * BLOCK)
                    .enumerate()
                    .map(|(b, block)| {
                        for (r, row) in block.chunks_exact_mut(size).enumerate() {
                            let index = first + (b * BLOCK + r) as u64;
                            let draw = self.draw(index);
                            let fields = self.fields.iter().zip(&self.layout.offsets).enumerate();
                            for (k, (f, &offset)) in fields {
                                let kind = f.ty.kind();
                                let slot = &mut row[offset..offset + kind.slot().size];
                                let cx = EncodeContext { image: &f.image, draw, alpha_flattened: None };
                                kind.encode(value(k, index), slot, &cx)
                                    .map_err(|e| e.in_sample(index, &f.name))?;
                            }
                        }
                        Ok(())
                    })
                    .collect()
            });
            results.into_iter().collect::<Result<()>>()?;
            if let Some(progress) = &self.options.progress {
                let done = (first + (rows.len() / size) as u64).min(num_samples);
                if !progress(Progress { done, total: Some(num_samples) }) {
                    return Err(Error::Cancelled { done, path: self.path.clone() });
                }
            }
        }
        let table_start = format::data_table_start(self.fields.len() as u16);
        // No pages: a page size chosen from the payload is FFCV's (pages.rs).
        let page_size = match self.options.page_size {
            0 => format::DEFAULT_PAGE_SIZE,
            p => p,
        };
        let data_start = self.data_start(table_start, num_samples, page_size)?;
        let placed = Placed {
            rows,
            allocs: Vec::new(),
            num_samples,
            num_pages: 0,
            page_size,
            data_start,
            spill: None,
            skipped: Vec::new(),
            custom_ptrs: Vec::new(),
        };
        self.finish(dir, temp, placed)
    }

    /// Bytes left for named splits after the data table.
    fn splits_reserve(&self, num_samples: u64) -> u64 {
        self.options.splits_reserve.unwrap_or_else(|| (64 << 10) + 2 * num_samples)
    }

    /// Where the first page of `page_size` bytes starts in a file of `num_samples` rows.
    fn data_start(&self, table_start: u64, num_samples: u64, page_size: u64) -> Result<u64> {
        num_samples
            .checked_mul(self.layout.size as u64)
            .and_then(|t| t.checked_add(table_start))
            .and_then(|t| match self.splits_reserve(num_samples) {
                0 => Some(t),
                reserve => t.checked_next_multiple_of(8)?.checked_add(reserve),
            })
            .and_then(|end| format::align_to_page(end, page_size))
            .ok_or_else(|| Error::InvalidArgument {
                what: "sample source".into(),
                why: format!("{num_samples} samples overflow the file size"),
            })
    }

    /// Encodes sample `index`: row bytes and payloads.
    fn encode(&self, index: u64, sample: Vec<SampleValue>) -> Result<Encoded> {
        if sample.len() != self.fields.len() {
            return Err(Error::InvalidSample {
                index,
                field: self.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "),
                why: format!("has {} values for {} fields", sample.len(), self.fields.len()),
            });
        }
        let mut row = vec![0u8; self.layout.size];
        let mut payloads = Vec::new();
        let mut custom_ptrs = Vec::new();
        // Counted for the report once the whole sample encodes (a skipped sample is not written).
        let flattened = Cell::new(0);
        for ((f, &offset), value) in self.fields.iter().zip(&self.layout.offsets).zip(sample) {
            let kind = f.ty.kind();
            let slot = &mut row[offset..offset + kind.slot().size];
            let (bytes, owned) = match value {
                SampleValue::CustomWithPayloads { slot, payloads } => (slot, payloads),
                value => {
                    let cx = EncodeContext {
                        image: &f.image,
                        draw: self.draw(index),
                        alpha_flattened: Some(&flattened),
                    };
                    if let Some(payload) =
                        kind.encode(value, slot, &cx).map_err(|e| e.in_sample(index, &f.name))?
                    {
                        let ptr_at =
                            offset + f.ty.payload_ptr_offset().expect("payload fields have a pointer");
                        payloads.push((ptr_at, payload));
                    }
                    continue;
                }
            };
            // A custom field's own payloads (FFCV's `malloc`): their pointers sit where its
            // `encode` put them.
            let invalid = |why: String| Error::InvalidSample { index, field: f.name.clone(), why };
            if !matches!(f.ty, FieldType::Custom(_)) {
                return Err(invalid(format!("custom bytes with payloads for a {} field", f.ty.name())));
            }
            let pointers = custom_payload_pointers(&bytes, &owned, slot.len()).map_err(invalid)?;
            custom_ptrs.extend(pointers.into_iter().map(|at| offset + at));
            slot.copy_from_slice(&bytes);
            payloads.extend(owned.into_iter().map(|(at, p)| (offset + at, p)));
        }
        self.alpha_flattened.fetch_add(flattened.get(), Ordering::Relaxed);
        Ok(Encoded { row, payloads, custom_ptrs })
    }

    /// [`WriteReport::alpha_flattening`]: how the image fields flatten transparency.
    fn alpha_flattening(&self) -> String {
        let how = |f: &FieldSpec| match f.image.alpha_background {
            None => "alpha dropped (FFCV's behaviour)".to_string(),
            Some([r, g, b]) => format!("composited onto ({r}, {g}, {b})"),
        };
        let images: Vec<&FieldSpec> = self.fields.iter().filter(|f| f.ty.is_image()).collect();
        match images.split_first() {
            None => String::new(),
            Some((first, rest))
                if rest.iter().all(|f| f.image.alpha_background == first.image.alpha_background) =>
            {
                how(first)
            }
            Some(_) => {
                images.iter().map(|f| format!("{}: {}", f.name, how(f))).collect::<Vec<_>>().join("; ")
            }
        }
    }

    /// A uniform number in [0, 1) for sample `index`, from the seed alone (splitmix64).
    fn draw(&self, index: u64) -> f64 {
        let mut z = self.options.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Checks a custom field's slot and payloads (slot of `size` bytes; each pointer's 8 bytes in
/// it, no two overlapping) and returns the pointers' offsets in the slot.
fn custom_payload_pointers(
    slot: &[u8],
    payloads: &[(usize, Vec<u8>)],
    size: usize,
) -> std::result::Result<Vec<usize>, String> {
    if slot.len() != size {
        return Err(format!("custom value of {} bytes for a {size}-byte slot", slot.len()));
    }
    let mut at: Vec<usize> = payloads.iter().map(|(o, _)| *o).collect();
    if let Some(bad) = at.iter().find(|&&o| o.checked_add(8).is_none_or(|end| end > size)) {
        return Err(format!("a payload pointer at slot offset {bad} does not fit the {size}-byte slot"));
    }
    at.sort_unstable();
    if let Some(w) = at.windows(2).find(|w| w[1] < w[0] + 8) {
        return Err(format!("payload pointers at slot offsets {} and {} overlap", w[0], w[1]));
    }
    Ok(payloads.iter().map(|(o, _)| *o).collect())
}

/// Most threads a writer (or loader) runs at once: a larger count is a mistake (`--workers
/// 100000`), not a wish, and would spawn threads until the system refuses.
pub const MAX_THREADS: usize = 1024;

/// Where a write to `path` lands: the file itself, or, for a symbolic link, the file it points
/// to (a write goes through the link, as `open` does, instead of replacing it). A directory is
/// an error.
fn destination(path: &Path) -> Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&path).map_err(|e| Error::io(&path, e))?;
                path = match path.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(m) if m.is_dir() => {
                return Err(Error::io(
                    &path,
                    std::io::Error::new(
                        std::io::ErrorKind::IsADirectory,
                        "is a directory; give the path of the .beton file to write",
                    ),
                ))
            }
            _ => return Ok(path),
        }
    }
    Err(Error::io(&path, std::io::Error::other("too many levels of symbolic links")))
}
