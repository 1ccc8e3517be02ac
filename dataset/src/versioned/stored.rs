//! How a manifest is stored (docs/FORMAT.md §13, "Manifests on disk"): whole (a checkpoint) or
//! as the changes to its parent's fragments (a delta), so that an edit writes metadata in
//! proportion to what it changed, not to the number of data files, and opening a version reads
//! its last checkpoint and the few deltas since (Delta Lake's checkpoints plus log, with the
//! log entries kept in the version files themselves).
//!
//! A format-3 manifest is compact JSON ending in `,"checksum":"crc32:XXXXXXXX"}` and a newline;
//! the checksum is the CRC-32 of every byte before `,"checksum"`, so it is checked without
//! re-serialising anything. Formats 1 and 2 (pretty JSON, format 2 checksummed over its
//! canonical value) are still read.
//!
//! A commit writes a delta when its parent is the version it was made from and its fragments are
//! the parent's, less some, some changed in place and new ones at the end (every edit but a
//! restore or a compaction); it writes a checkpoint instead when the deltas since the last one
//! would number more than [`MAX_DEPTH`] or weigh more than that checkpoint (so the metadata an
//! edit writes is, summed over edits, at most twice the bytes of what they changed, plus one
//! checkpoint per [`MAX_DEPTH`] edits), and when the chain rests on a manifest older than format
//! 3 (an old directory is converted by its first edit).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::manifest::{check_manifest, is_relative_file, FileRef, Fragment, Lineage, Manifest, Operation};
use super::manifest::{LineState, SchemaField, SharedVec, FORMAT, FORMAT_VERSION, FORMAT_WITHOUT_LINES};
use crate::error::{Error, Result};

/// The most deltas between a version and its checkpoint: opening reads at most this many small
/// files besides the checkpoint.
pub const MAX_DEPTH: u32 = 64;

/// What a delta changes in its parent's fragments: `removed` (by id) go, `changed` replace the
/// fragment of their id in place, `added` go at the end, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// The version whose fragments this changes: always the parent.
    pub base: u64,
    /// Ids of fragments removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<u64>,
    /// Fragments changed (deletions, column files), by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<Fragment>,
    /// New fragments, after the parent's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<Fragment>,
}

impl Delta {
    /// The delta turning `base`'s fragments into `new`'s; `None` when `new`'s order is not the
    /// parent's less removals plus new fragments at the end.
    fn between(base: &SharedVec<Fragment>, new: &SharedVec<Fragment>, base_next_id: u64) -> Option<Delta> {
        Self::in_place(base, new, base_next_id).unwrap_or_else(|| Self::by_id(base, new))
    }

    /// [`Delta::between`] for the edits most commits make, in one walk without hashing: the
    /// parent's fragments in place (changed or not; one an edit did not touch is shared with
    /// the parent's, so not even compared), then new ones (ids from `base_next_id` on, which
    /// the parent cannot have). `None` for anything else (a removal, a restore's fragments).
    fn in_place(
        base: &SharedVec<Fragment>,
        new: &SharedVec<Fragment>,
        base_next_id: u64,
    ) -> Option<Option<Delta>> {
        if new.len() < base.len() {
            return None;
        }
        let mut changed = Vec::new();
        for (k, f) in new.iter().enumerate().take(base.len()) {
            if new.same_item(k, base, k) {
                continue;
            }
            if base[k].id != f.id {
                return None;
            }
            if base[k] != *f {
                changed.push(f.clone());
            }
        }
        let added: Vec<Fragment> = new.iter().skip(base.len()).cloned().collect();
        if added.iter().any(|f| f.id < base_next_id) {
            return None;
        }
        Some(Some(Delta { base: 0, removed: Vec::new(), changed, added }))
    }

