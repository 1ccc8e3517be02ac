//! Metadata-only queries read no heap page, proven by taking the pages away.
//!
//! The test writes a dataset whose payloads (raw images, bytes, JSON, text) fill several data
//! pages, opens it, then `mprotect`s the mapping's data pages to `PROT_NONE`: any read of a payload
//! byte from then on is a SIGSEGV. Queries over the row metadata (Int, Float, image mode / width /
//! height / nbytes, Bytes and JSON sizes, `index`) must still run and give the values computed here
//! from the generated samples. A second test runs queries that do read payloads (a text `LIKE`,
//! `json_extract`) and expects the SIGSEGV, which proves the poisoning covers the heap.
//!
//! The poisoned part runs in a child process (this test binary again, filtered to one test, with
//! [`CHILD_ENV`] set), so a fault kills the child and the parent reports it.

#![cfg(unix)]

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::RecordBatch;
use beton_query::{query, select_indices, Table};
use beton_storage::{Dataset, SampleValue, WriterOptions};
use beton_testkit::{rgb, schema};

/// Set in the child: what it should run (`metadata`, `text` or `json`).
const CHILD_ENV: &str = "BETON_POISON_CHILD";
/// Set in the child: the directory to write the dataset in (owned by the parent, so it is removed
/// even when the child dies).
const DIR_ENV: &str = "BETON_POISON_DIR";

const NUM_SAMPLES: u64 = 3000;

/// One generated sample, the ground truth the query results are checked against.
struct Sample {
    label: i64,
    score: f64,
    width: u32,
    height: u32,
    blob_len: usize,
    json: String,
    name: String,
}

/// splitmix64: a deterministic generator with no dependency.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn sample(i: u64) -> Sample {
    let r = |k: u64| mix(i * 16 + k);
    let name: String = (0..1 + r(6) % 8).map(|k| (b'a' + (mix(r(7) + k) % 26) as u8) as char).collect();
    Sample {
        label: (r(0) % 10) as i64,
        // Multiples of 1e-6: exact in f64, so comparisons with literals are exact.
        score: (r(1) % 1_000_000) as f64 / 1e6,
        width: 1 + (r(2) % 32) as u32,
        height: 1 + (r(3) % 32) as u32,
        blob_len: (r(4) % 2048) as usize,
        json: format!("{{\"k\": {}, \"tag\": \"{}\"}}", r(5) % 1000, "x".repeat((r(5) % 40) as usize)),
        name,
    }
}

fn samples() -> Vec<Sample> {
    (0..NUM_SAMPLES).map(sample).collect()
}

fn write(dir: &Path) -> Dataset {
    let path = dir.join("heap.beton");
    let fields = schema("label:int score:float image:raw blob:bytes meta:json name:text");
    let options = WriterOptions { page_size: 1 << 21, ..WriterOptions::default() };
    beton_testkit::write_with(&path, fields, options, NUM_SAMPLES, |i| {
        let s = sample(i);
        let pixels = (s.width * s.height * 3) as usize;
        vec![
            SampleValue::Int(s.label),
            SampleValue::Float(s.score),
            rgb(s.width, s.height, (0..pixels).map(|k| (k + i as usize) as u8).collect()),
            SampleValue::Bytes(vec![i as u8; s.blob_len]),
            SampleValue::Json(s.json),
            SampleValue::Text(s.name),
        ]
    });
    Dataset::open(&path).unwrap()
}

/// Makes every whole OS page of `ds`'s data pages unreadable. Returns the number of OS pages.
fn poison(ds: &Dataset) -> usize {
    // SAFETY: sysconf has no preconditions.
    let os_page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let bytes = ds.file_bytes();
    let base = bytes.as_ptr() as usize;
    assert_eq!(base % os_page, 0, "the file is mapped from offset 0, so the map is page-aligned");
    let start = ds.data_start() as usize;
    let end = ds.header().alloc_table_ptr as usize / os_page * os_page;
    assert_eq!(start % os_page, 0, "data pages start on a page-size boundary");
    assert!(end <= bytes.len() && end > start + 16 * os_page, "heap too small: {start}..{end}");
    // SAFETY: [base + start, base + end) is page-aligned and inside the live read-only mapping of
    // `ds`. Nothing in this process holds a reference into it that is read afterwards except
    // through `ds`, and reading it faults (the point of the test) rather than being undefined:
    // the fault kills this child process.
    let rc = unsafe { libc::mprotect((base + start) as *mut libc::c_void, end - start, libc::PROT_NONE) };
    assert_eq!(rc, 0, "mprotect: {}", std::io::Error::last_os_error());
    (end - start) / os_page
}

