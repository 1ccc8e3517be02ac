//! The loader over a version of a dataset directory: several data files, deleted rows, column
//! files, one index space; the same batches as the version's table says and as its compaction.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array};
use beton_dataset::versioned::{ExportOptions, VersionRef, VersionedDataset};
use beton_dataset::IndexSet;
use beton_loader::{Batch, Loader, OrderOption, Parts};
use beton_query::SqlEdits;
use beton_storage::{FieldType, SampleValue, WriterOptions};
use beton_testkit::{schema, two_files};

fn write(path: &std::path::Path, first: i64, n: u64) {
    let options = WriterOptions { page_size: 1 << 21, ..WriterOptions::default() };
    beton_testkit::write_with(path, schema("label:int blob:bytes caption:text"), options, n, |i| {
        let v = first + i as i64;
        vec![
            SampleValue::Int(v),
            SampleValue::Bytes(vec![v as u8; 1 + (v as usize % 5)]),
            SampleValue::Text(format!("c{v}")),
        ]
    });
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
    epoch_cached(v, order, threads, None)
}

/// [`epoch`] through the OS page cache (`None`) or the process cache of at most `pages` pages.
fn epoch_cached(v: &VersionedDataset, order: OrderOption, threads: usize, pages: Option<usize>) -> Epoch {
    let view = v.view().unwrap();
    let parts = Parts::of_version(&view).unwrap();
    let mut builder = Loader::builder_parts(parts);
    if let Some(pages) = pages {
        builder = builder.os_cache(false).cache_pages(pages);
    }
    let mut loader =
        builder.batch_size(4).order(order).seed(7).threads(threads).drop_last(false).build().unwrap();
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
    let (tmp, a, b) = two_files(write, 10, 7);
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
    let compacted = v.compact(&ExportOptions::with_threads(1), "").unwrap();
    let quasi = OrderOption::QuasiRandom { buffer_pages: None };
    for order in [OrderOption::Sequential, OrderOption::Random, quasi] {
        let one = epoch(&v, order, 1);
        assert_eq!(one, epoch(&v, order, 3), "{order:?}");
        // The process cache over the version's data files: the same batches, with room for
        // every page and with room for one (the rest read directly).
        assert_eq!(one, epoch_cached(&v, order, 2, Some(64)), "{order:?} process cache");
        assert_eq!(one, epoch_cached(&v, order, 2, Some(1)), "{order:?} process cache of one page");
        if order != quasi {
            // QUASI_RANDOM follows pages, which compaction changes; the others follow indices.
            assert_eq!(one, epoch(&compacted, order, 2), "{order:?}");
        }
        let mut seen: Vec<u64> = one.iter().flat_map(|b| b.0.clone()).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..n as u64).collect::<Vec<_>>(), "{order:?}: every sample once");
    }

    // RANDOM never lists the kept rows of files with deletions: each sample's row is found by a
    // binary search over the deleted ones.
    let view = v.view().unwrap();
    let parts = Parts::of_version(&view).unwrap();
    let mut loader = Loader::builder_parts(parts)
        .batch_size(4)
        .order(OrderOption::Random)
        .seed(7)
        .drop_last(false)
        .build()
        .unwrap();
    assert_eq!(loader.next_epoch().unwrap().map(|b| b.unwrap().indices().len()).sum::<usize>(), n);
    let kept: Vec<_> = view.parts().unwrap().into_iter().filter_map(|p| p.1).collect();
    assert!(!kept.is_empty() && kept.iter().all(|k| !k.is_listed()), "kept rows listed");
    // Nor does it make a patched field's whole column: each sample's cell is found in the patch.
    let patched: Vec<_> =
        view.parts().unwrap().into_iter().filter_map(|p| p.2.get("label").cloned()).collect();
    assert!(!patched.is_empty() && patched.iter().all(|c| !c.is_made()), "a patched column made whole");

    // An older version loads as it was.
    let old = VersionedDataset::open(&dir, VersionRef::Number(2)).unwrap();
    let view = old.view().unwrap();
    let parts = Parts::of_version(&view).unwrap();
    let mut loader = Loader::builder_parts(parts).batch_size(17).fields(&["label"]).build().unwrap();
    let batch = loader.next_epoch().unwrap().next().unwrap().unwrap();
    assert_eq!(i64s(&batch, "label"), (0..10).chain(100..107).collect::<Vec<_>>());
    // Indices are positions in the version.
    let parts = Parts::of_version(&view).unwrap();
    let subset = Loader::builder_parts(parts)
        .indices(IndexSet::from_sorted(vec![12, 16]).unwrap())
        .batch_size(2)
        .build();
    let batch = subset.unwrap().next_epoch().unwrap().next().unwrap().unwrap();
    assert_eq!(i64s(&batch, "label"), vec![102, 106]);
}

