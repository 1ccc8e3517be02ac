//! SQL over a 50-row dataset: the cases of `sql_cases.txt` (predicate or query -> ids, row count
//! or error with position), and `query()` results (aggregates, GROUP BY, ORDER BY, LIMIT).
//!
//! Row i of the dataset: image raw, width 100 + 10 i, height 2; label i % 5; score i / 10;
//! caption "cat i" (even i) or "Dog i" (odd i); flag i % 3 == 0; meta {"i": i, "tag": "t{i % 2}"}.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::{Array, RecordBatch};
use beton_query::{query, select_indices, Error, Table};
use beton_storage::{Dataset, SampleValue, WriterOptions};
use beton_testkit::{rgb, schema};

const NUM_ROWS: u64 = 50;

fn dataset(dir: &std::path::Path) -> Dataset {
    let path = dir.join("sql.beton");
    let fields = schema("image:raw label:int score:float caption:text flag:bool meta:json");
    let options = WriterOptions { page_size: 1 << 21, ..WriterOptions::default() };
    beton_testkit::write_with(&path, fields, options, NUM_ROWS, |i| {
        let w = 100 + 10 * i as u32;
        vec![
            rgb(w, 2, vec![7; (w * 6) as usize]),
            SampleValue::Int((i % 5) as i64),
            SampleValue::Float(i as f64 / 10.0),
            SampleValue::Text(if i % 2 == 0 { format!("cat {i}") } else { format!("Dog {i}") }),
            SampleValue::Bool(i % 3 == 0),
            SampleValue::Json(format!("{{\"i\": {i}, \"tag\": \"t{}\"}}", i % 2)),
        ]
    });
    Dataset::open(&path).unwrap()
}

/// `a,b,c-d` (ranges inclusive); empty for `none`.
fn parse_ids(s: &str) -> Vec<u64> {
    if s.trim() == "none" {
        return Vec::new();
    }
    let mut ids = Vec::new();
    for part in s.split(',').map(str::trim) {
        match part.split_once('-') {
            Some((a, b)) => ids.extend(a.parse::<u64>().unwrap()..=b.parse::<u64>().unwrap()),
            None => ids.push(part.parse().unwrap()),
        }
    }
    ids
}

/// Runs one case; `Err` describes the mismatch.
fn run_case(table: &Table, sql: &str, expect: &str) -> Result<(), String> {
    let is_select = sql.trim_start().to_ascii_lowercase().starts_with("select");
    if let Some(ids) = expect.strip_prefix("ids ") {
        let got = select_indices(table, sql).map_err(|e| format!("error: {e}"))?.into_vec();
        let want = parse_ids(ids);
        return if got == want { Ok(()) } else { Err(format!("ids {got:?}, expected {want:?}")) };
    }
    if let Some(n) = expect.strip_prefix("rows ") {
        let n: usize = n.trim().parse().unwrap();
        let got = if is_select {
            query(table, sql).map_err(|e| format!("error: {e}"))?.num_rows()
        } else {
            select_indices(table, sql).map_err(|e| format!("error: {e}"))?.len()
        };
        return if got == n { Ok(()) } else { Err(format!("{got} rows, expected {n}")) };
    }
    if let Some(rest) = expect.strip_prefix("error") {
        // `error@L:C substring` pins the position too.
        let (pos, substring) = match rest.strip_prefix('@') {
            Some(r) => {
                let (pos, s) = r.split_once(' ').unwrap_or((r, ""));
                let (l, c) = pos.split_once(':').unwrap();
                (Some((l.parse::<u64>().unwrap(), c.parse::<u64>().unwrap())), s.trim())
            }
            None => (None, rest.trim()),
        };
        let result =
            if is_select { query(table, sql).map(|_| ()) } else { select_indices(table, sql).map(|_| ()) };
        let err = match result {
            Ok(()) => return Err("succeeded, expected an error".into()),
            Err(e) => e,
        };
        let text = err.to_string();
        if !text.contains(substring) {
            return Err(format!("error '{text}' does not contain '{substring}'"));
        }
        if let Some(want) = pos {
            match err {
                Error::Sql { line, column, .. } if (line, column) == want => {}
                Error::Sql { line, column, .. } => {
                    return Err(format!("error '{text}' at {line}:{column}, expected {}:{}", want.0, want.1))
                }
                other => return Err(format!("error '{other}' has no position")),
            }
        }
        return Ok(());
    }
    panic!("bad expectation '{expect}'")
}

