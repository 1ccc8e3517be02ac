//! Versioned datasets: a directory of immutable FFCV data files, deletion files, column files and
//! one manifest per version (docs/FORMAT.md §13). Every edit commits a new version atomically;
//! old versions stay readable until `cleanup` drops them.
//!
//! Concurrency follows Lance's model: a writer prepares its new files, then publishes the next
//! version's manifest with no-overwrite semantics ([`commit::publish`]). When another writer
//! got there first, the edit is checked against what was committed meanwhile ([`Touches`]):
//! compatible edits (two appends, two deletes, updates of different fields or fragments) are
//! re-applied on the newer version and retried; others fail with [`Error::Conflict`].

pub mod classes;
mod cleanup;
pub mod commit;
pub mod diff;
mod fit;
pub mod imagefolder;
pub mod integrity;
pub mod lock;
pub mod manifest;
mod marks;
pub mod remote;
pub mod values;
pub mod verify;
pub mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use beton_storage::{Dataset, FieldType};

use crate::copy::{Copied, Filled};
use crate::error::{Error, Result};
use crate::index_set::IndexSet;
use commit::{io, list_versions, publish, read_manifest, write_new_file, Published, TAGS_DIR};
pub use diff::{diff, Diff};
pub use imagefolder::{ImageFolderOptions, ImageFolderReport};
pub use manifest::{ColumnFile, FileRef, Fragment, Manifest, Operation, RowIds, SchemaField};
pub use verify::{verify_dir, DirReport};
pub use view::VersionView;

use arrow_array::{Array, ArrayRef};

/// Folder of data files.
pub const DATA_DIR: &str = "data";
/// Folder of deletion files.
pub const DELETIONS_DIR: &str = "deletions";
/// Folder of split files.
pub const SPLITS_DIR: &str = "splits";
/// Folder of row-id files.
pub const ROW_IDS_DIR: &str = "row_ids";
/// Folder of column files.
pub const COLUMNS_DIR: &str = "columns";

