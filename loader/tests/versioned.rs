//! The loader over a version of a dataset directory: several data files, deleted rows, column
//! files, one index space; the same batches as the version's table says and as its compaction.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array};
use beton_loader::{Batch, Loader, OrderOption, Parts};
use beton_query::versioned::{VersionRef, VersionedDataset};
use beton_query::IndexSet;
use beton_storage::{FieldSpec, FieldType, SampleValue, Writer, WriterOptions};

fn write(path: &std::path::Path, first: i64, n: u64) {
    let fields = vec![
        FieldSpec::new("label", FieldType::Int),
        FieldSpec::new("blob", FieldType::Bytes),
        FieldSpec::new("caption", FieldType::Text),
    ];
    let options = WriterOptions { page_size: 1 << 21, ..WriterOptions::default() };
    Writer::new(path, fields, options)
        .unwrap()
        .write_indexed(n, |i| {
            let v = first + i as i64;
            Ok(vec![
                SampleValue::Int(v),
                SampleValue::Bytes(vec![v as u8; 1 + (v as usize % 5)]),
                SampleValue::Text(format!("c{v}")),
            ])
        })
        .unwrap();
}

fn i64s(b: &Batch, name: &str) -> Vec<i64> {
    b.column(name).unwrap().bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

fn f64s(b: &Batch, name: &str) -> Vec<f64> {
    b.column(name).unwrap().bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Every batch of one epoch: (indices, labels, scores, blob bytes, caption bytes).
type Epoch = Vec<(Vec<u64>, Vec<i64>, Vec<f64>, Vec<u8>, Vec<u8>)>;

fn epoch(v: &VersionedDataset, order: OrderOption, threads: usize) -> Epoch {
    let view = v.view().unwrap();
    let parts = Parts::of_version(&view).unwrap();
    let mut loader = Loader::builder_parts(parts)
        .batch_size(4)
        .order(order)
        .seed(7)
        .threads(threads)
        .drop_last(false)
        .build()
        .unwrap();
    loader
        .next_epoch()
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            (
                b.indices().to_vec(),
                i64s(&b, "label"),
                f64s(&b, "score"),
                b.column("blob").unwrap().bytes.to_vec(),
                b.column("caption").unwrap().bytes.to_vec(),
            )
        })
        .collect()
}

#[test]
fn a_version_loads_as_one_table_and_as_its_compaction() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a.beton"), tmp.path().join("b.beton"));
    write(&a, 0, 10);
    write(&b, 100, 7);
    let dir = tmp.path().join("ds");
    let v = VersionedDataset::import(&dir, &a).unwrap();
    let v = v.append_file(&b, "").unwrap();
    let v = v.delete_where("label % 3 = 0", "").unwrap();
    let v = v.update(Some("label > 100"), &[("label".into(), "label + 1000".into())], "").unwrap();
    let v = v
        .update(Some("label = 4"), &[("caption".into(), "'a much longer caption than any other'".into())], "")
        .unwrap();
    let n = v.num_rows() as usize;
    let scores: ArrayRef = Arc::new(Float64Array::from((0..n).map(|i| i as f64 / 2.0).collect::<Vec<_>>()));
    let v = v.add_column("score", &FieldType::Float, &scores, "").unwrap();

    // SEQUENTIAL: the table's rows, in order, with edited and added values.
    let seq = epoch(&v, OrderOption::Sequential, 2);
    let labels: Vec<i64> = seq.iter().flat_map(|b| b.1.clone()).collect();
    let expected: Vec<i64> =
        (0..10).chain(100..107).filter(|l| l % 3 != 0).map(|l| if l > 100 { l + 1000 } else { l }).collect();
    assert_eq!(labels, expected);
    let indices: Vec<u64> = seq.iter().flat_map(|b| b.0.clone()).collect();
    assert_eq!(indices, (0..n as u64).collect::<Vec<_>>());
    let got_scores: Vec<f64> = seq.iter().flat_map(|b| b.2.clone()).collect();
    assert_eq!(got_scores, (0..n).map(|i| i as f64 / 2.0).collect::<Vec<_>>());
    // The longest caption (from a column file) sizes the text column.
    let caption_width = seq[0].4.len() / seq[0].0.len();
    assert_eq!(caption_width, "a much longer caption than any other".len());

    // Every order: the same batches whatever the thread count, and the same as the compacted
    // version's (one data file, same rows).
    let compacted = v.compact(1, "").unwrap();
    let quasi = OrderOption::QuasiRandom { buffer_pages: None };
    for order in [OrderOption::Sequential, OrderOption::Random, quasi] {
        let one = epoch(&v, order, 1);
        assert_eq!(one, epoch(&v, order, 3), "{order:?}");
        if order != quasi {
            // QUASI_RANDOM follows pages, which compaction changes; the others follow indices.
            assert_eq!(one, epoch(&compacted, order, 2), "{order:?}");
        }
        let mut seen: Vec<u64> = one.iter().flat_map(|b| b.0.clone()).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..n as u64).collect::<Vec<_>>(), "{order:?}: every sample once");
    }

    // An older version loads as it was.
    let old = VersionedDataset::open(&dir, VersionRef::Number(2)).unwrap();
    let view = old.view().unwrap();
    let parts = Parts::of_version(&view).unwrap();
    let mut loader = Loader::builder_parts(parts).batch_size(17).fields(&["label"]).build().unwrap();
    let batch = loader.next_epoch().unwrap().next().unwrap().unwrap();
    assert_eq!(i64s(&batch, "label"), (0..10).chain(100..107).collect::<Vec<_>>());
    // Indices are positions in the version; the process cache is refused with a reason.
    let parts = Parts::of_version(&view).unwrap();
    let err = Loader::builder_parts(parts).os_cache(false).build().err().unwrap().to_string();
    assert!(err.contains("os_cache"), "{err}");
    let parts = Parts::of_version(&view).unwrap();
    let subset = Loader::builder_parts(parts)
        .indices(IndexSet::from_sorted(vec![12, 16]).unwrap())
        .batch_size(2)
        .build();
    let batch = subset.unwrap().next_epoch().unwrap().next().unwrap().unwrap();
    assert_eq!(i64s(&batch, "label"), vec![102, 106]);
}
