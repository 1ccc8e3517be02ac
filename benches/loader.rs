//! Loader benchmarks, each with its baseline in the same run (read the ratios):
//!
//! - `loader/copy`: raw payloads through the loader with a copy-only pipeline (`BytesDecoder`:
//!   each 64 KiB payload copied into its row of the batch), one epoch of 256 MiB, RANDOM order,
//!   OS page cache, with 1 and 2 worker threads. Baseline: a plain single-threaded `memcpy` of the
//!   same payloads, in the same order, from the same map into a batch-sized buffer.
//! - `loader/samples`: samples/s of the same epoch with 1 and 2 threads on small payloads (4 KiB),
//!   where per-sample overhead shows rather than bandwidth.
//!
//! After the timings, `process_cache` prints what the process cache (`os_cache = false`) bounded
//! to 8 pages of the 4 KiB file's 32 does per epoch under QUASI_RANDOM and RANDOM: the pages it
//! reads whole and the samples it falls back to reading one by one (`direct`) when no page can be
//! evicted. Those counts depend on the order (the seed and epoch) and, with the default settings,
//! on thread timing (which pages the workers still hold, how far the consumer is), so it reports
//! them over 16 seeds, the first epoch of a fresh loader and its second (which starts with the
//! first's last pages resident): in lockstep (1 worker, 1 batch ahead: the prefetcher runs with
//! the consumer exactly at its batch, so the counts are a function of seed and epoch, checked by
//! running one twice) and with the settings of the loader figures (2 workers, 3 batches ahead).
//!
//! Run: `cargo bench --bench loader` (the machine it ran on goes to stderr first).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use beton_loader::{EpochStats, Loader, OrderOption};
use beton_storage::{Dataset, FieldSpec, FieldType, SampleValue, Writer, WriterOptions};
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};

mod common;

const BATCH: usize = 64;

/// A file of `n` payloads of `size` bytes (8 MiB pages), written once under the target dir.
fn file(n: u64, size: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("loader-bench-{n}x{size}.beton"));
    if !path.exists() {
        let fields = vec![FieldSpec::new("blob", FieldType::Bytes)];
        let options = WriterOptions { page_size: 8 << 20, ..WriterOptions::default() };
        Writer::new(&path, fields, options)
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
}

/// One epoch of `loader`'s next epoch, for its statistics.
fn epoch_stats(loader: &mut Loader) -> EpochStats {
    let mut e = loader.next_epoch().unwrap();
    for b in e.by_ref() {
        b.unwrap();
    }
    e.stats()
}

/// Pages read and direct sample reads per epoch through the process cache bounded to 8 pages of
/// 8 MiB, over seeds × epochs (see the module doc).
fn process_cache() {
    const SEEDS: u64 = 16;
    const EPOCHS: usize = 2;
    let (n, size) = (65536u64, 4usize << 10);
    let ds = Arc::new(Dataset::open(file(n, size)).unwrap());
    println!(
        "process cache bounded to 8 of {} pages of {} MiB ({n} × {} KiB payloads, batch {BATCH}); per epoch, \
         over {SEEDS} seeds: mean (min-max)",
        ds.num_pages(),
        ds.page_size() >> 20,
        size >> 10
    );
    let build = |order: OrderOption, seed: u64, threads: usize, ahead: usize| {
        Loader::builder(Arc::clone(&ds))
            .batch_size(BATCH)
            .threads(threads)
            .batches_ahead(ahead)
            .order(order)
            .seed(seed)
            .os_cache(false)
            .cache_pages(8)
            .build()
            .unwrap()
    };
    let summary = |xs: &[u64]| {
        let mean = xs.iter().sum::<u64>() as f64 / xs.len() as f64;
        format!("{mean:.1} ({}-{})", xs.iter().min().unwrap(), xs.iter().max().unwrap())
    };
    let file_bytes = (n as usize * size) as f64;
    for (name, order) in [
        ("QUASI_RANDOM (buffer 4 pages)", OrderOption::QuasiRandom { buffer_pages: Some(4) }),
        ("RANDOM", OrderOption::Random),
    ] {
        for (setting, threads, ahead) in [("lockstep: 1 worker, 1 ahead", 1, 1), ("2 workers, 3 ahead", 2, 3)]
        {
            // [epoch] -> one EpochStats per seed.
            let mut stats: Vec<Vec<EpochStats>> = vec![Vec::new(); EPOCHS];
            for seed in 0..SEEDS {
                let mut l = build(order, seed, threads, ahead);
                for per_epoch in &mut stats {
                    per_epoch.push(epoch_stats(&mut l));
                }
            }
            if threads == 1 {
                // Lockstep is deterministic: seed 0's first epoch again gives the same counts.
                let s = epoch_stats(&mut build(order, 0, threads, ahead));
                let first = &stats[0][0];
                assert_eq!((s.pages_read, s.direct_reads), (first.pages_read, first.direct_reads));
            }
            for (e, per_seed) in stats.iter().enumerate() {
                let pages: Vec<u64> = per_seed.iter().map(|s| s.pages_read).collect();
                let direct: Vec<u64> = per_seed.iter().map(|s| s.direct_reads).collect();
                let bytes =
                    per_seed.iter().map(|s| s.page_bytes_read as f64).sum::<f64>() / per_seed.len() as f64;
                println!(
                    "  {name:<30} {setting:<27} epoch {e}: pages read {:>18} ({:>5.2}x the file's bytes), \
                     single-sample reads {:>24}{}",
                    summary(&pages),
                    bytes / file_bytes,
                    summary(&direct),
                    if threads == 1 && e == 0 { "; seed 0 rerun: same counts" } else { "" }
                );
            }
        }
    }
}

criterion_group!(benches, copy, samples);

fn main() {
    common::print_machine();
    benches();
    process_cache();
    Criterion::default().configure_from_args().final_summary();
}
