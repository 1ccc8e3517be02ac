//! Writer guarantees: byte-identical to FFCV 1.0.2 (one worker) when given the same values,
//! hand-computed layouts, thread-count independence, atomic publication, clear errors.

use std::path::Path;

use beton_storage::{
    ArraySpec, CustomField, DType, Dataset, Error, FieldSpec, FieldType, ImageMode, ImageOptions,
    ImageSource, OpenOptions, Pixels, SampleValue, Slot, Value, WriteMode, Writer, WriterOptions,
};

use crate::common::*;

const MIB: u64 = 1 << 20;

fn options(page_size: u64, threads: usize) -> WriterOptions {
    // FFCV's exact layout: no room reserved for splits.
    WriterOptions {
        page_size,
        num_threads: threads,
        chunk_size: 7,
        splits_reserve: Some(0),
        ..WriterOptions::default()
    }
}

/// The schema and values of an FFCV fixture, as beton reads them, ready to write again.
fn fixture_as_source(ds: &Dataset) -> (Vec<FieldSpec>, Vec<Vec<SampleValue>>) {
    let fields = ds
        .fields()
        .iter()
        .map(|f| match f.field_type() {
            FieldType::RgbImage => FieldSpec::rgb_image(
                f.name(),
                // No restart markers: FFCV's JPEG bytes pass through as they are.
                ImageOptions {
                    write_mode: WriteMode::Jpg,
                    jpeg_restart_interval: 0,
                    ..ImageOptions::default()
                },
            ),
            ty => FieldSpec::new(f.name(), ty.clone()),
        })
        .collect::<Vec<_>>();
    let mut fields = fields;
    let samples = (0..ds.num_samples())
        .map(|i| {
            (0..ds.fields().len())
                .map(|k| match ds.get(i, k).unwrap() {
                    Value::Int(v) => SampleValue::Int(v),
                    Value::Float(v) => SampleValue::Float(v),
                    Value::Bytes(b) => SampleValue::Bytes(b.to_vec()),
                    Value::Json(s) => SampleValue::Json(s.to_string()),
                    Value::NDArray(b) => SampleValue::NDArray(b.to_vec()),
                    Value::Custom(b) => SampleValue::Custom(b.to_vec()),
                    Value::Image(img) => match img.mode {
                        ImageMode::Jpg => SampleValue::Image(ImageSource::Encoded(img.data.to_vec())),
                        ImageMode::Raw => {
                            fields[k].image.write_mode = WriteMode::Raw;
                            SampleValue::Image(ImageSource::Pixels(Pixels {
                                width: img.width as u32,
                                height: img.height as u32,
                                channels: 3,
                                data: img.data.to_vec(),
                            }))
                        }
                    },
                    other => panic!("fixture value {other:?}"),
                })
                .collect()
        })
        .collect();
    (fields, samples)
}

fn write_samples(
    path: &Path,
    fields: Vec<FieldSpec>,
    samples: &[Vec<SampleValue>],
    opts: WriterOptions,
) -> beton_storage::Result<beton_storage::WriteReport> {
    Writer::new(path, fields, opts)?.write_indexed(samples.len() as u64, |i| Ok(samples[i as usize].clone()))
}

/// FFCV wrote these fixtures with one worker; beton given the same values writes the same bytes.
/// (`uniform_proportion` is left out: FFCV drew its raw/jpg choices from numpy's global RNG.)
#[test]
fn rewriting_ffcv_fixtures_gives_identical_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for name in fixture_names() {
        if name == "crashed_write" || name == "uniform_proportion" {
            continue;
        }
        let original = fixture_bytes(&name);
        let ds = OpenOptions::new().custom_layout("ext", 6, 1).open_bytes(original.clone()).unwrap();
        let (fields, samples) = fixture_as_source(&ds);
        for threads in [1, 2] {
            let path = dir.path().join(format!("{name}-{threads}.beton"));
            write_samples(&path, fields.clone(), &samples, options(ds.page_size(), threads))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let written = std::fs::read(&path).unwrap();
            assert_eq!(written.len(), original.len(), "{name}: file size");
            if let Some(at) = written.iter().zip(&original).position(|(a, b)| a != b) {
                panic!("{name} ({threads} threads): first differing byte at {at}");
            }
        }
    }
}