    /// [`Delta::between`] by fragment id, for any change of order.
    fn by_id(base: &SharedVec<Fragment>, new: &SharedVec<Fragment>) -> Option<Delta> {
        let position: HashMap<u64, usize> = base.iter().enumerate().map(|(k, f)| (f.id, k)).collect();
        let mut last = None;
        let mut kept = HashSet::new();
        let (mut changed, mut added) = (Vec::new(), Vec::new());
        for f in new {
            match position.get(&f.id) {
                Some(&k) => {
                    if !added.is_empty() || last.is_some_and(|l| k <= l) {
                        return None;
                    }
                    last = Some(k);
                    kept.insert(f.id);
                    if base[k] != *f {
                        changed.push(f.clone());
                    }
                }
                None => added.push(f.clone()),
            }
        }
        let removed = base.iter().map(|f| f.id).filter(|id| !kept.contains(id)).collect();
        Some(Delta { base: 0, removed, changed, added })
    }

    /// `base`'s fragments with this delta applied (those it leaves alone shared with `base`).
    ///
    /// # Errors
    /// What is wrong (naming the fragment) when the delta removes or changes a fragment `base`
    /// lacks, or adds one it has.
    fn apply(&self, base: &SharedVec<Fragment>) -> std::result::Result<SharedVec<Fragment>, String> {
        let ids: HashSet<u64> = base.iter().map(|f| f.id).collect();
        let removed: HashSet<u64> = self.removed.iter().copied().collect();
        let mut changed: HashMap<u64, &Fragment> = HashMap::with_capacity(self.changed.len());
        for f in &self.changed {
            if !ids.contains(&f.id) || removed.contains(&f.id) || changed.insert(f.id, f).is_some() {
                return Err(format!(
                    "its delta changes fragment {}, which version {} lacks or it removes",
                    f.id, self.base
                ));
            }
        }
        if let Some(id) = self.removed.iter().find(|id| !ids.contains(id)) {
            return Err(format!("its delta removes fragment {id}, which version {} lacks", self.base));
        }
        if let Some(f) = self.added.iter().find(|f| ids.contains(&f.id)) {
            return Err(format!("its delta adds fragment {}, which version {} has", f.id, self.base));
        }
        let mut out = Vec::with_capacity(base.len() - removed.len() + self.added.len());
        for f in base.shared() {
            if removed.contains(&f.id) {
                continue;
            }
            out.push(changed.get(&f.id).map_or_else(|| Arc::clone(f), |c| Arc::new((*c).clone())));
        }
        out.extend(self.added.iter().cloned().map(Arc::new));
        Ok(SharedVec::from_shared(out))
    }
}

/// A manifest file as read: whole, or a delta on its parent's fragments (the manifest it holds
/// then has no fragments yet).
#[derive(Debug)]
pub(crate) enum Parsed {
    Whole(Manifest),
    Delta(Manifest, Delta),
}

/// A manifest file's fields (every format).
#[derive(Deserialize)]
struct Stored {
    format: String,
    format_version: u32,
    version: u64,
    parent: Option<u64>,
    timestamp_ms: u64,
    operation: Operation,
    #[serde(default)]
    message: String,
    next_row_id: u64,
    #[serde(default)]
    next_fragment_id: u64,
    schema: Vec<SchemaField>,
    #[serde(default)]
    fragments: Option<Vec<Fragment>>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    splits: BTreeMap<String, FileRef>,
    #[serde(default)]
    classes: Option<Vec<String>>,
    #[serde(default)]
    lines: Option<LineState>,
}

/// A format-3 manifest as written: borrowed from the manifest, with its fragments or its delta.
#[derive(Serialize)]
struct Written<'a> {
    format: &'a str,
    format_version: u32,
    version: u64,
    parent: Option<u64>,
    timestamp_ms: u64,
    operation: &'a Operation,
    message: &'a str,
    next_row_id: u64,
    next_fragment_id: u64,
    schema: &'a [SchemaField],
    #[serde(skip_serializing_if = "Option::is_none")]
    fragments: Option<&'a SharedVec<Fragment>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<&'a Delta>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    splits: &'a BTreeMap<String, FileRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    classes: &'a Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lines: &'a Option<LineState>,
}

/// What ends a format-3 manifest: `,"checksum":"crc32:` 8 hex digits `"}` newline.
const SUFFIX_START: &[u8] = b",\"checksum\":\"crc32:";
const SUFFIX_END: &[u8] = b"\"}\n";
const SUFFIX_LEN: usize = SUFFIX_START.len() + 8 + SUFFIX_END.len();

