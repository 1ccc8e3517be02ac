//! Columnar copies (`beton_query::columnar`) as queries meet them: made on the first query of a
//! large file, read in place afterwards with the same answers as the row gather, made again when
//! the data file changes, kept by a dataset directory's cleanup, and reported by `explain`.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt16Type};
use beton_query::columnar::{self, ColumnarCopy};
use beton_query::versioned::VersionedDataset;
use beton_query::SqlEdits;
use beton_query::{explain, select_indices, Table};
use beton_storage::{Dataset, SampleValue};
use beton_testkit::{rgb, schema};

const ROWS: u64 = columnar::MIN_ROWS + 4_464; // 70,000

fn label_of(i: u64, salt: i64) -> i64 {
    (i.wrapping_mul(2_654_435_761) % 97) as i64 + salt
}

fn write(path: &Path, rows: u64, salt: i64) {
    beton_testkit::write(path, schema("label:int score:float image:raw caption:text"), rows, |i| {
        let w = 1 + (i % 3) as u32;
        vec![
            SampleValue::Int(label_of(i, salt)),
            SampleValue::Float(i as f64 / 8.0),
            rgb(w, 1, vec![1; 3 * w as usize]),
            SampleValue::Text(format!("c{}", i % 5)),
        ]
    });
}

/// A temporary folder holding file `name`: `rows` rows as [`write`] makes them, salt 0.
fn temp_file(name: &str, rows: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    beton_testkit::temp_file(name, |path| write(path, rows, 0))
}

fn expected_ids(rows: u64, salt: i64) -> Vec<u64> {
    (0..rows).filter(|&i| label_of(i, salt) < 10 + salt && (1 + i % 3) >= 2).collect()
}

const SQL: &str = "label < 10 AND image.width >= 2";

#[test]
fn the_first_query_of_a_large_file_makes_its_copy_and_later_ones_read_it() {
    let (_dir, path) = temp_file("big.beton", ROWS);
    let copy_path = columnar::path_of(&path);
    assert!(!copy_path.exists(), "the storage writer alone makes none");
    let ds = Dataset::open(&path).unwrap();
    let ids = select_indices(&Table::new(&ds), SQL).unwrap();
    assert_eq!(ids.as_slice(), expected_ids(ROWS, 0));
    assert!(copy_path.exists(), "made by the first query");

    // Later queries read it: explain says so, with only its columns' bytes.
    let e = explain_file(&path, SQL).unwrap();
    assert_eq!(e.scan.columnar_columns, ["label", "image.width"]);
    assert_eq!(e.scan.columnar, ROWS * 8 + ROWS * 2);
    assert_eq!(e.scan.row_major, 0);
    assert!(e.to_string().contains("from the columnar copy (label, image.width)"), "{e}");
    let t = Table::new(&ds);
    let score = t.column("score").unwrap();
    assert_eq!(score.as_primitive::<Float64Type>().value(800), 100.0);
    let width = t.column("image.width").unwrap();
    assert_eq!(width.as_primitive::<UInt16Type>().value(4), 2);
    // Text still comes from the heap.
    assert_eq!(t.column("caption").unwrap().as_string::<i32>().value(7), "c2");
    assert_eq!(ids, select_indices(&t, SQL).unwrap());

    // The file rewritten (other labels): the copy is not used, and is made again.
    drop(t);
    drop(ds);
    write(&path, ROWS, 5);
    let ds = Dataset::open(&path).unwrap();
    assert!(ColumnarCopy::open(&ds).is_none(), "stale");
    let ids = select_indices(&Table::new(&ds), "label < 15 AND image.width >= 2").unwrap();
    assert_eq!(ids.as_slice(), expected_ids(ROWS, 5));
    assert!(ColumnarCopy::open(&ds).is_some(), "made again");
}

