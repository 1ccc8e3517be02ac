//! A version opened for reading: its data files, the rows each keeps, the values its column
//! files give, as one [`Table`] with one index space (docs/FORMAT.md §13).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::NullBuffer;
use beton_storage::{Dataset, FieldType, OpenOptions};

use super::manifest::{ColumnFile, RowIds};
use super::{read_index_file, VersionedDataset};
use crate::error::{Error, Result};
use crate::store::Store;
use crate::table::{ColumnCache, CopySlot, Part, PartRowIds, Table};

/// A data file of a version, its kept rows (`None`: all), the values column files give it, and
/// the rows where a field is NULL ([`FragmentValues::nulls`]).
pub type DataPart =
    (Arc<Dataset>, Option<Arc<Vec<u64>>>, BTreeMap<String, ArrayRef>, BTreeMap<String, NullBuffer>);

/// What a fragment's column files give it, read and patched once.
#[derive(Debug, Clone, Default)]
pub struct FragmentValues {
    /// Values of fields that column files replace or add, by name: one per data-file row. A
    /// null cell is a row a patch leaves alone (the data file's value stands), or a NULL.
    pub columns: BTreeMap<String, ArrayRef>,
    /// The fields that are NULL in some rows (SQL's NULL: no value), with their validity over
    /// the data file's rows (`false`: NULL). A field absent here has a value in every row.
    /// NULLs come from column files: a null in a full column file, or in a patch's values, is
    /// a NULL (docs/FORMAT.md §13); a field neither the data file nor a column file holds is
    /// NULL in every row.
    pub nulls: BTreeMap<String, NullBuffer>,
}

/// One fragment: its data file, opened on first use, and what the version changes about it.
#[derive(Debug)]
struct Opened {
    ds: OnceLock<Arc<Dataset>>,
    /// The data file, relative to the directory (a `.beton` file's view has it open already).
    data_file: String,
    /// The fragment's id, rows and bytes, as the manifest says (checked when it is opened).
    id: u64,
    file_rows: u64,
    data_bytes: Option<u64>,
    /// Its deleted rows (positions in the data file, ascending), if any.
    deleted: Option<crate::IndexSet>,
    /// Its kept rows, made on the first use of the version's table or parts (an edit, `ds[i]`
    /// and the row counts need only `deleted`: deleting 5 rows of a 100 M-row data file makes
    /// no list of 100 M kept rows).
    rows: OnceLock<Option<Arc<Vec<u64>>>>,
    /// Its column files, read on first use.
    column_files: Vec<ColumnFile>,
    row_ids: PartRowIds,
    /// Its data file's columnar copy, opened on the first query of the version.
    copy: CopySlot,
}

impl Opened {
    /// The rows it gives the version (its rows less its deletions).
    fn num_rows(&self) -> u64 {
        self.file_rows - self.deleted.as_ref().map_or(0, |d| d.len() as u64)
    }

    /// Its kept rows (`None`: all), listed on first use: the runs between deleted ones.
    fn rows(&self) -> Option<Arc<Vec<u64>>> {
        let deleted = self.deleted.as_ref()?;
        self.rows
            .get_or_init(|| {
                let mut rows = Vec::with_capacity(self.num_rows() as usize);
                let mut next = 0u64;
                for d in deleted.iter().take_while(|&d| d < self.file_rows) {
                    rows.extend(next..d);
                    next = d + 1;
                }
                rows.extend(next..self.file_rows);
                Some(Arc::new(rows))
            })
            .clone()
    }

