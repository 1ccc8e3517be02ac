//! What keeps a dataset directory's metadata from being read as different data
//! (docs/FORMAT.md §13, "Integrity"): the checksum of each manifest and of each deletion,
//! row-id, split and column file it names, verified on every read; the length of each data
//! file; the consistency of a manifest's entries (no file, fragment or row id twice, counts that
//! fit); and files that must stay inside the directory (no symbolic link leading out).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::manifest::{Manifest, RowIds};
use crate::error::{Error, Result};

/// Column files up to this size are checked against their checksum whenever they are read;
/// a larger one (a column of images, say) is read as it is used, like a data file, and its
/// checksum is checked by `beton verify` (what reading every byte at each open would cost).
/// Deletion, row-id and split files are always checked.
pub const CHECKED_ON_READ: u64 = 64 << 20;

/// The checksum of `bytes` as manifests write it: `crc32:` and the CRC-32 (ISO-HDLC, zlib's)
/// in 8 lowercase hex digits.
pub fn checksum(bytes: &[u8]) -> String {
    format!("crc32:{:08x}", crc32fast::hash(bytes))
}

/// Fails with [`Error::Corrupt`] naming `path` when `bytes` do not have the checksum `expected`
/// (none: a file named by a manifest written before checksums, not checked).
pub(crate) fn verify(path: &Path, bytes: &[u8], expected: Option<&str>) -> Result<()> {
    let Some(expected) = expected else { return Ok(()) };
    if !expected.starts_with("crc32:") {
        return Err(corrupt(
            path,
            format!("the manifest gives its checksum as {expected:?}, not crc32:<8 hex digits>"),
        ));
    }
    let actual = checksum(bytes);
    if actual != expected {
        return Err(corrupt(
            path,
            format!("its checksum is {actual}, the manifest says {expected}: the file changed after it was written"),
        ));
    }
    Ok(())
}

/// [`Error::Corrupt`] naming `path`.
pub(crate) fn corrupt(path: &Path, what: String) -> Error {
    Error::Corrupt { path: path.to_path_buf(), what }
}

/// `dir/rel`, refused when it resolves (through symbolic links) outside `dir`: a dataset
/// unpacked from an archive must not read `/etc/...`. A path that does not exist is returned as
/// it is (opening it then says it is missing).
///
/// # Errors
/// [`Error::Corrupt`] naming the link and where it leads.
pub(crate) fn inside(dir: &Path, rel: &str) -> Result<PathBuf> {
    let path = dir.join(rel);
    // `rel` is plain components (the manifest's paths are checked): without a link on the way,
    // the path is inside. (Two lstat calls for `data/x.beton`, not two realpath walks.)
    let mut at = dir.to_path_buf();
    let linked = rel.split('/').any(|part| {
        part == ".." || {
            at.push(part);
            std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink())
        }
    });
    if !linked {
        return Ok(path);
    }
    let Ok(target) = std::fs::canonicalize(&path) else { return Ok(path) };
    let root = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    if !target.starts_with(&root) {
        return Err(corrupt(
            &path,
            format!(
                "leads outside the dataset directory (to {}) through a symbolic link; a dataset's \
                 files must be inside it",
                target.display()
            ),
        ));
    }
    Ok(path)
}

