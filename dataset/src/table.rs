//! The data table of a `.beton` file as Arrow columns.
//!
//! A `.beton` data table is row-major: each row packs the fields' metadata (numpy aligned-struct
//! layout, docs/FORMAT.md §4). [`Table`] exposes it as named columns and materialises a column
//! only when asked, by a columnar gather over the rows, caching the result. Each field type
//! lists its columns ([`FieldKind::columns`](beton_storage::FieldKind::columns): a name suffix
//! and a [`ColumnSource`](beton_storage::field::ColumnSource), a way of reading a row slot that
//! this module gathers); docs/SQL.md tabulates them for every type, with the `index` column every
//! file has.
//!
//! Only Text columns read heap pages, and only when they are materialised.
//!
//! A data file's columnar copy ([`crate::columnar`]), when it has one, gives every column but
//! `index` and Text ones straight from its map, with no gather; the first query of a large file
//! without one makes it.
//!
//! A query names its columns up front ([`Table::prefetch`]): the fixed-width ones among them are
//! gathered in one pass over the rows, since a pass costs about the same for one column as for
//! several (every row's cache lines are read either way).
//!
//! A version of a dataset directory ([`crate::versioned`]) is one table over several data files
//! ([`Table::from_parts`]): each part's columns are gathered as above, its deleted rows left out,
//! fields that column files replace taken from those, and the parts concatenated; it has a
//! `row_id` column besides `index`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, UInt64Array};
use arrow_schema::{Field as ArrowField, Schema, SchemaRef};
use beton_storage::field::ColumnSource as Source;
use beton_storage::{Dataset, Value};

use crate::columnar::ColumnarCopy;
use crate::error::{Error, Result};
use crate::gather::{columns_of, fusable, gather, gather_fused, Column, GatherPart};
use crate::index_set::IndexSet;
use crate::kept_rows::KeptRows;

/// The row ids of a part's data-file rows.
#[derive(Debug, Clone)]
pub enum PartRowIds {
    /// Row `k` has id `start + k`.
    Range(u64),
    /// One id per data-file row.
    List(Arc<Vec<u64>>),
}

/// One data file of a table over several ([`Table::from_parts`]).
#[derive(Debug, Clone)]
pub struct Part<'a> {
    /// The data file.
    pub ds: &'a Dataset,
    /// Its rows that are in the table (its rows less deleted ones); `None` for all of them.
    pub rows: Option<Arc<KeptRows>>,
    /// Values of fields that column files replace or add, by field name: one per data-file row,
    /// made into one array when a query reads the field.
    pub columns: crate::column_values::Columns,
    /// The fields with NULLs, and their validity over the data-file rows (`false`: NULL).
    pub nulls: BTreeMap<String, arrow_buffer::NullBuffer>,
    /// The row ids of its data-file rows.
    pub row_ids: PartRowIds,
    /// Where its columnar copy is kept once opened, shared by the tables of one version (whose
    /// data files never change): every query of the version opens it once. `None`: the
    /// table's own, for a `.beton` file (which beton may rewrite in place), made only from
    /// [`crate::columnar::MIN_ROWS`] rows.
    pub copy: Option<CopySlot>,
}

/// One data file's part of a column, read in place ([`Table::column_parts`]).
#[derive(Debug, Clone)]
pub struct PartColumn {
    /// The data file's values, one per data-file row: its columnar copy's, read in place.
    pub values: ArrayRef,
    /// The rows the table keeps (`None`: all): the column's rows are these rows' values.
    pub kept: Option<Arc<KeptRows>>,
    /// The data-file rows patches set, ascending, each with its value (a one-value array of
    /// the values' type), which stands instead of the data file's.
    pub patched: Vec<(u64, ArrayRef)>,
}

impl PartColumn {
    /// Rows the part gives the table.
    pub fn num_rows(&self) -> usize {
        self.kept.as_ref().map_or(self.values.len(), |k| k.len() as usize)
    }
}

/// Materialised columns by position, shared by the tables of one version ([`Table::with_cache`]).
pub type ColumnCache = Arc<Mutex<HashMap<usize, ArrayRef>>>;

/// A data file's columnar copy, opened (or made) on first use: `None` inside when it has none.
pub type CopySlot = Arc<OnceLock<Option<Arc<ColumnarCopy>>>>;

impl Part<'_> {
    fn num_rows(&self) -> u64 {
        self.rows.as_ref().map_or(self.ds.num_samples(), |r| r.len())
    }
}

/// The data table of an open dataset, as lazily materialised Arrow columns.
pub struct Table<'a> {
    parts: Vec<Part<'a>>,
    /// The first table row of each part, and the total at the end.
    starts: Vec<u64>,
    columns: Vec<Column>,
    schema: SchemaRef,
    cache: ColumnCache,
    /// The version's splits as row ids; `None`: the file's own, read on first use.
    split_ids: Option<Arc<BTreeMap<String, IndexSet>>>,
    /// The named splits as table rows, made once per table (so one query sees one generation).
    splits: OnceLock<BTreeMap<String, Arc<IndexSet>>>,
    /// Each part's columnar copy, opened (or made) on first use, and whether the slot is a
    /// version's (made for data files of any size, [`Part::copy`]).
    copies: Vec<(CopySlot, bool)>,
}

impl std::fmt::Debug for Table<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let paths: Vec<_> = self.parts.iter().map(|p| p.ds.path()).collect();
        f.debug_struct("Table").field("paths", &paths).field("columns", &self.column_names()).finish()
    }
}

