//! Storage benchmarks. Every group holds its own baselines, so that each figure reads as a ratio
//! measured side by side in one run (the bench machine is small, noisy and shared):
//!
//! - `write_images/bundled`: writer images/s over the 155 bundled photos
//!   (examples/data/imagefolder: 134 JPEG + 21 PNG), raw and jpg q90 at max_resolution 256, with
//!   1 and 2 threads, plus jpg without JPEG passthrough (what FFCV always does: re-encode).
//!   Baselines: the codec floor (plain turbojpeg decode + encode q90 of every image at full size,
//!   one thread, no resize, nothing written; PNGs decoded with the `png` crate), decode alone, a
//!   memcpy of the file bytes, and writing + fsyncing as many bytes as beton's output (I/O floor).
//! - `write_images/corpus`: the same over `$BETON_BENCH_CORPUS` (an ImageFolder, e.g. made by
//!   `benches/bench-corpus.sh`), skipped with a note when unset.
//! - `passthrough/{bundled,corpus}`: what storing a source JPEG as it is costs per image (the
//!   writer's passthrough: appends, `write_mode="jpg"` of images that fit): the entropy-level
//!   check with restart markers every MCU (`jpeg::entropy::check_with_restarts`, what the writer
//!   runs), the same check alone (interval 0), and the path it replaced (a strict whole decode,
//!   then libjpeg-turbo's lossless transform to add the markers). Baselines: a plain turbojpeg
//!   decode to RGB (the decode wall) and a memcpy of the bytes.
//! - `open`: `Dataset::open` of a 10M-row and a 1M-row Int+Float file and of a 1M-image file
//!   (1M allocation entries, 2 MiB pages), and open + first access of one sample (for images:
//!   its payload, which builds the lazy allocation index). Baselines: `File::open` + mmap of the
//!   same file, reading its 24-byte header, and (images) reading the whole allocation table through
//!   a map, with and without the `MADV_RANDOM` advice that `Dataset::open` gives its map.
//!
//! Run: `cargo bench --bench storage` (see benches/README.md).