#[test]
fn small_files_gather_and_explain_says_so() {
    let (_dir, path) = temp_file("small.beton", 1000);
    let ds = Dataset::open(&path).unwrap();
    let e = explain_file(&path, SQL).unwrap();
    assert!(!columnar::path_of(&path).exists(), "under MIN_ROWS: no copy");
    assert_eq!((e.scan.columnar, e.scan.row_major), (0, ds.data_table().len() as u64));
    assert!(e.to_string().contains("gathered from the row-major data table"), "{e}");
    // Asked for, a small file gets one too, and gives the same answer.
    ColumnarCopy::build(&ds).unwrap();
    let ids = select_indices(&Table::new(&ds), SQL).unwrap();
    assert_eq!(ids.as_slice(), expected_ids(1000, 0));
    assert!(explain_file(&path, SQL).unwrap().scan.columnar > 0);
}

#[test]
fn a_copy_that_cannot_be_written_leaves_queries_gathering() {
    let (dir, path) = temp_file("big.beton", ROWS);
    // A directory where the copy would go: writing it fails whoever runs the test (a
    // read-only directory does not stop root, which CI runs as).
    let copy = columnar::path_of(&path);
    std::fs::create_dir(&copy).unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert!(ColumnarCopy::build(&ds).is_err());
    let table = Table::new(&ds);
    assert_eq!(select_indices(&table, SQL).unwrap().as_slice(), expected_ids(ROWS, 0));
    let scan = table.scan_bytes(&["label"]).unwrap();
    assert_eq!((scan.columnar, scan.row_major), (0, ds.data_table().len() as u64), "gathered");
    assert!(copy.is_dir(), "left alone");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn versions_read_copies_through_deletions_and_column_files_and_cleanup_keeps_them() {
    let (dir, file) = temp_file("big.beton", ROWS);
    let root = dir.path().join("ds");
    let v1 = VersionedDataset::import(&root, &file).unwrap();
    let v2 = v1.delete_where("index % 10 = 0", "drop a tenth").unwrap();
    let v3 = v2.update(Some("index < 100"), &[("label".into(), "label + 1000".into())], "bump").unwrap();
    let view = v3.view().unwrap();
    let table = view.table().unwrap();
    let labels = table.column("label").unwrap();
    let labels = labels.as_primitive::<Int64Type>();
    // Row k of version 3 is data-file row (k / 9) * 10 + k % 9 + 1.
    let file_row = |k: u64| (k / 9) * 10 + k % 9 + 1;
    assert_eq!(labels.len() as u64, ROWS - ROWS / 10);
    for k in [0u64, 5, 89, 90, 1_000, 62_999] {
        let bump = if k < 100 { 1000 } else { 0 };
        assert_eq!(labels.value(k as usize), label_of(file_row(k), 0) + bump, "row {k}");
    }
    let data_file = view.dataset(0).unwrap().path().to_path_buf();
    let copy = columnar::path_of(&data_file);
    assert!(copy.exists(), "the version's first query made the data file's copy");
    let scan = table.scan_bytes(&["label", "score"]).unwrap();
    assert_eq!(scan.columnar_columns, ["score"], "label comes from the column file");
    drop(table);
    drop(view);
    v3.cleanup(1, std::time::Duration::ZERO).unwrap();
    assert!(copy.exists(), "kept with its data file");
    let n = v3.view().unwrap().table().unwrap().num_rows();
    assert_eq!(n, ROWS - ROWS / 10);
}

#[test]
fn damaged_column_files_are_errors_that_name_them() {
    let (dir, file) = temp_file("small.beton", 500);
    let root = dir.path().join("ds");
    let v = VersionedDataset::import(&root, &file).unwrap();
    let v = v.update(Some("index < 50"), &[("label".into(), "label + 1".into())], "bump").unwrap();
    let column_file = std::fs::read_dir(root.join("columns")).unwrap().next().unwrap().unwrap().path();
    let good = std::fs::read(&column_file).unwrap();
    let reopen = || {
        let at = beton_query::versioned::VersionRef::Number(v.version());
        let v = VersionedDataset::open(&root, at)?;
        let view = v.view()?;
        view.table().map(|t| t.num_rows())
    };
    reopen().unwrap();
    for junk in [b"junk".to_vec(), good[..good.len() / 2].to_vec(), Vec::new()] {
        std::fs::write(&column_file, &junk).unwrap();
        let err = reopen().unwrap_err().to_string();
        // The manifest's checksum of the file catches it first (a file without one, from an
        // older dataset, fails as Arrow IPC), naming the file.
        let named = err.contains(&column_file.display().to_string()) || err.contains("column file");
        assert!(named && (err.contains("checksum") || err.contains("Arrow IPC")), "{err}");
    }
    // Bytes flipped anywhere: an error or a table, never a crash.
    for k in 0..200 {
        let mut bytes = good.clone();
        let at = (k * 7919) % bytes.len();
        bytes[at] ^= 0x5a;
        std::fs::write(&column_file, &bytes).unwrap();
        let _ = reopen();
    }
}

#[test]
fn a_copy_truncated_under_its_map_is_an_error_not_a_crash() {
    let (_dir, path) = temp_file("big.beton", ROWS);
    let ds = Dataset::open(&path).unwrap();
    ColumnarCopy::build(&ds).unwrap();
    let t = Table::new(&ds);
    t.column("label").unwrap(); // the copy is open and mapped
                                // Another program truncates the copy in place (beton never does).
    std::fs::OpenOptions::new().write(true).open(columnar::path_of(&path)).unwrap().set_len(4096).unwrap();
    // A column not read yet: its pages cannot be mapped, so it comes from the rows, right.
    let score = t.column("score").unwrap();
    assert_eq!(score.as_primitive::<Float64Type>().value(9), 9.0 / 8.0);
    // One read before: the query reads zeros where the file was, and says so instead of
    // answering.
    let err = select_indices(&t, SQL).unwrap_err().to_string();
    assert!(err.contains("columns.arrow"), "{err}");
    // A new table ignores the damaged copy and makes a new one.
    let ids = select_indices(&Table::new(&ds), SQL).unwrap();
    assert_eq!(ids.as_slice(), expected_ids(ROWS, 0));
}

/// `explain` on the `.beton` file at `path`, opened as a one-file view.
fn explain_file(path: &std::path::Path, sql: &str) -> beton_query::Result<explain::Explain> {
    let ds = std::sync::Arc::new(Dataset::open(path).unwrap());
    explain::explain(&beton_query::versioned::VersionView::of_file(ds), sql)
}

/// A `.beton` file's view keeps the columns its queries materialised (its text columns are
/// gathered from the heap, a `LIKE` at every query otherwise), and drops them when the file is
/// written in place: named splits saved into it, or another program rewriting bytes of it. A
/// query never reads values of the file as it was.
#[test]
fn a_files_view_keeps_its_columns_until_the_file_is_written_in_place() {
    let (_tmp, path) = beton_testkit::temp_path("t.beton");
    beton_testkit::write(&path, schema("n:int t:text"), 50, |i| {
        vec![SampleValue::Int(i as i64), SampleValue::Text(format!("row-{i:03}-abc"))]
    });
    let view =
        beton_query::versioned::VersionView::of_file(std::sync::Arc::new(Dataset::open(&path).unwrap()));
    let column = |view: &beton_query::versioned::VersionView| view.table().unwrap().column("t").unwrap();
    let first = column(&view);
    assert!(std::sync::Arc::ptr_eq(&first, &column(&view)), "kept between queries");
    assert_eq!(select_indices(&view.table().unwrap(), "t LIKE 'row-00%'").unwrap().len(), 10);

    // Splits saved into the file (in place): the kept columns are dropped, read again the same.
    beton_storage::update_splits(&path, None, |s| {
        s.insert("val".into(), vec![1, 2, 3]);
        Ok(())
    })
    .unwrap();
    let after_splits = column(&view);
    assert!(!std::sync::Arc::ptr_eq(&first, &after_splits));
    assert_eq!(&first, &after_splits);

    // Another program rewrites a text in place (same length): the next query reads the new text.
    std::thread::sleep(std::time::Duration::from_millis(20)); // a new modification time
    let bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(11).position(|w| w == b"row-007-abc").unwrap();
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(at as u64)).unwrap();
        f.write_all(b"ROW-007-abc").unwrap();
    }
    let rewritten = column(&view);
    assert_eq!(rewritten.as_string::<i32>().value(7), "ROW-007-abc");
    assert_eq!(select_indices(&view.table().unwrap(), "t LIKE 'row-00%'").unwrap().len(), 9);
}