/// Commits given up after this many lost races in a row.
pub const MAX_RETRIES: usize = 64;

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
    dir: PathBuf,
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
    /// dataset" (see [`remote::has_versions`]).
    ///
    /// # Errors
    /// Remote errors of the listing of `_versions/` at a URL.
    pub fn probe(path: &Path) -> Result<bool> {
        if remote::is_url(path) {
            // A `.beton` URL is a file: no listing of its `_versions/` for every open.
            let file = path.to_str().is_some_and(|p| p.trim_end_matches('/').ends_with(".beton"));
            return Ok(!file && remote::has_versions(path)?);
        }
        Ok(Self::is_local_dataset_dir(path))
    }

    fn is_local_dataset_dir(path: &Path) -> bool {
        // A mirror of a URL: a dataset when the store has a version.
        if remote::url_of(path).is_some() {
            return list_versions(path).is_ok_and(|v| !v.is_empty());
        }
        path.join(commit::VERSIONS_DIR).is_dir()
    }

    /// Where the dataset is: its URL (ending in `/`) for one on object storage, else its
    /// directory.
    pub fn location(&self) -> String {
        remote::shown(&self.dir)
    }

    /// Creates an empty dataset with `schema` at `dir` (made if missing; it must not already be
    /// a dataset).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `dir` is a dataset already or a file; I/O errors.
    pub fn create(dir: &Path, schema: &[(String, FieldType)]) -> Result<VersionedDataset> {
        let schema = schema.iter().map(|(n, t)| SchemaField::new(n, t)).collect();
        Self::create_with(dir, Manifest::first(schema, Operation::Create))
    }

    fn create_with(dir: &Path, manifest: Manifest) -> Result<VersionedDataset> {
        let dir = &local_dir(dir)?;
        if dir.is_file() {
            return Err(Error::InvalidArgument {
                what: format!("dataset directory {}", remote::shown(dir)),
                why: "is a file".into(),
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let _edit = lock::edit(dir)?;
        match publish(dir, &manifest)? {
            Published::Done => Ok(VersionedDataset { dir: dir.to_path_buf(), manifest }),
            Published::Taken => Err(Error::InvalidArgument {
                what: format!("dataset directory {}", remote::shown(dir)),
                why: "is a dataset already".into(),
            }),
        }
    }

    /// A new dataset directory `dir` holding the rows of `sources` in order: `.beton` files
    /// (hard-linked, never re-encoded) or dataset directories (their latest versions, exported
    /// once into a data file of `dir`, with `options`). Version 1 is the first source, each
    /// further one a new version appending its rows (their fields must include the first's, as
    /// [`VersionedDataset::append_file`] says).
    ///
    /// `options.progress` counts the rows of all sources: an exported source's as they are
    /// written, a linked file's at once. When it cancels, `dir` keeps the versions committed
    /// before.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no sources; as [`VersionedDataset::import`],
    /// [`VersionedDataset::export`] and [`VersionedDataset::append_file`].
    pub fn concat(
        dir: &Path,
        sources: &[PathBuf],
        message: &str,
        options: &ExportOptions,
    ) -> Result<VersionedDataset> {
        use beton_storage::Progress;
        let dir = &local_dir(dir)?;
        if sources.is_empty() {
            return Err(Error::InvalidArgument {
                what: "concat".into(),
                why: "no source to concatenate".into(),
            });
        }
        // Every source's rows first, for a total the progress can count towards.
        let mut opened = Vec::with_capacity(sources.len());
        for source in sources {
            opened.push(match Self::is_dataset_dir(source) {
                true => {
                    let v = Self::open(source, VersionRef::Latest)?;
                    (v.num_rows(), Some(v))
                }
                false => (Dataset::open(source)?.num_samples(), None),
            });
        }
        let total: u64 = opened.iter().map(|(n, _)| n).sum();
        let mut done = 0u64;
        let mut result: Option<VersionedDataset> = None;
        // Held from the first exported source on: a cleanup must not take it from _tmp/ before
        // it is linked into data/.
        let mut held = None;
        for (k, (source, (rows, version))) in sources.iter().zip(opened).enumerate() {
            // A dataset directory: its latest version as one file, in `dir`'s own _tmp/ (then
            // hard-linked into data/).
            let exported = match version {
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
                    let copied = v.export(&file, None, &export)?;
                    // Its NULLs stay NULLs in the concatenation.
                    Some((file, null_patches(dir, &v.view()?.schema()?, &copied.filled)?))
                }
                None => None,
            };
            let (file, nulls) = match &exported {
                Some((file, nulls)) => (file.as_path(), nulls.clone()),
                None => (source.as_path(), Vec::new()),
            };
            let step = match &result {
                None => Self::import_with(dir, file, nulls),
                Some(v) => v.append_files_with(&[file.to_path_buf()], vec![nulls], message),
            };
            if let Some((f, _)) = &exported {
                let _ = std::fs::remove_file(f);
            }
            result = Some(step?);
            done += rows;
            if let Some(progress) = &options.progress {
                if !progress(Progress { done, total: Some(total) }) {
                    return Err(beton_storage::Error::Cancelled { done, path: dir.to_path_buf() }.into());
                }
            }
        }
        Ok(result.expect("at least one source"))
    }

    /// Makes `dir` a dataset whose version 1 is the `.beton` file `file`: the file is hard-linked
    /// into `data/` (copied when it is on another file system; never re-encoded), and its named
    /// splits become the version's splits.
    ///
    /// # Errors
    /// Storage errors opening `file`; [`Error::InvalidArgument`] for a file with custom fields
    /// (their layout is not stored) or a `dir` that is a dataset already.
    pub fn import(dir: &Path, file: &Path) -> Result<VersionedDataset> {
        Self::import_with(dir, file, Vec::new())
    }

    /// [`VersionedDataset::import`] with column files `columns` (written in `dir` already) on
    /// the file's fragment: the NULLs of a dataset exported to `file` ([`null_patches`]).
    fn import_with(dir: &Path, file: &Path, columns: Vec<ColumnFile>) -> Result<VersionedDataset> {
        let dir = &local_dir(dir)?;
        let ds = Dataset::open(file)?;
        let schema = schema_of(&ds, file)?;
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        // A `_versions` folder with no manifest is an import that was killed: start again.
        if committed(dir)? {
            return Err(Error::InvalidArgument {
                what: format!("dataset directory {}", remote::shown(dir)),
                why: "is a dataset already; use append to add a file to it".into(),
            });
        }
        let _edit = lock::edit(dir)?;
        let data_file = link_data_file(dir, file)?;
        let n = ds.num_samples();
        let mut m = Manifest::first(schema, Operation::Import { source: file.display().to_string() });
        m.next_row_id = n;
        m.next_fragment_id = 1;
        m.fragments.push(Fragment {
            id: 0,
            data_file,
            num_rows: n,
            data_bytes: Some(ds.file_len()),
            row_ids: RowIds::Range { start: 0 },
            deletions: None,
            columns,
        });
        // Row k of the only data file has id k: the file's splits are row-id sets as they are.
        for (name, set) in crate::splits::all(&ds)? {
            m.splits.insert(name, write_index_file(dir, SPLITS_DIR, &set)?);
        }
        m.classes = ds.classes()?;
        Self::create_with(dir, m)
    }

    /// Opens version `at` of the dataset at `dir`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a directory that is not a dataset, a version or tag it does
    /// not have, or a manifest that is not valid.
    pub fn open(dir: &Path, at: VersionRef) -> Result<VersionedDataset> {
        let dir = &local_dir(dir)?;
        // (A mirror's versions are listed once, below: reading the latest or the manifest.)
        if remote::url_of(dir).is_none() && !Self::is_dataset_dir(dir) {
            return Err(Error::InvalidArgument {
                what: format!("dataset {}", remote::shown(dir)),
                why: "is not a dataset directory (it has no _versions folder)".into(),
            });
        }
        let version = match at {
            VersionRef::Latest => return Self::open_latest(dir),
            VersionRef::Number(n) => n,
            VersionRef::Tag(name) => *read_tags(dir)?.get(&name).ok_or_else(|| Error::InvalidArgument {
                what: "tag".into(),
                why: format!("{} has no tag '{name}'", remote::shown(dir)),
            })?,
        };
        Ok(VersionedDataset { dir: dir.to_path_buf(), manifest: read_manifest(dir, version)? })
    }

    /// The latest version: a cleanup may remove the version listed as the latest once a newer
    /// one is committed, so one removed between the listing and the read is looked for again.
    fn open_latest(dir: &Path) -> Result<VersionedDataset> {
        let mut tries = 0;
        loop {
            let version = latest(dir)?;
            match read_manifest(dir, version) {
                Ok(manifest) => return Ok(VersionedDataset { dir: dir.to_path_buf(), manifest }),
                Err(_) if tries < MAX_RETRIES && latest(dir)? > version => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// The dataset directory.
    pub fn dir(&self) -> &Path {
        &self.dir
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
        list_versions(&self.dir)?.into_iter().map(|v| read_manifest(&self.dir, v)).collect()
    }

    /// The tags and the versions they name.
    ///
    /// # Errors
    /// I/O errors; tag files that are not valid.
    pub fn tags(&self) -> Result<BTreeMap<String, u64>> {
        read_tags(&self.dir)
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
        let json = format!("{{\"version\": {}}}\n", self.version());
        // A cleanup decides which versions to keep from the tags: the tag is made under the
        // lock it waits for, naming a version that is still there.
        let _edit = lock::edit(&self.dir)?;
        read_manifest(&self.dir, self.version())?;
        let taken = || -> Result<Error> {
            Ok(Error::InvalidArgument {
                what: format!("tag '{name}'"),
                why: format!(
                    "already names version {}",
                    read_tags(&self.dir)?.get(name).copied().unwrap_or(0)
                ),
            })
        };
        let rel = format!("{TAGS_DIR}/{name}.json");
        match remote::put_new(&self.dir, &rel, json.clone().into_bytes()) {
            // A cleanup that read the tags before the put may have removed the version since:
            // then the tag names nothing and goes.
            Some(Ok(true)) if !list_versions(&self.dir)?.contains(&self.version()) => {
                remote::remove(&self.dir, &rel).unwrap_or(Ok(()))?;
                return Err(Error::InvalidArgument {
                    what: format!("tag '{name}'"),
                    why: format!("version {} was removed by a cleanup meanwhile", self.version()),
                });
            }
            Some(Ok(true)) => return Ok(()),
            Some(Ok(false)) => return Err(taken()?),
            Some(Err(e)) => return Err(e),
            None => {}
        }
        let tmp = commit::temp_file(&self.dir)?;
        // Durable before it is linked: a crash never leaves a tag naming nothing.
        commit::write_all_synced(tmp.as_file(), json.as_bytes()).map_err(|e| io(tmp.path(), e))?;
        let tags = self.dir.join(TAGS_DIR);
        std::fs::create_dir_all(&tags).map_err(|e| io(&tags, e))?;
        let target = tags.join(format!("{name}.json"));
        commit::crash_point();
        match std::fs::hard_link(tmp.path(), &target) {
            Ok(()) => {
                commit::crash_point();
                commit::sync_dir(&tags);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(taken()?),
            Err(e) => Err(io(&target, e)),
        }
    }

    /// Deletes the tag `name`; returns the version it named. The version stays until a
    /// `cleanup` finds it among the old ones.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a tag that does not exist (naming the tags there are);
    /// I/O and remote errors.
    pub fn delete_tag(&self, name: &str) -> Result<u64> {
        let tags = read_tags(&self.dir)?;
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
        let rel = format!("{TAGS_DIR}/{name}.json");
        match remote::remove(&self.dir, &rel) {
            Some(removed) => removed?,
            None => {
                let path = self.dir.join(&rel);
                std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
                commit::sync_dir(&self.dir.join(TAGS_DIR));
            }
        }
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
        let _edit = lock::edit(&self.dir)?;
        let mut base = self.manifest.clone();
        for _ in 0..MAX_RETRIES {
            // A version newer than the base: rebase on it first. (Publishing base + 1 could
            // succeed all the same where cleanup removed that version, leaving this one out of
            // the line of versions.)
            let newest = latest(&self.dir)?;
            if newest != base.version {
                let latest = read_manifest(&self.dir, newest)?;
                check_compatible(&self.manifest, &latest, touches)?;
                base = latest;
                continue;
            }
            integrity::room_for_version(&base)?;
            let mut new = base.child(operation.clone(), message);
            edit(&base, &mut new)?;
            match publish(&self.dir, &new)? {
                Published::Done => return Ok(VersionedDataset { dir: self.dir.clone(), manifest: new }),
                Published::Taken => {
                    let latest = read_manifest(&self.dir, latest(&self.dir)?)?;
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
        let _edit = lock::edit(&self.dir)?;
        let old = read_manifest(&self.dir, version)?;
        let touches = Touches { everything: true, ..Touches::default() };
        let latest = Self::open(&self.dir, VersionRef::Latest)?;
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

    /// Sets field values of the rows at `rows` (indices in this version, ascending): each array
    /// has one value per row, or one value for all, of a type the field takes as it is (an int
    /// field takes integers, not `2.0`: the rules are `fit.rs`'s).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown field, values of the wrong count, with nulls
    /// or of a type the field does not take (naming the field, the type and the first row that
    /// does not fit), a row past the end; as [`VersionedDataset::commit`]. Nothing is committed
    /// on error.
    pub fn update_rows(
        &self,
        rows: &IndexSet,
        values: Vec<(String, ArrayRef)>,
        message: &str,
    ) -> Result<VersionedDataset> {
        self.update_rows_with(rows, values, None, None, message)
    }

    /// [`VersionedDataset::update_rows`], naming where the values come from: `exprs`, the
    /// expression each field's values were computed by (for messages), and `predicate`, the
    /// rows' predicate (recorded in the version's operation). beton-query's SQL `update` calls
    /// this.
    ///
    /// # Errors
    /// As [`VersionedDataset::update_rows`].
    pub fn update_rows_with(
        &self,
        rows: &IndexSet,
        values: Vec<(String, ArrayRef)>,
        exprs: Option<&[(String, String)]>,
        predicate: Option<&str>,
        message: &str,
    ) -> Result<VersionedDataset> {
        let _edit = lock::edit(&self.dir)?;
        integrity::room_for_version(&self.manifest)?;
        self.check_indices(rows, "rows to update")?;
        let mut typed = Vec::new();
        for (k, (name, array)) in values.into_iter().enumerate() {
            let ty = self.column_field(&name)?;
            let source = match exprs.and_then(|e| e.get(k)) {
                Some((_, expr)) => format!("update: expression '{expr}'"),
                None => "update_rows: values".to_string(),
            };
            let target = fit::Target { source: &source, field: &name, ty: &ty, rows: Some(rows.as_slice()) };
            let array = fit::fit(&target, &array, rows.len())?;
            typed.push((name, ty, array));
        }
        let view = self.view()?;
        let mut files: Vec<(u64, ColumnFile)> = Vec::new();
        let mut touches = Touches::default();
        let mut done = 0usize;
        for (k, file_rows) in view.file_rows(rows) {
            let fragment = &self.manifest.fragments[k];
            // A patch: the rows changed and their new values, not the whole column.
            let positions: Vec<u64> = (done..done + file_rows.len()).map(|j| j as u64).collect();
            let mut columns: Vec<(String, ArrayRef)> = vec![(
                view::PATCH_ROWS.to_string(),
                std::sync::Arc::new(arrow_array::UInt64Array::from(file_rows.clone())),
            )];
            for (name, _, array) in &typed {
                let values = match array.len() {
                    1 => arrow_select::interleave::interleave(
                        &[array.as_ref()],
                        &vec![(0, 0); file_rows.len()],
                    )?,
                    _ => arrow_select::take::take(
                        array.as_ref(),
                        &arrow_array::UInt64Array::from(positions.clone()),
                        None,
                    )?,
                };
                columns.push((name.clone(), values));
                touches.cells.push((fragment.id, name.clone()));
            }
            done += file_rows.len();
            let mut file = view::write_column_file(&self.dir, columns)?;
            file.fields.retain(|f| f != view::PATCH_ROWS);
            files.push((fragment.id, file));
        }
        let operation = Operation::Update {
            predicate: predicate.map(str::to_string),
            fields: typed.iter().map(|(n, _, _)| n.clone()).collect(),
            rows: rows.len() as u64,
        };
        self.commit(operation, message, &touches, |_, new| {
            for (id, file) in &files {
                let f = new.fragments.iter_mut().find(|f| f.id == *id).expect("checked by Touches");
                f.columns.push(file.clone());
            }
            Ok(())
        })
    }

    /// The type of schema field `name`, which column files can hold.
    fn column_field(&self, name: &str) -> Result<FieldType> {
        self.schema_field(name)?.field_type()
    }

    /// Schema field `name`.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`] listing the schema's fields.
    fn schema_field(&self, name: &str) -> Result<&SchemaField> {
        let schema = &self.manifest.schema;
        schema.iter().find(|f| f.name == name).ok_or_else(|| Error::NoSuchColumn {
            name: name.to_string(),
            available: schema.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Adds field `name` of type `ty` with one value per row of this version (in index order),
    /// as a new version: the values go to a column file per data file.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name in use, not 1–16 ASCII bytes, or one SQL would
    /// resolve to another column (`index`, `row_id`, `image.width`, any of them in another
    /// case); values of the wrong count, with nulls or of a type the field does not take as it
    /// is (the rules of [`VersionedDataset::update_rows`]); as [`VersionedDataset::commit`].
    pub fn add_column(
        &self,
        name: &str,
        ty: &FieldType,
        values: &ArrayRef,
        message: &str,
    ) -> Result<VersionedDataset> {
        fit::check_new_column(&self.manifest.schema, name, ty)?;
        let target = fit::Target { source: "add_column: values", field: name, ty, rows: None };
        let values = fit::fit(&target, values, self.num_rows() as usize)?;
        let _edit = lock::edit(&self.dir)?;
        integrity::room_for_version(&self.manifest)?;
        let default = default_value(ty);
        let mut files = Vec::new();
        let mut first = 0usize;
        for f in &self.manifest.fragments {
            let deleted = self.fragment_deletions(f)?;
            let mut deleted = deleted.iter().peekable();
            let mut picks = Vec::with_capacity(f.num_rows as usize);
            for r in 0..f.num_rows {
                if deleted.next_if_eq(&r).is_some() {
                    picks.push((1, 0));
                } else {
                    picks.push((0, first));
                    first += 1;
                }
            }
            let column = arrow_select::interleave::interleave(&[values.as_ref(), default.as_ref()], &picks)?;
            files.push((f.id, view::write_column_file(&self.dir, vec![(name.to_string(), column)])?));
        }
        let touches = Touches { everything: true, ..Touches::default() };
        let field = SchemaField::new(name, ty);
        self.commit(Operation::AddColumn { name: name.to_string() }, message, &touches, |_, new| {
            new.schema.push(field.clone());
            for (id, file) in &files {
                let f = new.fragments.iter_mut().find(|f| f.id == *id).expect("checked by Touches");
                f.columns.push(file.clone());
            }
            Ok(())
        })
    }

    /// Checks that a field `name` of type `ty` could be added: the checks of
    /// [`VersionedDataset::add_column`] before it reads its values.
    ///
    /// # Errors
    /// As [`VersionedDataset::add_column`], for the name.
    pub fn check_new_column(&self, name: &str, ty: &FieldType) -> Result<()> {
        fit::check_new_column(&self.manifest.schema, name, ty)
    }

    /// Removes field `name` from the schema, as a new version (its bytes stay in the data files;
    /// older versions still show it).
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`]; as [`VersionedDataset::commit`].
    pub fn drop_column(&self, name: &str, message: &str) -> Result<VersionedDataset> {
        self.schema_field(name)?;
        let touches = Touches { everything: true, ..Touches::default() };
        self.commit(Operation::DropColumn { name: name.to_string() }, message, &touches, |_, new| {
            new.schema.retain(|f| f.name != name);
            // A column of this name added later must not pick up these values.
            for f in &mut new.fragments {
                for c in &mut f.columns {
                    c.fields.retain(|n| n != name);
                }
                f.columns.retain(|c| !c.fields.is_empty());
            }
            Ok(())
        })
    }

    /// Writes the rows `rows` of this version (indices; all of them for `None`) as one standalone
    /// `.beton` file at `path` that FFCV 1.0.2 loads: the visible fields with their current
    /// values, images and other payloads copied byte for byte (never re-encoded), and the
    /// version's named splits (restricted to the rows written). Written atomically, with
    /// `options`' threads; its progress counts the rows written. A NULL (a `.beton` file holds
    /// a value in every row) is written as [`crate::copy::null_filler`]'s value: the result's
    /// `filled` lists which rows of which field, and with what.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a row past the end; storage errors writing,
    /// [`beton_storage::Error::Cancelled`] when the progress callback cancels (nothing is left
    /// at `path`).
    pub fn export(&self, path: &Path, rows: Option<&IndexSet>, options: &ExportOptions) -> Result<Copied> {
        self.export_fields(path, rows, None, options)
    }

    /// [`VersionedDataset::export`] of the fields `fields` only, in that order (every field for
    /// `None`): a field FFCV cannot read (text, bool, array) can be left out of a file meant for
    /// FFCV.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`] for a name that is not a field, [`Error::InvalidArgument`] for
    /// a field named twice or none; as [`VersionedDataset::export`].
    pub fn export_fields(
        &self,
        path: &Path,
        rows: Option<&IndexSet>,
        fields: Option<&[String]>,
        options: &ExportOptions,
    ) -> Result<Copied> {
        let view = self.view()?;
        let table = view.table()?;
        let mut schema = view.schema()?;
        if let Some(names) = fields {
            schema = choose_fields(&schema, names)?;
        }
        let copied = export_table(&view, &table, &schema, path, rows, options)?;
        // Splits: table rows → positions in the file written.
        let mut splits = Vec::new();
        for name in self.manifest.splits.keys() {
            let set = table.split(name)?;
            let ids: Vec<u64> = match rows {
                None => set.as_slice().to_vec(),
                Some(rows) => {
                    let positions = rows.as_slice();
                    set.iter().filter_map(|r| positions.binary_search(&r).ok().map(|p| p as u64)).collect()
                }
            };
            splits.push((name.clone(), IndexSet::from_sorted(ids)?));
        }
        if !splits.is_empty() {
            crate::splits::save(path, None, splits.iter().map(|(n, s)| (n.as_str(), s)))?;
        }
        if let Some(classes) = &self.manifest.classes {
            beton_storage::save_classes(path, None, Some(classes))?;
        }
        Ok(copied)
    }

    /// Folds every data file, deletion and column file of this version into one new data file
    /// (payloads copied byte for byte), as a new version: the same rows, row ids and splits.
    /// Written with `options`' threads; its progress counts the rows written.
    ///
    /// # Errors
    /// As [`VersionedDataset::export`] (a cancelled compaction commits nothing) and
    /// [`VersionedDataset::commit`].
    pub fn compact(&self, options: &ExportOptions, message: &str) -> Result<VersionedDataset> {
        let _edit = lock::edit(&self.dir)?;
        integrity::room_for_version(&self.manifest)?;
        let rel = format!("{DATA_DIR}/{}.beton", commit::unique_name());
        let (report, ids, nulls) = {
            let view = self.view()?;
            let table = view.table()?;
            std::fs::create_dir_all(self.dir.join(DATA_DIR)).map_err(|e| io(&self.dir, e))?;
            let schema = view.schema()?;
            let copied = export_table(&view, &table, &schema, &self.dir.join(&rel), None, options)?;
            // The NULLs the data file holds fillers for stay NULLs: a patch marks them.
            let nulls = null_patches(&self.dir, &schema, &copied.filled)?;
            (copied.report, table.row_ids()?, nulls)
        };
        let row_ids = match (ids.first(), ids.last()) {
            (Some(&a), Some(&b)) if b.checked_sub(a) == Some(ids.len() as u64 - 1) => {
                RowIds::Range { start: a }
            }
            (None, _) => RowIds::Range { start: self.manifest.next_row_id },
            _ => {
                let written = write_index_file(&self.dir, ROW_IDS_DIR, &IndexSet::from_sorted(ids)?)?;
                RowIds::File { file: written.file, checksum: written.checksum }
            }
        };
        let touches = Touches { everything: true, ..Touches::default() };
        let folded = self.manifest.fragments.iter().map(|f| f.id).collect();
        self.commit(Operation::Compact { fragments: folded }, message, &touches, |base, new| {
            integrity::room_for(base, [0])?;
            new.fragments = vec![Fragment {
                id: base.next_fragment_id,
                data_file: rel.clone(),
                num_rows: report.num_samples,
                data_bytes: Some(report.file_len),
                row_ids: row_ids.clone(),
                deletions: None,
                columns: nulls.clone(),
            }];
            new.next_fragment_id = base.next_fragment_id + 1;
            Ok(())
        })
    }

    /// Saves named splits `save` (sets of this version's indices; replacing splits of the same
    /// name) and removes splits `remove`, as a new version. Splits are stored as row ids, so
    /// they keep their rows through later edits.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad name or an index past the end; [`Error::NoSuchSplit`]
    /// for a split to remove that does not exist; as [`VersionedDataset::commit`].
    pub fn save_splits(
        &self,
        save: &BTreeMap<String, IndexSet>,
        remove: &[String],
        message: &str,
    ) -> Result<VersionedDataset> {
        for name in remove {
            if !self.manifest.splits.contains_key(name) {
                return Err(crate::splits::no_such_split(name, self.manifest.splits.keys()));
            }
        }
        let _edit = lock::edit(&self.dir)?;
        integrity::room_for_version(&self.manifest)?;
        let ids = {
            let view = self.view()?;
            let table = view.table()?;
            table.row_ids()?
        };
        let mut files = BTreeMap::new();
        for (name, set) in save {
            crate::splits::check_name(name)?;
            self.check_indices(set, &format!("split '{name}'"))?;
            let mut row_ids: Vec<u64> = set.iter().map(|i| ids[i as usize]).collect();
            row_ids.sort_unstable();
            files.insert(
                name.clone(),
                write_index_file(&self.dir, SPLITS_DIR, &IndexSet::from_sorted(row_ids)?)?,
            );
        }
        let operation = Operation::Splits { saved: save.keys().cloned().collect(), removed: remove.to_vec() };
        self.commit(operation, message, &Touches::default(), |_, new| {
            for name in remove {
                new.splits.remove(name);
            }
            new.splits.extend(files.clone());
            Ok(())
        })
    }

    /// Fails with [`Error::InvalidArgument`] naming `what` when `rows` holds an index past the
    /// end of this version.
    fn check_indices(&self, rows: &IndexSet, what: &str) -> Result<()> {
        check_indices(rows, what, self.version(), self.num_rows())
    }

    /// Deletes the rows at `positions` (indices in this version), as a new version.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a position past the end; as [`VersionedDataset::commit`].
    pub fn delete(
        &self,
        positions: &IndexSet,
        predicate: Option<&str>,
        message: &str,
    ) -> Result<VersionedDataset> {
        self.check_indices(positions, "rows to delete")?;
        // Positions → rows of each data file (stable: data files never change).
        let per_fragment: Vec<(u64, Vec<u64>)> = self
            .view()?
            .file_rows(positions)
            .into_iter()
            .map(|(k, rows)| (self.manifest.fragments[k].id, rows))
            .collect();
        let touches =
            Touches { deletes_in: per_fragment.iter().map(|(id, _)| *id).collect(), ..Touches::default() };
        let operation =
            Operation::Delete { predicate: predicate.map(str::to_string), rows: positions.len() as u64 };
        let dir = self.dir.clone();
        self.commit(operation, message, &touches, |_, new| {
            for (id, rows) in &per_fragment {
                let f = new.fragments.iter_mut().find(|f| f.id == *id).expect("checked by Touches");
                let set = fragment_deletions(&dir, f)?.union(&IndexSet::from_sorted(rows.clone())?);
                f.deletions = Some(write_index_file(&dir, DELETIONS_DIR, &set)?);
            }
            Ok(())
        })
    }

    /// Adds the rows of the `.beton` file `file` as a new data file (hard-linked, never
    /// re-encoded), with new row ids. Its fields must include every field of the schema with
    /// the same type (others are kept in the file but not visible); a field it lacks (a column
    /// added to the dataset since) is NULL in its rows, whatever its type.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a missing or mistyped field; as
    /// [`VersionedDataset::commit`].
    pub fn append_file(&self, file: &Path, message: &str) -> Result<VersionedDataset> {
        self.append_files(&[file.to_path_buf()], message)
    }

    /// [`VersionedDataset::append_file`] for several files at once, in order, as one version:
    /// what parallel writers (Ray Data's write tasks) commit when they are all done.
    ///
    /// # Errors
    /// As [`VersionedDataset::append_file`], naming the file; nothing is committed unless every
    /// file can be.
    pub fn append_files(&self, files: &[PathBuf], message: &str) -> Result<VersionedDataset> {
        self.append_files_with(files, vec![Vec::new(); files.len()], message)
    }

    /// [`VersionedDataset::append_files`] with column files `columns[k]` (written already) on
    /// file k's fragment: the NULLs of a dataset exported to it ([`null_patches`]).
    fn append_files_with(
        &self,
        files: &[PathBuf],
        columns: Vec<Vec<ColumnFile>>,
        message: &str,
    ) -> Result<VersionedDataset> {
        let _edit = lock::edit(&self.dir)?;
        let read = &self.manifest;
        let mut added = NewDataFile::link_all(&self.dir, read, files)?;
        for (file, columns) in added.iter_mut().zip(columns) {
            file.columns.extend(columns);
        }
        let rows = added.iter().map(|f| f.num_rows).sum();
        // `new` starts as the base's child: its next row and fragment ids are the base's.
        self.commit(Operation::Append { rows }, message, &Touches::default(), |base, new| {
            for file in &added {
                if let Err(e) = file.push_onto(new) {
                    // Checked against `read`'s names: another writer changed them since.
                    return Err(match base.classes != read.classes {
                        true => Error::Conflict {
                            version: base.version,
                            why: format!(
                                "version {} ({}) changed the class names: {e}",
                                base.version,
                                base.operation.name()
                            ),
                        },
                        false => e,
                    });
                }
            }
            Ok(())
        })
    }

    /// Makes the `.beton` files `files` (written apart, as by parallel workers) one new version
    /// of the dataset at `dir`, in one commit: version 1 of a new dataset whose schema is the
    /// first file's, or a version of an existing one appending their rows
    /// ([`VersionedDataset::append_files`]). Each file is hard-linked into `data/`, never
    /// re-encoded; the caller removes its own copies.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no files, a custom field, or a file whose fields differ
    /// from the schema (naming it); as [`VersionedDataset::commit`].
    pub fn commit_files(dir: &Path, files: &[PathBuf], message: &str) -> Result<VersionedDataset> {
        let dir = &local_dir(dir)?;
        let Some(first) = files.first() else {
            return Err(Error::InvalidArgument {
                what: format!("commit to {}", remote::shown(dir)),
                why: "no data files to commit".into(),
            });
        };
        if committed(dir)? {
            return Self::open(dir, VersionRef::Latest)?.append_files(files, message);
        }
        let schema = schema_of(&Dataset::open(first)?, first)?;
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let _edit = lock::edit(dir)?;
        let mut m = Manifest::first(schema, Operation::Create);
        let added = NewDataFile::link_all(dir, &m, files)?;
        m.message = message.to_string();
        for file in &added {
            file.push_onto(&mut m)?;
        }
        match Self::create_with(dir, m) {
            Ok(v) => Ok(v),
            // Another writer made the dataset meanwhile: append to it instead (the links made
            // here are left to `cleanup`).
            Err(_) if !list_versions(dir)?.is_empty() => {
                Self::open(dir, VersionRef::Latest)?.append_files(files, message)
            }
            Err(e) => Err(e),
        }
    }

    /// The row ids of a fragment's data-file rows, in file order.
    ///
    /// # Errors
    /// I/O errors and corrupt row-id files.
    pub fn fragment_row_ids(&self, fragment: &Fragment) -> Result<Vec<u64>> {
        match &fragment.row_ids {
            RowIds::Range { start } => Ok((*start..start + fragment.num_rows).collect()),
            RowIds::File { file, checksum } => {
                let ids = read_index_file(&self.dir, file, checksum.as_deref())?.into_vec();
                let past = ids.last().filter(|&&id| id >= self.manifest.next_row_id);
                if ids.len() as u64 != fragment.num_rows || past.is_some() {
                    return Err(integrity::corrupt(
                        &self.dir.join(file),
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
        fragment_deletions(&self.dir, fragment)
    }
}

fn fragment_deletions(dir: &Path, fragment: &Fragment) -> Result<IndexSet> {
    match &fragment.deletions {
        None => Ok(IndexSet::empty()),
        Some(d) => {
            let set = read_index_file(dir, &d.file, d.checksum.as_deref())?;
            if set.len() as u64 != d.count || set.max_id().is_some_and(|m| m >= fragment.num_rows) {
                return Err(integrity::corrupt(
                    &dir.join(&d.file),
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

/// The newest committed version of `dir`.
fn latest(dir: &Path) -> Result<u64> {
    list_versions(dir)?.last().copied().ok_or_else(|| Error::InvalidArgument {
        what: format!("dataset {}", remote::shown(dir)),
        why: "has no committed version".into(),
    })
}

fn read_tags(dir: &Path) -> Result<BTreeMap<String, u64>> {
    let tags = dir.join(TAGS_DIR);
    // (tag name, its file's bytes): from the store for a mirrored dataset (tags are the one
    // mutable thing there), else from the folder.
    let mut files = Vec::new();
    match remote::list(dir, TAGS_DIR) {
        Some(names) => {
            for file in names? {
                let rel = format!("{TAGS_DIR}/{file}");
                // A tag removed between the listing and the read is no tag.
                if let Some(Some(bytes)) = remote::read_fresh(dir, &rel).transpose()? {
                    files.push((file, bytes, rel));
                }
            }
        }
        None => {
            let entries = match std::fs::read_dir(&tags) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
                Err(e) => return Err(io(&tags, e)),
            };
            for entry in entries {
                let path = entry.map_err(|e| io(&tags, e))?.path();
                let Some(file) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
                    continue;
                };
                let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
                files.push((file, bytes, path.display().to_string()));
            }
        }
    }
    let mut out = BTreeMap::new();
    for (file, bytes, shown) in files {
        let Some(name) = file.strip_suffix(".json") else { continue };
        #[derive(serde::Deserialize)]
        struct Tag {
            version: u64,
        }
        let tag: Tag = serde_json::from_slice(&bytes)
            .map_err(|e| Error::InvalidArgument { what: format!("tag file {shown}"), why: e.to_string() })?;
        out.insert(name.to_string(), tag.version);
    }
    Ok(out)
}

/// Whether `dir` has a committed version (a `_versions` folder without one is an import that
/// was killed); one listing, of the store for a mirror.
fn committed(dir: &Path) -> Result<bool> {
    if remote::url_of(dir).is_none() && !dir.join(commit::VERSIONS_DIR).is_dir() {
        return Ok(false);
    }
    Ok(!list_versions(dir)?.is_empty())
}

/// The local directory for `dir`: itself, or the mirror of a dataset URL ([`remote::mirror`]).
fn local_dir(dir: &Path) -> Result<PathBuf> {
    match remote::is_url(dir) {
        true => remote::mirror(dir),
        false => Ok(dir.to_path_buf()),
    }
}

/// Puts `file` into `dir/data/` under a new name: a hard link, or a copy when linking fails
/// (another file system). Returns its path relative to `dir`.
/// A `.beton` file checked against a schema and linked into a dataset's `data/`, to become a
/// fragment of the next version.
struct NewDataFile {
    data_file: String,
    num_rows: u64,
    /// The file's length.
    data_bytes: u64,
    /// Column files for the schema's fields the file lacks (NULL in its rows).
    columns: Vec<ColumnFile>,
    classes: Option<Vec<String>>,
}

impl NewDataFile {
    /// Checks every file of `files` against `schema` (every schema field with the same type, or
    /// missing: NULL in its rows), then links each into `dir`'s `data/`: a file that does not fit
    /// leaves nothing behind. The files' class names must agree with `base`'s
    /// ([`classes::merged`]), and row and fragment ids for them must be left after `base`'s
    /// (both checked before anything is linked).
    fn link_all(dir: &Path, base: &Manifest, files: &[PathBuf]) -> Result<Vec<NewDataFile>> {
        let schema = &base.schema;
        let checked = files.iter().map(|file| Self::check(schema, file)).collect::<Result<Vec<_>>>()?;
        integrity::room_for(base, checked.iter().map(|c| c.0))?;
        let mut merged = base.classes.clone();
        for ((_, _, _, file_classes), file) in checked.iter().zip(files) {
            let what = format!("file {}", file.display());
            merged = classes::merged(merged.as_deref(), file_classes.as_deref(), &what)?;
        }
        checked
            .into_iter()
            .zip(files)
            .map(|((num_rows, data_bytes, missing, classes), file)| {
                let columns = match missing.is_empty() {
                    true => Vec::new(),
                    false => {
                        // NULL in every row: the file has no value for them, and none is made up.
                        let nulls = missing
                            .iter()
                            .map(|(name, ty)| {
                                let ty = values::column_file_type(ty);
                                (name.clone(), arrow_array::new_null_array(&ty, num_rows as usize))
                            })
                            .collect();
                        vec![view::write_column_file(dir, nulls)?]
                    }
                };
                let data_file = match remote::data_file_in_store(dir, file) {
                    Some(rel) => rel,
                    None => link_data_file(dir, file)?,
                };
                Ok(NewDataFile { data_file, num_rows, data_bytes, columns, classes })
            })
            .collect()
    }

    /// `file`'s rows and length, the schema fields it lacks (NULL in its rows), and its classes.
    #[allow(clippy::type_complexity)]
    fn check(
        schema: &[SchemaField],
        file: &Path,
    ) -> Result<(u64, u64, Vec<(String, FieldType)>, Option<Vec<String>>)> {
        let ds = Dataset::open(file)?;
        let mut missing = Vec::new();
        for field in schema {
            let ty = field.field_type()?;
            match ds.fields().iter().find(|f| f.name() == field.name) {
                Some(f) if *f.field_type() == ty => {}
                // A field the file lacks (a column added to the dataset since): NULL in the
                // file's rows.
                None => missing.push((field.name.clone(), ty)),
                Some(f) => {
                    return Err(Error::InvalidArgument {
                        what: format!("field '{}' of {}", field.name, file.display()),
                        why: format!("is a {}, the dataset's is a {}", f.field_type().name(), ty.name()),
                    })
                }
            }
        }
        Ok((ds.num_samples(), ds.file_len(), missing, ds.classes()?))
    }

    /// Adds the file to `m` as its next fragment, with the next row ids, and its class names to
    /// `m`'s ([`classes::merged`]: one list must begin with the other).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the file's labels name other classes than `m`'s, or `m`
    /// has no row or fragment ids left for it.
    fn push_onto(&self, m: &mut Manifest) -> Result<()> {
        integrity::room_for(m, [self.num_rows])?;
        let what = format!("appended data file {}", self.data_file);
        m.classes = classes::merged(m.classes.as_deref(), self.classes.as_deref(), &what)?;
        m.fragments.push(Fragment {
            id: m.next_fragment_id,
            data_file: self.data_file.clone(),
            num_rows: self.num_rows,
            data_bytes: Some(self.data_bytes),
            row_ids: RowIds::Range { start: m.next_row_id },
            deletions: None,
            columns: self.columns.clone(),
        });
        m.next_row_id += self.num_rows;
        m.next_fragment_id += 1;
        Ok(())
    }
}

/// The schema a dataset made from `ds` has: its fields (no custom fields, whose layout a
/// manifest cannot describe).
fn schema_of(ds: &Dataset, file: &Path) -> Result<Vec<SchemaField>> {
    let mut schema = Vec::new();
    for f in ds.fields() {
        if matches!(f.field_type(), FieldType::Custom(_)) {
            return Err(Error::InvalidArgument {
                what: format!("field '{}' of {}", f.name(), file.display()),
                why: "is a custom field, whose layout a dataset directory cannot describe".into(),
            });
        }
        schema.push(SchemaField::new(f.name(), f.field_type()));
    }
    Ok(schema)
}

fn link_data_file(dir: &Path, file: &Path) -> Result<String> {
    let rel = format!("{DATA_DIR}/{}.beton", commit::unique_name());
    let target = dir.join(&rel);
    let data = dir.join(DATA_DIR);
    std::fs::create_dir_all(&data).map_err(|e| io(&data, e))?;
    commit::crash_point();
    if std::fs::hard_link(file, &target).is_err() {
        let tmp = commit::temp_file(dir)?;
        let mut src = std::fs::File::open(file).map_err(|e| io(file, e))?;
        std::io::copy(&mut src, &mut tmp.as_file()).map_err(|e| io(tmp.path(), e))?;
        tmp.as_file().sync_all().map_err(|e| io(tmp.path(), e))?;
        tmp.persist_noclobber(&target).map_err(|e| io(&target, e.error))?;
    }
    commit::crash_point();
    commit::sync_dir(&data);
    Ok(rel)
}

/// Writes `set` as a new index-set file in `folder`; returns its reference.
pub(crate) fn write_index_file(dir: &Path, folder: &str, set: &IndexSet) -> Result<FileRef> {
    let rel = format!("{folder}/{}.bidx", commit::unique_name());
    let bytes = set.to_bytes();
    write_new_file(dir, &rel, &bytes)?;
    Ok(FileRef { file: rel, count: set.len() as u64, checksum: Some(integrity::checksum(&bytes)) })
}

/// Reads an index-set file of the dataset, checked against its `checksum` when it has one.
pub(crate) fn read_index_file(dir: &Path, rel: &str, checksum: Option<&str>) -> Result<IndexSet> {
    remote::fetch(dir, rel)?;
    let path = integrity::inside(dir, rel)?;
    let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
    integrity::verify(&path, &bytes, checksum)?;
    IndexSet::from_bytes(&bytes).map_err(|e| Error::InvalidArgument {
        what: format!("index-set file {}", path.display()),
        why: e.to_string(),
    })
}

/// The value deleted rows get in an added column (never visible): the type's zero
/// ([`FieldKind::zero`](beton_storage::FieldKind::zero)), but 0.0 for floats and an empty raw
/// image for images.
fn default_value(ty: &FieldType) -> ArrayRef {
    let mut b = values::ValuesBuilder::new(ty);
    match ty.kind().value_kind() {
        beton_storage::ValueKind::Float => {
            return std::sync::Arc::new(arrow_array::Float64Array::from(vec![0.0]))
        }
        beton_storage::ValueKind::Image => {
            let empty = beton_storage::ImageRef {
                mode: beton_storage::ImageMode::Raw,
                width: 0,
                height: 0,
                channels: beton_storage::Channels::Rgb,
                data: &[],
            };
            b.push(&beton_storage::Value::Image(empty)).expect("an image value for an image field");
        }
        _ => {
            let (zero, _) = ty.kind().zero();
            b.encode(zero, &beton_storage::ImageOptions::default(), 0.0)
                .expect("a type's zero is one of its values");
        }
    }
    b.finish()
}

/// Writes the table rows `rows` (all for `None`) of a version's table to `path`.
/// Patch column files marking as NULL the rows of a data file that hold a NULL's filler
/// ([`crate::copy::copy_rows`]'s `filled`): one file per field, its `_row` the rows and its
/// values nulls (docs/FORMAT.md §13).
fn null_patches(dir: &Path, schema: &[(String, FieldType)], filled: &[Filled]) -> Result<Vec<ColumnFile>> {
    let mut files = Vec::with_capacity(filled.len());
    for f in filled {
        let ty = schema.iter().find(|(n, _)| *n == f.field).map(|(_, t)| t).ok_or_else(|| {
            Error::InvalidArgument {
                what: format!("field '{}'", f.field),
                why: "is not in the schema".into(),
            }
        })?;
        let rows: ArrayRef = std::sync::Arc::new(arrow_array::UInt64Array::from(f.rows.clone()));
        let values = arrow_array::new_null_array(&values::column_file_type(ty), f.rows.len());
        let mut file = view::write_column_file(
            dir,
            vec![(view::PATCH_ROWS.to_string(), rows), (f.field.clone(), values)],
        )?;
        file.fields.retain(|n| n != view::PATCH_ROWS);
        files.push(file);
    }
    Ok(files)
}

/// The fields of `schema` named by `names`, in that order.
fn choose_fields(schema: &[(String, FieldType)], names: &[String]) -> Result<Vec<(String, FieldType)>> {
    if names.is_empty() {
        return Err(Error::InvalidArgument { what: "fields".into(), why: "names no field".into() });
    }
    let mut chosen: Vec<(String, FieldType)> = Vec::with_capacity(names.len());
    for name in names {
        if chosen.iter().any(|(n, _)| n == name) {
            return Err(Error::InvalidArgument {
                what: "fields".into(),
                why: format!("names '{name}' twice"),
            });
        }
        let field = schema.iter().find(|(n, _)| n == name).ok_or_else(|| Error::NoSuchColumn {
            name: name.clone(),
            available: schema.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
        })?;
        chosen.push(field.clone());
    }
    Ok(chosen)
}

/// [`Error::InvalidArgument`] naming `what` when an index of `rows` is past the `num_rows` of
/// `version`.
fn check_indices(rows: &IndexSet, what: &str, version: u64, num_rows: u64) -> Result<()> {
    match rows.max_id().filter(|&m| m >= num_rows) {
        Some(max) => Err(Error::InvalidArgument {
            what: what.to_string(),
            why: format!("index {max} is past the end of version {version} ({num_rows} rows)"),
        }),
        None => Ok(()),
    }
}

fn export_table(
    view: &VersionView,
    table: &crate::Table<'_>,
    schema: &[(String, FieldType)],
    path: &Path,
    rows: Option<&IndexSet>,
    options: &ExportOptions,
) -> Result<Copied> {
    use beton_storage::WriterOptions;
    if let Some(rows) = rows {
        check_indices(rows, "rows to export", view.number(), view.num_rows())?;
    }
    let page_size =
        view.datasets().map(|d| d.page_size()).max().unwrap_or(beton_storage::format::DEFAULT_PAGE_SIZE);
    let options = WriterOptions {
        page_size,
        num_threads: options.num_threads,
        progress: options.progress.clone(),
        ..WriterOptions::default()
    };
    let copy = crate::copy::Copy { fields: schema, rows: rows.map(IndexSet::as_slice), classes: None };
    crate::copy::copy_rows(table, path, copy, options)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, LargeBinaryArray};
    use beton_storage::{ArraySpec, CustomField, DType, Slot};

    use super::*;

    #[test]
    fn deleted_rows_get_zeros_of_the_right_size() {
        let spec = ArraySpec::new(DType::parse("<f4").unwrap(), vec![2, 3]).unwrap();
        let binary =
            |n: usize| -> ArrayRef { Arc::new(LargeBinaryArray::from(vec![vec![0u8; n].as_slice()])) };
        let custom = CustomField { slot: Slot { size: 6, align: 1 }, arguments: Box::new([0; 1024]) };
        let cases: Vec<(FieldType, ArrayRef)> = vec![
            (FieldType::Int, Arc::new(arrow_array::Int64Array::from(vec![0]))),
            (FieldType::Float, Arc::new(arrow_array::Float64Array::from(vec![0.0]))),
            (FieldType::Bool, Arc::new(arrow_array::BooleanArray::from(vec![false]))),
            (FieldType::Text, Arc::new(arrow_array::StringArray::from(vec![""]))),
            (FieldType::Json, Arc::new(arrow_array::LargeStringArray::from(vec!["null"]))),
            (FieldType::Bytes, binary(0)),
            (FieldType::Array(DType::parse("<i2").unwrap()), binary(0)),
            (FieldType::NDArray(spec.clone()), binary(24)),
            (FieldType::TorchTensor(spec), binary(24)),
            (FieldType::Custom(custom), binary(6)),
        ];
        for (ty, want) in cases {
            assert_eq!(&*default_value(&ty), &*want as &dyn Array, "{ty:?}");
        }
        for ty in [FieldType::RgbImage, FieldType::GreyImage] {
            let array = default_value(&ty);
            let cell = values::cell(&array, &ty, 0).unwrap().unwrap();
            let img = cell.as_image().unwrap();
            assert_eq!(
                (img.mode, img.width, img.height, img.data),
                (beton_storage::ImageMode::Raw, 0, 0, &[][..])
            );
        }
    }
}
