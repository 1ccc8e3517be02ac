//! Vector columns: a 1-D NDArray field of numbers is a `FixedSizeList` column of its elements,
//! gathered from the payloads, held by the columnar copy (read in place after), and patched by
//! column files; other arrays stay their byte size.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int8Type};
use arrow_array::{Array, ArrayRef, LargeBinaryArray};
use arrow_schema::DataType;
use beton_dataset::columnar::ColumnarCopy;
use beton_dataset::versioned::VersionedDataset;
use beton_dataset::{IndexSet, Table};
use beton_storage::{Dataset, SampleValue};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn vector(i: u64) -> Vec<f32> {
    vec![i as f32, -(i as f32) / 2.0, 1.5]
}

fn write(path: &std::path::Path, n: u64) {
    let fields =
        beton_testkit::schema("label:int emb:ndarray:<f4:3 small:ndarray:|i1:4 grid:ndarray:<f4:2x2");
    beton_testkit::write(path, fields, n, |i| {
        vec![
            SampleValue::Int(i as i64),
            SampleValue::NDArray(f32_bytes(&vector(i))),
            SampleValue::NDArray((0..4).map(|k| (i as i8).wrapping_mul(k) as u8).collect()),
            SampleValue::NDArray(f32_bytes(&[0.0; 4])),
        ]
    });
}

fn floats(column: &ArrayRef) -> Vec<Option<Vec<f32>>> {
    let list = column.as_fixed_size_list();
    (0..list.len())
        .map(|i| list.is_valid(i).then(|| list.value(i).as_primitive::<Float32Type>().values().to_vec()))
        .collect()
}

#[test]
fn a_one_dimensional_array_is_a_vector_column_read_in_place_from_the_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("v.beton");
    write(&path, 40);
    let ds = Dataset::open(&path).unwrap();
    let table = Table::new(&ds);
    let schema = table.schema();
    let item = |name: &str| match schema.field_with_name(name).unwrap().data_type() {
        DataType::FixedSizeList(item, d) => Some((item.data_type().clone(), *d)),
        _ => None,
    };
    assert_eq!(item("emb"), Some((DataType::Float32, 3)));
    assert_eq!(item("small"), Some((DataType::Int8, 4)));
    assert_eq!(item("grid"), None, "a 2-D array stays its byte size");
    assert_eq!(*schema.field_with_name("grid").unwrap().data_type(), DataType::UInt64);
    let gathered = table.column("emb").unwrap();
    assert_eq!(floats(&gathered), (0..40).map(|i| Some(vector(i))).collect::<Vec<_>>());
    let small = table.column("small").unwrap();
    assert_eq!(
        small.as_fixed_size_list().value(3).as_primitive::<Int8Type>().values().to_vec(),
        vec![0, 3, 6, 9]
    );
    // The copy holds it, and gives the same values from its map.
    let copy = ColumnarCopy::build(&ds).unwrap();
    let held = copy.column("emb").expect("the copy holds the vector column");
    assert_eq!(floats(&held), floats(&gathered));
    assert_eq!(copy.column_bytes("emb"), Some(40 * 12), "what reading it reads: its values");
}

#[test]
fn patches_deletions_and_nulls_of_a_vector_field_in_a_version() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a.beton"), tmp.path().join("b.beton"));
    write(&a, 10);
    beton_testkit::write(
        &b,
        beton_testkit::schema("label:int small:ndarray:|i1:4 grid:ndarray:<f4:2x2"),
        3,
        |i| {
            vec![
                SampleValue::Int(100 + i as i64),
                SampleValue::NDArray(vec![1, 2, 3, 4]),
                SampleValue::NDArray(f32_bytes(&[0.0; 4])),
            ]
        },
    );
    let v1 = VersionedDataset::import(&tmp.path().join("ds"), &a).unwrap();
    let patch: ArrayRef = Arc::new(LargeBinaryArray::from_vec(vec![f32_bytes(&[9.0, 9.0, 9.0]).as_slice()]));
    let v2 =
        v1.update_rows(&IndexSet::from_sorted(vec![4]).unwrap(), vec![("emb".into(), patch)], "").unwrap();
    let v3 = v2.delete(&IndexSet::from_sorted(vec![0]).unwrap(), None, "").unwrap();
    // A data file without the field: NULL vectors in its rows.
    let v4 = v3.append_file(&b, "").unwrap();
    let view = v4.view().unwrap();
    let got = floats(&view.table().unwrap().column("emb").unwrap());
    let mut want: Vec<Option<Vec<f32>>> = (1..10).map(|i| Some(vector(i))).collect();
    want[3] = Some(vec![9.0; 3]);
    want.extend([None, None, None]);
    assert_eq!(got, want);
    // A patch of the wrong width is refused, naming it.
    let wrong: ArrayRef = Arc::new(LargeBinaryArray::from_vec(vec![&[0u8; 8][..]]));
    let err = v4.update_rows(&IndexSet::from_sorted(vec![1]).unwrap(), vec![("emb".into(), wrong)], "");
    let shown = err.unwrap_err().to_string();
    assert!(shown.contains("emb") && shown.contains("12"), "{shown}");
}

#[test]
fn a_copy_made_before_vector_columns_is_made_again() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("v.beton");
    write(&path, 20);
    let ds = Dataset::open(&path).unwrap();
    let copy = ColumnarCopy::build(&ds).unwrap();
    let copy_path = copy.path().to_path_buf();
    drop(copy);
    // The copy as an older beton wrote it: the same stamp, no vector columns.
    let file = std::fs::File::open(&copy_path).unwrap();
    let reader = arrow_ipc::reader::FileReader::try_new(file, None).unwrap();
    let schema = reader.schema();
    let batch = reader.into_iter().next().unwrap().unwrap();
    let keep: Vec<usize> = (0..schema.fields().len())
        .filter(|&k| !matches!(schema.field(k).name().as_str(), "emb" | "small"))
        .collect();
    let old = batch.project(&keep).unwrap();
    let old = arrow_array::RecordBatch::try_new(
        Arc::new(old.schema().as_ref().clone().with_metadata(schema.metadata().clone())),
        old.columns().to_vec(),
    )
    .unwrap();
    let mut bytes = Vec::new();
    let mut w = arrow_ipc::writer::FileWriter::try_new(&mut bytes, &old.schema()).unwrap();
    w.write(&old).unwrap();
    w.finish().unwrap();
    drop(w);
    std::fs::write(&copy_path, bytes).unwrap();
    assert!(ColumnarCopy::open(&ds).is_none(), "a copy without the vector columns is not used");
    let remade = ColumnarCopy::build(&ds).unwrap();
    assert!(remade.column("emb").is_some());
    assert!(ColumnarCopy::open(&ds).is_some());
}
