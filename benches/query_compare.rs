//! The query benchmark of beton's SQL layer against polars and pyarrow (the comparison itself is
//! `benches/query_compare.py`, which runs this binary first).
//!
//! The table: `--rows` rows (default 10M) of `label` Int (0..1000), `score` Float in [0, 1), an RGB
//! `image` of tiny raw pixels (width and height in 1..=4, so the image struct columns vary while
//! the file stays small) and a `caption` Text of a few short words. The file is generated once,
//! deterministically (every value is drawn from (seed, sample index)), at `--file`.
//!
//! Measured, each printed in one JSON line on stdout (progress goes to stderr):
//! - open-to-first-result: `Dataset::open` + `Table::new` + the first query in a fresh map, once
//!   with the file dropped from the page cache (`POSIX_FADV_DONTNEED`: every page read from disk),
//!   then with the file cached;
//! - each query, warm (the Table's columns already materialised: median of `--runs`), and cold
//!   (a fresh Table each run, so column materialisation is included);
//! - each column's materialisation alone.
//!
//! The queries: `label < 500 AND score > 0.25 AND image.width >= 2` (row ids via
//! `select_indices`), `SELECT label, count(*) FROM samples GROUP BY label`, and
//! `SELECT index, score FROM samples ORDER BY score DESC LIMIT 100`; then every form of WHERE in
//! `FORMS` (between columns, arithmetic, BETWEEN, IN under OR, LIKE, IS NOT NULL, OR, NOT), warm.
//! With `--forms-only`, only those (one round of the Python side's interleaved comparison).
//!
//! Then the columns the queries use (label, score, image.width, image.height, caption) are written
//! as an Arrow IPC file at `--ipc`, for the Python side to load.
//!
//! Run: `cargo bench --bench query_compare -- [--rows N] [--file PATH] [--ipc PATH] [--runs K] [--forms-only]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema};
use beton_query::{query, select_indices, Table};
use beton_storage::{Dataset, Progress, SampleValue, WriterOptions};
use serde_json::json;

/// The allocator a program embedding beton should choose, as the CLI and the Python extension do:
/// mimalloc keeps freed memory for the next query's row ids (docs/PERFORMANCE.md "Memory").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The seed of every generated value.
const SEED: u64 = 0x005e_ed0f_be70;

const WHERE: &str = "label < 500 AND score > 0.25 AND image.width >= 2";
const GROUP_BY: &str = "SELECT label, count(*) FROM samples GROUP BY label";
const TOP: &str = "SELECT index, score FROM samples ORDER BY score DESC LIMIT 100";

/// Every form of WHERE (issue 42): each timed warm on its own, and by polars SQL and DuckDB on
/// the exported columns (`query_compare.py`).
const FORMS: [&str; 10] = [
    "label < 500 AND score > 0.25 AND \"image.width\" >= 2",
    "\"image.width\" < \"image.height\" AND label >= \"image.width\"",
    "label + \"image.width\" < 500",
    "score * 4 > \"image.height\"",
    "label BETWEEN 100 AND 199",
    "label IN (1, 5, 9, 300) OR score > 0.99",
    "caption LIKE 'cat%'",
    "caption IS NOT NULL AND label < 500",
    "label < 500 AND (\"image.width\" = 2 OR \"image.width\" = 3)",
    "NOT (label < 500) AND score <= 0.5",
];

/// The columns exported for polars and pyarrow.
const EXPORTED: [&str; 5] = ["label", "score", "image.width", "image.height", "caption"];

const WORDS: [&str; 16] = [
    "cat", "dog", "red", "blue", "small", "large", "tree", "car", "sky", "sea", "old", "new", "man", "bird",
    "road", "house",
];

struct Args {
    rows: u64,
    file: PathBuf,
    ipc: PathBuf,
    runs: usize,
    /// Only time every form of WHERE (the file written before): one round of the interleaved
    /// comparison that `query_compare.py` runs against polars SQL and DuckDB.
    forms_only: bool,
}

