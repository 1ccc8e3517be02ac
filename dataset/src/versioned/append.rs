//! New data files in a version: appends of `.beton` files and `commit_files` (files written
//! apart, one new version).

use std::path::{Path, PathBuf};

use beton_storage::{Dataset, FieldType};

use super::*;
use crate::error::{Error, Result};

impl VersionedDataset {
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
    pub(super) fn append_files_with(
        &self,
        files: &[PathBuf],
        columns: Vec<Vec<ColumnFile>>,
        message: &str,
    ) -> Result<VersionedDataset> {
        let _edit = lock::edit(self.dir())?;
        let read = &self.manifest;
        let mut added = NewDataFile::link_all(&*self.store, read, files)?;
        for (file, columns) in added.iter_mut().zip(columns) {
            file.columns.extend(columns);
        }
        NewDataFile::make_copies(&*self.store, &mut added.iter_mut().collect::<Vec<_>>());
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
        let store = crate::store::open(dir)?;
        let Some(first) = files.first() else {
            return Err(Error::InvalidArgument {
                what: format!("commit to {}", store.location()),
                why: "no data files to commit".into(),
            });
        };
        if committed(&*store)? {
            return Self::open_in(store, VersionRef::Latest)?.append_files(files, message);
        }
        let dir = store.root();
        let schema = schema_of(&Dataset::open(first)?, first)?;
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let _edit = lock::edit(dir)?;
        let mut m = Manifest::first(schema, Operation::Create);
        let mut added = NewDataFile::link_all(&*store, &m, files)?;
        NewDataFile::make_copies(&*store, &mut added.iter_mut().collect::<Vec<_>>());
        m.message = message.to_string();
        for file in &added {
            file.push_onto(&mut m)?;
        }
        match Self::create_with(Arc::clone(&store), m) {
            Ok(v) => Ok(v),
            // Another writer made the dataset meanwhile: append to it instead (the links made
            // here are left to `cleanup`).
            Err(_) if !list_versions(&*store)?.is_empty() => {
                Self::open_in(store, VersionRef::Latest)?.append_files(files, message)
            }
            Err(e) => Err(e),
        }
    }
}

impl VersionedDataset {
    /// Makes the dataset in `store` (which must not be one yet) with one version holding the
    /// `.beton` files `files` in order, each with the column files (written in the dataset
    /// already) of its NULLs: the first file's schema, splits and class names, the others added
    /// as [`VersionedDataset::append_files`] adds them. Every file is checked before any is
    /// linked. `source` names them in the version's operation, `message` is its message.
    pub(super) fn import_files(
        store: Arc<dyn Store>,
        files: &[(PathBuf, Vec<ColumnFile>)],
        source: &str,
        message: &str,
    ) -> Result<VersionedDataset> {
        let dir = store.root();
        let Some(((first, columns), rest)) = files.split_first() else {
            return Err(Error::InvalidArgument {
                what: "import".into(),
                why: "no data file to import".into(),
            });
        };
        let ds = Dataset::open(first)?;
        let schema = schema_of(&ds, first)?;
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        // A `_versions` folder with no manifest is an import that was killed: start again.
        if committed(&*store)? {
            return Err(already_a_dataset(&*store));
        }
        let _edit = lock::edit(dir)?;
        let n = ds.num_samples();
        let mut m = Manifest::first(schema, Operation::Import { source: source.to_string() });
        m.message = message.to_string();
        m.next_row_id = n;
        m.next_fragment_id = 1;
        m.fragments.push(Fragment {
            id: 0,
            data_file: String::new(),
            num_rows: n,
            data_bytes: Some(ds.file_len()),
            row_ids: RowIds::Range { start: 0 },
            deletions: None,
            columns: columns.clone(),
            copy: None,
        });
        m.classes = ds.classes()?;
        // The others checked against the first (fields, class names, ids) before anything is
        // linked; a file that does not fit leaves nothing behind.
        let rest_paths: Vec<PathBuf> = rest.iter().map(|(f, _)| f.clone()).collect();
        let mut added = NewDataFile::link_all(&*store, &m, &rest_paths)?;
        m.fragments[0].data_file = link_data_file(dir, first)?;
        // Row k of the first data file has id k: its splits are row-id sets as they are.
        for (name, set) in crate::splits::all(&ds)? {
            m.splits.insert(name, write_index_file(dir, SPLITS_DIR, &set)?);
        }
        // The columnar copies of all of them, the first included (one group copy on a local
        // disk).
        let mut first_file = NewDataFile {
            data_file: m.fragments[0].data_file.clone(),
            num_rows: n,
            data_bytes: ds.file_len(),
            columns: Vec::new(),
            classes: None,
            copy: None,
        };
        let mut all: Vec<&mut NewDataFile> =
            std::iter::once(&mut first_file).chain(added.iter_mut()).collect();
        NewDataFile::make_copies(&*store, &mut all);
        m.fragments[0].copy = first_file.copy;
        for (file, (_, columns)) in added.iter_mut().zip(rest) {
            file.columns.extend(columns.iter().cloned());
            file.push_onto(&mut m)?;
        }
        Self::create_with(store, m)
    }
}