/// The manifest's key holding its checksum.
const CHECKSUM_KEY: &str = "checksum";

impl Manifest {
    /// Parses and checks a whole manifest read from `path` ([`parse`] and [`check`]).
    ///
    /// # Errors
    /// As [`parse`] and [`check`]; [`Error::InvalidArgument`] for a delta (read those with
    /// `commit::read_manifest`, which applies them to their parent).
    pub fn from_json(bytes: &[u8], path: &Path) -> Result<Manifest> {
        match parse(bytes, path)? {
            Parsed::Whole(m) => {
                check(&m, path)?;
                Ok(m)
            }
            Parsed::Delta(m, d) => Err(Error::InvalidArgument {
                what: format!("manifest {}", path.display()),
                why: format!("stores version {} as its changes to version {}", m.version, d.base),
            }),
        }
    }

    /// The manifest, whole, as format-3 JSON (a checkpoint).
    pub fn to_json(&self) -> Vec<u8> {
        encode(self, Some(&self.fragments), None)
    }
}

/// The bytes to store `m` as, and its lineage once stored: a delta on `base` (the manifest `m`
/// was made from) when the module's rules allow, else whole.
pub(crate) fn encode_for_commit(m: &Manifest, base: Option<&Manifest>) -> (Vec<u8>, Lineage) {
    let whole = |m: &Manifest| {
        let bytes = m.to_json();
        let lineage = Lineage {
            depth: 0,
            delta_bytes: 0,
            checkpoint_bytes: bytes.len() as u64,
            checkpoint_format: FORMAT_VERSION,
        };
        (bytes, lineage)
    };
    let Some(base) = base.filter(|b| {
        b.lineage.checkpoint_bytes > 0
            && Some(b.version) == m.parent
            && b.lineage.checkpoint_format >= 3
            && b.lineage.depth < MAX_DEPTH
    }) else {
        return whole(m);
    };
    let Some(mut delta) = Delta::between(&base.fragments, &m.fragments, base.next_fragment_id) else {
        return whole(m);
    };
    delta.base = base.version;
    let bytes = encode(m, None, Some(&delta));
    let delta_bytes = base.lineage.delta_bytes + bytes.len() as u64;
    if delta_bytes > base.lineage.checkpoint_bytes {
        return whole(m);
    }
    let lineage = Lineage { depth: base.lineage.depth + 1, delta_bytes, ..base.lineage };
    (bytes, lineage)
}

fn encode(m: &Manifest, fragments: Option<&SharedVec<Fragment>>, delta: Option<&Delta>) -> Vec<u8> {
    let written = Written {
        format: &m.format,
        // Format 3 unless the manifest has branches' state: readers of format 3 know nothing of
        // lines and would give out row ids another line has.
        format_version: if m.lines.is_some() { FORMAT_VERSION } else { FORMAT_WITHOUT_LINES },
        version: m.version,
        parent: m.parent,
        timestamp_ms: m.timestamp_ms,
        operation: &m.operation,
        message: &m.message,
        next_row_id: m.next_row_id,
        next_fragment_id: m.next_fragment_id,
        schema: &m.schema,
        fragments,
        delta,
        splits: &m.splits,
        classes: &m.classes,
        lines: &m.lines,
    };
    let mut out = serde_json::to_vec(&written).expect("a manifest serialises");
    debug_assert_eq!(out.last(), Some(&b'}'));
    out.pop();
    let sum = crc32fast::hash(&out);
    out.extend_from_slice(SUFFIX_START);
    out.extend_from_slice(format!("{sum:08x}").as_bytes());
    out.extend_from_slice(SUFFIX_END);
    out
}