fn parse_args() -> Args {
    let mut rows = 10_000_000u64;
    let (mut file, mut ipc, mut runs, mut forms_only) = (None, None, 5usize, false);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--rows" => rows = value().replace('_', "").parse().expect("--rows N"),
            "--file" => file = Some(PathBuf::from(value())),
            "--ipc" => ipc = Some(PathBuf::from(value())),
            "--runs" => runs = value().parse().expect("--runs K"),
            "--forms-only" => forms_only = true,
            // cargo bench passes --bench to harness = false targets.
            "--bench" => {}
            other => {
                panic!("unknown argument {other}; expected --rows N --file PATH --ipc PATH --runs K [--forms-only]")
            }
        }
    }
    let tag = match rows {
        r if r % 1_000_000 == 0 => format!("{}m", r / 1_000_000),
        r if r % 1_000 == 0 => format!("{}k", r / 1_000),
        r => r.to_string(),
    };
    let file = file.unwrap_or_else(|| PathBuf::from(format!("target/bench-data/query-{tag}.beton")));
    let ipc = ipc.unwrap_or_else(|| file.with_extension("arrow"));
    Args { rows, file, ipc, runs: runs.max(1), forms_only }
}

/// splitmix64 of (seed, sample, draw): every value depends on the sample index only.
fn draw(i: u64, k: u64) -> u64 {
    let mut z =
        (SEED ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d)).wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn sample(i: u64) -> Vec<SampleValue> {
    let (w, h) = (1 + (draw(i, 2) % 4) as u32, 1 + (draw(i, 3) % 4) as u32);
    let words = 1 + draw(i, 4) % 3;
    let caption: Vec<&str> = (0..words).map(|k| WORDS[(draw(i, 5 + k) % 16) as usize]).collect();
    vec![
        SampleValue::Int((draw(i, 0) % 1000) as i64),
        // 53 random bits: uniform in [0, 1).
        SampleValue::Float((draw(i, 1) >> 11) as f64 / (1u64 << 53) as f64),
        beton_testkit::rgb(w, h, vec![(i % 251) as u8; (w * h * 3) as usize]),
        SampleValue::Text(caption.join(" ")),
    ]
}

fn generate(path: &Path, rows: u64) -> f64 {
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).expect("bench data directory");
    let fields = beton_testkit::schema("label:int score:float image:raw caption:text");
    let step = (rows / 20).max(1);
    let last = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let shown_path = path.display().to_string();
    let progress = move |p: Progress| {
        let shown = last.load(std::sync::atomic::Ordering::Relaxed);
        if p.done / step > shown / step || p.total == Some(p.done) {
            last.store(p.done, std::sync::atomic::Ordering::Relaxed);
            eprintln!("  generating {shown_path}: {} / {rows} samples", p.done);
        }
        true
    };
    let options = WriterOptions {
        num_threads: 0,
        chunk_size: 65_536,
        progress: Some(Arc::new(progress)),
        ..WriterOptions::default()
    };
    let t = Instant::now();
    beton_testkit::write_with(path, fields, options, rows, sample);
    t.elapsed().as_secs_f64()
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// What a query returned, reduced to what the three engines must agree on.
#[derive(Debug, PartialEq)]
enum Outcome {
    Ids { count: usize, first: Vec<u64> },
    Groups { groups: usize, total: i64, label_7: i64 },
    Top { ids: Vec<u64> },
}

impl Outcome {
    fn to_json(&self) -> serde_json::Value {
        match self {
            Outcome::Ids { count, first } => json!({"rows": count, "first_ids": first}),
            Outcome::Groups { groups, total, label_7 } => {
                json!({"groups": groups, "total": total, "count_label_7": label_7})
            }
            Outcome::Top { ids } => json!({"ids": ids}),
        }
    }
}

fn run_query(table: &Table, which: &str) -> Outcome {
    match which {
        "where" => {
            let ids = select_indices(table, WHERE).expect(WHERE);
            Outcome::Ids { count: ids.len(), first: ids.iter().take(5).collect() }
        }
        "group_by" => {
            let b = query(table, GROUP_BY).expect(GROUP_BY);
            group_outcome(&b)
        }
        "top" => {
            let b = query(table, TOP).expect(TOP);
            let ids = b.column(0).as_primitive::<UInt64Type>().values().to_vec();
            let scores = b.column(1).as_primitive::<Float64Type>().values();
            assert!(scores.windows(2).all(|w| w[0] >= w[1]), "ORDER BY score DESC");
            Outcome::Top { ids }
        }
        other => unreachable!("query {other}"),
    }
}

fn group_outcome(b: &RecordBatch) -> Outcome {
    let labels = b.column(0).as_primitive::<Int64Type>().values();
    let counts = b.column(1).as_primitive::<Int64Type>().values();
    let label_7 = labels.iter().zip(counts).find(|(l, _)| **l == 7).map_or(0, |(_, c)| *c);
    Outcome::Groups { groups: b.num_rows(), total: counts.iter().sum(), label_7 }
}

