//! A/B of GROUP BY and ORDER BY … LIMIT on one and on two threads: each query run in a 1-thread
//! and a 2-thread rayon pool in turn, interleaved rounds after one untimed run (which
//! materialises the columns); prints per query and thread count the median, fastest and slowest
//! round in ms, the median CPU time of the process (steadier than the wall time on a loaded
//! machine; with several threads it includes rayon's idle spinning), and a hash of the result's
//! values (the same at every thread count).
//! `cargo run --release -p beton-query --example group_ab -- FILE [ROUNDS] [THREADS...]`
//! (FILE: `target/bench-data/query-10m.beton`, made by `benches/query_compare.py`). Built against
//! the commit before the parallel GROUP BY / top k, it is the sequential baseline.

use std::hash::{Hash, Hasher};
use std::time::Instant;

const QUERIES: [&str; 4] = [
    "SELECT label, count(*) FROM samples GROUP BY label",
    "SELECT label, count(*) AS n, avg(score) AS mean FROM samples GROUP BY label",
    "SELECT index, score FROM samples ORDER BY score DESC LIMIT 100",
    "SELECT index, score FROM samples WHERE label < 500 AND score > 0.25 AND \"image.width\" >= 2 \
     ORDER BY score DESC LIMIT 50",
];

fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().expect("usage: group_ab FILE [ROUNDS] [THREADS...]");
    let rounds: usize = args.next().map_or(11, |r| r.parse().expect("ROUNDS"));
    let mut threads: Vec<usize> = args.map(|t| t.parse().expect("THREADS")).collect();
    if threads.is_empty() {
        threads = vec![1, 2];
    }
    let ds = beton_storage::Dataset::open(&file).expect("open");
    let table = beton_query::Table::new(&ds);
    let pools: Vec<rayon::ThreadPool> = threads
        .iter()
        .map(|&n| rayon::ThreadPoolBuilder::new().num_threads(n).build().expect("pool"))
        .collect();
    // Every value of the result as text (floats written to round-trip: their bits), hashed:
    // equal hashes, equal results.
    let digest = |sql: &str, pool: &rayon::ThreadPool| {
        let batch = pool.install(|| beton_query::query(&table, sql)).expect("query");
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for column in batch.columns() {
            for i in 0..column.len() {
                arrow_cast::display::array_value_to_string(column, i).expect("display").hash(&mut h);
            }
        }
        h.finish()
    };
    for sql in QUERIES {
        let hashes: Vec<u64> = pools.iter().map(|p| digest(sql, p)).collect();
        let (mut times, mut cpu) = (vec![Vec::new(); pools.len()], vec![Vec::new(); pools.len()]);
        for _ in 0..rounds {
            for ((pool, t), c) in pools.iter().zip(&mut times).zip(&mut cpu) {
                let (start, start_cpu) = (Instant::now(), cpu_ms());
                let batch = pool.install(|| beton_query::query(&table, sql)).expect("query");
                std::hint::black_box(batch);
                t.push(start.elapsed().as_secs_f64() * 1e3);
                c.push(cpu_ms() - start_cpu);
            }
        }
        println!("{sql}");
        for (((n, t), c), h) in threads.iter().zip(&mut times).zip(&mut cpu).zip(&hashes) {
            t.sort_by(f64::total_cmp);
            c.sort_by(f64::total_cmp);
            println!(
                "  {n} thread(s): median {:.1} ms (rounds {:.1}-{:.1}), CPU {:.1} ms, result {h:016x}",
                t[t.len() / 2],
                t[0],
                t[t.len() - 1],
                c[c.len() / 2]
            );
        }
    }
}

/// CPU time of the process so far, in ms.
fn cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}