impl<'a> Table<'a> {
    /// The table of `ds`: its columns are known at once, none is materialised yet.
    pub fn new(ds: &'a Dataset) -> Table<'a> {
        let columns = columns_of(ds.fields().iter().map(|f| (f.name(), f.field_type())), false);
        let part = Part {
            ds,
            rows: None,
            columns: BTreeMap::new(),
            nulls: BTreeMap::new(),
            row_ids: PartRowIds::Range(0),
            copy: None,
        };
        Self::assemble(vec![part], columns, None)
    }

    /// This table with the columns it materialises kept in `cache`, shared with the other tables
    /// of one version (whose columns never change: its data and column files are never
    /// modified): a column of a version of 2,000 data files is concatenated once, not at every
    /// query. The cache must come from tables of the same columns.
    pub fn with_cache(mut self, cache: ColumnCache) -> Self {
        self.cache = cache;
        self
    }

    /// Part `k`'s columnar copy, opened or made on first use.
    fn part_copy(&self, k: usize) -> Option<&Arc<ColumnarCopy>> {
        let (slot, versioned) = &self.copies[k];
        let ds = self.parts[k].ds;
        slot.get_or_init(|| match versioned {
            true => crate::columnar::for_data_file(ds),
            false => crate::columnar::for_dataset(ds),
        })
        .as_ref()
    }

    /// Column `c` of part `k`'s data file from its columnar copy, if that holds it.
    fn copied(&self, k: usize, c: &Column) -> Option<ArrayRef> {
        c.field.as_ref()?;
        let array = self.part_copy(k)?.column(&c.name)?;
        (*array.data_type() == c.data_type).then_some(array)
    }

    /// Where the columns `names` are read from and how many bytes that reads: the columnar
    /// copies' bytes of those columns where every part has one holding them, else each part's
    /// whole data table (a gather reads every row); Text columns' heap bytes are not counted.
    /// Opens (or makes) the copies.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`].
    pub fn scan_bytes(&self, names: &[&str]) -> Result<ScanBytes> {
        let mut scan = ScanBytes::default();
        let mut gathers = vec![false; self.parts.len()];
        for name in names {
            let c = &self.columns[self.position(name)?];
            if c.field.is_none() || c.source.reads_payloads() {
                continue;
            }
            for (k, p) in self.parts.iter().enumerate() {
                let field = c.field.as_deref().unwrap_or_default();
                if p.columns.contains_key(field) {
                    continue; // a column file gives it
                }
                match self.copied(k, c).and_then(|_| self.part_copy(k)?.column_bytes(name)) {
                    Some(bytes) => {
                        scan.columnar += bytes;
                        if !scan.columnar_columns.contains(&c.name) {
                            scan.columnar_columns.push(c.name.clone());
                        }
                    }
                    None => gathers[k] = true,
                }
            }
        }
        for (k, p) in self.parts.iter().enumerate() {
            if gathers[k] {
                scan.row_major += p.ds.data_table().len() as u64;
            }
        }
        Ok(scan)
    }

    /// One table over several data files, in order: `schema` names the visible fields (each
    /// found in a part's data file or in its `columns`), `splits` gives named splits as row ids.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a field that a part has neither in its data file (with the
    /// same type) nor in its column files, or a column-file array of the wrong length or type.
    pub fn from_parts(
        parts: Vec<Part<'a>>,
        schema: &[(String, beton_storage::FieldType)],
        splits: Arc<BTreeMap<String, IndexSet>>,
    ) -> Result<Table<'a>> {
        for (k, p) in parts.iter().enumerate() {
            for (name, ty) in schema {
                let what = || format!("field '{name}' of data file {k} ({})", p.ds.path().display());
                if let Some(array) = p.columns.get(name) {
                    // Null cells stand for the data file's values (versioned::values).
                    let fallback = p.ds.field_index(name).is_ok_and(|f| p.ds.fields()[f].field_type() == ty);
                    let fits = *array.data_type() == crate::versioned::values::column_file_type(ty)
                        && (fallback || p.nulls.contains_key(name) || !array.has_nulls());
                    if !fits || array.len() as u64 != p.ds.num_samples() {
                        return Err(Error::InvalidArgument {
                            what: what(),
                            why: format!(
                                "its column file holds {} {} values for {} rows of a {}",
                                array.len(),
                                array.data_type(),
                                p.ds.num_samples(),
                                ty.name()
                            ),
                        });
                    }
                    continue;
                }
                match p.ds.field_index(name) {
                    Ok(f) if p.ds.fields()[f].field_type() == ty => {}
                    _ => {
                        return Err(Error::InvalidArgument {
                            what: what(),
                            why: format!(
                                "the data file has no {} field of this name and no column file holds it",
                                ty.name()
                            ),
                        })
                    }
                }
            }
            if let Some(rows) = p.rows.as_ref().filter(|r| r.file_rows() != p.ds.num_samples()) {
                return Err(Error::InvalidArgument {
                    what: format!("rows of data file {k}"),
                    why: format!(
                        "are of {} rows, the data file has {}",
                        rows.file_rows(),
                        p.ds.num_samples()
                    ),
                });
            }
        }
        let columns = columns_of(schema.iter().map(|(n, t)| (n.as_str(), t)), true);
        Ok(Self::assemble(parts, columns, Some(splits)))
    }

