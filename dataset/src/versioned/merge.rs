//! Three-way merges of branches, row by row and cell by cell (docs/VERSIONS.md), after Dolt's
//! rules for SQL tables: from the two heads' common ancestor (the base), each side's changes
//! (their [`diff`] from the base, by row id) combine when they touch different cells; the same
//! cell set to different values, an update of a row the other side deleted, a column dropped
//! on one side and changed on the other, the same column added with different values, a split
//! removed on one side and changed on the other, and class lists that diverged are conflicts.
//!
//! The merge is one commit on the handle's branch (the "ours" side) whose second parent is the
//! source branch's head ("theirs"): its changes land as deletion files, patch column files on
//! ours' data files, and theirs' new data files (shared, never copied, when they hold only new
//! rows; their new rows exported into one new data file otherwise, as after a compaction), so
//! images are never re-encoded. Row ids never clash: each branch gives out ids from a range of
//! its own (branch.rs).
//!
//! The common ancestor comes from the versions' ancestries (the newest version of each line a
//! version holds, branch.rs): per line the older of the two heads' entries is a common
//! ancestor; the base is the one no other holds (when criss-cross merges leave several, the
//! newest by commit time).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, UInt64Array};
use beton_storage::{FieldType, Value};

use super::commit::{self, read_manifest_on, Line};
pub use super::conflict::{Conflict, ConflictKind};
use super::diff::{diff, Diff};
use super::export::null_patches;
use super::layout::{DATA_DIR, DELETIONS_DIR, RANGE_ROWS, SPLITS_DIR};
use super::lines::ancestry;
use super::manifest::{ColumnFile, Fragment, LineState, Manifest, MergedParent, Operation, FORMAT_VERSION};
use super::values::{self, ValuesBuilder};
use super::view::{self, VersionView};
use super::{fragment_deletions, read_index_file, write_index_file, ExportOptions, Touches, VersionRef};
use super::{VersionedDataset, ROW_IDS_DIR};
use crate::error::{Error, Result};
use crate::index_set::IndexSet;

/// How [`VersionedDataset::merge`] settles conflicts that `resolve` leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Commit nothing; fail with [`Error::MergeConflict`] listing them.
    #[default]
    Fail,
    /// Keep the merging branch's side of each.
    Ours,
    /// Take the merged branch's side of each.
    Theirs,
}

/// The side or value a resolution takes.
#[derive(Debug, Clone)]
pub enum Take {
    /// The merging branch's side.
    Ours,
    /// The merged branch's side.
    Theirs,
    /// This value (one value, of the field's column-file type: `values::column_file_type`; a
    /// null is NULL), for a cell conflict.
    Value(ArrayRef),
}

/// How to settle one conflict: the one of `row_id` (`None` for a conflict of a whole column,
/// split or the class list) and `column` (`None` for a row's).
#[derive(Debug, Clone)]
pub struct Resolution {
    /// The conflict's row id.
    pub row_id: Option<u64>,
    /// The conflict's column (`split:NAME` for a split's, `classes` for the class list's).
    pub column: Option<String>,
    /// What to take.
    pub take: Take,
}

/// [`VersionedDataset::merge`]'s choices.
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// For the conflicts `resolve` does not settle.
    pub strategy: Strategy,
    /// Conflicts settled one by one.
    pub resolve: Vec<Resolution>,
}

/// What a merge did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeReport {
    /// The common ancestor: its line's key (`main` or a line id) and version.
    pub base: (String, u64),
    /// The version merged in.
    pub theirs: u64,
    /// False when there was nothing to merge (theirs was already held): nothing committed.
    pub committed: bool,
    /// Rows appended from theirs.
    pub rows_added: u64,
    /// Rows deleted.
    pub rows_deleted: u64,
    /// Cells set from theirs or a resolution.
    pub cells_set: u64,
    /// Conflicts settled by the strategy or `resolve`.
    pub resolved: Vec<Conflict>,
}

/// Where a cell's new value comes from.
#[derive(Debug, Clone)]
enum Source {
    /// Theirs' table row.
    Theirs(u64),
    /// A given value (one element; a null is NULL).
    Given(ArrayRef),
    /// NULL.
    Null,
}

/// A side of the merge: the version, its view and where each row id is.
struct Side {
    v: VersionedDataset,
    view: VersionView,
    /// Row id → table index (live rows).
    index: RowIndex,
    schema: Vec<(String, FieldType)>,
}

impl Side {
    fn open(v: VersionedDataset) -> Result<Side> {
        let view = v.view()?;
        let index = RowIndex::new(view.table()?.row_ids()?);
        let schema = view.schema()?;
        Ok(Side { v, view, index, schema })
    }

    fn ty(&self, field: &str) -> Option<&FieldType> {
        self.schema.iter().find(|(n, _)| n == field).map(|(_, t)| t)
    }

    fn value(&self, id: u64, field: &str) -> Result<Option<Value<'_>>> {
        let (Some(k), Some(ty)) = (self.index.get(id), self.ty(field)) else { return Ok(None) };
        self.view.value(k, field, ty)
    }

    fn show(&self, id: u64, field: &str) -> Result<Option<String>> {
        Ok(self.value(id, field)?.map(|v| show(&v)))
    }
}

