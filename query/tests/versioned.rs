//! Dataset directories: import, versions, deletes, appends, tags, restore, and two writers
//! committing at once.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array};

use beton_query::columnar;
use beton_query::versioned::{ExportOptions, Operation, Touches, VersionRef, VersionedDataset};
use beton_query::SqlEdits;
use beton_query::{Error, IndexSet};
use beton_storage::{Dataset, FieldType, SampleValue, WriterOptions};
use beton_testkit::write_labels_and_blobs as write;

/// A temporary folder holding `a.beton`, `n` rows labelled from `first` as [`write`] makes them.
fn temp_file(first: i64, n: u64) -> (tempfile::TempDir, PathBuf) {
    beton_testkit::temp_file("a.beton", |file| write(file, first, n))
}

/// [`temp_file`] of `n` rows from 0 with split `train`, imported as dataset directory `ds` beside
/// it: the folder, the file, the directory and its first version.
fn imported(n: u64, train: Vec<u64>) -> (tempfile::TempDir, PathBuf, PathBuf, VersionedDataset) {
    let (tmp, file) = temp_file(0, n);
    let train = IndexSet::from_sorted(train).unwrap();
    beton_query::splits::save(&file, None, [("train", &train)]).unwrap();
    let dir = tmp.path().join("ds");
    let v1 = VersionedDataset::import(&dir, &file).unwrap();
    (tmp, file, dir, v1)
}

/// The labels of a version's rows, read from its data files less deletions.
fn labels(v: &VersionedDataset) -> Vec<i64> {
    let mut out = Vec::new();
    for f in &v.manifest().fragments {
        let ds = Dataset::open(v.dir().join(&f.data_file)).unwrap();
        let deleted = v.fragment_deletions(f).unwrap();
        let label = ds.field_index("label").unwrap();
        for row in 0..f.num_rows {
            if !deleted.contains(row) {
                out.push(ds.get(row, label).unwrap().as_int().unwrap());
            }
        }
    }
    out
}

#[test]
fn import_delete_append_tag_restore() {
    let (tmp, file, dir, v1) = imported(10, vec![1, 2, 3]);
    assert_eq!((v1.version(), v1.num_rows()), (1, 10));
    assert_eq!(v1.manifest().splits["train"].count, 3);
    // Hard-linked, not copied: the same inode.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let data = dir.join(&v1.manifest().fragments[0].data_file);
        assert_eq!(std::fs::metadata(&data).unwrap().ino(), std::fs::metadata(&file).unwrap().ino());
    }
    assert!(VersionedDataset::import(&dir, &file).unwrap_err().to_string().contains("dataset already"));

    let v2 =
        v1.delete(&IndexSet::from_sorted(vec![0, 5]).unwrap(), Some("label in (0, 5)"), "drop two").unwrap();
    assert_eq!(labels(&v2), vec![1, 2, 3, 4, 6, 7, 8, 9]);
    // Positions are of the version: index 0 is now label 1.
    let v3 = v2.delete(&IndexSet::from_sorted(vec![0]).unwrap(), None, "").unwrap();
    assert_eq!(labels(&v3), vec![2, 3, 4, 6, 7, 8, 9]);
    assert_eq!(v3.manifest().fragments[0].deletions.as_ref().unwrap().count, 3);

    let more = tmp.path().join("b.beton");
    write(&more, 100, 4);
    let v4 = v3.append_file(&more, "four more").unwrap();
    assert_eq!(labels(&v4), vec![2, 3, 4, 6, 7, 8, 9, 100, 101, 102, 103]);
    assert_eq!(v4.fragment_row_ids(&v4.manifest().fragments[1]).unwrap(), vec![10, 11, 12, 13]);
    assert_eq!(v4.manifest().next_row_id, 14);
    v4.tag("grown").unwrap();
    assert!(v4.tag("grown").unwrap_err().to_string().contains("already names version 4"));
    assert!(v4.tag("../x").is_err());

    // Old versions stay as they were.
    let old = VersionedDataset::open(&dir, VersionRef::Number(1)).unwrap();
    assert_eq!(labels(&old), (0..10).collect::<Vec<_>>());
    let tagged = VersionedDataset::open(&dir, VersionRef::Tag("grown".into())).unwrap();
    assert_eq!(tagged.version(), 4);
    let err = VersionedDataset::open(&dir, VersionRef::Number(99)).unwrap_err().to_string();
    assert!(err.contains("versions 1 to 4"), "{err}");

    let v5 = v4.restore(1).unwrap();
    assert_eq!((v5.version(), labels(&v5)), (5, (0..10).collect::<Vec<_>>()));
    assert_eq!(v5.manifest().next_row_id, 14, "row ids are never reused");
    let versions = v5.versions().unwrap();
    let log: Vec<&str> = versions.iter().map(|m| m.operation.name()).collect();
    assert_eq!(log, ["import", "delete", "delete", "append", "restore"]);
    let latest = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    assert_eq!(latest.version(), 5);

    // A file whose schema differs cannot be appended.
    let other = tmp.path().join("c.beton");
    beton_testkit::write(&other, beton_testkit::schema("label:float"), 1, |_| vec![SampleValue::Float(1.0)]);
    let err = latest.append_file(&other, "").unwrap_err().to_string();
    assert!(err.contains("field 'label'") && err.contains("FloatField"), "{err}");
}

#[test]
fn racing_writers_rebase_compatible_edits_and_refuse_conflicts() {
    let (tmp, file) = temp_file(0, 10);
    let dir = tmp.path().join("ds");
    VersionedDataset::import(&dir, &file).unwrap();
    // Two writers open version 1 and each deletes a row: the second rebases on the first.
    let a = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    let b = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    a.delete(&IndexSet::from_sorted(vec![1]).unwrap(), None, "").unwrap();
    let after = b.delete(&IndexSet::from_sorted(vec![8]).unwrap(), None, "").unwrap();
    assert_eq!(after.version(), 3);
    assert_eq!(labels(&after), vec![0, 2, 3, 4, 5, 6, 7, 9], "no lost update");
    // Two appends race: both land.
    let more = tmp.path().join("b.beton");
    write(&more, 100, 2);
    let c = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    let d = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    c.append_file(&more, "").unwrap();
    let both = d.append_file(&more, "").unwrap();
    assert_eq!(both.num_rows(), 12);
    let ids: Vec<u64> = both.manifest().fragments.iter().map(|f| f.id).collect();
    assert_eq!(ids, vec![0, 1, 2]);
    // A schema change against anything committed meanwhile is a conflict.
    let e = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    let f = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    e.delete(&IndexSet::from_sorted(vec![0]).unwrap(), None, "").unwrap();
    let everything = Touches { everything: true, ..Touches::default() };
    let err = f
        .commit(Operation::DropColumn { name: "blob".into() }, "", &everything, |_, new| {
            new.schema.retain(|s| s.name != "blob");
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { version: 6, .. }), "{err}");
}

#[test]
fn threads_committing_at_once_lose_nothing() {
    let (tmp, file) = temp_file(0, 64);
    let dir = tmp.path().join("ds");
    VersionedDataset::import(&dir, &file).unwrap();
    let barrier = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (dir, barrier) = (&dir, &barrier);
            s.spawn(move || {
                let v = VersionedDataset::open(dir, VersionRef::Latest).unwrap();
                barrier.wait();
                // Each thread deletes rows of its own label range, found by label (positions move).
                for k in 0..4 {
                    let v = VersionedDataset::open(dir, VersionRef::Latest).unwrap_or(v.clone());
                    let target = (t * 16 + k) as i64;
                    let pos = labels(&v).iter().position(|&l| l == target).unwrap() as u64;
                    // Another writer may commit between reading positions and committing: the
                    // delete names positions of `v`, and rebasing maps them by data-file row.
                    v.delete(&IndexSet::from_sorted(vec![pos]).unwrap(), None, "").unwrap();
                }
            });
        }
    });
    let v = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    assert_eq!(v.version(), 17);
    let expected: Vec<i64> = (0..64).filter(|l| l % 16 >= 4).collect();
    assert_eq!(labels(&v), expected);
}

