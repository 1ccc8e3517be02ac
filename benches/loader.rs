//! Loader benchmarks, each with its baseline in the same run (read the ratios):
//!
//! - `loader/copy`: raw payloads through the loader with a copy-only pipeline (`BytesDecoder`:
//!   each 64 KiB payload copied into its row of the batch), one epoch of 256 MiB, RANDOM order,
//!   OS page cache, with 1 and 2 worker threads. Baseline: a plain single-threaded `memcpy` of the
//!   same payloads, in the same order, from the same map into a batch-sized buffer.
//! - `loader/samples`: samples/s of the same epoch with 1 and 2 threads on small payloads (4 KiB),
//!   where per-sample overhead shows rather than bandwidth.
//!
//! After the timings it prints, for the process cache (`os_cache = false`, bound 8 pages), the
//! pages QUASI_RANDOM and RANDOM read per epoch.
//!
//! Run: `cargo bench --bench loader`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use beton_loader::{Loader, OrderOption};
use beton_storage::{Dataset, FieldSpec, FieldType, SampleValue, Writer, WriterOptions};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const BATCH: usize = 64;

/// A file of `n` payloads of `size` bytes (8 MiB pages), written once under the target dir.
fn file(n: u64, size: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("loader-bench-{n}x{size}.beton"));
    if !path.exists() {
        let fields = vec![FieldSpec::new("blob", FieldType::Bytes)];
        Writer::new(&path, fields, WriterOptions::default())
            .unwrap()
            .write_indexed(n, |i| Ok(vec![SampleValue::Bytes(vec![(i % 251) as u8; size])]))
            .unwrap();
    }
    path
}

fn loader(ds: &Arc<Dataset>, threads: usize, order: OrderOption, os_cache: bool) -> Loader {
    Loader::builder(Arc::clone(ds))
        .batch_size(BATCH)
        .threads(threads)
        .order(order)
        .os_cache(os_cache)
        .cache_pages(8)
        .build()
        .unwrap()
}

fn epoch(loader: &mut Loader) -> usize {
    let mut n = 0;
    for b in loader.next_epoch().unwrap() {
        n += black_box(b.unwrap()).len();
    }
    n
}

fn copy(c: &mut Criterion) {
    let (n, size) = (4096u64, 64 << 10);
    let ds = Arc::new(Dataset::open(file(n, size)).unwrap());
    // Warm the page cache once, so every variant reads memory.
    epoch(&mut loader(&ds, 2, OrderOption::Sequential, true));
    let mut group = c.benchmark_group("loader/copy");
    group.throughput(Throughput::Bytes(n * size as u64)).sample_size(10);
    let order = loader(&ds, 1, OrderOption::Random, true).plan(0).unwrap().samples().to_vec();
    let spans: Vec<(usize, usize)> = order
        .iter()
        .map(|&i| {
            let (s, e) = ds.sample_span(i).unwrap();
            (s as usize, e as usize)
        })
        .collect();
    let mut out = vec![0u8; BATCH * size];
    group.bench_function("memcpy", |b| {
        b.iter(|| {
            let bytes = ds.file_bytes();
            for chunk in spans.chunks(BATCH) {
                for (k, &(s, e)) in chunk.iter().enumerate() {
                    out[k * size..k * size + (e - s)].copy_from_slice(&bytes[s..e]);
                }
                black_box(&out);
            }
        })
    });
    for threads in [1, 2] {
        let mut l = loader(&ds, threads, OrderOption::Random, true);
        group
            .bench_with_input(BenchmarkId::new("loader", threads), &threads, |b, _| b.iter(|| epoch(&mut l)));
    }
    group.finish();
}

fn samples(c: &mut Criterion) {
    let (n, size) = (65536u64, 4 << 10);
    let ds = Arc::new(Dataset::open(file(n, size)).unwrap());
    epoch(&mut loader(&ds, 2, OrderOption::Sequential, true));
    let mut group = c.benchmark_group("loader/samples");
    group.throughput(Throughput::Elements(n)).sample_size(10);
    for threads in [1, 2] {
        let mut l = loader(&ds, threads, OrderOption::Random, true);
        group
            .bench_with_input(BenchmarkId::new("random", threads), &threads, |b, _| b.iter(|| epoch(&mut l)));
    }
    group.finish();

    // Pages read per epoch through the process cache, bounded to 8 pages of 8 MiB (the file
    // has 33 pages).
    for (name, order) in [
        ("QUASI_RANDOM", OrderOption::QuasiRandom { buffer_pages: Some(4) }),
        ("RANDOM", OrderOption::Random),
    ] {
        let mut l = loader(&ds, 2, order, false);
        let mut e = l.next_epoch().unwrap();
        for b in e.by_ref() {
            b.unwrap();
        }
        let s = e.stats();
        println!(
            "process cache (8 pages), {name}: {} pages read ({:.0} MB), {} direct sample reads, of {} pages",
            s.pages_read,
            s.page_bytes_read as f64 / 1e6,
            s.direct_reads,
            ds.num_pages()
        );
    }
}

criterion_group!(benches, copy, samples);
criterion_main!(benches);
