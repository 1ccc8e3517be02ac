//! A missing value is NULL, never a made-up one (issue 36): rows appended without a field the
//! dataset has read as NULL through the table, SQL, `Table::value`, take and diff; compaction and
//! concatenation keep them NULL; an export to a `.beton` file (which holds a value in every row)
//! writes a filler and says which rows it filled and with what.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array};

use beton_query::versioned::{ExportOptions, VersionRef, VersionedDataset};
use beton_storage::{ArraySpec, DType, Dataset, FieldType};
use beton_testkit::write_labels;

/// A dataset of 6 rows (labels 0..6) with an added float `score` (i / 2) and a fixed-shape
/// array `vec`, then 4 appended rows (labels 100..104) from a file that has neither: the
/// folder, the dataset's latest version.
fn grown() -> (tempfile::TempDir, VersionedDataset) {
    let (tmp, a, b) = beton_testkit::two_files(write_labels, 6, 4);
    let v = VersionedDataset::import(&tmp.path().join("ds"), &a).unwrap();
    let scores: ArrayRef = Arc::new(Float64Array::from((0..6).map(|i| i as f64 / 2.0).collect::<Vec<_>>()));
    let v = v.add_column("score", &FieldType::Float, &scores, "scores").unwrap();
    let spec = ArraySpec::new(DType::parse("<i2").unwrap(), vec![2]).unwrap();
    let ty = FieldType::NDArray(spec);
    let vecs: ArrayRef = Arc::new(arrow_array::LargeBinaryArray::from(
        (0..6)
            .map(|i: u8| vec![i, 0, i, 0])
            .collect::<Vec<_>>()
            .iter()
            .map(|v| v.as_slice())
            .collect::<Vec<_>>(),
    ));
    let v = v.add_column("vec", &ty, &vecs, "vectors").unwrap();
    let v = v.append_file(&b, "more").unwrap();
    (tmp, v)
}

fn ids(v: &VersionedDataset, sql: &str) -> Vec<u64> {
    let view = v.view().unwrap();
    beton_query::select_indices(&view.table().unwrap(), sql).unwrap().as_slice().to_vec()
}

fn scalar(v: &VersionedDataset, sql: &str) -> String {
    let view = v.view().unwrap();
    let batch = beton_query::query(&view.table().unwrap(), sql).unwrap();
    let column = batch.column(0);
    if column.is_null(0) {
        return "NULL".into();
    }
    arrow_cast::display::array_value_to_string(column, 0).unwrap()
}

