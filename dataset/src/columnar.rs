//! The columnar copy of a data file's table: the columns a query can read without payload pages
//! (ints, floats, booleans, image mode, width, height and size, payload sizes, custom slots) as
//! one Arrow IPC file beside the data file, `NAME.beton.columns.arrow`, memory-mapped and handed
//! to [`crate::Table`] with no gather and no copy (docs/FORMAT.md §14).
//!
//! A `.beton` data table is row-major (FFCV's layout, which FFCV must keep reading), so a query
//! of three columns of a 10 M-row table would otherwise read every byte of every row. The copy
//! is a cache, never the truth:
//! - it records what it was made from (the data file's length, device, inode, modification
//!   time and a CRC of its header, descriptors, 16 sampled blocks of its data table and the end
//!   of its allocation table); a copy that does not match its data file is ignored and made again;
//! - it is made for data files of at least [`MIN_ROWS`] rows, written to a temporary file and
//!   renamed into place, so a reader sees a whole copy or none: by beton's writers as they
//!   finish where it is cheap beside the write (a data table of at most a tenth of the file:
//!   payloads such as images dominate; [`after_write`]), else on the file's first query (a
//!   table-only file, whose copy would double the bytes written; a file FFCV wrote);
//! - where it cannot be written (a read-only directory) queries gather from the rows as before;
//!   `BETON_COLUMNAR=off` turns the copies off, `BETON_COLUMNAR=always` makes them for any size.
//!
//! Text columns stay in the heap (their bytes are the payloads), and so does `index`, computed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{Field as ArrowField, Schema};
use beton_storage::{Dataset, FileId, MappedFile};

use crate::error::{Error, Result};

mod sliced;

/// What a columnar copy's name adds to its data file's.
pub const SUFFIX: &str = ".columns.arrow";
/// Data files with fewer rows get no copy unless asked ([`ColumnarCopy::build`]): gathering
/// their columns takes well under a millisecond.
pub const MIN_ROWS: u64 = 65_536;
/// Schema metadata key of the copy's layout version.
const FORMAT_KEY: &str = "beton.columnar";
/// Schema metadata key of what the copy was made from.
const SOURCE_KEY: &str = "beton.source";
const FORMAT_VERSION: &str = "1";

/// The columnar copy of the data file at `data_file`.
pub fn path_of(data_file: &Path) -> PathBuf {
    let mut name = data_file.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(SUFFIX);
    data_file.with_file_name(name)
}

/// When copies are made: `BETON_COLUMNAR` = `off` (never, and existing ones are not read),
/// `always` (any size), else from [`MIN_ROWS`] rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Off,
    Auto,
    Always,
}

fn policy() -> Policy {
    match std::env::var("BETON_COLUMNAR").as_deref().map(str::to_ascii_lowercase).as_deref() {
        Ok("off" | "0" | "no" | "false") => Policy::Off,
        Ok("always") => Policy::Always,
        _ => Policy::Auto,
    }
}

/// The columnar copy of `ds`, opened, or made when worth it; `None` when there is none to use
/// (turned off, too small, a data file in memory, or one that cannot be written).
pub fn for_dataset(ds: &Dataset) -> Option<Arc<ColumnarCopy>> {
    open_or_make(ds, MIN_ROWS, Sampled::Yes)
}

/// The columnar copy of `ds`, a data file of a dataset directory, opened or made whatever its
/// size: a version of 2,000 data files of 50,000 rows is queried as fast as one of 100 M rows
/// only when each has its copy, and its table holds them for its life (VersionView). Such a
/// data file is written once under a name of its own and never rewritten in place (its
/// directory's splits and class names live in manifests), so its copy is matched by the file's
/// identity alone (device, inode, length, modification time), without sampling its bytes: a
/// new process's first query of 2,000 data files reads no 2,000 x 70 KiB of them for that.
pub fn for_data_file(ds: &Dataset) -> Option<Arc<ColumnarCopy>> {
    open_or_make(ds, 0, Sampled::No)
}

/// Whether a copy is matched to its data file by a CRC of samples of its bytes too, or by the
/// file's identity alone ([`for_data_file`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sampled {
    Yes,
    No,
}

/// Makes the copies of the data files at `paths` that lack one (in parallel), as a write that
/// added them to a dataset directory finishes, so that the first query after it reads copies
/// like every later one (unless `BETON_COLUMNAR=off`). A copy that cannot be written is not an
/// error of the write: queries gather from the rows instead.
pub fn beside_new_data_files(paths: &[PathBuf]) {
    use rayon::prelude::*;
    if policy() == Policy::Off {
        return;
    }
    paths.par_iter().for_each(|path| {
        if let Ok(ds) = Dataset::open(path) {
            // A data file just added under a name of its own has no killed maker's temporary
            // copy to remove: no listing of a directory of 10,000 data files per copy.
            if ColumnarCopy::open(&ds).is_none() {
                let _ = ColumnarCopy::build_with(&ds, false);
            }
        }
    });
}

/// What a group copy's name ends with: `data/NAME.group.columns.arrow` holds the columns of
/// every data file one commit added (docs/FORMAT.md §14).
pub const GROUP_SUFFIX: &str = ".group.columns.arrow";
/// Schema metadata key of a group copy's members, in row order.
const GROUP_KEY: &str = "beton.group";
/// Data files gathered at once while a group copy is written (in parallel; their columns are
/// written in order and dropped, so the write holds a few data files' columns, not all).
const GROUP_CHUNK: usize = 16;

/// One data file of a group copy: its file name, its rows, and what it was when the copy was
/// made (matched by identity alone, as a directory's data files are: [`for_data_file`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Member {
    file: String,
    rows: u64,
    stamp: Stamp,
}

/// Makes **one** columnar copy for the data files at `paths` (in order, all in one directory:
/// the data files one commit adds to a dataset directory), `NAME.group.columns.arrow` beside
/// them: one Arrow IPC file of one record batch, each data file a run of its rows ([`sliced`]).
/// A new process's first query of a version of 2,000 data files then opens and maps one copy
/// instead of 2,000 (each open and map cost 40-80 µs on the VM these figures come from), and
/// decodes and reads ahead each column it reads once. Returns the copy's file name; `None`
/// when there is nothing to group (fewer than two files, copies turned off) or the copy cannot
/// be made (a data file that does not open, data files whose copies would hold different
/// columns, a directory that cannot take it): the caller then makes a copy per data file.
pub fn group_beside_new_data_files(paths: &[PathBuf]) -> Option<String> {
    use rayon::prelude::*;
    if policy() == Policy::Off || paths.len() < 2 {
        return None;
    }
    let dir = paths[0].parent()?;
    if paths.iter().any(|p| p.parent() != Some(dir)) {
        return None;
    }
    let opened: Vec<Dataset> =
        paths.par_iter().map(Dataset::open).collect::<beton_storage::Result<_>>().ok()?;
    let members = opened
        .iter()
        .map(|ds| {
            let file = ds.path().file_name()?.to_str()?.to_string();
            Some(Member { file, rows: ds.num_samples(), stamp: Stamp::of(ds, Sampled::No)? })
        })
        .collect::<Option<Vec<_>>>()?;
    let name = format!("{}{GROUP_SUFFIX}", crate::store::unique_name());
    let path = dir.join(&name);
    let written = write_group(&path, &opened, &members);
    match written {
        Ok(true) => Some(name),
        _ => None,
    }
}

