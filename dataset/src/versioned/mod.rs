//! Versioned datasets: a directory of immutable FFCV data files, deletion files, column files and
//! one manifest per version (docs/FORMAT.md §13). Every edit commits a new version atomically;
//! old versions stay readable until `cleanup` drops them.
//!
//! Concurrency follows Lance's model: a writer prepares its new files, then publishes the next
//! version's manifest with no-overwrite semantics ([`commit::publish`]). When another writer
//! got there first, the edit is checked against what was committed meanwhile ([`Touches`]):
//! compatible edits (two appends, two deletes, updates of different fields or fragments) are
//! re-applied on the newer version and retried; others fail with [`Error::Conflict`].

mod append;
pub mod branch;
pub mod classes;
mod cleanup;
pub mod commit;
pub mod conflict;
pub mod diff;
mod edits;
mod export;
mod fit;
pub mod imagefolder;
pub mod integrity;
pub mod layout;
pub mod lines;
pub mod lock;
pub mod manifest;
mod marks;
pub mod merge;
mod stored;
pub mod values;
pub mod verify;
pub mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use beton_storage::FieldType;

use crate::error::{Error, Result};
use crate::index_set::IndexSet;
use crate::store::{self, ObjectStore, Store};
use commit::{
    io, list_versions, list_versions_on, publish_on, read_manifest_on, write_new_file, Line, Published,
    TAGS_DIR,
};
pub use diff::{diff, diff_views, Diff};
use export::null_patches;
pub use imagefolder::{ImageFolderOptions, ImageFolderReport};
pub use manifest::{ColumnFile, FileRef, Fragment, Manifest, Operation, RowIds, SchemaField};
pub use verify::{verify_dir, DirReport};
pub use view::VersionView;

pub use layout::{COLUMNS_DIR, DATA_DIR, DELETIONS_DIR, ROW_IDS_DIR, SPLITS_DIR};

/// Commits given up after this many lost races in a row.
pub const MAX_RETRIES: usize = 64;

/// How long opening the latest version keeps looking when each latest it lists is gone by the
/// time it reads it (`open_latest`).
const OPEN_LATEST_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// What [`VersionedDataset::cleanup`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Versions whose manifests were removed.
    pub versions: Vec<u64>,
    /// Files removed, relative to the dataset directory.
    pub files: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
}

/// How [`VersionedDataset::export`], [`VersionedDataset::compact`] and
/// [`VersionedDataset::concat`] write the rows they copy.
#[derive(Clone, Default)]
pub struct ExportOptions {
    /// Writer threads; 0 uses every core. The output does not depend on it.
    pub num_threads: usize,
    /// Called as rows are written (`done` of `total` rows); returning `false` cancels the write,
    /// which then fails with [`beton_storage::Error::Cancelled`] and publishes nothing.
    pub progress: Option<beton_storage::writer::ProgressFn>,
}

impl ExportOptions {
    /// Options writing with `num_threads` threads, without progress.
    pub fn with_threads(num_threads: usize) -> ExportOptions {
        ExportOptions { num_threads, progress: None }
    }
}

impl std::fmt::Debug for ExportOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportOptions")
            .field("num_threads", &self.num_threads)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// Which version to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionRef {
    /// The newest.
    Latest,
    /// Version `n`.
    Number(u64),
    /// The version a tag names.
    Tag(String),
}

/// What an edit read and changes, to decide whether it still holds on a newer version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touches {
    /// The edit changes the schema or depends on it staying the same (add or drop a column,
    /// restore, compact): any change of schema or fragments since is a conflict.
    pub everything: bool,
    /// Fragments whose rows the edit deletes: they must still exist.
    pub deletes_in: Vec<u64>,
    /// (fragment, field) cells the edit rewrites: no one else may have rewritten them since.
    pub cells: Vec<(u64, String)>,
}