/// `SELECT index, row_id, label, ... ` of a version, as rows of text.
fn rows(v: &VersionedDataset, sql: &str) -> Vec<String> {
    let view = v.view().unwrap();
    let table = view.table().unwrap();
    beton_testkit::text_rows(&beton_query::query(&table, sql).unwrap())
}

#[test]
fn one_table_over_data_files_deletions_and_column_files() {
    let (tmp, _file, dir, v1) = imported(6, vec![0, 2, 4]);
    let more = tmp.path().join("b.beton");
    write(&more, 100, 3);
    let v2 = v1.append_file(&more, "").unwrap();
    let v3 = v2.delete_where("label IN (1, 2, 101)", "").unwrap();
    assert_eq!(
        rows(&v3, "SELECT index, row_id, label FROM samples"),
        ["0,0,0", "1,3,3", "2,4,4", "3,5,5", "4,6,100", "5,8,102"]
    );
    // Two fixed-width columns gathered together over both files, deleted rows left out.
    assert_eq!(
        rows(&v3, "SELECT label, blob FROM samples WHERE label >= 0 AND blob > 0"),
        ["0,1", "3,4", "4,5", "5,6", "100,1", "102,3"]
    );
    // Splits follow row ids: row 2 is gone, 0 and 4 moved to indices 0 and 2.
    assert_eq!(rows(&v3, "SELECT index FROM samples WHERE in_split('train')"), ["0", "2"]);
    // Update with SQL expressions: column files, not the data files.
    let v4 = v3.update(Some("label >= 100"), &[("label".into(), "label - 100".into())], "").unwrap();
    assert_eq!(rows(&v4, "SELECT label FROM samples"), ["0", "3", "4", "5", "0", "2"]);
    assert_eq!(v4.manifest().fragments[1].columns.len(), 1);
    assert!(v4.manifest().fragments[0].columns.is_empty());
    // Add a column from an expression and another from values; update it; drop one.
    let v5 = v4.add_column_sql("big", "label > 3", "").unwrap();
    assert_eq!(rows(&v5, "SELECT big FROM samples"), ["false", "false", "true", "true", "false", "false"]);
    let scores: ArrayRef = Arc::new(Float64Array::from(vec![0.5, 1.5, 2.5, 3.5, 4.5, 5.5]));
    let v6 = v5.add_column("score", &FieldType::Float, &scores, "").unwrap();
    assert_eq!(rows(&v6, "SELECT index FROM samples WHERE score > 3 AND big"), ["3"]);
    let v7 = v6
        .update_rows(
            &IndexSet::from_sorted(vec![0, 5]).unwrap(),
            vec![("score".into(), Arc::new(Float64Array::from(vec![9.0])) as ArrayRef)],
            "",
        )
        .unwrap();
    assert_eq!(rows(&v7, "SELECT score FROM samples"), ["9.0", "1.5", "2.5", "3.5", "4.5", "9.0"]);
    let v8 = v7.drop_column("big", "").unwrap();
    assert!(!v8.view().unwrap().table().unwrap().column_names().contains(&"big"));
    // A column added again under a dropped name starts afresh.
    let v9 = v8.add_column_sql("big", "label * 10", "").unwrap();
    assert_eq!(rows(&v9, "SELECT big FROM samples"), ["0", "30", "40", "50", "0", "20"]);
    // Old versions read as they were.
    let old = VersionedDataset::open(&dir, VersionRef::Number(3)).unwrap();
    assert_eq!(rows(&old, "SELECT label FROM samples"), ["0", "3", "4", "5", "100", "102"]);
    // Bad edits say what is wrong.
    let err = v9.update(None, &[("blob".into(), "1".into())], "").unwrap_err().to_string();
    assert!(err.contains("the bytes field") && err.contains("Int64"), "{err}");
    let err = v9.add_column("score", &FieldType::Float, &scores, "").unwrap_err().to_string();
    assert!(err.contains("exists already"), "{err}");
    let short: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 2.0]));
    let err = v9.add_column("s2", &FieldType::Float, &short, "").unwrap_err().to_string();
    assert!(err.contains("2 values for 6 rows"), "{err}");
    let err = v9.update(Some("nope > 1"), &[("label".into(), "1".into())], "").unwrap_err().to_string();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn export_and_compact_copy_payloads_and_keep_row_ids_and_splits() {
    use beton_storage::{ImageSource, Pixels, Value};
    let (tmp, file) = beton_testkit::temp_path("a.beton");
    beton_testkit::write(&file, beton_testkit::schema("image:rgb_image label:int"), 8, |i| {
        let data: Vec<u8> = (0..32 * 24 * 3).map(|k| ((k * 7 + i as usize * 13) % 251) as u8).collect();
        vec![
            SampleValue::Image(ImageSource::Pixels(Pixels { width: 32, height: 24, channels: 3, data })),
            SampleValue::Int(i as i64),
        ]
    });
    let val = IndexSet::from_sorted(vec![1, 6, 7]).unwrap();
    beton_query::splits::save(&file, None, [("val", &val)]).unwrap();
    let original = Dataset::open(&file).unwrap();
    let jpeg = |ds: &Dataset, i: u64| match ds.get(i, ds.field_index("image").unwrap()).unwrap() {
        Value::Image(img) => img.data.to_vec(),
        other => panic!("{other:?}"),
    };
    let dir = tmp.path().join("ds");
    let v = VersionedDataset::import(&dir, &file).unwrap();
    let v = v.delete_where("label IN (0, 6)", "").unwrap();
    let v = v.update(Some("label = 7"), &[("label".into(), "70".into())], "").unwrap();

    // Export rows 1.. of the version: labels 2,3,4,5,70 and the split's surviving rows.
    let out = tmp.path().join("export.beton");
    v.export(
        &out,
        Some(&IndexSet::from_sorted(vec![1, 2, 3, 4, 5]).unwrap()),
        &ExportOptions::with_threads(2),
    )
    .unwrap();
    let ds = Dataset::open(&out).unwrap();
    let labels: Vec<i64> =
        (0..ds.num_samples()).map(|i| ds.get_by_name(i, "label").unwrap().as_int().unwrap()).collect();
    assert_eq!(labels, vec![2, 3, 4, 5, 70]);
    assert_eq!(jpeg(&ds, 0), jpeg(&original, 2), "JPEG bytes copied verbatim");
    assert_eq!(beton_query::splits::all(&ds).unwrap()["val"].as_slice(), &[4]);

    // Compact: one data file, same rows, row ids and splits.
    let before = rows(&v, "SELECT index, row_id, label FROM samples");
    let c = v.compact(&ExportOptions::with_threads(1), "fold").unwrap();
    assert_eq!(c.manifest().fragments.len(), 1);
    assert!(c.manifest().fragments[0].deletions.is_none() && c.manifest().fragments[0].columns.is_empty());
    assert_eq!(rows(&c, "SELECT index, row_id, label FROM samples"), before);
    assert_eq!(rows(&c, "SELECT label FROM samples WHERE in_split('val')"), ["1", "70"]);
    let compacted = Dataset::open(dir.join(&c.manifest().fragments[0].data_file)).unwrap();
    assert_eq!(jpeg(&compacted, 0), jpeg(&original, 1));

    // Cleanup keeping the newest version removes exactly what it no longer needs.
    let report = c.cleanup(1, std::time::Duration::ZERO).unwrap();
    assert_eq!(report.versions, vec![1, 2, 3]);
    assert!(report.files.iter().any(|f| f.starts_with("data/")), "{report:?}");
    assert!(report.files.iter().any(|f| f.starts_with("columns/")), "{report:?}");
    let kept = VersionedDataset::open(&dir, VersionRef::Latest).unwrap();
    assert_eq!(rows(&kept, "SELECT index, row_id, label FROM samples"), before);
    for file in kept.manifest().files() {
        assert!(dir.join(file).is_file(), "{file} kept");
    }
    assert!(VersionedDataset::open(&dir, VersionRef::Number(1)).is_err());
    // The original file, hard-linked into the dataset, is untouched by all of it.
    assert_eq!(Dataset::open(&file).unwrap().num_samples(), 8);
}