/// Writes the group copy of `opened` at `path`: one record batch, each member a run of its
/// rows ([`sliced`]); `Ok(false)` (nothing written) when the data files' copies would not hold
/// the same columns, or none, or columns that layout does not hold.
fn write_group(path: &Path, opened: &[Dataset], members: &[Member]) -> Result<bool> {
    use rayon::prelude::*;
    let metadata: std::collections::HashMap<_, _> = [
        (FORMAT_KEY.to_string(), FORMAT_VERSION.to_string()),
        (GROUP_KEY.to_string(), serde_json::to_string(members).unwrap_or_default()),
    ]
    .into_iter()
    .collect();
    let mut chunks = opened.chunks(GROUP_CHUNK);
    let mut gather = move || -> Result<std::collections::VecDeque<Vec<(String, ArrayRef)>>> {
        let chunk = chunks.next().unwrap_or_default();
        Ok(chunk.par_iter().map(crate::gather::copy_columns).collect::<Result<Vec<_>>>()?.into())
    };
    let mut pending = gather()?;
    let Some(first) = pending.front() else { return Ok(false) };
    let fields: Vec<ArrowField> =
        first.iter().map(|(n, a)| ArrowField::new(n, a.data_type().clone(), false)).collect();
    if fields.is_empty() {
        return Ok(false);
    }
    let schema = Schema::new(fields).with_metadata(metadata);
    let rows: Vec<u64> = opened.iter().map(Dataset::num_samples).collect();
    write_copy_file(path, |file| {
        sliced::write(path, file, &schema, &rows, || {
            if pending.is_empty() {
                pending = gather()?;
            }
            let Some(columns) = pending.pop_front() else { return Ok(None) };
            let same =
                columns.iter().map(|(n, _)| n.as_str()).eq(schema.fields().iter().map(|f| f.name().as_str()));
            Ok(same.then(|| columns.into_iter().map(|(_, a)| a).collect()))
        })
    })
}

/// Writes a copy at `path` with `write`, which writes the whole file it is handed (`Ok(false)`:
/// nothing to keep): a locked temporary file beside `path` (named as writers name theirs, so
/// one killed half-way is cleaned up like theirs), synced, and renamed into place. `Ok(false)`
/// (nothing at `path`, nothing left behind) when `write` gives false.
fn write_copy_file(path: &Path, write: impl FnOnce(&std::fs::File) -> Result<bool>) -> Result<bool> {
    let io = |e: std::io::Error| crate::versioned::commit::io(path, e);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // The temporary file first: a directory that cannot take it fails before any gather.
    let temp =
        tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".tmp").tempfile_in(dir).map_err(io)?;
    temp.as_file().lock().map_err(io)?;
    if !write(temp.as_file())? {
        return Ok(false);
    }
    // Durable before it is visible (and before a manifest names it): a copy torn by a crash
    // would be read as data.
    temp.as_file().sync_all().map_err(io)?;
    temp.persist(path).map_err(|e| io(e.error))?;
    Ok(true)
}

/// Writes in whole chunks of [`ChunkedWriter::CHUNK`] bytes at offsets that are multiples of
/// it (the last one shorter). Copies are written this way so that the page cache holds them in
/// large folios: mapping 1 GiB of a file written in 8 MiB writes took 1 ms on the VM these
/// figures come from, against 104 ms written in 1 MiB writes and 196 ms in 64 KiB ones (one
/// page-table entry at a time), and a copy's first query in a new process maps every page of
/// the columns it reads.
struct ChunkedWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> ChunkedWriter<W> {
    const CHUNK: usize = 8 << 20;

    fn new(inner: W) -> Self {
        ChunkedWriter { inner, buf: Vec::new() }
    }
}

impl<W: Write> Write for ChunkedWriter<W> {
    fn write(&mut self, mut data: &[u8]) -> std::io::Result<usize> {
        let n = data.len();
        if self.buf.is_empty() {
            // Whole chunks straight from the caller's bytes.
            let whole = data.len() / Self::CHUNK * Self::CHUNK;
            self.inner.write_all(&data[..whole])?;
            data = &data[whole..];
        }
        while !data.is_empty() {
            let take = data.len().min(Self::CHUNK - self.buf.len());
            if self.buf.capacity() == 0 {
                self.buf.reserve_exact(Self::CHUNK);
            }
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() == Self::CHUNK {
                self.inner.write_all(&self.buf)?;
                self.buf.clear();
                let whole = data.len() / Self::CHUNK * Self::CHUNK;
                self.inner.write_all(&data[..whole])?;
                data = &data[whole..];
            }
        }
        Ok(n)
    }

    /// Writes what is held (a chunk shorter than the others: call once, at the end).
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.write_all(&self.buf)?;
        self.buf.clear();
        self.inner.flush()
    }
}

/// A group copy, mapped ([`group_beside_new_data_files`]): its members' copies read the one
/// map in place.
#[derive(Debug)]
pub struct GroupCopy {
    path: PathBuf,
    map: Arc<MappedFile>,
    members: Vec<(Member, GroupPart)>,
    by_file: std::collections::HashMap<String, usize>,
}

/// Where a group member's columns are.
#[derive(Debug)]
enum GroupPart {
    /// Rows `start..start + rows` of the group's one record batch (shared by every member).
    Rows(Arc<CopyBatch>, usize),
    /// A record batch of its own (group copies written before they were one batch).
    Batch(Arc<CopyBatch>),
}

impl GroupCopy {
    /// The group copy at `path`; `None` when copies are off, or it is missing or not a group
    /// copy beton can read (its members then make copies of their own on their first query).
    pub fn open(path: &Path) -> Option<GroupCopy> {
        if policy() == Policy::Off {
            return None;
        }
        let map = Arc::new(MappedFile::open(path).ok()?);
        let (schema, batches) = ipc_batches(&map).ok()?;
        let meta = schema.metadata();
        if meta.get(FORMAT_KEY).map(String::as_str) != Some(FORMAT_VERSION) {
            return None;
        }
        let members: Vec<Member> = serde_json::from_str(meta.get(GROUP_KEY)?).ok()?;
        let parts: Vec<GroupPart> = if batches.len() == members.len() {
            // One batch per member (a group of one member is both layouts).
            let mut parts = Vec::with_capacity(batches.len());
            for (m, b) in members.iter().zip(batches) {
                if b.decode(Vec::new())?.num_rows() as u64 != m.rows {
                    return None;
                }
                parts.push(GroupPart::Batch(Arc::new(CopyBatch::new(b))));
            }
            parts
        } else {
            let [batch] = <[Batch; 1]>::try_from(batches).ok()?;
            let total = members.iter().try_fold(0u64, |n, m| n.checked_add(m.rows))?;
            if batch.decode(Vec::new())?.num_rows() as u64 != total {
                return None;
            }
            let shared = Arc::new(CopyBatch::new(batch));
            let mut start = 0;
            members
                .iter()
                .map(|m| {
                    let part = GroupPart::Rows(Arc::clone(&shared), start);
                    start += m.rows as usize;
                    part
                })
                .collect()
        };
        if map.is_damaged() {
            return None;
        }
        let by_file = members.iter().enumerate().map(|(k, m)| (m.file.clone(), k)).collect();
        let members = members.into_iter().zip(parts).collect();
        Some(GroupCopy { path: path.to_path_buf(), map, members, by_file })
    }

