//! IndexSet (sorted `Vec<u64>`) against `roaring::RoaringTreemap`, the compressed-bitmap
//! alternative, in the same groups so every figure is a ratio from one run.
//!
//! `cargo bench -p beton-dataset --bench index_set`. Two sets of 1M ids each, drawn at random
//! either dense (ids < 4M: a query that keeps a quarter of a 4M-row table) or sparse
//! (ids < 2^30: a query that keeps 0.1% of a billion-row table); plus positional access
//! (the loader's `get(i)`, roaring's `select(i)`) and a skewed intersection (1k ∩ 1M).

use std::hint::black_box;

use beton_dataset::IndexSet;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use roaring::RoaringTreemap;

const N: usize = 1_000_000;

/// 1M distinct ids below `range`, fixed by `seed`.
fn random_set(range: u64, seed: u64) -> IndexSet {
    if range <= 16 * N as u64 {
        return IndexSet::all(range).sample(N, seed).expect("range holds N ids");
    }
    // Too many to enumerate: xorshift64 draws, deduplicated, topped up until there are N.
    let mut x = seed | 1;
    let mut ids = IndexSet::empty();
    while ids.len() < N {
        let batch: IndexSet = (0..N - ids.len())
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % range
            })
            .collect();
        ids = &ids | &batch;
    }
    ids
}

fn roaring(set: &IndexSet) -> RoaringTreemap {
    RoaringTreemap::from_sorted_iter(set.iter()).expect("ids are sorted")
}

fn algebra(c: &mut Criterion) {
    for (name, range) in [("dense", 4 * N as u64), ("sparse", 1u64 << 30)] {
        let (a, b) = (random_set(range, 1), random_set(range, 2));
        let (ra, rb) = (roaring(&a), roaring(&b));
        eprintln!(
            "{name}: |a ∪ b| = {}, |a ∩ b| = {}; a takes {} bytes as Vec, {} as to_bytes, {} as roaring",
            (&a | &b).len(),
            (&a & &b).len(),
            8 * a.len(),
            a.to_bytes().len(),
            ra.serialized_size(),
        );
        let mut group = c.benchmark_group(format!("union_1M_{name}"));
        group.sample_size(20);
        group.bench_function("IndexSet", |bench| bench.iter(|| black_box(&a) | black_box(&b)));
        group.bench_function("RoaringTreemap", |bench| bench.iter(|| black_box(&ra) | black_box(&rb)));
        group.finish();

        let mut group = c.benchmark_group(format!("intersection_1M_{name}"));
        group.sample_size(20);
        group.bench_function("IndexSet", |bench| bench.iter(|| black_box(&a) & black_box(&b)));
        group.bench_function("RoaringTreemap", |bench| bench.iter(|| black_box(&ra) & black_box(&rb)));
        group.finish();

        let mut group = c.benchmark_group(format!("get_1000_of_1M_{name}"));
        let positions: Vec<usize> =
            IndexSet::all(N as u64).shuffled(3)[..1000].iter().map(|&i| i as usize).collect();
        group.bench_function("IndexSet", |bench| {
            bench.iter(|| {
                positions.iter().map(|&i| a.get(black_box(i)).unwrap_or(0)).fold(0, u64::wrapping_add)
            })
        });
        group.bench_function("RoaringTreemap", |bench| {
            bench.iter(|| {
                positions
                    .iter()
                    .map(|&i| ra.select(black_box(i as u64)).unwrap_or(0))
                    .fold(0, u64::wrapping_add)
            })
        });
        group.finish();
    }

    let large = random_set(4 * N as u64, 1);
    let small = IndexSet::all(4 * N as u64).sample(1000, 9).expect("1000 of 4M");
    let (rl, rs) = (roaring(&large), roaring(&small));
    let mut group = c.benchmark_group("intersection_1k_1M_dense");
    group.bench_function(BenchmarkId::new("IndexSet", "binary search"), |bench| {
        bench.iter(|| black_box(&small) & black_box(&large))
    });
    group.bench_function("RoaringTreemap", |bench| bench.iter(|| black_box(&rs) & black_box(&rl)));
    group.finish();
}

fn seeded(c: &mut Criterion) {
    let set = IndexSet::all(N as u64);
    let mut group = c.benchmark_group("seeded_1M");
    group.sample_size(20);
    group.bench_function("shuffled", |bench| bench.iter(|| set.shuffled(black_box(1))));
    group.bench_function("split 0.8/0.1/0.1", |bench| {
        bench.iter(|| set.split(&[0.8, 0.1, 0.1], black_box(1)))
    });
    group.bench_function("sample 1k", |bench| bench.iter(|| set.sample(1000, black_box(1))));
    group.bench_function("to_bytes", |bench| bench.iter(|| black_box(&set).to_bytes()));
    let bytes = set.to_bytes();
    group.bench_function("from_bytes", |bench| bench.iter(|| IndexSet::from_bytes(black_box(&bytes))));
    group.bench_function("fingerprint", |bench| bench.iter(|| black_box(&set).fingerprint()));
    group.finish();
}

criterion_group!(benches, algebra, seeded);
criterion_main!(benches);