    fn assemble(
        parts: Vec<Part<'a>>,
        columns: Vec<Column>,
        split_ids: Option<Arc<BTreeMap<String, IndexSet>>>,
    ) -> Table<'a> {
        let mut starts = vec![0u64];
        for p in &parts {
            starts.push(starts.last().copied().unwrap_or(0) + p.num_rows());
        }
        // A field's columns are nullable where some part has NULLs in it.
        let nullable =
            |c: &Column| c.field.as_deref().is_some_and(|f| parts.iter().any(|p| p.nulls.contains_key(f)));
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .map(|c| ArrowField::new(&c.name, c.data_type.clone(), nullable(c)))
                .collect::<Vec<_>>(),
        ));
        Table {
            copies: parts
                .iter()
                .map(|p| match &p.copy {
                    Some(slot) => (Arc::clone(slot), true),
                    None => (Arc::new(OnceLock::new()), false),
                })
                .collect(),
            parts,
            starts,
            columns,
            schema,
            cache: ColumnCache::default(),
            split_ids,
            splits: OnceLock::new(),
        }
    }

    /// The named split `name` as table rows, made with the table's first use of a split and
    /// kept for the table's life, so every query on one table sees the same splits.
    ///
    /// # Errors
    /// [`Error::NoSuchSplit`] listing the splits; storage errors reading them.
    pub fn split(&self, name: &str) -> Result<Arc<IndexSet>> {
        let splits = match self.splits.get() {
            Some(s) => s,
            None => {
                let read = match &self.split_ids {
                    None => crate::splits::all(self.parts[0].ds)?
                        .into_iter()
                        .map(|(n, s)| (n, Arc::new(s)))
                        .collect(),
                    Some(by_id) => self.splits_by_row_id(by_id)?,
                };
                self.splits.get_or_init(|| read)
            }
        };
        splits.get(name).cloned().ok_or_else(|| crate::splits::no_such_split(name, splits.keys()))
    }

    /// Named splits of row ids as sets of table rows (ids no longer in the table are left out).
    fn splits_by_row_id(
        &self,
        by_id: &BTreeMap<String, IndexSet>,
    ) -> Result<BTreeMap<String, Arc<IndexSet>>> {
        let ids = self.row_ids()?;
        let mut by_position: Vec<(u64, u64)> = ids.into_iter().zip(0u64..).collect();
        by_position.sort_unstable();
        let mut out = BTreeMap::new();
        for (name, set) in by_id {
            let mut rows: Vec<u64> = set
                .iter()
                .filter_map(|id| {
                    by_position.binary_search_by_key(&id, |&(i, _)| i).ok().map(|k| by_position[k].1)
                })
                .collect();
            rows.sort_unstable();
            out.insert(name.clone(), Arc::new(IndexSet::from_sorted(rows)?));
        }
        Ok(out)
    }

    /// The stable row id of every row (its index, for a one-file table), in row order.
    ///
    /// # Errors
    /// As [`Table::column`].
    pub fn row_ids(&self) -> Result<Vec<u64>> {
        let name = if self.position("row_id").is_ok() { "row_id" } else { "index" };
        let ids = self.column(name)?;
        Ok(ids.as_any().downcast_ref::<UInt64Array>().map(|a| a.values().to_vec()).unwrap_or_default())
    }

    /// The data file of a one-file table (the first one of a table over several).
    pub fn dataset(&self) -> &'a Dataset {
        self.parts[0].ds
    }

    /// The data file holding table row `row`, and the row's position in it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a row past the end.
    pub fn locate(&self, row: u64) -> Result<(&'a Dataset, u64)> {
        self.locate_part(row).map(|(k, file_row)| (self.parts[k].ds, file_row))
    }

    /// The part holding row `row` and the row's position in its data file.
    fn locate_part(&self, row: u64) -> Result<(usize, u64)> {
        let k = self.starts.partition_point(|&s| s <= row).saturating_sub(1);
        match self.parts.get(k) {
            Some(p) if row < self.starts[k + 1] => {
                let local = row - self.starts[k];
                let file_row = match &p.rows {
                    Some(rows) => rows.get(local),
                    None => local,
                };
                Ok((k, file_row))
            }
            _ => Err(Error::InvalidArgument {
                what: "row".into(),
                why: format!("{row} is past the end of the table ({} rows)", self.num_rows()),
            }),
        }
    }

    /// Where row `row`'s value of field `field` lies: its data file, its row there, and whether
    /// a column file's cell gives it instead.
    ///
    /// # Errors
    /// A row past the end.
    pub fn value_source(&self, row: u64, field: &str) -> Result<(&'a Dataset, u64, bool)> {
        let (k, file_row) = self.locate_part(row)?;
        let p = &self.parts[k];
        let from_column = p.columns.get(field).is_some_and(|a| a.is_valid(file_row as usize))
            || p.nulls.get(field).is_some_and(|n| n.is_null(file_row as usize));
        Ok((p.ds, file_row, from_column))
    }

    /// The value of field `field` (of type `ty`) in row `row`: its column file's cell where one
    /// holds it ([`crate::versioned::values::cell`]), else its data file's; `None` for a NULL
    /// (a row appended without the field, say).
    ///
    /// # Errors
    /// A row past the end, a field the row's data file lacks, storage errors reading it.
    pub fn value(&self, row: u64, field: &str, ty: &beton_storage::FieldType) -> Result<Option<Value<'_>>> {
        let (k, file_row) = self.locate_part(row)?;
        let p = &self.parts[k];
        part_value(p.ds, &p.columns, &p.nulls, file_row, field, ty)
    }

    /// The rows (table rows, ascending) where field `field` is NULL; empty for a field without
    /// NULLs or a column that is not a field.
    pub fn null_rows(&self, field: &str) -> Vec<u64> {
        let mut out = Vec::new();
        for (p, &start) in self.parts.iter().zip(&self.starts) {
            let Some(nulls) = p.nulls.get(field) else { continue };
            match &p.rows {
                None => {
                    out.extend(nulls.iter().enumerate().filter(|(_, ok)| !ok).map(|(r, _)| start + r as u64))
                }
                Some(rows) => out.extend(
                    rows.iter()
                        .enumerate()
                        .filter(|&(_, r)| nulls.is_null(r as usize))
                        .map(|(j, _)| start + j as u64),
                ),
            }
        }
        out
    }

    /// Whether any of the table's data files is read from remote storage.
    pub fn is_remote(&self) -> bool {
        self.parts.iter().any(|p| p.ds.is_remote())
    }

    /// Whether a data file of the table holds custom fields' heap payloads
    /// ([`Dataset::has_custom_payloads`]).
    pub fn has_custom_payloads(&self) -> bool {
        self.parts.iter().any(|p| p.ds.has_custom_payloads())
    }

    /// Number of rows.
    pub fn num_rows(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The Arrow schema of every column (materialised or not).
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The fields, `(name, type)` in schema order (`index` and `row_id` are columns, not fields).
    pub fn fields(&self) -> Vec<(String, beton_storage::FieldType)> {
        let mut fields: Vec<(String, beton_storage::FieldType)> = Vec::new();
        for c in &self.columns {
            if let (Some(name), Some(ty)) = (&c.field, &c.ty) {
                if fields.last().is_none_or(|(last, _)| last != name) {
                    fields.push((name.clone(), ty.clone()));
                }
            }
        }
        fields
    }

    /// Column names, in schema order.
    pub fn column_names(&self) -> Vec<&str> {
        self.columns.iter().map(|c| c.name.as_str()).collect()
    }

    /// True when the column's values live in payload pages (reading it reads the heap).
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`].
    pub fn reads_payloads(&self, name: &str) -> Result<bool> {
        Ok(self.columns[self.position(name)?].source.reads_payloads())
    }

    fn position(&self, name: &str) -> Result<usize> {
        self.columns.iter().position(|c| c.name == name).ok_or_else(|| Error::NoSuchColumn {
            name: name.to_string(),
            available: self.column_names().join(", "),
        })
    }

    /// Column `name` as one array per data file, read in place from their columnar copies, with
    /// what a version changes about each: its kept rows (deletions) and the cells patches set
    /// ([`PartColumn`]). What the fused WHERE reads instead of concatenating 2,000 data files'
    /// columns, or filtering and patching a copy of 100 M values after deleting 5 rows or
    /// updating 10. `None` where some part cannot be read so (a column to gather, a full
    /// column file, NULLs, patches of a derived column or of many rows), or the table has the
    /// column already.
    pub fn column_parts(&self, name: &str) -> Option<Vec<PartColumn>> {
        self.column_parts_in(name, 0..self.parts.len())
    }

    /// [`Table::column_parts`] of the data files `ks` (by position) only: what a gather of the
    /// rows of a few data files opens.
    fn column_parts_in(&self, name: &str, ks: std::ops::Range<usize>) -> Option<Vec<PartColumn>> {
        let pos = self.position(name).ok()?;
        if self.cache.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&pos) {
            return None;
        }
        let c = &self.columns[pos];
        let field = c.field.as_deref()?;
        if self.parts.iter().any(|p| p.nulls.contains_key(field)) {
            return None;
        }
        // The copies opened and their columns' pages mapped on all cores (a new process's first
        // query of 2,000 data files opens 2,000 copies).
        let values: Vec<ArrayRef> =
            ks.clone().into_par_iter().map(|k| self.copied(k, c)).collect::<Option<_>>()?;
        let mut out = Vec::with_capacity(ks.len());
        for (p, values) in self.parts[ks].iter().zip(values) {
            let patched = match p.columns.get(field) {
                None => Vec::new(),
                // A patch of the field's own values (not a column derived from them), of a
                // few rows (each is compared on its own).
                Some(v)
                    if matches!(c.source, Source::Int | Source::Float)
                        && v.data_type() == values.data_type() =>
                {
                    let rows = v.patched_rows()?;
                    // (Each costs about what making 100 rows of the whole column would.)
                    if rows.len() > (values.len() / 64).max(1024)
                        || rows.iter().any(|(_, (a, at))| a.is_null(*at))
                    {
                        return None;
                    }
                    rows.into_iter().map(|(r, (a, at))| (r, a.slice(at, 1))).collect()
                }
                Some(_) => return None,
            };
            out.push(PartColumn { values, kept: p.rows.clone(), patched });
        }
        self.check_intact().ok()?;
        Some(out)
    }

    /// Column `name` at the table rows `rows` (ascending), gathered from each data file's
    /// columnar copy read in place ([`Table::column_parts`]: the kept rows, the patched cells'
    /// values): `take(column(name), rows)`, without making the whole column. For a few rows of a
    /// big table: `SELECT label, score ... WHERE` keeping 500,000 of 100 M rows in 2,000 data
    /// files made (and cached) both columns whole, 1.6 GB. `None` where the column is not read
    /// in place (cached already, NULLs, a derived column) or its copies' type is not the
    /// table's; the caller then takes from [`Table::column`].
    pub fn gather_rows(&self, name: &str, rows: &[u32]) -> Option<ArrayRef> {
        // The data files the rows lie in (ascending rows: a range of them).
        let ks = match (rows.first(), rows.last()) {
            (Some(&a), Some(&b)) => {
                self.locate_part(u64::from(a)).ok()?.0..self.locate_part(u64::from(b)).ok()?.0 + 1
            }
            _ => 0..0,
        };
        let first = ks.start;
        let parts = self.column_parts_in(name, ks)?;
        let schema = self.schema();
        let want = schema.field_with_name(name).ok()?.data_type();
        let mut sources: Vec<&dyn Array> = parts.iter().map(|p| p.values.as_ref()).collect();
        if sources.iter().any(|a| a.data_type() != want || a.null_count() != 0) {
            return None;
        }
        // Each row's data file (among `parts`) and row in it; a patched cell's value is its
        // patch's one-value array, added to the sources (row 0 of it).
        let mut picks: Vec<(usize, u32)> = Vec::with_capacity(rows.len());
        let mut k = 0;
        for &row in rows {
            let row = u64::from(row);
            while first + k + 1 < self.starts.len() && row >= self.starts[first + k + 1] {
                k += 1;
            }
            let p = parts.get(k)?;
            let local = row - self.starts[first + k];
            let file_row = p.kept.as_ref().map_or(local, |kept| kept.get(local));
            match p.patched.binary_search_by_key(&file_row, |(r, _)| *r) {
                Ok(j) => {
                    sources.push(p.patched[j].1.as_ref());
                    picks.push((sources.len() - 1, 0));
                }
                Err(_) => picks.push((k, u32::try_from(file_row).ok()?)),
            }
        }
        let out = match sources.len() == parts.len() {
            true => gathered(&sources, &picks, want)?,
            // Patched cells among them (a patch may hold a NULL, which `gathered` does not read).
            false => {
                let at: Vec<(usize, usize)> = picks.iter().map(|&(k, r)| (k, r as usize)).collect();
                arrow_select::interleave::interleave(&sources, &at).ok()?
            }
        };
        // Values read from a copy that shrank meanwhile are zeros: `column` then reports it.
        self.check_intact().ok()?;
        Some(out)
    }

    /// Column `name`, materialised on first use and cached.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`] listing the columns; storage errors for rows that disagree with
    /// the allocation table (image sizes) or text that is not UTF-8.
    pub fn column(&self, name: &str) -> Result<ArrayRef> {
        let pos = self.position(name)?;
        let cached = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&pos).cloned();
        let array = match cached {
            Some(a) => a,
            None => self.materialise(&self.columns[pos])?,
        };
        // Rows read through the map of a file that shrank meanwhile are zeros, not data
        // (beton_storage's SIGBUS guard): no column made of them is used or kept.
        self.check_intact()?;
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).entry(pos).or_insert_with(|| array.clone());
        Ok(array)
    }

    /// Checks that every read of the table's data files and columnar copies so far read their
    /// bytes (see [`Dataset::check_intact`]): a file truncated by another program while mapped
    /// reads as zeros, which must not be taken for data.
    ///
    /// # Errors
    /// `FileChanged` from storage, naming the file.
    pub fn check_intact(&self) -> Result<()> {
        for (p, (copy, _)) in self.parts.iter().zip(&self.copies) {
            p.ds.check_intact()?;
            if let Some(Some(copy)) = copy.get() {
                copy.check_intact()?;
            }
        }
        Ok(())
    }

    /// Materialises the named columns that are not cached yet, the fixed-width ones computed from
    /// row slots (Int, Float, image width and height, Bytes / JSON / Array sizes) together in one
    /// pass over each data table: each row is read once instead of once per column. Names that
    /// are not columns, and columns of other kinds, are left to [`Table::column`]. Never fails:
    /// these columns are plain copies of row bytes.
    pub fn prefetch(&self, names: &[&str]) {
        let mut candidates: Vec<usize> = Vec::new();
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            for name in names {
                let Ok(pos) = self.position(name) else { continue };
                let fusable = fusable(self.columns[pos].source) && self.columns[pos].field.is_some();
                if fusable && !cache.contains_key(&pos) && !candidates.contains(&pos) {
                    candidates.push(pos);
                }
            }
        }
        // Columns every part's copy holds are read in place by `column`. The copies are opened
        // here, on all cores (2,000 of them at a version's first query), without the cache's lock.
        let fused: Vec<usize> = candidates
            .into_iter()
            .filter(|&pos| {
                !(0..self.parts.len()).into_par_iter().all(|k| self.copied(k, &self.columns[pos]).is_some())
            })
            .collect();
        if fused.len() < 2 {
            return;
        }
        // Every part gives these columns from its rows unless a column file holds one of them.
        let fields: Vec<&str> =
            fused.iter().map(|&pos| self.columns[pos].field.as_deref().unwrap_or_default()).collect();
        let lists: Vec<Option<Arc<Vec<u64>>>> =
            self.parts.iter().map(|p| p.rows.as_ref().map(|r| r.list())).collect();
        let mut parts = Vec::with_capacity(self.parts.len());
        for (p, list) in self.parts.iter().zip(&lists) {
            if fields.iter().any(|f| p.columns.contains_key(*f)) {
                return; // left to `column`, which overlays column files
            }
            let mut offsets = Vec::with_capacity(fields.len());
            for f in &fields {
                match p.ds.field_index(f) {
                    Ok(k) => offsets.push(p.ds.fields()[k].offset()),
                    Err(_) => return,
                }
            }
            parts.push(GatherPart { ds: p.ds, rows: list.as_deref().map(Vec::as_slice), offsets });
        }
        let sources: Vec<Source> = fused.iter().map(|&pos| self.columns[pos].source).collect();
        let arrays = gather_fused(&parts, &sources);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        for (pos, array) in fused.into_iter().zip(arrays) {
            cache.entry(pos).or_insert(array);
        }
    }

    /// A record batch of the named columns, in the order given.
    ///
    /// # Errors
    /// As [`Table::column`].
    pub fn record_batch(&self, names: &[&str]) -> Result<RecordBatch> {
        let arrays = names.iter().map(|n| self.column(n)).collect::<Result<Vec<_>>>()?;
        let fields: Vec<ArrowField> =
            names.iter().map(|n| self.schema.field(self.position(n).unwrap_or(0)).clone()).collect();
        Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
    }

    fn materialise(&self, c: &Column) -> Result<ArrayRef> {
        if c.source == Source::Index {
            return Ok(Arc::new(UInt64Array::from_iter_values(0..self.num_rows())));
        }
        // A fixed-width column no column file holds: one pass over every data file's rows.
        if let (true, Some(field)) = (fusable(c.source) && self.parts.len() > 1, c.field.as_deref()) {
            let from_rows =
                |(k, p): (usize, &Part<'_>)| !p.columns.contains_key(field) && self.copied(k, c).is_none();
            if self.parts.iter().enumerate().all(from_rows) {
                let lists: Vec<Option<Arc<Vec<u64>>>> =
                    self.parts.iter().map(|p| p.rows.as_ref().map(|r| r.list())).collect();
                let mut parts = Vec::with_capacity(self.parts.len());
                for (p, list) in self.parts.iter().zip(&lists) {
                    let k = p.ds.field_index(field)?;
                    parts.push(GatherPart {
                        ds: p.ds,
                        rows: list.as_deref().map(Vec::as_slice),
                        offsets: vec![p.ds.fields()[k].offset()],
                    });
                }
                return Ok(gather_fused(&parts, &[c.source]).remove(0));
            }
        }
        let mut parts = Vec::with_capacity(self.parts.len());
        for (k, p) in self.parts.iter().enumerate() {
            if let Some(array) = self.patched_copy(k, c) {
                parts.push(array);
                continue;
            }
            // The data file's values: from its columnar copy, else gathered from its rows.
            let base = || match self.copied(k, c) {
                Some(array) => Ok(array),
                None => gather(p.ds, p.ds.field_index(c.field.as_deref().unwrap_or_default())?, c.source),
            };
            let nulls = c.field.as_deref().and_then(|f| p.nulls.get(f));
            let array: ArrayRef = match c.field.as_deref() {
                // The row id column.
                None => match &p.row_ids {
                    PartRowIds::Range(start) => {
                        Arc::new(UInt64Array::from_iter_values(*start..start + p.ds.num_samples()))
                    }
                    PartRowIds::List(ids) => Arc::new(UInt64Array::from(ids.as_ref().clone())),
                },
                Some(field) => match (p.columns.get(field), &c.ty) {
                    (Some(a), Some(ty)) => {
                        let derived = crate::versioned::values::table_column(&a.array()?, ty, c.source)?;
                        let in_file = p.ds.field_index(field).is_ok();
                        match derived.logical_nulls() {
                            // Rows a patch leaves alone: the data file's values.
                            Some(valid) if valid.null_count() > 0 && in_file => {
                                let base = base()?;
                                let mask = BooleanArray::new(valid.into_inner(), None);
                                arrow_select::zip::zip(&mask, &derived, &base)?
                            }
                            _ => derived,
                        }
                    }
                    _ => base()?,
                },
            };
            let array = match nulls {
                Some(nulls) => with_nulls(array, nulls)?,
                None => array,
            };
            parts.push(select_rows(array, p.rows.as_deref())?);
        }
        concat_parts(parts)
    }
}

