//! Named splits: small named blobs (beton-dataset stores index sets in them) kept inside a
//! `.beton` file, in the spare bytes between the data table and the first data page, where FFCV
//! never looks. They are added, replaced and removed in place, without touching any other byte
//! of the file, and crash-safely: the region holds two slots and an update writes the slot not
//! in use, so a crash at any point leaves the old splits or the new ones. FORMAT.md §12 is the
//! normative layout.
//!
//! ```text
//! region := [align_up(end of data table, 8), first data page)   (or the allocation table's
//!           offset when the file has no pages); two slots of slot_len = floor(len / 2) rounded
//!           down to a multiple of 8, at region start and region start + slot_len
//! slot   := magic seq len crc reserved payload
//!           magic b"BETONSPL" · seq u64 (1, 2, … ; the higher valid slot wins) · len u64
//!           (payload bytes) · crc u32 (CRC-32/ISO-HDLC of seq, len and payload) · reserved u32 0
//! payload:= count u32, then count × (name_len u8, name, data_len u64, data), names ascending
//! ```
//!
//! Readers take no lock: they copy a slot out and check its CRC, so a read racing an update sees
//! the old or the new splits. Writers take an exclusive lock on the file (`flock`), so two
//! updates never interleave.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::error::{Error, Result};
use crate::reader::{Dataset, FileId};

/// The first 8 bytes of a written slot.
pub const SLOT_MAGIC: [u8; 8] = *b"BETONSPL";

/// Bytes of a slot header: magic, seq, len, crc, reserved.
pub const SLOT_HEADER_SIZE: u64 = 32;

/// Longest split name in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// The named blobs of a file, by name.
pub type SplitMap = BTreeMap<String, Vec<u8>>;

/// Where a file's splits live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitRegion {
    /// Byte offset of slot 0.
    pub start: u64,
    /// Bytes of each of the two slots, header included (0: no room at all).
    pub slot_len: u64,
}

impl SplitRegion {
    /// The region of `ds` (FORMAT.md §12).
    pub fn of(ds: &Dataset) -> SplitRegion {
        let start = ds.data_table_end().next_multiple_of(8);
        let end = ds.data_start().min(ds.header().alloc_table_ptr);
        let slot_len = if end > start { (end - start) / 2 / 8 * 8 } else { 0 };
        SplitRegion { start, slot_len }
    }

    /// Payload bytes a slot can hold.
    pub fn capacity(&self) -> u64 {
        self.slot_len.saturating_sub(SLOT_HEADER_SIZE)
    }

    fn slot_offset(&self, k: usize) -> u64 {
        self.start + k as u64 * self.slot_len
    }
}

/// What one slot holds.
#[derive(Debug)]
enum SlotState {
    /// Never written: its header is all zero.
    Empty,
    /// A complete, checksummed generation.
    Valid { seq: u64, splits: SplitMap },
    /// Started but not finished (a crash mid-update), or damaged: the magic is there, the
    /// checksum is not.
    Torn { why: String },
    /// Bytes beton did not write: neither zero nor a slot header.
    Foreign,
}

/// Checks a split name: 1 to 64 bytes of ASCII letters, digits, `_`, `-`, `.`, `:`, `=`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.:=".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            what: format!("split name {name:?}"),
            why: format!(
                "must be 1 to {MAX_NAME_LEN} ASCII letters, digits or any of _ - . : = (e.g. 'train', 'fold-3')"
            ),
        })
    }
}