    /// The data-file row of its `local`-th kept row, without listing them: `local` plus the
    /// deleted rows before it.
    fn file_row(&self, local: u64) -> u64 {
        let Some(deleted) = &self.deleted else { return local };
        // d[i] - i (the kept rows before the i-th deleted one) never decreases: the deleted
        // rows before the answer are those with d[i] - i <= local.
        let d = deleted.as_slice();
        let (mut lo, mut hi) = (0usize, d.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if d[mid] - mid as u64 <= local {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        local + lo as u64
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
    fragments: Vec<Opened>,
    /// Each fragment's column-file values and NULLs, by field: read and patched once.
    columns: OnceLock<Vec<FragmentValues>>,
    /// The named splits (row ids), read once.
    splits: OnceLock<Arc<BTreeMap<String, crate::IndexSet>>>,
    /// The columns its tables materialised, kept for the next query (a version never changes).
    column_cache: ColumnCache,
}

/// The column of file-row positions in a patch column file (`docs/FORMAT.md` §13).
pub const PATCH_ROWS: &str = "_row";

impl VersionView {
    /// Opens `version`: reads its deletion and row-id files; its data files are opened (and
    /// checked against the manifest) on first use, its column files read on the first use of
    /// the table.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for corrupt deletion or row-id files.
    pub fn open(version: &VersionedDataset) -> Result<VersionView> {
        let store = &**version.store();
        let dir = store.root();
        let m = version.manifest();
        let mut fragments = Vec::with_capacity(m.fragments.len());
        let mut spans = Vec::with_capacity(m.fragments.len());
        for f in &m.fragments {
            let deleted = version.fragment_deletions(f)?;
            let deleted = (!deleted.is_empty()).then_some(deleted);
            let row_ids = match &f.row_ids {
                RowIds::Range { start } => {
                    spans.push((f.num_rows > 0).then(|| (*start, start + f.num_rows - 1)));
                    PartRowIds::Range(*start)
                }
                RowIds::File { .. } => {
                    let ids = version.fragment_row_ids(f)?;
                    spans.push(ids.first().zip(ids.last()).map(|(a, b)| (*a, *b)));
                    PartRowIds::List(Arc::new(ids))
                }
            };
            fragments.push(Opened {
                ds: OnceLock::new(),
                data_file: f.data_file.clone(),
                id: f.id,
                file_rows: f.num_rows,
                data_bytes: f.data_bytes,
                deleted,
                rows: OnceLock::new(),
                column_files: f.columns.clone(),
                row_ids,
                copy: CopySlot::default(),
            });
        }
        super::manifest::check_spans(dir, m, &spans)?;
        let schema = m.schema.iter().map(|f| Ok((f.name.clone(), f.field_type()?))).collect::<Result<_>>()?;
        Ok(VersionView {
            version: Some(version.clone()),
            schema,
            fragments,
            columns: OnceLock::new(),
            splits: OnceLock::new(),
            column_cache: ColumnCache::default(),
        })
    }

    /// The data file of fragment `f`, opened on first use and checked against the manifest
    /// (its rows and bytes).
    ///
    /// # Errors
    /// Storage errors opening it; [`Error::Corrupt`] when it is not the file the manifest names.
    fn ds<'v>(&self, f: &'v Opened) -> Result<&'v Arc<Dataset>> {
        if let Some(ds) = f.ds.get() {
            return Ok(ds);
        }
        let version = self.version.as_ref().expect("a .beton file's view has its data file open");
        let store = &**version.store();
        let ds = open_data_file(store, &f.data_file)?;
        let length = f.data_bytes.filter(|&n| n != ds.file_len());
        if ds.num_samples() != f.file_rows || length.is_some() {
            return Err(super::integrity::corrupt(
                &store.root().join(&f.data_file),
                format!(
                    "version {}: data file of fragment {} has {} rows and {} bytes, the manifest says {} rows{}",
                    version.version(),
                    f.id,
                    ds.num_samples(),
                    ds.file_len(),
                    f.file_rows,
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
        let opened: Vec<&Arc<Dataset>> =
            self.fragments.par_iter().map(|f| self.ds(f)).collect::<Result<_>>()?;
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
        let fragment = Opened {
            file_rows: ds.num_samples(),
            data_bytes: Some(ds.file_len()),
            data_file: ds.path().display().to_string(),
            id: 0,
            ds: OnceLock::from(ds),
            deleted: None,
            rows: OnceLock::new(),
            column_files: Vec::new(),
            row_ids: PartRowIds::Range(0),
            copy: CopySlot::default(),
        };
        VersionView {
            version: None,
            schema,
            fragments: vec![fragment],
            columns: OnceLock::new(),
            splits: OnceLock::new(),
            column_cache: ColumnCache::default(),
        }
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
            let num_rows = f.file_rows as usize;
            let mut columns: BTreeMap<String, ArrayRef> = BTreeMap::new();
            // Validity by field (false: NULL), for fields with a NULL so far.
            let mut valid: BTreeMap<String, Vec<bool>> = BTreeMap::new();
            for file in &f.column_files {
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
                    let array = match &patch_rows {
                        None => {
                            if array.len() != num_rows {
                                return Err(Error::InvalidArgument {
                                    what: format!("column file {}", file.file),
                                    why: format!(
                                        "has {} values of '{name}' for {num_rows} rows",
                                        array.len()
                                    ),
                                });
                            }
                            match array.nulls().filter(|n| n.null_count() > 0) {
                                Some(n) => valid.insert(name.clone(), n.iter().collect()),
                                None => valid.remove(&name),
                            };
                            array
                        }
                        Some(rows) => {
                            // Over the data file's values: nulls where the patch leaves a row alone
                            // (values::cell), so a patch of 5 images holds 5 images in memory.
                            let base = match columns.remove(&name) {
                                Some(b) => b,
                                None if schema.contains_key(&name) => {
                                    arrow_array::new_null_array(array.data_type(), num_rows)
                                }
                                None => continue,
                            };
                            let patched = apply_patch(&base, rows, &array, &file.file)?;
                            if array.null_count() > 0 || valid.contains_key(&name) {
                                let mask = valid.entry(name.clone()).or_insert_with(|| vec![true; num_rows]);
                                let rows = rows.as_any().downcast_ref::<arrow_array::UInt64Array>();
                                for (j, &r) in
                                    rows.map(|r| r.values().as_ref()).unwrap_or_default().iter().enumerate()
                                {
                                    mask[r as usize] = array.is_valid(j);
                                }
                            }
                            patched
                        }
                    };
                    columns.insert(name, array);
                }
            }
            // A field neither the data file nor a column file holds: NULL in every row.
            for (name, ty) in &schema {
                if !columns.contains_key(name) && ds.field_index(name).is_err() {
                    let column_type = super::values::column_file_type(ty);
                    columns.insert(name.clone(), arrow_array::new_null_array(&column_type, num_rows));
                    valid.insert(name.clone(), vec![false; num_rows]);
                }
            }
            let nulls = valid
                .into_iter()
                .filter(|(_, v)| v.iter().any(|ok| !ok))
                .map(|(name, v)| (name, NullBuffer::from(v)))
                .collect();
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
        self.fragments.iter().map(Opened::num_rows).sum()
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
        self.fragments.iter().map(Opened::num_rows).collect()
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
            return Ok(Table::new(self.ds(&self.fragments[0])?));
        };
        let m = version.manifest();
        let schema = &self.schema;
        let columns = self.columns()?;
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

/// `base` with the values at rows `rows` replaced by `values` (a patch column file `file`).
fn apply_patch(base: &ArrayRef, rows: &ArrayRef, values: &ArrayRef, file: &str) -> Result<ArrayRef> {
    let bad = |why: String| Error::InvalidArgument { what: format!("column file {file}"), why };
    let rows = rows
        .as_any()
        .downcast_ref::<arrow_array::UInt64Array>()
        .ok_or_else(|| bad(format!("its {PATCH_ROWS} column is not uint64")))?;
    if rows.len() != values.len() || base.data_type() != values.data_type() {
        return Err(bad(format!("{} rows for {} {} values", rows.len(), values.len(), values.data_type())));
    }
    if let Some(&r) = rows.values().iter().find(|&&r| r >= base.len() as u64) {
        return Err(bad(format!("row {r} is past the data file's {}", base.len())));
    }
    // Ints and floats (labels, scores): written in place into a copy of the base, so patching
    // 10 rows of a 100 M-row field over the data file's values (an all-null base) touches 10
    // values, not a list of 100 M picks.
    use arrow_array::types::{Float64Type, Int64Type};
    if let Some(patched) = scatter::<Int64Type>(base, rows.values(), values) {
        return Ok(patched);
    }
    if let Some(patched) = scatter::<Float64Type>(base, rows.values(), values) {
        return Ok(patched);
    }
    let mut picks: Vec<(usize, usize)> = (0..base.len()).map(|r| (0, r)).collect();
    for (j, &r) in rows.values().iter().enumerate() {
        let slot = picks
            .get_mut(r as usize)
            .ok_or_else(|| bad(format!("row {r} is past the data file's {}", base.len())))?;
        *slot = (1, j);
    }
    Ok(arrow_select::interleave::interleave(&[base.as_ref(), values.as_ref()], &picks)?)
}

/// [`apply_patch`] of a primitive column: `base`'s values (zeros allocated lazily for an
/// all-null base) and validity with row `rows[j]` set to `values[j]`, the last of a row
/// repeated winning, as `interleave` gives. `None` for another type. Rows are below the base's
/// length (checked by the caller).
fn scatter<T: arrow_array::ArrowPrimitiveType>(
    base: &ArrayRef,
    rows: &[u64],
    values: &ArrayRef,
) -> Option<ArrayRef> {
    use arrow_array::cast::AsArray;
    let (base, values) = (base.as_primitive_opt::<T>()?, values.as_primitive_opt::<T>()?);
    let n = base.len();
    let all_null = base.null_count() == n && n > 0;
    let mut out: Vec<T::Native> = match all_null {
        true => vec![T::Native::default(); n],
        false => base.values().to_vec(),
    };
    let mut valid = (base.null_count() > 0 || values.null_count() > 0).then(|| {
        let mut b = arrow_buffer::BooleanBufferBuilder::new(n);
        match base.nulls() {
            Some(nulls) => b.append_buffer(nulls.inner()),
            None => b.append_n(n, true),
        }
        b
    });
    for (j, &r) in rows.iter().enumerate() {
        out[r as usize] = values.value(j);
        if let Some(v) = valid.as_mut() {
            v.set_bit(r as usize, values.is_valid(j));
        }
    }
    let nulls = valid.map(|mut v| NullBuffer::new(v.finish()));
    Some(Arc::new(
        arrow_array::PrimitiveArray::<T>::new(out.into(), nulls).with_data_type(base.data_type().clone()),
    ))
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
    let path = store.data_file(rel);
    match crate::store::is_url(&path) {
        true => Ok(path),
        false => super::integrity::inside(store.root(), rel),
    }
}

/// Opens data file `rel` of the dataset (its allocation checks deferred to the reads): the
/// mirror's copy, or by URL when there is none, or when the cache evicted it just now.
fn open_data_file(store: &dyn Store, rel: &str) -> Result<beton_storage::Dataset> {
    let open =
        || OpenOptions::new().defer_allocation_checks(true).open(data_file(store, rel)?).map_err(Error::from);
    match open() {
        Err(e) if store.url().is_some() && crate::error::is_not_found(&e) => open(),
        other => other,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fragment(file_rows: u64, deleted: Vec<u64>) -> Opened {
        Opened {
            ds: OnceLock::new(),
            data_file: String::new(),
            id: 0,
            file_rows,
            data_bytes: None,
            deleted: (!deleted.is_empty()).then(|| crate::IndexSet::from_sorted(deleted).unwrap()),
            rows: OnceLock::new(),
            column_files: Vec::new(),
            row_ids: PartRowIds::Range(0),
            copy: CopySlot::default(),
        }
    }

    #[test]
    fn a_patch_written_in_place_equals_the_interleaved_one() {
        use arrow_array::{Float64Array, Int64Array, UInt64Array};
        let n = 1000;
        let rows: ArrayRef = Arc::new(UInt64Array::from(vec![5u64, 999, 0, 5, 17]));
        let bases: Vec<ArrayRef> = vec![
            arrow_array::new_null_array(&arrow_schema::DataType::Int64, n),
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
            Arc::new(Int64Array::from_iter((0..n as i64).map(|x| (x % 3 != 0).then_some(x)))),
        ];
        let values: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
            Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(4), None])),
        ];
        let interleaved = |base: &ArrayRef, values: &ArrayRef| {
            let mut picks: Vec<(usize, usize)> = (0..n).map(|r| (0, r)).collect();
            for (j, r) in [5usize, 999, 0, 5, 17].into_iter().enumerate() {
                picks[r] = (1, j);
            }
            arrow_select::interleave::interleave(&[base.as_ref(), values.as_ref()], &picks).unwrap()
        };
        for base in &bases {
            for v in &values {
                let got = apply_patch(base, &rows, v, "f").unwrap();
                assert_eq!(got.as_ref(), interleaved(base, v).as_ref());
            }
        }
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![0.5, f64::NAN, -0.0, 1.0, 2.0]));
        let base = arrow_array::new_null_array(&arrow_schema::DataType::Float64, n);
        let got = apply_patch(&base, &rows, &floats, "f").unwrap();
        let want = interleaved(&base, &floats);
        assert_eq!(got.to_data().nulls(), want.to_data().nulls());
        let (g, w) = (
            got.as_any().downcast_ref::<Float64Array>().unwrap(),
            want.as_any().downcast_ref::<Float64Array>().unwrap(),
        );
        assert!((0..n).all(|r| g.is_null(r) || g.value(r).to_bits() == w.value(r).to_bits()));
        // A row past the end is an error naming it, as before.
        let past: ArrayRef = Arc::new(UInt64Array::from(vec![n as u64]));
        let one: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        assert!(apply_patch(&bases[1], &past, &one, "f")
            .unwrap_err()
            .to_string()
            .contains("past the data file"));
    }

    #[test]
    fn a_kept_row_is_found_without_listing_the_kept_rows_and_agrees_with_the_list() {
        let mut state = 7u64;
        for case in 0..200u64 {
            let n = 1 + case % 97;
            let mut deleted = Vec::new();
            for r in 0..n {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if (state >> 33) % 4 == case % 4 {
                    deleted.push(r);
                }
            }
            let f = fragment(n, deleted.clone());
            let listed: Vec<u64> = (0..n).filter(|r| !deleted.contains(r)).collect();
            assert_eq!(f.num_rows(), listed.len() as u64);
            for (local, &row) in listed.iter().enumerate() {
                assert_eq!(f.file_row(local as u64), row, "case {case}, deleted {deleted:?}");
            }
            match f.rows() {
                Some(rows) => assert_eq!(*rows, listed),
                None => assert!(deleted.is_empty()),
            }
        }
    }
}