#[test]
fn appended_rows_without_a_field_are_null_in_the_table_and_sql() {
    let (_tmp, v) = grown();
    let view = v.view().unwrap();
    let table = view.table().unwrap();
    let score = table.column("score").unwrap();
    assert_eq!(score.len(), 10);
    assert_eq!(score.null_count(), 4);
    let score = score.as_primitive::<Float64Type>();
    assert_eq!((0..6).map(|i| score.value(i)).collect::<Vec<_>>(), [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
    assert!((6..10).all(|i| score.is_null(i)));
    let label = table.column("label").unwrap();
    assert_eq!(label.null_count(), 0);
    assert_eq!(label.as_primitive::<Int64Type>().value(6), 100);
    // The array field's derived columns are NULL too.
    assert_eq!(table.null_rows("vec"), [6, 7, 8, 9]);
    assert_eq!(table.null_rows("score"), [6, 7, 8, 9]);
    assert!(table.null_rows("label").is_empty());

    // SQL: IS NULL, count(col), aggregates skipping NULLs, three-valued comparisons.
    assert_eq!(ids(&v, "score IS NULL"), [6, 7, 8, 9]);
    assert_eq!(ids(&v, "score IS NOT NULL"), [0, 1, 2, 3, 4, 5]);
    assert_eq!(ids(&v, "score < 100"), [0, 1, 2, 3, 4, 5]);
    assert_eq!(ids(&v, "NOT (score < 100)"), Vec::<u64>::new());
    assert_eq!(ids(&v, "score <> label"), [1, 2, 3, 4, 5]); // not the NULL rows: unknown
    assert_eq!(scalar(&v, "SELECT count(score) FROM samples"), "6");
    assert_eq!(scalar(&v, "SELECT count(*) FROM samples"), "10");
    assert_eq!(scalar(&v, "SELECT avg(score) FROM samples"), "1.25");
    assert_eq!(scalar(&v, "SELECT max(score) FROM samples WHERE label >= 100"), "NULL");

    // Values: None for a NULL.
    let ty = FieldType::Float;
    assert_eq!(table.value(5, "score", &ty).unwrap(), Some(beton_storage::Value::Float(2.5)));
    assert_eq!(table.value(6, "score", &ty).unwrap(), None);
    // take gives Arrow nulls.
    let taken = beton_query::take(&table, &[5, 6], Some(&["score".to_string(), "vec".to_string()])).unwrap();
    assert_eq!((taken.column(0).null_count(), taken.column(1).null_count()), (1, 1));
    assert!(taken.column(0).is_null(1) && taken.column(1).is_null(1));
}

#[test]
fn compaction_and_concatenation_keep_nulls() {
    let (tmp, v) = grown();
    let compacted = v.compact(&ExportOptions::with_threads(2), "compact").unwrap();
    assert_eq!(compacted.manifest().fragments.len(), 1);
    assert_eq!(ids(&compacted, "score IS NULL"), [6, 7, 8, 9]);
    assert_eq!(ids(&compacted, "vec IS NULL"), [6, 7, 8, 9]);
    assert_eq!(scalar(&compacted, "SELECT sum(score) FROM samples"), "7.5");
    let diff = beton_query::versioned::diff(&v, &compacted).unwrap();
    assert!(diff.changed.is_empty() && diff.added.is_empty(), "{diff:?}");

    let joined = tmp.path().join("joined");
    let both = VersionedDataset::concat(
        &joined,
        &[v.dir().to_path_buf(), tmp.path().join("a.beton")],
        "joined",
        &ExportOptions::with_threads(1),
    )
    .unwrap();
    assert_eq!(both.num_rows(), 16);
    // The dataset's NULLs stay NULL; the plain file lacks score and vec: NULL too.
    assert_eq!(ids(&both, "score IS NULL"), [6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    assert_eq!(scalar(&both, "SELECT count(score) FROM samples"), "6");
    let again = VersionedDataset::open(&joined, VersionRef::Latest).unwrap();
    assert_eq!(ids(&again, "vec IS NULL"), [6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
}

#[test]
fn an_export_writes_fillers_and_says_where() {
    let (tmp, v) = grown();
    let out = tmp.path().join("out.beton");
    let copied = v.export(&out, None, &ExportOptions::with_threads(2)).unwrap();
    assert_eq!(copied.report.num_samples, 10);
    let filled: Vec<(&str, &str, &[u64])> =
        copied.filled.iter().map(|f| (f.field.as_str(), f.with, f.rows.as_slice())).collect();
    assert_eq!(filled, [("score", "NaN", &[6u64, 7, 8, 9][..]), ("vec", "zeros", &[6, 7, 8, 9][..])]);
    let ds = Dataset::open(&out).unwrap();
    assert!(ds.get_by_name(7, "score").unwrap().as_float().unwrap().is_nan());
    assert_eq!(ds.get_by_name(2, "score").unwrap().as_float(), Some(1.0));
    // Rows with no NULL: nothing filled.
    let some = beton_query::IndexSet::from_sorted(vec![0, 1, 2]).unwrap();
    let copied =
        v.export(&tmp.path().join("some.beton"), Some(&some), &ExportOptions::with_threads(1)).unwrap();
    assert!(copied.filled.is_empty());
}

#[test]
fn a_file_lacking_an_image_or_array_field_appends_as_null() {
    // Before: refused ("no missing value to fill in"). Now NULL, as any other type.
    let (tmp, v) = grown();
    assert_eq!(v.num_rows(), 10);
    assert_eq!(ids(&v, "vec IS NULL").len(), 4);
    let c = tmp.path().join("c.beton");
    write_labels(&c, 200, 2);
    let v = v.append_file(&c, "again").unwrap();
    assert_eq!(ids(&v, "score IS NULL"), [6, 7, 8, 9, 10, 11]);
}
