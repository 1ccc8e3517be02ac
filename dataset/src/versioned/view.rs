//! A version opened for reading: its data files, the rows each keeps, the values its column
//! files give, as one [`Table`] with one index space (docs/FORMAT.md §13).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::NullBuffer;
use beton_storage::{Dataset, FieldType, OpenOptions};

use super::manifest::{ColumnFile, Fragment, RowIds};
use super::{read_index_file, VersionedDataset};
use crate::column_values::ColumnValues;
pub use crate::column_values::{Columns, PATCH_ROWS};
use crate::columnar::FileState;
use crate::error::{Error, Result};
use crate::kept_rows::KeptRows;
use crate::store::Store;
use crate::table::{ColumnCache, CopySlot, Part, PartRowIds, Table};

/// A data file of a version, its kept rows (`None`: all), the values column files give it, and
/// the rows where a field is NULL ([`FragmentValues::nulls`]).
pub type DataPart = (Arc<Dataset>, Option<Arc<KeptRows>>, Columns, BTreeMap<String, NullBuffer>);

/// What a fragment's column files give it, read and patched once.
#[derive(Debug, Clone, Default)]
pub struct FragmentValues {
    /// Values of fields that column files replace or add, by name: one per data-file row. A
    /// null cell is a row a patch leaves alone (the data file's value stands), or a NULL.
    /// Patches stay as written until a reader needs a field's whole column.
    pub columns: Columns,
    /// The fields that are NULL in some rows (SQL's NULL: no value), with their validity over
    /// the data file's rows (`false`: NULL). A field absent here has a value in every row.
    /// NULLs come from column files: a null in a full column file, or in a patch's values, is
    /// a NULL (docs/FORMAT.md §13); a field neither the data file nor a column file holds is
    /// NULL in every row.
    pub nulls: BTreeMap<String, NullBuffer>,
}

/// One fragment: its data file, opened on first use, and what the version changes about it.
/// Views of versions that share a fragment (the manifest's, unchanged by the edits between
/// them) share its `Opened`: an edit's view costs what the edit changed.
#[derive(Debug)]
struct Opened {
    /// The fragment as the manifest gives it (its data file, relative to the directory, or a
    /// `.beton` file's path; its rows and bytes, checked when the file is opened).
    fragment: Arc<Fragment>,
    ds: OnceLock<Arc<Dataset>>,
    /// Its kept rows, held as its deleted ones (`None`: none deleted): an edit, `ds[i]`, the
    /// row counts and queries of columnar copies never list them (deleting 5 rows of a 100 M-row
    /// data file makes no list of 100 M kept rows).
    kept: Option<Arc<KeptRows>>,
    row_ids: PartRowIds,
    /// Its first and last row id (`None`: no rows).
    span: Option<(u64, u64)>,
    /// Its data file's columnar copy, opened on the first query of the version.
    copy: CopySlot,
    /// Set once its group copy (if the fragment names one) was looked in: a data file that does
    /// not match its group makes its own copy when first used, and later tables do not map the
    /// group again for it.
    group_tried: Arc<OnceLock<()>>,
}

impl Opened {
    /// Fragment `f` of `version`: its deletion and row-id files read, or taken from `like`, the
    /// same fragment in an earlier version, where they are the same files; its data file and
    /// columnar copy shared with `like`'s when it is the same data file.
    fn new(version: &VersionedDataset, f: &Arc<Fragment>, like: Option<&Opened>) -> Result<Opened> {
        let like = like.filter(|o| o.fragment.id == f.id);
        let kept =
            match like.filter(|o| o.fragment.deletions == f.deletions && o.fragment.num_rows == f.num_rows) {
                Some(o) => o.kept.clone(),
                None => {
                    let deleted = version.fragment_deletions(f)?;
                    match deleted.is_empty() {
                        true => None,
                        false => Some(Arc::new(KeptRows::new(f.num_rows, deleted)?)),
                    }
                }
            };
        let (row_ids, span) = match (&f.row_ids, like.filter(|o| o.fragment.row_ids == f.row_ids)) {
            (_, Some(o)) if o.fragment.num_rows == f.num_rows => (o.row_ids.clone(), o.span),
            (RowIds::Range { start }, _) => {
                (PartRowIds::Range(*start), (f.num_rows > 0).then(|| (*start, start + f.num_rows - 1)))
            }
            (RowIds::File { .. }, _) => {
                let ids = version.fragment_row_ids(f)?;
                let span = ids.first().zip(ids.last()).map(|(a, b)| (*a, *b));
                (PartRowIds::List(Arc::new(ids)), span)
            }
        };
        let mut opened = Opened {
            fragment: Arc::clone(f),
            ds: OnceLock::new(),
            kept,
            row_ids,
            span,
            copy: CopySlot::default(),
            group_tried: Arc::default(),
        };
        if let Some(o) = like {
            opened.share_file_of(o);
        }
        Ok(opened)
    }