/// Parses a manifest file read from `path` and checks its checksum (required from format 2
/// on; a manifest written before has none and is read without) and format. A whole manifest
/// still needs [`check`]; a delta needs applying first ([`resolve`]).
///
/// # Errors
/// [`Error::InvalidArgument`] naming `path` for JSON that is not a manifest or a newer format;
/// [`Error::Corrupt`] for a checksum that does not match or is missing.
pub(crate) fn parse(bytes: &[u8], path: &Path) -> Result<Parsed> {
    let bad = |why: String| Error::InvalidArgument { what: format!("manifest {}", path.display()), why };
    let damaged = |what: String| super::integrity::corrupt(path, what);
    // Strictly as a manifest (a field twice is an error).
    let s: Stored = serde_json::from_slice(bytes).map_err(|e| bad(format!("not a manifest: {e}")))?;
    if s.format != FORMAT {
        return Err(bad(format!("format is {:?}, not {FORMAT:?}", s.format)));
    }
    if s.format_version > FORMAT_VERSION {
        return Err(bad(format!(
            "format version {} is newer than this beton's {FORMAT_VERSION}; upgrade beton",
            s.format_version
        )));
    }
    if s.format_version >= 3 {
        verify_suffix(bytes)
            .map_err(|why| damaged(format!("the manifest of version {}: {why}", s.version)))?;
    } else {
        verify_canonical(bytes, s.format_version, s.version).map_err(damaged)?;
    }
    let (fragments, delta) = match (s.fragments, s.delta) {
        (Some(f), None) => (SharedVec::from(f), None),
        (None, Some(d)) if s.format_version >= 3 => (SharedVec::new(), Some(d)),
        (None, None) => return Err(bad("has neither fragments nor a delta".into())),
        _ => return Err(bad("has both fragments and a delta".into())),
    };
    let m = Manifest {
        format: s.format,
        format_version: s.format_version,
        version: s.version,
        parent: s.parent,
        timestamp_ms: s.timestamp_ms,
        operation: s.operation,
        message: s.message,
        next_row_id: s.next_row_id,
        next_fragment_id: s.next_fragment_id,
        schema: s.schema,
        fragments,
        splits: s.splits,
        classes: s.classes,
        lines: s.lines,
        lineage: Lineage {
            depth: 0,
            delta_bytes: 0,
            checkpoint_bytes: bytes.len() as u64,
            checkpoint_format: s.format_version,
        },
    };
    match delta {
        None => Ok(Parsed::Whole(m)),
        Some(d) if Some(d.base) != m.parent => {
            Err(damaged(format!("version {}: its delta is on version {}, not its parent", m.version, d.base)))
        }
        Some(d) => Ok(Parsed::Delta(m, d)),
    }
}

/// A format-3 manifest's checksum: the CRC-32 of the bytes before its fixed-length ending.
fn verify_suffix(bytes: &[u8]) -> std::result::Result<(), String> {
    let Some(body_len) = bytes.len().checked_sub(SUFFIX_LEN) else {
        return Err("it is too short to end in its checksum".into());
    };
    let (body, suffix) = bytes.split_at(body_len);
    let hex = &suffix[SUFFIX_START.len()..SUFFIX_START.len() + 8];
    let stored = std::str::from_utf8(hex).ok().and_then(|h| u32::from_str_radix(h, 16).ok());
    let ends_right = suffix.starts_with(SUFFIX_START)
        && suffix.ends_with(SUFFIX_END)
        && hex.iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
    match stored {
        Some(stored) if ends_right => {
            let actual = crc32fast::hash(body);
            if actual != stored {
                return Err(format!(
                    "its checksum is crc32:{actual:08x}, the manifest says crc32:{stored:08x}: it changed after it \
                     was written"
                ));
            }
            Ok(())
        }
        _ => Err("it does not end in its checksum (,\"checksum\":\"crc32:…\"} and a newline)".into()),
    }
}

/// A format-1 or 2 manifest's checksum: over its JSON value without the checksum, compact, keys
/// sorted (required from format 2 on).
fn verify_canonical(bytes: &[u8], format_version: u32, version: u64) -> std::result::Result<(), String> {
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("version {version}: not JSON: {e}"))?;
    let stored = value.as_object_mut().and_then(|o| o.remove(CHECKSUM_KEY));
    match stored {
        Some(serde_json::Value::String(sum)) => {
            let actual = super::integrity::checksum(&serde_json::to_vec(&value).expect("a JSON value serialises"));
            if actual != sum {
                return Err(format!(
                    "the manifest of version {version}: its checksum is {actual}, the manifest says {sum}: it \
                     changed after it was written"
                ));
            }
            Ok(())
        }
        Some(other) => Err(format!("its checksum is {other}, not a string")),
        None if format_version >= 2 => Err(format!(
            "the manifest of version {version} has no checksum (format {format_version} manifests always have one)"
        )),
        None => Ok(()),
    }
}

