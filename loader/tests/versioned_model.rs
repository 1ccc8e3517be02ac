//! Random sequences of edits (update of an int and of a bytes field, delete, add and drop column,
//! append, compact, restore, cleanup) on a dataset directory against a reference model (a plain
//! table applying the same edits): after every step, and for every version still kept, the
//! table, every row's values, SQL results and one loader epoch (through the OS page cache and
//! through a one-page process cache) agree with the model.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::Array;
use beton_dataset::versioned::{ExportOptions, VersionRef, VersionedDataset};
use beton_loader::{Loader, OrderOption, Parts};
use beton_query::SqlEdits;
use beton_storage::{FieldSpec, FieldType, SampleValue, Writer, WriterOptions};
use proptest::prelude::*;

/// One row of the reference: row id, label, added int columns by name (`None`: NULL, a row
/// appended without the column), blob.
type Row = (u64, i64, BTreeMap<String, Option<i64>>, Vec<u8>);

/// The reference: its rows in index order.
#[derive(Debug, Clone, PartialEq, Default)]
struct Model {
    rows: Vec<Row>,
    columns: Vec<String>,
    next_id: u64,
}

#[derive(Debug, Clone)]
enum Edit {
    Update { m: i64, r: i64, d: i64 },
    SetBlob { m: i64, r: i64, len: u8 },
    Delete { m: i64, r: i64 },
    AddColumn,
    DropColumn(usize),
    Append(u64),
    Compact,
    Restore(usize),
    Cleanup(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (2i64..5, 0i64..5, -3i64..4).prop_map(|(m, r, d)| Edit::Update { m, r: r % m, d }),
        (2i64..5, 0i64..5, 0u8..9).prop_map(|(m, r, len)| Edit::SetBlob { m, r: r % m, len }),
        (3i64..7, 0i64..7).prop_map(|(m, r)| Edit::Delete { m, r: r % m }),
        Just(Edit::AddColumn),
        (0usize..4).prop_map(Edit::DropColumn),
        (1u64..6).prop_map(Edit::Append),
        Just(Edit::Compact),
        (0usize..8).prop_map(Edit::Restore),
        (1usize..4).prop_map(Edit::Cleanup),
    ]
}

fn write(path: &Path, first: i64, n: u64) {
    let fields = vec![FieldSpec::new("label", FieldType::Int), FieldSpec::new("blob", FieldType::Bytes)];
    Writer::new(path, fields, WriterOptions { page_size: 1 << 21, ..WriterOptions::default() })
        .unwrap()
        .write_indexed(n, |i| {
            Ok(vec![SampleValue::Int(first + i as i64), SampleValue::Bytes(vec![i as u8; 3])])
        })
        .unwrap();
}

/// Checks a version against the model: table, SQL, an epoch of the loader.
fn agree(v: &VersionedDataset, model: &Model) {
    let view = v.view().unwrap();
    let table = view.table().unwrap();
    assert_eq!(table.num_rows(), model.rows.len() as u64, "rows of version {}", v.version());
    let ids = table.column("row_id").unwrap();
    let labels = table.column("label").unwrap();
    assert_eq!(
        ids.as_primitive::<UInt64Type>().values().to_vec(),
        model.rows.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    assert_eq!(
        labels.as_primitive::<Int64Type>().values().to_vec(),
        model.rows.iter().map(|r| r.1).collect::<Vec<_>>()
    );
    let mut names: Vec<&str> = table.column_names();
    names.retain(|n| !["index", "row_id", "label", "blob"].contains(n));
    assert_eq!(names, model.columns.iter().map(String::as_str).collect::<Vec<_>>());
    for c in &model.columns {
        let col = table.column(c).unwrap();
        let col = col.as_primitive::<Int64Type>();
        assert_eq!(
            (0..col.len()).map(|i| col.is_valid(i).then(|| col.value(i))).collect::<Vec<_>>(),
            model.rows.iter().map(|r| r.2[c]).collect::<Vec<_>>(),
            "column {c}"
        );
    }
    for (i, row) in model.rows.iter().enumerate() {
        let blob = table.value(i as u64, "blob", &FieldType::Bytes).unwrap();
        assert_eq!(
            blob,
            Some(beton_storage::Value::Bytes(&row.3)),
            "blob of row {i}, version {}",
            v.version()
        );
    }
    let odd = beton_query::select_indices(&table, "label % 2 = 1").unwrap();
    let expected: Vec<u64> =
        model.rows.iter().enumerate().filter(|(_, r)| r.1 % 2 == 1).map(|(i, _)| i as u64).collect();
    assert_eq!(odd.as_slice(), expected.as_slice());
    if model.rows.is_empty() {
        return;
    }
    let expected: Vec<(u64, i64, Vec<u8>)> =
        model.rows.iter().enumerate().map(|(i, r)| (i as u64, r.1, r.3.clone())).collect();
    for process_cache in [false, true] {
        let parts = Parts::of_version(&view).unwrap();
        let mut builder = Loader::builder_parts(parts);
        if process_cache {
            builder = builder.os_cache(false).cache_pages(1);
        }
        let mut loader = builder
            .batch_size(4)
            .drop_last(false)
            .order(OrderOption::Random)
            .seed(3)
            .fields(&["label", "blob"])
            .build()
            .unwrap();
        let mut seen: Vec<(u64, i64, Vec<u8>)> = Vec::new();
        for b in loader.next_epoch().unwrap() {
            let b = b.unwrap();
            let col = b.column("label").unwrap();
            let labels = col.bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()));
            let blobs = b.column("blob").unwrap();
            let lens = b.column("blob.len").unwrap();
            let width = blobs.bytes.len() / b.indices().len();
            // Per sample (a batch whose blobs are all empty has columns of width 0).
            let blobs = (0..b.indices().len()).zip(lens.bytes.chunks_exact(8)).map(|(k, len)| {
                blobs.bytes[k * width..(k + 1) * width]
                    [..u64::from_le_bytes(len.try_into().unwrap()) as usize]
                    .to_vec()
            });
            seen.extend(b.indices().iter().zip(labels).zip(blobs).map(|((&i, l), d)| (i, l, d)));
        }
        seen.sort_unstable();
        assert_eq!(seen, expected, "loader epoch of version {} (process cache {process_cache})", v.version());
    }
}

