//! `beton verify DIR`: every version of a dataset directory checked, every file each one names
//! present, inside the directory and matching its checksum, the entries consistent with each
//! other and with the files (row counts, ids, column lengths, splits), each data file's
//! structure verified once, and every tag naming a version there is.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use beton_storage::{Dataset, OpenOptions};

use super::commit::{list_versions, read_manifest_on, Line};
use super::manifest::Manifest;
use super::{integrity, read_tag_targets, view, VersionedDataset};
use crate::error::{Error, Result};
use crate::store::Store;

/// What [`verify_dir`] checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirReport {
    /// Versions checked.
    pub versions: u64,
    /// Distinct data files checked (structure, and every row).
    pub data_files: u64,
    /// Distinct other files checked (deletion, row-id, split and column files).
    pub other_files: u64,
    /// Rows of the data files checked.
    pub samples: u64,
    /// Allocations of the data files checked.
    pub allocations: u64,
    /// Images decoded (with `decode_images`).
    pub images_decoded: u64,
    /// Every problem found, each naming the version or file: none for a sound dataset.
    pub problems: Vec<String>,
}

/// Checks every version of the dataset at `dir` (a directory or a URL). `progress` is called
/// with what is being checked (`version 3`, `data file data/x.beton`).
///
/// # Errors
/// [`Error::InvalidArgument`] when `dir` is not a dataset; I/O errors listing its versions.
/// Problems of the dataset's files are not errors: they are listed in the report.
pub fn verify_dir(dir: &Path, decode_images: bool, progress: &dyn Fn(&str)) -> Result<DirReport> {
    if !VersionedDataset::is_dataset_dir(dir) {
        return Err(Error::InvalidArgument {
            what: format!("dataset {}", dir.display()),
            why: "is not a dataset directory (it has no _versions folder)".into(),
        });
    }
    let store = crate::store::open(dir)?;
    let mut report = DirReport::default();
    if list_versions(&*store)?.is_empty() {
        report.problems.push("no committed version (_versions/ holds no manifest)".into());
    }
    // Main's versions, then each branch's own (a deleted branch's too, while it has some).
    let mut versions: Vec<(Line, u64)> = Vec::new();
    for line in super::lines::all_lines(&*store)? {
        for v in super::commit::list_own_versions(&*store, &line)? {
            versions.push((line.clone(), v));
        }
    }
    // Each file's problem (None: sound), by (file, checksum): a file named by many versions is
    // read once.
    let mut files: HashMap<(String, Option<String>), Option<String>> = HashMap::new();
    let mut data_files: HashMap<String, Option<String>> = HashMap::new();
    let mut presence = Presence::new(&*store);
    for (line, v) in &versions {
        let v = *v;
        // "version 7" on main, "line bXXXX (branch fix) version 7" on a branch's line.
        let label = match &line.id {
            None => format!("version {v}"),
            Some(id) => format!("line {id} (branch {}) version {v}", line.branch.as_deref().unwrap_or("?")),
        };
        progress(&label);
        report.versions += 1;
        let m = match read_manifest_on(&*store, line, v) {
            Ok(m) => m,
            Err(e) => {
                report.problems.push(format!("{label}: {e}"));
                continue;
            }
        };
        let mut sound = true;
        for (rel, checksum) in named_files(&m) {
            let problem = files.entry((rel.to_string(), checksum.clone())).or_insert_with(|| {
                report.other_files += 1;
                check_file(&*store, rel, checksum.as_deref(), &mut presence).err()
            });
            if let Some(p) = problem {
                report.problems.push(format!("{label}: {p}"));
                sound = false;
            }
        }
        for f in &m.fragments {
            let problem = data_files.entry(f.data_file.clone()).or_insert_with(|| {
                progress(&format!("data file {}", f.data_file));
                report.data_files += 1;
                check_data_file(&*store, &f.data_file, decode_images, &mut report, &mut presence).err()
            });
            if let Some(p) = problem {
                report.problems.push(format!("{label}: {p}"));
                sound = false;
            }
        }
        // The version whole: row counts, ids, column lengths, splits, against the files.
        if sound {
            let version = VersionedDataset { store: Arc::clone(&store), line: line.clone(), manifest: m };
            let whole = version.view().and_then(|view| view.table().map(|_| ()));
            if let Err(e) = whole {
                report.problems.push(format!("{label}: {e}"));
            }
        }
    }
    let there: BTreeSet<(Option<String>, u64)> = versions.iter().map(|(l, v)| (l.id.clone(), *v)).collect();
    match read_tag_targets(&*store) {
        Ok(tags) => {
            for (name, tag) in tags {
                // A tag on a branch's line may name a version of a line it starts from.
                let found = match Line::by_id(&*store, tag.line.as_deref()) {
                    Ok(line) => there.contains(&(line.line_of(tag.version).id, tag.version)),
                    Err(_) => false,
                };
                if !found {
                    report
                        .problems
                        .push(format!("tag '{name}' names version {}, which is not there", tag.version));
                }
            }
        }
        Err(e) => report.problems.push(format!("tags: {e}")),
    }
    Ok(report)
}

