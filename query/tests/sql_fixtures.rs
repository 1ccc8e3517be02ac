//! SQL over the FFCV 1.0.2 fixtures (tests/data/ffcv): counts by Int field, by image mode, by
//! width range and the sum of image sizes equal what `NAME.expected.json` records; and a corpus of
//! bad queries, each an `Error::Sql` at an exact position with a given message.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use beton_query::{query, select_indices, Error, Table};
use beton_storage::Dataset;
use serde_json::Value;

fn ffcv_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("tests").join("data").join("ffcv")
}

/// Fixtures whose expected.json lists samples (custom_field is left out: opening it needs the
/// custom field's layout).
fn fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(ffcv_dir())
        .expect("tests/data/ffcv")
        .filter_map(|e| e.ok()?.file_name().into_string().ok()?.strip_suffix(".beton.gz").map(str::to_string))
        .filter(|n| fields(&expected(n)).iter().all(|f| f.1 != CUSTOM))
        .filter(|n| expected(n).get("samples").is_some_and(|s| s.as_array().is_some_and(|a| !a.is_empty())))
        .collect();
    names.sort();
    assert!(names.len() >= 15, "fixtures missing: {names:?}");
    names
}

/// Fixture `name` decompressed into a temporary directory.
fn open(name: &str) -> (tempfile::TempDir, Dataset) {
    let gz = std::fs::read(ffcv_dir().join(format!("{name}.beton.gz"))).expect("fixture");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut bytes).expect("gunzip");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{name}.beton"));
    std::fs::write(&path, bytes).expect("write fixture");
    let ds = Dataset::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    (dir, ds)
}

fn expected(name: &str) -> Value {
    let text = std::fs::read_to_string(ffcv_dir().join(format!("{name}.expected.json"))).expect("json");
    serde_json::from_str(&text).expect("expected.json parses")
}