fn le(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// Header + three descriptors (odd count, a 16-character name without NUL) + rows + one page +
/// allocation table, every byte computed by hand from docs/FORMAT.md.
#[test]
fn layout_matches_format_md_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hand.beton");
    let fields = vec![
        FieldSpec::new("x", FieldType::Int),
        FieldSpec::new("abcdefghijklmnop", FieldType::Float),
        FieldSpec::new("b", FieldType::Bytes),
    ];
    let samples = vec![
        vec![SampleValue::Int(7), SampleValue::Float(1.5), SampleValue::Bytes(b"abc".to_vec())],
        vec![SampleValue::Int(-1), SampleValue::Float(-0.0), SampleValue::Bytes(b"de".to_vec())],
    ];
    write_samples(&path, fields, &samples, options(2 * MIB, 1)).unwrap();
    let got = std::fs::read(&path).unwrap();

    let page = 2 * MIB;
    let mut want = Vec::new();
    // Header: version 2, 3 fields, page size, 2 samples, allocation table after the one page.
    want.extend_from_slice(&2u16.to_le_bytes());
    want.extend_from_slice(&3u16.to_le_bytes());
    want.extend_from_slice(&(page as u32).to_le_bytes());
    want.extend_from_slice(&le(2));
    want.extend_from_slice(&le(2 * page));
    for (type_id, name) in [(1u8, &b"x"[..]), (0, b"abcdefghijklmnop"), (3, b"b")] {
        let mut desc = vec![0u8; 1041];
        desc[0] = type_id;
        desc[1..1 + name.len()].copy_from_slice(name);
        want.extend_from_slice(&desc);
    }
    assert_eq!(want.len(), 24 + 3 * 1041);
    // Rows: x <i8 @0, float <f8 @8, bytes {ptr, size} @16 (packed struct, align 1): 32 bytes.
    for (x, f, ptr, size) in [(7i64, 1.5f64, page, 3u64), (-1, -0.0, page + 3, 2)] {
        want.extend_from_slice(&x.to_le_bytes());
        want.extend_from_slice(&f.to_le_bytes());
        want.extend_from_slice(&le(ptr));
        want.extend_from_slice(&le(size));
    }
    want.resize(page as usize, 0); // zero gap up to the first page boundary
    want.extend_from_slice(b"abcde");
    want.resize(2 * page as usize, 0); // the page is written whole
    for (sample, ptr, size) in [(0u64, page, 3u64), (1, page + 3, 2)] {
        want.extend_from_slice(&le(sample));
        want.extend_from_slice(&le(ptr));
        want.extend_from_slice(&le(size));
    }
    assert_eq!(got.len(), want.len());
    assert!(got == want, "first difference at byte {:?}", got.iter().zip(&want).position(|(a, b)| a != b));
}

/// No payloads: no pages, an empty allocation table at the end of the data table (FFCV's
/// `scalars` fixture has the same shape); image rows pad 13 → 16 before an `<i8`.
#[test]
fn scalars_only_file_has_no_pages_and_an_empty_alloc_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.beton");
    let fields = vec![FieldSpec::new("flag", FieldType::Bool), FieldSpec::new("n", FieldType::Int)];
    let samples: Vec<_> = (0..5).map(|i| vec![SampleValue::Bool(i % 2 == 0), SampleValue::Int(i)]).collect();
    let report = write_samples(&path, fields, &samples, options(2 * MIB, 2)).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let table = 24 + 2 * 1041;
    assert_eq!(report.num_pages, 0);
    assert_eq!(bytes.len(), table + 5 * 16, "bool <u1 @0, 7 padding bytes, <i8 @8");
    assert_eq!(&bytes[16..24], &le(bytes.len() as u64), "alloc_table_ptr = end of file");
    assert_eq!(&bytes[table..table + 16], &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.get(3, 0).unwrap(), Value::Bool(false));
    assert_eq!(ds.get(4, 1).unwrap(), Value::Int(4));
}