    /// The copy of data file `ds` in the group, if the group holds one made from this very file
    /// (same name, identity and rows); `None` otherwise.
    pub fn member(&self, ds: &Dataset) -> Option<Arc<ColumnarCopy>> {
        let name = ds.path().file_name()?.to_str()?;
        let (member, part) = &self.members[*self.by_file.get(name)?];
        if member.rows != ds.num_samples() || !member.stamp.admits(&Stamp::of(ds, Sampled::No)?) {
            return None;
        }
        let (batch, rows) = match part {
            GroupPart::Rows(batch, start) => (batch, Some((*start, member.rows as usize))),
            GroupPart::Batch(batch) => (batch, None),
        };
        if lacks_vectors(ds, &batch.batch) {
            return None;
        }
        Some(Arc::new(ColumnarCopy {
            path: self.path.clone(),
            map: Arc::clone(&self.map),
            batch: Arc::clone(batch),
            rows,
            ahead: Default::default(),
        }))
    }
}

/// Whether a copy's batch lacks a vector column `ds` has: a copy made before vector columns
/// were held (a 1-D array field's column was its size) is made again, once, so that its
/// vectors are read in place too.
fn lacks_vectors(ds: &Dataset, batch: &Batch) -> bool {
    let mut vectors = ds.fields().iter().filter(|f| {
        f.field_type()
            .kind()
            .columns()
            .iter()
            .any(|c| matches!(c.source, beton_storage::field::ColumnSource::Vector(..)))
    });
    vectors.any(|f| batch.schema.index_of(f.name()).is_err())
}

fn open_or_make(ds: &Dataset, min_rows: u64, sampled: Sampled) -> Option<Arc<ColumnarCopy>> {
    let policy = policy();
    if policy == Policy::Off || ds.file_id().is_none() {
        return None;
    }
    let stamp = Stamp::of(ds, sampled)?;
    if let Some(copy) = recent::find(ds.path(), &stamp) {
        return Some(copy);
    }
    // What the path held before it was mapped: a copy replaced in between is then seen as
    // changed on the next query, never the other way round.
    let before = recent::identity(&path_of(ds.path()));
    let (copy, identity) = match ColumnarCopy::open_stamped(ds, &stamp) {
        Some(copy) => (copy, before),
        None if policy == Policy::Auto && ds.num_samples() < min_rows => return None,
        // Made from this data file: a copy renamed over it meanwhile holds the same columns.
        None => (ColumnarCopy::build(ds).ok()?, recent::identity(&path_of(ds.path()))),
    };
    let copy = Arc::new(copy);
    if let Some(identity) = identity {
        recent::keep(&copy, stamp, identity);
    }
    Some(copy)
}

/// Unmaps the copies kept for the next query ([`for_dataset`] keeps the last few opened): for
/// measurements of a first query, and for a process that wants their maps gone now (a copy
/// deleted while kept holds its disk space until it leaves). Tables in use keep theirs.
pub fn forget_open_copies() {
    recent::forget();
}

/// Copies opened recently, kept mapped for the next query of the same file. A query's table
/// opens its data file's copy; mapping it again for every query (and populating its pages, and
/// unmapping them after, with the TLB shootdowns that costs) took longer than the WHERE itself
/// on a 1 M-row table from Python. An entry is used only while the data file's stamp is the one
/// the copy was opened against and the copy's path still holds the file mapped (same device,
/// inode, length and modification time); anything else opens it again.
mod recent {
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use super::{path_of, ColumnarCopy, Stamp};

    /// Copies kept (the least recently used goes first). Each keeps a map of its file: a
    /// deleted copy's disk space is freed when it leaves.
    pub(super) const KEPT: usize = 8;

    struct Entry {
        stamp: Stamp,
        identity: Identity,
        copy: Arc<ColumnarCopy>,
    }

    /// What the copy's path holds: device, inode, length, modification time.
    pub(super) type Identity = (u64, u64, u64, i128);

    static KEEP: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

    /// The identity of the file at `path`, if there is one.
    pub(super) fn identity(path: &Path) -> Option<Identity> {
        super::identity_of(&std::fs::metadata(path).ok()?)
    }

    /// The kept copy of the data file at `data_file` with stamp `stamp`, if it is still the
    /// file at the copy's path; entries for that path that are not are dropped.
    pub(super) fn find(data_file: &Path, stamp: &Stamp) -> Option<Arc<ColumnarCopy>> {
        let path = path_of(data_file);
        let mut kept = KEEP.lock().unwrap_or_else(|p| p.into_inner());
        if !kept.iter().any(|e| e.copy.path() == path) {
            return None;
        }
        let now = identity(&path);
        kept.retain(|e| e.copy.path() != path || (Some(e.identity) == now && !e.copy.map.is_damaged()));
        let at = kept.iter().position(|e| e.copy.path() == path && e.stamp.admits(stamp))?;
        let entry = kept.remove(at);
        let copy = Arc::clone(&entry.copy);
        kept.push(entry);
        Some(copy)
    }

    /// Drops every kept copy.
    pub(super) fn forget() {
        KEEP.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Keeps `copy`, opened against the data file's `stamp` from the file `identity`.
    pub(super) fn keep(copy: &Arc<ColumnarCopy>, stamp: Stamp, identity: Identity) {
        let mut kept = KEEP.lock().unwrap_or_else(|p| p.into_inner());
        kept.retain(|e| e.copy.path() != copy.path());
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push(Entry { stamp, identity, copy: Arc::clone(copy) });
    }
}

/// Makes the copy of `ds` after a write when worth it and cheap beside the write: from
/// [`MIN_ROWS`] rows, and when the data table is at most a tenth of the file
/// ([`cheap_beside_the_write`]); `BETON_COLUMNAR=always` makes it for any file. Otherwise the
/// first query of the file makes it. A copy that cannot be written is not an error of the
/// write: queries gather from the rows instead.
pub fn after_write(path: &Path) {
    let policy = policy();
    if policy == Policy::Off {
        return;
    }
    if let Ok(ds) = Dataset::open(path) {
        let wanted =
            policy == Policy::Always || (ds.num_samples() >= MIN_ROWS && cheap_beside_the_write(&ds));
        if wanted {
            make_unless_valid(&ds);
        }
    }
}

/// Makes the copy of `ds` unless a valid one is there; one that cannot be written is no error
/// (queries gather from the rows instead).
fn make_unless_valid(ds: &Dataset) {
    if ColumnarCopy::open(ds).is_none() {
        let _ = ColumnarCopy::build(ds);
    }
}

/// Whether a copy of `ds` costs little beside writing it: its data table (which bounds the
/// copy's bytes, give or take a column's offsets) is at most a tenth of the file. Files of
/// images or other payloads qualify; for a table-only file the copy would double the bytes
/// written and synced (measured 1.3-2.5x the write of 1 M rows of numbers), so it waits for
/// the first query.
fn cheap_beside_the_write(ds: &Dataset) -> bool {
    let table = ds.data_table_end().saturating_sub(ds.data_table_offset());
    table.saturating_mul(10) <= ds.file_len()
}

/// Makes the copy of the data file at `path` again after beton rewrote part of it in place
/// (splits, class names), if it had one: the rewrite changed its modification time, which the
/// copy's stamp holds.
pub fn refresh(path: &Path) {
    if policy() != Policy::Off && path_of(path).exists() {
        if let Ok(ds) = Dataset::open(path) {
            let _ = ColumnarCopy::build(&ds);
        }
    }
}

/// What the file a [`Dataset`] maps holds now, as far as a cache of its values must know: its
/// identity (device, inode, length, modification time) and a CRC of samples of its bytes, as
/// columnar copies are matched. Two states of one open file differ when it was written in place
/// meanwhile (named splits saved into it, another program's rewrite).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState(Stamp);

impl FileState {
    /// The state of the file `ds` maps; `None` when its path holds another file now, or it has
    /// none (in memory, remote).
    pub fn of(ds: &Dataset) -> Option<FileState> {
        ds.file_id()?;
        Stamp::of(ds, Sampled::Yes).map(FileState)
    }
}

/// What a copy was made from: the data file's identity and a CRC of samples of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Stamp {
    len: u64,
    device: u64,
    inode: u64,
    mtime_ns: i128,
    /// The CRC of samples of its bytes; `None` in a stamp taken without them (never stored).
    crc: Option<u32>,
}

