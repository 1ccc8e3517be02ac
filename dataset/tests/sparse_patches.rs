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

/// Every column of a view's table (`index`, `row_id` and the fields), as text.
fn table_text(view: &beton_dataset::versioned::VersionView) -> Vec<String> {
    let table = view.table().unwrap();
    let names = table.column_names();
    names.iter().map(|n| format!("{n}: {:?}", table.column(n).unwrap())).collect()
}

#[test]
fn a_view_after_any_edit_reads_what_a_view_opened_afresh_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<_> = (0..4).map(|k| tmp.path().join(format!("{k}.beton"))).collect();
    for (k, path) in files.iter().enumerate() {
        beton_testkit::write(path, beton_testkit::schema("label:int caption:text"), 20, |i| {
            vec![SampleValue::Int((100 * k + i as usize) as i64), SampleValue::Text(format!("{k}/{i}"))]
        });
    }
    let rows = |r: &[u64]| IndexSet::from_sorted(r.to_vec()).unwrap();
    let ints = |v: &[i64]| -> Arc<dyn Array> { Arc::new(Int64Array::from(v.to_vec())) };
    let v1 = VersionedDataset::import(&tmp.path().join("ds"), &files[0]).unwrap();
    let mut version = v1.clone();
    let mut view = version.view().unwrap();
    // Each edit below changes the fragments in another way: appended, changed in place
    // (deletions, patches, column files), all of them (a new column), moved or removed (a
    // restore, a compaction).
    type Edit<'a> = Box<dyn Fn(&VersionedDataset) -> VersionedDataset + 'a>;
    let edits: Vec<(&str, Edit)> = vec![
        ("append", Box::new(|v| v.append_files(&files[1..3], "").unwrap())),
        ("delete in the first", Box::new(move |v| v.delete(&rows(&[0, 3]), None, "").unwrap())),
        (
            "update the second",
            Box::new(move |v| {
                v.update_rows(&rows(&[20, 21]), vec![("label".into(), ints(&[-1, -2]))], "").unwrap()
            }),
        ),
        (
            "add a column",
            Box::new(move |v| {
                v.add_column(
                    "extra",
                    &FieldType::Int,
                    &ints(&(0..v.num_rows() as i64).collect::<Vec<_>>()),
                    "",
                )
                .unwrap()
            }),
        ),
        ("drop it", Box::new(|v| v.drop_column("extra", "").unwrap())),
        (
            "delete a whole file's rows",
            Box::new(move |v| v.delete(&rows(&(18..38).collect::<Vec<_>>()), None, "").unwrap()),
        ),
        ("restore version 2", Box::new(|v| v.restore(2).unwrap())),
        ("append again", Box::new(|v| v.append_file(&files[3], "").unwrap())),
        (
            "compact",
            Box::new(|v| v.compact(&beton_dataset::versioned::ExportOptions::with_threads(1), "").unwrap()),
        ),
        ("append after the compaction", Box::new(|v| v.append_file(&files[1], "").unwrap())),
    ];
    for (what, edit) in edits {
        let next = edit(&version);
        // Queried before the edit, as a user's handle is: data files and copies open.
        let _ = table_text(&view);
        let after = next.view_after(&view).unwrap();
        let fresh = next.view().unwrap();
        assert_eq!(after.num_rows(), fresh.num_rows(), "{what}");
        assert_eq!(after.data_file_rows(), fresh.data_file_rows(), "{what}");
        assert_eq!(table_text(&after), table_text(&fresh), "{what}");
        (version, view) = (next, after);
    }
}