impl Table<'_> {
    /// Part `k`'s rows of column `c` when it is a field's own int or float values, edited (rows
    /// deleted, or patches setting some rows over the data file's: no full column file, no
    /// NULLs) and the copy holds it: the copy's kept values copied once, by runs, into memory
    /// backed by huge pages, and the patched cells written over them (not a whole patched
    /// column made, zipped with the copy's, then filtered). `None` for anything else.
    fn patched_copy(&self, k: usize, c: &Column) -> Option<ArrayRef> {
        use arrow_array::types::{Float64Type, Int64Type};
        let p = &self.parts[k];
        let field = c.field.as_deref()?;
        if !matches!(c.source, Source::Int | Source::Float) || p.nulls.contains_key(field) {
            return None;
        }
        let patched = match p.columns.get(field) {
            Some(values) => {
                let patched = values.patched_rows()?;
                if patched.iter().any(|(_, (a, at))| a.is_null(*at) || a.data_type() != values.data_type()) {
                    return None;
                }
                patched
            }
            // Unpatched: the copy's own column serves as it is, unless rows were deleted.
            None if p.rows.is_none() => return None,
            None => Vec::new(),
        };
        let base = self.copied(k, c)?;
        if patched.first().is_some_and(|(_, (a, _))| a.data_type() != base.data_type())
            || base.null_count() > 0
        {
            return None;
        }
        let kept = p.rows.as_deref();
        match base.data_type() {
            arrow_schema::DataType::Int64 => Some(overlay::<Int64Type>(&base, kept, &patched)),
            arrow_schema::DataType::Float64 => Some(overlay::<Float64Type>(&base, kept, &patched)),
            _ => None,
        }
    }
}

