//! Storage benchmarks. Every group holds its own baselines, so that each figure reads as a ratio
//! measured side by side in one run (the bench machine is small, noisy and shared):
//!
//! - `write_images/bundled`: writer images/s over the 155 bundled photos
//!   (examples/data/imagefolder: 134 JPEG + 21 PNG), raw and jpg q90 at max_resolution 256, with
//!   1 and 2 threads, plus jpg without JPEG passthrough (what FFCV always does: re-encode).
//!   Baselines: the codec floor (plain turbojpeg decode + encode q90 of every image at full size,
//!   one thread, no resize, nothing written; PNGs decoded with the `png` crate), decode alone, and
//!   a memcpy of the file bytes.
//! - `write_images/corpus`: the same over `$BETON_BENCH_CORPUS` (an ImageFolder, e.g. made by
//!   `shared/tools/bench-corpus.sh`), skipped with a note when unset.
//! - `open`: `Dataset::open` of a 10M-row and a 1M-row Int+Float file and of a 1M-image file
//!   (1M allocation entries, 2 MiB pages), and open + first access of one sample (for images:
//!   its payload, which builds the lazy allocation index). Baselines: `File::open` + mmap of the
//!   same file, reading its 24-byte header, and (images) touching every byte of the allocation
//!   table through a map.
//!
//! Run: `cargo bench --bench storage` (see benches/README.md).

use std::hint::black_box;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use beton_storage::imagefolder;
use beton_storage::{
    Dataset, FieldSpec, FieldType, ImageOptions, ImageSource, Pixels, SampleValue, WriteMode, Writer,
    WriterOptions,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput};
use turbojpeg::{PixelFormat, Subsamp};

/// Scratch space for written files: under the target directory, on the same disk as the sources.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir in the target directory")
}

/// Decodes an image file's bytes with the plain codecs: turbojpeg for JPEG, the `png` crate for
/// PNG. Returns the pixels, width, height, pitch and pixel format.
fn plain_decode(bytes: &[u8]) -> (Vec<u8>, usize, usize, usize, PixelFormat) {
    if bytes.starts_with(&[0xFF, 0xD8]) {
        let img = turbojpeg::decompress(bytes, PixelFormat::RGB).expect("JPEG decodes");
        return (img.pixels, img.width, img.height, img.pitch, PixelFormat::RGB);
    }
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("PNG header");
    let mut buf = vec![0u8; reader.output_buffer_size().expect("PNG size")];
    let info = reader.next_frame(&mut buf).expect("PNG decodes");
    let format = match info.color_type {
        png::ColorType::Rgb => PixelFormat::RGB,
        png::ColorType::Rgba => PixelFormat::RGBA,
        png::ColorType::Grayscale => PixelFormat::GRAY,
        other => panic!("baseline handles RGB, RGBA and grey PNGs, not {other:?}"),
    };
    (buf, info.width as usize, info.height as usize, info.line_size, format)
}

/// The codec floor for one image: decode, then JPEG-encode at q90 (4:2:0) at full size.
fn plain_decode_encode_q90(bytes: &[u8]) -> usize {
    let (pixels, width, height, pitch, format) = plain_decode(bytes);
    let subsamp = if format == PixelFormat::GRAY { Subsamp::Gray } else { Subsamp::Sub2x2 };
    let image = turbojpeg::Image { pixels: pixels.as_slice(), width, pitch, height, format };
    turbojpeg::compress(image, 90, subsamp).expect("JPEG encodes").len()
}

fn write_group(c: &mut Criterion, name: &str, root: &Path) {
    let samples = imagefolder::scan(root).expect("an ImageFolder").samples;
    let n = samples.len() as u64;
    let dir = scratch();
    let out = dir.path().join("bench.beton");
    let mut g = c.benchmark_group(format!("write_images/{name}"));
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(n));

    let variants = [
        ("beton_raw_max256", WriteMode::Raw, true, &[1, 2][..]),
        ("beton_jpg_q90_max256", WriteMode::Jpg, true, &[1, 2][..]),
        ("beton_jpg_q90_max256_no_passthrough", WriteMode::Jpg, false, &[1][..]),
    ];
    for (label, write_mode, jpeg_passthrough, threads) in variants {
        for &num_threads in threads {
            let image =
                ImageOptions { write_mode, max_resolution: Some(256), jpeg_quality: 90, jpeg_passthrough };
            g.bench_function(BenchmarkId::new(label, format!("{num_threads}_thread")), |b| {
                b.iter(|| {
                    let fields =
                        vec![FieldSpec::rgb_image("image", image.clone()), FieldSpec::new("label", FieldType::Int)];
                    let options = WriterOptions { num_threads, ..WriterOptions::default() };
                    Writer::new(&out, fields, options)
                        .expect("writer")
                        .write_indexed(n, |i| {
                            let (path, label) = &samples[i as usize];
                            Ok(vec![
                                SampleValue::Image(ImageSource::File(path.clone())),
                                SampleValue::Int(i64::from(*label)),
                            ])
                        })
                        .expect("write")
                })
            });
        }
    }
    g.bench_function(BenchmarkId::new("baseline_plain_decode_encode_q90", "1_thread"), |b| {
        b.iter(|| {
            let mut total = 0;
            for (path, _) in &samples {
                total += plain_decode_encode_q90(&std::fs::read(path).expect("read"));
            }
            total
        })
    });
    g.bench_function(BenchmarkId::new("baseline_plain_decode", "1_thread"), |b| {
        b.iter(|| {
            let mut total = 0;
            for (path, _) in &samples {
                total += plain_decode(&std::fs::read(path).expect("read")).0.len();
            }
            total
        })
    });
    g.bench_function(BenchmarkId::new("baseline_memcpy_files", "1_thread"), |b| {
        b.iter(|| {
            let mut all = Vec::new();
            for (path, _) in &samples {
                all.extend_from_slice(&std::fs::read(path).expect("read"));
            }
            all
        })
    });
    g.finish();
}