#[test]
fn diff_names_rows_and_cells() {
    let (tmp, file) = temp_file(0, 6);
    let dir = tmp.path().join("ds");
    let v1 = VersionedDataset::import(&dir, &file).unwrap();
    let v2 = v1.delete_where("label = 1", "").unwrap();
    let v3 = v2.update(Some("label >= 4"), &[("label".into(), "label * 10".into())], "").unwrap();
    let more = tmp.path().join("b.beton");
    write(&more, 100, 2);
    let v4 = v3.append_file(&more, "").unwrap().add_column_sql("big", "label > 10", "").unwrap();
    let d = beton_query::versioned::diff(&v1, &v4).unwrap();
    assert_eq!((d.from, d.to), (1, 5));
    assert_eq!(d.added, vec![6, 7]);
    assert_eq!(d.deleted, vec![1]);
    assert_eq!(d.added_columns, vec!["big".to_string()]);
    assert_eq!(d.changed.get("label"), Some(&vec![4, 5]));
    assert_eq!(d.changed.len(), 1, "{:?}", d.changed);
    let none = beton_query::versioned::diff(&v4, &v4).unwrap();
    assert!(none.added.is_empty() && none.deleted.is_empty() && none.changed.is_empty());
}

/// Every field type can be replaced row by row and added as a column: images, bytes, JSON and
/// arrays go to column files (the data files untouched), and the table, `Table::value`, diff,
/// export and compaction all see the edited values.
#[test]
fn every_field_type_is_editable_and_addable() {
    use beton_query::versioned::values::ValuesBuilder;
    use beton_storage::{ArraySpec, DType, ImageOptions, Value};
    use beton_testkit::image;
    let raw = ImageOptions::with_mode(beton_storage::WriteMode::Raw);
    let spec = ArraySpec { dtype: DType::parse("<f4").unwrap(), shape: vec![2] };
    let (tmp, file) = beton_testkit::temp_path("a.beton");
    let fields = beton_testkit::schema("label:int blob:bytes meta:json vec:ndarray:<f4:2 img:raw");
    beton_testkit::write(&file, fields, 10, |i| {
        vec![
            SampleValue::Int(i as i64),
            SampleValue::Bytes(vec![i as u8; 3]),
            SampleValue::Json(format!("{{\"i\": {i}}}")),
            SampleValue::Bytes([i as f32, 1.0].iter().flat_map(|f| f.to_le_bytes()).collect()),
            image(4, 3, i as u8 + 1),
        ]
    });
    let data_before = std::fs::read(&file).unwrap();
    let dir = tmp.path().join("ds");
    let v1 = VersionedDataset::import(&dir, &file).unwrap();
    let column = |ty: &FieldType, values: Vec<SampleValue>| {
        let mut b = ValuesBuilder::new(ty);
        for v in values {
            b.encode(v, &raw, 0.0).unwrap();
        }
        b.finish()
    };
    // Replace rows 2 and 7 of every heavy field; the new image of row 7 has the old size, so
    // only the value-by-value diff can see it.
    let picked = IndexSet::from_sorted(vec![2, 7]).unwrap();
    let v2 = v1
        .update_rows(
            &picked,
            vec![
                ("blob".into(), column(&FieldType::Bytes, vec![SampleValue::Bytes(vec![9; 5]); 2])),
                (
                    "meta".into(),
                    column(
                        &FieldType::Json,
                        vec![SampleValue::Json("[1]".into()), SampleValue::Json("{}".into())],
                    ),
                ),
                (
                    "vec".into(),
                    column(&FieldType::NDArray(spec.clone()), vec![SampleValue::Bytes(vec![0; 8]); 2]),
                ),
                ("img".into(), column(&FieldType::RgbImage, vec![image(6, 5, 3), image(4, 3, 200)])),
            ],
            "fix",
        )
        .unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), data_before, "the data file is never rewritten");
    assert_eq!(
        rows(
            &v2,
            "SELECT index, blob, meta, \"img.width\", \"img.height\" FROM samples WHERE index IN (1, 2, 7)"
        ),
        ["1,3,9,4,3", "2,5,4,6,5", "7,5,3,4,3"]
    );
    // A wrong value is refused, naming it.
    let wrong = column(&FieldType::Bytes, vec![SampleValue::Bytes(vec![1; 3])]);
    let err = v2.update_rows(&picked, vec![("vec".into(), wrong)], "").unwrap_err().to_string();
    assert!(err.contains("'vec'") && err.contains("value 0"), "{err}");

    // Add an image column and a variable-length array column.
    let thumbs = column(&FieldType::RgbImage, (0..10).map(|i| image(2, 2, i as u8 + 7)).collect());
    let v3 = v2.add_column("thumb", &FieldType::RgbImage, &thumbs, "thumbs").unwrap();
    let arr_ty = FieldType::Array(DType::parse("<i2").unwrap());
    let arrs = column(&arr_ty, (0..10).map(|i| SampleValue::Bytes(vec![1; 2 * (i % 3)])).collect());
    let v4 = v3
        .delete_where("label = 0", "")
        .unwrap()
        .add_column(
            "arr",
            &arr_ty,
            &{
                // One value per row of the version (9 after the delete).
                arrow_select::take::take(
                    arrs.as_ref(),
                    &arrow_array::UInt64Array::from((1..10).collect::<Vec<u64>>()),
                    None,
                )
                .unwrap()
            },
            "arrays",
        )
        .unwrap();
    assert_eq!(
        rows(&v4, "SELECT label, \"thumb.width\", arr FROM samples WHERE index < 3"),
        ["1,2,1", "2,2,2", "3,2,0"]
    );

    // Values: column-file cells where edited, the data file's elsewhere.
    let view = v4.view().unwrap();
    let table = view.table().unwrap();
    let (blob_ty, img_ty) = (FieldType::Bytes, FieldType::RgbImage);
    assert_eq!(table.value(1, "blob", &blob_ty).unwrap(), Some(Value::Bytes(&[9; 5]))); // label 2
    assert_eq!(table.value(2, "blob", &blob_ty).unwrap(), Some(Value::Bytes(&[3; 3]))); // label 3
    match table.value(1, "img", &img_ty).unwrap().unwrap() {
        Value::Image(img) => assert_eq!((img.width, img.height), (6, 5)),
        other => panic!("{other:?}"),
    }
    match table.value(0, "thumb", &img_ty).unwrap().unwrap() {
        Value::Image(img) => assert_eq!((img.width, img.height, img.data.len()), (2, 2, 12)),
        other => panic!("{other:?}"),
    }

    // The diff sees the replaced image of row 7 though its size did not change.
    let d = beton_query::versioned::diff(&v1, &v2).unwrap();
    assert_eq!(d.changed["img"], vec![2, 7], "{d:?}");
    assert_eq!(d.changed["img.width"], vec![2]);
    assert_eq!(d.changed["meta"], vec![2, 7]);

    // Export and compaction write every edited value into an FFCV data file.
    let expected: Vec<Vec<String>> = (0..table.num_rows())
        .map(|r| {
            view.schema()
                .unwrap()
                .iter()
                .map(|(n, t)| format!("{:?}", table.value(r, n, t).unwrap().expect("no NULL here")))
                .collect()
        })
        .collect();
    let out = tmp.path().join("export.beton");
    v4.export(&out, None, &ExportOptions::with_threads(2)).unwrap();
    let c = v4.compact(&ExportOptions::with_threads(1), "fold").unwrap();
    let compacted = dir.join(&c.manifest().fragments[0].data_file);
    for path in [out, compacted] {
        let ds = Dataset::open(&path).unwrap();
        let got: Vec<Vec<String>> = (0..ds.num_samples())
            .map(|r| {
                view.schema()
                    .unwrap()
                    .iter()
                    .map(|(n, _)| format!("{:?}", ds.get_by_name(r, n).unwrap()))
                    .collect()
            })
            .collect();
        assert_eq!(got, expected, "{}", path.display());
    }
}