#[test]
fn sql_cases() {
    let (_dir, ds) = temp_dataset();
    let table = Table::new(&ds);
    let text = include_str!("sql_cases.txt");
    let (mut failures, mut count) = (Vec::new(), 0);
    for block in text.split("\n\n") {
        let lines: Vec<&str> =
            block.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).collect();
        let Some(arrow) = lines.iter().position(|l| l.starts_with("-> ")) else { continue };
        let sql = lines[..arrow].join("\n");
        let expect = &lines[arrow][3..];
        count += 1;
        if let Err(why) = run_case(&table, &sql, expect) {
            failures.push(format!("{sql}\n  -> {why}"));
        }
    }
    assert!(count > 50, "only {count} cases found");
    assert!(failures.is_empty(), "{} of {count} cases failed:\n{}", failures.len(), failures.join("\n"));
}

/// [`dataset`] in a temporary folder (dropped with it).
fn temp_dataset() -> (tempfile::TempDir, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    (dir, ds)
}

fn table_and_run(sql: &str) -> RecordBatch {
    let (_dir, ds) = temp_dataset();
    let table = Table::new(&ds);
    query(&table, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn i64s(b: &RecordBatch, col: usize) -> Vec<Option<i64>> {
    b.column(col).as_primitive::<Int64Type>().iter().collect()
}

fn f64s(b: &RecordBatch, col: usize) -> Vec<Option<f64>> {
    b.column(col).as_primitive::<Float64Type>().iter().collect()
}

fn u64s(b: &RecordBatch, col: usize) -> Vec<u64> {
    b.column(col).as_primitive::<UInt64Type>().values().to_vec()
}

fn strs(b: &RecordBatch, col: usize) -> Vec<Option<String>> {
    b.column(col).as_string::<i32>().iter().map(|s| s.map(str::to_string)).collect()
}

#[test]
fn group_by_computes_every_aggregate_per_group() {
    let b = table_and_run(
        "SELECT label, count(*) AS n, sum(index), min(score), max(caption), avg(image.width) \
         FROM samples GROUP BY label ORDER BY label",
    );
    let names: Vec<String> = b.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["label", "n", "sum(index)", "min(score)", "max(caption)", "avg(image.width)"]);
    assert_eq!(i64s(&b, 0), [0, 1, 2, 3, 4].map(Some));
    assert_eq!(i64s(&b, 1), [Some(10); 5]);
    assert_eq!(i64s(&b, 2), [225, 235, 245, 255, 265].map(Some));
    assert_eq!(f64s(&b, 3), [0.0, 0.1, 0.2, 0.3, 0.4].map(Some));
    // Byte order: lowercase 'c' sorts after 'D', and "cat 6" after "cat 46".
    assert_eq!(strs(&b, 4), ["cat 40", "cat 6", "cat 42", "cat 8", "cat 44"].map(|s| Some(s.into())));
    assert_eq!(f64s(&b, 5), [325.0, 335.0, 345.0, 355.0, 365.0].map(Some));
}

#[test]
fn aggregates_without_group_by_give_one_row() {
    let b = table_and_run(
        "SELECT count(*), count(caption), sum(score), min(label), max(image.width), avg(label) \
         FROM samples WHERE index < 10",
    );
    assert_eq!(b.num_rows(), 1);
    assert_eq!(i64s(&b, 0), [Some(10)]);
    assert_eq!(i64s(&b, 1), [Some(10)]);
    assert!((f64s(&b, 2)[0].unwrap() - 4.5).abs() < 1e-9);
    assert_eq!(i64s(&b, 3), [Some(0)]);
    assert_eq!(b.column(4).as_primitive::<arrow_array::types::UInt16Type>().value(0), 190);
    assert_eq!(f64s(&b, 5), [Some(2.0)]);
}

#[test]
fn aggregates_over_no_rows_are_zero_and_null() {
    let b = table_and_run("SELECT count(*), sum(label), max(caption) FROM samples WHERE false");
    assert_eq!(b.num_rows(), 1);
    assert_eq!(i64s(&b, 0), [Some(0)]);
    assert_eq!(i64s(&b, 1), [None]);
    assert_eq!(strs(&b, 2), [None]);
    let b = table_and_run("SELECT label, count(*) FROM samples WHERE index > 100 GROUP BY label");
    assert_eq!(b.num_rows(), 0);
}

#[test]
fn group_by_expressions_and_two_keys() {
    let b = table_and_run(
        "SELECT index % 2 AS parity, count(*) AS n FROM samples GROUP BY index % 2 ORDER BY parity DESC",
    );
    assert_eq!(i64s(&b, 0), [Some(1), Some(0)]);
    assert_eq!(i64s(&b, 1), [Some(25), Some(25)]);
    let b = table_and_run(
        "SELECT flag, label, count(*) FROM samples WHERE label < 2 GROUP BY flag, label ORDER BY 3 DESC, 1, 2",
    );
    // label 0: i = 0,5,..,45, flag at 0,15,30,45 (4); label 1: i = 1,6,..,46, flag at 6,21,36 (3).
    assert_eq!(i64s(&b, 2), [7, 6, 4, 3].map(Some));
    assert_eq!(i64s(&b, 1), [Some(1), Some(0), Some(0), Some(1)]);
}

#[test]
fn order_by_limit_offset() {
    let b =
        table_and_run("SELECT index, caption FROM samples ORDER BY label DESC, index ASC LIMIT 3 OFFSET 1");
    assert_eq!(u64s(&b, 0), [9, 14, 19]);
    assert_eq!(strs(&b, 1), ["Dog 9", "cat 14", "Dog 19"].map(|s| Some(s.into())));
    let b = table_and_run("SELECT index AS i, score * 2 AS s2 FROM samples WHERE index < 3 ORDER BY i DESC");
    assert_eq!(u64s(&b, 0), [2, 1, 0]);
    assert_eq!(f64s(&b, 1), [Some(0.4), Some(0.2), Some(0.0)]);
    assert_eq!(b.schema().field(1).name(), "s2");
    let b = table_and_run("SELECT index FROM samples WHERE label = 2 LIMIT 2 OFFSET 3");
    assert_eq!(u64s(&b, 0), [17, 22]);
    let b = table_and_run("SELECT index FROM samples ORDER BY caption LIMIT 2");
    assert_eq!(u64s(&b, 0), [1, 11], "'Dog 1' < 'Dog 11' < … < 'cat 0'");
    let b = table_and_run("SELECT index FROM samples LIMIT 5 OFFSET 48");
    assert_eq!(u64s(&b, 0), [48, 49]);
}

#[test]
fn star_selects_every_column() {
    let (_dir, ds) = temp_dataset();
    let table = Table::new(&ds);
    let b = query(&table, "SELECT * FROM samples WHERE label = 3 LIMIT 2").unwrap();
    let names: Vec<String> = b.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, table.column_names());
    assert_eq!(b.num_rows(), 2);
    assert_eq!(u64s(&b, 0), [3, 8]);
    let b = query(&table, "SELECT upper(caption) AS c, length(caption), 1 + 1 FROM samples LIMIT 1").unwrap();
    assert_eq!(strs(&b, 0), [Some("CAT 0".into())]);
    assert_eq!(i64s(&b, 1), [Some(5)]);
    assert_eq!(i64s(&b, 2), [Some(2)]);
    assert_eq!(b.column(2).len(), 1);
}