/// The `kept` rows (all for `None`) of `base`, with the cells of `patched` (data-file rows,
/// ascending, and where each one's value is) written over them; a patched row deleted is left
/// out like its row.
fn overlay<T: arrow_array::ArrowPrimitiveType>(
    base: &ArrayRef,
    kept: Option<&KeptRows>,
    patched: &[(u64, (&ArrayRef, usize))],
) -> ArrayRef {
    use arrow_array::cast::AsArray;
    let src = base.as_primitive::<T>().values();
    let mut out: Vec<T::Native> = Vec::with_capacity(kept.map_or(src.len(), |k| k.len() as usize));
    beton_storage::advise_huge_pages(out.spare_capacity_mut());
    match kept {
        None => out.extend_from_slice(src),
        Some(kept) => {
            for run in kept.runs() {
                out.extend_from_slice(&src[run.start as usize..run.end as usize]);
            }
        }
    }
    for &(row, (array, at)) in patched {
        let local = match kept {
            None => Some(row),
            Some(kept) => kept.local(row),
        };
        if let Some(local) = local {
            out[local as usize] = array.as_primitive::<T>().value(at);
        }
    }
    Arc::new(arrow_array::PrimitiveArray::<T>::new(out.into(), None).with_data_type(base.data_type().clone()))
}

