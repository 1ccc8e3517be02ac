//! Branches and three-way merges: unit cases for each rule, then a model-based property test
//! (random edits on three branches, merged in random orders with every strategy) against a
//! reference model of rows by id, which merges by the rules as docs/VERSIONS.md states them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};
use beton_dataset::versioned::merge::{self, Conflict, ConflictKind, MergeOptions, Resolution, Take};
use beton_dataset::versioned::{ExportOptions, VersionRef, VersionedDataset};
use beton_dataset::{Error, IndexSet};
use beton_storage::{FieldType, Value};
use proptest::prelude::*;

fn labels_file(dir: &Path, name: &str, first: i64, n: u64) -> PathBuf {
    let path = dir.join(name);
    beton_testkit::write_labels(&path, first, n);
    path
}

/// A dataset of `n` rows, labels 0..n.
fn dataset(n: u64) -> (tempfile::TempDir, VersionedDataset) {
    let tmp = tempfile::tempdir().unwrap();
    let file = labels_file(tmp.path(), "src.beton", 0, n);
    let ds = VersionedDataset::import(&tmp.path().join("ds"), &file).unwrap();
    (tmp, ds)
}

/// Rows by id: every column's value (`None`: NULL).
fn rows(v: &VersionedDataset) -> BTreeMap<u64, BTreeMap<String, Option<i64>>> {
    let view = v.view().unwrap();
    let table = view.table().unwrap();
    let ids = table.row_ids().unwrap();
    let schema = view.schema().unwrap();
    let mut out = BTreeMap::new();
    for (k, id) in ids.into_iter().enumerate() {
        let mut row = BTreeMap::new();
        for (name, ty) in &schema {
            let value = match view.value(k as u64, name, ty).unwrap() {
                None => None,
                Some(Value::Int(x)) => Some(x),
                Some(other) => panic!("{name}: {other:?}"),
            };
            row.insert(name.clone(), value);
        }
        assert!(out.insert(id, row).is_none(), "row id {id} twice in version {}", v.version());
    }
    out
}

fn positions(v: &VersionedDataset, keep: impl Fn(u64) -> bool) -> IndexSet {
    let ids = v.view().unwrap().table().unwrap().row_ids().unwrap();
    IndexSet::from_sorted(ids.iter().enumerate().filter(|(_, &id)| keep(id)).map(|(k, _)| k as u64).collect())
        .unwrap()
}

fn set(v: &VersionedDataset, field: &str, keep: impl Fn(u64) -> bool, value: i64) -> VersionedDataset {
    let rows = positions(v, keep);
    let values: ArrayRef = Arc::new(Int64Array::from(vec![value]));
    v.update_rows(&rows, vec![(field.to_string(), values)], "set").unwrap()
}

fn label(rows: &BTreeMap<u64, BTreeMap<String, Option<i64>>>, id: u64) -> Option<i64> {
    rows.get(&id).and_then(|r| r["label"])
}

fn conflicts(e: Error) -> Vec<Conflict> {
    match e {
        Error::MergeConflict { conflicts } => conflicts,
        other => panic!("not a merge conflict: {other}"),
    }
}