/// One version of a dataset directory, opened.
#[derive(Debug, Clone)]
pub struct VersionedDataset {
    /// Where its files are: the handle's store, shared by the versions opened from it.
    store: Arc<dyn Store>,
    /// The line of versions it is on: main, or a branch's (branch.rs).
    line: Line,
    manifest: Manifest,
}

impl VersionedDataset {
    /// True when `path` is a dataset directory (it has a `_versions` folder; at a URL that does
    /// not end in `.beton`, the store has a version). For a URL whose listing fails, false:
    /// [`VersionedDataset::probe`] says why.
    pub fn is_dataset_dir(path: &Path) -> bool {
        Self::probe(path).unwrap_or(false)
    }

    /// [`VersionedDataset::is_dataset_dir`], with the errors of a URL's listing: refused access
    /// and a store that cannot be reached are errors naming the listing's URL, not "not a
    /// dataset" (see [`has_versions`]).
    ///
    /// # Errors
    /// Remote errors of the listing of `_versions/` at a URL.
    pub fn probe(path: &Path) -> Result<bool> {
        if store::is_url(path) {
            // A `.beton` URL is a file: no listing of its `_versions/` for every open.
            let file = path.to_str().is_some_and(|p| p.trim_end_matches('/').ends_with(".beton"));
            return Ok(!file && has_versions(path)?);
        }
        Ok(Self::is_local_dataset_dir(path))
    }

    fn is_local_dataset_dir(path: &Path) -> bool {
        // A mirror of a URL: a dataset when the store has a version.
        if let Some(mirrored) = ObjectStore::of_mirror(path) {
            return list_versions(&mirrored).is_ok_and(|v| !v.is_empty());
        }
        path.join(commit::VERSIONS_DIR).is_dir()
    }

    /// Where the dataset is: its URL (ending in `/`) for one on object storage, else its
    /// directory.
    pub fn location(&self) -> String {
        self.store.location()
    }

    /// Creates an empty dataset with `schema` at `dir` (made if missing; it must not already be
    /// a dataset).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `dir` is a dataset already or a file; I/O errors.
    pub fn create(dir: &Path, schema: &[(String, FieldType)]) -> Result<VersionedDataset> {
        let schema = schema.iter().map(|(n, t)| SchemaField::new(n, t)).collect();
        Self::create_with(store::open(dir)?, Manifest::first(schema, Operation::Create))
    }