/// What reading some columns of a table reads ([`Table::scan_bytes`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanBytes {
    /// Bytes of columnar copies.
    pub columnar: u64,
    /// The columns read from columnar copies.
    pub columnar_columns: Vec<String>,
    /// Bytes of row-major data tables gathered from.
    pub row_major: u64,
}

/// `array` with NULLs where `nulls` has them (as well as its own).
fn with_nulls(array: ArrayRef, nulls: &arrow_buffer::NullBuffer) -> Result<ArrayRef> {
    let data = array.to_data();
    let merged = arrow_buffer::NullBuffer::union(data.nulls(), Some(nulls));
    Ok(arrow_array::make_array(data.into_builder().nulls(merged).build()?))
}

/// The rows `rows` of `array` (all of them for `None`): the runs between deleted rows, copied
/// whole (no list of kept rows to take).
fn select_rows(array: ArrayRef, rows: Option<&KeptRows>) -> Result<ArrayRef> {
    match rows {
        None => Ok(array),
        Some(rows) => {
            let mask = BooleanArray::new(rows.mask(), None);
            Ok(arrow_select::filter::filter(array.as_ref(), &mask)?)
        }
    }
}

/// The parts' arrays, one after the other: 64-bit numbers without NULLs copied into memory
/// backed by huge pages (the 800 MB of one column over 2,000 data files is written once, in
/// 2 MiB pages), anything else by arrow's `concat`.
fn concat_parts(parts: Vec<ArrayRef>) -> Result<ArrayRef> {
    use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
    use arrow_schema::DataType;
    let plain =
        parts.len() > 1 && parts.iter().all(|p| p.null_count() == 0 && p.data_type() == parts[0].data_type());
    match (plain, parts.first().map(|p| p.data_type())) {
        (true, Some(DataType::Int64)) => return Ok(concat_plain::<Int64Type>(&parts)),
        (true, Some(DataType::Float64)) => return Ok(concat_plain::<Float64Type>(&parts)),
        (true, Some(DataType::UInt64)) => return Ok(concat_plain::<UInt64Type>(&parts)),
        _ => {}
    }
    match parts.len() {
        1 => Ok(parts.into_iter().next().expect("one part")),
        _ => {
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            Ok(arrow_select::concat::concat(&refs)?)
        }
    }
}