/// Runs this test binary's test `name` in a child with [`CHILD_ENV`] = `what`, the dataset in `dir`.
fn run_child(name: &str, what: &str, dir: &Path) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, what)
        .env(DIR_ENV, dir)
        .output()
        .unwrap()
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The poisoned dataset and table of a child, or `None` in the parent.
fn child() -> Option<(String, Dataset)> {
    let what = std::env::var(CHILD_ENV).ok()?;
    let dir = std::env::var_os(DIR_ENV).expect("the parent sets the directory");
    Some((what, write(Path::new(&dir))))
}

fn ids(table: &Table, predicate: &str) -> Vec<u64> {
    select_indices(table, predicate).unwrap_or_else(|e| panic!("{predicate}: {e}")).into_vec()
}

fn want_ids(samples: &[Sample], keep: impl Fn(u64, &Sample) -> bool) -> Vec<u64> {
    (0..samples.len() as u64).filter(|&i| keep(i, &samples[i as usize])).collect()
}

fn run(table: &Table, sql: &str) -> RecordBatch {
    query(table, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn i64s(b: &RecordBatch, col: usize) -> Vec<i64> {
    b.column(col).as_primitive::<Int64Type>().values().to_vec()
}

fn nbytes(s: &Sample) -> u64 {
    (s.width * s.height * 3) as u64
}

fn check_metadata_queries(table: &Table, samples: &[Sample]) {
    let n = samples.len() as i64;
    let cases: Vec<(&str, Vec<u64>)> = vec![
        ("label < 3", want_ids(samples, |_, s| s.label < 3)),
        ("score > 0.5 AND label <> 7", want_ids(samples, |_, s| s.score > 0.5 && s.label != 7)),
        ("image.width >= 20", want_ids(samples, |_, s| s.width >= 20)),
        ("image.height BETWEEN 5 AND 9", want_ids(samples, |_, s| (5..=9).contains(&s.height))),
        ("image.mode = 'raw' AND image.width < 4", want_ids(samples, |_, s| s.width < 4)),
        ("image.nbytes > 1500", want_ids(samples, |_, s| nbytes(s) > 1500)),
        ("blob < 100 OR blob >= 2000", want_ids(samples, |_, s| s.blob_len < 100 || s.blob_len >= 2000)),
        // A JSON field's size counts its NUL.
        ("meta > 40", want_ids(samples, |_, s| s.json.len() + 1 > 40)),
        ("index % 7 = 3", want_ids(samples, |i, _| i % 7 == 3)),
        (
            "label IN (1, 4) AND image.width * image.height < 100 AND score <= 0.25",
            want_ids(samples, |_, s| {
                [1, 4].contains(&s.label) && s.width * s.height < 100 && s.score <= 0.25
            }),
        ),
    ];
    for (predicate, want) in &cases {
        assert_eq!(&ids(table, predicate), want, "{predicate}");
        assert!(!want.is_empty() && want.len() < samples.len(), "{predicate}: a trivial case");
    }

    assert_eq!(i64s(&run(table, "SELECT count(*) FROM samples"), 0), [n]);
    let b = run(table, "SELECT count(*) FROM samples WHERE image.width > 16 AND meta < 30");
    let want = samples.iter().filter(|s| s.width > 16 && s.json.len() + 1 < 30).count() as i64;
    assert_eq!(i64s(&b, 0), [want]);

    let b = run(table, "SELECT label, count(*) FROM samples GROUP BY label ORDER BY label");
    let mut want: BTreeMap<i64, i64> = BTreeMap::new();
    for s in samples {
        *want.entry(s.label).or_default() += 1;
    }
    let got: BTreeMap<i64, i64> = i64s(&b, 0).into_iter().zip(i64s(&b, 1)).collect();
    assert_eq!(got, want);

    let b = run(table, "SELECT index, score FROM samples ORDER BY score DESC, index LIMIT 10");
    let mut order: Vec<u64> = (0..samples.len() as u64).collect();
    order.sort_by(|&a, &b| samples[b as usize].score.total_cmp(&samples[a as usize].score).then(a.cmp(&b)));
    assert_eq!(b.column(0).as_primitive::<UInt64Type>().values().to_vec(), order[..10]);
    let top: Vec<f64> = order[..10].iter().map(|&i| samples[i as usize].score).collect();
    assert_eq!(b.column(1).as_primitive::<Float64Type>().values().to_vec(), top);

    let b = run(table, "SELECT sum(image.nbytes), sum(label), sum(blob), avg(score) FROM samples");
    assert_eq!(i64s(&b, 0), [samples.iter().map(nbytes).sum::<u64>() as i64]);
    assert_eq!(i64s(&b, 1), [samples.iter().map(|s| s.label).sum::<i64>()]);
    assert_eq!(i64s(&b, 2), [samples.iter().map(|s| s.blob_len as i64).sum::<i64>()]);
    let avg = b.column(3).as_primitive::<Float64Type>().value(0);
    let want = samples.iter().map(|s| s.score).sum::<f64>() / n as f64;
    assert!((avg - want).abs() < 1e-9, "avg(score) {avg}, expected {want}");

    let b = run(
        table,
        "SELECT image.width, count(*), max(score) FROM samples WHERE label = 2 GROUP BY image.width \
         HAVING count(*) > 3 ORDER BY image.width",
    );
    let mut want: BTreeMap<i64, (i64, f64)> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.label == 2) {
        let e = want.entry(s.width as i64).or_insert((0, f64::MIN));
        *e = (e.0 + 1, e.1.max(s.score));
    }
    want.retain(|_, e| e.0 > 3);
    let widths = arrow_cast::cast(b.column(0), &arrow_schema::DataType::Int64).unwrap();
    let widths = widths.as_primitive::<Int64Type>().values().to_vec();
    let maxes = b.column(2).as_primitive::<Float64Type>().values().to_vec();
    let got: BTreeMap<i64, (i64, f64)> = widths.into_iter().zip(i64s(&b, 1).into_iter().zip(maxes)).collect();
    assert_eq!(got, want);
}

#[test]
fn metadata_queries_read_no_heap_page() {
    let Some((what, ds)) = child() else {
        let dir = tempfile::tempdir().unwrap();
        let out = run_child("metadata_queries_read_no_heap_page", "metadata", dir.path());
        assert!(out.status.success(), "the poisoned child failed: {}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("poisoned child: all checks passed"));
        return;
    };
    assert_eq!(what, "metadata");
    let samples = samples();
    let table = Table::new(&ds);
    let pages = poison(&ds);
    check_metadata_queries(&table, &samples);
    println!("poisoned child: all checks passed with {pages} OS pages of heap unreadable");
}

#[test]
fn payload_queries_fault_on_poisoned_heap() {
    const QUERIES: &[(&str, &str)] = &[
        ("text", "name LIKE 'a%'"),
        ("json", "SELECT count(*) FROM samples WHERE json_extract(meta, '$.k') = '7'"),
    ];
    let Some((what, ds)) = child() else {
        for (what, sql) in QUERIES {
            let dir = tempfile::tempdir().unwrap();
            let out = run_child("payload_queries_fault_on_poisoned_heap", what, dir.path());
            assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{sql}: {}", describe(&out));
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains("poisoned child: querying"), "{sql}: died before the query: {stdout}");
        }
        return;
    };
    let sql = QUERIES.iter().find(|q| q.0 == what).expect("a known query").1;
    let table = Table::new(&ds);
    // The same query unpoisoned, so the fault below can only come from the poisoning.
    let before = if sql.starts_with("SELECT") { run(&table, sql).num_rows() } else { ids(&table, sql).len() };
    let table = Table::new(&ds);
    poison(&ds);
    println!("poisoned child: querying {sql} (unpoisoned: {before})");
    if sql.starts_with("SELECT") {
        run(&table, sql);
    } else {
        ids(&table, sql);
    }
    println!("poisoned child: {sql} read no payload");
}