#[test]
fn empty_dataset_is_written_and_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.beton");
    let fields = vec![FieldSpec::new("blob", FieldType::Bytes)];
    write_samples(&path, fields, &[], options(2 * MIB, 1)).unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!((ds.num_samples(), ds.num_allocations(), ds.num_pages()), (0, 0, 0));
    assert_eq!(ds.file_len(), 24 + 1041);
    beton_storage::verify(&ds, true).unwrap();
}

/// Pages fill in sample order; a sample that does not fit goes whole to the next page, which
/// leaves a zero tail; every page is written whole.
#[test]
fn samples_never_straddle_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.beton");
    let fields = vec![FieldSpec::new("a", FieldType::Bytes), FieldSpec::new("b", FieldType::Bytes)];
    let chunk = vec![0xABu8; 700_000];
    let samples: Vec<_> =
        (0..7).map(|_| vec![SampleValue::Bytes(chunk.clone()), SampleValue::Bytes(vec![1; 100])]).collect();
    let report = write_samples(&path, fields, &samples, options(2 * MIB, 2)).unwrap();
    // 700_100 bytes a sample: two fit in a 2 MiB page (a third would need 2_100_300 > 2_097_152).
    assert_eq!(report.num_pages, 4);
    let ds = Dataset::open(&path).unwrap();
    for i in 0..7 {
        let allocs = ds.sample_allocations(i);
        assert_eq!(allocs.len(), 2);
        assert_eq!(allocs[0].ptr, ds.data_start() + (i / 2) * 2 * MIB + (i % 2) * 700_100, "sample {i}");
        assert_eq!(allocs[1].ptr, allocs[0].ptr + 700_000);
    }
    assert_eq!(ds.file_len(), ds.data_start() + 4 * 2 * MIB + 14 * 24);
    beton_storage::verify(&ds, false).unwrap();
}

#[test]
fn sample_larger_than_a_page_names_sample_and_needed_page_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.beton");
    let samples: Vec<_> =
        (0..4u64).map(|i| vec![SampleValue::Bytes(vec![0; 1000 + i as usize * 1_100_000])]).collect();
    let err =
        write_samples(&path, vec![FieldSpec::new("b", FieldType::Bytes)], &samples, options(2 * MIB, 2))
            .unwrap_err();
    match err {
        Error::SampleTooLarge { index, page_size, needed, .. } => {
            assert_eq!((index, page_size, needed), (2, 2 * MIB, 4 * MIB));
        }
        other => panic!("{other}"),
    }
    assert!(!path.exists());
}

/// Real photos (JPEG and PNG) in every write mode, 1 vs 2 threads: identical bytes.
#[test]
fn output_does_not_depend_on_thread_count() {
    let root = repo_root().join("examples/data/imagefolder/fish");
    let mut files: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.truncate(12);
    let dir = tempfile::tempdir().unwrap();
    for mode in [
        WriteMode::Raw,
        WriteMode::Jpg,
        WriteMode::Smart { threshold: 100_000 },
        WriteMode::Proportion { probability: 0.5 },
    ] {
        let image = ImageOptions { write_mode: mode, max_resolution: Some(64), ..ImageOptions::default() };
        let write = |threads: usize| {
            let path = dir.path().join(format!("det-{threads}.beton"));
            let fields =
                vec![FieldSpec::rgb_image("image", image.clone()), FieldSpec::new("label", FieldType::Int)];
            let opts = WriterOptions { seed: 42, chunk_size: 5, ..options(2 * MIB, threads) };
            Writer::new(&path, fields, opts)
                .unwrap()
                .write_indexed(files.len() as u64, |i| {
                    Ok(vec![
                        SampleValue::Image(ImageSource::File(files[i as usize].clone())),
                        SampleValue::Int(i as i64),
                    ])
                })
                .unwrap();
            std::fs::read(&path).unwrap()
        };
        assert!(write(1) == write(2), "{mode:?}: 1 and 2 threads differ");
    }
}