fn run(edits: &[Edit]) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a.beton");
    write(&file, 0, 12);
    let dir = tmp.path().join("ds");
    let mut v = VersionedDataset::import(&dir, &file).unwrap();
    let mut model = Model {
        rows: (0..12).map(|i| (i, i as i64, BTreeMap::new(), vec![i as u8; 3])).collect(),
        columns: vec![],
        next_id: 12,
    };
    let mut history: BTreeMap<u64, Model> = BTreeMap::from([(1, model.clone())]);
    let mut added = 0;
    for (step, e) in edits.iter().enumerate() {
        match e {
            Edit::Update { m, r, d } => {
                let pred = format!("label % {m} = {r}");
                v = v.update(Some(&pred), &[("label".into(), format!("label + {d}"))], "").unwrap();
                for row in &mut model.rows {
                    // SQL's % keeps the dividend's sign, as Rust's.
                    if row.1 % m == *r {
                        row.1 += d;
                    }
                }
            }
            Edit::SetBlob { m, r, len } => {
                let rows: Vec<u64> = model
                    .rows
                    .iter()
                    .enumerate()
                    .filter(|(_, row)| row.1 % m == *r)
                    .map(|(i, _)| i as u64)
                    .collect();
                let value = vec![*len; *len as usize];
                let values: arrow_array::ArrayRef =
                    std::sync::Arc::new(arrow_array::LargeBinaryArray::from(vec![value.as_slice()]));
                let set = beton_dataset::IndexSet::from_sorted(rows.clone()).unwrap();
                v = v.update_rows(&set, vec![("blob".into(), values)], "").unwrap();
                for i in rows {
                    model.rows[i as usize].3 = value.clone();
                }
            }
            Edit::Delete { m, r } => {
                v = v.delete_where(&format!("label % {m} = {r}"), "").unwrap();
                model.rows.retain(|row| row.1 % m != *r);
            }
            Edit::AddColumn => {
                let name = format!("c{added}");
                added += 1;
                v = v.add_column_sql(&name, "label * 2 + index", "").unwrap();
                for (i, row) in model.rows.iter_mut().enumerate() {
                    row.2.insert(name.clone(), Some(row.1 * 2 + i as i64));
                }
                model.columns.push(name);
            }
            Edit::DropColumn(k) => {
                if model.columns.is_empty() {
                    continue;
                }
                let name = model.columns.remove(k % model.columns.len());
                v = v.drop_column(&name, "").unwrap();
                for row in &mut model.rows {
                    row.2.remove(&name);
                }
            }
            Edit::Append(n) => {
                let more = tmp.path().join(format!("more-{step}.beton"));
                write(&more, 1000 * (step as i64 + 1), *n);
                v = v.append_file(&more, "").unwrap();
                for i in 0..*n {
                    // The appended file lacks the added columns: NULL there.
                    let cols = model.columns.iter().map(|c| (c.clone(), None)).collect();
                    model.rows.push((
                        model.next_id + i,
                        1000 * (step as i64 + 1) + i as i64,
                        cols,
                        vec![i as u8; 3],
                    ));
                }
                model.next_id += n;
            }
            Edit::Compact => v = v.compact(&ExportOptions::with_threads(1), "").unwrap(),
            Edit::Restore(k) => {
                let kept: Vec<u64> = history.keys().copied().collect();
                let target = kept[k % kept.len()];
                v = v.restore(target).unwrap();
                let next_id = model.next_id;
                model = history[&target].clone();
                model.next_id = next_id;
            }
            Edit::Cleanup(keep) => {
                v.cleanup(*keep, std::time::Duration::ZERO).unwrap();
                let latest = v.version();
                history.retain(|&n, _| n + *keep as u64 > latest);
            }
        }
        history.insert(v.version(), model.clone());
        agree(&v, &model);
    }
    // Every version still kept reads as it was.
    for (n, m) in &history {
        agree(&VersionedDataset::open(&dir, VersionRef::Number(*n)).unwrap(), m);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn versions_agree_with_a_reference_model(edits in proptest::collection::vec(edit(), 1..10)) {
        run(&edits);
    }
}