/// The payload of a slot for `splits`.
fn encode(splits: &SplitMap) -> Vec<u8> {
    let size: usize = splits.iter().map(|(n, d)| 1 + n.len() + 8 + d.len()).sum();
    let mut out = Vec::with_capacity(4 + size);
    out.extend_from_slice(&(splits.len() as u32).to_le_bytes());
    for (name, data) in splits {
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

/// Reads a slot payload; `Err` says what is wrong, at which payload offset.
fn decode(payload: &[u8]) -> std::result::Result<SplitMap, String> {
    let take = |at: usize, n: usize| {
        payload
            .get(at..at + n)
            .ok_or_else(|| format!("payload ends at byte {} inside an entry", payload.len()))
    };
    let count = u32::from_le_bytes(take(0, 4)?.try_into().unwrap_or_default());
    let mut at = 4;
    let mut splits = SplitMap::new();
    for k in 0..count {
        let name_len = take(at, 1)?[0] as usize;
        let name = std::str::from_utf8(take(at + 1, name_len)?)
            .ok()
            .filter(|n| check_name(n).is_ok())
            .ok_or_else(|| format!("entry {k} at payload byte {at}: invalid name"))?;
        let data_len = u64::from_le_bytes(take(at + 1 + name_len, 8)?.try_into().unwrap_or_default());
        let data_at = at + 1 + name_len + 8;
        let data = usize::try_from(data_len)
            .ok()
            .and_then(|n| payload.get(data_at..data_at.checked_add(n)?))
            .ok_or_else(|| format!("entry {k} '{name}': {data_len} bytes run past the payload"))?;
        if splits.keys().next_back().is_some_and(|last| last.as_str() >= name) {
            return Err(format!("entry {k} '{name}' is out of order or repeated"));
        }
        splits.insert(name.to_string(), data.to_vec());
        at = data_at + data.len();
    }
    if at != payload.len() {
        return Err(format!("{} bytes after the last entry", payload.len() - at));
    }
    Ok(splits)
}

fn crc(seq: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&(payload.len() as u64).to_le_bytes());
    h.update(payload);
    h.finalize()
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

/// Reads slot `k` of `region` of `ds` (with `pread`: see [`current`]).
fn read_slot(ds: &Dataset, region: SplitRegion, k: usize) -> Result<SlotState> {
    let at = region.slot_offset(k);
    let header = ds.read_at(at, SLOT_HEADER_SIZE)?;
    if header.iter().all(|&b| b == 0) {
        return Ok(SlotState::Empty);
    }
    if header[..8] != SLOT_MAGIC {
        return Ok(SlotState::Foreign);
    }
    let (seq, len) = (u64_at(&header, 8), u64_at(&header, 16));
    let stored = u32::from_le_bytes(header[24..28].try_into().unwrap_or_default());
    if len > region.capacity() {
        return Ok(SlotState::Torn {
            why: format!("payload length {len} exceeds the slot's {}", region.capacity()),
        });
    }
    // Copied out before checking, so that the bytes checked are the bytes decoded even if a
    // writer is updating this slot right now.
    let payload = ds.read_at(at + SLOT_HEADER_SIZE, len)?;
    if crc(seq, &payload) != stored {
        return Ok(SlotState::Torn { why: "checksum mismatch (an update that did not finish?)".into() });
    }
    Ok(match decode(&payload) {
        Ok(splits) => SlotState::Valid { seq, splits },
        Err(why) => SlotState::Torn { why },
    })
}

/// The current generation: (seq, splits, index of its slot); seq 0 and no slot when none.
///
/// The region is read with `pread` ([`Dataset::read_at`]), never through the file's map: it may
/// be a hole in the file (FFCV's files, or any file on a full file system), and a fault on a hole
/// the file system cannot back would be a signal.
fn current(ds: &Dataset) -> Result<(u64, SplitMap, Option<usize>)> {
    let region = SplitRegion::of(ds);
    if region.slot_len < SLOT_HEADER_SIZE {
        return Ok((0, SplitMap::new(), None));
    }
    let slots = [read_slot(ds, region, 0)?, read_slot(ds, region, 1)?];
    let mut best: Option<(u64, &SplitMap, usize)> = None;
    for (k, s) in slots.iter().enumerate() {
        if let SlotState::Valid { seq, splits } = s {
            if best.is_none_or(|(b, _, _)| *seq > b) {
                best = Some((*seq, splits, k));
            }
        }
    }
    if let Some((seq, splits, k)) = best {
        return Ok((seq, splits.clone(), Some(k)));
    }
    // No valid slot: fine when neither was ever finished (a first update that crashed); both
    // started and both broken is damage.
    match &slots {
        [SlotState::Torn { why }, SlotState::Torn { .. }] => Err(Error::Corrupt {
            path: ds.path().to_path_buf(),
            offset: region.slot_offset(0),
            what: format!("both split slots are damaged; slot 0: {why}"),
        }),
        _ => Ok((0, SplitMap::new(), None)),
    }
}

impl Dataset {
    /// The file's named splits as raw blobs (beton-dataset decodes them as index sets), without
    /// beton's own entries ([`is_reserved`]). A file without any has none; this reads the split
    /// region afresh on every call, so it sees updates made by other handles or processes.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when both slots hold damaged data.
    pub fn splits(&self) -> Result<SplitMap> {
        current(self).map(|(_, mut s, _)| {
            s.retain(|name, _| !is_reserved(name));
            s
        })
    }

    /// The class names stored in the file ([`CLASSES_ENTRY`]): label `k` is class `k`. `None`
    /// when the file has none (FFCV's files, files not written from an ImageFolder).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when both slots hold damaged data or the entry is not a JSON array of
    /// strings.
    pub fn classes(&self) -> Result<Option<Vec<String>>> {
        let (_, mut entries, _) = current(self)?;
        let Some(bytes) = entries.remove(CLASSES_ENTRY) else { return Ok(None) };
        serde_json::from_slice::<Vec<String>>(&bytes).map(Some).map_err(|e| Error::Corrupt {
            path: self.path().to_path_buf(),
            offset: SplitRegion::of(self).start,
            what: format!("split region entry '{CLASSES_ENTRY}' is not a JSON array of strings: {e}"),
        })
    }
}

/// Entries of the split region whose names start with this are beton's own metadata, not
/// named splits: [`Dataset::splits`] leaves them out and beton-dataset refuses such split names.
pub const RESERVED_PREFIX: &str = ":";

/// The entry holding an ImageFolder's class names: a UTF-8 JSON array of strings, in label
/// order (FORMAT.md §12).
pub const CLASSES_ENTRY: &str = ":classes";

/// True for names of beton's own entries ([`RESERVED_PREFIX`]).
pub fn is_reserved(name: &str) -> bool {
    name.starts_with(RESERVED_PREFIX)
}

/// Stores `classes` (class names in label order; `None` removes them) in the file at `path`,
/// in one crash-safe update of its split region (see [`update_splits`]; `opened` as there).
///
/// # Errors
/// As [`update_splits`]: [`Error::NoRoomForSplits`] when they do not fit beside the splits.
pub fn save_classes(
    path: impl AsRef<Path>,
    opened: Option<FileId>,
    classes: Option<&[String]>,
) -> Result<()> {
    let encoded = classes.map(|c| serde_json::to_vec(c).unwrap_or_default());
    update_splits(path, opened, |entries| {
        match encoded {
            Some(bytes) => entries.insert(CLASSES_ENTRY.to_string(), bytes),
            None => entries.remove(CLASSES_ENTRY),
        };
        Ok(())
    })?;
    Ok(())
}

/// Replaces the splits of the file at `path` by what `edit` makes of them, crash-safely (see
/// the module doc). `edit` sees every entry, beton's reserved ones ([`is_reserved`]) included,
/// and should keep those it does not mean to change. Returns the new entries. With `opened` (a handle's [`Dataset::file_id`]), the
/// update is refused with [`Error::FileReplaced`] unless `path` still holds that file: a handle
/// never writes into a file it did not open. `edit` runs under the file's exclusive lock, so
/// concurrent updates from several processes serialize.
///
/// # Errors
/// [`Error::NoRoomForSplits`] when the new splits do not fit one slot (the file is left as it
/// was); [`Error::Corrupt`] when the region holds bytes beton did not write; I/O errors; and
/// whatever `edit` returns.
pub fn update_splits(
    path: impl AsRef<Path>,
    opened: Option<FileId>,
    edit: impl FnOnce(&mut SplitMap) -> Result<()>,
) -> Result<SplitMap> {
    let path = path.as_ref();
    if crate::remote::is_url(path) {
        return Err(Error::Remote {
            url: path.to_string_lossy().into_owned(),
            what: "named splits and class names cannot be saved into a file on remote storage, which beton \
                   reads only; save them into a local copy, or keep an IndexSet"
                .into(),
        });
    }
    let io = |e| Error::io(path, e);
    let file = OpenOptions::new().read(true).write(true).open(path).map_err(io)?;
    file.lock().map_err(io)?;
    if let Some(opened) = opened {
        if FileId::of_file(path, &file)? != opened {
            return Err(Error::FileReplaced { path: path.to_path_buf() });
        }
    }
    // Opened after taking the lock, so it sees the last update.
    let ds = Dataset::open(path)?;
    let region = SplitRegion::of(&ds);
    let (seq, mut splits, active) = current(&ds)?;
    edit(&mut splits)?;
    for name in splits.keys() {
        check_name(name)?;
    }
    let payload = encode(&splits);
    if payload.len() as u64 > region.capacity() {
        return Err(Error::NoRoomForSplits {
            path: path.to_path_buf(),
            needed: payload.len() as u64 + SLOT_HEADER_SIZE,
            available: region.slot_len,
        });
    }
    let target = match active {
        Some(k) => 1 - k,
        None => 0,
    };
    if let SlotState::Foreign = read_slot(&ds, region, target)? {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            offset: region.slot_offset(target),
            what: "the bytes between the data table and the first page are not zero and not a split \
                   slot; refusing to overwrite them"
                .into(),
        });
    }
    drop(ds);
    let at = region.slot_offset(target);
    let seq = seq + 1;
    let mut header = Vec::with_capacity(SLOT_HEADER_SIZE as usize);
    header.extend_from_slice(&SLOT_MAGIC);
    header.extend_from_slice(&seq.to_le_bytes());
    header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    header.extend_from_slice(&crc(seq, &payload).to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    // Payload first and durable, then the header that makes it current: a crash in between
    // leaves a slot whose checksum fails, so readers keep the other one.
    write_at(&file, &payload, at + SLOT_HEADER_SIZE).map_err(io)?;
    file.sync_data().map_err(io)?;
    fail_point(path)?;
    write_at(&file, &header, at).map_err(io)?;
    file.sync_data().map_err(io)?;
    Ok(splits)
}

fn write_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
    }
    #[cfg(windows)]
    {
        let mut done = 0;
        while done < bytes.len() {
            done += std::os::windows::fs::FileExt::seek_write(file, &bytes[done..], offset + done as u64)?;
        }
        Ok(())
    }
}

