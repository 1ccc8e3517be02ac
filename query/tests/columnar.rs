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