/// Images, bytes, JSON and arrays replaced row by row or added as columns load as the version's
/// table says: the same batches as the version's compaction, whatever the thread count.
#[test]
fn edited_and_added_fields_of_every_type_load_as_their_compaction() {
    use beton_dataset::versioned::values::ValuesBuilder;
    use beton_loader::{CenterCropRGBImageDecoder, SimpleRGBImageDecoder};
    use beton_storage::{ArraySpec, DType, ImageOptions};
    use beton_testkit::image;
    let raw = ImageOptions::with_mode(beton_storage::WriteMode::Raw);
    let (tmp, file) = beton_testkit::temp_path("a.beton");
    beton_testkit::write(&file, schema("label:int blob:bytes img:raw"), 30, |i| {
        vec![SampleValue::Int(i as i64), SampleValue::Bytes(vec![i as u8; 2]), image(8, 6, i as u8 + 1)]
    });
    let column = |ty: &FieldType, values: Vec<SampleValue>| {
        let mut b = ValuesBuilder::new(ty);
        for v in values {
            b.encode(v, &raw, 0.0).unwrap();
        }
        b.finish()
    };
    let dir = tmp.path().join("ds");
    let v = VersionedDataset::import(&dir, &file).unwrap();
    let rows = IndexSet::from_sorted(vec![3, 11, 29]).unwrap();
    // Longer bytes than any stored (the loader's column widens), images of the stored size.
    let v = v
        .update_rows(
            &rows,
            vec![
                ("blob".into(), column(&FieldType::Bytes, vec![SampleValue::Bytes(vec![7; 9]); 3])),
                ("img".into(), column(&FieldType::RgbImage, (0..3).map(|k| image(8, 6, 100 + k)).collect())),
            ],
            "",
        )
        .unwrap();
    let v = v.delete_where("label % 7 = 0", "").unwrap();
    let n = v.num_rows() as usize;
    let spec = ArraySpec { dtype: DType::parse("<f4").unwrap(), shape: vec![3] };
    let emb = column(
        &FieldType::NDArray(spec.clone()),
        (0..n)
            .map(|i| SampleValue::Bytes((0..3).flat_map(|k| ((i * 3 + k) as f32).to_le_bytes()).collect()))
            .collect(),
    );
    let v = v.add_column("emb", &FieldType::NDArray(spec), &emb, "").unwrap();
    let thumbs = column(&FieldType::RgbImage, (0..n).map(|i| image(5, 4, i as u8)).collect());
    let v = v.add_column("thumb", &FieldType::RgbImage, &thumbs, "").unwrap();
    let meta = column(&FieldType::Json, (0..n).map(|i| SampleValue::Json(format!("[{i}]"))).collect());
    let v = v.add_column("meta", &FieldType::Json, &meta, "").unwrap();
    let compacted = v.compact(&ExportOptions::with_threads(1), "").unwrap();

    let batches = |v: &VersionedDataset, threads: usize| -> Vec<Vec<Vec<u8>>> {
        let view = v.view().unwrap();
        let mut loader = Loader::builder_parts(Parts::of_version(&view).unwrap())
            .batch_size(4)
            .order(OrderOption::Random)
            .seed(3)
            .threads(threads)
            .drop_last(false)
            .decoder("img", Arc::new(SimpleRGBImageDecoder))
            .decoder("thumb", Arc::new(CenterCropRGBImageDecoder::new((3, 3))))
            .build()
            .unwrap();
        loader
            .next_epoch()
            .unwrap()
            .map(|b| {
                let b = b.unwrap();
                let mut cols = vec![b.indices().iter().flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>()];
                for c in b.specs() {
                    cols.push(b.column(&c.name).unwrap().bytes.to_vec());
                }
                cols
            })
            .collect()
    };
    let edited = batches(&v, 1);
    assert_eq!(edited, batches(&v, 3), "same batches whatever the thread count");
    assert_eq!(edited, batches(&compacted, 2), "same batches as the compaction");
    // The patched blob is in, at its full length.
    let view = v.view().unwrap();
    let mut loader = Loader::builder_parts(Parts::of_version(&view).unwrap())
        .fields(&["blob"])
        .batch_size(4)
        .build()
        .unwrap();
    let first = loader.next_epoch().unwrap().next().unwrap().unwrap();
    assert_eq!(first.specs()[0].shape, vec![9]);
}