/// The files a version names besides its data files, with their checksums.
fn named_files(m: &Manifest) -> Vec<(&str, Option<String>)> {
    use super::manifest::RowIds;
    let mut out = Vec::new();
    for f in &m.fragments {
        if let RowIds::File { file, checksum } = &f.row_ids {
            out.push((file.as_str(), checksum.clone()));
        }
        if let Some(d) = &f.deletions {
            out.push((d.file.as_str(), d.checksum.clone()));
        }
        for c in &f.columns {
            out.push((c.file.as_str(), c.checksum.clone()));
        }
    }
    for s in m.splits.values() {
        out.push((s.file.as_str(), s.checksum.clone()));
    }
    out
}

/// Which files of a dataset are there: in the directory, or for a mirror in the store (one
/// listing per folder; the mirror may keep a copy of a file the store lost).
struct Presence<'a> {
    store: &'a dyn Store,
    listed: HashMap<String, BTreeSet<String>>,
}

impl<'a> Presence<'a> {
    fn new(store: &'a dyn Store) -> Presence<'a> {
        Presence { store, listed: HashMap::new() }
    }

    /// Whether `rel` is there (a file leading outside the directory is not).
    fn has(&mut self, rel: &str) -> Result<bool> {
        match rel.split_once('/') {
            Some((folder, name)) if self.store.url().is_some() => {
                if !self.listed.contains_key(folder) {
                    let names = self.store.list(folder)?;
                    self.listed.insert(folder.to_string(), names.into_iter().collect());
                }
                Ok(self.listed[folder].contains(name))
            }
            _ => Ok(matches!(integrity::inside(self.store.root(), rel), Ok(p) if p.is_file())),
        }
    }
}

/// A file present, inside the directory and matching its checksum.
fn check_file(
    store: &dyn Store,
    rel: &str,
    checksum: Option<&str>,
    presence: &mut Presence<'_>,
) -> std::result::Result<(), String> {
    let path = integrity::inside(store.root(), rel).map_err(|e| e.to_string())?;
    if !presence.has(rel).map_err(|e| e.to_string())? {
        return Err(format!("{rel} is missing"));
    }
    let bytes = match super::commit::read_file(store, rel) {
        Ok(Some(b)) => b,
        Ok(None) => return Err(format!("{rel} is missing")),
        Err(e) => return Err(e.to_string()),
    };
    integrity::verify(&path, &bytes, checksum).map_err(|e| e.to_string())
}

/// A data file present, inside the directory, and sound: its structure and every row.
fn check_data_file(
    store: &dyn Store,
    rel: &str,
    decode_images: bool,
    report: &mut DirReport,
    presence: &mut Presence<'_>,
) -> std::result::Result<(), String> {
    let path = view::data_file(store, rel).map_err(|e| e.to_string())?;
    if !presence.has(rel).map_err(|e| e.to_string())? {
        return Err(format!("data file {rel} is missing"));
    }
    let ds: Dataset = match OpenOptions::new().open(&path) {
        Ok(ds) => ds,
        Err(beton_storage::Error::RemoteNotFound { .. }) => {
            return Err(format!("data file {rel} is missing"))
        }
        Err(e) => return Err(format!("data file {rel}: {e}")),
    };
    let checked = beton_storage::verify(&ds, decode_images).map_err(|e| format!("data file {rel}: {e}"))?;
    report.samples += checked.samples;
    report.allocations += checked.allocations;
    report.images_decoded += checked.images_decoded;
    Ok(())
}

impl VersionedDataset {
    /// The files this version names that are not there (missing, or leading outside the
    /// directory), relative to the directory: what `beton info` refuses to call a whole
    /// version. One listing per folder on object storage.
    ///
    /// # Errors
    /// I/O and remote errors listing.
    pub fn missing_files(&self) -> Result<Vec<String>> {
        let mut presence = Presence::new(&*self.store);
        let mut missing = Vec::new();
        for rel in self.manifest().files() {
            if !presence.has(rel)? {
                missing.push(rel.to_string());
            }
        }
        Ok(missing)
    }
}