    /// Takes `old`'s open data file and columnar copy when it is the same data file: data files
    /// are written once under names of their own, so the same name, rows and bytes is the same
    /// file, opened and checked already.
    fn share_file_of(&mut self, old: &Opened) {
        let (a, b) = (&*self.fragment, &*old.fragment);
        if (&a.data_file, a.num_rows, a.data_bytes) != (&b.data_file, b.num_rows, b.data_bytes) {
            return;
        }
        if let Some(ds) = old.ds.get() {
            let _ = self.ds.set(Arc::clone(ds));
        }
        self.copy = Arc::clone(&old.copy);
        self.group_tried = Arc::clone(&old.group_tried);
    }

    /// Rows in its data file (deleted ones included).
    fn file_rows(&self) -> u64 {
        self.fragment.num_rows
    }

    /// The rows it gives the version (its rows less its deletions).
    fn num_rows(&self) -> u64 {
        self.kept.as_ref().map_or(self.file_rows(), |k| k.len())
    }

    /// Its kept rows (`None`: all).
    fn rows(&self) -> Option<Arc<KeptRows>> {
        self.kept.clone()
    }

    /// The data-file row of its `local`-th kept row, without listing them.
    fn file_row(&self, local: u64) -> u64 {
        self.kept.as_ref().map_or(local, |k| k.get(local))
    }
}

/// A dataset at a version, open for reading: its data files (fragments), the rows each keeps and
/// the values column files give them, as one [`Table`] ([`VersionView::table`]) and one index
/// space — what SQL, `ds[i]`, galleries, explain and the loader read. A version of a dataset
/// directory opens with [`VersionView::open`]; a `.beton` file with [`VersionView::of_file`], as a
/// read-only dataset of one fragment at version 0 with no other files. Data files are mapped on
/// first use (opening a version of 10,000 data files reads its manifest, its deletion and row-id
/// files, and no data file); column files on the first use of the table.
#[derive(Debug)]
pub struct VersionView {
    /// The version of a dataset directory; `None` for a `.beton` file.
    version: Option<VersionedDataset>,
    /// The visible fields and their types.
    schema: Vec<(String, FieldType)>,
    fragments: Vec<Arc<Opened>>,
    /// Each fragment's column-file values and NULLs, by field: read and patched once.
    columns: OnceLock<Vec<FragmentValues>>,
    /// The named splits (row ids), read once.
    splits: OnceLock<Arc<BTreeMap<String, crate::IndexSet>>>,
    /// The columns its tables materialised, kept for the next query (a version never changes;
    /// a `.beton` file's are kept while the file is as they were read from, `file_state`).
    column_cache: ColumnCache,
    /// A `.beton` file's state when `column_cache` was filled from it ([`FileState`]).
    file_state: Mutex<Option<FileState>>,
}