/// A NULL in a field the loader decodes (rows appended without a column added since) is an
/// error at build naming the field and the samples, unless the loader is given a value to decode
/// it as; a loader that leaves the field out, or reads only rows with values, loads.
#[test]
fn nulls_are_refused_at_build_or_filled_as_asked() {
    let (tmp, a, b) = two_files(write, 6, 3);
    let v = VersionedDataset::import(&tmp.path().join("ds"), &a).unwrap();
    let scores: ArrayRef = Arc::new(Float64Array::from((0..6).map(|i| i as f64).collect::<Vec<_>>()));
    let v = v.add_column("score", &FieldType::Float, &scores, "").unwrap();
    let v = v.append_file(&b, "").unwrap();
    let view = v.view().unwrap();
    let builder = || Loader::builder_parts(Parts::of_version(&view).unwrap()).batch_size(9).drop_last(false);

    let err = builder().build().err().expect("a NULL the loader would decode is refused").to_string();
    assert!(
        err.contains("field 'score'") && err.contains("NULL in 3") && err.contains("sample 6, 7, 8"),
        "{err}"
    );
    assert!(err.contains("fill_null"), "{err}");

    // Filled: the rows' values, then the fill value.
    let mut loader = builder().fill_null("score", beton_storage::Value::Float(-1.0)).build().unwrap();
    let batch = loader.next_epoch().unwrap().next().unwrap().unwrap();
    assert_eq!(f64s(&batch, "score"), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, -1.0, -1.0, -1.0]);
    // A fill of the wrong type is refused, naming the field.
    let err = builder().fill_null("score", beton_storage::Value::Int(0)).build().err().unwrap().to_string();
    assert!(err.contains("field 'score' is a FloatField"), "{err}");
    // Without the field, or over rows that have it: no NULL to decode.
    let mut loader = builder().fields(&["label"]).build().unwrap();
    let batch = loader.next_epoch().unwrap().next().unwrap().unwrap();
    assert_eq!(i64s(&batch, "label"), [0, 1, 2, 3, 4, 5, 100, 101, 102]);
    let with_values = IndexSet::from_sorted(vec![1, 5]).unwrap();
    let mut loader = builder().indices(with_values).build().unwrap();
    let batch = loader.next_epoch().unwrap().next().unwrap().unwrap();
    assert_eq!(f64s(&batch, "score"), [1.0, 5.0]);
    // Repeated indices naming a NULL row are checked too.
    let err = builder().index_list(vec![7, 1, 7]).build().err().unwrap().to_string();
    assert!(err.contains("NULL in 2 of the samples"), "{err}");
}

/// Data files whose page sizes were chosen from their payload (small pages) and whose heads
/// differ by many pages (3,000 rows, then 3): the process cache reads each payload from its
/// own file, at any bound, and every order gives the batches the OS cache gives.
#[test]
fn small_page_files_load_through_the_process_cache() {
    let (tmp, a, b) = two_files(
        |path, first, n| {
            let report = beton_testkit::write(path, schema("label:int blob:bytes"), n, |i| {
                let v = first + i as i64;
                vec![SampleValue::Int(v), SampleValue::Bytes(vec![v as u8; 1 + (v as usize % 300)])]
            });
            assert!(report.page_size < 1 << 20, "{report:?}");
        },
        3000,
        3,
    );
    let v = VersionedDataset::import(&tmp.path().join("ds"), &a).unwrap().append_file(&b, "").unwrap();
    let view = v.view().unwrap();
    let epoch = |order: OrderOption, pages: Option<usize>| -> Vec<(Vec<i64>, Vec<u8>)> {
        let mut builder = Loader::builder_parts(Parts::of_version(&view).unwrap());
        if let Some(pages) = pages {
            builder = builder.os_cache(false).cache_pages(pages);
        }
        let mut loader =
            builder.batch_size(64).order(order).seed(3).threads(2).drop_last(false).build().unwrap();
        let batches = loader.next_epoch().unwrap();
        batches
            .map(|b| b.unwrap())
            .map(|b| (i64s(&b, "label"), b.column("blob").unwrap().bytes.to_vec()))
            .collect()
    };
    let seq = epoch(OrderOption::Sequential, None);
    let labels: Vec<i64> = seq.iter().flat_map(|b| b.0.clone()).collect();
    assert_eq!(labels, (0..3000).chain(100..103).collect::<Vec<_>>());
    for order in
        [OrderOption::Sequential, OrderOption::Random, OrderOption::QuasiRandom { buffer_pages: None }]
    {
        let os = epoch(order, None);
        for (b, (labels, blobs)) in os.iter().enumerate() {
            // Blobs are padded to the longest (300 bytes): each row's bytes are its label's.
            let width = blobs.len() / labels.len();
            for (l, row) in labels.iter().zip(blobs.chunks_exact(width)) {
                let len = 1 + (*l as usize % 300);
                assert!(row[..len].iter().all(|&x| x == *l as u8), "{order:?} batch {b} label {l}");
            }
        }
        assert_eq!(os, epoch(order, Some(1024)), "{order:?} process cache");
        assert_eq!(os, epoch(order, Some(2)), "{order:?} process cache of two pages");
    }
}