fn export_ipc(table: &Table, path: &Path) -> f64 {
    let t = Instant::now();
    let batch = table.record_batch(&EXPORTED).expect("exported columns");
    let schema = Schema::new(
        batch
            .schema()
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), false))
            .collect::<Vec<_>>(),
    );
    let tmp = path.with_extension("arrow.tmp");
    let file = std::io::BufWriter::new(std::fs::File::create(&tmp).expect("IPC file"));
    let mut w = arrow_ipc::writer::FileWriter::try_new(file, &schema).expect("IPC writer");
    w.write(&batch).expect("IPC batch");
    w.finish().expect("IPC footer");
    drop(w);
    std::fs::rename(&tmp, path).expect("IPC rename");
    t.elapsed().as_secs_f64()
}

/// Drops `path` from the page cache; false when the kernel would not.
fn evict(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::File::open(path) else { return false };
    // SAFETY: posix_fadvise only reads its arguments; the descriptor is open for the whole call.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) == 0 }
}

/// `Dataset::open` (allocation checks deferred, as `beton query` and Python's `beton.open` open
/// files: the query reads no payload) + `Table::new` + the WHERE query, timed: (open,
/// Table::new, query, total) in ms and the query's outcome.
fn open_to_first_result(path: &Path) -> (f64, f64, f64, f64, Outcome) {
    let t0 = Instant::now();
    let ds = beton_storage::OpenOptions::new().defer_allocation_checks(true).open(path).expect("open");
    let open_ms = ms(t0);
    let t1 = Instant::now();
    let table = Table::new(&ds);
    let table_ms = ms(t1);
    let t2 = Instant::now();
    let first = run_query(&table, "where");
    let query_ms = ms(t2);
    (open_ms, table_ms, query_ms, ms(t0), first)
}