impl Stamp {
    /// The stamp of the file `ds` opened (with the CRC of samples of its bytes, unless
    /// `Sampled::No`); `None` when its path holds another file now.
    fn of(ds: &Dataset, sampled: Sampled) -> Option<Stamp> {
        if sampled == Sampled::No {
            // A directory's data file, never rewritten: what the handle saw when it opened the
            // file, with no system call (2,000 of them open at a version's first query).
            let (id, modified) = (ds.file_id()?, ds.modified()?);
            let mtime_ns = modified.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
            return Some(Stamp {
                len: ds.file_len(),
                device: id.device(),
                inode: id.inode(),
                mtime_ns,
                crc: None,
            });
        }
        let file = std::fs::File::open(ds.path()).ok()?;
        if Some(FileId::of_file(ds.path(), &file).ok()?) != ds.file_id() {
            return None;
        }
        let (device, inode, _, mtime_ns) = identity_of(&file.metadata().ok()?)?;
        let crc = (sampled == Sampled::Yes).then(|| sample_crc(ds));
        Some(Stamp { len: ds.file_len(), device, inode, mtime_ns, crc })
    }

    /// Whether a copy made from (or opened against) this stamp is of the file `now` was taken
    /// of: the same identity, and the same samples when both have them.
    fn admits(&self, now: &Stamp) -> bool {
        let same_file = (self.len, self.device, self.inode, self.mtime_ns)
            == (now.len, now.device, now.inode, now.mtime_ns);
        same_file
            && match (self.crc, now.crc) {
                (Some(a), Some(b)) => a == b,
                // A copy without samples is never stored: one opened against identity alone
                // serves only lookups by identity alone.
                (None, Some(_)) => false,
                (_, None) => true,
            }
    }
}

/// A file's device, inode, length and modification time (ns since the epoch; 0 before it).
fn identity_of(meta: &std::fs::Metadata) -> Option<(u64, u64, u64, i128)> {
    #[cfg(unix)]
    let (device, inode) = {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    };
    #[cfg(not(unix))]
    let (device, inode) = (0, 0);
    let mtime =
        meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
    Some((device, inode, meta.len(), mtime))
}

/// CRC-32 of the header and field descriptors, 16 blocks of 4 KiB spread over the data table
/// (all of it when smaller), and the allocation table's last 4 KiB.
fn sample_crc(ds: &Dataset) -> u32 {
    const BLOCK: usize = 4096;
    const BLOCKS: usize = 16;
    let bytes = ds.file_bytes();
    let (start, end) = (ds.data_table_offset() as usize, ds.data_table_end() as usize);
    let mut crc = crc32fast::Hasher::new();
    crc.update(bytes.get(..start).unwrap_or_default());
    let table = bytes.get(start..end).unwrap_or_default();
    if table.len() <= BLOCK * BLOCKS {
        crc.update(table);
    } else {
        let stride = (table.len() - BLOCK) / (BLOCKS - 1);
        for k in 0..BLOCKS {
            crc.update(&table[k * stride..k * stride + BLOCK]);
        }
    }
    // The allocation table's end (not the split region before it, which beton rewrites in
    // place; the modification time covers that).
    let alloc = (ds.header().alloc_table_ptr as usize).min(bytes.len());
    crc.update(&bytes[alloc.max(bytes.len().saturating_sub(BLOCK))..]);
    crc.finalize()
}

/// The columnar copy of one data file, mapped: its columns read the file in place, each decoded
/// on first use (a query of two columns touches those two columns' pages and no others).
#[derive(Debug)]
pub struct ColumnarCopy {
    path: PathBuf,
    map: Arc<MappedFile>,
    batch: Arc<CopyBatch>,
    /// The batch's rows that are this data file's (`start`, `len`) in a group copy of one
    /// batch; `None`: all of them.
    rows: Option<(usize, usize)>,
    /// The columns whose rows of this data file were read ahead ([`ColumnarCopy::column`]).
    ahead: std::sync::Mutex<std::collections::BTreeSet<usize>>,
}

/// Where a copy's record batch lies, and how to decode it.
#[derive(Debug, Clone)]
struct Batch {
    schema: Arc<Schema>,
    version: arrow_ipc::MetadataVersion,
    block: arrow_ipc::Block,
    data: arrow_buffer::Buffer,
}

impl Batch {
    /// The columns `projection` of the batch (none: just its row count), with aligned buffers
    /// only (nothing copied).
    fn decode(&self, projection: Vec<usize>) -> Option<RecordBatch> {
        let decoder = arrow_ipc::reader::FileDecoder::new(self.schema.clone(), self.version)
            .with_require_alignment(true)
            .with_projection(projection);
        Self::run(decoder, &self.block, &self.data)
    }

    /// Every column of the batch; buffers that are not aligned are copied.
    fn decode_all(&self) -> Option<RecordBatch> {
        let decoder = arrow_ipc::reader::FileDecoder::new(self.schema.clone(), self.version);
        Self::run(decoder, &self.block, &self.data)
    }

    fn run(
        decoder: arrow_ipc::reader::FileDecoder,
        block: &arrow_ipc::Block,
        data: &arrow_buffer::Buffer,
    ) -> Option<RecordBatch> {
        // A damaged or foreign file must not take the process down: decoding checks what it
        // reads, and a panic in the decoder (a bug there) counts as a copy that cannot be read.
        // Unwind-safe in effect: the decoder is dropped with the panic, and the block and
        // buffer it reads are immutable.
        let read = std::panic::AssertUnwindSafe(|| decoder.read_record_batch(block, data));
        std::panic::catch_unwind(read).ok()?.ok().flatten()
    }
}

/// A copy's record batch and its columns decoded so far (shared by the members of a group
/// copy of one batch: each column is decoded once for all of them; `None`: it cannot be).
#[derive(Debug)]
struct CopyBatch {
    batch: Batch,
    decoded: std::sync::Mutex<BTreeMap<usize, Option<ArrayRef>>>,
}

impl CopyBatch {
    fn new(batch: Batch) -> CopyBatch {
        CopyBatch { batch, decoded: Default::default() }
    }

    /// Column `k` of the whole batch, decoded on first use (a few microseconds: the arrays
    /// read the map in place), and whether this call decoded it.
    fn column(&self, k: usize) -> Option<(ArrayRef, bool)> {
        let mut decoded = self.decoded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(done) = decoded.get(&k) {
            return done.clone().map(|a| (a, false));
        }
        let array = self.batch.decode(vec![k]).map(|b| b.column(0).clone());
        decoded.insert(k, array.clone());
        array.map(|a| (a, true))
    }