#[test]
fn a_branch_has_its_own_line_of_versions() {
    let (_tmp, main) = dataset(10);
    let fix = main.create_branch("fix", None).unwrap();
    assert_eq!((fix.version(), fix.branch_name()), (1, "fix"));
    let fix2 = set(&fix, "label", |id| id == 3, 30);
    assert_eq!(fix2.version(), 2);
    // Main does not see it; main's next version is 2 as well, on its own line.
    let main2 = set(&main, "label", |id| id == 4, 40);
    assert_eq!(main2.version(), 2);
    let (m, f) = (rows(&main2), rows(&fix2));
    assert_eq!((label(&m, 3), label(&m, 4)), (Some(3), Some(40)));
    assert_eq!((label(&f, 3), label(&f, 4)), (Some(30), Some(4)));
    // Opened by name; version 1 of the branch is main's version 1.
    let dir = main.dir().to_path_buf();
    let again = VersionedDataset::open_branch(&dir, "fix", VersionRef::Latest).unwrap();
    assert_eq!((again.version(), again.branch_name()), (2, "fix"));
    let one = VersionedDataset::open_branch(&dir, "fix", VersionRef::Number(1)).unwrap();
    assert_eq!(rows(&one), rows(&main));
    assert_eq!(again.versions().unwrap().iter().map(|m| m.version).collect::<Vec<_>>(), [1, 2]);
    let listed = main.branches().unwrap();
    let names: Vec<(&str, u64)> = listed.iter().map(|b| (b.name.as_str(), b.head)).collect();
    assert_eq!(names, [("main", 2), ("fix", 2)]);
    assert_eq!(listed[1].start, Some(("main".to_string(), 1)));
    // Appends on both lines take row ids that never meet.
    let tmp = tempfile::tempdir().unwrap();
    let a = main2.append_file(&labels_file(tmp.path(), "a.beton", 100, 3), "").unwrap();
    let b = fix2.append_file(&labels_file(tmp.path(), "b.beton", 200, 3), "").unwrap();
    let (ia, ib): (BTreeSet<u64>, BTreeSet<u64>) =
        (rows(&a).into_keys().collect(), rows(&b).into_keys().collect());
    let fresh_a: Vec<u64> = ia.iter().filter(|id| **id >= 10).copied().collect();
    let fresh_b: Vec<u64> = ib.iter().filter(|id| **id >= 10).copied().collect();
    assert_eq!(fresh_a, [10, 11, 12]);
    assert!(fresh_b.iter().all(|id| *id >= 1 << 40), "{fresh_b:?}");
    // Bad names, names in use, unknown branches.
    for bad in ["", "main", "_x", ".x", "a/b"] {
        assert!(main.create_branch(bad, None).is_err(), "{bad:?}");
    }
    assert!(main.create_branch("fix", None).unwrap_err().to_string().contains("already"));
    let err = VersionedDataset::open_branch(&dir, "nope", VersionRef::Latest).unwrap_err().to_string();
    assert!(err.contains("no such branch") && err.contains("fix"), "{err}");
    // A tag on a branch's version opens that version of that branch.
    b.tag("reviewed").unwrap();
    let tagged = VersionedDataset::open(&dir, VersionRef::Tag("reviewed".into())).unwrap();
    assert_eq!((tagged.version(), tagged.branch_name(), rows(&tagged)), (3, "fix", rows(&b)));
    // Deleting a branch leaves main alone; its tagged version still opens.
    assert_eq!(main.delete_branch("fix").unwrap(), 3);
    assert!(VersionedDataset::open_branch(&dir, "fix", VersionRef::Latest).is_err());
    assert_eq!(rows(&VersionedDataset::open(&dir, VersionRef::Tag("reviewed".into())).unwrap()), rows(&b));
    assert_eq!(main.branches().unwrap().len(), 1);
    // Main's manifests stay format 3 (betons before branches read them).
    assert_eq!(a.manifest().format_version, 3);
}

#[test]
fn merges_combine_edits_of_different_cells_rows_and_columns() {
    let (tmp, main) = dataset(10);
    let fix = main.create_branch("fix", None).unwrap();
    // Theirs: relabel row 5, delete row 7, append 2 rows, add a column.
    let fix = set(&fix, "label", |id| id == 5, 50);
    let fix = fix.delete(&positions(&fix, |id| id == 7), None, "").unwrap();
    let fix = fix.append_file(&labels_file(tmp.path(), "f.beton", 100, 2), "").unwrap();
    let n = fix.num_rows() as usize;
    let score: ArrayRef = Arc::new(Int64Array::from((0..n as i64).map(|k| k * 10).collect::<Vec<_>>()));
    let fix = fix.add_column("score", &FieldType::Int, &score, "").unwrap();
    // Ours: relabel row 2, delete row 8, append a row.
    let main = set(&main, "label", |id| id == 2, 20);
    let main = main.delete(&positions(&main, |id| id == 8), None, "").unwrap();
    let main = main.append_file(&labels_file(tmp.path(), "m.beton", 900, 1), "").unwrap();
    let theirs = rows(&fix);
    let (merged, report) = main.merge("fix", "merge fix", &MergeOptions::default()).unwrap();
    assert!(report.committed && report.resolved.is_empty());
    assert_eq!((report.rows_added, report.rows_deleted), (2, 1));
    let got = rows(&merged);
    assert_eq!(label(&got, 5), Some(50));
    assert_eq!(label(&got, 2), Some(20));
    assert!(!got.contains_key(&7) && !got.contains_key(&8));
    // Ours' appended row (id 10) has no score; theirs' appended rows keep theirs'.
    assert_eq!(got[&10]["score"], None);
    for (id, row) in &theirs {
        if *id != 8 {
            assert_eq!(got[id]["score"], row["score"], "row {id}");
        }
    }
    assert_eq!(got.len(), 10 - 2 + 1 + 2);
    // Both parents recorded; merging again is a no-op.
    let lines = merged.manifest().lines.clone().unwrap();
    assert_eq!(lines.merged.as_ref().map(|m| (m.branch.as_str(), m.version)), Some(("fix", fix.version())));
    let (same, again) = merged.merge("fix", "", &MergeOptions::default()).unwrap();
    assert!(!again.committed);
    assert_eq!(same.version(), merged.version());
    // A restore of the version before the merge is a new version on main (as git's revert): the
    // merge stays in main's history, so merging the branch again has nothing to do; restoring
    // the merge's version brings it back.
    let undone = merged.restore(merged.version() - 1).unwrap();
    assert_eq!(label(&rows(&undone), 5), Some(5));
    let (_, report) = undone.merge("fix", "", &MergeOptions::default()).unwrap();
    assert!(!report.committed);
    let merged = undone.restore(merged.version()).unwrap();
    assert_eq!(rows(&merged), got);
    // Main's next append still takes main's ids; the branch keeps its range.
    let more = merged.append_file(&labels_file(tmp.path(), "m2.beton", 950, 1), "").unwrap();
    assert!(rows(&more).contains_key(&11));
    // Merging main back into the branch brings ours' changes over: both lines now agree.
    let (fix_after, _) = fix.merge("main", "", &MergeOptions::default()).unwrap();
    assert_eq!(rows(&fix_after), rows(&more));
    // `verify` reads every version of both lines, the tag on the branch included.
    fix_after.tag("both").unwrap();
    let report = beton_dataset::versioned::verify_dir(more.dir(), false, &|_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.versions, more.version() + fix_after.version() - 1);
}