use std::hint::black_box;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
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
        // 10 iterations at least (flat sampling); about 9 ms an image on one thread.
        .measurement_time(Duration::from_millis((n * 9).max(3000)))
        .warm_up_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(n));

    let write = |write_mode, jpeg_passthrough, num_threads| {
        let image = ImageOptions {
            write_mode,
            max_resolution: Some(256),
            jpeg_quality: 90,
            jpeg_passthrough,
            ..ImageOptions::default()
        };
        let fields = vec![FieldSpec::rgb_image("image", image), FieldSpec::new("label", FieldType::Int)];
        Writer::new(&out, fields, WriterOptions { num_threads, ..WriterOptions::default() })
            .expect("writer")
            .write_indexed(n, |i| {
                let (path, label) = &samples[i as usize];
                Ok(vec![
                    SampleValue::Image(ImageSource::File(path.clone())),
                    SampleValue::Int(i64::from(*label)),
                ])
            })
            .expect("write")
    };
    let variants = [
        ("beton_raw_max256", WriteMode::Raw, true, &[1, 2][..]),
        ("beton_jpg_q90_max256", WriteMode::Jpg, true, &[1, 2][..]),
        ("beton_jpg_q90_max256_no_passthrough", WriteMode::Jpg, false, &[1][..]),
    ];
    for (label, write_mode, jpeg_passthrough, threads) in variants {
        for &num_threads in threads {
            g.bench_function(BenchmarkId::new(label, format!("{num_threads}_thread")), |b| {
                b.iter(|| write(write_mode, jpeg_passthrough, num_threads))
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
    // The I/O floor: writing as many bytes as beton's raw / jpg output to a new file, and fsync
    // (the writer fsyncs before publishing; FFCV does not).
    for (label, write_mode) in [("raw_output", WriteMode::Raw), ("jpg_output", WriteMode::Jpg)] {
        // Made on first use, so that a filtered run that skips this benchmark skips the setup.
        let bytes = OnceLock::new();
        let path = dir.path().join("floor.bin");
        g.bench_function(BenchmarkId::new("baseline_write_fsync", label), |b| {
            let bytes: &Vec<u8> = bytes.get_or_init(|| {
                let size = write(write_mode, true, 0).file_len as usize;
                (0..size).map(|i| (i * 31 % 251) as u8).collect()
            });
            b.iter(|| {
                let mut f = std::fs::File::create(&path).expect("create");
                f.write_all(bytes).expect("write");
                f.sync_all().expect("fsync");
            })
        });
    }
    g.finish();
}

/// The JPEGs of an ImageFolder, read into memory.
fn jpeg_files(root: &Path) -> Vec<Vec<u8>> {
    let samples = imagefolder::scan(root).expect("an ImageFolder").samples;
    samples
        .iter()
        .map(|(path, _)| std::fs::read(path).expect("readable"))
        .filter(|b| b.starts_with(&[0xFF, 0xD8]))
        .collect()
}

fn passthrough_group(c: &mut Criterion, name: &str, root: &Path) {
    use beton_storage::jpeg::entropy::{check_with_restarts, Checked};
    let files = jpeg_files(root);
    let mut g = c.benchmark_group(format!("passthrough/{name}"));
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(files.len() as u64));
    let taken = files.iter().filter(|b| check_with_restarts(b, 1).is_some()).count();
    eprintln!("passthrough/{name}: {} JPEGs, {taken} taken by the entropy pass", files.len());
    g.bench_function("entropy check + restart markers (beton)", |b| {
        b.iter(|| {
            files
                .iter()
                .map(|f| match check_with_restarts(f, 1) {
                    Some(Checked::Rewritten(v)) => v.len(),
                    Some(Checked::AsIs) => f.len(),
                    None => 0,
                })
                .sum::<usize>()
        })
    });
    let options = ImageOptions { write_mode: WriteMode::Jpg, ..ImageOptions::default() };
    g.bench_function("the writer's encode_image (header, check, markers, copy)", |b| {
        b.iter(|| {
            files
                .iter()
                .map(|f| {
                    let source = ImageSource::Encoded(f.clone());
                    beton_storage::image::encode_image(&source, &options, beton_storage::Channels::Rgb, 0.0)
                        .expect("stored")
                        .data
                        .len()
                })
                .sum::<usize>()
        })
    });
    g.bench_function("entropy check alone", |b| {
        b.iter(|| files.iter().filter(|f| check_with_restarts(f, 0).is_some()).count())
    });
    g.bench_function("whole decode + libjpeg-turbo transform (before)", |b| {
        b.iter(|| {
            files
                .iter()
                .map(|f| {
                    black_box(turbojpeg::decompress(f, PixelFormat::RGB).expect("decodes"));
                    beton_storage::jpeg::with_restarts(f, 1).expect("transforms").len()
                })
                .sum::<usize>()
        })
    });
    g.bench_function("baseline: plain turbojpeg decode", |b| {
        b.iter(|| {
            files
                .iter()
                .map(|f| turbojpeg::decompress(f, PixelFormat::RGB).expect("decodes").pixels.len())
                .sum::<usize>()
        })
    });
    g.bench_function("baseline: memcpy", |b| {
        b.iter(|| files.iter().map(|f| black_box(f.to_vec()).len()).sum::<usize>())
    });
    g.finish();
}

fn passthrough(c: &mut Criterion) {
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/imagefolder");
    passthrough_group(c, "bundled", &bundled);
    if let Some(dir) = std::env::var_os("BETON_BENCH_CORPUS") {
        passthrough_group(c, "corpus", Path::new(&dir));
    }
}

fn write_images(c: &mut Criterion) {
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/imagefolder");
    write_group(c, "bundled", &bundled);
    match std::env::var_os("BETON_BENCH_CORPUS") {
        Some(dir) => write_group(c, "corpus", Path::new(&dir)),
        None => eprintln!(
            "write_images/corpus skipped: set BETON_BENCH_CORPUS=DIR (an ImageFolder, e.g. from \
             `bash benches/bench-corpus.sh DIR 1000 5 0`)"
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
    let raw = ImageOptions::with_mode(WriteMode::Raw);
    let options = WriterOptions { page_size: 1 << 21, chunk_size: 1 << 16, ..WriterOptions::default() };
    Writer::new(path, vec![FieldSpec::rgb_image("image", raw)], options)
        .expect("writer")
        .write_indexed(n, |i| {
            let px = Pixels { width: 1, height: 1, channels: 3, data: vec![i as u8; 3] };
            Ok(vec![SampleValue::Image(ImageSource::Pixels(px))])
        })
        .expect("write images");
}

/// The files of the `open` group, written once.
struct OpenFiles {
    _dir: tempfile::TempDir,
    rows_10m: PathBuf,
    rows_1m: PathBuf,
    images_1m: PathBuf,
    /// Where the 1M-image file's allocation table starts.
    alloc_table_ptr: usize,
}

impl OpenFiles {
    fn write() -> OpenFiles {
        let dir = scratch();
        let [rows_10m, rows_1m, images_1m] =
            ["rows-10m.beton", "rows-1m.beton", "images-1m.beton"].map(|f| dir.path().join(f));
        let t = std::time::Instant::now();
        write_scalars(&rows_10m, 10_000_000);
        write_scalars(&rows_1m, 1_000_000);
        write_tiny_images(&images_1m, 1_000_000);
        eprintln!("open: wrote the 10M-row, 1M-row and 1M-image files in {:.1} s", t.elapsed().as_secs_f64());
        let alloc_table_ptr = Dataset::open(&images_1m).expect("open").header().alloc_table_ptr as usize;
        OpenFiles { _dir: dir, rows_10m, rows_1m, images_1m, alloc_table_ptr }
    }

    fn get(&self, name: &str) -> &Path {
        match name {
            "10m_rows" => &self.rows_10m,
            "1m_rows" => &self.rows_1m,
            _ => &self.images_1m,
        }
    }
}

fn open(c: &mut Criterion) {
    // Written on first use, so that a run filtered to other groups does not pay for it.
    let files = OnceLock::new();
    let files = || files.get_or_init(OpenFiles::write);

    let mut g = c.benchmark_group("open");
    g.sample_size(10).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    for name in ["10m_rows", "1m_rows", "1m_images"] {
        g.bench_function(BenchmarkId::new("beton_open", name), |b| {
            let path = files().get(name);
            b.iter(|| Dataset::open(path).expect("open"))
        });
        g.bench_function(BenchmarkId::new("beton_open_then_get_one", name), |b| {
            let path = files().get(name);
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
            let path = files().get(name);
            b.iter(|| {
                let f = std::fs::File::open(path).expect("open");
                // SAFETY: a read-only map of a file this benchmark wrote and never modifies.
                unsafe { memmap2::Mmap::map(&f) }.expect("map")
            })
        });
        g.bench_function(BenchmarkId::new("baseline_read_header", name), |b| {
            let path = files().get(name);
            b.iter(|| {
                let mut header = [0u8; 24];
                std::fs::File::open(path).expect("open").read_exact(&mut header).expect("read");
                header
            })
        });
    }
    // What validating the allocation table must at least do: map the file and read every entry;
    // with and without MADV_RANDOM, which Dataset::open sets on its map.
    for (label, advice) in [("1m_images", None), ("1m_images_madv_random", Some(memmap2::Advice::Random))] {
        g.bench_function(BenchmarkId::new("baseline_mmap_read_alloc_table", label), |b| {
            let (path, at) = (&files().images_1m, files().alloc_table_ptr);
            b.iter(|| {
                let f = std::fs::File::open(path).expect("open");
                // SAFETY: a read-only map of a file this benchmark wrote and never modifies.
                let map = unsafe { memmap2::Mmap::map(&f) }.expect("map");
                if let Some(advice) = advice {
                    map.advise(advice).expect("madvise");
                }
                let sum = map[at..]
                    .chunks_exact(8)
                    .fold(0u64, |s, w| s.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes"))));
                (map, sum)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, write_images, passthrough, open);
criterion_main!(benches);