    /// Column `k` cannot be read (the copy shrank under its map): the row gather gives it.
    fn lost(&self, k: usize) {
        self.decoded.lock().unwrap_or_else(|p| p.into_inner()).insert(k, None);
    }
}

/// Reads from disk ahead of the scan that follows and maps the pages (a no-op when cached and
/// mapped) of `data`'s buffers, children (a vector column's values) included; of rows
/// `start..start + len` of its `total` only, when given (every buffer a copy holds is as long
/// as its rows: values, packed bits, offsets). False when the copy shrank under its map.
fn read_ahead(map: &MappedFile, data: &arrow_data::ArrayData, rows: Option<(usize, usize, usize)>) -> bool {
    let mut pending = vec![data.clone()];
    while let Some(data) = pending.pop() {
        for buffer in data.buffers().iter().chain(data.nulls().map(|n| n.buffer())) {
            let bytes = buffer.as_slice();
            let bytes = match rows {
                Some((start, len, total)) if total > 0 => {
                    let n = bytes.len() as u128;
                    let from = (n * start as u128 / total as u128) as usize;
                    let to = (n * (start + len) as u128).div_ceil(total as u128) as usize;
                    &bytes[from.min(bytes.len())..to.min(bytes.len())]
                }
                _ => bytes,
            };
            if !map.will_need(bytes) {
                return false;
            }
        }
        pending.extend(data.child_data().iter().cloned());
    }
    true
}

impl ColumnarCopy {
    /// The copy of `ds` beside it, if there is one made from this very file; `None` when
    /// missing, made from another file or another version of it, or unreadable (it is made
    /// again).
    pub fn open(ds: &Dataset) -> Option<ColumnarCopy> {
        ColumnarCopy::open_stamped(ds, &Stamp::of(ds, Sampled::Yes)?)
    }

    /// [`ColumnarCopy::open`] against the stamp of `ds` already taken.
    fn open_stamped(ds: &Dataset, stamp: &Stamp) -> Option<ColumnarCopy> {
        let path = path_of(ds.path());
        let map = Arc::new(MappedFile::open(&path).ok()?);
        let batch = locate(&map, stamp)?;
        if lacks_vectors(ds, &batch) {
            return None;
        }
        let rows = batch.decode(Vec::new())?.num_rows();
        if map.is_damaged() || rows as u64 != ds.num_samples() {
            return None;
        }
        Some(ColumnarCopy {
            path,
            map,
            batch: Arc::new(CopyBatch::new(batch)),
            rows: None,
            ahead: Default::default(),
        })
    }

    /// Makes the copy of `ds` from its rows (replacing any copy there) and opens it.
    ///
    /// # Errors
    /// I/O errors writing it (naming the path), storage errors reading the rows.
    pub fn build(ds: &Dataset) -> Result<ColumnarCopy> {
        ColumnarCopy::build_with(ds, true)
    }

    /// [`ColumnarCopy::build`], removing the temporary copies killed makers left beside it first
    /// when `clean` (a listing of the data file's directory).
    fn build_with(ds: &Dataset, clean: bool) -> Result<ColumnarCopy> {
        let path = path_of(ds.path());
        let stamp = Stamp::of(ds, Sampled::Yes).ok_or_else(|| Error::InvalidArgument {
            what: format!("columnar copy of {}", ds.path().display()),
            why: "the data file is not the one open any more".into(),
        })?;
        // Copies whose maker was killed half-way (their lock is gone): nobody else removes them.
        let stale = if clean { beton_storage::stale_temp_files(&path) } else { Vec::new() };
        for stale in stale {
            let _ = std::fs::remove_file(stale);
        }
        write_copy_file(&path, |file| {
            let mut fields = Vec::new();
            let mut arrays = Vec::new();
            for (name, array) in crate::gather::copy_columns(ds)? {
                fields.push(ArrowField::new(name, array.data_type().clone(), false));
                arrays.push(array);
            }
            let metadata = [
                (FORMAT_KEY.to_string(), FORMAT_VERSION.to_string()),
                (SOURCE_KEY.to_string(), serde_json::to_string(&stamp).unwrap_or_default()),
            ];
            let schema = Arc::new(
                Schema::new(fields)
                    .with_metadata(metadata.into_iter().collect::<std::collections::HashMap<_, _>>()),
            );
            let batch = RecordBatch::try_new_with_options(
                schema,
                arrays,
                &arrow_array::RecordBatchOptions::new().with_row_count(Some(ds.num_samples() as usize)),
            )?;
            // Written in whole chunks ([`ChunkedWriter`]).
            let mut w = arrow_ipc::writer::FileWriter::try_new(ChunkedWriter::new(file), &batch.schema())?;
            w.write(&batch)?;
            w.finish()?;
            w.into_inner()?.flush().map_err(|e| crate::versioned::commit::io(&path, e))?;
            Ok(true)
        })?;
        ColumnarCopy::open_stamped(ds, &stamp).ok_or_else(|| Error::InvalidArgument {
            what: format!("columnar copy {}", path.display()),
            why: "the copy just written does not read back".into(),
        })
    }

    /// The copy's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Column `name`, if the copy holds it (decoded and read ahead on first use; `None` too for
    /// a column that cannot be decoded, which the row gather then gives).
    pub fn column(&self, name: &str) -> Option<ArrayRef> {
        let k = self.batch.batch.schema.index_of(name).ok()?;
        let (array, decoded) = self.batch.column(k)?;
        // A data file's own copy reads its column ahead once; a group member its own rows of
        // it, once (each member on its own core: 2,000 of them at a version's first query).
        let ahead = match self.rows {
            None => !decoded || read_ahead(&self.map, &array.to_data(), None),
            Some((start, len)) => {
                let first = self.ahead.lock().unwrap_or_else(|p| p.into_inner()).insert(k);
                !first || read_ahead(&self.map, &array.to_data(), Some((start, len, array.len())))
            }
        };
        if !ahead {
            self.batch.lost(k);
            return None;
        }
        Some(match self.rows {
            Some((start, len)) => array.slice(start, len),
            None => array,
        })
    }

    /// The bytes of column `name` in the copy (what reading it reads), if the copy holds it.
    pub fn column_bytes(&self, name: &str) -> Option<u64> {
        fn bytes(data: &arrow_data::ArrayData) -> u64 {
            data.buffers().iter().map(|b| b.len() as u64).sum::<u64>()
                + data.child_data().iter().map(bytes).sum::<u64>()
        }
        self.column(name).map(|a| bytes(&a.to_data()))
    }

    /// Checks that every read of the copy's map read the file (see [`MappedFile::is_damaged`]).
    ///
    /// # Errors
    /// [`beton_storage::Error::FileChanged`] naming the copy.
    pub fn check_intact(&self) -> Result<()> {
        if self.map.is_damaged() {
            return Err(Error::Storage(beton_storage::Error::FileChanged { path: self.path.clone() }));
        }
        Ok(())
    }
}

