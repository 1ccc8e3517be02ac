//! The page size a write chooses when none is given (issue 39: small data files stay small): a
//! file is its payload plus a bounded overhead, streamed or not, at any thread count; large
//! files and files without payloads keep FFCV's 8 MiB; a page size given is honoured.

use std::path::{Path, PathBuf};

use beton_storage::{
    Dataset, FieldSpec, FieldType, ImageOptions, ImageSource, SampleValue, Value, WriteMode, WriteReport,
    Writer, WriterOptions,
};

use crate::common::*;

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

/// `n` JPEGs of the example ImageFolder, in name order.
fn jpegs(n: usize) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walk(&repo_root().join("examples/data/imagefolder"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .collect();
    files.sort();
    assert!(files.len() >= n, "{} JPEGs in the example folder", files.len());
    files.truncate(n);
    files
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Writes `files` as an image field (JPEGs kept as they are) and an int label.
fn write_images(path: &Path, files: &[PathBuf], options: WriterOptions) -> WriteReport {
    // No restart markers: the JPEGs go in as they are.
    let image =
        ImageOptions { write_mode: WriteMode::Jpg, jpeg_restart_interval: 0, ..ImageOptions::default() };
    let fields = vec![FieldSpec::rgb_image("image", image), FieldSpec::new("label", FieldType::Int)];
    Writer::new(path, fields, options)
        .unwrap()
        .write_indexed(files.len() as u64, |i| {
            let bytes = std::fs::read(&files[i as usize])?;
            Ok(vec![SampleValue::Image(ImageSource::Encoded(bytes)), SampleValue::Int(i as i64)])
        })
        .unwrap()
}

/// Payload bytes of a file (its allocations), and what is neither payload nor the bytes every
/// layout has (header, descriptors, table, the default room for splits, allocation table).
fn payload_and_padding(ds: &Dataset) -> (u64, u64) {
    let payload: u64 = (0..ds.num_allocations()).map(|k| ds.allocation(k).size).sum();
    let n = ds.num_samples();
    let fixed =
        ds.data_table_offset() + n * ds.row_size() as u64 + (64 * KIB + 2 * n) + ds.num_allocations() * 24;
    (payload, ds.file_len() - payload - fixed)
}

#[test]
fn two_images_write_about_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.beton");
    let files = jpegs(2);
    let report = write_images(&path, &files, WriterOptions::default());
    let ds = Dataset::open(&path).unwrap();
    let (payload, padding) = payload_and_padding(&ds);
    assert_eq!(payload, files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum::<u64>());
    // The smallest power of two that holds the larger image (both fit one page).
    let largest = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).max().unwrap();
    assert_eq!((report.page_size, report.num_pages), (largest.next_power_of_two(), 1), "{report:?}");
    // Not two 8 MiB pages: the padding is within a page at each end of the pages.
    assert!(padding < 2 * ds.page_size(), "{padding} bytes of padding, {report:?}");
    assert!(ds.file_len() < 100 * KIB, "{report:?}");
    beton_storage::verify(&ds, true).unwrap();
    for (i, f) in files.iter().enumerate() {
        let Value::Image(img) = ds.get(i as u64, 0).unwrap() else { panic!("sample {i}") };
        assert_eq!(img.data, std::fs::read(f).unwrap(), "sample {i}");
    }
}

const MIN_AUTO: u64 = beton_storage::writer::MIN_AUTO_PAGE_SIZE;
#[test]
fn fifty_small_images_are_not_padded_to_ffcvs_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fifty.beton");
    let report = write_images(&path, &jpegs(50), WriterOptions::default());
    let ds = Dataset::open(&path).unwrap();
    let (payload, padding) = payload_and_padding(&ds);
    assert!(ds.page_size() < 8 * MIB && ds.page_size() >= MIN_AUTO, "{report:?}");
    // Padding: the ends of the pages, and the tails pages leave (a sample goes whole into one).
    assert!(
        padding <= payload / 8 + 2 * ds.page_size(),
        "{padding} bytes of padding for {payload}: {report:?}"
    );
    assert!(ds.file_len() < payload + 256 * KIB, "{report:?}");
    beton_storage::verify(&ds, true).unwrap();
}

/// A page size given is used as it is, small payload or not: FFCV's layout, a head page and
/// whole pages.
#[test]
fn an_explicit_page_size_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    for page_size in [2 * MIB, 8 * MIB] {
        let path = dir.path().join(format!("{page_size}.beton"));
        let options = WriterOptions { page_size, ..WriterOptions::default() };
        let report = write_images(&path, &jpegs(2), options);
        assert_eq!((report.page_size, report.num_pages), (page_size, 1));
        let ds = Dataset::open(&path).unwrap();
        assert_eq!(ds.page_size(), page_size);
        assert_eq!(ds.data_start(), page_size, "the head takes a whole page");
        assert!(ds.file_len() > 2 * page_size);
    }
}