/// The files of `dir/data` whose names end with `suffix`.
fn data_files_ending(dir: &Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    found
}

/// Rows of `salts.len()` files of `sizes` rows, concatenated: the ids a query of [`SQL`] gives.
fn concatenated_ids(sizes: &[u64], salts: &[i64]) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut start = 0;
    for (&n, &salt) in sizes.iter().zip(salts) {
        // SQL's `label < 10` over the file's labels (salted ones are higher).
        ids.extend((0..n).filter(|&i| label_of(i, salt) < 10 && (1 + i % 3) >= 2).map(|i| start + i));
        start += n;
    }
    ids
}

#[test]
fn a_multi_file_commit_makes_one_group_copy_that_every_later_version_reads() {
    use beton_query::versioned::ExportOptions;
    let dir = tempfile::tempdir().unwrap();
    let sizes = [700u64, 0, 1_300, 450];
    let salts = [0i64, 0, 0, 0];
    let sources: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let path = dir.path().join(format!("part-{k}.beton"));
            write(&path, n, 0);
            path
        })
        .collect();
    let root = dir.path().join("ds");
    let v1 =
        VersionedDataset::concat(&root, &sources, "four files", &ExportOptions::with_threads(2)).unwrap();
    // One copy for the commit, none per data file, and every fragment names it.
    let groups = data_files_ending(&root, columnar::GROUP_SUFFIX);
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert!(data_files_ending(&root, ".beton.columns.arrow").is_empty());
    let group_rel = format!("data/{}", groups[0].file_name().unwrap().to_string_lossy());
    assert!(v1.manifest().fragments.iter().all(|f| f.copy.as_deref() == Some(group_rel.as_str())));
    let reads_group = |v: &VersionedDataset| {
        let view = v.view().unwrap();
        let table = view.table().unwrap();
        let ids = select_indices(&table, SQL).unwrap().iter().collect::<Vec<u64>>();
        let scan = table.scan_bytes(&["label", "score"]).unwrap();
        (ids, scan.columnar_columns, scan.row_major)
    };
    let (ids, columns, row_major) = reads_group(&v1);
    assert_eq!(ids, concatenated_ids(&sizes, &salts));
    assert_eq!((columns, row_major), (vec!["label".to_string(), "score".to_string()], 0));
    // A new process's view (nothing shared with v1's) reads it too: no copy of its own made.
    let again = VersionedDataset::open(&root, beton_query::versioned::VersionRef::Latest).unwrap();
    assert_eq!(reads_group(&again).0, ids);
    assert!(data_files_ending(&root, ".beton.columns.arrow").is_empty(), "the group served every data file");
    // Edits carry the fragments, and their copy, along.
    let v2 = v1.delete_where("index % 10 = 0", "drop a tenth").unwrap();
    let v3 = v2.update(Some("index < 100"), &[("score".into(), "score + 1000".into())], "bump").unwrap();
    let (ids3, columns3, _) = reads_group(&v3);
    let kept: Vec<u64> = (0..sizes.iter().sum::<u64>()).filter(|i| i % 10 != 0).collect();
    let want: Vec<u64> = kept
        .iter()
        .enumerate()
        .filter(|&(_, &i)| concatenated_ids(&sizes, &salts).binary_search(&i).is_ok())
        .map(|(k, _)| k as u64)
        .collect();
    assert_eq!(ids3, want);
    // Rows < 100 (of the first data file) have score patched; the rest of score, and label, are
    // read from the group.
    assert_eq!(columns3, ["label", "score"]);
    assert!(data_files_ending(&root, ".beton.columns.arrow").is_empty());
    // Cleanup keeps the group as long as a version names it.
    drop(v2);
    v3.cleanup(1, std::time::Duration::ZERO).unwrap();
    assert!(groups[0].exists(), "kept while a version names it");
    assert_eq!(reads_group(&v3).0, want);
    // Compacted into new data files, the old versions removed: the group goes with them.
    let v4 = v3.compact(&ExportOptions::with_threads(2), "compact").unwrap();
    v4.cleanup(1, std::time::Duration::ZERO).unwrap();
    assert!(!groups[0].exists(), "removed with the last version naming it");
    assert_eq!(reads_group(&v4).0, want);
}