impl VersionView {
    /// Opens `version`: reads its deletion and row-id files; its data files are opened (and
    /// checked against the manifest) on first use, its column files read on the first use of
    /// the table.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for corrupt deletion or row-id files.
    pub fn open(version: &VersionedDataset) -> Result<VersionView> {
        let m = version.manifest();
        let fragments = m
            .fragments
            .shared()
            .iter()
            .map(|f| Opened::new(version, f, None).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        let spans = fragments.iter().map(|f| f.span).enumerate();
        super::manifest::check_spans(version.dir(), m, spans, |a, b| {
            shared_id(&fragments[a], &fragments[b])
        })?;
        Self::with_fragments(version, fragments)
    }

    fn with_fragments(version: &VersionedDataset, fragments: Vec<Arc<Opened>>) -> Result<VersionView> {
        let m = version.manifest();
        let schema = m.schema.iter().map(|f| Ok((f.name.clone(), f.field_type()?))).collect::<Result<_>>()?;
        Ok(VersionView {
            version: Some(version.clone()),
            schema,
            fragments,
            columns: OnceLock::new(),
            splits: OnceLock::new(),
            column_cache: ColumnCache::default(),
            file_state: Mutex::new(None),
        })
    }

    /// [`VersionView::open`] of `version`, a later version of the directory `previous` is a view
    /// of (the one an edit through `previous` committed): the fragments the edit left alone are
    /// shared with `previous` as they are (their data files, columnar copies, kept rows, row
    /// ids), the data files of those it changed are not opened again, so opening the view and
    /// the first query after an edit cost what the edit changed, not what a new process pays.
    ///
    /// # Errors
    /// As [`VersionView::open`].
    pub fn open_after(version: &VersionedDataset, previous: &VersionView) -> Result<VersionView> {
        let Some(before) = previous.version.as_ref().filter(|p| p.dir() == version.dir()) else {
            return VersionView::open(version);
        };
        let m = version.manifest();
        // The previous view's fragments by data file, made only for a fragment not in place.
        let mut by_file: Option<std::collections::HashMap<&str, &Opened>> = None;
        let mut fragments = Vec::with_capacity(m.fragments.len());
        // Row ids of fragments that are not the previous version's: checked against the others.
        let mut fresh_spans = Vec::new();
        for (k, f) in m.fragments.shared().iter().enumerate() {
            // The very fragment the previous view has in place (the edit left it alone).
            if let Some(o) = previous.fragments.get(k).filter(|o| Arc::ptr_eq(&o.fragment, f)) {
                fragments.push(Arc::clone(o));
                continue;
            }
            let in_place = previous.fragments.get(k).filter(|o| o.fragment.id == f.id).map(|o| &**o);
            let opened = match in_place {
                Some(o) => Opened::new(version, f, Some(o))?,
                // A new fragment (an id the previous version could not have): a new data file.
                None if f.id >= before.manifest().next_fragment_id => Opened::new(version, f, None)?,
                None => {
                    let map = by_file.get_or_insert_with(|| {
                        previous.fragments.iter().map(|o| (o.fragment.data_file.as_str(), &**o)).collect()
                    });
                    let mut opened = Opened::new(version, f, None)?;
                    if let Some(o) = map.get(f.data_file.as_str()) {
                        opened.share_file_of(o);
                    }
                    opened
                }
            };
            if in_place.is_none_or(|o| o.span != opened.span) {
                fresh_spans.push((k, opened.span));
            }
            fragments.push(Arc::new(opened));
        }
        // The previous version's row ids are below its next_row_id and do not overlap: row ids
        // past it need checking only among themselves.
        let past = before.manifest().next_row_id;
        let shared = |a: usize, b: usize| shared_id(&fragments[a], &fragments[b]);
        match fresh_spans.iter().filter_map(|(_, s)| *s).all(|(first, _)| first >= past) {
            true => super::manifest::check_spans(version.dir(), m, fresh_spans, shared)?,
            false => {
                let spans = fragments.iter().map(|f| f.span).enumerate();
                super::manifest::check_spans(version.dir(), m, spans, shared)?
            }
        }
        Self::with_fragments(version, fragments)
    }

    /// The data file of fragment `f`, opened on first use and checked against the manifest
    /// (its rows and bytes).
    ///
    /// # Errors
    /// Storage errors opening it; [`Error::Corrupt`] when it is not the file the manifest names.
    fn ds<'v>(&self, f: &'v Opened) -> Result<&'v Arc<Dataset>> {
        self.ds_with(f, &Default::default())
    }

    /// [`VersionView::ds`], the directories in `unlinked` known to hold no symbolic link
    /// ([`super::integrity::unlinked_dirs`]).
    fn ds_with<'v>(&self, f: &'v Opened, unlinked: &HashSet<String>) -> Result<&'v Arc<Dataset>> {
        if let Some(ds) = f.ds.get() {
            return Ok(ds);
        }
        let version = self.version.as_ref().expect("a .beton file's view has its data file open");
        let store = &**version.store();
        let frag = &f.fragment;
        let ds = open_data_file(store, &frag.data_file, unlinked)?;
        let length = frag.data_bytes.filter(|&n| n != ds.file_len());
        if ds.num_samples() != frag.num_rows || length.is_some() {
            return Err(super::integrity::corrupt(
                &store.root().join(&frag.data_file),
                format!(
                    "version {}: data file of fragment {} has {} rows and {} bytes, the manifest says {} rows{}",
                    version.version(),
                    frag.id,
                    ds.num_samples(),
                    ds.file_len(),
                    frag.num_rows,
                    length.map(|n| format!(" and {n} bytes")).unwrap_or_default()
                ),
            ));
        }
        Ok(f.ds.get_or_init(|| Arc::new(ds)))
    }

    /// Every data file, opened (in parallel where not yet) and checked, in manifest order.
    ///
    /// # Errors
    /// As opening one ([`VersionView::dataset`]).
    pub fn datasets(&self) -> Result<Vec<&Dataset>> {
        use rayon::prelude::*;
        let unopened = self.fragments.iter().filter(|f| f.ds.get().is_none()).count();
        if unopened > 64 {
            beton_storage::reserve_descriptors(unopened);
        }
        // Each directory on the way to the data files looked at once, not once per data file.
        let unlinked = match (&self.version, unopened > 1) {
            (Some(version), true) if version.store().url().is_none() => super::integrity::unlinked_dirs(
                version.store().root(),
                self.fragments.iter().filter(|f| f.ds.get().is_none()).map(|f| f.fragment.data_file.as_str()),
            ),
            _ => HashSet::new(),
        };
        let opened: Vec<&Arc<Dataset>> =
            self.fragments.par_iter().map(|f| self.ds_with(f, &unlinked)).collect::<Result<_>>()?;
        Ok(opened.into_iter().map(Arc::as_ref).collect())
    }

    /// The data file of the version's `k`-th data file (manifest order), opened.
    ///
    /// # Errors
    /// Storage errors opening it; [`Error::Corrupt`] when it is not the file the manifest names.
    ///
    /// # Panics
    /// When `k` is not below the number of data files.
    pub fn dataset(&self, k: usize) -> Result<&Arc<Dataset>> {
        self.ds(&self.fragments[k])
    }

    /// The number of data files.
    pub fn num_data_files(&self) -> usize {
        self.fragments.len()
    }

    /// The `.beton` file of a file's view ([`VersionView::of_file`]); `None` for a version of a
    /// dataset directory.
    pub fn file(&self) -> Option<&Arc<Dataset>> {
        match self.version {
            None => self.fragments[0].ds.get(),
            Some(_) => None,
        }
    }

    /// A `.beton` file as a dataset: one fragment at version 0, all its rows, its own fields,
    /// named splits and class names, and no column, deletion, row-id or split files. Its
    /// [`VersionView::table`] is the file's own ([`Table::new`]: no `row_id` column, row ids
    /// being the indices).
    pub fn of_file(ds: Arc<Dataset>) -> VersionView {
        let schema = ds.fields().iter().map(|f| (f.name().to_string(), f.field_type().clone())).collect();
        let fragment = Fragment {
            id: 0,
            data_file: ds.path().display().to_string(),
            num_rows: ds.num_samples(),
            data_bytes: Some(ds.file_len()),
            row_ids: RowIds::Range { start: 0 },
            deletions: None,
            columns: Vec::new(),
            copy: None,
        };
        let span = (fragment.num_rows > 0).then(|| (0, fragment.num_rows - 1));
        let fragment = Opened {
            fragment: Arc::new(fragment),
            ds: OnceLock::from(ds),
            kept: None,
            row_ids: PartRowIds::Range(0),
            span,
            copy: CopySlot::default(),
            group_tried: Arc::default(),
        };
        VersionView {
            version: None,
            schema,
            fragments: vec![Arc::new(fragment)],
            columns: OnceLock::new(),
            splits: OnceLock::new(),
            column_cache: ColumnCache::default(),
            file_state: Mutex::new(None),
        }
    }

    /// Whether the columns kept from the `.beton` file `ds` are still its values: the file is in
    /// the state it was when they were read (else they are dropped, and kept again from now).
    /// A file that cannot be told (in memory, on remote storage, its path holding another file)
    /// keeps nothing: every query reads it afresh, as before columns were kept for files. Text
    /// columns are gathered from the heap: a `LIKE` on a 2 M-row file gathered them at every
    /// query (157 ms, where a dataset directory's version took 19 ms).
    fn file_unchanged(&self, ds: &Dataset) -> bool {
        let Some(now) = FileState::of(ds) else {
            return false;
        };
        let mut state = self.file_state.lock().unwrap_or_else(|p| p.into_inner());
        if state.as_ref() != Some(&now) {
            self.column_cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
            *state = Some(now);
        }
        true
    }

    /// Every fragment's column-file values: full column files replace a field's values, patch
    /// files (with a `_row` column) replace those of the rows they list, in manifest order; and
    /// the NULLs they leave (a null in a full column file or in a patch's values).
    fn columns(&self) -> Result<&[FragmentValues]> {
        if let Some(c) = self.columns.get() {
            return Ok(c);
        }
        let Some(version) = &self.version else {
            // A `.beton` file: every field is in its one data file.
            return Ok(self.columns.get_or_init(|| vec![FragmentValues::default()]));
        };
        let schema: BTreeMap<String, FieldType> = self.schema.iter().cloned().collect();
        let mut all = Vec::with_capacity(self.fragments.len());
        // A data file's fields name what column files must add (below).
        self.datasets()?;
        for f in &self.fragments {
            let ds = self.ds(f)?;
            let num_rows = f.file_rows() as usize;
            let mut columns: BTreeMap<String, ColumnValues> = BTreeMap::new();
            // Validity by field (false: NULL), for fields with a NULL so far.
            let mut valid: BTreeMap<String, Vec<bool>> = BTreeMap::new();
            for file in &f.fragment.columns {
                let read = read_column_file(&**version.store(), file)?;
                let rows = num_rows;
                let full = read.iter().all(|(n, _)| n != PATCH_ROWS);
                if let Some((name, a)) = read.iter().find(|(_, a)| full && a.len() != rows) {
                    return Err(super::integrity::corrupt(
                        &version.dir().join(&file.file),
                        format!(
                            "version {}: column '{name}' has {} values for the {rows} rows of its data file",
                            version.version(),
                            a.len()
                        ),
                    ));
                }
                let patch_rows = read.iter().find(|(n, _)| n == PATCH_ROWS).map(|(_, a)| a.clone());
                for (name, array) in read {
                    if !file.fields.contains(&name) || name == PATCH_ROWS {
                        continue;
                    }
                    match &patch_rows {
                        None => {
                            match array.nulls().filter(|n| n.null_count() > 0) {
                                Some(n) => valid.insert(name.clone(), n.iter().collect()),
                                None => valid.remove(&name),
                            };
                            columns.insert(name, ColumnValues::full(array));
                        }
                        Some(rows) => {
                            // Kept as written, over the data file's values (nulls where the patch
                            // leaves a row alone: values::cell) or a full column's: a patch of 5
                            // images holds 5 images in memory, one of 10 labels 10 labels.
                            let values = match columns.get_mut(&name) {
                                Some(v) => v,
                                None if schema.contains_key(&name) => {
                                    columns.entry(name.clone()).or_insert_with(|| {
                                        ColumnValues::none(num_rows, array.data_type().clone())
                                    })
                                }
                                None => continue,
                            };
                            if array.null_count() > 0 || valid.contains_key(&name) {
                                let mask = valid.entry(name.clone()).or_insert_with(|| vec![true; num_rows]);
                                let rows = rows.as_any().downcast_ref::<arrow_array::UInt64Array>();
                                for (j, &r) in
                                    rows.map(|r| r.values().as_ref()).unwrap_or_default().iter().enumerate()
                                {
                                    if let Some(m) = mask.get_mut(r as usize) {
                                        *m = array.is_valid(j);
                                    }
                                }
                            }
                            values.patch(rows, array, &file.file)?;
                        }
                    }
                }
            }
            let mut nulls: BTreeMap<String, NullBuffer> = valid
                .into_iter()
                .filter(|(_, v)| v.iter().any(|ok| !ok))
                .map(|(name, v)| (name, NullBuffer::from(v)))
                .collect();
            // A field neither the data file nor a column file holds: NULL in every row.
            for (name, ty) in &schema {
                if !columns.contains_key(name) && ds.field_index(name).is_err() {
                    let column_type = super::values::column_file_type(ty);
                    columns.insert(name.clone(), ColumnValues::none(num_rows, column_type));
                    nulls.insert(name.clone(), NullBuffer::new_null(num_rows));
                }
            }
            let columns = columns.into_iter().map(|(name, v)| (name, Arc::new(v))).collect();
            all.push(FragmentValues { columns, nulls });
        }
        let _ = self.columns.set(all);
        Ok(self.columns.get().map(Vec::as_slice).unwrap_or_default())
    }

    /// The version of the dataset directory; `None` for a `.beton` file ([`VersionView::of_file`]),
    /// which has no versions to edit.
    pub fn version(&self) -> Option<&VersionedDataset> {
        self.version.as_ref()
    }

    /// The version's number: 0 for a `.beton` file.
    pub fn number(&self) -> u64 {
        self.version.as_ref().map_or(0, VersionedDataset::version)
    }

    /// Whether this is a `.beton` file ([`VersionView::of_file`]) rather than a version of a
    /// dataset directory.
    pub fn is_file(&self) -> bool {
        self.version.is_none()
    }

    /// Rows in this version (deleted ones left out).
    pub fn num_rows(&self) -> u64 {
        self.fragments.iter().map(|f| f.num_rows()).sum()
    }

    /// The class names (label `k` names class `k`), if known: the manifest's, or a `.beton`
    /// file's own.
    ///
    /// # Errors
    /// A file's class names that cannot be read.
    pub fn classes(&self) -> Result<Option<Vec<String>>> {
        match (&self.version, self.file()) {
            (Some(v), _) => Ok(v.manifest().classes.clone()),
            (None, Some(ds)) => Ok(ds.classes()?),
            (None, None) => Ok(None),
        }
    }

    /// The rows each data file gives the version (its rows less its deletions), in order: the
    /// version's row indices run through the data files in turn.
    pub fn data_file_rows(&self) -> Vec<u64> {
        self.fragments.iter().map(|f| f.num_rows()).collect()
    }

    /// Each data file with its kept rows (`None`: all) and the values column files give it.
    ///
    /// # Errors
    /// Column files that cannot be read.
    pub fn parts(&self) -> Result<Vec<DataPart>> {
        let columns = self.columns()?;
        self.fragments
            .iter()
            .zip(columns)
            .map(|(f, c)| Ok((Arc::clone(self.ds(f)?), f.rows(), c.columns.clone(), c.nulls.clone())))
            .collect()
    }

    /// The visible fields and their types.
    ///
    /// # Errors
    /// A manifest type this beton does not know.
    pub fn schema(&self) -> Result<Vec<(String, FieldType)>> {
        Ok(self.schema.clone())
    }

    /// Reads the column files of the version now (they are read once, on first use): what a
    /// caller holding a lock (Python's GIL) does first without it.
    ///
    /// # Errors
    /// Column files that cannot be read.
    pub fn load_columns(&self) -> Result<()> {
        self.columns().map(drop)
    }

    /// The value of field `field` (of type `ty`) in row `index` of this version, as
    /// [`Table::value`] gives it, without building a table (what `ds[i]` reads).
    ///
    /// # Errors
    /// A row past the end; as [`Table::value`].
    pub fn value(&self, index: u64, field: &str, ty: &FieldType) -> Result<Option<beton_storage::Value<'_>>> {
        let columns = self.columns()?;
        let mut local = index;
        for (f, values) in self.fragments.iter().zip(columns) {
            let n = f.num_rows();
            if local < n {
                let row = f.file_row(local);
                return crate::table::part_value(self.ds(f)?, &values.columns, &values.nulls, row, field, ty);
            }
            local -= n;
        }
        Err(Error::InvalidArgument {
            what: "row".into(),
            why: format!("{index} is past the end of the dataset ({} rows)", self.num_rows()),
        })
    }

    /// Opens the group copies the fragments name (docs/FORMAT.md §14) and gives each fragment
    /// whose data file is open and has no copy yet its copy from its group, when the group holds
    /// one made from that very file: one map for the data files of a commit, however many.
    /// Fragments left without one (no group, a group that is missing or does not match) open or
    /// make a copy of their own on first use, as before ([`crate::columnar::for_data_file`]).
    fn open_group_copies(&self) {
        use rayon::prelude::*;
        let Some(version) = &self.version else { return };
        let store = &**version.store();
        if store.url().is_some() {
            return; // group copies are made on local disks only
        }
        let mut groups: BTreeMap<&str, Vec<&Opened>> = BTreeMap::new();
        for f in &self.fragments {
            if let (Some(group), None, Some(_)) = (f.fragment.copy.as_deref(), f.copy.get(), f.ds.get()) {
                if f.group_tried.set(()).is_ok() {
                    groups.entry(group).or_default().push(f);
                }
            }
        }
        for (group, members) in groups {
            let Some(copy) = crate::columnar::GroupCopy::open(&store.root().join(group)) else { continue };
            members.par_iter().for_each(|f| {
                if let Some(member) = f.ds.get().and_then(|ds| copy.member(ds)) {
                    let _ = f.copy.set(Some(member));
                }
            });
        }
    }

    /// The visible fields and their types, without a copy (read once, at open).
    pub fn fields(&self) -> &[(String, FieldType)] {
        &self.schema
    }

    /// The version as one table: `index` (position), `row_id`, then the schema's columns.
    ///
    /// # Errors
    /// As [`Table::from_parts`]; corrupt split files.
    pub fn table(&self) -> Result<Table<'_>> {
        let Some(version) = &self.version else {
            let ds = self.ds(&self.fragments[0])?;
            let table = Table::new(ds);
            return Ok(match self.file_unchanged(ds) {
                true => table.with_cache(Arc::clone(&self.column_cache)),
                false => table,
            });
        };
        let m = version.manifest();
        let schema = &self.schema;
        let columns = self.columns()?;
        // Every data file opened and checked on all cores (a new process's first query of a
        // version of 2,000 data files opens 2,000), then taken in order.
        self.datasets()?;
        self.open_group_copies();
        let parts = self
            .fragments
            .iter()
            .zip(columns)
            .map(|(f, c)| {
                Ok(Part {
                    ds: self.ds(f)?,
                    rows: f.rows(),
                    columns: c.columns.clone(),
                    nulls: c.nulls.clone(),
                    row_ids: f.row_ids.clone(),
                    copy: Some(Arc::clone(&f.copy)),
                })
            })
            .collect::<Result<_>>()?;
        let splits = match self.splits.get() {
            Some(s) => Arc::clone(s),
            None => {
                let mut read = BTreeMap::new();
                for (name, file) in &m.splits {
                    let set = read_index_file(&**version.store(), &file.file, file.checksum.as_deref())?;
                    if set.len() as u64 != file.count {
                        return Err(super::integrity::corrupt(
                            &version.dir().join(&file.file),
                            format!(
                                "version {}: split '{name}' holds {} row ids, the manifest says {}",
                                m.version,
                                set.len(),
                                file.count
                            ),
                        ));
                    }
                    read.insert(name.clone(), set);
                }
                Arc::clone(self.splits.get_or_init(|| Arc::new(read)))
            }
        };
        Ok(Table::from_parts(parts, schema, splits)?.with_cache(Arc::clone(&self.column_cache)))
    }

    /// The named splits, as indices of this version, by name: a `.beton` file's own, or the
    /// version's split files.
    ///
    /// # Errors
    /// Split blobs or files that are not index sets; as [`VersionView::table`].
    pub fn splits(&self) -> Result<BTreeMap<String, crate::IndexSet>> {
        let Some(version) = &self.version else {
            return crate::splits::all(self.ds(&self.fragments[0])?);
        };
        let table = self.table()?;
        let names = version.manifest().splits.keys();
        names.map(|n| Ok((n.clone(), table.split(n)?.as_ref().clone()))).collect()
    }

    /// The fragment (position in the manifest) and data-file row of each table row of `rows`
    /// (ascending), grouped by fragment.
    pub(crate) fn file_rows(&self, rows: &crate::IndexSet) -> Vec<(usize, Vec<u64>)> {
        let mut out: Vec<(usize, Vec<u64>)> = Vec::new();
        let mut first = 0u64;
        let mut it = rows.iter().peekable();
        for (k, f) in self.fragments.iter().enumerate() {
            let n = f.num_rows();
            let mut mine = Vec::new();
            while let Some(r) = it.next_if(|&r| r < first + n) {
                let local = r - first;
                mine.push(f.file_row(local));
            }
            if !mine.is_empty() {
                out.push((k, mine));
            }
            first += n;
        }
        out
    }
}