#[test]
fn conflicts_fail_by_default_and_resolve_by_strategy_or_row() {
    let (_tmp, main) = dataset(10);
    let fix = main.create_branch("fix", None).unwrap();
    let fix = set(&fix, "label", |id| id == 5 || id == 6, 50);
    let _fix = fix.delete(&positions(&fix, |id| id == 1), None, "").unwrap();
    let ours = set(&main, "label", |id| id == 5 || id == 1, 99);
    let ours = ours.delete(&positions(&ours, |id| id == 6), None, "").unwrap();
    let before = ours.version();
    let err = ours.merge("fix", "", &MergeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("nothing was committed"), "{err}");
    let found: Vec<(Option<u64>, Option<String>, ConflictKind)> =
        conflicts(err).into_iter().map(|c| (c.row_id, c.column, c.kind)).collect();
    assert_eq!(
        found,
        [
            (Some(1), None, ConflictKind::UpdateDelete),
            (Some(5), Some("label".into()), ConflictKind::Cell),
            (Some(6), None, ConflictKind::DeleteUpdate),
        ]
    );
    assert_eq!(ours.open_at(VersionRef::Latest).unwrap().version(), before, "nothing committed");
    // Ours: our side of each.
    let opts = MergeOptions { strategy: merge::Strategy::Ours, resolve: Vec::new() };
    let (merged, report) = ours.merge("fix", "", &opts).unwrap();
    assert_eq!(report.resolved.len(), 3);
    let got = rows(&merged);
    assert_eq!((label(&got, 5), label(&got, 1), got.contains_key(&6)), (Some(99), Some(99), false));
    // Theirs, from the same base (a fresh pair of branches).
    let (_tmp, main) = dataset(10);
    let fix = main.create_branch("fix", None).unwrap();
    let fix = set(&fix, "label", |id| id == 5 || id == 6, 50);
    let _fix = fix.delete(&positions(&fix, |id| id == 1), None, "").unwrap();
    let ours = set(&main, "label", |id| id == 5 || id == 1, 99);
    let ours = ours.delete(&positions(&ours, |id| id == 6), None, "").unwrap();
    let opts = MergeOptions { strategy: merge::Strategy::Theirs, resolve: Vec::new() };
    let (merged, _) = ours.merge("fix", "", &opts).unwrap();
    let got = rows(&merged);
    assert_eq!((label(&got, 5), got.contains_key(&1), label(&got, 6)), (Some(50), false, Some(50)));
    // One by one: a value for the cell, a side for each row.
    let (_tmp, main) = dataset(10);
    let fix = main.create_branch("fix", None).unwrap();
    let _fix = set(&fix, "label", |id| id == 5 || id == 6, 50);
    let ours = set(&main, "label", |id| id == 5, 99);
    let value: ArrayRef = Arc::new(Int64Array::from(vec![77]));
    let resolve =
        vec![Resolution { row_id: Some(5), column: Some("label".into()), take: Take::Value(value) }];
    let (merged, report) =
        ours.merge("fix", "", &MergeOptions { strategy: merge::Strategy::Fail, resolve }).unwrap();
    assert_eq!(report.resolved.len(), 1);
    let got = rows(&merged);
    assert_eq!((label(&got, 5), label(&got, 6)), (Some(77), Some(50)));
}

