//! The SQL engine at its limits (issue 18): no text crashes it. Chains of 20,000 `OR`/`AND`/`+`
//! terms and `IN` lists of 100,000 values give the right answer on a 2 MB thread stack; nesting
//! past `MAX_NESTING` is an `Error::Sql` at the token that goes past it; every error has a
//! position; BIGINT overflow is an error; `GROUP BY` puts `0.0`/`-0.0` and all NaNs in one group
//! each; `LIKE … ESCAPE` works.
//!
//! Row i of the table (64 rows): `label` i % 8; `big` i64::MIN for row 0, i64::MAX for row 1, i
//! otherwise; `score` 0.0, -0.0, NaN, -NaN, 1.5, 2.5, 1.5, 0.0 by i % 8; `caption` one of
//! [`CAPTIONS`] by i % 8; `flag` i % 2 == 0.

use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::RecordBatch;
use beton_query::sql::MAX_NESTING;
use beton_query::{query, select_indices, Error, Table};
use beton_storage::{Dataset, SampleValue};

const NUM_ROWS: u64 = 64;

const CAPTIONS: [&str; 8] = ["100%", "100x", "a_b", "axb", r"back\slash", "backslash", "50% off", "x!y"];

const SCORES: [f64; 8] = [0.0, -0.0, f64::NAN, -f64::NAN, 1.5, 2.5, 1.5, 0.0];

/// The stack the chain tests run on: a thread's, smaller than the 8 MB of a main thread (Python's
/// worker threads and Rust's spawned threads default to 2 MB).
const SMALL_STACK: usize = 2 << 20;

fn dataset(dir: &std::path::Path) -> Dataset {
    let path = dir.join("limits.beton");
    let fields = beton_testkit::schema("label:int big:int score:float caption:text flag:bool");
    beton_testkit::write(&path, fields, NUM_ROWS, |i| {
        let big = match i {
            0 => i64::MIN,
            1 => i64::MAX,
            _ => i as i64,
        };
        vec![
            SampleValue::Int((i % 8) as i64),
            SampleValue::Int(big),
            SampleValue::Float(SCORES[(i % 8) as usize]),
            SampleValue::Text(CAPTIONS[(i % 8) as usize].to_string()),
            SampleValue::Bool(i % 2 == 0),
        ]
    });
    Dataset::open(&path).unwrap()
}

/// Runs `f` on the table, on a thread with a 2 MB stack. A stack overflow aborts the test binary.
fn on_small_stack(f: impl FnOnce(&Table) + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(move || {
            let dir = tempfile::tempdir().unwrap();
            let ds = dataset(dir.path());
            f(&Table::new(&ds));
        })
        .unwrap()
        .join()
        .unwrap();
}

fn with_table(f: impl FnOnce(&Table)) {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    f(&Table::new(&ds));
}

/// The rows (ids) whose label is `label`.
fn rows_with_label(label: u64) -> Vec<u64> {
    (0..NUM_ROWS).filter(|i| i % 8 == label).collect()
}

fn ids(table: &Table, sql: &str) -> Vec<u64> {
    select_indices(table, sql).unwrap_or_else(|e| panic!("{}: {e}", &sql[..sql.len().min(200)])).into_vec()
}

fn run(table: &Table, sql: &str) -> RecordBatch {
    query(table, sql).unwrap_or_else(|e| panic!("{}: {e}", &sql[..sql.len().min(200)]))
}

fn sql_error(table: &Table, sql: &str) -> (String, u64, u64) {
    let result = if sql.trim_start().to_ascii_uppercase().starts_with("SELECT") {
        query(table, sql).map(|_| ())
    } else {
        select_indices(table, sql).map(|_| ())
    };
    match result {
        Err(Error::Sql { message, line, column }) => (message, line, column),
        Err(other) => panic!("{sql}: not an SQL error: {other}"),
        Ok(()) => panic!("{sql}: succeeded, expected an error"),
    }
}

fn i64s(b: &RecordBatch, col: usize) -> Vec<Option<i64>> {
    b.column(col).as_primitive::<Int64Type>().iter().collect()
}

const TERMS: usize = 20_000;