/// Streamed (length unknown, pages through the scratch file), by chunks of any size, on any
/// number of threads: the same page size and the same bytes.
#[test]
fn the_choice_does_not_depend_on_threads_chunks_or_streaming() {
    let dir = tempfile::tempdir().unwrap();
    let fields = || vec![FieldSpec::new("b", FieldType::Bytes), FieldSpec::new("n", FieldType::Int)];
    // Sizes from 0 to 30 KB: pages of a few samples each.
    let sample = |i: u64| {
        vec![SampleValue::Bytes(vec![i as u8; (i * 7919 % 30_000) as usize]), SampleValue::Int(i as i64)]
    };
    let n = 300;
    let mut written = Vec::new();
    for (threads, chunk_size) in [(1, 256), (2, 7), (2, 1)] {
        let options = WriterOptions { num_threads: threads, chunk_size, ..WriterOptions::default() };
        let path = dir.path().join(format!("indexed-{threads}-{chunk_size}.beton"));
        let report = Writer::new(&path, fields(), options.clone())
            .unwrap()
            .write_indexed(n, |i| Ok(sample(i)))
            .unwrap();
        assert!(report.page_size < 8 * MIB, "{report:?}");
        written.push(std::fs::read(&path).unwrap());
        let path = dir.path().join(format!("streamed-{threads}-{chunk_size}.beton"));
        let unknown_len = (0..2 * n).filter(|i| i % 2 == 0).map(|i| Ok(sample(i / 2)));
        Writer::new(&path, fields(), options).unwrap().write_iter(unknown_len).unwrap();
        written.push(std::fs::read(&path).unwrap());
    }
    assert!(written.iter().all(|w| *w == written[0]), "files differ");
    let path = dir.path().join("indexed-1-256.beton");
    let ds = Dataset::open(&path).unwrap();
    beton_storage::verify(&ds, false).unwrap();
    for i in 0..n {
        assert_eq!(
            ds.get(i, 0).unwrap(),
            Value::Bytes(&vec![i as u8; (i * 7919 % 30_000) as usize]),
            "sample {i}"
        );
    }
}

/// More than `DECIDE_BYTES` of payload: FFCV's 8 MiB pages, written as they stream.
#[test]
fn large_files_keep_ffcvs_page_size() {
    let dir = tempfile::tempdir().unwrap();
    let chunk = 7_500_000usize;
    let n = beton_storage::writer::DECIDE_BYTES / chunk as u64 + 2;
    let sample = |i: u64| vec![SampleValue::Bytes(vec![i as u8; chunk])];
    let path = dir.path().join("large.beton");
    let fields = vec![FieldSpec::new("b", FieldType::Bytes)];
    let report = Writer::new(&path, fields.clone(), WriterOptions::default())
        .unwrap()
        .write_indexed(n, |i| Ok(sample(i)))
        .unwrap();
    assert_eq!((report.page_size, report.num_pages), (8 * MIB, n), "{report:?}");
    let ds = Dataset::open(&path).unwrap();
    beton_storage::verify(&ds, false).unwrap();
    assert_eq!(ds.get(n - 1, 0).unwrap(), Value::Bytes(&vec![(n - 1) as u8; chunk]));
    // A sample larger than 8 MiB among the first ones: the power of two that holds it.
    let path = dir.path().join("wide.beton");
    let report = Writer::new(&path, fields, WriterOptions::default())
        .unwrap()
        .write_iter([Ok(vec![SampleValue::Bytes(vec![1; 9 << 20])])])
        .unwrap();
    assert_eq!(report.page_size, 16 * MIB);
    beton_storage::verify(&Dataset::open(&path).unwrap(), false).unwrap();
}

/// Scalars only: no pages, and the header names FFCV's page size (which groups table rows in
/// the loader's page-aware order), through either write path.
#[test]
fn files_without_payloads_keep_ffcvs_page_size() {
    let dir = tempfile::tempdir().unwrap();
    let fields = || vec![FieldSpec::new("n", FieldType::Int)];
    let a = dir.path().join("a.beton");
    let report = Writer::new(&a, fields(), WriterOptions::default())
        .unwrap()
        .write_indexed(10, |i| Ok(vec![SampleValue::Int(i as i64)]))
        .unwrap();
    assert_eq!((report.page_size, report.num_pages), (8 * MIB, 0));
    let b = dir.path().join("b.beton");
    let report = Writer::new(&b, fields(), WriterOptions::default())
        .unwrap()
        .write_fixed(10, |_, i| SampleValue::Int(i as i64))
        .unwrap();
    assert_eq!((report.page_size, report.num_pages), (8 * MIB, 0));
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap());
}