#[test]
fn columns_splits_and_classes_merge_by_their_rules() {
    let (_tmp, main) = dataset(6);
    let fix = main.create_branch("fix", None).unwrap();
    let x: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5, 6]));
    // Both add `x`; theirs' differs on row 2 alone.
    let ours = main.add_column("x", &FieldType::Int, &x, "").unwrap();
    let y: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 9, 4, 5, 6]));
    let theirs = fix.add_column("x", &FieldType::Int, &y, "").unwrap();
    let err = ours.merge("fix", "", &MergeOptions::default()).unwrap_err();
    let c = conflicts(err);
    assert_eq!((c.len(), c[0].row_id, c[0].kind), (1, Some(2), ConflictKind::AddAdd));
    assert_eq!((c[0].ours.as_deref(), c[0].theirs.as_deref()), (Some("3"), Some("9")));
    // Theirs drops its `x` again: from the base (which had none) theirs did nothing to `x`,
    // so ours' stays, changes and all.
    let _theirs = theirs.drop_column("x", "").unwrap();
    let ours = set(&ours, "x", |id| id == 0, 100);
    let (merged, _) = ours.merge("fix", "", &MergeOptions::default()).unwrap();
    assert_eq!(rows(&merged), rows(&ours));
    // A column of the base dropped by theirs and changed by ours is a conflict of the column.
    let (_tmp, main) = dataset(4);
    let main = main
        .add_column("x", &FieldType::Int, &(Arc::new(Int64Array::from(vec![1, 2, 3, 4])) as ArrayRef), "")
        .unwrap();
    let fix = main.create_branch("fix", None).unwrap();
    let _fix = fix.drop_column("x", "").unwrap();
    let ours = set(&main, "x", |id| id == 1, 20);
    let c = conflicts(ours.merge("fix", "", &MergeOptions::default()).unwrap_err());
    assert_eq!(
        (c.len(), c[0].row_id, c[0].column.as_deref(), c[0].kind),
        (1, None, Some("x"), ConflictKind::ChangeDrop)
    );
    // Splits combine element by element; classes that extend each other take the longer.
    let (_tmp, main) = dataset(6);
    let train = BTreeMap::from([("train".to_string(), IndexSet::from_sorted(vec![0, 1, 2]).unwrap())]);
    let main = main.save_splits(&train, &[], "").unwrap();
    let main = main.set_classes(&["a".to_string(), "b".to_string()], "").unwrap();
    let fix = main.create_branch("fix", None).unwrap();
    let more = BTreeMap::from([("train".to_string(), IndexSet::from_sorted(vec![0, 1, 2, 3]).unwrap())]);
    let fix = fix.save_splits(&more, &[], "").unwrap();
    let _fix = fix.set_classes(&["a".to_string(), "b".to_string(), "c".to_string()], "").unwrap();
    let less = BTreeMap::from([("train".to_string(), IndexSet::from_sorted(vec![1, 2]).unwrap())]);
    let ours = main.save_splits(&less, &[], "").unwrap();
    let (merged, _) = ours.merge("fix", "", &MergeOptions::default()).unwrap();
    let splits = merged.view().unwrap().splits().unwrap();
    assert_eq!(splits["train"].as_slice(), &[1, 2, 3]);
    assert_eq!(merged.manifest().classes.as_deref().map(|c| c.len()), Some(3));
}

#[test]
fn cleanup_keeps_branch_heads_starts_and_merge_bases() {
    let (_tmp, main) = dataset(8);
    let mut m = main.clone();
    for k in 0..3 {
        m = set(&m, "label", |id| id == 0, k);
    }
    let fix = m.create_branch("fix", None).unwrap();
    let start = fix.version();
    let mut f = fix;
    for k in 0..3 {
        f = set(&f, "label", |id| id == 1, 10 + k);
    }
    for k in 0..3 {
        m = set(&m, "label", |id| id == 2, 20 + k);
    }
    let head = rows(&f);
    m.cleanup(1, std::time::Duration::ZERO).unwrap();
    // The branch's head reads, its start (the merge base) too, and the merge works.
    let f2 = m.on_branch("fix", VersionRef::Latest).unwrap();
    assert_eq!(rows(&f2), head);
    assert!(m.open_at(VersionRef::Number(start)).is_ok(), "the branch's start is kept");
    let (merged, _) = m.merge("fix", "", &MergeOptions::default()).unwrap();
    let got = rows(&merged);
    assert_eq!((label(&got, 1), label(&got, 2)), (Some(12), Some(22)));
    // After the branch is deleted a cleanup removes its versions.
    m.delete_branch("fix").unwrap();
    merged.cleanup(1, std::time::Duration::ZERO).unwrap();
    assert_eq!(rows(&merged.open_at(VersionRef::Latest).unwrap()), got);
}