/// `label = 100000 OR label = 100001 OR … OR label = 3`: only the last term matches anything.
fn or_chain() -> String {
    let mut terms: Vec<String> = (0..TERMS - 1).map(|k| format!("label = {}", 100_000 + k)).collect();
    terms.push("label = 3".into());
    terms.join(" OR ")
}

/// `label < 100000 AND … AND label = 5`.
fn and_chain() -> String {
    let mut terms: Vec<String> = (0..TERMS - 1).map(|k| format!("label < {}", 100_000 + k)).collect();
    terms.push("label = 5".into());
    terms.join(" AND ")
}

/// `label + label + …`, 20,000 terms: 20,000 × label.
fn plus_chain() -> String {
    vec!["label"; TERMS].join(" + ")
}

#[test]
fn chains_of_20000_terms_in_where_run_on_a_2mb_stack() {
    on_small_stack(|table| {
        let (or, and, plus) = (or_chain(), and_chain(), plus_chain());
        let started = Instant::now();
        assert_eq!(ids(table, &or), rows_with_label(3));
        eprintln!("20,000-term OR chain (predicate): {:?}", started.elapsed());
        assert_eq!(ids(table, &and), rows_with_label(5));
        assert_eq!(ids(table, &format!("{plus} = {}", 4 * TERMS)), rows_with_label(4));
        assert_eq!(ids(table, &format!("SELECT index FROM samples WHERE {or}")), rows_with_label(3));
        // Inside parentheses, under NOT, and with Kleene logic: NULL OR … OR label = 3.
        assert_eq!(ids(table, &format!("NOT ({or}) AND label = 2")), rows_with_label(2));
        assert_eq!(ids(table, &format!("NULL OR {or}")), rows_with_label(3));
        assert_eq!(ids(table, &format!("({and}) AND NULL IS NULL")), rows_with_label(5));
        // Overflow is still checked in the middle of a chain.
        let over = format!("{plus} + 9223372036854775807 > 0");
        let (message, line, column) = sql_error(table, &over);
        assert!(message.contains("Overflow"), "{message}");
        assert_eq!((line, column), (1, 1));
        // A bare predicate given to query(): every column of its rows.
        assert_eq!(run(table, &or).num_rows(), 8);
    });
}

#[test]
fn chains_of_20000_terms_in_select_group_by_and_having_run_on_a_2mb_stack() {
    on_small_stack(|table| {
        let (or, plus) = (or_chain(), plus_chain());
        let started = Instant::now();
        let b = run(table, &format!("SELECT label, {plus} AS s FROM samples WHERE label > 5 ORDER BY index"));
        eprintln!("20,000-term + chain (projection): {:?}", started.elapsed());
        let want: Vec<Option<i64>> =
            (0..NUM_ROWS).filter(|i| i % 8 > 5).map(|i| Some((i % 8) as i64 * 20_000)).collect();
        assert_eq!(i64s(&b, 1), want);
        // Unaliased: the column is named by the expression's text.
        let b = run(table, &format!("SELECT {plus} FROM samples LIMIT 1"));
        assert_eq!(b.schema().field(0).name(), &plus);
        // GROUP BY the chain, selected and ordered by it.
        let b =
            run(table, &format!("SELECT {plus}, count(*) FROM samples GROUP BY {plus} ORDER BY {plus} DESC"));
        assert_eq!(i64s(&b, 0), (0..8).rev().map(|l| Some(l * 20_000)).collect::<Vec<_>>());
        assert_eq!(i64s(&b, 1), [Some(8); 8]);
        // HAVING a chain over group keys, and a chain over an aggregate.
        let b = run(table, &format!("SELECT label, count(*) FROM samples GROUP BY label HAVING {or}"));
        assert_eq!(i64s(&b, 0), [Some(3)]);
        let sums = vec!["sum(label)"; TERMS].join(" + ");
        let b = run(
            table,
            &format!("SELECT label, {sums} FROM samples GROUP BY label HAVING {sums} > 0 ORDER BY label"),
        );
        assert_eq!(i64s(&b, 1), (1..8).map(|l| Some(l * 8 * 20_000)).collect::<Vec<_>>());
        eprintln!("projection, GROUP BY, HAVING chains: {:?}", started.elapsed());
    });
}