/// The first row id fragments `a` and `b` both have (their data-file rows, deleted ones
/// included), if any: ascending ids, merged in one pass (a range against a list by search).
fn shared_id(a: &Opened, b: &Opened) -> Option<u64> {
    let (na, nb) = (a.fragment.num_rows, b.fragment.num_rows);
    match (&a.row_ids, &b.row_ids) {
        (PartRowIds::Range(x), PartRowIds::Range(y)) => {
            let (lo, hi) = ((*x).max(*y), (x + na).min(y + nb));
            (lo < hi).then_some(lo)
        }
        (PartRowIds::Range(start), PartRowIds::List(ids))
        | (PartRowIds::List(ids), PartRowIds::Range(start)) => {
            let n = if matches!(a.row_ids, PartRowIds::Range(_)) { na } else { nb };
            let k = ids.partition_point(|&id| id < *start);
            ids.get(k).copied().filter(|&id| id < start + n)
        }
        (PartRowIds::List(x), PartRowIds::List(y)) => {
            let (mut i, mut j) = (0, 0);
            while i < x.len() && j < y.len() {
                match x[i].cmp(&y[j]) {
                    std::cmp::Ordering::Less => i += 1,
                    std::cmp::Ordering::Greater => j += 1,
                    std::cmp::Ordering::Equal => return Some(x[i]),
                }
            }
            None
        }
    }
}