/// Where each row id of a version is (its table index): its row ids as the table gives them,
/// searched where they ascend (almost always: a version's rows are its fragments' in order, each
/// fragment's ids ascending), else through a sorted copy. No hashing of every row.
struct RowIndex {
    ids: Vec<u64>,
    /// `(id, index)` sorted by id, when `ids` does not ascend.
    sorted: Option<Vec<(u64, u64)>>,
}

impl RowIndex {
    fn new(ids: Vec<u64>) -> RowIndex {
        let sorted = (!ids.windows(2).all(|w| w[0] < w[1])).then(|| {
            let mut pairs: Vec<(u64, u64)> = ids.iter().enumerate().map(|(k, &id)| (id, k as u64)).collect();
            pairs.sort_unstable();
            pairs
        });
        RowIndex { ids, sorted }
    }

    fn get(&self, id: u64) -> Option<u64> {
        match &self.sorted {
            None => self.ids.binary_search(&id).ok().map(|k| k as u64),
            Some(pairs) => pairs.binary_search_by_key(&id, |p| p.0).ok().map(|k| pairs[k].1),
        }
    }

    fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.ids.iter().copied()
    }
}

/// A value as a conflicts table shows it.
fn show(v: &Value<'_>) -> String {
    match v {
        Value::Int(x) => x.to_string(),
        Value::Float(x) => x.to_string(),
        Value::Bool(x) => x.to_string(),
        Value::Text(s) | Value::Json(s) => s.to_string(),
        Value::Image(i) => format!("image {}x{} ({} bytes)", i.width, i.height, i.data.len()),
        Value::Bytes(b) | Value::NDArray(b) | Value::Array(b) | Value::Custom(b) => {
            format!("{} bytes {:08x}", b.len(), crc32fast::hash(b))
        }
    }
}

/// Whether two cells hold the same value (NULLs alike; floats by their bits, so NaN is NaN).
fn same(a: &Option<Value<'_>>, b: &Option<Value<'_>>) -> bool {
    match (a, b) {
        (Some(Value::Float(x)), Some(Value::Float(y))) => x.to_bits() == y.to_bits() || x == y,
        _ => a == b,
    }
}

/// The changed row ids of `d` by column, as sets.
fn changed_sets(d: &Diff) -> BTreeMap<String, BTreeSet<u64>> {
    d.changed.iter().map(|(c, rows)| (c.clone(), rows.iter().copied().collect())).collect()
}

impl VersionedDataset {
    /// The common ancestor of this version and `other` (of the same dataset, any branches).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when they have none (versions of different datasets) or it
    /// was removed; I/O errors.
    pub fn merge_base(&self, other: &VersionedDataset) -> Result<VersionedDataset> {
        let store = self.store();
        let key = |v: &VersionedDataset| v.line().line_of(v.version()).key().to_string();
        let (a, b) = (ancestry(self.manifest(), &key(self)), ancestry(other.manifest(), &key(other)));
        let mut candidates = Vec::new();
        for (line, &va) in &a {
            if let Some(&vb) = b.get(line) {
                let line = Line::by_id(&**store, Some(line))?;
                let m = read_manifest_on(&**store, &line, va.min(vb))?;
                candidates.push(VersionedDataset { store: Arc::clone(store), line, manifest: m });
            }
        }
        // The candidates no other holds.
        let holds = |x: &VersionedDataset, y: &VersionedDataset| {
            ancestry(x.manifest(), &key(x)).get(&key(y)).is_some_and(|&v| v >= y.version())
        };
        let mut best: Vec<&VersionedDataset> = candidates
            .iter()
            .filter(|c| {
                !candidates.iter().any(|d| !(key(d) == key(c) && d.version() == c.version()) && holds(d, c))
            })
            .collect();
        best.sort_by_key(|c| (c.manifest().timestamp_ms, c.version()));
        best.last().map(|c| (*c).clone()).ok_or_else(|| Error::InvalidArgument {
            what: format!("merge of version {} and version {}", self.version(), other.version()),
            why: "they have no common ancestor".into(),
        })
    }