#[test]
fn in_list_of_100000_values_is_linear() {
    on_small_stack(|table| {
        let mut values: Vec<String> = (0..100_000).map(|k| (1_000_000 + k).to_string()).collect();
        values[50_000] = "6".into();
        let list = values.join(", ");
        assert_eq!(ids(table, &format!("label IN ({list})")), rows_with_label(6));
        let not_in = ids(table, &format!("label NOT IN ({list})"));
        assert_eq!(not_in.len() as u64, NUM_ROWS - 8);
        let floats: Vec<String> = (0..100_000).map(|k| format!("{k}.5")).collect();
        let want = rows_with(|i| (4..=6).contains(&(i % 8)));
        assert_eq!(ids(table, &format!("score IN ({})", floats.join(", "))), want);
        let b =
            run(table, &format!("SELECT count(*) FROM samples WHERE label IN ({list}) OR label IN ({list})"));
        assert_eq!(i64s(&b, 0), [Some(8)]);
    });
    // N values over N rows: one comparison kernel and one OR per value (the fold, which took 6 s
    // for 100,000 over 100,000 in a test build) grows with their product, a hash set linearly.
    // Timed at N and N / 4 in the same run (each the best of 3): the product would take 16x as
    // long, linear about 4x. A ratio, not a wall-clock bound: this machine is shared.
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(|| {
            let timed = |n: u64| -> Duration {
                let (_dir, path) = beton_testkit::temp_path("wide.beton");
                beton_testkit::write(&path, beton_testkit::schema("n:int"), n, |i| {
                    vec![SampleValue::Int(i as i64)]
                });
                let ds = Dataset::open(&path).unwrap();
                let table = Table::new(&ds);
                let list: Vec<String> = (0..n).map(|k| (3 * k).to_string()).collect();
                let sql = format!("n IN ({})", list.join(", "));
                (0..3)
                    .map(|_| {
                        let started = Instant::now();
                        let got = ids(&table, &sql);
                        let took = started.elapsed();
                        assert_eq!(got, (0..n).step_by(3).collect::<Vec<u64>>());
                        took
                    })
                    .min()
                    .unwrap()
            };
            let (small, large) = (timed(50_000), timed(200_000));
            let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
            eprintln!("IN list over as many rows: 50,000 {small:?}, 200,000 {large:?} ({ratio:.1}x)");
            assert!(
                ratio < 10.0,
                "4x the values took {ratio:.1}x as long: not linear ({small:?}, {large:?})"
            );
        })
        .unwrap()
        .join()
        .unwrap();
}

fn rows_with(keep: impl Fn(u64) -> bool) -> Vec<u64> {
    (0..NUM_ROWS).filter(|&i| keep(i)).collect()
}

/// `x IN (…)` over literals takes a hash set; it must select what `x = a OR x = b OR …` selects,
/// with NULL, mixed integer and float items, -0.0, NaN and BIGINT extremes.
#[test]
fn in_list_selects_what_the_or_of_equalities_selects() {
    let columns = ["label", "big", "score", "caption", "flag", "index", "label * 0.5", "NULL"];
    let items: &[&[&str]] = &[
        &["1", "3"],
        &["1", "NULL"],
        &["NULL"],
        &["0", "2.5"],
        &["-0.0"],
        &["0.0", "1.5"],
        &["CAST('NaN' AS DOUBLE)"],
        &["-9223372036854775808", "9223372036854775807", "5"],
        &["1.0", "7"],
        &["'100%'", "'a_b'", "NULL"],
        &["'x!y'"],
        &["TRUE"],
        &["FALSE", "NULL"],
        &["63", "0", "-1"],
    ];
    with_table(|table| {
        let mut compared = 0;
        for column in columns {
            for list in items {
                let ors = list.iter().map(|x| format!("{column} = {x}")).collect::<Vec<_>>().join(" OR ");
                for (in_sql, or_sql) in [
                    (format!("{column} IN ({})", list.join(", ")), ors.clone()),
                    (format!("{column} NOT IN ({})", list.join(", ")), format!("NOT ({ors})")),
                    (format!("({column} IN ({})) IS NULL", list.join(", ")), format!("({ors}) IS NULL")),
                ] {
                    let got = select_indices(table, &in_sql).map(|s| s.into_vec()).map_err(|e| e.to_string());
                    let want =
                        select_indices(table, &or_sql).map(|s| s.into_vec()).map_err(|e| e.to_string());
                    match (&got, &want) {
                        (Ok(g), Ok(w)) => assert_eq!(g, w, "{in_sql} vs {or_sql}"),
                        (Err(g), Err(w)) => {
                            assert!(g.contains("type mismatch") && w.contains("type mismatch"), "{g} / {w}")
                        }
                        _ => panic!("{in_sql}: {got:?}, {or_sql}: {want:?}"),
                    }
                    compared += 1;
                }
            }
        }
        assert_eq!(compared, columns.len() * items.len() * 3);
        // The first item of the wrong type is named, at its position.
        let (message, line, column) = sql_error(table, "label IN (1, 'a', 2.5)");
        assert_eq!((message.as_str(), line, column), ("type mismatch: INTEGER = VARCHAR", 1, 14));
    });
}