#[test]
fn classes_live_beside_splits_and_follow_every_version() {
    let (tmp, file) = temp_file(0, 10);
    let classes = vec!["cat".to_string(), "dög \"x\"".to_string()];
    let val = IndexSet::from_sorted(vec![2, 3]).unwrap();
    beton_query::splits::save(&file, None, [("val", &val)]).unwrap();
    beton_storage::save_classes(&file, None, Some(&classes)).unwrap();
    let ds = Dataset::open(&file).unwrap();
    assert_eq!(ds.classes().unwrap().as_deref(), Some(&classes[..]));
    // Not a split, and saving or removing splits keeps it.
    assert_eq!(beton_query::splits::names(&ds).unwrap(), ["val"]);
    beton_query::splits::remove(&file, None, ["val"]).unwrap();
    assert_eq!(Dataset::open(&file).unwrap().classes().unwrap().as_deref(), Some(&classes[..]));
    let e = beton_query::splits::save(&file, None, [(":classes", &val)]).unwrap_err();
    assert!(e.to_string().contains("reserved"), "{e}");

    let dir = tmp.path().join("ds");
    let v = VersionedDataset::import(&dir, &file).unwrap();
    assert_eq!(v.manifest().classes.as_deref(), Some(&classes[..]));
    let v = v.append_file(&file, "").unwrap().delete_where("label = 3", "").unwrap();
    let v = v.compact(&ExportOptions::with_threads(1), "").unwrap();
    assert_eq!(v.manifest().classes.as_deref(), Some(&classes[..]));
    let out = tmp.path().join("out.beton");
    v.export(&out, None, &ExportOptions::with_threads(1)).unwrap();
    assert_eq!(Dataset::open(&out).unwrap().classes().unwrap().as_deref(), Some(&classes[..]));

    // A dataset without class names takes an appended file's.
    let plain = tmp.path().join("plain.beton");
    write(&plain, 0, 3);
    assert_eq!(Dataset::open(&plain).unwrap().classes().unwrap(), None);
    let d2 = VersionedDataset::import(&tmp.path().join("d2"), &plain).unwrap();
    assert_eq!(d2.manifest().classes, None);
    assert_eq!(d2.append_file(&file, "").unwrap().manifest().classes.as_deref(), Some(&classes[..]));
}

#[test]
fn copy_rows_copies_stored_values_in_any_order() {
    let (tmp, file) = temp_file(100, 20);
    let ds = Dataset::open(&file).unwrap();
    let table = beton_query::Table::new(&ds);
    let fields = vec![("blob".to_string(), FieldType::Bytes), ("label".to_string(), FieldType::Int)];
    let out = tmp.path().join("copy.beton");
    let rows = [7, 3, 3, 19];
    let copy = beton_query::copy::Copy { fields: &fields, rows: Some(&rows), classes: None };
    let copied = beton_query::copy::copy_rows(&table, &out, copy, WriterOptions::default()).unwrap();
    assert_eq!((copied.report.num_samples, copied.filled.len()), (4, 0));
    let copied = Dataset::open(&out).unwrap();
    assert_eq!(copied.fields().iter().map(|f| f.name()).collect::<Vec<_>>(), ["blob", "label"]);
    for (k, &r) in rows.iter().enumerate() {
        assert_eq!(copied.get_by_name(k as u64, "label").unwrap(), ds.get_by_name(r, "label").unwrap());
        assert_eq!(copied.get_by_name(k as u64, "blob").unwrap(), ds.get_by_name(r, "blob").unwrap());
    }
    let past = [20];
    let copy = beton_query::copy::Copy { fields: &fields, rows: Some(&past), classes: None };
    let e = beton_query::copy::copy_rows(&table, &tmp.path().join("x.beton"), copy, WriterOptions::default());
    assert!(e.unwrap_err().to_string().contains("row 20 is past the end"));
}

#[test]
fn explain_counts_rows_and_reads_per_data_file() {
    let (tmp, file) = temp_file(0, 10);
    let file_view =
        beton_query::versioned::VersionView::of_file(std::sync::Arc::new(Dataset::open(&file).unwrap()));
    let e = beton_query::explain::explain(&file_view, "label < 4").unwrap();
    assert_eq!((e.rows_matched, e.num_rows, e.columns.clone()), (4, 10, vec!["label".to_string()]));
    assert_eq!((e.matched.allocations, e.total.allocations), (4, 10));
    assert!(e.to_string().contains("rows matched:  4 of 10 (40.0%)"), "{e}");
    let v = VersionedDataset::import(&tmp.path().join("ds"), &file).unwrap().append_file(&file, "").unwrap();
    let e = beton_query::explain::explain(&v.view().unwrap(), "label < 4").unwrap();
    assert_eq!(e.rows_matched, 8);
    assert_eq!(e.data_files.iter().map(|f| f.rows_matched).collect::<Vec<_>>(), [4, 4]);
    assert_eq!(e.matched.allocations, 8);
    assert!(e.to_string().contains("data file 1"), "{e}");
}

/// Every progress report seen: (done, total).
type Reports = Arc<std::sync::Mutex<Vec<(u64, Option<u64>)>>>;

/// Export options whose progress records every report in `seen` and cancels once `done`
/// reaches `cancel_at`.
fn recording(seen: &Reports, cancel_at: u64) -> ExportOptions {
    let seen = Arc::clone(seen);
    ExportOptions {
        num_threads: 1,
        progress: Some(Arc::new(move |p: beton_storage::Progress| {
            seen.lock().unwrap().push((p.done, p.total));
            p.done < cancel_at
        })),
    }
}

#[test]
fn export_and_compact_progress_end_at_the_row_count() {
    let (tmp, _, _, v) = imported(1000, vec![1]);
    let v = v.delete(&IndexSet::from_sorted(vec![3, 4]).unwrap(), None, "").unwrap();
    for what in ["export", "compact"] {
        let seen = Reports::default();
        let options = recording(&seen, u64::MAX);
        let rows = match what {
            "export" => v.export(&tmp.path().join("out.beton"), None, &options).unwrap().report.num_samples,
            _ => v.compact(&options, "").unwrap().num_rows(),
        };
        assert_eq!(rows, 998);
        let seen = seen.lock().unwrap().clone();
        assert!(seen.len() > 1, "{what}: a report per chunk: {seen:?}");
        assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{what}: monotone: {seen:?}");
        assert!(seen.iter().all(|&(_, total)| total == Some(998)), "{what}: {seen:?}");
        assert_eq!(seen.last().unwrap().0, 998, "{what}: {seen:?}");
    }
}