/// (name, FFCV type id) of each field.
fn fields(exp: &Value) -> Vec<(String, u64)> {
    exp["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f["type_id"].as_u64().unwrap()))
        .collect()
}

/// Runs `check(fixture, its expected values, its table, field)` on every field of FFCV type id
/// `type_id` of every fixture; returns how many fields it checked.
fn check_fields(type_id: u64, mut check: impl FnMut(&str, &Value, &Table<'_>, &str)) -> usize {
    let mut checked = 0;
    for name in fixtures() {
        let exp = expected(&name);
        let (_dir, ds) = open(&name);
        let table = Table::new(&ds);
        for (field, _) in fields(&exp).into_iter().filter(|f| f.1 == type_id) {
            check(&name, &exp, &table, &field);
            checked += 1;
        }
    }
    checked
}

fn run(table: &Table, sql: &str) -> RecordBatch {
    query(table, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn i64_col(b: &RecordBatch, col: usize) -> Vec<i64> {
    let c = b.column(col).as_primitive::<Int64Type>();
    assert_eq!(c.null_count(), 0);
    c.values().to_vec()
}

const INT: u64 = 1;
const RGB_IMAGE: u64 = 2;
const CUSTOM: u64 = 255;

#[test]
fn counts_by_int_field_match_expected() {
    let checked = check_fields(INT, |name, exp, table, field| {
        let mut want: BTreeMap<i64, i64> = BTreeMap::new();
        for s in exp["samples"].as_array().unwrap() {
            *want.entry(s[&field].as_i64().expect("int value")).or_default() += 1;
        }
        let sql = format!("SELECT \"{field}\", count(*) FROM samples GROUP BY \"{field}\" ORDER BY 1");
        let b = run(table, &sql);
        let got: BTreeMap<i64, i64> = i64_col(&b, 0).into_iter().zip(i64_col(&b, 1)).collect();
        assert_eq!(got, want, "{name}: {sql}");
        assert_eq!(b.num_rows(), want.len(), "{name}: {sql}");
        // The same counts through select_indices, one value at a time.
        for (v, n) in &want {
            let ids = select_indices(table, &format!("\"{field}\" = {v}")).unwrap();
            assert_eq!(ids.len() as i64, *n, "{name}: {field} = {v}");
        }
    });
    assert!(checked >= 10, "only {checked} Int fields checked");
}

#[test]
fn image_counts_and_sizes_match_expected() {
    let checked = check_fields(RGB_IMAGE, |name, exp, table, field| {
        let samples = exp["samples"].as_array().unwrap();
        let img = |s: &Value, k: &str| s[&field][k].as_u64().unwrap_or_else(|| panic!("{name}: {k}"));

        // By mode: FFCV writes 0 for JPEG, 1 for raw pixels.
        let mut want: BTreeMap<String, i64> = BTreeMap::new();
        for s in samples {
            let mode = match img(s, "mode") {
                0 => "jpg",
                1 => "raw",
                m => panic!("{name}: mode {m}"),
            };
            *want.entry(mode.to_string()).or_default() += 1;
        }
        let sql =
            format!("SELECT \"{field}.mode\", count(*) FROM samples GROUP BY \"{field}.mode\" ORDER BY 1");
        let b = run(table, &sql);
        let modes: Vec<String> =
            b.column(0).as_string::<i32>().iter().map(|m| m.unwrap().to_string()).collect();
        let got: BTreeMap<String, i64> = modes.into_iter().zip(i64_col(&b, 1)).collect();
        assert_eq!(got, want, "{name}: {sql}");

        // By width range: every [lo, hi] over the distinct widths (plus one past the ends).
        let widths: Vec<u64> = samples.iter().map(|s| img(s, "width")).collect();
        let mut bounds: Vec<u64> = widths.clone();
        bounds.sort_unstable();
        bounds.dedup();
        let max = *bounds.last().unwrap();
        bounds.insert(0, bounds[0].saturating_sub(1));
        bounds.push(max + 1);
        let step = (bounds.len() / 6).max(1);
        let picks: Vec<u64> = bounds.iter().copied().step_by(step).chain([max + 1]).collect();
        for &lo in &picks {
            for &hi in &picks {
                let n = widths.iter().filter(|&&w| lo <= w && w <= hi).count() as i64;
                let sql =
                    format!("SELECT count(*) FROM samples WHERE \"{field}.width\" BETWEEN {lo} AND {hi}");
                assert_eq!(i64_col(&run(table, &sql), 0), [n], "{name}: {sql}");
                let pred = format!("\"{field}.width\" NOT BETWEEN {lo} AND {hi}");
                let ids = select_indices(table, &pred).unwrap();
                assert_eq!(ids.len() as i64, widths.len() as i64 - n, "{name}: {pred}");
            }
        }

        // Heights by the same GROUP BY, and the sum of payload sizes.
        let mut want_h: BTreeMap<i64, i64> = BTreeMap::new();
        for s in samples {
            *want_h.entry(img(s, "height") as i64).or_default() += 1;
        }
        let sql = format!(
                "SELECT CAST(\"{field}.height\" AS BIGINT) AS h, count(*) FROM samples GROUP BY \"{field}.height\" ORDER BY h"
            );
        let b = run(table, &sql);
        let got: BTreeMap<i64, i64> = i64_col(&b, 0).into_iter().zip(i64_col(&b, 1)).collect();
        assert_eq!(got, want_h, "{name}: {sql}");

        let total: u64 = samples.iter().map(|s| img(s, "nbytes")).sum();
        let sql = format!("SELECT sum(\"{field}.nbytes\"), count(*) FROM samples");
        let b = run(table, &sql);
        assert_eq!(i64_col(&b, 0), [total as i64], "{name}: {sql}");
        assert_eq!(i64_col(&b, 1), [samples.len() as i64], "{name}: {sql}");
    });
    assert!(checked >= 8, "only {checked} image fields checked");
}

/// (SQL, line, column, message substring). SQL starting with SELECT / WITH runs through `query`,
/// the rest through `select_indices`. Run over photos_jpg: columns index, image.mode,
/// image.width, image.height, image.nbytes, label.
const BAD_QUERIES: &[(&str, u64, u64, &str)] = &[
    // unknown columns
    ("lable < 3", 1, 1, "no column named 'lable'; the columns are: index, image.mode"),
    ("label < 3 AND\n  image.widht > 3", 2, 3, "no column named 'image.widht'"),
    ("SELECT index, nope FROM samples", 1, 15, "no column named 'nope'"),
    ("SELECT index FROM samples ORDER BY nope", 1, 36, "no column named 'nope'"),
    // type mismatches
    ("image.mode > 3", 1, 1, "type mismatch: VARCHAR > INTEGER"),
    ("label = 'three'", 1, 1, "type mismatch: INTEGER = VARCHAR"),
    ("image.mode LIKE 3", 1, 17, "expected a string, got INTEGER"),
    ("label + 'a' = 1", 1, 1, "expected a number, got VARCHAR"),
    ("label AND image.width > 3", 1, 1, "expected a boolean, got INTEGER"),
    ("label BETWEEN 'a' AND 3", 1, 15, "type mismatch: INTEGER >= VARCHAR"),
    ("CASE WHEN label = 1 THEN 'x' ELSE 3 END = 'x'", 1, 26, "type mismatch: VARCHAR vs INTEGER"),
    ("abs(image.mode) = 1", 1, 1, "expected a number, got VARCHAR"),
    ("SELECT sum(image.mode) FROM samples", 1, 8, "sum() needs numbers, got VARCHAR"),
    ("SELECT label FROM samples GROUP BY label HAVING label", 1, 49, "HAVING needs a boolean, got INTEGER"),
    ("CAST(image.mode AS INT) = 1", 1, 6, "Cannot cast string 'jpg'"),
    // parse errors
    ("label <", 1, 8, "found: EOF"),
    ("label = 1 AND", 1, 14, "EOF"),
    ("label < 3 LIMIT 3", 1, 11, "unexpected 'LIMIT' after the predicate"),
    ("label IN\n  3", 2, 3, "Line: 2, Column: 3"),
    ("SELECT 1 FROM samples; SELECT 2 FROM samples", 1, 24, "expected one statement, got 2"),
    // unsupported syntax
    ("SELECT * FROM samples JOIN other ON true", 1, 28, "JOIN not supported"),
    ("SELECT * FROM samples, other", 1, 24, "more than one table in FROM not supported"),
    ("SELECT * FROM others", 1, 15, "no table named 'others'"),
    ("SELECT * FROM (SELECT 1) t", 1, 16, "subqueries not supported"),
    ("label IN (SELECT label FROM samples)", 1, 1, "subqueries not supported"),
    ("SELECT index FROM samples WHERE label = (SELECT 1)", 1, 42, "subqueries not supported"),
    ("EXISTS (SELECT 1)", 1, 9, "subqueries not supported"),
    ("SELECT row_number() OVER () FROM samples", 1, 8, "window functions not supported"),
    ("SELECT DISTINCT label FROM samples", 1, 1, "DISTINCT not supported"),
    ("SELECT count(DISTINCT label) FROM samples", 1, 8, "DISTINCT or clauses inside a function call"),
    (
        "SELECT label FROM samples UNION SELECT label FROM samples",
        1,
        1,
        "UNION (set operations) not supported",
    ),
    ("WITH t AS (SELECT 1) SELECT * FROM t", 1, 1, "WITH not supported"),
    ("label ~ 3", 1, 1, "operator ~ not supported"),
    ("image.mode LIKE 'a' ESCAPE 'ab'", 1, 28, "ESCAPE needs one character, got 'ab'"),
    ("image.mode LIKE 'a!' ESCAPE '!'", 1, 17, "ends with its ESCAPE character"),
    ("abs(-9223372036854775808) = 1", 1, 1, "abs(-9223372036854775808) overflows BIGINT"),
    // functions
    ("foo(label) = 1", 1, 1, "unknown function foo()"),
    ("lower(label, 1) = 'a'", 1, 1, "lower() takes one argument, got 2"),
    ("SELECT sum(label, index) FROM samples", 1, 8, "sum() takes one argument, got 2"),
    ("SELECT avg(*) FROM samples", 1, 8, "avg(*) is not allowed; only count(*)"),
    ("json_extract(label, '$.a') = '1'", 1, 14, "'label' is not a JSON field"),
    // aggregates and grouping
    ("count(*) > 3", 1, 1, "aggregate count() is not allowed here"),
    ("SELECT index FROM samples WHERE sum(label) > 3", 1, 33, "aggregate sum() is not allowed here"),
    ("SELECT sum(sum(label)) FROM samples", 1, 12, "aggregates cannot be nested"),
    ("SELECT label, count(*) FROM samples", 1, 8, "'label' must appear in GROUP BY or inside an aggregate"),
    ("SELECT index FROM samples GROUP BY label", 1, 8, "'index' must appear in GROUP BY"),
    ("SELECT label FROM samples GROUP BY label HAVING image.width > 1", 1, 49, "'image.width' must appear"),
    ("SELECT * FROM samples GROUP BY label", 1, 8, "* cannot be selected in a grouped or aggregate query"),
    ("SELECT index FROM samples ORDER BY 7", 1, 36, "ORDER BY position 7 is not in the select list"),
    // runtime
    ("label / 0 = 1", 1, 1, "Divide by zero"),
];

/// Errors whose position is off: `LIMIT -1` points at the `1` (not the `-`), and an unsupported
/// CAST target points at the operand (`label`, 1:6) rather than at the CAST.
const BAD_POSITIONS: &[(&str, u64, u64, &str)] = &[
    ("SELECT index FROM samples LIMIT -1", 1, 33, "expected a non-negative integer"),
    ("CAST(label AS DATE) = 1", 1, 1, "CAST to DATE not supported"),
    ("label = 1 AND cast ( label AS DATE ) = 1", 1, 15, "CAST to DATE not supported"),
    ("SELECT index FROM samples LIMIT 5 OFFSET - 2", 1, 42, "expected a non-negative integer"),
];

#[test]
fn bad_queries_give_sql_errors_at_their_positions() {
    assert!(BAD_QUERIES.len() >= 30);
    check_errors(BAD_QUERIES);
}

#[test]
fn errors_point_at_the_first_token_of_minus_and_cast() {
    check_errors(BAD_POSITIONS);
}

fn check_errors(cases: &[(&str, u64, u64, &str)]) {
    let (_dir, ds) = open("photos_jpg");
    let table = Table::new(&ds);
    let mut failures = Vec::new();
    for &(sql, line, column, message) in cases {
        let word = sql.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
        let result = if word == "select" || word == "with" {
            query(&table, sql).map(|_| ())
        } else {
            select_indices(&table, sql).map(|_| ())
        };
        match result {
            Ok(()) => failures.push(format!("{sql:?}: succeeded")),
            Err(Error::Sql { line: l, column: c, message: m }) => {
                if (l, c) != (line, column) || !m.contains(message) {
                    failures.push(format!(
                        "{sql:?}: got {l}:{c} {m:?}, expected {line}:{column} containing {message:?}"
                    ));
                }
            }
            Err(other) => failures.push(format!("{sql:?}: not an Error::Sql: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{} of {} failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
