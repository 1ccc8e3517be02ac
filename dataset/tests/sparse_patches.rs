//! Patches stay as written: updating a few rows of a large data file keeps their values, and
//! reading one row (`ds[i]`), a query of other fields, or one of the field itself (its copy's
//! values with the patched cells written over them) never makes the patched column whole. Kept
//! rows after a deletion are never listed to read a column.

use arrow_array::{Array, Int64Array, StringArray};
use beton_dataset::versioned::VersionedDataset;
use beton_dataset::IndexSet;
use beton_storage::{FieldType, SampleValue, Value};
use std::sync::Arc;

#[test]
fn a_patched_field_is_made_whole_only_when_a_reader_needs_the_column() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a.beton");
    let n = 1000u64;
    beton_testkit::write(&file, beton_testkit::schema("label:int score:float caption:text"), n, |i| {
        vec![SampleValue::Int(i as i64), SampleValue::Float(i as f64), SampleValue::Text(format!("row {i}"))]
    });
    let v1 = VersionedDataset::import(&tmp.path().join("ds"), &file).unwrap();
    let rows = |r: &[u64]| IndexSet::from_sorted(r.to_vec()).unwrap();
    let ints = |v: &[i64]| -> Arc<dyn Array> { Arc::new(Int64Array::from(v.to_vec())) };
    let v2 =
        v1.update_rows(&rows(&[5, 500, 999]), vec![("label".into(), ints(&[-5, -500, -999]))], "").unwrap();
    let text: Arc<dyn Array> = Arc::new(StringArray::from(vec!["three"]));
    let v3 = v2.update_rows(&rows(&[3]), vec![("caption".into(), text)], "").unwrap();
    // A patch over the patch: row 5 again, and row 7.
    let v4 = v3.update_rows(&rows(&[5, 7]), vec![("label".into(), ints(&[55, 77]))], "").unwrap();
    // Deleting a row after them shifts indices: row 7 of the file is index 6 after deleting 0.
    let v5 = v4.delete(&rows(&[0]), None, "").unwrap();

    let view = v5.view().unwrap();
    let label_made = || view.parts().unwrap()[0].2["label"].is_made();
    let label = |i: u64| match view.value(i, "label", &FieldType::Int).unwrap() {
        Some(Value::Int(x)) => x,
        other => panic!("row {i}: {other:?}"),
    };
    // Index i is file row i + 1.
    assert_eq!((label(4), label(6), label(499), label(998), label(5)), (55, 77, -500, -999, 6));
    assert!(!label_made(), "reading single rows made the whole column");
    let table = view.table().unwrap();
    // The fused WHERE reads both in place from the one data file's copy: the patched field
    // with its patched rows, the other as it is.
    let (label_parts, score_parts) =
        (table.column_parts("label").unwrap(), table.column_parts("score").unwrap());
    assert_eq!((label_parts[0].patched.len(), score_parts[0].patched.len()), (4, 0));
    assert!(label_parts[0].kept.is_some() && score_parts[0].values.len() == n as usize);
    let captions = table.column("caption").unwrap();
    let captions = captions.as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!((captions.value(2), captions.value(3)), ("three", "row 4"));
    assert_eq!(table.value(2, "label", &FieldType::Int).unwrap(), Some(Value::Int(3)));
    assert!(!label_made(), "a query of another field made the patched one");

    let labels = table.column("label").unwrap();
    let labels = labels.as_any().downcast_ref::<Int64Array>().unwrap();
    let mut want: Vec<i64> = (1..n as i64).collect();
    for (row, value) in [(5, 55), (7, 77), (500, -500), (999, -999)] {
        want[row - 1] = value;
    }
    assert_eq!(labels.values().to_vec(), want);
    // Made from the copy's kept values with the patched cells written over them: the patched
    // column itself is never made whole.
    assert!(!label_made());
    // The deletion is held as the deleted row: no list of the 999 kept ones was made.
    assert!(!view.parts().unwrap()[0].1.as_ref().unwrap().is_listed());
}

#[test]
fn a_view_after_an_edit_shares_the_data_files_the_last_one_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a.beton"), tmp.path().join("b.beton"));
    for (path, first) in [(&a, 0i64), (&b, 100)] {
        beton_testkit::write(path, beton_testkit::schema("label:int caption:text"), 50, |i| {
            vec![SampleValue::Int(first + i as i64), SampleValue::Text(format!("row {i}"))]
        });
    }
    let v1 = VersionedDataset::import(&tmp.path().join("ds"), &a).unwrap();
    let before = v1.view().unwrap();
    let old = Arc::clone(before.dataset(0).unwrap());
    let v2 = v1.append_file(&b, "").unwrap();
    let ints: Arc<dyn Array> = Arc::new(Int64Array::from(vec![-1]));
    let v3 =
        v2.update_rows(&IndexSet::from_sorted(vec![60]).unwrap(), vec![("label".into(), ints)], "").unwrap();
    let after = v3.view_after(&before).unwrap();
    assert!(Arc::ptr_eq(after.dataset(0).unwrap(), &old), "the shared data file is not opened again");
    assert!(!Arc::ptr_eq(after.dataset(1).unwrap(), &old));
    // And it reads the new version: the appended rows, the update.
    let labels = after.table().unwrap().column("label").unwrap();
    let labels = labels.as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!((labels.len(), labels.value(49), labels.value(50), labels.value(60)), (100, 49, 100, -1));
    // A view of another directory shares nothing.
    let other = VersionedDataset::import(&tmp.path().join("other"), &a).unwrap();
    let unrelated = other.view_after(&before).unwrap();
    assert!(!Arc::ptr_eq(unrelated.dataset(0).unwrap(), &old));
}