/// `delta` applied to its base version's manifest `base` (whole): the manifest `m` (read with
/// the delta) with its fragments, and its lineage.
///
/// # Errors
/// [`Error::Corrupt`] naming `path` (the delta's file) when it does not fit its base.
pub(crate) fn apply(
    mut m: Manifest,
    delta: &Delta,
    base: &Manifest,
    path: &Path,
    bytes: u64,
) -> Result<Manifest> {
    m.fragments = delta
        .apply(&base.fragments)
        .map_err(|why| super::integrity::corrupt(path, format!("version {}: {why}", m.version)))?;
    m.lineage = Lineage {
        depth: base.lineage.depth + 1,
        delta_bytes: base.lineage.delta_bytes + bytes,
        ..base.lineage
    };
    Ok(m)
}

/// Checks a whole manifest (read whole, or with its delta applied) read from `path`: its paths,
/// the consistency of its entries ([`check_manifest`]) and its field types.
///
/// # Errors
/// [`Error::Corrupt`] for a file path outside the directory or entries that contradict each
/// other (naming the version and the entry); [`Error::InvalidArgument`] for a field type this
/// beton does not know.
pub(crate) fn check(m: &Manifest, path: &Path) -> Result<()> {
    let damaged = |what: String| super::integrity::corrupt(path, what);
    for file in m.files().chain(m.copies()) {
        if !is_relative_file(file) {
            return Err(damaged(format!(
                "version {}: file {file:?} is not a plain path inside the dataset directory",
                m.version
            )));
        }
    }
    check_manifest(m).map_err(damaged)?;
    for field in &m.schema {
        field.field_type().map_err(|e| Error::InvalidArgument {
            what: format!("manifest {}", path.display()),
            why: format!("field '{}': {e}", field.name),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::manifest::{ColumnFile, RowIds};
    use super::*;

    fn fragment(id: u64) -> Fragment {
        Fragment {
            id,
            data_file: format!("data/{id}.beton"),
            num_rows: 10,
            data_bytes: Some(100),
            row_ids: RowIds::Range { start: id * 10 },
            deletions: None,
            columns: Vec::new(),
            copy: None,
        }
    }

    #[test]
    fn deltas_express_removals_changes_in_place_and_appends_only() {
        let list = |v: Vec<Fragment>| SharedVec::from(v);
        let base: Vec<Fragment> = (0..5).map(fragment).collect();
        let mut new = base.clone();
        new.remove(1);
        new[2].deletions = Some(FileRef { file: "deletions/x.bidx".into(), count: 1, checksum: None });
        new.push(fragment(7));
        let d = Delta::between(&list(base.clone()), &list(new.clone()), 5).unwrap();
        assert_eq!(d.removed, vec![1]);
        assert_eq!(d.changed.iter().map(|f| f.id).collect::<Vec<_>>(), vec![3]);
        assert_eq!(d.added.iter().map(|f| f.id).collect::<Vec<_>>(), vec![7]);
        assert_eq!(d.apply(&list(base.clone())).unwrap(), list(new));
        // A reordering, or a new fragment before an old one, is not a delta.
        let mut swapped = base.clone();
        swapped.swap(0, 1);
        assert!(Delta::between(&list(base.clone()), &list(swapped), 5).is_none());
        let mut inserted = base.clone();
        inserted.insert(2, fragment(9));
        assert!(Delta::between(&list(base.clone()), &list(inserted), 10).is_none());
        // Applied to the wrong base, it says what does not fit.
        let err = d.apply(&list(base[2..].to_vec())).unwrap_err();
        assert!(err.contains("fragment"), "{err}");
    }

    #[test]
    fn the_walk_in_place_gives_the_delta_by_id_gives() {
        let base: SharedVec<Fragment> = (0..6).map(fragment).collect();
        // An edit's copy: one fragment changed in place, two appended; the others shared.
        let mut new = base.clone();
        new[4].columns.push(ColumnFile {
            file: "columns/c.arrow".into(),
            fields: vec!["x".into()],
            checksum: None,
        });
        new.push(fragment(6));
        new.push(fragment(8));
        let walked = Delta::in_place(&base, &new, 6).unwrap().unwrap();
        assert_eq!(Some(walked.clone()), Delta::by_id(&base, &new));
        assert_eq!(walked.changed.iter().map(|f| f.id).collect::<Vec<_>>(), vec![4]);
        assert_eq!(walked.added.iter().map(|f| f.id).collect::<Vec<_>>(), vec![6, 8]);
        let applied = walked.apply(&base).unwrap();
        assert_eq!(applied, new);
        assert!(applied.same_item(0, &base, 0) && !applied.same_item(4, &base, 4), "unchanged ones shared");
        // Equal copies (not shared) are compared, and not changes.
        let copied: SharedVec<Fragment> = base.to_vec().into();
        assert_eq!(Delta::in_place(&base, &copied, 6).unwrap().unwrap().changed, vec![]);
        // An "added" fragment with an id the parent could have had (a restore's) is left to
        // by_id, which finds it in the parent.
        let restored: SharedVec<Fragment> = (0..6).chain([2]).map(fragment).collect();
        assert!(Delta::in_place(&base, &restored, 6).is_none());
        assert!(Delta::between(&base, &restored, 6).is_none(), "fragment 2 twice is no delta");
        // A removal is left to by_id.
        let mut removed = base.clone();
        removed.retain(|f| f.id != 3);
        assert!(Delta::in_place(&base, &removed, 6).is_none());
        assert_eq!(Delta::between(&base, &removed, 6).unwrap().removed, vec![3]);
    }

    #[test]
    fn a_whole_manifest_round_trips_and_its_checksum_covers_every_byte() {
        let mut m = Manifest::first(Vec::new(), Operation::Create);
        m.next_fragment_id = 5;
        m.next_row_id = 50;
        m.fragments = (0..5).map(fragment).collect();
        let bytes = m.to_json();
        assert!(bytes.ends_with(b"\"}\n"));
        let back = Manifest::from_json(&bytes, Path::new("m")).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.lineage.checkpoint_bytes, bytes.len() as u64);
        for k in 0..bytes.len() {
            let mut b = bytes.clone();
            b[k] ^= 0x01;
            assert!(Manifest::from_json(&b, Path::new("m")).is_err(), "flip at {k} read");
        }
    }

    #[test]
    fn commits_write_deltas_until_the_depth_or_the_checkpoints_size() {
        let mut m = Manifest::first(Vec::new(), Operation::Create);
        m.next_fragment_id = 1000;
        m.next_row_id = 10_000;
        m.fragments = (0..1000).map(fragment).collect();
        let (bytes, lineage) = encode_for_commit(&m, None);
        m.lineage = lineage;
        assert_eq!(m.lineage.depth, 0);
        let checkpoint = bytes.len() as u64;
        let mut depths = Vec::new();
        for k in 0..(2 * MAX_DEPTH) {
            let mut next = m.child(Operation::Delete { predicate: None, rows: 1 }, "");
            let f = &mut next.fragments[(k % 1000) as usize];
            f.deletions = Some(FileRef { file: format!("deletions/{k}.bidx"), count: 1, checksum: None });
            let (bytes, lineage) = encode_for_commit(&next, Some(&m));
            if lineage.depth > 0 {
                // A delta's bytes do not depend on the other fragments.
                assert!((bytes.len() as u64) < checkpoint / 20, "{} of {checkpoint}", bytes.len());
                match parse(&bytes, Path::new("d")).unwrap() {
                    Parsed::Delta(h, d) => {
                        assert_eq!(apply(h, &d, &m, Path::new("d"), bytes.len() as u64).unwrap(), next)
                    }
                    Parsed::Whole(_) => panic!("a delta was expected"),
                }
            }
            depths.push(lineage.depth);
            next.lineage = lineage;
            m = next;
        }
        assert_eq!(depths.iter().filter(|&&d| d == 0).count(), 1, "{depths:?}");
        assert_eq!(*depths.iter().max().unwrap(), MAX_DEPTH);
    }
}