/// Writes `columns` (each one value per data-file row) as a new Arrow IPC column file.
pub(crate) fn write_column_file(dir: &Path, columns: Vec<(String, ArrayRef)>) -> Result<ColumnFile> {
    let rel = format!("{}/{}.arrow", super::COLUMNS_DIR, super::commit::unique_name());
    let fields: Vec<String> = columns.iter().map(|(n, _)| n.clone()).collect();
    let batch = RecordBatch::try_from_iter(columns)?;
    let mut bytes = Vec::new();
    {
        let mut w = arrow_ipc::writer::FileWriter::try_new(&mut bytes, &batch.schema())?;
        w.write(&batch)?;
        w.finish()?;
    }
    super::commit::write_new_file(dir, &rel, &bytes)?;
    let checksum = Some(super::integrity::checksum(&bytes));
    Ok(ColumnFile { file: rel, fields, checksum })
}

/// Where to open data file `rel` of the dataset: the mirror's copy or its URL
/// ([`Store::data_file`]), a local path refused when it leads outside the directory.
pub(crate) fn data_file(store: &dyn Store, rel: &str) -> Result<std::path::PathBuf> {
    data_file_with(store, rel, &HashSet::new())
}

/// [`data_file`], the directories in `unlinked` known to hold no symbolic link.
fn data_file_with(store: &dyn Store, rel: &str, unlinked: &HashSet<String>) -> Result<std::path::PathBuf> {
    let path = store.data_file(rel);
    match crate::store::is_url(&path) {
        true => Ok(path),
        false => super::integrity::inside_with(store.root(), rel, unlinked),
    }
}