/// An iterator of unknown length goes through the scratch-file path; same bytes as indexed.
#[test]
fn iterator_source_matches_indexed_source() {
    let dir = tempfile::tempdir().unwrap();
    let fields = || vec![FieldSpec::new("t", FieldType::Text), FieldSpec::new("n", FieldType::Int)];
    let sample = |i: u64| vec![SampleValue::Text(format!("sample {i} ünïcödé")), SampleValue::Int(i as i64)];
    let a = dir.path().join("a.beton");
    let b = dir.path().join("b.beton");
    Writer::new(&a, fields(), options(2 * MIB, 2)).unwrap().write_indexed(50, |i| Ok(sample(i))).unwrap();
    let unknown_len = (0..100u64).filter(|i| i % 2 == 0).map(|i| Ok(sample(i / 2)));
    Writer::new(&b, fields(), options(2 * MIB, 2)).unwrap().write_iter(unknown_len).unwrap();
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 2, "scratch files left: {leftovers:?}");
}

fn only_file_is(dir: &Path, name: &str) {
    let names: Vec<_> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, vec![name.to_string()], "temporary files left behind");
}

/// A source error, a panic and a cancel mid-write: the existing destination is untouched and no
/// temporary file is left.
#[test]
fn failed_write_leaves_destination_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.beton");
    std::fs::write(&path, b"previous contents").unwrap();
    let fields = || vec![FieldSpec::new("b", FieldType::Bytes)];

    let err = Writer::new(&path, fields(), options(2 * MIB, 2))
        .unwrap()
        .write_indexed(1000, |i| {
            if i == 500 {
                Err("disk on fire".into())
            } else {
                Ok(vec![SampleValue::Bytes(vec![1; 5000])])
            }
        })
        .unwrap_err();
    assert!(matches!(err, Error::Source { index: 500, .. }), "{err}");
    assert!(err.to_string().contains("disk on fire"));
    assert_eq!(std::fs::read(&path).unwrap(), b"previous contents");
    only_file_is(dir.path(), "data.beton");

    let panicked = std::panic::catch_unwind(|| {
        Writer::new(&path, fields(), options(2 * MIB, 2)).unwrap().write_indexed(1000, |i| {
            assert!(i != 321, "injected panic");
            Ok(vec![SampleValue::Bytes(vec![2; 5000])])
        })
    });
    assert!(panicked.is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"previous contents");
    only_file_is(dir.path(), "data.beton");

    let cancel = WriterOptions {
        progress: Some(std::sync::Arc::new(|p: beton_storage::Progress| p.done < 100)),
        ..options(2 * MIB, 1)
    };
    let err = Writer::new(&path, fields(), cancel)
        .unwrap()
        .write_indexed(1000, |_| Ok(vec![SampleValue::Bytes(vec![3; 10])]))
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"previous contents");
    only_file_is(dir.path(), "data.beton");

    // And a successful write replaces it atomically.
    Writer::new(&path, fields(), options(2 * MIB, 1))
        .unwrap()
        .write_indexed(3, |_| Ok(vec![SampleValue::Bytes(vec![4; 10])]))
        .unwrap();
    assert_eq!(Dataset::open(&path).unwrap().num_samples(), 3);
    only_file_is(dir.path(), "data.beton");
}