#[test]
fn a_cancelled_export_leaves_no_file_and_a_cancelled_compact_commits_nothing() {
    let (tmp, _, dir, v) = imported(1000, vec![1]);
    let v = v.delete(&IndexSet::from_sorted(vec![3]).unwrap(), None, "").unwrap();
    let out = tmp.path().join("out.beton");
    let seen = Reports::default();
    let err = v.export(&out, None, &recording(&seen, 256)).unwrap_err();
    assert!(matches!(err, Error::Storage(beton_storage::Error::Cancelled { .. })), "{err}");
    assert!(!out.exists(), "nothing at the destination");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2, "no temporary file left beside it");

    let data_files = || std::fs::read_dir(dir.join("data")).unwrap().count();
    let before = data_files();
    let err = v.compact(&recording(&seen, 256), "").unwrap_err();
    assert!(matches!(err, Error::Storage(beton_storage::Error::Cancelled { .. })), "{err}");
    assert_eq!(VersionedDataset::open(&dir, VersionRef::Latest).unwrap().version(), v.version());
    assert_eq!(data_files(), before, "no data file added");
}

#[test]
fn concat_progress_counts_the_rows_of_every_source() {
    let (tmp, _, dir, _) = imported(300, vec![1]);
    let other = tmp.path().join("b.beton");
    write(&other, 1000, 200);
    let seen = Reports::default();
    let out = tmp.path().join("both");
    let v = VersionedDataset::concat(&out, &[dir, other], "", &recording(&seen, u64::MAX)).unwrap();
    assert_eq!(v.num_rows(), 500);
    // One commit, whatever the number of sources (issue 39): version 1, and nothing else.
    assert_eq!(v.versions().unwrap().iter().map(|m| m.version).collect::<Vec<_>>(), [1]);
    let seen = seen.lock().unwrap().clone();
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "monotone: {seen:?}");
    assert!(seen.iter().all(|&(_, total)| total == Some(500)), "{seen:?}");
    assert!(seen.contains(&(300, Some(500))) && seen.last() == Some(&(500, Some(500))), "{seen:?}");
}

/// Files `part0.beton`.. in `dir`, file k holding `rows(k).1` rows labelled from `rows(k).0`.
fn parts(dir: &std::path::Path, n: u64, rows: impl Fn(u64) -> (i64, u64)) -> Vec<PathBuf> {
    (0..n)
        .map(|k| {
            let f = dir.join(format!("part{k}.beton"));
            let (first, count) = rows(k);
            write(&f, first, count);
            f
        })
        .collect()
}

#[test]
fn commit_files_makes_one_version_of_files_written_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let files = parts(tmp.path(), 3, |k| (100 * k as i64, 4 + k));
    let dir = tmp.path().join("ds");
    // A new dataset: version 1 holds every file, row ids one range after another.
    let v1 = VersionedDataset::commit_files(&dir, &files[..2], "two parts").unwrap();
    assert_eq!((v1.version(), v1.num_rows(), v1.manifest().fragments.len()), (1, 9, 2));
    assert_eq!(v1.manifest().operation, Operation::Create);
    assert_eq!(labels(&v1), vec![0, 1, 2, 3, 100, 101, 102, 103, 104]);
    assert_eq!(v1.fragment_row_ids(&v1.manifest().fragments[1]).unwrap(), (4..9).collect::<Vec<_>>());
    // An existing one: one more version appending them all.
    let v2 = VersionedDataset::commit_files(&dir, &files[1..], "more").unwrap();
    assert_eq!((v2.version(), v2.num_rows(), v2.manifest().fragments.len()), (2, 20, 4));
    assert_eq!(v2.manifest().operation, Operation::Append { rows: 11 });
    assert_eq!(labels(&v2)[9..], [100, 101, 102, 103, 104, 200, 201, 202, 203, 204, 205]);
    assert_eq!(v2.manifest().next_row_id, 20);

    // A file that does not fit the schema: nothing is committed, and the error names it.
    let other = tmp.path().join("other.beton");
    beton_testkit::write(&other, beton_testkit::schema("label:float"), 2, |i| {
        vec![SampleValue::Float(i as f64)]
    });
    let err = VersionedDataset::commit_files(&dir, &[files[0].clone(), other.clone()], "").unwrap_err();
    assert!(err.to_string().contains("other.beton"), "{err}");
    assert_eq!(VersionedDataset::open(&dir, VersionRef::Latest).unwrap().version(), 2);
    // Checked before anything is linked: data/ holds the four committed files only, and the
    // columnar copies the writes made (the first query reads copies like the next ones): one
    // group copy per commit of several files, each fragment naming its commit's.
    let names: Vec<String> = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.iter().filter(|n| n.ends_with(".beton")).count(), 4, "{names:?}");
    let fragments = &v2.manifest().fragments;
    for f in fragments {
        let group = f.copy.as_deref().unwrap().strip_prefix("data/").unwrap();
        assert!(group.ends_with(columnar::GROUP_SUFFIX) && names.iter().any(|n| n == group), "{names:?}");
    }
    assert_eq!(fragments[0].copy, fragments[1].copy, "version 1's two files");
    assert_eq!(fragments[2].copy, fragments[3].copy, "version 2's two files");
    assert_ne!(fragments[0].copy, fragments[2].copy);
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(VersionedDataset::commit_files(&dir, &[], "").unwrap_err().to_string().contains("no data files"));
}

/// `v` with row 3's label set to -3 (from a column file).
fn label_3_set_to_minus_3(v: &VersionedDataset) -> VersionedDataset {
    let label = Arc::new(arrow_array::Int64Array::from(vec![-3])) as ArrayRef;
    v.update_rows(&IndexSet::from_sorted(vec![3]).unwrap(), vec![("label".to_string(), label)], "").unwrap()
}

#[test]
fn take_reads_field_values_of_rows_in_any_order() {
    let (_tmp, _file, _dir, v1) = imported(10, vec![]);
    // A version whose label 3 comes from a column file, and whose row 0 is deleted.
    let v2 = label_3_set_to_minus_3(&v1);
    let v3 = v2.delete(&IndexSet::from_sorted(vec![0]).unwrap(), None, "").unwrap();
    let view = v3.view().unwrap();
    let table = view.table().unwrap();
    let batch = beton_query::take(&table, &[2, 2, 0, 8], None).unwrap();
    assert_eq!(
        batch.schema().fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>(),
        ["label", "blob"]
    );
    let label = batch.column(0).as_any().downcast_ref::<arrow_array::Int64Array>().unwrap();
    // Index 2 is row 3 (row 0 deleted): its label from the column file.
    assert_eq!(label.values().to_vec(), vec![-3, -3, 1, 9]);
    let blob = batch.column(1).as_any().downcast_ref::<arrow_array::LargeBinaryArray>().unwrap();
    assert_eq!(blob.value(3), vec![9u8; 1 + 9 % 7].as_slice());
    let only = beton_query::take(&table, &[], Some(&["blob".to_string()])).unwrap();
    assert_eq!((only.num_rows(), only.num_columns()), (0, 1));
    // A take of a few rows reads each value; of a fair share, gathers the column: both see the
    // column file's value.
    let (_t, _f, _d, big) = imported(100, vec![]);
    let big = label_3_set_to_minus_3(&big);
    let big_view = big.view().unwrap();
    let big_table = big_view.table().unwrap();
    let label_of = |rows: &[u64]| {
        let b = beton_query::take(&big_table, rows, Some(&["label".to_string()])).unwrap();
        b.column(0).as_any().downcast_ref::<arrow_array::Int64Array>().unwrap().values().to_vec()
    };
    assert_eq!(label_of(&[3, 4]), vec![-3, 4]);
    assert_eq!(label_of(&(0..100).collect::<Vec<_>>())[2..5], [2, -3, 4]);
    let err = beton_query::take(&table, &[9], None).unwrap_err().to_string();
    assert!(err.contains("9 is past the end") && err.contains("9 rows"), "{err}");
    let err = beton_query::take(&table, &[0], Some(&["nope".to_string()])).unwrap_err().to_string();
    assert!(err.contains("'nope'") && err.contains("label"), "{err}");
}