fn write_images(c: &mut Criterion) {
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/imagefolder");
    write_group(c, "bundled", &bundled);
    match std::env::var_os("BETON_BENCH_CORPUS") {
        Some(dir) => write_group(c, "corpus", Path::new(&dir)),
        None => eprintln!(
            "write_images/corpus skipped: set BETON_BENCH_CORPUS=DIR (an ImageFolder, e.g. from \
             `bash shared/tools/bench-corpus.sh DIR 1000 5 0`)"
        ),
    }
}

fn write_scalars(path: &Path, n: u64) {
    let fields = vec![FieldSpec::new("label", FieldType::Int), FieldSpec::new("score", FieldType::Float)];
    Writer::new(path, fields, WriterOptions { chunk_size: 1 << 16, ..WriterOptions::default() })
        .expect("writer")
        .write_indexed(n, |i| Ok(vec![SampleValue::Int(i as i64), SampleValue::Float(i as f64 * 0.5)]))
        .expect("write scalars");
}

fn write_tiny_images(path: &Path, n: u64) {
    let raw = ImageOptions { write_mode: WriteMode::Raw, ..ImageOptions::default() };
    let options = WriterOptions { page_size: 1 << 21, chunk_size: 1 << 16, ..WriterOptions::default() };
    Writer::new(path, vec![FieldSpec::rgb_image("image", raw)], options)
        .expect("writer")
        .write_indexed(n, |i| {
            let px = Pixels { width: 1, height: 1, channels: 3, data: vec![i as u8; 3] };
            Ok(vec![SampleValue::Image(ImageSource::Pixels(px))])
        })
        .expect("write images");
}

fn open(c: &mut Criterion) {
    let dir = scratch();
    let rows_10m = dir.path().join("rows-10m.beton");
    let rows_1m = dir.path().join("rows-1m.beton");
    let images_1m = dir.path().join("images-1m.beton");
    let t = std::time::Instant::now();
    write_scalars(&rows_10m, 10_000_000);
    write_scalars(&rows_1m, 1_000_000);
    write_tiny_images(&images_1m, 1_000_000);
    eprintln!("open: wrote the 10M-row, 1M-row and 1M-image files in {:.1} s", t.elapsed().as_secs_f64());

    let mut g = c.benchmark_group("open");
    g.sample_size(10).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    for (name, path) in [("10m_rows", &rows_10m), ("1m_rows", &rows_1m), ("1m_images", &images_1m)] {
        g.bench_function(BenchmarkId::new("beton_open", name), |b| {
            b.iter(|| Dataset::open(path).expect("open"))
        });
        g.bench_function(BenchmarkId::new("beton_open_then_get_one", name), |b| {
            b.iter(|| {
                let ds = Dataset::open(path).expect("open");
                // Images: the payload (first payload access builds the allocation index);
                // scalars: the Int slot of one row.
                let v = ds.get(ds.num_samples() / 2, 0).expect("get");
                black_box(v.as_bytes().map(<[u8]>::len).or(v.as_int().map(|i| i as usize)));
                ds
            })
        });
        g.bench_function(BenchmarkId::new("baseline_file_open_mmap", name), |b| {
            b.iter(|| {
                let f = std::fs::File::open(path).expect("open");
                // SAFETY: a read-only map of a file this benchmark wrote and never modifies.
                unsafe { memmap2::Mmap::map(&f) }.expect("map")
            })
        });
        g.bench_function(BenchmarkId::new("baseline_read_header", name), |b| {
            b.iter(|| {
                let mut header = [0u8; 24];
                std::fs::File::open(path).expect("open").read_exact(&mut header).expect("read");
                header
            })
        });
    }
    // What validating the allocation table must at least do: map the file and read every entry.
    let alloc_table_ptr = Dataset::open(&images_1m).expect("open").header().alloc_table_ptr as usize;
    g.bench_function(BenchmarkId::new("baseline_mmap_read_alloc_table", "1m_images"), |b| {
        b.iter(|| {
            let f = std::fs::File::open(&images_1m).expect("open");
            // SAFETY: a read-only map of a file this benchmark wrote and never modifies.
            let map = unsafe { memmap2::Mmap::map(&f) }.expect("map");
            let sum = map[alloc_table_ptr..]
                .chunks_exact(8)
                .fold(0u64, |s, w| s.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes"))));
            (map, sum)
        })
    });
    g.finish();
}

criterion_group!(benches, write_images, open);
criterion_main!(benches);