#[test]
fn compaction_on_either_side_merges_to_the_same_table() {
    let run = |compact_ours: bool, compact_theirs: bool| {
        let (tmp, main) = dataset(8);
        let fix = main.create_branch("fix", None).unwrap();
        let fix = set(&fix, "label", |id| id == 3, 30);
        let fix = fix.append_file(&labels_file(tmp.path(), "f.beton", 100, 2), "").unwrap();
        let fix = fix.delete(&positions(&fix, |id| id == 4), None, "").unwrap();
        let main = main.delete(&positions(&main, |id| id == 5), None, "").unwrap();
        let main = set(&main, "label", |id| id == 6, 60);
        let main = main.append_file(&labels_file(tmp.path(), "m.beton", 900, 1), "").unwrap();
        if compact_theirs {
            fix.compact(&ExportOptions::with_threads(1), "").unwrap();
        }
        let main = match compact_ours {
            true => main.compact(&ExportOptions::with_threads(1), "").unwrap(),
            false => main,
        };
        let (merged, _) = main.merge("fix", "", &MergeOptions::default()).unwrap();
        // And a compaction after the merge (rows of two ranges) keeps every row and id.
        let compacted = merged.compact(&ExportOptions::with_threads(1), "").unwrap();
        assert_eq!(rows(&compacted), rows(&merged));
        (rows(&merged), tmp)
    };
    let (plain, _t) = run(false, false);
    for (a, b) in [(true, false), (false, true), (true, true)] {
        assert_eq!(run(a, b).0, plain, "compacted ours {a}, theirs {b}");
    }
}

// ---------------------------------------------------------------------------------------------
// The model.

type Rows = BTreeMap<u64, BTreeMap<String, Option<i64>>>;

/// A version in the model: its rows, columns and parents (indices of earlier nodes).
#[derive(Debug, Clone)]
struct Node {
    rows: Rows,
    columns: Vec<String>,
    parents: Vec<usize>,
}

#[derive(Debug, Clone)]
enum Op {
    Set { branch: usize, pick: u64, column: usize, value: i64 },
    Delete { branch: usize, pick: u64 },
    Append { branch: usize, n: u64 },
    AddColumn { branch: usize, k: usize },
    DropColumn { branch: usize, column: usize },
    Compact { branch: usize },
    Restore { branch: usize, back: usize },
    Merge { into: usize, from: usize, strategy: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    let b = 0usize..3;
    prop_oneof![
        3 => (b.clone(), 0u64..5, 0usize..3, -3i64..4).prop_map(|(branch, pick, column, value)| Op::Set { branch, pick, column, value }),
        2 => (b.clone(), 0u64..7).prop_map(|(branch, pick)| Op::Delete { branch, pick }),
        2 => (b.clone(), 1u64..4).prop_map(|(branch, n)| Op::Append { branch, n }),
        1 => (b.clone(), 0usize..2).prop_map(|(branch, k)| Op::AddColumn { branch, k }),
        1 => (b.clone(), 1usize..3).prop_map(|(branch, column)| Op::DropColumn { branch, column }),
        1 => b.clone().prop_map(|branch| Op::Compact { branch }),
        1 => (b.clone(), 1usize..4).prop_map(|(branch, back)| Op::Restore { branch, back }),
        4 => (b.clone(), b, 0u8..3).prop_map(|(into, from, strategy)| Op::Merge { into, from, strategy }),
    ]
}

const NAMES: [&str; 3] = ["main", "b1", "b2"];

fn ancestors(nodes: &[Node], n: usize) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let mut todo = vec![n];
    while let Some(x) = todo.pop() {
        if out.insert(x) {
            todo.extend(&nodes[x].parents);
        }
    }
    out
}