#[test]
fn invalid_schemas_and_values_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.beton");
    let bad_names = ["", "seventeen_chars_x", "naïve", "dup"];
    for name in bad_names {
        let mut fields = vec![FieldSpec::new(name, FieldType::Int)];
        if name == "dup" {
            fields.push(FieldSpec::new("dup", FieldType::Float));
        }
        let err = Writer::new(&path, fields, WriterOptions::default()).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{name:?}: {err}");
    }
    let err = Writer::new(&path, vec![], WriterOptions::default()).unwrap_err();
    assert!(err.to_string().contains("no fields"), "{err}");
    for ps in [MIB, 3 * MIB, 1 << 32] {
        let err = Writer::new(&path, vec![FieldSpec::new("x", FieldType::Int)], options(ps, 1)).unwrap_err();
        assert!(err.to_string().contains("page_size"), "{err}");
    }
    let spec = ArraySpec::new(DType::parse("<f4").unwrap(), vec![2, 3]).unwrap();
    let cases: Vec<(FieldType, SampleValue, &str)> = vec![
        (FieldType::Int, SampleValue::Float(1.0), "expected a value for a IntField field, got a float"),
        (FieldType::Json, SampleValue::Json("{bad".into()), "not valid JSON"),
        (FieldType::NDArray(spec), SampleValue::NDArray(vec![0; 23]), "needs 24"),
        (FieldType::Array(DType::parse("<i2").unwrap()), SampleValue::Array(vec![0; 3]), "whole number"),
        (
            FieldType::Custom(CustomField {
                slot: Slot { size: 4, align: 1 },
                arguments: Box::new([0; 1024]),
            }),
            SampleValue::Custom(vec![0; 3]),
            "4-byte slot",
        ),
    ];
    for (ty, value, msg) in cases {
        let err = Writer::new(&path, vec![FieldSpec::new("f", ty.clone())], options(2 * MIB, 1))
            .unwrap()
            .write_indexed(10, |i| Ok(vec![if i == 6 { value.clone() } else { default_value(&ty) }]))
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::InvalidSample { index: 6, .. }), "{text}");
        assert!(text.contains("sample 6, field 'f'") && text.contains(msg), "{text}");
        assert!(!path.exists());
    }
}

fn default_value(ty: &FieldType) -> SampleValue {
    match ty {
        FieldType::Int => SampleValue::Int(0),
        FieldType::Json => SampleValue::Json("{}".into()),
        FieldType::NDArray(s) => SampleValue::NDArray(vec![0; s.nbytes() as usize]),
        FieldType::Array(_) => SampleValue::Array(vec![]),
        FieldType::Custom(CustomField { slot, .. }) => SampleValue::Custom(vec![0; slot.size]),
        other => panic!("{other:?}"),
    }
}