#[test]
fn a_group_copy_that_is_gone_damaged_or_of_another_file_is_not_read() {
    use beton_query::versioned::ExportOptions;
    let dir = tempfile::tempdir().unwrap();
    let sizes = [600u64, 900];
    let sources: Vec<_> = (0..2)
        .map(|k| {
            let path = dir.path().join(format!("part-{k}.beton"));
            write(&path, sizes[k], 0);
            path
        })
        .collect();
    let root = dir.path().join("ds");
    VersionedDataset::concat(&root, &sources, "two", &ExportOptions::with_threads(1)).unwrap();
    let group = data_files_ending(&root, columnar::GROUP_SUFFIX).remove(0);
    let query = || {
        let v = VersionedDataset::open(&root, beton_query::versioned::VersionRef::Latest).unwrap();
        let view = v.view().unwrap();
        let table = view.table().unwrap();
        select_indices(&table, SQL).unwrap().iter().collect::<Vec<u64>>()
    };
    let zeros = [0i64, 0];
    assert_eq!(query(), concatenated_ids(&sizes, &zeros));
    // A data file rewritten under its name by another program (same rows and length, other
    // labels): its part of the group is not its copy any more; the other's still is.
    let v = VersionedDataset::open(&root, beton_query::versioned::VersionRef::Latest).unwrap();
    let second = root.join(&v.manifest().fragments[1].data_file);
    drop(v);
    let rewritten = dir.path().join("other.beton");
    write(&rewritten, sizes[1], 3);
    std::fs::remove_file(&second).unwrap();
    std::fs::copy(&rewritten, &second).unwrap();
    assert_eq!(query(), concatenated_ids(&sizes, &[0, 3]));
    assert!(columnar::path_of(&second).exists(), "it made a copy of its own");
    assert_eq!(
        data_files_ending(&root, ".beton.columns.arrow").len(),
        1,
        "the first one's copy is the group's"
    );
    // The group cut short, junk, or naming other data files (a copy is a cache, matched to its
    // data files by name and identity; like a data file's own copy it has no checksum of its
    // values), or gone: answers from the data files, no crash.
    let good = std::fs::read(&group).unwrap();
    let first_name =
        data_files_ending(&root, ".beton")[0].file_name().unwrap().to_string_lossy().into_owned();
    let renamed = {
        let at = good.windows(first_name.len()).position(|w| w == first_name.as_bytes()).unwrap();
        let mut bytes = good.clone();
        bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
        bytes
    };
    for k in 0..40usize {
        let mut bytes = good.clone();
        match k % 3 {
            0 => bytes.truncate(k * 977 % bytes.len()),
            1 => bytes = renamed.clone(),
            _ => bytes = b"junk".to_vec(),
        }
        std::fs::write(&group, &bytes).unwrap();
        std::fs::remove_file(columnar::path_of(&second)).ok();
        assert_eq!(query(), concatenated_ids(&sizes, &[0, 3]), "damage {k}");
    }
    std::fs::remove_file(&group).unwrap();
    assert_eq!(query(), concatenated_ids(&sizes, &[0, 3]));
}