    fn create_with(store: Arc<dyn Store>, mut manifest: Manifest) -> Result<VersionedDataset> {
        let dir = store.root();
        if dir.is_file() {
            return Err(Error::InvalidArgument {
                what: format!("dataset directory {}", store.location()),
                why: "is a file".into(),
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let _edit = lock::edit(dir)?;
        match publish_on(&*store, &Line::main(), &mut manifest, None)? {
            Published::Done => Ok(VersionedDataset { store, line: Line::main(), manifest }),
            Published::Taken => Err(Error::InvalidArgument {
                what: format!("dataset directory {}", store.location()),
                why: "is a dataset already".into(),
            }),
        }
    }

    /// A new dataset directory `dir` holding the rows of `sources` in order, as **one version**
    /// (version 1), whatever their number: `.beton` files (hard-linked, never re-encoded) or
    /// dataset directories (their latest versions, exported once into a data file of `dir`, with
    /// `options`). The schema, splits and class names are the first source's; each further
    /// source's fields must include the first's (as [`VersionedDataset::append_file`] says),
    /// its class names must extend them, and a schema field it lacks is NULL in its rows.
    ///
    /// `options.progress` counts the rows of all sources: an exported source's as they are
    /// written, a linked file's at once. When it cancels, nothing is committed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no sources or a `dir` that is a dataset already; as
    /// [`VersionedDataset::import`], [`VersionedDataset::export`] and
    /// [`VersionedDataset::append_file`].
    pub fn concat(
        dir: &Path,
        sources: &[PathBuf],
        message: &str,
        options: &ExportOptions,
    ) -> Result<VersionedDataset> {
        use beton_storage::Progress;
        let store = store::open(dir)?;
        let dir = store.root();
        if sources.is_empty() {
            return Err(Error::InvalidArgument {
                what: "concat".into(),
                why: "no source to concatenate".into(),
            });
        }
        // Refused before any export: the one commit would be refused after it.
        if committed(&*store)? {
            return Err(already_a_dataset(&*store));
        }
        // Every source's rows first, for a total the progress can count towards.
        let mut opened = Vec::with_capacity(sources.len());
        for source in sources {
            opened.push(match Self::is_dataset_dir(source) {
                true => {
                    let v = Self::open(source, VersionRef::Latest)?;
                    (v.num_rows(), Some(v))
                }
                // Counted only: its structure is checked when it is linked.
                false => {
                    let ds = beton_storage::OpenOptions::new().defer_allocation_checks(true).open(source)?;
                    (ds.num_samples(), None)
                }
            });
        }
        let total: u64 = opened.iter().map(|(n, _)| n).sum();
        let mut done = 0u64;
        // Held from the first exported source on: a cleanup must not take it from _tmp/ before
        // it is linked into data/.
        let mut held = None;
        // Each source as a file, with the column files marking its NULLs; exported ones are
        // removed whatever happens.
        let mut files: Vec<(PathBuf, Vec<ColumnFile>)> = Vec::with_capacity(sources.len());
        let mut exported = Exported(Vec::new());
        for (k, (source, (rows, version))) in sources.iter().zip(opened).enumerate() {
            match version {
                // A dataset directory: its latest version as one file, in `dir`'s own _tmp/ (then
                // hard-linked into data/).
                Some(v) => {
                    let tmp = dir.join(commit::TMP_DIR);
                    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
                    if held.is_none() {
                        held = Some(lock::edit(dir)?);
                    }
                    let file = tmp.join(format!("concat-{k}-{}.beton", commit::unique_name()));
                    let progress = options.progress.clone().map(|outer| {
                        let offset = done;
                        let inner: beton_storage::writer::ProgressFn =
                            std::sync::Arc::new(move |p: Progress| {
                                outer(Progress { done: offset + p.done, total: Some(total) })
                            });
                        inner
                    });
                    let export = ExportOptions { num_threads: options.num_threads, progress };
                    exported.0.push(file.clone());
                    let copied = v.export(&file, None, &export)?;
                    // Its NULLs stay NULLs in the concatenation.
                    let nulls = null_patches(dir, &v.view()?.schema()?, &copied.filled)?;
                    files.push((file, nulls));
                }
                None => files.push((source.clone(), Vec::new())),
            }
            done += rows;
            if let Some(progress) = &options.progress {
                if !progress(Progress { done, total: Some(total) }) {
                    return Err(beton_storage::Error::Cancelled { done, path: dir.to_path_buf() }.into());
                }
            }
        }
        let description = sources.iter().map(|s| s.display().to_string()).collect::<Vec<_>>().join(", ");
        Self::import_files(store, &files, &description, message)
    }

    /// Makes `dir` a dataset whose version 1 is the `.beton` file `file`: the file is hard-linked
    /// into `data/` (copied when it is on another file system; never re-encoded), and its named
    /// splits become the version's splits.
    ///
    /// # Errors
    /// Storage errors opening `file`; [`Error::InvalidArgument`] for a file with custom fields
    /// (their layout is not stored) or a `dir` that is a dataset already.
    pub fn import(dir: &Path, file: &Path) -> Result<VersionedDataset> {
        Self::import_files(
            store::open(dir)?,
            &[(file.to_path_buf(), Vec::new())],
            &file.display().to_string(),
            "",
        )
    }

    /// Opens version `at` of the dataset at `dir`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a directory that is not a dataset, a version or tag it does
    /// not have, or a manifest that is not valid.
    pub fn open(dir: &Path, at: VersionRef) -> Result<VersionedDataset> {
        Self::open_in(store::open(dir)?, at)
    }

    /// Version `at` of the same dataset, through this handle's store.
    ///
    /// # Errors
    /// As [`VersionedDataset::open`].
    pub fn open_at(&self, at: VersionRef) -> Result<VersionedDataset> {
        Self::open_on(Arc::clone(&self.store), self.line.clone(), at)
    }

    fn open_in(store: Arc<dyn Store>, at: VersionRef) -> Result<VersionedDataset> {
        Self::open_on(store, Line::main(), at)
    }

    /// Version `at` of `line` (a tag names its own line).
    pub(crate) fn open_on(store: Arc<dyn Store>, line: Line, at: VersionRef) -> Result<VersionedDataset> {
        // (A mirror's versions are listed once, below: reading the latest or the manifest.)
        if store.url().is_none() && !store.root().join(commit::VERSIONS_DIR).is_dir() {
            return Err(Error::InvalidArgument {
                what: format!("dataset {}", store.location()),
                why: "is not a dataset directory (it has no _versions folder)".into(),
            });
        }
        let (line, version) = match at {
            VersionRef::Latest => return Self::open_latest(store, line),
            VersionRef::Number(n) => (line, n),
            VersionRef::Tag(name) => {
                let tag = read_tag_targets(&*store)?.remove(&name).ok_or_else(|| Error::InvalidArgument {
                    what: "tag".into(),
                    why: format!("{} has no tag '{name}'", store.location()),
                })?;
                (lines::tag_line(&*store, &tag)?, tag.version)
            }
        };
        let manifest = read_manifest_on(&*store, &line, version)?;
        Ok(VersionedDataset { store, line, manifest })
    }

    /// The latest version: a cleanup may remove the version listed as the latest once a newer
    /// one is committed, so one removed between the listing and the read is looked for again.
    fn open_latest(store: Arc<dyn Store>, line: Line) -> Result<VersionedDataset> {
        // The version listed as the latest can be gone when it is read: a newer one was committed
        // and a cleanup elsewhere removed it. Look again while each look finds a newer one,
        // pausing a little after the first tries (a reader on a loaded machine, racing a writer
        // and two cleanups, lost 64 tries in a row once), for at most OPEN_LATEST_PATIENCE.
        let start = std::time::Instant::now();
        let mut tries = 0u64;
        loop {
            let version = latest(&*store, &line)?;
            match read_manifest_on(&*store, &line, version) {
                Ok(manifest) => return Ok(VersionedDataset { store, line, manifest }),
                Err(e) => {
                    if latest(&*store, &line)? <= version || start.elapsed() > OPEN_LATEST_PATIENCE {
                        return Err(e);
                    }
                    tries += 1;
                    if tries > 8 {
                        std::thread::sleep(std::time::Duration::from_millis(tries.min(20)));
                    }
                }
            }
        }
    }

    /// The local directory of the dataset's files: the dataset directory, or the mirror of a
    /// dataset on object storage ([`Store::root`]).
    pub fn dir(&self) -> &Path {
        self.store.root()
    }

    /// Where the dataset's files are.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// This version's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// This version's number.
    pub fn version(&self) -> u64 {
        self.manifest.version
    }

    /// Rows in this version.
    pub fn num_rows(&self) -> u64 {
        self.manifest.num_rows()
    }

    /// The manifests of every committed version, oldest first.
    ///
    /// # Errors
    /// I/O errors; invalid manifests.
    pub fn versions(&self) -> Result<Vec<Manifest>> {
        let line = &self.line;
        list_versions_on(&*self.store, line)?
            .into_iter()
            .map(|v| read_manifest_on(&*self.store, line, v))
            .collect()
    }

    /// The line of versions this handle is on (main, or a branch's).
    pub fn line(&self) -> &Line {
        &self.line
    }

    /// The branch this handle is on: `main`, or the branch it was opened on.
    pub fn branch_name(&self) -> &str {
        self.line.branch.as_deref().unwrap_or(layout::MAIN)
    }

    /// The tags and the versions they name.
    ///
    /// # Errors
    /// I/O errors; tag files that are not valid.
    pub fn tags(&self) -> Result<BTreeMap<String, u64>> {
        read_tags(&*self.store)
    }

    /// Names this version `name` (letters, digits, `_ - .`), for `open(.., Tag(name))`; a tagged
    /// version is kept by `cleanup`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad name or one already used.
    pub fn tag(&self, name: &str) -> Result<()> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
            && !name.starts_with('.');
        if !ok {
            return Err(Error::InvalidArgument {
                what: format!("tag name {name:?}"),
                why: "must be 1 to 64 ASCII letters, digits, '_', '-' or '.', not starting with '.'".into(),
            });
        }
        let owner = self.line.line_of(self.version());
        let json =
            lines::Tag { version: self.version(), line: owner.id.clone(), branch: owner.branch.clone() }
                .to_json();
        // A cleanup decides which versions to keep from the tags: the tag is made under the
        // lock it waits for, naming a version that is still there.
        let _edit = lock::edit(self.dir())?;
        read_manifest_on(&*self.store, &self.line, self.version())?;
        let rel = format!("{TAGS_DIR}/{name}.json");
        if !self.store.put_new(&rel, json.as_bytes())? {
            return Err(Error::InvalidArgument {
                what: format!("tag '{name}'"),
                why: format!(
                    "already names version {}",
                    read_tags(&*self.store)?.get(name).copied().unwrap_or(0)
                ),
            });
        }
        // On object storage (no lock across machines) a cleanup that read the tags before the
        // put may have removed the version since: then the tag names nothing and goes.
        if self.store.url().is_some()
            && !list_versions_on(&*self.store, &self.line)?.contains(&self.version())
        {
            self.store.remove(&rel)?;
            return Err(Error::InvalidArgument {
                what: format!("tag '{name}'"),
                why: format!("version {} was removed by a cleanup meanwhile", self.version()),
            });
        }
        Ok(())
    }

    /// Deletes the tag `name`; returns the version it named. The version stays until a
    /// `cleanup` finds it among the old ones.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a tag that does not exist (naming the tags there are);
    /// I/O and remote errors.
    pub fn delete_tag(&self, name: &str) -> Result<u64> {
        let tags = read_tags(&*self.store)?;
        let Some(&version) = tags.get(name) else {
            let there: Vec<&str> = tags.keys().map(String::as_str).collect();
            return Err(Error::InvalidArgument {
                what: format!("tag '{name}'"),
                why: format!(
                    "no such tag; the tags are: {}",
                    if there.is_empty() { "(none)".to_string() } else { there.join(", ") }
                ),
            });
        };
        self.store.remove(&format!("{TAGS_DIR}/{name}.json"))?;
        Ok(version)
    }

    /// Commits a new version made by `edit` from the latest one, retrying on a newer latest
    /// when another writer committed first and the edit is compatible with what it did.
    ///
    /// `edit(base, new)` gets the version to build on and its copy to change; it may write new
    /// files (deletions, columns) and is called again on each retry.
    ///
    /// # Errors
    /// [`Error::Conflict`] when a concurrent commit changed what this edit read; the edit's own
    /// errors; I/O errors.
    pub fn commit(
        &self,
        operation: Operation,
        message: &str,
        touches: &Touches,
        mut edit: impl FnMut(&Manifest, &mut Manifest) -> Result<()>,
    ) -> Result<VersionedDataset> {
        // Held until the manifest is published: a cleanup waits for it (lock.rs).
        let _edit = lock::edit(self.dir())?;
        let store = &*self.store;
        let mut base = self.manifest.clone();
        for _ in 0..MAX_RETRIES {
            // A version newer than the base: rebase on it first. (Publishing base + 1 could
            // succeed all the same where cleanup removed that version, leaving this one out of
            // the line of versions.)
            let line = &self.line;
            let newest = latest_after(store, line, base.version)?;
            if newest != base.version {
                let latest = read_manifest_on(store, line, newest)?;
                check_compatible(&self.manifest, &latest, touches)?;
                base = latest;
                continue;
            }
            manifest::room_for_version(&base)?;
            let mut new = base.child(operation.clone(), message);
            lines::adopt(line, &base, &mut new);
            edit(&base, &mut new)?;
            match publish_on(store, line, &mut new, Some(&base))? {
                Published::Done => {
                    return Ok(VersionedDataset {
                        store: Arc::clone(&self.store),
                        line: self.line.clone(),
                        manifest: new,
                    })
                }
                Published::Taken => {
                    let latest = read_manifest_on(store, line, latest(store, line)?)?;
                    check_compatible(&self.manifest, &latest, touches)?;
                    base = latest;
                }
            }
        }
        Err(Error::Conflict {
            version: base.version + 1,
            why: format!("lost the race to commit {MAX_RETRIES} times in a row"),
        })
    }

    /// Makes version `version` the latest again, as a new version (history is kept).
    ///
    /// # Errors
    /// As [`VersionedDataset::open`] and [`VersionedDataset::commit`].
    pub fn restore(&self, version: u64) -> Result<VersionedDataset> {
        // The old version's files are referenced again: read it under the lock a cleanup waits
        // for, so that it is either gone (an error) or whole until the restore is published.
        let _edit = lock::edit(self.dir())?;
        let old = read_manifest_on(&*self.store, &self.line, version)?;
        let touches = Touches { everything: true, ..Touches::default() };
        let latest = self.open_at(VersionRef::Latest)?;
        latest.commit(Operation::Restore { version }, "", &touches, |_, new| {
            new.schema = old.schema.clone();
            new.fragments = old.fragments.clone();
            new.splits = old.splits.clone();
            new.classes = old.classes.clone();
            new.next_row_id = new.next_row_id.max(old.next_row_id);
            new.next_fragment_id = new.next_fragment_id.max(old.next_fragment_id);
            Ok(())
        })
    }

    /// This version's data, open for reading as one table.
    ///
    /// # Errors
    /// As [`VersionView::open`].
    pub fn view(&self) -> Result<VersionView> {
        VersionView::open(self)
    }

    /// [`VersionedDataset::view`] sharing with `previous`, a view of an earlier version of this
    /// directory, the data files and columnar copies both have open ([`VersionView::open_after`]).
    ///
    /// # Errors
    /// As [`VersionView::open`].
    pub fn view_after(&self, previous: &VersionView) -> Result<VersionView> {
        VersionView::open_after(self, previous)
    }

    /// The row ids of a fragment's data-file rows, in file order.
    ///
    /// # Errors
    /// I/O errors and corrupt row-id files.
    pub fn fragment_row_ids(&self, fragment: &Fragment) -> Result<Vec<u64>> {
        match &fragment.row_ids {
            RowIds::Range { start } => Ok((*start..start + fragment.num_rows).collect()),
            RowIds::File { file, checksum } => {
                let ids = read_index_file(&*self.store, file, checksum.as_deref())?.into_vec();
                let past = ids.last().filter(|&&id| id >= self.manifest.next_row_id);
                if ids.len() as u64 != fragment.num_rows || past.is_some() {
                    return Err(integrity::corrupt(
                        &self.dir().join(file),
                        format!(
                            "version {}: the row-id file of fragment {} has {} ids for {} rows{}",
                            self.version(),
                            fragment.id,
                            ids.len(),
                            fragment.num_rows,
                            past.map(|id| format!(", up to {id}, at or past next_row_id"))
                                .unwrap_or_default()
                        ),
                    ));
                }
                Ok(ids)
            }
        }
    }

    /// The deleted rows (positions in the data file) of a fragment.
    ///
    /// # Errors
    /// I/O errors and corrupt deletion files.
    pub fn fragment_deletions(&self, fragment: &Fragment) -> Result<IndexSet> {
        fragment_deletions(&*self.store, fragment)
    }
}

fn fragment_deletions(store: &dyn Store, fragment: &Fragment) -> Result<IndexSet> {
    match &fragment.deletions {
        None => Ok(IndexSet::empty()),
        Some(d) => {
            let set = read_index_file(store, &d.file, d.checksum.as_deref())?;
            if set.len() as u64 != d.count || set.max_id().is_some_and(|m| m >= fragment.num_rows) {
                return Err(integrity::corrupt(
                    &store.root().join(&d.file),
                    format!(
                        "the deletion file of fragment {} holds {} rows up to {:?}, the manifest says {} rows below {}",
                        fragment.id,
                        set.len(),
                        set.max_id(),
                        d.count,
                        fragment.num_rows
                    ),
                ));
            }
            Ok(set)
        }
    }
}

/// Fails with [`Error::Conflict`] when `latest` changed what an edit made on `read` touches.
fn check_compatible(read: &Manifest, latest: &Manifest, touches: &Touches) -> Result<()> {
    let conflict = |why: String| Err(Error::Conflict { version: latest.version, why });
    let op = latest.operation.name();
    if touches.everything {
        if latest.schema != read.schema || latest.fragments != read.fragments {
            return conflict(format!(
                "version {} ({op}) changed the schema or the data files",
                latest.version
            ));
        }
        return Ok(());
    }
    if latest.schema != read.schema {
        return conflict(format!("version {} ({op}) changed the schema", latest.version));
    }
    let find = |m: &Manifest, id: u64| m.fragments.iter().find(|f| f.id == id).cloned();
    for &id in &touches.deletes_in {
        if find(latest, id).is_none() {
            return conflict(format!(
                "version {} ({op}) removed data file {id} (compaction?)",
                latest.version
            ));
        }
    }
    for (id, field) in &touches.cells {
        let (Some(now), Some(then)) = (find(latest, *id), find(read, *id)) else {
            return conflict(format!("version {} ({op}) removed data file {id}", latest.version));
        };
        if now.column_file(field) != then.column_file(field) {
            return conflict(format!(
                "version {} ({op}) also changed field '{field}' in data file {id}",
                latest.version
            ));
        }
    }
    Ok(())
}

/// Whether the store has a version of the dataset at `url` (one listing of its `_versions/`;
/// no mirror is made). `Ok(false)` when it has none, or when the store cannot list the URL as a
/// folder (a 404, an HTTP server without listings): the URL may then name a file.
///
/// # Errors
/// What keeps the listing from answering, naming the listing's URL: access refused (401/403)
/// unless `url` itself is an object this process may read (a file, whose folder it may not
/// list); a store that cannot be reached or keeps failing, after the retry budget
/// (`BETON_REMOTE_OPEN_RETRY_SECONDS` for a store that never answered). Never a wait of the
/// whole budget for a refusal, never "not a dataset" for a store that did not answer.
fn has_versions(url: &Path) -> Result<bool> {
    use beton_storage::remote::objects;
    let Some(url) = url.to_str() else { return Ok(false) };
    let base = store::folder_url(url);
    match objects::list(&format!("{base}{}/", commit::VERSIONS_DIR)) {
        Ok(names) => Ok(names.iter().any(|n| n.ends_with(".json"))),
        // No such folder, or not a store that lists (a plain HTTP server: 405, 501).
        Err(beton_storage::Error::RemoteNotFound { .. } | beton_storage::Error::Remote { .. }) => Ok(false),
        // Refused: a dataset we may not read, or a file we may read in a folder we may not list.
        Err(denied @ beton_storage::Error::RemoteDenied { .. }) => {
            match url.ends_with('/') || !objects::exists(url).unwrap_or(false) {
                true => Err(denied.into()),
                false => Ok(false),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// The newest committed version of the dataset, given that version `known` was committed: on a
/// local disk, `known` itself when the manifest of `known + 1` does not exist and no cleanup
/// ever removed it (each version is published after its parent, so none after it exists
/// either), found without listing the versions (one name per version of the directory's
/// history); else from the listing. Called under the edit lock, so no cleanup runs meanwhile
/// (lock.rs).
fn latest_after(store: &dyn Store, line: &Line, known: u64) -> Result<u64> {
    if store.url().is_none() {
        if let Some(next) = known.checked_add(1) {
            let absent = !store.root().join(line.manifest_name(next)).exists();
            if absent && commit::newest_removed(store, line)?.is_none_or(|removed| removed < next) {
                return Ok(known);
            }
        }
    }
    latest(store, line)
}

/// The newest committed version of `line`: its newest own one, else (a branch with no commit
/// of its own yet) the version it starts from.
fn latest(store: &dyn Store, line: &Line) -> Result<u64> {
    let own = commit::list_own_versions(store, line)?.last().copied();
    own.or((!line.is_main()).then(|| line.start())).ok_or_else(|| Error::InvalidArgument {
        what: format!("dataset {}", store.location()),
        why: "has no committed version".into(),
    })
}

/// The tags and the versions they name, read afresh (tags are the one mutable file).
fn read_tags(store: &dyn Store) -> Result<BTreeMap<String, u64>> {
    Ok(read_tag_targets(store)?.into_iter().map(|(name, tag)| (name, tag.version)).collect())
}

/// The tags and what they name: a version, of a branch's line when `line` says.
fn read_tag_targets(store: &dyn Store) -> Result<BTreeMap<String, lines::Tag>> {
    let mut out = BTreeMap::new();
    for file in store.list(TAGS_DIR)? {
        let Some(name) = file.strip_suffix(".json") else { continue };
        let rel = format!("{TAGS_DIR}/{file}");
        // A tag removed between the listing and the read is no tag.
        let Some(bytes) = store.read_fresh(&rel)? else { continue };
        let tag = lines::Tag::parse(&bytes)
            .map_err(|why| Error::InvalidArgument { what: format!("tag file {}", store.shown(&rel)), why })?;
        out.insert(name.to_string(), tag);
    }
    Ok(out)
}

/// The error of an import into a dataset that exists.
fn already_a_dataset(store: &dyn Store) -> Error {
    Error::InvalidArgument {
        what: format!("dataset directory {}", store.location()),
        why: "is a dataset already; use append to add a file to it".into(),
    }
}

/// Files a concatenation exported into the dataset's `_tmp/`, removed when it ends (linked into
/// `data/` by then, or not wanted).
struct Exported(Vec<PathBuf>);

impl Drop for Exported {
    fn drop(&mut self) {
        for file in &self.0 {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Whether the dataset has a committed version (a `_versions` folder without one is an import
/// that was killed); one listing, of the store for a mirror.
fn committed(store: &dyn Store) -> Result<bool> {
    if store.url().is_none() && !store.root().join(commit::VERSIONS_DIR).is_dir() {
        return Ok(false);
    }
    Ok(!list_versions(store)?.is_empty())
}

/// Writes `set` as a new index-set file in `folder`; returns its reference.
pub(crate) fn write_index_file(dir: &Path, folder: &str, set: &IndexSet) -> Result<FileRef> {
    let rel = format!("{folder}/{}.bidx", commit::unique_name());
    let bytes = set.to_bytes();
    write_new_file(dir, &rel, &bytes)?;
    Ok(FileRef { file: rel, count: set.len() as u64, checksum: Some(integrity::checksum(&bytes)) })
}

/// Reads an index-set file of the dataset, checked against its `checksum` when it has one.
pub(crate) fn read_index_file(store: &dyn Store, rel: &str, checksum: Option<&str>) -> Result<IndexSet> {
    let path = integrity::inside(store.root(), rel)?;
    let not_found = || io(&path, std::io::ErrorKind::NotFound.into());
    let bytes = commit::read_file(store, rel)?.ok_or_else(not_found)?;
    integrity::verify(&path, &bytes, checksum)?;
    IndexSet::from_bytes(&bytes).map_err(|e| Error::InvalidArgument {
        what: format!("index-set file {}", path.display()),
        why: e.to_string(),
    })
}