/// Opens data file `rel` of the dataset (its allocation checks deferred to the reads): the
/// mirror's copy, or by URL when there is none, or when the cache evicted it just now.
fn open_data_file(
    store: &dyn Store,
    rel: &str,
    unlinked: &HashSet<String>,
) -> Result<beton_storage::Dataset> {
    // A data file in a directory known to lead nowhere else ([`integrity::unlinked_dirs`]) is
    // opened without following a link: a plain file (what beton writes) then needs no `lstat`
    // of its own (2,000 of them in a version's first query); a link is looked at as below.
    // (Unix only: elsewhere `no_follow` is ignored and a link would go unchecked.)
    if cfg!(unix) && store.url().is_none() && super::integrity::in_unlinked_dir(rel, unlinked) {
        let options = OpenOptions::new().defer_allocation_checks(true).no_follow(true);
        match options.open(store.data_file(rel)) {
            Err(beton_storage::Error::Io { source, .. }) if is_link_refused(&source) => {}
            opened => return opened.map_err(Error::from),
        }
    }
    let open = || {
        OpenOptions::new()
            .defer_allocation_checks(true)
            .open(data_file_with(store, rel, unlinked)?)
            .map_err(Error::from)
    };
    match open() {
        Err(e) if store.url().is_some() && crate::error::is_not_found(&e) => open(),
        other => other,
    }
}