/// A `.beton` file checked against a schema and linked into a dataset's `data/`, to become a
/// fragment of the next version.
pub(super) struct NewDataFile {
    data_file: String,
    num_rows: u64,
    /// The file's length.
    data_bytes: u64,
    /// Column files for the schema's fields the file lacks (NULL in its rows).
    columns: Vec<ColumnFile>,
    classes: Option<Vec<String>>,
    /// The group copy holding its columnar copy ([`NewDataFile::make_copies`]), if one does.
    copy: Option<String>,
}

impl NewDataFile {
    /// Checks every file of `files` against `schema` (every schema field with the same type, or
    /// missing: NULL in its rows), then links each into `dir`'s `data/`: a file that does not fit
    /// leaves nothing behind. The files' class names must agree with `base`'s
    /// ([`classes::merged`]), and row and fragment ids for them must be left after `base`'s
    /// (both checked before anything is linked).
    fn link_all(store: &dyn Store, base: &Manifest, files: &[PathBuf]) -> Result<Vec<NewDataFile>> {
        let dir = store.root();
        let schema = &base.schema;
        let checked = files.iter().map(|file| Self::check(schema, file)).collect::<Result<Vec<_>>>()?;
        manifest::room_for(base, checked.iter().map(|c| c.0))?;
        let mut merged = base.classes.clone();
        for ((_, _, _, file_classes), file) in checked.iter().zip(files) {
            let what = format!("file {}", file.display());
            merged = classes::merged(merged.as_deref(), file_classes.as_deref(), &what)?;
        }
        let linked = checked
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
                let data_file = match store.in_store(file) {
                    Some(rel) => rel,
                    None => link_data_file(dir, file)?,
                };
                Ok(NewDataFile { data_file, num_rows, data_bytes, columns, classes, copy: None })
            })
            .collect::<Result<Vec<NewDataFile>>>()?;
        Ok(linked)
    }

    /// Makes the columnar copies of `files` (linked, about to be committed together): one group
    /// copy for all of them where the store is a local disk, named in each one's fragment, else
    /// one beside each data file. The first query after the write then reads copies like every
    /// later one, and a new process's first query of a version of 2,000 data files opens one
    /// copy, not 2,000 (columnar.rs). A copy that cannot be made is no error of the write.
    fn make_copies(store: &dyn Store, files: &mut [&mut NewDataFile]) {
        let dir = store.root();
        let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(&f.data_file)).collect();
        if store.url().is_none() {
            if let Some(name) = crate::columnar::group_beside_new_data_files(&paths) {
                let parent = Path::new(&files[0].data_file).parent().and_then(Path::to_str).unwrap_or("");
                let rel = match parent {
                    "" => name,
                    parent => format!("{parent}/{name}"),
                };
                for f in files.iter_mut() {
                    f.copy = Some(rel.clone());
                }
                return;
            }
        }
        crate::columnar::beside_new_data_files(&paths);
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
        manifest::room_for(m, [self.num_rows])?;
        let what = format!("appended data file {}", self.data_file);
        m.classes = classes::merged(m.classes.as_deref(), self.classes.as_deref(), &what)?;
        m.fragments.push(Fragment {
            id: m.next_fragment_id,
            data_file: self.data_file.clone(),
            num_rows: self.num_rows,
            data_bytes: Some(self.data_bytes),
            row_ids: RowIds::Range { start: m.line_next_row_id() },
            deletions: None,
            columns: self.columns.clone(),
            copy: self.copy.clone(),
        });
        m.give_row_ids(self.num_rows);
        m.next_fragment_id += 1;
        Ok(())
    }
}

/// The schema a dataset made from `ds` has: its fields (no custom fields, whose layout a
/// manifest cannot describe).
pub(super) fn schema_of(ds: &Dataset, file: &Path) -> Result<Vec<SchemaField>> {
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

/// Puts `file` into `dir/data/` under a new name: a hard link, or a copy when linking fails
/// (another file system). Returns its path relative to `dir`.
pub(super) fn link_data_file(dir: &Path, file: &Path) -> Result<String> {
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