fn main() {
    let args = parse_args();
    if args.forms_only {
        let ds = Dataset::open(&args.file).expect("open the file a full run wrote");
        assert_eq!(ds.num_samples(), args.rows, "{} holds another row count", args.file.display());
        let table = Table::new(&ds);
        println!("{}", json!({ "forms": time_forms(&table, args.runs) }));
        return;
    }
    let mut generate_s = None;
    let stale = match Dataset::open(&args.file) {
        Ok(ds) => ds.num_samples() != args.rows,
        Err(_) => true,
    };
    if stale {
        eprintln!("writing {} rows to {} (once; all threads)", args.rows, args.file.display());
        generate_s = Some(generate(&args.file, args.rows));
    }
    // The columnar copy, made before anything is timed (timed itself: for this file, whose data
    // table is half of it, the first query would make it, not the writer). Absent with
    // BETON_COLUMNAR=off, which measures the row gather instead.
    let copy_path = beton_query::columnar::path_of(&args.file);
    let mut columnar_s = None;
    let off = std::env::var("BETON_COLUMNAR").is_ok_and(|v| v == "off");
    if !off && (stale || !copy_path.exists()) {
        let t = Instant::now();
        let ds = Dataset::open(&args.file).expect("open");
        beton_query::columnar::ColumnarCopy::build(&ds).expect("the columnar copy");
        columnar_s = Some(t.elapsed().as_secs_f64());
    }
    let columnar = std::env::var("BETON_COLUMNAR").map_or(true, |v| v != "off") && copy_path.exists();
    eprintln!("columnar copy: {}", if columnar { "used" } else { "off (row gather)" });

    // (a) Open to first result: first with the file dropped from the page cache (as after a
    // reboot: every page read from disk), then with the file cached; both in a fresh map.
    // Three rounds from disk (this VM's disk is noisy): the median, and the range. Each in a
    // fresh map: the copies a process keeps mapped between queries are forgotten first.
    let mut evicted = true;
    let mut cold_rounds = Vec::new();
    for _ in 0..3 {
        beton_query::columnar::forget_open_copies();
        evicted &= evict(&args.file) && (!columnar || evict(&copy_path));
        cold_rounds.push(open_to_first_result(&args.file));
    }
    cold_rounds.sort_by(|a, b| a.3.total_cmp(&b.3));
    let cold_range = (cold_rounds[0].3, cold_rounds[2].3);
    let cold_disk = cold_rounds.swap_remove(1);
    beton_query::columnar::forget_open_copies();
    let (open_ms, table_ms, first_query_ms, open_to_first_ms, first) = open_to_first_result(&args.file);
    assert_eq!(cold_disk.4, first);
    let ds = Dataset::open(&args.file).expect("open");

    // Materialisation of each column alone, on a fresh table.
    let mut materialise = serde_json::Map::new();
    for name in ["label", "score", "image.width", "image.height", "index", "caption"] {
        let times: Vec<f64> = (0..args.runs.min(3))
            .map(|_| {
                beton_query::columnar::forget_open_copies();
                let table = Table::new(&ds);
                let t = Instant::now();
                table.column(name).expect("column");
                ms(t)
            })
            .collect();
        materialise.insert(name.to_string(), json!(median(times)));
    }

    // (b) Each query warm (columns cached) and cold (fresh table each run, in a fresh map of
    // the copy: as the first query of a process).
    let mut queries = serde_json::Map::new();
    let warm_table = Table::new(&ds);
    for (which, sql) in [("where", WHERE), ("group_by", GROUP_BY), ("top", TOP)] {
        let outcome = run_query(&warm_table, which);
        if which == "where" {
            assert_eq!(outcome, first, "the first run and the warm runs agree");
        }
        let warm: Vec<f64> = (0..args.runs)
            .map(|_| {
                let t = Instant::now();
                let o = run_query(&warm_table, which);
                let elapsed = ms(t);
                assert_eq!(o, outcome);
                elapsed
            })
            .collect();
        let cold: Vec<f64> = (0..args.runs)
            .map(|_| {
                beton_query::columnar::forget_open_copies();
                let table = Table::new(&ds);
                let t = Instant::now();
                run_query(&table, which);
                ms(t)
            })
            .collect();
        eprintln!("  {which}: warm {:.1} ms, cold {:.1} ms", median(warm.clone()), median(cold.clone()));
        queries.insert(
            which.to_string(),
            json!({
                "sql": sql,
                "warm_ms": median(warm.clone()),
                "warm_min_ms": warm.iter().copied().fold(f64::INFINITY, f64::min),
                "cold_ms": median(cold),
                "result": outcome.to_json(),
            }),
        );
    }

    // (c) Every form of WHERE, warm.
    let forms = time_forms(&warm_table, args.runs);

    let ipc_s = if std::fs::metadata(&args.ipc).is_ok_and(|m| m.len() > 0) && !stale {
        None
    } else {
        Some(export_ipc(&warm_table, &args.ipc))
    };

    let report = json!({
        "rows": args.rows,
        "file": args.file,
        "file_bytes": ds.file_len(),
        "ipc": args.ipc,
        "runs": args.runs,
        "generate_s": generate_s,
        "columnar": columnar,
        "columnar_copy_s": columnar_s,
        "columnar_copy_bytes": std::fs::metadata(&copy_path).map(|m| m.len()).ok().filter(|_| columnar),
        "ipc_export_s": ipc_s,
        "open_ms": open_ms,
        "table_new_ms": table_ms,
        "first_query_ms": first_query_ms,
        "open_to_first_result_ms": open_to_first_ms,
        "uncached": {
            "evicted": evicted,
            "open_ms": cold_disk.0,
            "first_query_ms": cold_disk.2,
            "open_to_first_result_ms": cold_disk.3,
            "open_to_first_result_range_ms": [cold_range.0, cold_range.1],
        },
        "materialise_ms": materialise,
        "queries": queries,
        "forms": forms,
    });
    println!("{report}");
}

/// Every form of WHERE on `table`, warm (each run once first): rows and the median of `runs`.
fn time_forms(table: &Table, runs: usize) -> Vec<serde_json::Value> {
    let mut forms = Vec::new();
    for sql in FORMS {
        let rows = select_indices(table, sql).expect(sql).len();
        let times: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let n = select_indices(table, sql).expect(sql).len();
                let elapsed = ms(t);
                assert_eq!(n, rows);
                elapsed
            })
            .collect();
        eprintln!("  {sql}: warm {:.1} ms, {rows} rows", median(times.clone()));
        forms.push(json!({
            "sql": sql,
            "rows": rows,
            "warm_ms": median(times.clone()),
            "warm_min_ms": times.iter().copied().fold(f64::INFINITY, f64::min),
        }));
    }
    forms
}
