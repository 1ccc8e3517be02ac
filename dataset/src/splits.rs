//! Named splits: index sets stored inside the `.beton` file by name (train, val, fold-3, …), read
//! back by name, and usable in SQL as `in_split('val')`. The bytes live in the file's split
//! region (beton-storage's `splits` module, FORMAT.md §12), each set in [`IndexSet::to_bytes`]'s
//! form; updating them rewrites only that region, crash-safely.
//!
//! ```no_run
//! use beton_dataset::{splits, IndexSet};
//! use beton_storage::Dataset;
//!
//! let ds = Dataset::open("data.beton")?;
//! let parts = IndexSet::all(ds.num_samples()).split(&[0.9, 0.1], 0)?;
//! splits::save("data.beton", None, [("train", &parts[0]), ("val", &parts[1])])?;
//! let val = splits::get(&ds, "val")?;
//! # Ok::<(), beton_dataset::Error>(())
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use beton_storage::{Dataset, FileId};

use crate::error::{Error, Result};
use crate::index_set::IndexSet;

/// Decodes the blob of split `name` and checks its ids are rows of `ds`.
fn decode(ds: &Dataset, name: &str, bytes: &[u8]) -> Result<IndexSet> {
    let set = IndexSet::from_bytes(bytes).map_err(|e| Error::InvalidArgument {
        what: format!("split '{name}' in {}", ds.path().display()),
        why: e.to_string(),
    })?;
    check_rows(ds.num_samples(), name, &set)?;
    Ok(set)
}

fn check_rows(num_samples: u64, name: &str, set: &IndexSet) -> Result<()> {
    match set.max_id() {
        Some(max) if max >= num_samples => Err(Error::InvalidArgument {
            what: format!("split '{name}'"),
            why: format!("row {max} is past the last row of the dataset ({num_samples} rows)"),
        }),
        _ => Ok(()),
    }
}

/// Every split of `ds`, by name.
///
/// # Errors
/// Storage errors reading the split region; [`Error::InvalidArgument`] for a stored set that
/// does not decode or names rows the dataset does not have.
pub fn all(ds: &Dataset) -> Result<BTreeMap<String, IndexSet>> {
    ds.splits()?.iter().map(|(name, bytes)| Ok((name.clone(), decode(ds, name, bytes)?))).collect()
}

/// The names of the splits of `ds`, ascending.
///
/// # Errors
/// Storage errors reading the split region.
pub fn names(ds: &Dataset) -> Result<Vec<String>> {
    Ok(ds.splits()?.into_keys().collect())
}

/// Split `name` of `ds`.
///
/// # Errors
/// [`Error::NoSuchSplit`] listing the splits there are; as [`all`] otherwise.
pub fn get(ds: &Dataset, name: &str) -> Result<IndexSet> {
    let mut stored = ds.splits()?;
    match stored.remove(name) {
        Some(bytes) => decode(ds, name, &bytes),
        None => Err(no_such_split(name, stored.keys())),
    }
}

/// Checks a split name: storage's rules (1 to 64 ASCII letters, digits, `_ - . : =`), and not
/// one of beton's reserved entry names (starting with `:`, e.g. the class names).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the rule broken.
pub fn check_name(name: &str) -> Result<()> {
    beton_storage::splits::check_name(name)?;
    if beton_storage::splits::is_reserved(name) {
        return Err(Error::InvalidArgument {
            what: format!("split name {name:?}"),
            why: format!(
                "names starting with '{}' are reserved for beton's own entries (the class names)",
                beton_storage::splits::RESERVED_PREFIX
            ),
        });
    }
    Ok(())
}

pub(crate) fn no_such_split<'n>(name: &str, names: impl Iterator<Item = &'n String>) -> Error {
    let names: Vec<&str> = names.map(String::as_str).collect();
    Error::NoSuchSplit {
        name: name.to_string(),
        available: if names.is_empty() { "(none)".into() } else { names.join(", ") },
    }
}

/// Adds or replaces the named splits of the file at `path`, all in one crash-safe update: after
/// a crash the file has either all of them or its old splits. Other splits are kept.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad name or rows past the end of the dataset;
/// `NoRoomForSplits` from storage when they do not fit (the file is unchanged); I/O errors.
///
/// With `opened` (a handle's `Dataset::file_id`), nothing is written unless `path` still holds
/// the file that handle opened (`FileReplaced` from storage otherwise).
pub fn save<'s>(
    path: impl AsRef<Path>,
    opened: Option<FileId>,
    sets: impl IntoIterator<Item = (&'s str, &'s IndexSet)>,
) -> Result<()> {
    let path = path.as_ref();
    let num_samples = Dataset::open(path)?.num_samples();
    let mut encoded = Vec::new();
    for (name, set) in sets {
        check_name(name)?;
        check_rows(num_samples, name, set)?;
        encoded.push((name.to_string(), set.to_bytes()));
    }
    beton_storage::update_splits(path, opened, |stored| {
        stored.extend(encoded);
        Ok(())
    })?;
    crate::columnar::refresh(path);
    Ok(())
}

/// Removes the named splits of the file at `path` in one crash-safe update.
///
/// # Errors
/// [`Error::NoSuchSplit`] if one of them does not exist (nothing is removed then); I/O errors.
/// `opened` as for [`save`].
pub fn remove<'s>(
    path: impl AsRef<Path>,
    opened: Option<FileId>,
    names: impl IntoIterator<Item = &'s str>,
) -> Result<()> {
    let path = path.as_ref();
    let names: Vec<&str> = names.into_iter().collect();
    let mut missing = None;
    beton_storage::update_splits(path, opened, |stored| {
        if let Some(name) = names.iter().find(|n| !stored.contains_key(**n)) {
            let err = no_such_split(name, stored.keys());
            let placeholder =
                beton_storage::Error::InvalidArgument { what: "split".into(), why: err.to_string() };
            missing = Some(err);
            return Err(placeholder);
        }
        for name in &names {
            stored.remove(*name);
        }
        Ok(())
    })
    .map_err(|e| missing.take().unwrap_or(Error::Storage(e)))?;
    crate::columnar::refresh(path);
    Ok(())
}