/// [`concat_parts`] of primitive arrays of one type without NULLs.
fn concat_plain<T: arrow_array::ArrowPrimitiveType>(parts: &[ArrayRef]) -> ArrayRef {
    use arrow_array::cast::AsArray;
    let mut out: Vec<T::Native> = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    beton_storage::advise_huge_pages(out.spare_capacity_mut());
    for p in parts {
        out.extend_from_slice(p.as_primitive::<T>().values());
    }
    Arc::new(
        arrow_array::PrimitiveArray::<T>::new(out.into(), None).with_data_type(parts[0].data_type().clone()),
    )
}

/// The value of field `field` (of type `ty`) in row `file_row` of data file `ds`, whose column
/// files give `columns` and `nulls`: a column file's cell where one holds it, else the data
/// file's; `None` for a NULL. [`Table::value`] and [`crate::versioned::VersionView::value`] read
/// through it.
///
/// # Errors
/// A field the data file lacks, storage errors reading it, a column file's bad cell.
pub(crate) fn part_value<'d>(
    ds: &'d Dataset,
    columns: &'d crate::column_values::Columns,
    nulls: &BTreeMap<String, arrow_buffer::NullBuffer>,
    file_row: u64,
    field: &str,
    ty: &beton_storage::FieldType,
) -> Result<Option<Value<'d>>> {
    if nulls.get(field).is_some_and(|n| n.is_null(file_row as usize)) {
        return Ok(None);
    }
    // The row's cell alone: a patched field's whole column is not made to read one value.
    if let Some((array, at)) = columns.get(field).and_then(|c| c.locate(file_row as usize)) {
        if let Some(v) = crate::versioned::values::cell(array, ty, at)? {
            return Ok(Some(v));
        }
    }
    Ok(Some(ds.get(file_row, ds.field_index(field)?)?))
}