/// The model's merge of `t` into `o` from `b` (docs/VERSIONS.md's rules): the rows and columns,
/// or the conflicts (row id, column, kind) left by `strategy` (0 fail, 1 ours, 2 theirs).
#[allow(clippy::type_complexity)]
fn model_merge(
    b: &Node,
    o: &Node,
    t: &Node,
    strategy: u8,
) -> Result<(Rows, Vec<String>), BTreeSet<(Option<u64>, Option<String>, ConflictKind)>> {
    let mut conflicts = BTreeSet::new();
    let mut conflict = |row: Option<u64>, col: Option<&str>, kind: ConflictKind| -> Option<bool> {
        match strategy {
            0 => {
                conflicts.insert((row, col.map(str::to_string), kind));
                None
            }
            s => Some(s == 2),
        }
    };
    let has = |n: &Node, c: &str| n.columns.iter().any(|x| x == c);
    let val = |n: &Node, id: u64, c: &str| n.rows.get(&id).and_then(|r| r.get(c).cloned().flatten());
    let changed = |side: &Node, c: &str| -> BTreeSet<u64> {
        if !has(b, c) || !has(side, c) {
            return BTreeSet::new();
        }
        b.rows
            .keys()
            .filter(|id| side.rows.contains_key(id) && val(b, **id, c) != val(side, **id, c))
            .copied()
            .collect()
    };
    let mut columns = o.columns.clone();
    let mut all: Vec<String> = Vec::new();
    for n in [b, o, t] {
        for c in &n.columns {
            if !all.contains(c) {
                all.push(c.clone());
            }
        }
    }
    let mut rows = o.rows.clone();
    let mut set_cells: Vec<(u64, String, Option<i64>)> = Vec::new();
    let mut add: Vec<String> = Vec::new();
    let mut drop: Vec<String> = Vec::new();
    for c in &all {
        match (has(b, c), has(o, c), has(t, c)) {
            (true, true, true) => {
                let co = changed(o, c);
                for id in changed(t, c) {
                    if !o.rows.contains_key(&id) {
                        continue;
                    }
                    if co.contains(&id) {
                        if val(o, id, c) != val(t, id, c)
                            && conflict(Some(id), Some(c), ConflictKind::Cell) == Some(true)
                        {
                            set_cells.push((id, c.clone(), val(t, id, c)));
                        }
                    } else {
                        set_cells.push((id, c.clone(), val(t, id, c)));
                    }
                }
            }
            (true, false, true) => {
                let back = !changed(t, c).is_empty()
                    && conflict(None, Some(c), ConflictKind::DropChange) == Some(true);
                if back {
                    add.push(c.clone());
                }
            }
            (true, true, false) => {
                let gone = changed(o, c).is_empty()
                    || conflict(None, Some(c), ConflictKind::ChangeDrop) == Some(true);
                if gone {
                    drop.push(c.clone());
                }
            }
            (false, true, true) => {
                for id in t.rows.keys().filter(|id| o.rows.contains_key(id)) {
                    if val(o, *id, c) != val(t, *id, c)
                        && conflict(Some(*id), Some(c), ConflictKind::AddAdd) == Some(true)
                    {
                        set_cells.push((*id, c.clone(), val(t, *id, c)));
                    }
                }
            }
            (false, false, true) => add.push(c.clone()),
            _ => {}
        }
    }
    let changed_rows = |side: &Node| -> BTreeSet<u64> {
        let mut out = BTreeSet::new();
        for c in &b.columns {
            out.extend(changed(side, c));
        }
        out
    };
    let (by_o, by_t) = (changed_rows(o), changed_rows(t));
    let mut deletes = Vec::new();
    for id in b.rows.keys().filter(|id| !t.rows.contains_key(id) && o.rows.contains_key(id)) {
        if !by_o.contains(id) || conflict(Some(*id), None, ConflictKind::UpdateDelete) != Some(false) {
            deletes.push(*id);
        }
    }
    let mut back = Vec::new();
    for id in b.rows.keys().filter(|id| !o.rows.contains_key(id) && t.rows.contains_key(id)) {
        if by_t.contains(id) && conflict(Some(*id), None, ConflictKind::DeleteUpdate) == Some(true) {
            back.push(*id);
        }
    }
    let mut new_rows = Vec::new();
    for id in t.rows.keys().filter(|id| !b.rows.contains_key(id)) {
        if !o.rows.contains_key(id) {
            new_rows.push(*id);
            continue;
        }
        for c in &t.columns {
            if has(o, c)
                && val(o, *id, c) != val(t, *id, c)
                && conflict(Some(*id), Some(c), ConflictKind::Cell) == Some(true)
            {
                set_cells.push((*id, c.clone(), val(t, *id, c)));
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(conflicts);
    }
    // Apply: columns, cells, rows.
    for c in &drop {
        if !add.contains(c) {
            columns.retain(|x| x != c);
        }
    }
    for c in &add {
        if !columns.contains(c) {
            columns.push(c.clone());
        }
    }
    for (id, c, v) in set_cells {
        if let Some(r) = rows.get_mut(&id) {
            r.insert(c, v);
        }
    }
    for c in &add {
        for (id, r) in rows.iter_mut() {
            r.insert(c.clone(), val(t, *id, c));
        }
    }
    for id in deletes {
        rows.remove(&id);
    }
    for id in back.into_iter().chain(new_rows) {
        let r = columns.iter().map(|c| (c.clone(), if has(t, c) { val(t, id, c) } else { None })).collect();
        rows.insert(id, r);
    }
    for r in rows.values_mut() {
        r.retain(|c, _| columns.contains(c));
        for c in &columns {
            r.entry(c.clone()).or_insert(None);
        }
    }
    Ok((rows, columns))
}

fn run_model(ops: &[Op]) {
    let (tmp, main) = dataset(12);
    let dir = main.dir().to_path_buf();
    let first = Node { rows: rows(&main), columns: vec!["label".into()], parents: vec![] };
    let mut nodes = vec![first];
    main.create_branch("b1", None).unwrap();
    main.create_branch("b2", None).unwrap();
    let mut heads = [0usize; 3];
    // Each branch's versions so far (number, node), its start first.
    let mut history: [Vec<(u64, usize)>; 3] = [vec![(1, 0)], vec![(1, 0)], vec![(1, 0)]];
    let mut seen_ids: BTreeSet<u64> = nodes[0].rows.keys().copied().collect();
    let mut files = 0;
    for (step, op) in ops.iter().enumerate() {
        let open = |b: usize| VersionedDataset::open_branch(&dir, NAMES[b], VersionRef::Latest).unwrap();
        let branch = match op {
            Op::Set { branch, .. }
            | Op::Delete { branch, .. }
            | Op::Append { branch, .. }
            | Op::AddColumn { branch, .. }
            | Op::DropColumn { branch, .. }
            | Op::Compact { branch }
            | Op::Restore { branch, .. } => *branch,
            Op::Merge { into, .. } => *into,
        };
        let v = open(branch);
        let node = &nodes[heads[branch]];
        let mut next =
            Node { rows: node.rows.clone(), columns: node.columns.clone(), parents: vec![heads[branch]] };
        let new_version = match op {
            Op::Set { pick, column, value, .. } => {
                let Some(c) = next.columns.get(*column % next.columns.len()).cloned() else { continue };
                let keep = |id: u64| id % 5 == *pick;
                if positions(&v, keep).is_empty() {
                    continue;
                }
                for (id, r) in next.rows.iter_mut() {
                    if keep(*id) {
                        r.insert(c.clone(), Some(*value));
                    }
                }
                set(&v, &c, keep, *value)
            }
            Op::Delete { pick, .. } => {
                let keep = |id: u64| id % 7 == *pick;
                let p = positions(&v, keep);
                if p.is_empty() || p.len() as u64 == v.num_rows() {
                    continue;
                }
                next.rows.retain(|id, _| !keep(*id));
                v.delete(&p, None, "").unwrap()
            }
            Op::Append { n, .. } => {
                files += 1;
                let path = labels_file(tmp.path(), &format!("a{files}.beton"), 1000 * files, *n);
                let after = v.append_file(&path, "").unwrap();
                let got = rows(&after);
                let fresh: Vec<u64> = got.keys().filter(|id| !next.rows.contains_key(id)).copied().collect();
                assert_eq!(fresh.len() as u64, *n);
                for id in fresh {
                    assert!(seen_ids.insert(id), "row id {id} given out twice");
                    next.rows.insert(id, got[&id].clone());
                }
                after
            }
            Op::AddColumn { k, .. } => {
                let name = format!("x{k}");
                if next.columns.contains(&name) {
                    continue;
                }
                let ids = v.view().unwrap().table().unwrap().row_ids().unwrap();
                let values: Vec<i64> =
                    ids.iter().map(|id| (*id % 1000) as i64 * 3 + branch as i64 % 2).collect();
                for (id, r) in next.rows.iter_mut() {
                    r.insert(name.clone(), Some((*id % 1000) as i64 * 3 + branch as i64 % 2));
                }
                next.columns.push(name.clone());
                v.add_column(&name, &FieldType::Int, &(Arc::new(Int64Array::from(values)) as ArrayRef), "")
                    .unwrap()
            }
            Op::DropColumn { column, .. } => {
                let Some(c) = next.columns.get(*column).cloned() else { continue };
                next.columns.retain(|x| *x != c);
                for r in next.rows.values_mut() {
                    r.remove(&c);
                }
                v.drop_column(&c, "").unwrap()
            }
            Op::Compact { .. } => v.compact(&ExportOptions::with_threads(1), "").unwrap(),
            Op::Restore { back, .. } => {
                let h = &history[branch];
                let Some(&(version, node)) = h.len().checked_sub(1 + back).and_then(|k| h.get(k)) else {
                    continue;
                };
                next.rows = nodes[node].rows.clone();
                next.columns = nodes[node].columns.clone();
                v.restore(version).unwrap()
            }
            Op::Merge { from, strategy, .. } => {
                if *from == branch {
                    continue;
                }
                let t = heads[*from];
                let o = heads[branch];
                let (ao, at) = (ancestors(&nodes, o), ancestors(&nodes, t));
                if ao.contains(&t) {
                    // Already held: nothing to commit.
                    let (same, report) = v.merge(NAMES[*from], "", &MergeOptions::default()).unwrap();
                    assert!(!report.committed, "step {step}");
                    assert_eq!(same.version(), v.version());
                    continue;
                }
                let common: BTreeSet<usize> = ao.intersection(&at).copied().collect();
                let best: Vec<usize> = common
                    .iter()
                    .copied()
                    .filter(|c| !common.iter().any(|d| d != c && ancestors(&nodes, *d).contains(c)))
                    .collect();
                let strategy_of = [merge::Strategy::Fail, merge::Strategy::Ours, merge::Strategy::Theirs]
                    [*strategy as usize];
                let options = MergeOptions { strategy: strategy_of, resolve: Vec::new() };
                let got = v.merge(NAMES[*from], "", &options);
                let expected: Vec<_> =
                    best.iter().map(|&bn| model_merge(&nodes[bn], &nodes[o], &nodes[t], *strategy)).collect();
                match got {
                    Ok((merged, _)) => {
                        let mine = rows(&merged);
                        let ok = expected.iter().any(|e| matches!(e, Ok((r, _)) if *r == mine));
                        assert!(ok, "step {step} {op:?}: merged {mine:?}\nexpected one of {expected:?}");
                        let (r, c) = expected
                            .into_iter()
                            .find_map(|e| e.ok().filter(|(r, _)| *r == mine))
                            .expect("matched");
                        next.rows = r;
                        next.columns = c;
                        next.parents.push(t);
                        merged
                    }
                    Err(Error::MergeConflict { conflicts }) => {
                        let mine: BTreeSet<(Option<u64>, Option<String>, ConflictKind)> =
                            conflicts.into_iter().map(|c| (c.row_id, c.column, c.kind)).collect();
                        let ok = expected.iter().any(|e| matches!(e, Err(c) if *c == mine));
                        assert!(ok, "step {step} {op:?}: conflicts {mine:?}\nexpected one of {expected:?}");
                        continue;
                    }
                    Err(e) => panic!("step {step} {op:?}: {e}"),
                }
            }
        };
        // The new version agrees with the model.
        let mine = rows(&new_version);
        let mut want = next.rows.clone();
        for r in want.values_mut() {
            for c in &next.columns {
                r.entry(c.clone()).or_insert(None);
            }
        }
        assert_eq!(mine, want, "step {step} {op:?} on {}", NAMES[branch]);
        nodes.push(next);
        heads[branch] = nodes.len() - 1;
        history[branch].push((new_version.version(), nodes.len() - 1));
    }
    // Every head reads as the model says, after a cleanup too.
    main.cleanup(1, std::time::Duration::ZERO).unwrap();
    for (b, name) in NAMES.iter().enumerate() {
        let v = VersionedDataset::open_branch(&dir, name, VersionRef::Latest).unwrap();
        let mut want = nodes[heads[b]].rows.clone();
        for r in want.values_mut() {
            for c in &nodes[heads[b]].columns {
                r.entry(c.clone()).or_insert(None);
            }
        }
        assert_eq!(rows(&v), want, "{name} after cleanup");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn merges_agree_with_a_reference_model(ops in proptest::collection::vec(op(), 1..14)) {
        run_model(&ops);
    }
}