/// Every record batch of the Arrow IPC file mapped in `map`: arrays read the file in place
/// (buffers that are not aligned are copied). For dataset directories' column files, which are
/// written once and never changed, like data files.
///
/// # Errors
/// A message naming what is wrong: not an Arrow IPC file, or a batch that does not decode.
pub(crate) fn read_ipc_mapped(
    map: Arc<MappedFile>,
) -> std::result::Result<(Arc<Schema>, Vec<RecordBatch>), String> {
    let (schema, batches) = ipc_batches(&map)?;
    let decoded = batches
        .iter()
        .map(|b| {
            b.decode_all()
                .ok_or_else(|| format!("the record batch at byte {} does not decode", b.block.offset()))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    if map.is_damaged() {
        return Err("the file shrank while it was read".into());
    }
    Ok((schema, decoded))
}

/// The one record batch of the copy in `map`, if it is one made from the file of `stamp`; its
/// arrays will read the map in place (aligned buffers are required, so nothing is copied).
fn locate(map: &Arc<MappedFile>, stamp: &Stamp) -> Option<Batch> {
    let (schema, batches) = ipc_batches(map).ok()?;
    let meta = schema.metadata();
    if meta.get(FORMAT_KEY).map(String::as_str) != Some(FORMAT_VERSION) {
        return None;
    }
    let made_from: Stamp = serde_json::from_str(meta.get(SOURCE_KEY)?).ok()?;
    let [batch] = <[Batch; 1]>::try_from(batches).ok()?;
    made_from.admits(stamp).then_some(batch)
}

/// The schema and record batches (not decoded yet) of the Arrow IPC file in `map`, each batch's
/// bytes checked to lie inside the file; files with dictionaries are refused.
fn ipc_batches(map: &Arc<MappedFile>) -> std::result::Result<(Arc<Schema>, Vec<Batch>), String> {
    let buffer = map.clone().into_arrow_buffer();
    let len = buffer.len();
    let not_ipc = |why: String| format!("not an Arrow IPC file: {why}");
    let trailer: [u8; 10] = len
        .checked_sub(10)
        .and_then(|start| buffer.as_slice().get(start..))
        .and_then(|t| t.try_into().ok())
        .ok_or_else(|| not_ipc(format!("{len} bytes, too short")))?;
    let footer_len = arrow_ipc::reader::read_footer_length(trailer).map_err(|e| not_ipc(e.to_string()))?;
    let footer_bytes = (len - 10)
        .checked_sub(footer_len)
        .and_then(|start| buffer.as_slice().get(start..len - 10))
        .ok_or_else(|| not_ipc(format!("a footer of {footer_len} bytes in a file of {len}")))?;
    let footer = arrow_ipc::root_as_footer(footer_bytes).map_err(|e| not_ipc(e.to_string()))?;
    let schema = footer.schema().ok_or_else(|| not_ipc("no schema".into()))?;
    let schema = Arc::new(arrow_ipc::convert::try_fb_to_schema(schema).map_err(|e| e.to_string())?);
    if footer.dictionaries().is_some_and(|d| !d.is_empty()) {
        return Err("dictionary-encoded columns are not supported".into());
    }
    let mut batches = Vec::new();
    for block in footer.recordBatches().into_iter().flatten() {
        let start = usize::try_from(block.offset()).ok();
        let block_len = usize::try_from(block.bodyLength())
            .ok()
            .zip(usize::try_from(block.metaDataLength()).ok())
            .and_then(|(b, m)| b.checked_add(m));
        let (start, block_len) = start
            .zip(block_len)
            .filter(|(s, l)| s.checked_add(*l).is_some_and(|end| end <= len))
            .ok_or_else(|| {
                format!("a record batch at byte {} runs past the end of the file", block.offset())
            })?;
        batches.push(Batch {
            schema: schema.clone(),
            version: footer.version(),
            block: *block,
            data: buffer.slice_with_length(start, block_len),
        });
    }
    Ok((schema, batches))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float64Array, Int64Array};
    use beton_storage::{SampleValue, Writer, WriterOptions};

    fn write(path: &Path, n: u64, offset: i64) -> Dataset {
        beton_testkit::write(path, beton_testkit::schema("label:int score:float caption:text"), n, |i| {
            let text = SampleValue::Text(format!("t{i}"));
            vec![SampleValue::Int(i as i64 % 7 + offset), SampleValue::Float(i as f64 / 4.0), text]
        });
        Dataset::open(path).unwrap()
    }

    #[test]
    fn a_copy_gives_the_gathered_columns_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let ds = write(&dir.path().join("a.beton"), 1000, 0);
        assert!(ColumnarCopy::open(&ds).is_none(), "none yet");
        let copy = ColumnarCopy::build(&ds).unwrap();
        assert_eq!(copy.path(), dir.path().join("a.beton.columns.arrow"));
        // The values written (not the gather the copy was made with).
        let labels: Int64Array = (0..1000).map(|i| i % 7).collect();
        let scores: Float64Array = (0..1000).map(|i| i as f64 / 4.0).collect();
        assert_eq!(copy.column("label").unwrap().as_ref(), &labels as &dyn Array);
        assert_eq!(copy.column("score").unwrap().as_ref(), &scores as &dyn Array);
        assert!(copy.column("caption").is_none() && copy.column("index").is_none());
        assert_eq!(copy.column_bytes("label"), Some(8000));
        // The arrays read the map: their values lie inside it.
        let label = copy.column("label").unwrap();
        let label = label.as_any().downcast_ref::<Int64Array>().unwrap();
        let at = label.values().as_ptr() as usize;
        let map = copy.map.as_slice().as_ptr() as usize;
        assert!(at >= map && at < map + copy.map.as_slice().len(), "zero-copy");
        let reopened = ColumnarCopy::open(&ds).unwrap();
        let score = reopened.column("score").unwrap();
        let score = score.as_any().downcast_ref::<Float64Array>().unwrap();
        assert_eq!(score.value(10), 2.5);
        reopened.check_intact().unwrap();
    }

    #[test]
    fn a_copy_of_another_file_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.beton");
        let ds = write(&path, 500, 0);
        ColumnarCopy::build(&ds).unwrap();
        drop(ds);
        // Rewritten with other labels, same length and header: the copy must not be read.
        let ds = write(&path, 500, 100);
        assert!(ColumnarCopy::open(&ds).is_none());
        let label = crate::gather::gather(
            &ds,
            ds.field_index("label").unwrap(),
            beton_storage::field::ColumnSource::Int,
        )
        .unwrap();
        assert_eq!(label.as_any().downcast_ref::<Int64Array>().unwrap().value(0), 100);
    }

    #[test]
    fn a_directory_data_files_copy_is_matched_by_its_identity_and_a_rewrite_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.beton");
        let ds = write(&path, 500, 0);
        let first = for_data_file(&ds).unwrap();
        let label = |c: &ColumnarCopy| {
            c.column("label").unwrap().as_any().downcast_ref::<Int64Array>().unwrap().value(3)
        };
        assert_eq!(label(&first), 3);
        // Matched without samples: the stored copy (made with them) admits the identity alone,
        // and the stamp of identity alone admits no stored copy's samples the other way round.
        let sampled = Stamp::of(&ds, Sampled::Yes).unwrap();
        let identity = Stamp::of(&ds, Sampled::No).unwrap();
        assert!(identity.crc.is_none() && sampled.admits(&identity) && !identity.admits(&sampled));
        assert!(ColumnarCopy::open_stamped(&ds, &identity).is_some());
        // Rewritten with other labels (another file at the path): its copy is made again.
        drop((ds, first));
        let ds = write(&path, 500, 100);
        let other = Stamp::of(&ds, Sampled::No).unwrap();
        assert!(!sampled.admits(&other), "a rewritten file is another file");
        assert_eq!(label(&for_data_file(&ds).unwrap()), 103);
    }

    #[test]
    fn a_damaged_copy_is_ignored_and_never_crashes() {
        let dir = tempfile::tempdir().unwrap();
        let ds = write(&dir.path().join("a.beton"), 300, 0);
        let copy = ColumnarCopy::build(&ds).unwrap();
        let path = copy.path().to_path_buf();
        drop(copy);
        let good = std::fs::read(&path).unwrap();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for round in 0..300 {
            let mut bytes = good.clone();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            match round % 3 {
                0 => bytes.truncate(rng as usize % bytes.len()),
                _ => {
                    for k in 0..(1 + round % 8) {
                        let at = (rng as usize).wrapping_mul(k + 1) % bytes.len();
                        bytes[at] ^= (rng >> 8) as u8 | 1;
                    }
                }
            }
            std::fs::write(&path, &bytes).unwrap();
            if let Some(copy) = ColumnarCopy::open(&ds) {
                // Flips in the values themselves cannot be told from values; anything in the
                // layout is refused, column by column.
                for name in ["label", "score"] {
                    assert!(copy.column(name).is_none_or(|a| a.len() == 300), "{name}");
                }
            }
        }
        std::fs::write(&path, b"not arrow").unwrap();
        assert!(ColumnarCopy::open(&ds).is_none());
        assert!(ColumnarCopy::build(&ds).is_ok(), "made again over it");
    }

    #[test]
    fn queries_of_one_file_share_its_mapped_copy_while_both_are_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.beton");
        let ds = write(&path, 1000, 0);
        let made = ColumnarCopy::build(&ds).unwrap();
        let first = for_dataset(&ds).unwrap();
        let again = for_dataset(&ds).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "kept mapped");
        // The copy made again (renamed over the old one): the new file is opened.
        drop(made);
        ColumnarCopy::build(&ds).unwrap();
        let rebuilt = for_dataset(&ds).unwrap();
        assert!(!Arc::ptr_eq(&first, &rebuilt));
        assert!(Arc::ptr_eq(&rebuilt, &for_dataset(&ds).unwrap()));
        // The copy deleted: none kept for it (1,000 rows: none made either).
        std::fs::remove_file(path_of(&path)).unwrap();
        assert!(for_dataset(&ds).is_none());
        // The data file rewritten: its new copy, with its new values.
        ColumnarCopy::build(&ds).unwrap();
        let old = for_dataset(&ds).unwrap();
        drop(ds);
        let ds = write(&path, 1000, 100);
        ColumnarCopy::build(&ds).unwrap();
        let new = for_dataset(&ds).unwrap();
        assert!(!Arc::ptr_eq(&old, &new));
        let label = new.column("label").unwrap();
        assert_eq!(label.as_any().downcast_ref::<Int64Array>().unwrap().value(0), 100);
        // Bounded: copies of other files push the oldest out.
        for k in 0..recent::KEPT {
            let ds = write(&dir.path().join(format!("o{k}.beton")), 10, 0);
            ColumnarCopy::build(&ds).unwrap();
            for_dataset(&ds).unwrap();
        }
        let reopened = for_dataset(&ds).unwrap();
        assert!(!Arc::ptr_eq(&new, &reopened), "pushed out, opened again");
        forget_open_copies();
        assert!(!Arc::ptr_eq(&reopened, &for_dataset(&ds).unwrap()), "forgotten, opened again");
    }

    #[test]
    fn writers_make_the_copy_only_where_it_is_cheap_beside_the_write() {
        let dir = tempfile::tempdir().unwrap();
        // Table-only: the copy would be as large as the file; the first query makes it.
        let numbers = dir.path().join("numbers.beton");
        Writer::new(&numbers, beton_testkit::schema("label:int score:float"), WriterOptions::default())
            .unwrap()
            .write_fixed(MIN_ROWS, |k, i| match k {
                0 => SampleValue::Int(i as i64 % 1000),
                _ => SampleValue::Float(i as f64 / 8.0),
            })
            .unwrap();
        after_write(&numbers);
        let ds = Dataset::open(&numbers).unwrap();
        assert!(!cheap_beside_the_write(&ds) && !path_of(&numbers).exists(), "none at write");
        // What a table's first read of a column calls.
        assert!(for_dataset(&ds).is_some(), "made by the first read of a column");
        assert!(ColumnarCopy::open(&ds).is_some());
        // Payloads dominate (the data table is a small part of the file): made at write.
        let blobs = dir.path().join("blobs.beton");
        beton_testkit::write(&blobs, beton_testkit::schema("label:int blob:bytes"), MIN_ROWS, |i| {
            vec![SampleValue::Int(i as i64), SampleValue::Bytes(vec![7; 300])]
        });
        after_write(&blobs);
        let ds = Dataset::open(&blobs).unwrap();
        assert!(cheap_beside_the_write(&ds));
        assert!(ColumnarCopy::open(&ds).is_some(), "made by the writer");
    }

    #[test]
    fn path_of_adds_the_suffix() {
        assert_eq!(path_of(Path::new("/d/x.beton")), Path::new("/d/x.beton.columns.arrow"));
        assert_eq!(path_of(Path::new("x.beton")), Path::new("x.beton.columns.arrow"));
    }

    #[test]
    fn a_group_copy_gives_each_member_its_own_columns_and_nothing_to_others() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = (0..3).map(|k| dir.path().join(format!("{k}.beton"))).collect();
        let opened: Vec<Dataset> = paths
            .iter()
            .zip([300u64, 0, 41])
            .enumerate()
            .map(|(k, (p, n))| write(p, n, 10 * k as i64))
            .collect();
        let name = group_beside_new_data_files(&paths).unwrap();
        assert!(name.ends_with(GROUP_SUFFIX));
        let group = GroupCopy::open(&dir.path().join(&name)).unwrap();
        for (k, ds) in opened.iter().enumerate() {
            let copy = group.member(ds).unwrap();
            let n = ds.num_samples() as i64;
            let labels: Int64Array = (0..n).map(|i| i % 7 + 10 * k as i64).collect();
            assert_eq!(copy.column("label").unwrap().as_ref(), &labels as &dyn Array, "member {k}");
            assert_eq!(copy.column("score").unwrap().len() as i64, n);
            assert!(copy.column("caption").is_none());
        }
        // A data file the group does not hold, under another name or rewritten: none.
        let other = write(&dir.path().join("3.beton"), 300, 0);
        assert!(group.member(&other).is_none());
        drop(opened);
        let rewritten = write(&paths[0], 300, 5);
        assert!(group.member(&rewritten).is_none(), "another file under a member's name");
        // One data file: nothing to group.
        assert!(group_beside_new_data_files(&paths[..1]).is_none());
    }

    /// Data files of every column type a copy holds but custom slots (fixed-width bytes, as
    /// ints are): images (mode, width, height, size), ints, floats, bools, sizes, vectors;
    /// sample `i` of file `k` differs by `k`.
    fn every_type(path: &Path, n: u64, k: u64) -> Dataset {
        let fields = beton_testkit::schema(
            "image:raw label:int score:float flag:bool boxes:array:<i2 v:ndarray:<f4:3",
        );
        beton_testkit::write(path, fields, n, |i| {
            let w = 1 + ((i + k) % 3) as u32;
            let v: Vec<u8> = [i as f32, k as f32, -(i as f32)].iter().flat_map(|x| x.to_le_bytes()).collect();
            vec![
                beton_testkit::rgb(w, 1, vec![7; (w * 3) as usize]),
                SampleValue::Int(i as i64 * 3 + k as i64),
                SampleValue::Float(i as f64 / 8.0 - k as f64),
                SampleValue::Bool((i * 7 + k) % 3 == 0),
                SampleValue::Array(vec![1; 2 * ((i + k) % 4) as usize]),
                SampleValue::NDArray(v),
            ]
        });
        Dataset::open(path).unwrap()
    }

    #[test]
    fn a_group_copy_is_one_arrow_batch_of_every_members_columns_in_turn() {
        let dir = tempfile::tempdir().unwrap();
        // Row counts that are not multiples of 8 (bools are packed after the previous member's
        // last bit), an empty member, and one whose int column (2.4 MB) passes a whole stage.
        let rows = [13u64, 0, 300_001, 7, 1];
        let paths: Vec<PathBuf> = (0..rows.len()).map(|k| dir.path().join(format!("{k}.beton"))).collect();
        let opened: Vec<Dataset> =
            paths.iter().zip(rows).enumerate().map(|(k, (p, n))| every_type(p, n, k as u64)).collect();
        let name = group_beside_new_data_files(&paths).unwrap();
        let path = dir.path().join(&name);
        // Arrow's own reader (not beton's mapped one): one batch, each column every member's
        // gathered column in turn.
        let reader =
            arrow_ipc::reader::FileReader::try_new(std::fs::File::open(&path).unwrap(), None).unwrap();
        let batches: Vec<RecordBatch> = reader.collect::<std::result::Result<_, _>>().unwrap();
        assert_eq!(batches.len(), 1);
        let batch = &batches[0];
        assert_eq!(batch.num_rows() as u64, rows.iter().sum::<u64>());
        let gathered: Vec<Vec<(String, ArrayRef)>> =
            opened.iter().map(|ds| crate::gather::copy_columns(ds).unwrap()).collect();
        let names: Vec<&str> = gathered[0].iter().map(|(n, _)| n.as_str()).collect();
        for want in ["image.mode", "image.width", "image.nbytes", "label", "score", "flag", "boxes", "v"] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        for (c, name) in names.iter().enumerate() {
            let parts: Vec<&dyn Array> = gathered.iter().map(|g| g[c].1.as_ref()).collect();
            let whole = arrow_select::concat::concat(&parts).unwrap();
            assert_eq!(batch.column_by_name(name).unwrap().as_ref(), whole.as_ref(), "{name}");
        }
        // Beton's reader: each member its own rows of every column.
        let group = GroupCopy::open(&path).unwrap();
        for (k, ds) in opened.iter().enumerate() {
            let copy = group.member(ds).unwrap();
            for (name, array) in &gathered[k] {
                assert_eq!(copy.column(name).unwrap().as_ref(), array.as_ref(), "member {k} {name}");
            }
        }
        // Ranges of a whole stage or more start at a multiple of it (huge pages of the cache).
        let map = MappedFile::open(&path).unwrap();
        let label = group.member(&opened[2]).unwrap().column("label").unwrap();
        let values = label.to_data().buffers()[0].as_ptr() as usize - map.as_slice().as_ptr() as usize;
        let first = values - 13 * 8; // member 0's 13 rows come first
        assert_eq!(first % (2 << 20), 0, "the label column starts at byte {first}");
    }

    #[test]
    fn a_group_copy_of_one_batch_per_member_is_still_read() {
        // The layout of group copies written before they were one batch.
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = (0..3).map(|k| dir.path().join(format!("{k}.beton"))).collect();
        let opened: Vec<Dataset> =
            paths.iter().zip([20u64, 0, 9]).enumerate().map(|(k, (p, n))| write(p, n, k as i64)).collect();
        let members: Vec<Member> = opened
            .iter()
            .map(|ds| Member {
                file: ds.path().file_name().unwrap().to_str().unwrap().into(),
                rows: ds.num_samples(),
                stamp: Stamp::of(ds, Sampled::No).unwrap(),
            })
            .collect();
        let gathered: Vec<Vec<(String, ArrayRef)>> =
            opened.iter().map(|ds| crate::gather::copy_columns(ds).unwrap()).collect();
        let fields: Vec<ArrowField> =
            gathered[0].iter().map(|(n, a)| ArrowField::new(n, a.data_type().clone(), false)).collect();
        let metadata = [
            (FORMAT_KEY.to_string(), FORMAT_VERSION.to_string()),
            (GROUP_KEY.to_string(), serde_json::to_string(&members).unwrap()),
        ];
        let schema = Arc::new(
            Schema::new(fields)
                .with_metadata(metadata.into_iter().collect::<std::collections::HashMap<_, _>>()),
        );
        let path = dir.path().join(format!("old{GROUP_SUFFIX}"));
        let mut w =
            arrow_ipc::writer::FileWriter::try_new(std::fs::File::create(&path).unwrap(), &schema).unwrap();
        for (ds, g) in opened.iter().zip(&gathered) {
            let options =
                arrow_array::RecordBatchOptions::new().with_row_count(Some(ds.num_samples() as usize));
            let columns = g.iter().map(|(_, a)| a.clone()).collect();
            w.write(&RecordBatch::try_new_with_options(schema.clone(), columns, &options).unwrap()).unwrap();
        }
        w.finish().unwrap();
        let group = GroupCopy::open(&path).unwrap();
        for (k, ds) in opened.iter().enumerate() {
            let copy = group.member(ds).unwrap();
            for (name, array) in &gathered[k] {
                assert_eq!(copy.column(name).unwrap().as_ref(), array.as_ref(), "member {k} {name}");
            }
        }
    }

    #[test]
    fn data_files_whose_copies_differ_get_no_group_and_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.beton");
        write(&a, 100, 0);
        let b = dir.path().join("b.beton");
        beton_testkit::write(&b, beton_testkit::schema("label:int"), 50, |i| {
            vec![SampleValue::Int(i as i64)]
        });
        assert!(group_beside_new_data_files(&[a.clone(), b.clone()]).is_none());
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a.beton", "b.beton"], "no group, no temporary file");
        // Not a group copy (a data file's own copy, or junk): not opened as one.
        let ds = Dataset::open(&a).unwrap();
        ColumnarCopy::build(&ds).unwrap();
        assert!(GroupCopy::open(&path_of(&a)).is_none());
        std::fs::write(dir.path().join("junk"), b"ARROW1 junk").unwrap();
        assert!(GroupCopy::open(&dir.path().join("junk")).is_none());
    }

    #[test]
    fn the_chunked_writer_writes_whole_chunks_at_their_offsets() {
        /// Records each write's offset and length.
        struct Log(Vec<(usize, usize)>, usize, Vec<u8>);
        impl Write for Log {
            fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
                self.0.push((self.1, data.len()));
                self.1 += data.len();
                self.2.extend_from_slice(data);
                Ok(data.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        const C: usize = ChunkedWriter::<Log>::CHUNK;
        let mut w = ChunkedWriter::new(Log(Vec::new(), 0, Vec::new()));
        let mut all = Vec::new();
        for (k, n) in [10usize, C - 3, 7, 3 * C + 5, 0, C, 1].into_iter().enumerate() {
            let bytes = vec![k as u8; n];
            w.write_all(&bytes).unwrap();
            all.extend(bytes);
        }
        w.flush().unwrap();
        let log = &w.inner.0;
        let (last, rest) = log.split_last().unwrap();
        assert!(rest.iter().all(|&(at, n)| at % C == 0 && n % C == 0 && n > 0), "{log:?}");
        assert_eq!(last.0 + last.1, all.len());
        assert!(w.inner.2 == all, "the bytes, in order");
    }
}