/// `tests/data/edge-jpegs` (manifest.json says what each file must give) through the writer:
/// valid files are stored upright in RGB at their shown size; invalid ones make the write fail
/// naming the sample, and nothing is written.
#[test]
fn edge_jpegs_through_the_writer() {
    let dir = data_dir().join("edge-jpegs");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let entries = manifest.as_array().unwrap();
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("edge.beton");
    let fields = || vec![FieldSpec::rgb_image("image", ImageOptions::with_mode(WriteMode::Raw))];
    let valid: Vec<&serde_json::Value> = entries.iter().filter(|e| e["valid"] == true).collect();
    assert!(valid.len() >= 20);
    Writer::new(&path, fields(), options(16 * MIB, 2))
        .unwrap()
        .write_indexed(valid.len() as u64, |i| {
            let file = dir.join(valid[i as usize]["file"].as_str().unwrap());
            Ok(vec![SampleValue::Image(ImageSource::File(file))])
        })
        .unwrap();
    let ds = Dataset::open(&path).unwrap();
    for (i, e) in valid.iter().enumerate() {
        let img = ds.get(i as u64, 0).unwrap().as_image().unwrap();
        let (w, h) = (e["width"].as_u64().unwrap() as u16, e["height"].as_u64().unwrap() as u16);
        // Orientations 5-8 swap the shown width and height.
        let shown = if e["orientation"].as_u64().is_some_and(|o| o >= 5) { (h, w) } else { (w, h) };
        assert_eq!((img.width, img.height), shown, "{}", e["file"]);
        assert_eq!(img.data.len(), img.width as usize * img.height as usize * 3, "{}", e["file"]);
    }
    // A PNG named .jpg is sniffed by its magic bytes and decoded as PNG (the manifest allows
    // that); stored as JPEG it must be a real JPEG, never the PNG bytes.
    let jpg = vec![FieldSpec::rgb_image("image", ImageOptions::with_mode(WriteMode::Jpg))];
    let png_path = out.path().join("png.beton");
    Writer::new(&png_path, jpg, options(2 * MIB, 1))
        .unwrap()
        .write_indexed(1, |_| Ok(vec![SampleValue::Image(ImageSource::File(dir.join("png-renamed.jpg")))]))
        .unwrap();
    let ds = Dataset::open(&png_path).unwrap();
    let img = ds.get(0, 0).unwrap().as_image().unwrap();
    assert_eq!(
        (img.mode, img.width, img.height, &img.data[..2]),
        (ImageMode::Jpg, 96, 64, &[0xFF, 0xD8][..])
    );

    for e in entries.iter().filter(|e| e["valid"] == false && e["file"] != "png-renamed.jpg") {
        let file = dir.join(e["file"].as_str().unwrap());
        let err = Writer::new(path.with_extension("bad"), fields(), options(2 * MIB, 1))
            .unwrap()
            .write_indexed(3, |i| {
                let src = if i == 1 { file.clone() } else { dir.join("tiny-1x1.jpg") };
                Ok(vec![SampleValue::Image(ImageSource::File(src))])
            })
            .unwrap_err();
        assert!(err.to_string().starts_with("sample 1, field 'image': "), "{}: {err}", e["file"]);
        assert!(!path.with_extension("bad").exists());
    }
}

/// `write_fixed` (table-only schemas, straight into the data table) writes the very bytes
/// `write_indexed` writes for the same values, whatever the thread count; refuses payload
/// fields; names the first bad sample.
#[test]
fn write_fixed_matches_write_indexed_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let custom =
        FieldType::Custom(CustomField { slot: Slot { size: 4, align: 4 }, arguments: Box::new([0; 1024]) });
    let fields = vec![
        FieldSpec::new("id", FieldType::Int),
        FieldSpec::new("flag", FieldType::Bool),
        FieldSpec::new("score", FieldType::Float),
        FieldSpec::new("raw", custom),
    ];
    let value = |k: usize, i: u64| match k {
        0 => SampleValue::Int(i as i64 * 3 - 7),
        1 => SampleValue::Bool(i % 3 == 0),
        2 => SampleValue::Float(i as f64 / 7.0),
        _ => SampleValue::Custom((i as u32).to_le_bytes().to_vec()),
    };
    let n = 5_000u64;
    let by_value = tmp.path().join("indexed.beton");
    Writer::new(&by_value, fields.clone(), options(2 * MIB, 1))
        .unwrap()
        .write_indexed(n, |i| Ok((0..4).map(|k| value(k, i)).collect()))
        .unwrap();
    for threads in [1, 3] {
        let fixed = tmp.path().join(format!("fixed-{threads}.beton"));
        let report = Writer::new(&fixed, fields.clone(), options(2 * MIB, threads))
            .unwrap()
            .write_fixed(n, value)
            .unwrap();
        assert_eq!(report.num_samples, n);
        assert_eq!(std::fs::read(&fixed).unwrap(), std::fs::read(&by_value).unwrap(), "{threads} threads");
    }
    // With the default split reserve too.
    let (a, b) = (tmp.path().join("a.beton"), tmp.path().join("b.beton"));
    let defaults = WriterOptions::default();
    Writer::new(&a, fields.clone(), defaults.clone()).unwrap().write_fixed(n, value).unwrap();
    Writer::new(&b, fields.clone(), defaults.clone())
        .unwrap()
        .write_indexed(n, |i| Ok((0..4).map(|k| value(k, i)).collect()))
        .unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

    let bad = tmp.path().join("bad.beton");
    let err = Writer::new(&bad, fields.clone(), defaults.clone())
        .unwrap()
        .write_fixed(n, |k, i| if k == 2 && i == 4321 { SampleValue::Text("x".into()) } else { value(k, i) })
        .unwrap_err()
        .to_string();
    assert!(err.contains("sample 4321") && err.contains("score"), "{err}");
    assert!(!bad.exists(), "nothing at the destination");
    let with_bytes = vec![FieldSpec::new("id", FieldType::Int), FieldSpec::new("blob", FieldType::Bytes)];
    let err = Writer::new(&bad, with_bytes, defaults).unwrap().write_fixed(1, value).unwrap_err().to_string();
    assert!(err.contains("blob") && err.contains("payloads"), "{err}");
}

