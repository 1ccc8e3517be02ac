//! The loader never aborts, hangs or dies on a signal, whatever the file holds: corrupt sizes,
//! bit flips anywhere, truncation (before opening and while reading), panicking decoders.
//! Every epoch ends with its batches or an error, within a time bound, its threads joined.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use beton_loader::image::{CenterCropRGBImageDecoder, ImagePipeline, RandomResizedCropRGBImageDecoder};
use beton_loader::{FieldDecoder, Loader, OrderOption};
use beton_storage::{
    ArraySpec, DType, Dataset, FieldSpec, FieldType, ImageSource, OpenOptions, Pixels, SampleValue,
    WriterOptions,
};

const N: u64 = 40;

fn image(i: u64, w: u32, h: u32, channels: u8) -> ImageSource {
    let data = (0..w * h * channels as u32).map(|k| ((k as u64 * 7 + i * 31) % 251) as u8).collect();
    ImageSource::Pixels(Pixels { width: w, height: h, channels, data })
}

/// A small file with a field of every type: int, float, bool, bytes, JSON, text, array,
/// ndarray, and JPEG + raw RGB images and a grey image. Page size 2 MiB, one page.
fn every_field_type(path: &Path) {
    let fields = beton_testkit::schema(concat!(
        "label:int score:float flag:bool blob:bytes meta:json text:text ",
        "ints:array:<i4 arr:ndarray:<f4:2x3 jpg:jpg raw:raw grey:grey_image",
    ));
    beton_testkit::write(path, fields, N, |i| {
        vec![
            SampleValue::Int(i as i64),
            SampleValue::Float(i as f64 / 2.0),
            SampleValue::Bool(i % 3 == 0),
            SampleValue::Bytes(vec![i as u8; (i * 13 % 300) as usize]),
            SampleValue::Json(format!("{{\"i\": {i}}}")),
            SampleValue::Text(format!("text {i}")),
            SampleValue::Array((0..i % 5).flat_map(|k| (k as i32).to_le_bytes()).collect()),
            SampleValue::NDArray((0..6).flat_map(|k| (k as f32 + i as f32).to_le_bytes()).collect()),
            SampleValue::Image(image(i, 24 + (i % 7) as u32, 20 + (i % 5) as u32, 3)),
            SampleValue::Image(image(i, 8, 6, 3)),
            SampleValue::Image(image(i, 16, 12 + (i % 3) as u32, 1)),
        ]
    });
}

/// A loader over every field of `ds` (crop decoders for the images).
fn loader(
    ds: Arc<Dataset>,
    order: OrderOption,
    os_cache: bool,
    threads: usize,
) -> beton_loader::Result<Loader> {
    let rrc: Arc<dyn FieldDecoder> =
        Arc::new(ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((16, 16))));
    let cc: Arc<dyn FieldDecoder> = Arc::new(ImagePipeline::new(CenterCropRGBImageDecoder::new((8, 8))));
    Loader::builder(ds)
        .batch_size(7)
        .threads(threads)
        .order(order)
        .drop_last(false)
        .os_cache(os_cache)
        .decoder("jpg", Arc::clone(&rrc))
        .decoder("raw", cc)
        .decoder("grey", rrc)
        .build()
}

/// What one epoch over the file at `path` came to: its batches, or the first error.
#[derive(Debug)]
enum Outcome {
    OpenFailed,
    Batches(usize),
    Error(String),
}

/// Opens `path` and runs one epoch on another thread; panics if it takes longer than `bound`
/// (a hang) and checks the epoch's threads were joined when it ended.
fn run_epoch(path: &Path, order: OrderOption, os_cache: bool, bound: Duration) -> Outcome {
    let (tx, rx) = mpsc::channel();
    let shown = path.display().to_string();
    let path = path.to_path_buf();
    let handle = std::thread::spawn(move || {
        let outcome = (|| {
            let Ok(ds) = OpenOptions::new().defer_allocation_checks(true).open(&path) else {
                return Outcome::OpenFailed;
            };
            let mut l = match loader(Arc::new(ds), order, os_cache, 2) {
                Ok(l) => l,
                Err(e) => return Outcome::Error(e.to_string()),
            };
            let epoch = match l.next_epoch() {
                Ok(e) => e,
                Err(e) => return Outcome::Error(e.to_string()),
            };
            let mut n = 0;
            for b in epoch {
                match b {
                    Ok(_) => n += 1,
                    Err(e) => return Outcome::Error(e.to_string()),
                }
            }
            Outcome::Batches(n)
        })();
        let _ = tx.send(outcome);
    });
    let outcome = rx.recv_timeout(bound).unwrap_or_else(|_| panic!("epoch over {shown} hung"));
    handle.join().expect("the epoch's thread ended cleanly");
    outcome
}