/// Whether an open with `no_follow` failed because the path is a symbolic link.
fn is_link_refused(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    return e.raw_os_error() == Some(libc::ELOOP);
    #[cfg(not(unix))]
    return false;
}

/// Reads a column file, checked against its checksum, mapped (its arrays read the file in place): its columns by name.
fn read_column_file(store: &dyn Store, file: &ColumnFile) -> Result<Vec<(String, ArrayRef)>> {
    let path = super::integrity::inside(store.root(), &file.file)?;
    // Mapped once: its arrays read the map, which outlives an eviction from the cache.
    let map = |path: &Path| beton_storage::MappedFile::open(path).map_err(Error::from);
    let map = match super::commit::read_fetched(store, &file.file, map)? {
        Some(map) => map,
        None => return Err(super::commit::io(&path, std::io::ErrorKind::NotFound.into())),
    };
    if let Some(expected) = &file.checksum {
        // Read whole only up to a size: a larger one (a column of images) is read as it is
        // used, like a data file, and checked by `beton verify`.
        if map.as_slice().len() as u64 <= super::integrity::CHECKED_ON_READ {
            super::integrity::verify(&path, map.as_slice(), Some(expected))?;
        }
    }
    let bad = |why: String| Error::InvalidArgument { what: format!("column file {}", path.display()), why };
    let (schema, batches) = crate::columnar::read_ipc_mapped(Arc::new(map)).map_err(bad)?;
    let batch = match batches.len() {
        1 => batches.into_iter().next().expect("one batch"),
        _ => arrow_select::concat::concat_batches(&schema, &batches)?,
    };
    Ok(schema.fields().iter().map(|f| f.name().clone()).zip(batch.columns().iter().cloned()).collect())
}
