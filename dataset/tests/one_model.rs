//! One dataset model: a `.beton` file opened as a dataset ([`VersionView::of_file`]) reads the
//! same as the file itself and as the version a dataset directory imports it as — values,
//! table, splits and class names — and has no version to edit.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, Int64Array};
use beton_dataset::versioned::{VersionView, VersionedDataset};
use beton_dataset::{splits, IndexSet, Table};
use beton_storage::{Dataset, FieldType, SampleValue, Value};

fn write(path: &Path, n: u64) {
    beton_testkit::write(path, beton_testkit::schema("label:int blob:bytes caption:text"), n, |i| {
        let blob = SampleValue::Bytes(vec![i as u8; 1 + i as usize % 5]);
        vec![SampleValue::Int(i as i64 * 3 - 7), blob, SampleValue::Text(format!("row {i}"))]
    });
}

fn labels(table: &Table<'_>) -> Vec<i64> {
    let column = table.column("label").unwrap();
    column.as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec()
}

#[test]
fn a_file_is_a_read_only_dataset_of_one_fragment_at_version_0() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a.beton");
    write(&file, 40);
    let train = IndexSet::from_sorted(vec![1, 5, 39]).unwrap();
    splits::save(&file, None, [("train", &train)]).unwrap();
    beton_storage::save_classes(&file, None, Some(&["cat".to_string(), "dog".to_string()])).unwrap();

    let ds = Arc::new(Dataset::open(&file).unwrap());
    let view = VersionView::of_file(Arc::clone(&ds));
    assert!(view.is_file() && view.version().is_none(), "no version to edit");
    assert_eq!((view.number(), view.num_rows(), view.data_file_rows()), (0, 40, vec![40]));
    let schema: Vec<String> = view.schema().unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(schema, ["label", "blob", "caption"]);
    assert_eq!(view.classes().unwrap(), Some(vec!["cat".to_string(), "dog".to_string()]));
    assert_eq!(view.splits().unwrap().get("train"), Some(&train));

    // The file's own table: the same columns (no row_id) and values as Table::new.
    let own = Table::new(&ds);
    let table = view.table().unwrap();
    assert_eq!(table.column_names(), own.column_names());
    assert_eq!(labels(&table), labels(&own));
    assert_eq!(table.split("train").unwrap().as_ref(), &train);
    for i in [0u64, 17, 39] {
        for (name, ty) in view.schema().unwrap() {
            let k = ds.field_index(&name).unwrap();
            let direct = ds.get(i, k).unwrap();
            assert_eq!(table.value(i, &name, &ty).unwrap(), Some(direct), "row {i}, field {name}");
        }
    }
    // One part for the loader: every row of the file, no column files.
    let parts = view.parts().unwrap();
    assert_eq!(parts.len(), 1);
    assert!(parts[0].1.is_none() && parts[0].2.is_empty() && parts[0].3.is_empty());

    // The version a directory imports the file as reads the same.
    let version = VersionedDataset::import(&tmp.path().join("ds"), &file).unwrap().view().unwrap();
    assert!(!version.is_file());
    assert_eq!(version.number(), 1);
    assert_eq!(labels(&version.table().unwrap()), labels(&table));
    assert_eq!(version.splits().unwrap(), view.splits().unwrap());
    assert_eq!(version.classes().unwrap(), view.classes().unwrap());
    let (v, f) = (version.table().unwrap(), view.table().unwrap());
    for (name, ty) in view.schema().unwrap() {
        assert_eq!(v.value(21, &name, &ty).unwrap(), f.value(21, &name, &ty).unwrap(), "field {name}");
    }
    assert!(matches!(f.value(3, "label", &FieldType::Int).unwrap(), Some(Value::Int(2))));
}