#[test]
fn concat_of_many_files_is_one_version_and_nothing_when_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let files = parts(tmp.path(), 12, |k| (10 * k as i64, 3));
    let out = tmp.path().join("all");
    let v = VersionedDataset::concat(&out, &files, "twelve", &ExportOptions::default()).unwrap();
    assert_eq!(v.versions().unwrap().iter().map(|m| m.version).collect::<Vec<_>>(), [1]);
    assert_eq!((v.manifest().fragments.len(), v.manifest().message.as_str()), (12, "twelve"));
    let expected: Vec<i64> = (0..12).flat_map(|k| 10 * k..10 * k + 3).collect();
    assert_eq!(labels(&v), expected, "rows in the sources' order");
    let view = v.view().unwrap();
    let ids: Vec<u64> = view.table().unwrap().row_ids().unwrap();
    assert_eq!(ids, (0..36).collect::<Vec<u64>>(), "row ids in order, none twice");
    // Data files of 3 rows have columnar copies, made by the concat: queries read them.
    let scan = view.table().unwrap().scan_bytes(&["label"]).unwrap();
    assert_eq!(scan.columnar_columns, ["label"], "{scan:?}");
    // Into a dataset: refused, nothing written.
    let data = || std::fs::read_dir(out.join("data")).unwrap().count();
    let before = data();
    let err = VersionedDataset::concat(&out, &files, "", &ExportOptions::default()).unwrap_err().to_string();
    assert!(err.contains("is a dataset already"), "{err}");
    assert_eq!(data(), before);
    // A source whose field type differs: refused before anything is linked or committed.
    let odd = tmp.path().join("odd.beton");
    beton_testkit::write(&odd, beton_testkit::schema("label:float blob:bytes"), 2, |i| {
        vec![SampleValue::Float(i as f64), SampleValue::Bytes(vec![1])]
    });
    let fresh = tmp.path().join("fresh");
    let err = VersionedDataset::concat(&fresh, &[files[0].clone(), odd], "", &ExportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("field 'label'"), "{err}");
    assert!(!VersionedDataset::is_dataset_dir(&fresh));
    assert!(!fresh.join("data").exists() || std::fs::read_dir(fresh.join("data")).unwrap().count() == 0);
}

#[test]
fn explain_of_a_version_with_deletions_counts_the_matched_rows_own_payloads() {
    // One data file with rows deleted: table row k is not file row k. What a loader of the
    // matched rows reads must be those rows' payloads, as in a file holding just the survivors.
    let (tmp, file) = temp_file(0, 40);
    let v = VersionedDataset::import(&tmp.path().join("ds"), &file).unwrap();
    let v = v.delete(&IndexSet::from_sorted((0..9).collect()).unwrap(), None, "").unwrap();
    let sql = "label < 20";
    let e = beton_query::explain::explain(&v.view().unwrap(), sql).unwrap();
    let survivors = tmp.path().join("survivors.beton");
    v.export(&survivors, None, &ExportOptions::default()).unwrap();
    let ds = std::sync::Arc::new(Dataset::open(&survivors).unwrap());
    let reference =
        beton_query::explain::explain(&beton_query::versioned::VersionView::of_file(ds), sql).unwrap();
    assert_eq!((e.rows_matched, reference.rows_matched), (11, 11));
    assert_eq!(e.matched.bytes, reference.matched.bytes, "payload bytes of rows 9..20");
    assert_eq!(e.data_files[0].matched.bytes, reference.matched.bytes);
}

/// The bytes of the manifest file of `v`'s version.
fn manifest_bytes(v: &VersionedDataset) -> u64 {
    std::fs::metadata(v.dir().join(beton_query::versioned::commit::manifest_name(v.version()))).unwrap().len()
}

/// Bytes every file of `dir` holds.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    walk(dir).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum()
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn an_edit_writes_metadata_for_what_it_changed_not_for_the_number_of_data_files() {
    // The same edits of 40 and of 400 data files write the same bytes: their manifests hold the
    // changes (deltas), not every data file.
    let mut written = Vec::new();
    for n in [40u64, 400] {
        let tmp = tempfile::tempdir().unwrap();
        let files = parts(tmp.path(), n, |k| (10 * k as i64, 3));
        let v =
            VersionedDataset::concat(&tmp.path().join("ds"), &files, "", &ExportOptions::default()).unwrap();
        let whole = manifest_bytes(&v);
        let mut bytes = Vec::new();
        let mut at = v;
        for edit in 0..3 {
            let before = dir_bytes(at.dir());
            let next = match edit {
                0 => label_3_set_to_minus_3(&at),
                1 => at.delete(&IndexSet::from_sorted(vec![5, 6]).unwrap(), None, "").unwrap(),
                _ => {
                    let extra = tmp.path().join("extra.beton");
                    write(&extra, 1000, 2);
                    at.append_file(&extra, "").unwrap()
                }
            };
            assert_eq!(next.manifest().lineage.depth, edit + 1, "a delta");
            // The manifest and the files the edit wrote (a column, deletion or data file).
            bytes.push(dir_bytes(next.dir()) - before);
            at = next;
        }
        if n == 400 {
            assert!(manifest_bytes(&at) * 100 < whole, "{} of {whole}", manifest_bytes(&at));
        }
        // Every version reads back as it was committed, in this process and the next.
        let reopened = VersionedDataset::open(at.dir(), VersionRef::Latest).unwrap();
        assert_eq!(reopened.manifest(), at.manifest());
        assert_eq!(rows(&reopened, "SELECT label FROM samples WHERE index = 3"), ["-3"]);
        assert_eq!(reopened.num_rows(), 3 * n - 2 + 2);
        written.push(bytes);
    }
    for (small, large) in written[0].iter().zip(&written[1]) {
        // Equal but for the digits of larger ids and counts.
        assert!(small.abs_diff(*large) <= 64, "{written:?}");
    }
}