    /// Merges the head of branch `source` into this handle's branch (its head), as one new
    /// version whose second parent is `source`'s head: both sides' changes since their common
    /// ancestor, cell by cell (the module's doc; docs/VERSIONS.md has the rules). Conflicts go
    /// to `options.resolve`, then to `options.strategy`; with [`Strategy::Fail`] any left make
    /// the merge fail with [`Error::MergeConflict`], committing nothing. When `source`'s head is
    /// already held, nothing is committed (`MergeReport::committed` false).
    ///
    /// # Errors
    /// [`Error::MergeConflict`]; [`Error::InvalidArgument`] for a branch that does not exist or
    /// a resolution whose value does not fit its column; [`Error::Conflict`] when this branch
    /// moved while merging (merge again); I/O errors.
    pub fn merge(
        &self,
        source: &str,
        message: &str,
        options: &MergeOptions,
    ) -> Result<(VersionedDataset, MergeReport)> {
        let _edit = super::lock::edit(self.dir())?;
        let ours = self.open_at(VersionRef::Latest)?;
        let theirs = self.on_branch(source, VersionRef::Latest)?;
        let base = ours.merge_base(&theirs)?;
        let base_key = (base.line().line_of(base.version()).key().to_string(), base.version());
        let theirs_key = theirs.line().line_of(theirs.version()).key().to_string();
        let mut report = MergeReport {
            base: base_key,
            theirs: theirs.version(),
            committed: false,
            rows_added: 0,
            rows_deleted: 0,
            cells_set: 0,
            resolved: Vec::new(),
        };
        // Theirs already held (merged before, or an ancestor): nothing to do.
        if ancestry(ours.manifest(), ours.line().line_of(ours.version()).key())
            .get(&theirs_key)
            .is_some_and(|&v| v >= theirs.version())
        {
            return Ok((ours, report));
        }
        super::manifest::room_for_version(ours.manifest())?;
        let plan = Plan::make(&base, &ours, &theirs, options, &mut report)?;
        let written = plan.write(&ours, &theirs, &mut report)?;
        let merged = MergedParent {
            branch: theirs.branch_name().to_string(),
            line: theirs_key.clone(),
            version: theirs.version(),
        };
        let mut holds = ancestry(theirs.manifest(), &theirs_key);
        let own = ours.line().key().to_string();
        for (line, v) in ancestry(ours.manifest(), ours.line().line_of(ours.version()).key()) {
            let e = holds.entry(line).or_insert(v);
            *e = (*e).max(v);
        }
        holds.remove(&own);
        let operation = Operation::Merge { branch: merged.branch.clone(), version: theirs.version() };
        let touches = Touches { everything: true, ..Touches::default() };
        let ours_version = ours.version();
        let v = ours.commit(operation, message, &touches, |b, new| {
            if b.version != ours_version {
                return Err(Error::Conflict {
                    version: b.version,
                    why: "the branch moved while merging (merge again)".into(),
                });
            }
            written.apply(new);
            // The line's state as the commit made it (a branch's first own version takes its
            // range then), with the merged parent and what it now holds.
            let state = new.lines.clone();
            let cursor = state.as_ref().map_or(b.next_row_id, |l| l.next_row_id);
            let end = state.as_ref().map_or(RANGE_ROWS, |l| l.row_id_end);
            if cursor > end {
                return Err(Error::InvalidArgument {
                    what: format!("merge into version {}", b.version),
                    why: format!("its line has given out row ids past {end} (2^40 rows): it cannot merge"),
                });
            }
            new.lines = Some(LineState {
                branch: state.and_then(|l| l.branch).or(ours.line().branch.clone()),
                next_row_id: cursor,
                row_id_end: end,
                merged: Some(merged.clone()),
                holds: holds.clone(),
            });
            new.format_version = FORMAT_VERSION;
            new.next_row_id = b.next_row_id.max(theirs.manifest().next_row_id);
            Ok(())
        })?;
        report.committed = true;
        Ok((v, report))
    }
}

/// What a merge changes in ours, decided (conflicts settled) before anything is written.
struct Plan {
    /// Cells to set, by field: row id → source.
    cells: BTreeMap<String, BTreeMap<u64, Source>>,
    /// Rows of ours to delete, by row id.
    deletes: BTreeSet<u64>,
    /// Rows ours deleted that come back (theirs' side of a delete/update), by row id.
    undeletes: BTreeSet<u64>,
    /// Columns theirs has that the result gets (added on theirs, or brought back), with their
    /// types: every row of ours gets theirs' value, or NULL.
    add_columns: Vec<(String, FieldType)>,
    /// Columns dropped from ours.
    drop_columns: Vec<String>,
    /// Theirs' new rows (row ids in neither the base nor ours).
    new_rows: BTreeSet<u64>,
    /// The result's splits (by name; `None`: removed), where they differ from ours'.
    splits: BTreeMap<String, Option<IndexSet>>,
    /// The result's class names, where they differ from ours'.
    classes: Option<Option<Vec<String>>>,
    /// The sides, opened.
    ours: Side,
    theirs: Side,
}