/// Test hook: with `BETON_SPLITS_FAIL_AFTER_PAYLOAD` set, an update stops between writing the
/// payload and the header, as a crash would (the crash-safety test kills a child process here).
fn fail_point(path: &Path) -> Result<()> {
    match std::env::var_os("BETON_SPLITS_FAIL_AFTER_PAYLOAD") {
        Some(v) if v == "abort" => std::process::abort(),
        Some(_) => Err(Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other("injected failure between split payload and header"),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trip_and_errors() {
        let mut m = SplitMap::new();
        m.insert("train".into(), vec![1, 2, 3]);
        m.insert("val".into(), vec![]);
        let p = encode(&m);
        assert_eq!(decode(&p).unwrap(), m);
        assert!(decode(&p[..p.len() - 1]).unwrap_err().contains("payload ends at byte"));
        let mut extra = p.clone();
        extra.push(0);
        assert!(decode(&extra).unwrap_err().contains("after the last entry"));
        let mut swapped = SplitMap::new();
        swapped.insert("b".into(), vec![]);
        let mut bad = encode(&swapped);
        bad[0] = 2;
        bad.extend_from_slice(&[1, b'a', 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(decode(&bad).unwrap_err().contains("out of order"));
        assert!(decode(&[]).is_err());
        let mut long = encode(&m);
        long[10..18].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&long).unwrap_err().contains("run past"), "{:?}", decode(&long));
    }

    #[test]
    fn names() {
        for ok in ["train", "val", "fold-3", "a.b:c=d_e", &"x".repeat(64)] {
            check_name(ok).unwrap();
        }
        for bad in ["", "has space", "ü", "a/b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