#[test]
fn cleanup_keeps_the_versions_it_keeps_readable_when_it_removes_the_bases_of_their_deltas() {
    // Enough data files for deltas smaller than the checkpoint.
    let tmp = tempfile::tempdir().unwrap();
    let files = parts(tmp.path(), 60, |k| (10 * k as i64, 3));
    let dir = tmp.path().join("ds");
    let v1 = VersionedDataset::concat(&dir, &files, "", &ExportOptions::default()).unwrap();
    let mut versions = vec![v1];
    let labels = |v: &VersionedDataset| rows(v, "SELECT label FROM samples");
    for k in 0..8u64 {
        let last = versions.last().unwrap();
        let label = Arc::new(arrow_array::Int64Array::from(vec![-(k as i64)])) as ArrayRef;
        let next =
            last.update_rows(&IndexSet::from_sorted(vec![k]).unwrap(), vec![("label".into(), label)], "");
        versions.push(next.unwrap());
    }
    let depths: Vec<u32> = versions.iter().map(|v| v.manifest().lineage.depth).collect();
    assert_eq!(
        depths,
        (0..9).collect::<Vec<u32>>(),
        "deltas: {:?}",
        versions.iter().map(manifest_bytes).collect::<Vec<_>>()
    );
    versions[4].tag("middle").unwrap();
    let expected: Vec<Vec<String>> = versions.iter().map(labels).collect();
    let report = versions[8].cleanup(2, std::time::Duration::ZERO).unwrap();
    assert_eq!(report.versions, vec![1, 2, 3, 4, 6, 7]);
    // The kept versions whose bases went got checkpoints; each reads as before, in a new
    // process (no manifest kept in memory) as here.
    let kept = [5u64, 8, 9];
    for v in kept {
        let opened = VersionedDataset::open(&dir, VersionRef::Number(v)).unwrap();
        assert_eq!(labels(&opened), expected[v as usize - 1], "version {v}");
    }
    let checkpoints: Vec<String> = std::fs::read_dir(dir.join("_checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(checkpoints.len(), 2, "{checkpoints:?}");
    // A second cleanup removes the tagged version once untagged, and its checkpoint.
    VersionedDataset::open(&dir, VersionRef::Latest).unwrap().delete_tag("middle").unwrap();
    let report = versions[8].cleanup(2, std::time::Duration::ZERO).unwrap();
    assert_eq!(report.versions, vec![5]);
    assert_eq!(std::fs::read_dir(dir.join("_checkpoints")).unwrap().count(), 1);
    assert_eq!(labels(&VersionedDataset::open(&dir, VersionRef::Number(8)).unwrap()), expected[7]);
    // A delta whose base and checkpoint are both gone is damage, named (in a copy of the
    // directory: this process keeps version 8 resolved).
    std::fs::remove_dir_all(dir.join("_checkpoints")).unwrap();
    let copy = dir.with_file_name("copy");
    for file in walk(&dir) {
        let to = copy.join(file.strip_prefix(&dir).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&file, &to).unwrap();
    }
    let err = VersionedDataset::open(&copy, VersionRef::Number(8)).unwrap_err().to_string();
    assert!(err.contains("version 7, which is gone") && err.contains("no checkpoint"), "{err}");
}

#[test]
fn a_where_over_many_data_files_read_in_place_matches_one_file_of_the_same_rows() {
    // The fused WHERE reads each data file's columnar copy in place (no concatenation):
    // differential against the same rows in one data file, and against a version with deleted
    // rows (which concatenates).
    let tmp = tempfile::tempdir().unwrap();
    let files = parts(tmp.path(), 37, |k| ((k as i64 * 37) % 101, 1 + (k * 7) % 130));
    let many =
        VersionedDataset::concat(&tmp.path().join("many"), &files, "", &ExportOptions::default()).unwrap();
    let total: u64 = many.num_rows();
    let one_file = tmp.path().join("one.beton");
    let labels: Vec<i64> =
        rows(&many, "SELECT label FROM samples").iter().map(|s| s.parse().unwrap()).collect();
    beton_testkit::write(&one_file, beton_testkit::schema("label:int"), total, |i| {
        vec![SampleValue::Int(labels[i as usize])]
    });
    let one = VersionedDataset::import(&tmp.path().join("one"), &one_file).unwrap();
    for sql in [
        "label < 40 AND label >= 7",
        "label IN (3, 50, 99, 130)",
        "label BETWEEN 10 AND 20",
        "label > 1000",
        "label >= 0",
        // Conditions on the position: a range of rows, data files outside it skipped.
        "label < 40 AND index >= 100 AND index < 2000",
        "index IN (5, 700, 3000, 99999) AND label >= 0",
        "index > 50 AND index <> 60 AND label < 50 AND index <= 1000.5",
        "index >= 130 AND index < 131",
    ] {
        let (a, b) = (many.view().unwrap(), one.view().unwrap());
        let got = beton_query::select_indices(&a.table().unwrap(), sql).unwrap();
        let want = beton_query::select_indices(&b.table().unwrap(), sql).unwrap();
        assert_eq!(got, want, "{sql}");
        let expected: Vec<u64> = (0..total).filter(|&i| matches_label(i, labels[i as usize], sql)).collect();
        assert_eq!(got.as_slice(), expected.as_slice(), "{sql}");
    }
}

/// The predicates of the test above, evaluated in Rust, of row `i` whose label is `x`.
fn matches_label(i: u64, x: i64, sql: &str) -> bool {
    match sql {
        "label < 40 AND label >= 7" => (7..40).contains(&x),
        "label IN (3, 50, 99, 130)" => [3, 50, 99, 130].contains(&x),
        "label BETWEEN 10 AND 20" => (10..=20).contains(&x),
        "label > 1000" => false,
        "label < 40 AND index >= 100 AND index < 2000" => x < 40 && (100..2000).contains(&i),
        "index IN (5, 700, 3000, 99999) AND label >= 0" => [5, 700, 3000].contains(&i) && x >= 0,
        "index > 50 AND index <> 60 AND label < 50 AND index <= 1000.5" => {
            i > 50 && i != 60 && x < 50 && i <= 1000
        }
        "index >= 130 AND index < 131" => i == 130,
        _ => x >= 0,
    }
}

#[test]
fn a_where_after_updates_and_deletes_reads_copies_in_place_and_matches_the_rows() {
    // Differential: the fused WHERE over copies read in place (patched rows compared one by
    // one, deleted rows dropped from the bits) against the labels the table gives row by row
    // (SELECT label: the patched, filtered column), in one data file and in 23, after each of
    // a sequence of updates (patches over patches) and deletes.
    let tmp = tempfile::tempdir().unwrap();
    let files = parts(tmp.path(), 23, |k| (k as i64 * 50, 40 + (k * 13) % 60));
    let many =
        VersionedDataset::concat(&tmp.path().join("many"), &files, "", &ExportOptions::default()).unwrap();
    let one_file = tmp.path().join("one.beton");
    let labels_of = |v: &VersionedDataset| -> Vec<i64> {
        rows(v, "SELECT label FROM samples").iter().map(|s| s.parse().unwrap()).collect()
    };
    let all = labels_of(&many);
    beton_testkit::write(&one_file, beton_testkit::schema("label:int"), all.len() as u64, |i| {
        vec![SampleValue::Int(all[i as usize])]
    });
    let mut one = VersionedDataset::import(&tmp.path().join("one"), &one_file).unwrap();
    let mut many = many;
    // Each edit, and what it does to a model of the labels (row i holds label x).
    type Pick = fn(usize, i64) -> bool;
    let edits: [(&str, &str, Pick, i64); 6] = [
        ("update", "index IN (3, 70, 71, 500, 1000) => 999", |i, _| [3, 70, 71, 500, 1000].contains(&i), 999),
        ("delete", "index IN (0, 69, 400)", |i, _| [0, 69, 400].contains(&i), 0),
        ("update", "index >= 68 AND index < 72 => -1", |i, _| (68..72).contains(&i), -1),
        ("update", "label = 999 => 5", |_, x| x == 999, 5),
        ("delete", "label < 0 AND index < 69", |i, x| x < 0 && i < 69, 0),
        ("delete", "index > 1150", |i, _| i > 1150, 0),
    ];
    let mut model = all.clone();
    let predicates = [
        "label < 40 AND label >= 7",
        "label = 999",
        "label = 5 AND index > 2",
        "label < 0 AND index < 100",
        "label IN (3, 5, 999, -1)",
        "label >= 0",
    ];
    for (kind, edit, pick, value) in edits {
        model = match kind {
            "update" => model.iter().enumerate().map(|(i, &x)| if pick(i, x) { value } else { x }).collect(),
            _ => model.iter().enumerate().filter(|&(i, &x)| !pick(i, x)).map(|(_, &x)| x).collect(),
        };
        for v in [&mut many, &mut one] {
            *v = match (kind, edit.split_once(" => ")) {
                ("update", Some((pred, value))) => {
                    v.update(Some(pred), &[("label".into(), value.into())], "").unwrap()
                }
                _ => v.delete_where(edit, "").unwrap(),
            };
        }
        let (labels_many, labels_one) = (labels_of(&many), labels_of(&one));
        for sql in predicates {
            for v in [&many, &one] {
                let view = v.view().unwrap();
                let table = view.table().unwrap();
                assert!(table.column_parts("label").is_some(), "{edit}: label read in place");
                let got = beton_query::select_indices(&table, sql).unwrap();
                let labels = &model;
                let want: Vec<u64> = (0..labels.len() as u64)
                    .filter(|&i| {
                        let x = labels[i as usize];
                        match sql {
                            "label < 40 AND label >= 7" => (7..40).contains(&x),
                            "label = 999" => x == 999,
                            "label = 5 AND index > 2" => x == 5 && i > 2,
                            "label < 0 AND index < 100" => x < 0 && i < 100,
                            "label IN (3, 5, 999, -1)" => [3, 5, 999, -1].contains(&x),
                            _ => x >= 0,
                        }
                    })
                    .collect();
                assert_eq!(got.as_slice(), want.as_slice(), "after {kind} {edit}: {sql}");
            }
        }
        // The labels the table gives (the copies' kept values with the patches over them).
        assert!(
            labels_many == model && labels_one == model,
            "after {kind} {edit}: labels differ from the model"
        );
    }
}

#[test]
fn comparisons_between_columns_over_many_patched_data_files_match_the_evaluator() {
    // The fused `column OP column` over each data file's columnar copy read in place, with
    // patches on either column (compared row by row) and deleted rows, against the general
    // evaluator (`(P) = TRUE` is not fused) and the same rows in one data file.
    let tmp = tempfile::tempdir().unwrap();
    let fields = "a:int b:int f:float";
    let value = |i: u64| -> Vec<SampleValue> {
        let f = match i % 11 {
            3 => f64::NAN,
            5 => -0.0,
            k => k as f64 - 4.5,
        };
        vec![
            SampleValue::Int((i * 7 % 13) as i64 - 6),
            SampleValue::Int((i * 5 % 9) as i64 - 4),
            SampleValue::Float(f),
        ]
    };
    let mut files = Vec::new();
    let mut first = 0;
    for k in 0..9u64 {
        let f = tmp.path().join(format!("p{k}.beton"));
        let n = 40 + k * 17;
        beton_testkit::write(&f, beton_testkit::schema(fields), n, |i| value(first + i));
        first += n;
        files.push(f);
    }
    let one_file = tmp.path().join("one.beton");
    beton_testkit::write(&one_file, beton_testkit::schema(fields), first, value);
    let many =
        VersionedDataset::concat(&tmp.path().join("many"), &files, "", &ExportOptions::default()).unwrap();
    let one = VersionedDataset::import(&tmp.path().join("one"), &one_file).unwrap();
    let edit = |v: VersionedDataset| {
        let v = v.update(Some("index % 10 = 3"), &[("a".into(), "b".into())], "").unwrap();
        let v = v.update(Some("index % 17 = 2"), &[("f".into(), "CAST(a AS DOUBLE)".into())], "").unwrap();
        let v = v.update(Some("index % 23 = 5"), &[("b".into(), "a + 1".into())], "").unwrap();
        v.delete_where("index % 29 = 7", "").unwrap()
    };
    let (many, one) = (edit(many), edit(one));
    let (a, b) = (many.view().unwrap(), one.view().unwrap());
    let (ta, tb) = (a.table().unwrap(), b.table().unwrap());
    for sql in [
        "a < b",
        "a = b",
        "a <> b AND f >= a",
        "f < b AND a >= -3",
        "f = a",
        "b >= f AND f >= a AND a < 4",
        // OR and NOT over patched cells, fused too.
        "a < b OR f > 2",
        "NOT (a = b) AND (f < 0 OR b IN (1, 2, 3))",
        "a NOT BETWEEN -2 AND 2 OR NOT (f >= a)",
    ] {
        let fused = beton_query::select_indices(&ta, sql).unwrap();
        let general = beton_query::select_indices(&ta, &format!("({sql}) = TRUE")).unwrap();
        assert_eq!(fused, general, "{sql}");
        assert_eq!(fused, beton_query::select_indices(&tb, sql).unwrap(), "{sql}: one data file");
        assert!(!fused.is_empty() && fused.len() < ta.num_rows() as usize, "{sql}: {} rows", fused.len());
    }
}

#[test]
fn fused_ids_over_many_data_files_are_the_evaluators_rows_at_every_density() {
    // A WHERE over many data files gives its ids a data file at a time: dense files as bits,
    // sparse ones (fewer than one match in 32) as positions, deleted rows dropped, patched rows
    // compared with their values. Against the general evaluator (`(P) = TRUE` is not fused), at
    // densities from none to all, over sizes that are not multiples of 64, at 1 to 3 threads.
    let tmp = tempfile::tempdir().unwrap();
    let fields = "c:int d:int t:bool";
    let value = |i: u64| {
        vec![
            SampleValue::Int((i * 2_654_435_761 % 1000) as i64),
            SampleValue::Int((i % 7) as i64),
            SampleValue::Bool(i % 3 == 0),
        ]
    };
    let mut files = Vec::new();
    let mut first = 0;
    for k in 0..11u64 {
        let f = tmp.path().join(format!("p{k}.beton"));
        let n = [1, 63, 64, 65, 700, 1333, 2048, 5, 4099, 130, 977][k as usize];
        beton_testkit::write(&f, beton_testkit::schema(fields), n, |i| value(first + i));
        first += n;
        files.push(f);
    }
    let many =
        VersionedDataset::concat(&tmp.path().join("many"), &files, "", &ExportOptions::default()).unwrap();
    let many = many.update(Some("index % 97 = 5"), &[("c".into(), "3".into())], "").unwrap();
    let many = many.update(Some("index % 89 = 1"), &[("d".into(), "c".into())], "").unwrap();
    let many = many.delete_where("index % 31 = 30 OR index BETWEEN 5000 AND 5100", "").unwrap();
    // The general evaluator caches the columns it makes (after which nothing is read in place):
    // it reads another view's table.
    let (view, reference) = (many.view().unwrap(), many.view().unwrap());
    let (table, reference) = (view.table().unwrap(), reference.table().unwrap());
    for sql in [
        "c < 0",
        "c < 3",
        "c = 3",
        "c < 20 AND d <> 2",
        "c < 31",
        "c < 40",
        "c < 500",
        "c >= 0 AND d >= 0",
        "c >= d",
        "index >= 700 AND c < 20",
        "index < 3000 AND c >= 900",
    ] {
        let general = beton_query::select_indices(&reference, &format!("({sql}) = TRUE")).unwrap();
        assert!(table.column_parts("c").is_some() && table.column_parts("d").is_some(), "read in place");
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let fused = pool.install(|| beton_query::select_indices(&table, sql).unwrap());
            assert_eq!(fused, general, "{sql} ({threads} threads)");
            let rows = pool
                .install(|| beton_query::query(&table, &format!("SELECT index FROM samples WHERE {sql}")));
            assert_eq!(
                rows.unwrap().num_rows(),
                general.len(),
                "{sql}: the bitmap's rows ({threads} threads)"
            );
        }
    }
    // A few rows' values (patched and kept ones among them) gathered from the copies in place,
    // against the same taken from the whole columns (made and cached in the reference first).
    reference.column("c").unwrap();
    reference.column("d").unwrap();
    reference.column("t").unwrap();
    assert!(reference.column_parts("c").is_none(), "the reference takes from whole columns");
    for sql in [
        "SELECT index, c, d FROM samples WHERE c <= 3",
        // (None of these rows is patched in `c`: a take from each data file.)
        "SELECT c, index, t FROM samples WHERE c >= 7 AND c <= 8",
        "SELECT d, c * 2 AS twice FROM samples WHERE c <= 3 AND d > 2 ORDER BY d DESC, index",
        "SELECT d, COUNT(*) AS n, SUM(c) AS s FROM samples WHERE c < 9 GROUP BY d ORDER BY d",
    ] {
        let (got, want) =
            (beton_query::query(&table, sql).unwrap(), beton_query::query(&reference, sql).unwrap());
        assert!(got.num_rows() > 0, "{sql}");
        assert_eq!(got, want, "{sql}");
    }
    for name in ["c", "d", "t"] {
        assert!(table.column_parts(name).is_some(), "{name} made whole");
    }
}