impl Plan {
    fn make(
        base: &VersionedDataset,
        ours: &VersionedDataset,
        theirs: &VersionedDataset,
        options: &MergeOptions,
        report: &mut MergeReport,
    ) -> Result<Plan> {
        let d_o = diff(base, ours)?;
        let d_t = diff(base, theirs)?;
        let b = Side::open(base.clone())?;
        let o = Side::open(ours.clone())?;
        let t = Side::open(theirs.clone())?;
        let mut conflicts: Vec<Conflict> = Vec::new();
        let mut cells: BTreeMap<String, BTreeMap<u64, Source>> = BTreeMap::new();
        let (co, ct) = (changed_sets(&d_o), changed_sets(&d_t));
        let deleted_o: BTreeSet<u64> = d_o.deleted.iter().copied().collect();
        let mut changed_by_o: BTreeSet<u64> = BTreeSet::new();
        for rows in co.values() {
            changed_by_o.extend(rows);
        }
        let mut changed_by_t: BTreeSet<u64> = BTreeSet::new();
        for rows in ct.values() {
            changed_by_t.extend(rows);
        }
        let mut decide = Decider { options, report, conflicts: &mut conflicts, undeleted: BTreeSet::new() };

        // Columns.
        let mut add_columns = Vec::new();
        let mut drop_columns = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for s in [&b, &o, &t] {
            for (n, _) in &s.schema {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        for name in &names {
            let (tb, to, tt) = (b.ty(name), o.ty(name), t.ty(name));
            let changed_t = ct.get(name);
            let changed_o = co.get(name);
            match (tb.is_some(), to, tt) {
                // In all three: theirs' changed cells.
                (true, Some(to), Some(tt)) if to == tt => {
                    for &id in changed_t.into_iter().flatten() {
                        let conflict = |kind, ours: Option<String>| -> Result<Conflict> {
                            Ok(Conflict {
                                row_id: Some(id),
                                column: Some(name.clone()),
                                base: b.show(id, name)?,
                                ours,
                                theirs: t.show(id, name)?,
                                kind,
                            })
                        };
                        if !o.index.contains(id) {
                            continue;
                        }
                        let changed_too = changed_o.is_some_and(|r| r.contains(&id));
                        if changed_too && !same(&o.value(id, name)?, &t.value(id, name)?) {
                            let c = conflict(ConflictKind::Cell, o.show(id, name)?)?;
                            set_cell(&mut cells, name, id, decide.take(c)?);
                        } else if !changed_too {
                            set_cell(&mut cells, name, id, Decided::Theirs);
                        }
                    }
                }
                // In all three, ours and theirs of different types (dropped and added again).
                (true, Some(to), Some(tt)) | (false, Some(to), Some(tt)) if to != tt => {
                    let c = Conflict {
                        row_id: None,
                        column: Some(name.clone()),
                        base: tb.map(|t| t.short_name().to_string()),
                        ours: Some(to.short_name().to_string()),
                        theirs: Some(tt.short_name().to_string()),
                        kind: ConflictKind::AddAdd,
                    };
                    match decide.take(c)? {
                        Decided::Ours | Decided::Given(_) => {}
                        Decided::Theirs => {
                            drop_columns.push(name.clone());
                            add_columns.push((name.clone(), tt.clone()));
                        }
                    }
                }
                // Dropped by ours, changed by theirs.
                (true, None, Some(tt)) if changed_t.is_some_and(|r| !r.is_empty()) => {
                    let n = changed_t.map_or(0, BTreeSet::len);
                    let c = Conflict {
                        row_id: None,
                        column: Some(name.clone()),
                        base: None,
                        ours: Some("dropped".into()),
                        theirs: Some(format!("{n} rows changed")),
                        kind: ConflictKind::DropChange,
                    };
                    if let Decided::Theirs = decide.take(c)? {
                        add_columns.push((name.clone(), tt.clone()));
                    }
                }
                // Dropped by theirs.
                (true, Some(_), None) => {
                    if changed_o.is_some_and(|r| !r.is_empty()) {
                        let n = changed_o.map_or(0, BTreeSet::len);
                        let c = Conflict {
                            row_id: None,
                            column: Some(name.clone()),
                            base: None,
                            ours: Some(format!("{n} rows changed")),
                            theirs: Some("dropped".into()),
                            kind: ConflictKind::ChangeDrop,
                        };
                        if let Decided::Theirs = decide.take(c)? {
                            drop_columns.push(name.clone());
                        }
                    } else {
                        drop_columns.push(name.clone());
                    }
                }
                // Added by both, of one type: the rows both have must agree.
                (false, Some(_), Some(_)) => {
                    for id in t.index.ids().filter(|&id| o.index.contains(id)) {
                        let (ov, tv) = (o.value(id, name)?, t.value(id, name)?);
                        if same(&ov, &tv) {
                            continue;
                        }
                        let c = Conflict {
                            row_id: Some(id),
                            column: Some(name.clone()),
                            base: None,
                            ours: ov.map(|v| show(&v)),
                            theirs: tv.map(|v| show(&v)),
                            kind: ConflictKind::AddAdd,
                        };
                        set_cell(&mut cells, name, id, decide.take(c)?);
                    }
                }
                // Added by theirs.
                (false, None, Some(tt)) => add_columns.push((name.clone(), tt.clone())),
                // Ours alone has it (added by ours), or neither does.
                _ => {}
            }
        }

        // Rows theirs deleted.
        let mut deletes = BTreeSet::new();
        for &id in &d_t.deleted {
            if !o.index.contains(id) {
                continue;
            }
            if changed_by_o.contains(&id) {
                let column = co.iter().find(|(_, r)| r.contains(&id)).map(|(c, _)| c.clone());
                let c = Conflict {
                    row_id: Some(id),
                    column: None,
                    base: None,
                    ours: Some(format!("updated{}", column.map(|c| format!(" ({c})")).unwrap_or_default())),
                    theirs: Some("deleted".into()),
                    kind: ConflictKind::UpdateDelete,
                };
                if let Decided::Ours = decide.take(c)? {
                    continue;
                }
            }
            deletes.insert(id);
        }
        // Rows ours deleted that theirs changed.
        for &id in deleted_o.intersection(&changed_by_t) {
            if !t.index.contains(id) {
                continue;
            }
            let column = ct.iter().find(|(_, r)| r.contains(&id)).map(|(c, _)| c.clone());
            let c = Conflict {
                row_id: Some(id),
                column: None,
                base: None,
                ours: Some("deleted".into()),
                theirs: Some(format!("updated{}", column.map(|c| format!(" ({c})")).unwrap_or_default())),
                kind: ConflictKind::DeleteUpdate,
            };
            if !matches!(decide.take(c)?, Decided::Ours) {
                decide.undelete(id);
            }
        }
        // Rows theirs added: new ones come over; ones ours has too (merged both ways before)
        // must agree.
        let mut new_rows = BTreeSet::new();
        for &id in &d_t.added {
            if !o.index.contains(id) {
                new_rows.insert(id);
                continue;
            }
            for (name, _) in &t.schema {
                if o.ty(name).is_none() {
                    continue;
                }
                let (ov, tv) = (o.value(id, name)?, t.value(id, name)?);
                if same(&ov, &tv) {
                    continue;
                }
                let c = Conflict {
                    row_id: Some(id),
                    column: Some(name.clone()),
                    base: None,
                    ours: ov.map(|v| show(&v)),
                    theirs: tv.map(|v| show(&v)),
                    kind: ConflictKind::Cell,
                };
                set_cell(&mut cells, name, id, decide.take(c)?);
            }
        }

        // Splits: a row id is in the result's split when ours changed it, else as theirs.
        let mut splits = BTreeMap::new();
        let read_split = |s: &Side, name: &str| -> Result<Option<IndexSet>> {
            match s.v.manifest().splits.get(name) {
                None => Ok(None),
                Some(f) => Ok(Some(read_index_file(&**s.v.store(), &f.file, f.checksum.as_deref())?)),
            }
        };
        let mut split_names: BTreeSet<String> = BTreeSet::new();
        for s in [&b, &o, &t] {
            split_names.extend(s.v.manifest().splits.keys().cloned());
        }
        for name in split_names {
            let (sb, so, st) = (read_split(&b, &name)?, read_split(&o, &name)?, read_split(&t, &name)?);
            let result = match (&sb, &so, &st) {
                (_, _, _) if so == st => continue,
                (_, _, _) if sb == st => continue,
                (_, _, _) if sb == so => st.clone(),
                (Some(_), None, Some(_)) | (Some(_), Some(_), None) => {
                    let show = |s: &Option<IndexSet>| s.as_ref().map(|s| format!("{} rows", s.len()));
                    let c = Conflict {
                        row_id: None,
                        column: Some(format!("split:{name}")),
                        base: show(&sb),
                        ours: show(&so).or(Some("removed".into())),
                        theirs: show(&st).or(Some("removed".into())),
                        kind: ConflictKind::Split,
                    };
                    match decide.take(c)? {
                        Decided::Theirs => st.clone(),
                        _ => continue,
                    }
                }
                (sb, Some(so), Some(st)) => {
                    let empty = IndexSet::empty();
                    let sb = sb.as_ref().unwrap_or(&empty);
                    Some(&(so & st) | &(&(so | st) - sb))
                }
                // Removed by both, or added by neither.
                _ => continue,
            };
            splits.insert(name, result);
        }

        // Class names.
        let (cb, co_, ct_) = (&base.manifest().classes, &ours.manifest().classes, &theirs.manifest().classes);
        let classes = if co_ == ct_ || cb == ct_ {
            None
        } else if cb == co_ {
            Some(ct_.clone())
        } else {
            let extends = |a: &Option<Vec<String>>, b: &Option<Vec<String>>| match (a, b) {
                (Some(a), Some(b)) => a.len() >= b.len() && a[..b.len()] == b[..],
                (_, None) => true,
                _ => false,
            };
            if extends(ct_, co_) {
                Some(ct_.clone())
            } else if extends(co_, ct_) {
                None
            } else {
                let show = |c: &Option<Vec<String>>| c.as_ref().map(|c| c.join(", "));
                let c = Conflict {
                    row_id: None,
                    column: Some("classes".into()),
                    base: show(cb),
                    ours: show(co_),
                    theirs: show(ct_),
                    kind: ConflictKind::Classes,
                };
                match decide.take(c)? {
                    Decided::Theirs => Some(ct_.clone()),
                    _ => None,
                }
            }
        };

        let undeletes = std::mem::take(&mut decide.undeleted);
        drop(decide);
        if !conflicts.is_empty() {
            conflicts.sort();
            return Err(Error::MergeConflict { conflicts });
        }
        // Rows brought back come as theirs has them (NULL in the columns theirs lacks).
        for &id in &undeletes {
            for (name, _) in &o.schema {
                let source = match t.ty(name) {
                    Some(_) => Source::Theirs(id),
                    None => Source::Null,
                };
                cells.entry(name.clone()).or_default().insert(id, source);
            }
        }
        // Columns dropped go with their cells.
        for name in &drop_columns {
            if !add_columns.iter().any(|(n, _)| n == name) {
                cells.remove(name);
            }
        }
        Ok(Plan {
            cells,
            deletes,
            undeletes,
            add_columns,
            drop_columns,
            new_rows,
            splits,
            classes,
            ours: o,
            theirs: t,
        })
    }

    /// Writes the files the merge adds (deletion files, patches, new data files), before its
    /// commit.
    fn write(
        mut self,
        ours: &VersionedDataset,
        theirs: &VersionedDataset,
        report: &mut MergeReport,
    ) -> Result<Written> {
        let dir = ours.dir();
        let store = &**ours.store();
        let m = ours.manifest();
        // The data-file row of ours (deleted ones too) of each row id the merge touches.
        let mut touched: std::collections::HashSet<u64> =
            self.deletes.iter().chain(&self.undeletes).copied().collect();
        touched.extend(&self.new_rows);
        for by_id in self.cells.values() {
            touched.extend(by_id.keys());
        }
        let mut place: HashMap<u64, (usize, u64)> = HashMap::new();
        if !touched.is_empty() {
            for (k, f) in m.fragments.iter().enumerate() {
                for (row, id) in ours.fragment_row_ids(f)?.into_iter().enumerate() {
                    if touched.contains(&id) {
                        place.insert(id, (k, row as u64));
                    }
                }
            }
        }
        // A row theirs has that ours deleted (and the base did not have: deleted before it, on
        // ours' side) comes back in place, as theirs has it; one brought back that ours' data
        // files no longer hold (compacted away) comes over from theirs like a new one.
        let back: Vec<u64> = self.new_rows.iter().filter(|id| place.contains_key(id)).copied().collect();
        for id in back {
            self.new_rows.remove(&id);
            self.undeletes.insert(id);
            for (name, _) in &self.ours.schema {
                let source = match self.theirs.ty(name) {
                    Some(_) => Source::Theirs(id),
                    None => Source::Null,
                };
                self.cells.entry(name.clone()).or_default().insert(id, source);
            }
        }
        let mut new_rows = self.new_rows.clone();
        new_rows.extend(self.undeletes.iter().filter(|id| !place.contains_key(id)));
        let result_schema: Vec<(String, FieldType)> = {
            let mut s: Vec<(String, FieldType)> =
                self.ours.schema.iter().filter(|(n, _)| !self.drop_columns.contains(n)).cloned().collect();
            s.extend(self.add_columns.iter().cloned());
            s
        };
        let mut fragments: BTreeMap<usize, FragmentEdit> = BTreeMap::new();
        // Deletions and rows brought back.
        for (ids, delete) in [(&self.deletes, true), (&self.undeletes, false)] {
            for id in ids {
                if let Some(&(k, row)) = place.get(id) {
                    let e = fragments.entry(k).or_default();
                    match delete {
                        true => e.delete.push(row),
                        false => e.undelete.push(row),
                    }
                }
            }
        }
        report.rows_deleted = self.deletes.len() as u64;
        // Cells.
        let mut cells_set = 0u64;
        for (name, by_id) in &self.cells {
            let Some((_, ty)) = result_schema.iter().find(|(n, _)| n == name) else { continue };
            let mut per_fragment: BTreeMap<usize, Vec<(u64, &Source)>> = BTreeMap::new();
            for (id, source) in by_id {
                if let Some(&(k, row)) = place.get(id) {
                    per_fragment.entry(k).or_default().push((row, source));
                }
            }
            for (k, mut rows) in per_fragment {
                rows.sort_by_key(|(r, _)| *r);
                rows.dedup_by_key(|(r, _)| *r);
                let mut b = ValuesBuilder::new(ty);
                for (_, source) in &rows {
                    self.push(&mut b, ty, name, source)?;
                }
                cells_set += rows.len() as u64;
                let file = patch(dir, name, rows.iter().map(|(r, _)| *r).collect(), b.finish())?;
                fragments.entry(k).or_default().columns.push(file);
            }
        }
        report.cells_set = cells_set;
        // Columns added: every data-file row of ours.
        for (name, ty) in &self.add_columns {
            for (k, f) in m.fragments.iter().enumerate() {
                let ids = ours.fragment_row_ids(f)?;
                let mut b = ValuesBuilder::new(ty);
                for id in &ids {
                    match self.theirs.value(*id, name)? {
                        Some(v) => b.push(&v)?,
                        None => b.push_null(),
                    }
                }
                let file = patch(dir, name, (0..f.num_rows).collect(), b.finish())?;
                fragments.entry(k).or_default().columns.push(file);
            }
        }
        // Theirs' new rows: its data files holding only new rows are shared; other new rows are
        // exported into one new data file.
        let mut new_fragments: Vec<Fragment> = Vec::new();
        let mut exported: Vec<u64> = Vec::new();
        let tm = theirs.manifest();
        let mut first = 0u64;
        let tview = &self.theirs.view;
        for f in tm.fragments.iter().filter(|_| !new_rows.is_empty()) {
            let live = f.num_live_rows();
            let ids = theirs.fragment_row_ids(f)?;
            let deleted = fragment_deletions(store, f)?;
            let live_ids: Vec<u64> = ids
                .iter()
                .enumerate()
                .filter(|(r, _)| !deleted.contains(*r as u64))
                .map(|(_, &id)| id)
                .collect();
            let new_here = live_ids.iter().filter(|id| new_rows.contains(id)).count() as u64;
            if new_here == 0 {
                first += live;
                continue;
            }
            if new_here == live {
                let mut f = f.clone();
                // Fields the result does not have go; the result's fields theirs lacks are NULL.
                for c in &mut f.columns {
                    c.fields.retain(|n| result_schema.iter().any(|(r, _)| r == n));
                }
                f.columns.retain(|c| !c.fields.is_empty());
                for (name, ty) in &result_schema {
                    if self.theirs.ty(name).is_none() {
                        let nulls =
                            arrow_array::new_null_array(&values::column_file_type(ty), f.num_rows as usize);
                        f.columns.push(patch(dir, name, (0..f.num_rows).collect(), nulls)?);
                    }
                }
                new_fragments.push(f);
            } else {
                for (j, id) in live_ids.iter().enumerate() {
                    if new_rows.contains(id) {
                        exported.push(first + j as u64);
                    }
                }
            }
            first += live;
        }
        report.rows_added = self.new_rows.len() as u64;
        if !exported.is_empty() {
            let all = tview.table()?.row_ids()?;
            let ids: Vec<u64> = exported.iter().map(|&i| all[i as usize]).collect();
            std::fs::create_dir_all(dir.join(DATA_DIR)).map_err(|e| commit::io(dir, e))?;
            // A data file's row ids ascend: one file per ascending run.
            for run in super::export::ascending_runs(&ids) {
                let rows = IndexSet::from_sorted(exported[run.clone()].to_vec())?;
                let rel = format!("{DATA_DIR}/merge-{}.beton", commit::unique_name());
                let copied = theirs.export(&dir.join(&rel), Some(&rows), &ExportOptions::default())?;
                let mut columns = null_patches(dir, &self.theirs.schema, &copied.filled)?;
                for c in &mut columns {
                    c.fields.retain(|n| result_schema.iter().any(|(r, _)| r == n));
                }
                columns.retain(|c| !c.fields.is_empty());
                let n = run.len() as u64;
                for (name, ty) in &result_schema {
                    if self.theirs.ty(name).is_none() {
                        let nulls = arrow_array::new_null_array(&values::column_file_type(ty), n as usize);
                        columns.push(patch(dir, name, (0..n).collect(), nulls)?);
                    }
                }
                let file = write_index_file(dir, ROW_IDS_DIR, &IndexSet::from_sorted(ids[run].to_vec())?)?;
                new_fragments.push(Fragment {
                    id: 0,
                    data_file: rel,
                    num_rows: copied.report.num_samples,
                    data_bytes: Some(copied.report.file_len),
                    row_ids: super::manifest::RowIds::File { file: file.file, checksum: file.checksum },
                    deletions: None,
                    columns,
                    copy: None,
                });
            }
        }
        // Splits.
        let mut splits = BTreeMap::new();
        for (name, set) in &self.splits {
            let file = match set {
                Some(set) => Some(write_index_file(dir, SPLITS_DIR, set)?),
                None => None,
            };
            splits.insert(name.clone(), file);
        }
        // Deletion files.
        let mut edits = Vec::new();
        for (k, e) in fragments {
            let f = &m.fragments[k];
            let deletions = if e.delete.is_empty() && e.undelete.is_empty() {
                None
            } else {
                let mut set = fragment_deletions(store, f)?;
                if !e.delete.is_empty() {
                    let mut d = e.delete.clone();
                    d.sort_unstable();
                    d.dedup();
                    set = set.union(&IndexSet::from_sorted(d)?);
                }
                if !e.undelete.is_empty() {
                    let mut u = e.undelete.clone();
                    u.sort_unstable();
                    u.dedup();
                    set = &set - &IndexSet::from_sorted(u)?;
                }
                Some(match set.is_empty() {
                    true => None,
                    false => Some(write_index_file(dir, DELETIONS_DIR, &set)?),
                })
            };
            edits.push((f.id, deletions, e.columns));
        }
        Ok(Written {
            edits,
            new_fragments,
            drop_columns: self.drop_columns,
            add_columns: self.add_columns,
            splits,
            classes: self.classes,
        })
    }

    fn push(&self, b: &mut ValuesBuilder, ty: &FieldType, name: &str, source: &Source) -> Result<()> {
        match source {
            Source::Theirs(id) => match self.theirs.value(*id, name)? {
                Some(v) => b.push(&v),
                None => {
                    b.push_null();
                    Ok(())
                }
            },
            Source::Null => {
                b.push_null();
                Ok(())
            }
            Source::Given(a) if a.is_null(0) => {
                b.push_null();
                Ok(())
            }
            Source::Given(a) => {
                let target = super::fit::Target { source: "merge: resolution", field: name, ty, rows: None };
                let a = super::fit::fit(&target, a, 1)?;
                match values::cell(&a, ty, 0)? {
                    Some(v) => b.push(&v),
                    None => {
                        b.push_null();
                        Ok(())
                    }
                }
            }
        }
    }
}

/// A patch column file of field `name`: `rows` of a data file and their values.
fn patch(dir: &std::path::Path, name: &str, rows: Vec<u64>, values: ArrayRef) -> Result<ColumnFile> {
    let rows: ArrayRef = Arc::new(UInt64Array::from(rows));
    let mut file =
        view::write_column_file(dir, vec![(view::PATCH_ROWS.to_string(), rows), (name.to_string(), values)])?;
    file.fields.retain(|n| n != view::PATCH_ROWS);
    Ok(file)
}

/// What a merge does to one of ours' data files.
#[derive(Default)]
struct FragmentEdit {
    delete: Vec<u64>,
    undelete: Vec<u64>,
    columns: Vec<ColumnFile>,
}

/// The files a merge wrote, to apply to its version.
struct Written {
    /// (fragment id, new deletions: `Some(None)` for none left, patches).
    edits: Vec<(u64, Option<Option<super::manifest::FileRef>>, Vec<ColumnFile>)>,
    new_fragments: Vec<Fragment>,
    drop_columns: Vec<String>,
    add_columns: Vec<(String, FieldType)>,
    splits: BTreeMap<String, Option<super::manifest::FileRef>>,
    classes: Option<Option<Vec<String>>>,
}

impl Written {
    fn apply(&self, new: &mut Manifest) {
        for name in &self.drop_columns {
            super::edits::drop_field(new, name);
        }
        for (name, ty) in &self.add_columns {
            new.schema.push(super::manifest::SchemaField::new(name, ty));
        }
        for (id, deletions, columns) in &self.edits {
            let f = new.fragments.find_mut(|f| f.id == *id).expect("ours' fragments");
            if let Some(d) = deletions {
                f.deletions = d.clone();
            }
            f.columns.extend(columns.iter().cloned());
        }
        for f in &self.new_fragments {
            let mut f = f.clone();
            f.id = new.next_fragment_id;
            new.next_fragment_id += 1;
            new.fragments.push(f);
        }
        for (name, file) in &self.splits {
            match file {
                Some(file) => {
                    new.splits.insert(name.clone(), file.clone());
                }
                None => {
                    new.splits.remove(name);
                }
            }
        }
        if let Some(classes) = &self.classes {
            new.classes = classes.clone();
        }
    }
}

/// Records how a cell conflict was settled: theirs' value or a given one replaces ours'.
fn set_cell(cells: &mut BTreeMap<String, BTreeMap<u64, Source>>, name: &str, id: u64, decided: Decided) {
    let source = match decided {
        Decided::Ours => return,
        Decided::Theirs => Source::Theirs(id),
        Decided::Given(a) => Source::Given(a),
    };
    cells.entry(name.to_string()).or_default().insert(id, source);
}

/// What settling a conflict came to.
enum Decided {
    Ours,
    Theirs,
    Given(ArrayRef),
}

/// Settles conflicts by `resolve`, then the strategy; collects those left.
struct Decider<'a> {
    options: &'a MergeOptions,
    report: &'a mut MergeReport,
    conflicts: &'a mut Vec<Conflict>,
    undeleted: BTreeSet<u64>,
}

impl Decider<'_> {
    fn take(&mut self, c: Conflict) -> Result<Decided> {
        let given = self.options.resolve.iter().rev().find(|r| r.row_id == c.row_id && r.column == c.column);
        let decided = match (given.map(|r| &r.take), self.options.strategy) {
            (Some(Take::Ours), _) | (None, super::merge::Strategy::Ours) => Decided::Ours,
            (Some(Take::Theirs), _) | (None, Strategy::Theirs) => Decided::Theirs,
            (Some(Take::Value(a)), _) => {
                if c.row_id.is_none() || c.column.is_none() {
                    return Err(Error::InvalidArgument {
                        what: format!("resolution of {c}"),
                        why: "a value resolves a cell; this conflict takes 'ours' or 'theirs'".into(),
                    });
                }
                if a.len() != 1 {
                    return Err(Error::InvalidArgument {
                        what: format!("resolution of {c}"),
                        why: format!("holds {} values, not one", a.len()),
                    });
                }
                Decided::Given(Arc::clone(a))
            }
            (None, Strategy::Fail) => {
                self.conflicts.push(c);
                return Ok(Decided::Ours);
            }
        };
        self.report.resolved.push(c);
        Ok(decided)
    }

    fn undelete(&mut self, id: u64) {
        self.undeleted.insert(id);
    }
}
