//! A/B of the fused WHERE: the same predicate through the fused path and, its numbers written
//! `+500` (a form the fused path leaves to the general evaluator, at no cost of its own),
//! through the general evaluator; interleaved rounds, columns materialised first. `cargo run --release -p beton-query --example where_ab -- FILE [ROUNDS] [SQL]`
//! (FILE: `target/bench-data/query-10m.beton`, made by `benches/query_compare.py`).
//! `BETON_SIMD=off` runs the fused loops compiled for the baseline instruction set;
//! `RAYON_NUM_THREADS=1` on one thread.

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().expect("usage: where_ab FILE [ROUNDS]");
    let rounds: usize = args.next().map_or(11, |r| r.parse().expect("ROUNDS"));
    // [SQL]: a conjunction of comparisons with numbers (default: query_compare's WHERE).
    let ds = beton_storage::Dataset::open(&file).expect("open");
    let table = beton_query::Table::new(&ds);
    let sql = args.next().unwrap_or_else(|| "label < 500 AND score > 0.25 AND \"image.width\" >= 2".into());
    // The numbers written `+N`: the general evaluator's way.
    let general = sql
        .replace("< ", "< +")
        .replace("> ", "> +")
        .replace(">= ", ">= +")
        .replace("<= ", "<= +")
        .replace("BETWEEN ", "BETWEEN +")
        .replace("IN (", "IN (+");
    let general = general.as_str();
    let sql = sql.as_str();
    let n = beton_query::select_indices(&table, sql).expect("query").len();
    assert_eq!(n, beton_query::select_indices(&table, general).expect("query").len());
    let time = |q: &str| {
        let t = Instant::now();
        let ids = beton_query::select_indices(&table, q).expect("query");
        std::hint::black_box(ids);
        t.elapsed().as_secs_f64() * 1e3
    };
    let (mut fused, mut plain, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (f, p) = (time(sql), time(general));
        fused.push(f);
        plain.push(p);
        ratios.push(p / f);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let threads = rayon::current_num_threads();
    println!(
        "{threads} threads, {n} of {} rows: fused {:.1} ms, general {:.1} ms, general/fused {:.2}x (rounds {:.2}-{:.2})",
        table.num_rows(),
        median(&mut fused),
        median(&mut plain),
        median(&mut ratios.clone()),
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(0.0, f64::max)
    );
}