/// Checks that a manifest's entries agree with each other: no data file or other file named
/// twice, no fragment id twice, row-id ranges that do not overlap, ids and counts below the
/// manifest's bounds, column files naming schema fields, no field twice in the schema, totals
/// that fit in 64 bits. Returns what is wrong, naming the version and the entry.
pub(crate) fn check_manifest(m: &Manifest) -> std::result::Result<(), String> {
    let v = m.version;
    let bad = |why: String| Err(format!("version {v}: {why}"));
    match m.parent {
        _ if v == 0 => return Err("version 0: versions start at 1".into()),
        None if v != 1 => return bad("has no parent version; only version 1 has none".into()),
        Some(p) if p.checked_add(1) != Some(v) => {
            return bad(format!("its parent is version {p}, not {}", v - 1))
        }
        _ => {}
    }
    let mut names = BTreeMap::new();
    for (k, field) in m.schema.iter().enumerate() {
        if let Some(first) = names.insert(field.name.as_str(), k) {
            return bad(format!("field '{}' is in the schema twice (fields {first} and {k})", field.name));
        }
    }
    // Every file a version names, with the entry naming it.
    let mut files: HashMap<&str, String> = HashMap::new();
    let mut ids: HashMap<u64, usize> = HashMap::new();
    let mut ranges = Vec::new();
    let mut total = 0u64;
    for (k, f) in m.fragments.iter().enumerate() {
        let entry = format!("fragment {} (data file {})", f.id, f.data_file);
        if let Some(first) = ids.insert(f.id, k) {
            return bad(format!("fragments {first} and {k} both have id {}", f.id));
        }
        if f.id >= m.next_fragment_id {
            return bad(format!("{entry} has an id at or past next_fragment_id {}", m.next_fragment_id));
        }
        let deleted = f.deletions.as_ref().map_or(0, |d| d.count);
        if deleted > f.num_rows {
            return bad(format!("{entry} deletes {deleted} rows of its {} rows", f.num_rows));
        }
        total = match total.checked_add(f.num_rows - deleted) {
            Some(t) => t,
            None => return bad("its rows add up to more than 2^64".into()),
        };
        if let RowIds::Range { start } = f.row_ids {
            match start.checked_add(f.num_rows) {
                Some(end) if end <= m.next_row_id => {
                    if f.num_rows > 0 {
                        ranges.push((start, end, entry.clone()));
                    }
                }
                _ => return bad(format!("{entry} has row ids at or past next_row_id {}", m.next_row_id)),
            }
        }
        let mut named = vec![(f.data_file.as_str(), format!("the data file of {entry}"))];
        if let RowIds::File { file, .. } = &f.row_ids {
            named.push((file.as_str(), format!("the row-id file of {entry}")));
        }
        if let Some(d) = &f.deletions {
            named.push((d.file.as_str(), format!("the deletion file of {entry}")));
        }
        for c in &f.columns {
            named.push((c.file.as_str(), format!("a column file of {entry}")));
            if c.fields.is_empty() {
                return bad(format!("column file {} of {entry} holds no field", c.file));
            }
            for name in &c.fields {
                if !names.contains_key(name.as_str()) {
                    return bad(format!(
                        "column file {} of {entry} holds field '{name}', which is not in the schema",
                        c.file
                    ));
                }
            }
        }
        for (file, what) in named {
            if let Some(first) = files.insert(file, what.clone()) {
                return bad(format!(
                    "{file} is both {first} and {what}; each file has one place in a version"
                ));
            }
        }
    }
    for (name, s) in &m.splits {
        let what = format!("the file of split '{name}'");
        if s.count > m.next_row_id {
            return bad(format!(
                "split '{name}' has {} row ids, more than next_row_id {}",
                s.count, m.next_row_id
            ));
        }
        if let Some(first) = files.insert(s.file.as_str(), what.clone()) {
            return bad(format!(
                "{} is both {first} and {what}; each file has one place in a version",
                s.file
            ));
        }
    }
    ranges.sort();
    for pair in ranges.windows(2) {
        let ((_, end, a), (start, _, b)) = (&pair[0], &pair[1]);
        if start < end {
            return bad(format!("{a} and {b} have overlapping row ids (from {start})"));
        }
    }
    Ok(())
}

/// Fails naming the fragment when the row-id spans of a version's fragments (first and last id
/// of each, `None` for an empty one) overlap.
pub(crate) fn check_spans(dir: &Path, m: &Manifest, spans: &[Option<(u64, u64)>]) -> Result<()> {
    let mut sorted: Vec<(u64, u64, usize)> =
        spans.iter().enumerate().filter_map(|(k, s)| s.map(|(a, b)| (a, b, k))).collect();
    sorted.sort_unstable();
    for pair in sorted.windows(2) {
        let ((_, last, a), (first, _, b)) = (pair[0], pair[1]);
        if first <= last {
            let (fa, fb) = (&m.fragments[a], &m.fragments[b]);
            return Err(corrupt(
                &dir.join(super::commit::manifest_name(m.version)),
                format!(
                    "version {}: fragments {} and {} have overlapping row ids (row id {first})",
                    m.version, fa.id, fb.id
                ),
            ));
        }
    }
    Ok(())
}

/// Fails with [`Error::InvalidArgument`] unless version `m` has row ids left for new data files
/// of `rows` rows each, fragment ids for them and a version number after it: checked before an
/// edit writes anything.
pub(crate) fn room_for(m: &Manifest, rows: impl IntoIterator<Item = u64>) -> Result<()> {
    let mut next_row_id = m.next_row_id;
    let mut next_fragment_id = m.next_fragment_id;
    let refuse = |why: String| Error::InvalidArgument {
        what: format!("an edit of version {}", m.version),
        why: format!("{why}; nothing was written"),
    };
    for n in rows {
        next_row_id = next_row_id.checked_add(n).ok_or_else(|| {
            refuse(format!("{n} more rows would take row ids past 2^64 - 1 (the next is {})", m.next_row_id))
        })?;
        next_fragment_id = next_fragment_id.checked_add(1).ok_or_else(|| {
            refuse(format!(
                "a data file more would take fragment ids past 2^64 - 1 (the next is {})",
                m.next_fragment_id
            ))
        })?;
    }
    room_for_version(m)
}

/// Fails with [`Error::InvalidArgument`] when `m` is the largest version number there can be.
pub(crate) fn room_for_version(m: &Manifest) -> Result<()> {
    match m.next_version() {
        Some(_) => Ok(()),
        None => Err(Error::InvalidArgument {
            what: format!("an edit of version {}", m.version),
            why: "it is the largest version number there can be (2^64 - 1); nothing was written".into(),
        }),
    }
}