/// `depth` parentheses around `label = 1`, on line 2.
fn parenthesised(depth: usize) -> String {
    format!("index >= 0 AND\n{}label = 1{}", "(".repeat(depth), ")".repeat(depth))
}

#[test]
fn nesting_past_the_limit_is_an_error_at_the_token_past_it() {
    assert_eq!(MAX_NESTING, 256);
    on_small_stack(|table| {
        assert_eq!(ids(table, &parenthesised(MAX_NESTING)), rows_with_label(1));
        assert_eq!(
            ids(table, &format!("SELECT index FROM samples WHERE {}", parenthesised(MAX_NESTING))),
            rows_with_label(1)
        );
        let (message, line, column) = sql_error(table, &parenthesised(MAX_NESTING + 1));
        assert!(message.contains("nested deeper than 256 levels"), "{message}");
        assert_eq!((line, column), (2, MAX_NESTING as u64 + 1), "the first '(' past the limit");
        let select = format!("SELECT index\nFROM samples WHERE {}", parenthesised(1000));
        assert_eq!(sql_error(table, &select).1, 3);
        assert_eq!(sql_error(table, &select).2, MAX_NESTING as u64 + 1);
        // Functions, CASE and brackets nest too.
        let abs = format!("{}label{} = 1", "abs(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
        assert_eq!(ids(table, &abs), rows_with_label(1));
        let abs = format!("{}label{} = 1", "abs(".repeat(MAX_NESTING + 1), ")".repeat(MAX_NESTING + 1));
        assert_eq!(sql_error(table, &abs).2, 4 * MAX_NESTING as u64 + 4, "the '(' of the 257th abs");
        let case = format!("{}label = 1{}", "CASE WHEN TRUE THEN ".repeat(300), " END".repeat(300));
        let (message, line, column) = sql_error(table, &case);
        assert!(message.contains("nested deeper"), "{message}");
        assert_eq!((line, column), (1, 20 * 256 + 1));
        // `1 + (1 + (…))` costs sqlparser two levels a parenthesis: the limit still holds.
        let sums = format!("{}label{} = 257", "1 + (".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
        assert_eq!(ids(table, &sums), rows_with_label(1));
        let nots = format!("{}(label = 1){}", "NOT (".repeat(MAX_NESTING / 2), ")".repeat(MAX_NESTING / 2));
        assert_eq!(ids(table, &nots), rows_with_label(1), "an even number of NOTs");
    });
}

#[test]
fn sixty_chained_nots_parse_and_evaluate() {
    on_small_stack(|table| {
        for n in [59, 60, 61, 200] {
            let sql = format!("{}label = 1", "NOT ".repeat(n));
            let want = if n % 2 == 0 { rows_with_label(1) } else { rows_with(|i| i % 8 != 1) };
            assert_eq!(ids(table, &sql), want, "{n} NOTs");
            assert_eq!(ids(table, &format!("SELECT index FROM samples WHERE {sql}")), want, "{n} NOTs");
        }
        let minus = format!("{}label = 1", "- ".repeat(100));
        assert_eq!(ids(table, &minus), rows_with_label(1));
        let (message, line, column) = sql_error(table, &format!("{}label = 1", "NOT ".repeat(300)));
        assert!(message.contains("nested deeper"), "{message}");
        assert_eq!((line, column), (1, 4 * 256 + 1), "the 257th NOT");
    });
}

/// Flat chains of the postfix forms (`IS NULL`, `::`) are as deep as they are long too.
#[test]
fn long_chains_of_other_forms_do_not_overflow() {
    on_small_stack(|table| {
        let is_null = format!("(label = 1){} IS NOT NULL", " IS NOT NULL".repeat(5_000));
        assert_eq!(ids(table, &is_null).len() as u64, NUM_ROWS);
        let casts = format!("label{} = 1", "::BIGINT".repeat(5_000));
        assert_eq!(ids(table, &casts), rows_with_label(1));
        // Forms beton refuses, with a long chain inside: an error, not a crash.
        for sql in [
            format!("label IN (SELECT {} FROM samples)", plus_chain()),
            format!("SELECT index FROM samples WHERE label = (SELECT {})", or_chain()),
            format!("label IS DISTINCT FROM {}", vec!["1"; TERMS].join(" IS DISTINCT FROM ")),
            format!("ARRAY[{}] = 1", plus_chain()),
            format!("SELECT 1 FROM samples QUALIFY {}", or_chain()),
            format!("SELECT 1 FROM samples UNION {}", vec!["SELECT 1 FROM samples"; 2_000].join(" UNION ")),
            format!("SELECT {} FROM samples; SELECT 1", plus_chain()),
        ] {
            let (_, line, column) = sql_error(table, &sql);
            assert!(line >= 1 && column >= 1, "{}", &sql[..60]);
        }
    });
}

#[test]
fn every_error_has_a_position() {
    let texts = [
        "",
        "   ",
        "\n  ",
        "SELECT",
        "SELECT * FROM",
        "SELECT * FROM samples WHERE",
        "SELECT * FROM samples LIMIT",
        "(",
        ")",
        "label = 'abc",
        "label = \"abc",
        "WITH",
        "label IN ()",
        "label IN",
        "label LIKE",
        "CASE",
        "SELECT 1 FROM samples; SELECT 2 FROM samples",
        "SELECT 1 FROM samples SELECT 2",
        "INSERT INTO samples VALUES (1)",
        "SELECT a FROM samples WHERE label RLIKE 'x'",
        "label RLIKE 'x'",
        "STRUCT(1) = 1",
        "SELECT 1 FROM samples FETCH FIRST ROWS ONLY",
        "SELECT 1 FROM samples FOR UPDATE",
        "SELECT 1 FROM samples LIMIT 1 BY label",
        "SELECT 1 FROM samples, LATERAL (SELECT 1)",
        "SELECT 1 FROM generate_series(1, 2)",
        "VALUES (1)",
        "SELECT 1 FROM samples UNION SELECT 2 FROM samples",
        "SELECT samples.* FROM samples GROUP BY label",
        "x -> 1",
        "label = 1 ;",
    ];
    with_table(|table| {
        for sql in texts {
            for result in [select_indices(table, sql).map(|_| ()), query(table, sql).map(|_| ())] {
                if let Err(Error::Sql { message, line, column }) = result {
                    assert!(line >= 1 && column >= 1, "{sql:?}: {message} at {line}:{column}");
                }
            }
        }
    });
}

/// Random token soup: every SQL error has a position (line and column >= 1).
#[test]
fn token_soup_errors_have_positions() {
    use proptest::prelude::*;
    const TOKENS: &[&str] = &[
        "label", "score", "caption", "nope", "samples", "SELECT", "FROM", "WHERE", "GROUP BY", "HAVING",
        "ORDER BY", "LIMIT", "OFFSET", "*", "count(*)", "sum(", "abs(", "CAST(", "AS INT)", "(", ")", "[",
        "]", ",", ";", "AND", "OR", "NOT", "IN", "BETWEEN", "LIKE", "ESCAPE", "'!'", "IS", "NULL", "CASE",
        "WHEN", "THEN", "END", "=", "<", "+", "-", "/", "%", "0", "-1", "2.5", "'a%'", "::", "\n", "'", "\"",
        "WITH", "UNION", "EXISTS", "DISTINCT", "->", "@", "#", "$", "?",
    ];
    with_table(|table| {
        let config = ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() };
        proptest!(config, |(picks in proptest::collection::vec(0..TOKENS.len(), 0..12))| {
            let sql = picks.iter().map(|&i| TOKENS[i]).collect::<Vec<_>>().join(" ");
            for result in [
                select_indices(table, &sql).map(|_| ()),
                query(table, &sql).map(|_| ()),
                query(table, &format!("SELECT {sql} FROM samples")).map(|_| ()),
            ] {
                if let Err(Error::Sql { message, line, column }) = result {
                    prop_assert!(line >= 1 && column >= 1, "{sql:?}: {message} at {line}:{column}");
                }
            }
        });
    });
}

#[test]
fn bigint_overflow_is_an_error() {
    with_table(|table| {
        for sql in [
            "abs(-9223372036854775808) > 0",
            "abs(big) > 0",
            "abs(-big) > 0",
            "-big < 0",
            "-(-9223372036854775807 - 1) > 0",
            "big + 1 > 0",
            "big - 1 > 0",
            "big * 2 > 0",
            "big / -1 > 0",
            "(-9223372036854775807 - 1) / -1 > 0",
            "9223372036854775807 + 1 > 0",
        ] {
            let (message, line, column) = sql_error(table, sql);
            assert!(message.to_ascii_lowercase().contains("overflow"), "{sql}: {message}");
            assert!(line >= 1 && column >= 1);
        }
        assert_eq!(sql_error(table, "abs(big) > 0").0, "abs(-9223372036854775808) overflows BIGINT");
        // The extremes themselves are values, not errors.
        assert_eq!(ids(table, "big = -9223372036854775808"), [0]);
        assert_eq!(ids(table, "big = 9223372036854775807"), [1]);
        assert_eq!(ids(table, "abs(-9223372036854775807) = 9223372036854775807 AND index = 5"), [5]);
        let b = run(table, "SELECT -9223372036854775808, abs(-9223372036854775807) FROM samples LIMIT 1");
        assert_eq!(i64s(&b, 0), [Some(i64::MIN)]);
        assert_eq!(i64s(&b, 1), [Some(i64::MAX)]);
        // abs of floats does not overflow.
        assert_eq!(ids(table, "abs(-9223372036854775809) > 9e18 AND index = 0"), [0]);
    });
}

#[test]
fn group_by_puts_zeros_and_nans_in_one_group_each() {
    with_table(|table| {
        for key in ["score", "score * 1.0", "score + 0"] {
            let b =
                run(table, &format!("SELECT {key}, count(*) FROM samples GROUP BY {key} ORDER BY 2 DESC, 1"));
            let counts = i64s(&b, 1);
            // 0.0 and -0.0: rows 0, 1, 7 mod 8; NaN and -NaN: 2, 3; 1.5: 4, 6; 2.5: 5.
            assert_eq!(counts, [Some(24), Some(16), Some(16), Some(8)], "{key}");
            let keys = b.column(0).as_primitive::<Float64Type>();
            assert!(keys.values().iter().any(|x| x.is_nan()), "{key}");
            assert_eq!(keys.values().iter().filter(|x| **x == 0.0).count(), 1, "{key}");
        }
        // With a second key, as a row.
        let b = run(table, "SELECT score, flag, count(*) FROM samples GROUP BY score, flag");
        assert_eq!(b.num_rows(), 6, "(0, even), (0, odd), (NaN, even), (NaN, odd), (1.5, even), (2.5, odd)");
        // WHERE agrees: -0.0 = 0.0 and NaN = NaN.
        assert_eq!(ids(table, "score = 0").len(), 24);
        assert_eq!(ids(table, "score = -0.0").len(), 24);
        assert_eq!(ids(table, "score = CAST('NaN' AS DOUBLE)").len(), 16);
        assert_eq!(ids(table, "score > 1e308").len(), 16, "NaN is above every number");
    });
}

#[test]
fn like_escape_matches_escaped_wildcards_literally() {
    with_table(|table| {
        let captions = |sql: &str| -> Vec<&str> {
            let mut found: Vec<&str> = ids(table, sql).iter().map(|&i| CAPTIONS[(i % 8) as usize]).collect();
            found.sort_unstable();
            found.dedup();
            found
        };
        assert_eq!(captions("caption LIKE '100!%' ESCAPE '!'"), ["100%"]);
        assert_eq!(captions("caption LIKE '100%'"), ["100%", "100x"]);
        assert_eq!(captions("caption LIKE 'a!_b' ESCAPE '!'"), ["a_b"]);
        assert_eq!(captions("caption LIKE 'a_b'"), ["a_b", "axb"]);
        assert_eq!(captions("caption LIKE '%!%%' ESCAPE '!'"), ["100%", "50% off"]);
        assert_eq!(captions("caption LIKE 'x!!y' ESCAPE '!'"), ["x!y"]);
        assert_eq!(captions("caption LIKE '%#%%' ESCAPE '#'"), ["100%", "50% off"]);
        // With another escape character, a backslash is an ordinary character.
        assert_eq!(captions(r"caption LIKE 'back\slash' ESCAPE '!'"), [r"back\slash"]);
        assert_eq!(captions(r"caption LIKE 'back\%' ESCAPE '!'"), [r"back\slash"]);
        assert_eq!(captions(r"caption LIKE 'back\slash'"), ["backslash"], "without ESCAPE, \\ escapes");
        assert_eq!(captions(r"caption LIKE 'back\\slash' ESCAPE '\'"), [r"back\slash"]);
        assert_eq!(captions("caption LIKE '100%' ESCAPE ''"), ["100%", "100x"], "ESCAPE '': none");
        assert_eq!(captions("caption NOT LIKE '%!%%' ESCAPE '!'").len(), 6);
        assert_eq!(captions("caption ILIKE 'A!_B' ESCAPE '!'"), ["a_b"]);
        assert_eq!(captions("caption LIKE caption ESCAPE '!'").len(), 7, "'x!y' as a pattern is 'xy'");
        assert!(captions("caption LIKE '100!%' ESCAPE NULL").is_empty(), "NULL escape: NULL");
        let (message, line, column) = sql_error(table, "caption LIKE 'a' ESCAPE 'ab'");
        assert_eq!((message.as_str(), line, column), ("ESCAPE needs one character, got 'ab'", 1, 25));
        let (message, _, column) = sql_error(table, "caption LIKE 'a!' ESCAPE '!'");
        assert!(message.contains("ends with its ESCAPE character"), "{message}");
        assert_eq!(column, 14, "at the pattern");
        assert!(sql_error(table, "caption LIKE 'a' ESCAPE caption").0.contains("ESCAPE needs one character"));
        let b = run(table, "SELECT caption LIKE '100!%' ESCAPE '!' AS hit FROM samples WHERE index < 2");
        assert_eq!(b.column(0).as_boolean().iter().collect::<Vec<_>>(), [Some(true), Some(false)]);
    });
}

/// ORDER BY and min/max order floats as comparisons do: `-0.0` ties with `0.0` (row order
/// kept), every NaN (whatever its sign bit) after every number ascending, first descending, as
/// PostgreSQL orders them; they used to follow IEEE totalOrder (-NaN first, -0.0 before 0.0).
#[test]
fn order_by_and_min_max_order_floats_as_sql_compares_them() {
    with_table(|t| {
        // Rows 0..8 (label = row there): score 0.0, -0.0, NaN, -NaN, 1.5, 2.5, 1.5, 0.0.
        let rows = "FROM samples WHERE big < 8 OR big = 9223372036854775807";
        let labels =
            |sql: &str| -> Vec<i64> { i64s(&run(t, sql), 0).into_iter().map(Option::unwrap).collect() };
        assert_eq!(labels(&format!("SELECT label {rows} ORDER BY score")), [0, 1, 7, 4, 6, 5, 2, 3]);
        assert_eq!(labels(&format!("SELECT label {rows} ORDER BY score DESC")), [2, 3, 5, 4, 6, 0, 1, 7]);
        assert_eq!(labels(&format!("SELECT label {rows} ORDER BY score LIMIT 3")), [0, 1, 7]);
        let b = run(t, &format!("SELECT max(score), min(score) {rows} AND (label = 3 OR label = 1)"));
        let col =
            |k: usize| b.column(k).as_any().downcast_ref::<arrow_array::Float64Array>().unwrap().value(0);
        assert!(col(0).is_nan() && col(0).is_sign_positive(), "max is NaN: {}", col(0));
        assert_eq!(col(1).to_bits(), 0.0f64.to_bits(), "min of -0.0 is 0.0");
    });
}