#[test]
fn json_extract_reads_payloads() {
    let b = table_and_run(
        "SELECT json_extract(meta, '$.tag') AS tag, count(*) FROM samples \
         GROUP BY json_extract(meta, '$.tag') ORDER BY tag",
    );
    assert_eq!(strs(&b, 0), [Some("t0".into()), Some("t1".into())]);
    assert_eq!(i64s(&b, 1), [Some(25), Some(25)]);
}

#[test]
fn errors_are_sql_errors_with_positions() {
    let (_dir, ds) = temp_dataset();
    let table = Table::new(&ds);
    let err = select_indices(&table, "label < 3 AND\n    lable > 1").unwrap_err();
    match &err {
        Error::Sql { line: 2, column: 5, message } => {
            assert!(
                message.contains("no column named 'lable'") && message.contains("label, score"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().starts_with("SQL error at line 2, column 5: "), "{err}");
}

/// A bare predicate given to `query` is `SELECT * FROM samples WHERE` it (`beton query F "label < 3"`).
#[test]
fn query_of_a_bare_predicate_selects_every_column_of_its_rows() {
    let b = table_and_run("label = 4 AND index < 20");
    let all = table_and_run("SELECT * FROM samples WHERE label = 4 AND index < 20");
    assert_eq!(b.schema(), all.schema());
    assert_eq!(u64s(&b, 0), [4, 9, 14, 19]);
    assert_eq!(b, all);
    assert!(b.schema().fields().iter().any(|f| f.name() == "caption"));
}

/// Text payloads made unreadable (invalid UTF-8) make any query that materialises `caption` fail,
/// so a query that succeeds has not read them: only the columns a query names are materialised.
#[test]
fn queries_materialise_only_the_columns_they_name() {
    let dir = tempfile::tempdir().unwrap();
    drop(dataset(dir.path()));
    let path = dir.path().join("sql.beton");
    let mut bytes = std::fs::read(&path).unwrap();
    let mut corrupted = 0;
    for at in 0..bytes.len().saturating_sub(4) {
        if &bytes[at..at + 4] == b"cat " || &bytes[at..at + 4] == b"Dog " {
            bytes[at] = 0xFF;
            corrupted += 1;
        }
    }
    assert_eq!(corrupted, NUM_ROWS);
    std::fs::write(&path, bytes).unwrap();
    let ds = Dataset::open(&path).unwrap();
    let table = Table::new(&ds);
    assert_eq!(select_indices(&table, "label = 4 AND image.width < 200").unwrap().into_vec(), [4, 9]);
    let b = query(&table, "SELECT label, count(*) FROM samples WHERE flag GROUP BY label ORDER BY label")
        .unwrap();
    assert_eq!(b.num_rows(), 5);
    assert!(select_indices(&table, "caption LIKE 'cat%'").is_err(), "caption's payloads are unreadable");
    assert!(query(&table, "SELECT * FROM samples LIMIT 1").is_err(), "* names caption");
}

#[test]
fn expressions_over_aggregates_and_having() {
    let b = table_and_run(
        "SELECT label + 1 AS l1, sum(index) / count(*) AS mean, max(score) - min(score), count(*) > 9 \
         FROM samples WHERE index < 20 GROUP BY label HAVING count(*) >= 4 AND label IN (0, 2, 3) \
         ORDER BY sum(index) DESC",
    );
    assert_eq!(i64s(&b, 0), [Some(4), Some(3), Some(1)]);
    // label 3: 3, 8, 13, 18 -> 42 / 4 (integer division).
    assert_eq!(i64s(&b, 1), [Some(10), Some(9), Some(7)]);
    assert!(f64s(&b, 2).iter().all(|d| (d.unwrap() - 1.5).abs() < 1e-9));
    assert_eq!(b.column(3).as_boolean().iter().collect::<Vec<_>>(), [Some(false); 3]);
    let b = table_and_run("SELECT count(*) * 2, avg(score) > 2 FROM samples HAVING count(*) > 100");
    assert_eq!(b.num_rows(), 0);
}

/// Any text made of SQL tokens gives rows or an error, never a panic.
#[test]
fn arbitrary_token_soup_never_panics() {
    use proptest::prelude::*;
    const TOKENS: &[&str] = &[
        "label",
        "score",
        "caption",
        "flag",
        "index",
        "image.width",
        "image.mode",
        "meta",
        "nope",
        "samples",
        "SELECT",
        "FROM",
        "WHERE",
        "GROUP BY",
        "HAVING",
        "ORDER BY",
        "LIMIT",
        "OFFSET",
        "AS",
        "DESC",
        "*",
        "count(*)",
        "sum(",
        "min(",
        "avg(",
        "lower(",
        "length(",
        "json_extract(",
        "CAST(",
        "AS INT)",
        "AS VARCHAR)",
        "(",
        ")",
        ",",
        "AND",
        "OR",
        "NOT",
        "IN",
        "BETWEEN",
        "LIKE",
        "ILIKE",
        "IS",
        "NULL",
        "TRUE",
        "=",
        "<>",
        "<",
        ">=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "0",
        "3",
        "-1",
        "2.5",
        "'cat%'",
        "'$.i'",
        "99999999999999999999",
        "::",
        "\n",
    ];
    let (_dir, ds) = temp_dataset();
    let table = Table::new(&ds);
    let config = ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(picks in proptest::collection::vec(0..TOKENS.len(), 0..14))| {
        let sql = picks.iter().map(|&i| TOKENS[i]).collect::<Vec<_>>().join(" ");
        let _ = select_indices(&table, &sql);
        let _ = query(&table, &sql);
        let select = format!("SELECT {sql} FROM samples");
        let _ = query(&table, &select);
        let _ = select_indices(&table, &format!("SELECT index FROM samples WHERE {sql}"));
    });
}

/// Parameters stand for the literals they are: every query with `$name`s gives what the same
/// text with the values written in gives, whatever the value (negative, fractional, NaN, a
/// string with quotes, NULL), in WHERE, SELECT, ORDER BY and LIMIT.
#[test]
fn parameters_give_what_the_literals_they_stand_for_give() {
    use beton_query::{query_with, select_indices_with, Param};
    let (_d, ds) = temp_dataset();
    let table = Table::new(&ds);
    let p = |v: Vec<(&str, Param)>| v.into_iter().map(|(n, p)| (n.to_string(), p)).collect::<Vec<_>>();
    type Case = (&'static str, Vec<(String, Param)>, &'static str);
    let cases: Vec<Case> = vec![
        ("label = $l", p(vec![("l", Param::Int(3))]), "label = 3"),
        ("label > $l", p(vec![("l", Param::Int(-1))]), "label > -1"),
        (
            "score >= $s AND label <> $l",
            p(vec![("s", Param::Float(2.5)), ("l", Param::Int(0))]),
            "score >= 2.5 AND label <> 0",
        ),
        ("score < $s", p(vec![("s", Param::Float(2.0))]), "score < 2.0"),
        ("score < $s", p(vec![("s", Param::Float(1e-7))]), "score < 0.0000001"),
        ("score = $s", p(vec![("s", Param::Float(f64::NAN))]), "score = CAST('NaN' AS DOUBLE)"),
        (
            "caption = $c OR caption = $d",
            p(vec![("c", Param::Text("cat 4".into())), ("d", Param::Text("it's".into()))]),
            "caption = 'cat 4' OR caption = 'it''s'",
        ),
        ("caption LIKE $pat", p(vec![("pat", Param::Text("Dog 1%".into()))]), "caption LIKE 'Dog 1%'"),
        ("flag = $f", p(vec![("f", Param::Bool(true))]), "flag = TRUE"),
        ("label IN ($a, $b, $a)", p(vec![("a", Param::Int(1)), ("b", Param::Int(4))]), "label IN (1, 4, 1)"),
        ("label = $n", p(vec![("n", Param::Null)]), "label = NULL"),
        (
            "SELECT label, score * $k AS s FROM samples WHERE score > $min ORDER BY s DESC LIMIT $n",
            p(vec![("k", Param::Float(-2.0)), ("min", Param::Float(1.0)), ("n", Param::Int(4))]),
            "SELECT label, score * -2.0 AS s FROM samples WHERE score > 1.0 ORDER BY s DESC LIMIT 4",
        ),
    ];
    for (sql, params, literal) in cases {
        let want = query(&table, literal).unwrap_or_else(|e| panic!("{literal}: {e}"));
        let got = query_with(&table, sql, &params).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(got, want, "{sql}");
        if !sql.starts_with("SELECT") {
            let ids = select_indices_with(&table, sql, &params).unwrap();
            assert_eq!(ids, select_indices(&table, literal).unwrap(), "{sql}");
        }
    }
    // A `$name` without a value, a positional placeholder and a value the text never names are
    // errors at their position (the last at the first token).
    let at = |sql: &str, params: &[(String, Param)]| match select_indices_with(&table, sql, params) {
        Err(Error::Sql { message, line, column }) => (message, line, column),
        other => panic!("{sql}: {other:?}"),
    };
    let (m, l, c) = at("label = 1 AND score > $min", &p(vec![("max", Param::Int(1))]));
    assert!(m.contains("$min has no value (params has max)"), "{m}");
    assert_eq!((l, c), (1, 23));
    let (m, _, c) = at("label = ?", &[]);
    assert!(m.contains("parameters are named, as $name"), "{m}");
    assert_eq!(c, 9);
    let (m, _, _) = at("label = $l", &p(vec![("l", Param::Int(1)), ("lable", Param::Int(2))]));
    assert!(m.contains("params has 'lable', which the query never names"), "{m}");
    let (m, _, _) = at("label = $l", &[]);
    assert!(m.contains("no params were given"), "{m}");
}

/// A number parameter in ORDER BY or GROUP BY is a constant, never a column's position (as
/// PostgreSQL has it); LIMIT and OFFSET take it as their number.
#[test]
fn a_number_parameter_is_never_an_ordinal() {
    use beton_query::{query_with, Param};
    let (_d, ds) = temp_dataset();
    let table = Table::new(&ds);
    let k = vec![("k".to_string(), Param::Int(2)), ("n".to_string(), Param::Int(3))];
    let by_param =
        query_with(&table, "SELECT index, score FROM samples ORDER BY $k DESC LIMIT $n OFFSET $n", &k);
    let by_constant = query(&table, "SELECT index, score FROM samples ORDER BY (2) DESC LIMIT 3 OFFSET 3");
    assert_eq!(by_param.unwrap(), by_constant.unwrap());
    let ordinal = query(&table, "SELECT index, score FROM samples ORDER BY 2 DESC LIMIT 3 OFFSET 3").unwrap();
    assert_eq!(u64s(&ordinal, 0), vec![46, 45, 44], "the literal is an ordinal");
}

#[test]
fn in_lists_of_any_length_under_or_and_not_give_the_rows_of_their_definition() {
    // `IN` outside the fused conjunction (under OR, NOT, `= TRUE`) over int and u16 columns: short
    // lists searched member by member, long ones by binary search, against the rows computed here.
    let (_tmp, path) = beton_testkit::temp_path("in.beton");
    let a = |i: u64| (i * 7919 % 113) as i64 - 50;
    beton_testkit::write(&path, schema("a:int image:raw"), 1000, |i| {
        let w = 1 + (i % 9) as u32;
        vec![SampleValue::Int(a(i)), rgb(w, 1, vec![1; w as usize * 3])]
    });
    let ds = Dataset::open(&path).unwrap();
    let table = Table::new(&ds);
    let short: Vec<i64> = vec![-50, -3, 0, 7, 62, 1000];
    let long: Vec<i64> = (-60..70).step_by(3).chain([i64::MIN, i64::MAX]).collect();
    for list in [&short, &long] {
        let items: Vec<String> = list.iter().map(i64::to_string).collect();
        let items = items.join(", ");
        let member = |x: i64| list.contains(&x);
        let width = |i: u64| 1 + (i % 9) as i64;
        type Rows<'a> = Box<dyn Fn(u64) -> bool + 'a>;
        let cases: [(String, Rows<'_>); 4] = [
            (format!("a IN ({items}) OR a > 60"), Box::new(move |i| member(a(i)) || a(i) > 60)),
            (format!("NOT (a IN ({items}))"), Box::new(move |i| !member(a(i)))),
            (format!("(a NOT IN ({items})) = TRUE"), Box::new(move |i| !member(a(i)))),
            (format!("\"image.width\" IN ({items}) OR FALSE"), Box::new(move |i| member(width(i)))),
        ];
        for (sql, want) in cases {
            let got = select_indices(&table, &sql).unwrap();
            let expected: Vec<u64> = (0..1000).filter(|&i| want(i)).collect();
            assert_eq!(got.as_slice(), expected.as_slice(), "{sql}");
        }
    }
}