/// A deterministic generator for the corruptions.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// 200 corrupted copies (bit flips in the data table, the allocation table and the heap) and
/// 50 truncations, each through every order and both caches: data or an error, never a hang,
/// an abort or a signal.
#[test]
fn corrupted_copies_end_every_epoch_with_data_or_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.beton");
    every_field_type(&good);
    let bytes = std::fs::read(&good).unwrap();
    let ds = Dataset::open(&good).unwrap();
    let table = (ds.data_table_offset() as usize, ds.data_table_end() as usize);
    let heap = (ds.data_start() as usize, ds.header().alloc_table_ptr as usize);
    let allocs = (ds.header().alloc_table_ptr as usize, bytes.len());
    drop(ds);
    let orders =
        [OrderOption::Sequential, OrderOption::Random, OrderOption::QuasiRandom { buffer_pages: None }];
    let bound = Duration::from_secs(60);
    match run_epoch(&good, OrderOption::Sequential, true, bound) {
        Outcome::Batches(n) => assert_eq!(n, N.div_ceil(7) as usize),
        other => panic!("the good file: {other:?}"),
    }
    let mut rng = Lcg(7);
    let (mut errors, mut whole) = (0, 0);
    let copy = dir.path().join("copy.beton");
    for k in 0..200 {
        let mut b = bytes.clone();
        // Table and allocation flips are what make sizes lie; a few heap flips for the decoders.
        let (lo, hi) = match k % 5 {
            0..=2 => table,
            3 => allocs,
            _ => heap,
        };
        for _ in 0..1 + rng.next() % 3 {
            let at = lo + (rng.next() as usize) % (hi - lo);
            b[at] ^= 1 << (rng.next() % 8);
        }
        std::fs::write(&copy, &b).unwrap();
        let order = orders[k % 3];
        match run_epoch(&copy, order, k % 2 == 0, bound) {
            Outcome::Error(e) => {
                assert!(!e.is_empty());
                errors += 1
            }
            Outcome::Batches(_) => whole += 1,
            Outcome::OpenFailed => {}
        }
    }
    for k in 0..50 {
        let len = (bytes.len() as u64 * k / 50) as usize + (rng.next() as usize % 64);
        std::fs::write(&copy, &bytes[..len.min(bytes.len() - 1)]).unwrap();
        let outcome = run_epoch(&copy, orders[k as usize % 3], k % 2 == 1, bound);
        assert!(!matches!(outcome, Outcome::Batches(_)), "a truncated file loaded: {outcome:?}");
    }
    assert!(errors > 20 && whole > 0, "{errors} epochs failed, {whole} were whole");
}

/// A size word in a row that is larger than the file is a `Corrupt` error naming the file,
/// sample and field when the epoch starts, before any buffer is sized from it (it used to abort
/// the process: `memory allocation of 4398046511160 bytes failed`).
#[test]
fn a_huge_size_word_is_an_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.beton");
    every_field_type(&path);
    let ds = Dataset::open(&path).unwrap();
    let blob = ds.field_index("blob").unwrap();
    let at = ds.data_table_offset() as usize + 5 * ds.row_size() + ds.fields()[blob].offset() + 8;
    drop(ds);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at..at + 8].copy_from_slice(&(1u64 << 42).to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let ds = Arc::new(Dataset::open(&path).unwrap());
    let err = ds.get(5, blob).unwrap_err().to_string();
    assert!(err.contains("sample 5, field 'blob'"), "{err}");
    let mut l = loader(ds, OrderOption::Sequential, true, 2).unwrap();
    let err = l.next_epoch().err().expect("an error").to_string();
    assert!(err.contains("d.beton") && err.contains("sample 5, field 'blob'"), "{err}");
}

/// An array descriptor too large for any page (a corrupt shape) is an error, not an attempt to
/// allocate its batches.
#[test]
fn an_impossible_array_shape_is_an_error() {
    let (_dir, path) = beton_testkit::temp_path("a.beton");
    let spec = ArraySpec::new(DType::parse("<u1").unwrap(), vec![1 << 30, 1 << 20]).unwrap();
    beton_testkit::write(&path, vec![FieldSpec::new("arr", FieldType::NDArray(spec))], 0, |_| unreachable!());
    // The file has no samples, so it is valid; pretend it has one by patching the header.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..16].copy_from_slice(&1u64.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let Ok(ds) = OpenOptions::new().defer_allocation_checks(true).open(&path) else { return };
    let err = Loader::builder(Arc::new(ds)).build().and_then(|mut l| l.next_epoch().map(|_| ()));
    let err = err.expect_err("an error").to_string();
    assert!(err.contains("'arr'"), "{err}");
}

/// A file truncated by another program while the loader reads it: an error naming the file,
/// not SIGBUS, with the OS cache (reads through the map) and the process cache (pread).
#[test]
fn a_file_truncated_while_loading_is_an_error_not_a_signal() {
    for os_cache in [true, false] {
        let (_dir, path) = beton_testkit::temp_path("t.beton");
        // Several pages of payload, so that the truncation cuts pages the loader will read.
        let options = WriterOptions { page_size: 1 << 21, ..WriterOptions::default() };
        beton_testkit::write_with(&path, beton_testkit::schema("label:int blob:bytes"), options, 400, |i| {
            vec![SampleValue::Int(i as i64), SampleValue::Bytes(vec![i as u8; 30_000])]
        });
        let ds = Arc::new(Dataset::open(&path).unwrap());
        let mut l = Loader::builder(Arc::clone(&ds))
            .batch_size(16)
            .threads(2)
            .os_cache(os_cache)
            .drop_last(false)
            .build()
            .unwrap();
        let keep = ds.data_start() + (1 << 20);
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(keep).unwrap();
        let err = match l.next_epoch() {
            Err(e) => e.to_string(),
            Ok(epoch) => epoch
                .filter_map(|b| b.err())
                .map(|e| e.to_string())
                .next()
                .expect("an error once the reads pass the new end"),
        };
        assert!(err.contains("t.beton"), "os_cache {os_cache}: {err}");
        // The handle stays unusable (it may hold zeros where data was), with the same error.
        if os_cache {
            assert!(ds.check_intact().is_err());
            let e = ds.get(399, 1).unwrap_err();
            assert!(matches!(e, beton_storage::Error::FileChanged { .. }), "{e}");
        }
    }
}

/// A thread count no machine has is refused with the argument's name, not obeyed.
#[test]
fn absurd_thread_counts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("d.beton");
    every_field_type(&path);
    let ds = Arc::new(Dataset::open(&path).unwrap());
    let err = Loader::builder(ds).threads(100_000).build().err().expect("refused").to_string();
    assert!(err.contains("threads") && err.contains("100000"), "{err}");
}