/// A custom field that owns payloads (FFCV's `malloc`): each payload lands in the sample's
/// page, its pointer (at the slot offset the caller named) is the payload's file offset, the
/// allocation table lists it, and the file does not depend on the thread count; bad pointer
/// offsets are named.
#[test]
fn custom_fields_with_payloads_point_at_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let custom =
        FieldType::Custom(CustomField { slot: Slot { size: 20, align: 4 }, arguments: Box::new([7; 1024]) });
    let fields = || vec![FieldSpec::new("n", FieldType::Int), FieldSpec::new("c", custom.clone())];
    let payload = |i: u64| vec![i as u8; 1 + (i % 5) as usize];
    let sample = |i: u64| {
        let mut slot = vec![0u8; 20];
        slot[0..4].copy_from_slice(&(i as u32).to_le_bytes());
        // Two payloads: pointers at offsets 4 and 12.
        Ok(vec![
            SampleValue::Int(i as i64),
            SampleValue::CustomWithPayloads { slot, payloads: vec![(4, payload(i)), (12, payload(i + 1))] },
        ])
    };
    let mut files = Vec::new();
    for threads in [1, 3] {
        let path = dir.path().join(format!("c{threads}.beton"));
        Writer::new(&path, fields(), options(2 * MIB, threads)).unwrap().write_indexed(40, sample).unwrap();
        files.push(std::fs::read(&path).unwrap());
    }
    assert_eq!(files[0], files[1]);
    let bytes = files.remove(0);
    let ds = OpenOptions::new().custom_layout("c", 20, 4).open_bytes(bytes.clone()).unwrap();
    assert!(ds.has_custom_payloads());
    assert_eq!(ds.num_allocations(), 80);
    for i in 0..40u64 {
        let Value::Custom(slot) = ds.get(i, 1).unwrap() else { panic!("not custom") };
        assert_eq!(&slot[0..4], &(i as u32).to_le_bytes());
        for (at, want) in [(4, payload(i)), (12, payload(i + 1))] {
            let ptr = u64::from_le_bytes(slot[at..at + 8].try_into().unwrap());
            assert_eq!(&bytes[ptr as usize..ptr as usize + want.len()], &want[..], "sample {i}");
            assert!(ds.sample_allocations(i).iter().any(|a| a.ptr == ptr && a.size == want.len() as u64));
        }
    }

    let path = dir.path().join("bad.beton");
    for (payloads, msg) in [
        (vec![(16usize, vec![1u8])], "does not fit the 20-byte slot"),
        (vec![(4, vec![1]), (8, vec![2])], "overlap"),
    ] {
        let err = Writer::new(&path, fields(), options(2 * MIB, 1))
            .unwrap()
            .write_indexed(3, |i| {
                let value = if i == 2 {
                    SampleValue::CustomWithPayloads { slot: vec![0; 20], payloads: payloads.clone() }
                } else {
                    SampleValue::Custom(vec![0; 20])
                };
                Ok(vec![SampleValue::Int(0), value])
            })
            .unwrap_err();
        assert!(err.to_string().contains("sample 2, field 'c'") && err.to_string().contains(msg), "{err}");
        assert!(!path.exists());
    }
}