/// The values `picks` (array, row) of `sources` (arrays without NULLs, of type `data_type`), in
/// order: numbers copied one by one; other types taken from each array, the pieces concatenated.
fn gathered(
    sources: &[&dyn Array],
    picks: &[(usize, u32)],
    data_type: &arrow_schema::DataType,
) -> Option<ArrayRef> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type, UInt16Type, UInt64Type};
    use arrow_array::{ArrowPrimitiveType, PrimitiveArray};
    fn numbers<T: ArrowPrimitiveType>(sources: &[&dyn Array], picks: &[(usize, u32)]) -> ArrayRef {
        let values: Vec<&[T::Native]> =
            sources.iter().map(|a| a.as_primitive::<T>().values().as_ref()).collect();
        Arc::new(PrimitiveArray::<T>::from_iter_values(picks.iter().map(|&(k, r)| values[k][r as usize])))
    }
    use arrow_schema::DataType;
    Some(match data_type {
        DataType::Int64 => numbers::<Int64Type>(sources, picks),
        DataType::Float64 => numbers::<Float64Type>(sources, picks),
        DataType::UInt64 => numbers::<UInt64Type>(sources, picks),
        DataType::UInt16 => numbers::<UInt16Type>(sources, picks),
        _ => {
            let mut pieces = Vec::new();
            for run in picks.chunk_by(|a, b| a.0 == b.0) {
                let indices = arrow_array::UInt32Array::from_iter_values(run.iter().map(|&(_, r)| r));
                pieces.push(arrow_select::take::take(sources[run[0].0], &indices, None).ok()?);
            }
            let pieces: Vec<&dyn Array> = pieces.iter().map(|a| a.as_ref()).collect();
            match pieces.len() {
                0 => arrow_array::new_empty_array(data_type),
                _ => arrow_select::concat::concat(&pieces).ok()?,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, Int64Array, StringArray, UInt16Array};
    use beton_storage::{SampleValue, WriterOptions};

    fn dataset(dir: &std::path::Path) -> Dataset {
        let path = dir.join("t.beton");
        let fields = beton_testkit::schema(concat!(
            "image:raw label:int score:float blob:bytes meta:json arr:ndarray:<f4:2x3 caption:text ",
            "flag:bool boxes:array:<i2",
        ));
        let options = WriterOptions { page_size: 1 << 21, ..WriterOptions::default() };
        beton_testkit::write_with(&path, fields, options, 5, |i| {
            let w = 1 + i as u32;
            vec![
                beton_testkit::rgb(w, 2, vec![7; (w * 6) as usize]),
                SampleValue::Int(i as i64 - 2),
                SampleValue::Float(i as f64 / 2.0),
                SampleValue::Bytes(vec![0; i as usize]),
                SampleValue::Json(format!("{{\"i\": {i}}}")),
                SampleValue::NDArray(vec![0; 24]),
                SampleValue::Text(format!("c{i}")),
                SampleValue::Bool(i % 2 == 0),
                SampleValue::Array(vec![0; 2 * i as usize]),
            ]
        });
        Dataset::open(&path).unwrap()
    }

    #[test]
    fn every_field_type_maps_to_its_columns() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path());
        let t = Table::new(&ds);
        assert_eq!(
            t.column_names(),
            [
                "index",
                "image.mode",
                "image.width",
                "image.height",
                "image.nbytes",
                "label",
                "score",
                "blob",
                "meta",
                "arr",
                "caption",
                "flag",
                "boxes"
            ]
        );
        let get_u64 =
            |n: &str| t.column(n).unwrap().as_any().downcast_ref::<UInt64Array>().unwrap().values().to_vec();
        assert_eq!(get_u64("index"), [0, 1, 2, 3, 4]);
        assert_eq!(get_u64("image.nbytes"), [6, 12, 18, 24, 30]);
        assert_eq!(get_u64("blob"), [0, 1, 2, 3, 4]);
        assert_eq!(get_u64("meta"), [9, 9, 9, 9, 9], "JSON size counts its NUL");
        assert_eq!(get_u64("arr"), [24; 5]);
        assert_eq!(get_u64("boxes"), [0, 1, 2, 3, 4], "array length in elements");
        let w = t.column("image.width").unwrap();
        assert_eq!(w.as_any().downcast_ref::<UInt16Array>().unwrap().values().to_vec(), [1, 2, 3, 4, 5]);
        let labels = t.column("label").unwrap();
        assert_eq!(
            labels.as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec(),
            [-2, -1, 0, 1, 2]
        );
        let mode = t.column("image.mode").unwrap();
        assert_eq!(mode.as_any().downcast_ref::<StringArray>().unwrap().value(3), "raw");
        let caption = t.column("caption").unwrap();
        assert_eq!(caption.as_any().downcast_ref::<StringArray>().unwrap().value(4), "c4");
        let flag = t.column("flag").unwrap();
        assert!(flag.as_any().downcast_ref::<BooleanArray>().unwrap().value(2));
        assert!(t.reads_payloads("caption").unwrap() && !t.reads_payloads("image.nbytes").unwrap());
        let batch = t.record_batch(&["label", "score"]).unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (5, 2));
        assert_eq!(batch.column(1).len(), 5);
    }

    #[test]
    fn prefetch_gives_the_columns_one_by_one_materialisation_gives() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path());
        let names =
            ["label", "score", "image.width", "image.height", "blob", "meta", "boxes", "caption", "nope"];
        let fused = Table::new(&ds);
        fused.prefetch(&names);
        let cached = fused.cache.lock().unwrap().len();
        assert_eq!(cached, 7, "the seven fixed-width slot columns, not caption or an unknown name");
        let single = Table::new(&ds);
        for name in &names[..8] {
            assert_eq!(fused.column(name).unwrap().as_ref(), single.column(name).unwrap().as_ref(), "{name}");
        }
        // One column alone is left to `column`.
        let one = Table::new(&ds);
        one.prefetch(&["label"]);
        assert!(one.cache.lock().unwrap().is_empty());
    }

    #[test]
    fn a_columnar_copy_gathers_what_the_table_gathers_for_every_field_type() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path());
        let table = Table::new(&ds); // a small file: no copy, every column from the rows
        let copied = crate::gather::copy_columns(&ds).unwrap();
        let names: Vec<&str> = copied.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"image.mode") && names.contains(&"image.nbytes") && names.contains(&"score"));
        assert!(!names.contains(&"caption") && !names.contains(&"index"), "{names:?}");
        for (name, array) in &copied {
            assert_eq!(array.as_ref(), table.column(name).unwrap().as_ref(), "{name}");
        }
    }

    #[test]
    fn unknown_column_lists_the_columns() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(dir.path());
        let err = Table::new(&ds).column("lable").unwrap_err().to_string();
        assert!(err.contains("no column named 'lable'") && err.contains("label, score"), "{err}");
    }
}
