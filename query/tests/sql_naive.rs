//! Differential tests of the SQL engine: random tables and random predicate ASTs, printed to SQL
//! text, must select exactly the rows that a naive row-by-row evaluation of the same AST in Rust
//! selects (SQL three-valued logic; NULL only comes from NULL literals), and the aggregates
//! `count(*)`, `sum(a)`, `min(b)`, `max(b)`, `avg(a)` (with and without `GROUP BY f`) must equal
//! naive computations.
//!
//! Table: `a` Int (|a| <= 100), `b` Float (including -0.0 and ±1e300), `f` Bool, `t` Text over a
//! small alphabet (with `%` and `_` so LIKE patterns meet them as data).
//!
//! Semantics the naive evaluator mirrors:
//! * integer arithmetic is checked: an overflow in any row is an error of the whole query (the
//!   engine evaluates every operand over every row, there is no short-circuit);
//! * `/` and `%` only get non-zero literal divisors here (division by zero is tested on its own);
//! * float comparisons follow PostgreSQL: `-0.0 = 0.0`, and NaN (whatever its sign bit) equals
//!   NaN and is above every number (see `negative_zero_equals_zero` and `nan_is_not_below_zero`);
//! * arithmetic whose operands are all NULL literals (`NULL + NULL`, `-NULL`) is generated as a
//!   plain `NULL` (those forms are tested on their own: `arithmetic_on_null_literals_is_null`).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use beton_query::{query, select_indices, Table};
use beton_storage::{Dataset, SampleValue};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Row {
    a: i64,
    b: f64,
    f: bool,
    t: String,
}

fn write_table(dir: &std::path::Path, rows: &[Row]) -> Dataset {
    let path = dir.join("naive.beton");
    beton_testkit::write(
        &path,
        beton_testkit::schema("a:int b:float f:bool t:text"),
        rows.len() as u64,
        |i| {
            let r = &rows[i as usize];
            vec![
                SampleValue::Int(r.a),
                SampleValue::Float(r.b),
                SampleValue::Bool(r.f),
                SampleValue::Text(r.t.clone()),
            ]
        },
    );
    Dataset::open(&path).unwrap()
}

// ---------------------------------------------------------------------------------------------
// The AST

#[derive(Debug, Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

/// A numeric expression.
#[derive(Debug, Clone)]
enum Num {
    A,
    B,
    Int(i64),
    Float(f64),
    Null,
    Neg(Box<Num>),
    /// For Div and Mod the right side is a non-zero literal.
    Bin(Box<Num>, Arith, Box<Num>),
}

/// A text expression.
#[derive(Debug, Clone)]
enum Txt {
    T,
    Lit(String),
    Null,
}

#[derive(Debug, Clone, Copy)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone)]
enum Pred {
    NumCmp(Num, Cmp, Num),
    TxtCmp(Txt, Cmp, Txt),
    Flag,
    Bool(bool),
    Null,
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
    Not(Box<Pred>),
    In(Num, Vec<Num>, bool),
    Between(Num, Num, Num, bool),
    /// text, pattern, negated, case-insensitive
    Like(Txt, String, bool, bool),
    IsNull(Num, bool),
    TruthIsNull(Box<Pred>, bool),
}

fn float_lit(x: f64) -> String {
    // `{:?}` is the shortest text that parses back to the same f64 (`1e300`, `0.5`, `-0.0`).
    if x.is_sign_negative() {
        format!("(-{:?})", -x)
    } else {
        format!("{x:?}")
    }
}

impl fmt::Display for Num {
    fn fmt(&self, fm: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::A => write!(fm, "a"),
            Num::B => write!(fm, "b"),
            Num::Int(v) if *v < 0 => write!(fm, "(-{})", -v),
            Num::Int(v) => write!(fm, "{v}"),
            Num::Float(x) => write!(fm, "{}", float_lit(*x)),
            Num::Null => write!(fm, "NULL"),
            Num::Neg(x) => write!(fm, "(-{x})"),
            Num::Bin(l, op, r) => {
                let op = match op {
                    Arith::Add => "+",
                    Arith::Sub => "-",
                    Arith::Mul => "*",
                    Arith::Div => "/",
                    Arith::Mod => "%",
                };
                write!(fm, "({l} {op} {r})")
            }
        }
    }
}

impl fmt::Display for Txt {
    fn fmt(&self, fm: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Txt::T => write!(fm, "t"),
            Txt::Lit(s) => write!(fm, "'{s}'"),
            Txt::Null => write!(fm, "NULL"),
        }
    }
}

impl fmt::Display for Cmp {
    fn fmt(&self, fm: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Cmp::Eq => "=",
            Cmp::Ne => "<>",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        };
        write!(fm, "{s}")
    }
}

impl fmt::Display for Pred {
    fn fmt(&self, fm: &mut fmt::Formatter<'_>) -> fmt::Result {
        let not = |n: &bool| if *n { "NOT " } else { "" };
        match self {
            Pred::NumCmp(l, c, r) => write!(fm, "({l} {c} {r})"),
            Pred::TxtCmp(l, c, r) => write!(fm, "({l} {c} {r})"),
            Pred::Flag => write!(fm, "f"),
            Pred::Bool(b) => write!(fm, "{}", if *b { "TRUE" } else { "FALSE" }),
            Pred::Null => write!(fm, "NULL"),
            Pred::And(l, r) => write!(fm, "({l} AND {r})"),
            Pred::Or(l, r) => write!(fm, "({l} OR {r})"),
            Pred::Not(p) => write!(fm, "(NOT {p})"),
            Pred::In(x, list, n) => {
                let items: Vec<String> = list.iter().map(ToString::to_string).collect();
                write!(fm, "({x} {}IN ({}))", not(n), items.join(", "))
            }
            Pred::Between(x, lo, hi, n) => write!(fm, "({x} {}BETWEEN {lo} AND {hi})", not(n)),
            Pred::Like(t, p, n, i) => write!(fm, "({t} {}{}LIKE '{p}')", not(n), if *i { "I" } else { "" }),
            Pred::IsNull(x, n) => write!(fm, "({x} IS {}NULL)", not(n)),
            Pred::TruthIsNull(p, n) => write!(fm, "({p} IS {}NULL)", not(n)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The naive evaluator

#[derive(Debug, Clone, Copy)]
enum V {
    I(i64),
    F(f64),
}

impl V {
    fn f(self) -> f64 {
        match self {
            V::I(i) => i as f64,
            V::F(x) => x,
        }
    }
}

/// Float comparison mode of the naive evaluator (one: the engine's, see `order_f64`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum FloatOrder {
    Total,
}

/// True when `n` is a float expression (the engine widens to Float64 when any operand is one).
fn is_float(n: &Num) -> bool {
    match n {
        Num::B | Num::Float(_) => true,
        Num::A | Num::Int(_) | Num::Null => false,
        Num::Neg(x) => is_float(x),
        Num::Bin(l, _, r) => is_float(l) || is_float(r),
    }
}

fn eval_num(n: &Num, row: &Row) -> Result<Option<V>, String> {
    Ok(match n {
        Num::A => Some(V::I(row.a)),
        Num::B => Some(V::F(row.b)),
        Num::Int(v) => Some(V::I(*v)),
        Num::Float(x) => Some(V::F(*x)),
        Num::Null => None,
        Num::Neg(x) => match eval_num(x, row)? {
            None => None,
            Some(V::I(i)) => Some(V::I(i.checked_neg().ok_or("overflow")?)),
            Some(V::F(x)) => Some(V::F(-x)),
        },
        Num::Bin(l, op, r) => {
            let (lv, rv) = (eval_num(l, row)?, eval_num(r, row)?);
            let (Some(lv), Some(rv)) = (lv, rv) else { return Ok(None) };
            if is_float(l) || is_float(r) {
                let (x, y) = (lv.f(), rv.f());
                Some(V::F(match op {
                    Arith::Add => x + y,
                    Arith::Sub => x - y,
                    Arith::Mul => x * y,
                    Arith::Div => x / y,
                    Arith::Mod => x % y,
                }))
            } else {
                let (V::I(x), V::I(y)) = (lv, rv) else { unreachable!("integer operands") };
                let out = match op {
                    Arith::Add => x.checked_add(y),
                    Arith::Sub => x.checked_sub(y),
                    Arith::Mul => x.checked_mul(y),
                    Arith::Div => x.checked_div(y),
                    Arith::Mod => x.checked_rem(y),
                };
                Some(V::I(out.ok_or("overflow")?))
            }
        }
    })
}

/// The engine's float order: SQL's -0.0 = 0.0, and NaN (whatever its sign bit) above every
/// number and equal to itself, as PostgreSQL orders it.
fn order_f64(x: f64, y: f64, _mode: FloatOrder) -> Ordering {
    let norm = |v: f64| if v.is_nan() { f64::NAN } else { v + 0.0 };
    norm(x).total_cmp(&norm(y))
}

fn apply(c: Cmp, o: Ordering) -> bool {
    match c {
        Cmp::Eq => o == Ordering::Equal,
        Cmp::Ne => o != Ordering::Equal,
        Cmp::Lt => o == Ordering::Less,
        Cmp::Le => o != Ordering::Greater,
        Cmp::Gt => o == Ordering::Greater,
        Cmp::Ge => o != Ordering::Less,
    }
}

fn cmp_num(l: &Num, c: Cmp, r: &Num, row: &Row, mode: FloatOrder) -> Result<Option<bool>, String> {
    let (lv, rv) = (eval_num(l, row)?, eval_num(r, row)?);
    let (Some(lv), Some(rv)) = (lv, rv) else { return Ok(None) };
    let o = if is_float(l) || is_float(r) {
        order_f64(lv.f(), rv.f(), mode)
    } else {
        let (V::I(x), V::I(y)) = (lv, rv) else { unreachable!("integer operands") };
        x.cmp(&y)
    };
    Ok(Some(apply(c, o)))
}

fn eval_txt<'r>(t: &'r Txt, row: &'r Row) -> Option<&'r str> {
    match t {
        Txt::T => Some(&row.t),
        Txt::Lit(s) => Some(s),
        Txt::Null => None,
    }
}

/// SQL LIKE: `%` any run of characters, `_` one character.
fn like(s: &[char], p: &[char]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some(('%', rest)) => (0..=s.len()).any(|k| like(&s[k..], rest)),
        Some(('_', rest)) => !s.is_empty() && like(&s[1..], rest),
        Some((c, rest)) => s.first() == Some(c) && like(&s[1..], rest),
    }
}

fn and3(l: Option<bool>, r: Option<bool>) -> Option<bool> {
    match (l, r) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or3(l: Option<bool>, r: Option<bool>) -> Option<bool> {
    match (l, r) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn eval_pred(p: &Pred, row: &Row, mode: FloatOrder) -> Result<Option<bool>, String> {
    Ok(match p {
        Pred::NumCmp(l, c, r) => cmp_num(l, *c, r, row, mode)?,
        Pred::TxtCmp(l, c, r) => match (eval_txt(l, row), eval_txt(r, row)) {
            (Some(x), Some(y)) => Some(apply(*c, x.as_bytes().cmp(y.as_bytes()))),
            _ => None,
        },
        Pred::Flag => Some(row.f),
        Pred::Bool(b) => Some(*b),
        Pred::Null => None,
        Pred::And(l, r) => and3(eval_pred(l, row, mode)?, eval_pred(r, row, mode)?),
        Pred::Or(l, r) => or3(eval_pred(l, row, mode)?, eval_pred(r, row, mode)?),
        Pred::Not(x) => eval_pred(x, row, mode)?.map(|b| !b),
        Pred::In(x, list, negated) => {
            let mut acc = Some(false);
            for item in list {
                acc = or3(acc, cmp_num(x, Cmp::Eq, item, row, mode)?);
            }
            if *negated {
                acc.map(|b| !b)
            } else {
                acc
            }
        }
        Pred::Between(x, lo, hi, negated) => {
            let both = and3(cmp_num(x, Cmp::Ge, lo, row, mode)?, cmp_num(x, Cmp::Le, hi, row, mode)?);
            if *negated {
                both.map(|b| !b)
            } else {
                both
            }
        }
        Pred::Like(t, pattern, negated, ilike) => eval_txt(t, row).map(|s| {
            let (s, pattern) = if *ilike {
                (s.to_lowercase(), pattern.to_lowercase())
            } else {
                (s.to_string(), pattern.clone())
            };
            let s: Vec<char> = s.chars().collect();
            let pattern: Vec<char> = pattern.chars().collect();
            like(&s, &pattern) != *negated
        }),
        Pred::IsNull(x, negated) => Some(eval_num(x, row)?.is_none() != *negated),
        Pred::TruthIsNull(x, negated) => Some(eval_pred(x, row, mode)?.is_none() != *negated),
    })
}

/// The ids the naive evaluator selects, or the error it meets in any row.
fn naive_ids(p: &Pred, rows: &[Row], mode: FloatOrder) -> Result<Vec<u64>, String> {
    let mut ids = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if eval_pred(p, row, mode)? == Some(true) {
            ids.push(i as u64);
        }
    }
    Ok(ids)
}

// ---------------------------------------------------------------------------------------------
// Strategies

fn row() -> impl Strategy<Value = Row> {
    let b = prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(1e300),
        Just(-1e300),
        Just(2.5),
        (-100i32..100).prop_map(f64::from),
        -1e3..1e3f64,
    ];
    (-100i64..=100, b, any::<bool>(), "[aAb%_]{0,4}").prop_map(|(a, b, f, t)| Row { a, b, f, t })
}

fn nonzero_literal() -> impl Strategy<Value = Num> {
    prop_oneof![
        (1i64..=7).prop_map(Num::Int),
        (1i64..=7).prop_map(|v| Num::Int(-v)),
        Just(Num::Float(0.5)),
        Just(Num::Float(-2.5)),
        Just(Num::Float(1e300)),
    ]
}

fn num() -> impl Strategy<Value = Num> {
    let leaf = prop_oneof![
        4 => Just(Num::A),
        4 => Just(Num::B),
        3 => (-100i64..=100).prop_map(Num::Int),
        2 => prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(1e300),
            Just(-1e300),
            Just(2.5),
            (-100i32..100).prop_map(|v| f64::from(v) / 2.0),
        ]
        .prop_map(Num::Float),
        1 => Just(Num::Null),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        let arith = prop_oneof![Just(Arith::Add), Just(Arith::Sub), Just(Arith::Mul)];
        let div = prop_oneof![Just(Arith::Div), Just(Arith::Mod)];
        prop_oneof![
            3 => (inner.clone(), arith, inner.clone()).prop_map(|(l, op, r)| Num::Bin(Box::new(l), op, Box::new(r))),
            2 => (inner.clone(), div, nonzero_literal()).prop_map(|(l, op, r)| Num::Bin(Box::new(l), op, Box::new(r))),
            1 => inner.prop_map(|x| Num::Neg(Box::new(x))),
        ]
    })
    .prop_map(without_null_arithmetic)
}

/// True when `n` has the NULL type (a NULL literal, or arithmetic on NULL-typed operands only).
fn null_typed(n: &Num) -> bool {
    match n {
        Num::Null => true,
        Num::Neg(x) => null_typed(x),
        Num::Bin(l, _, r) => null_typed(l) && null_typed(r),
        _ => false,
    }
}

/// `n` with arithmetic on NULL-typed operands only (`NULL + NULL`, `-NULL`) replaced by `NULL`
/// (tested on their own by `arithmetic_on_null_literals_is_null`).
fn without_null_arithmetic(n: Num) -> Num {
    match n {
        Num::Neg(x) => {
            let x = without_null_arithmetic(*x);
            if null_typed(&x) {
                Num::Null
            } else {
                Num::Neg(Box::new(x))
            }
        }
        Num::Bin(l, op, r) => {
            let (l, r) = (without_null_arithmetic(*l), without_null_arithmetic(*r));
            if null_typed(&l) && null_typed(&r) {
                Num::Null
            } else {
                Num::Bin(Box::new(l), op, Box::new(r))
            }
        }
        other => other,
    }
}

fn cmp() -> impl Strategy<Value = Cmp> {
    prop_oneof![Just(Cmp::Eq), Just(Cmp::Ne), Just(Cmp::Lt), Just(Cmp::Le), Just(Cmp::Gt), Just(Cmp::Ge)]
}

fn txt() -> impl Strategy<Value = Txt> {
    prop_oneof![4 => Just(Txt::T), 3 => "[aAb%_]{0,3}".prop_map(Txt::Lit), 1 => Just(Txt::Null)]
}

fn pred() -> impl Strategy<Value = Pred> {
    let leaf = prop_oneof![
        6 => (num(), cmp(), num()).prop_map(|(l, c, r)| Pred::NumCmp(l, c, r)),
        2 => (txt(), cmp(), txt()).prop_map(|(l, c, r)| Pred::TxtCmp(l, c, r)),
        1 => Just(Pred::Flag),
        1 => any::<bool>().prop_map(Pred::Bool),
        1 => Just(Pred::Null),
        2 => (num(), proptest::collection::vec(num(), 1..4), any::<bool>())
            .prop_map(|(x, l, n)| Pred::In(x, l, n)),
        2 => (num(), num(), num(), any::<bool>()).prop_map(|(x, lo, hi, n)| Pred::Between(x, lo, hi, n)),
        3 => (txt(), "[aAb%_]{0,4}", any::<bool>(), any::<bool>())
            .prop_map(|(t, p, n, i)| Pred::Like(t, p, n, i)),
        1 => (num(), any::<bool>()).prop_map(|(x, n)| Pred::IsNull(x, n)),
    ];
    leaf.prop_recursive(3, 16, 2, |inner| {
        prop_oneof![
            3 => (inner.clone(), inner.clone()).prop_map(|(l, r)| Pred::And(Box::new(l), Box::new(r))),
            3 => (inner.clone(), inner.clone()).prop_map(|(l, r)| Pred::Or(Box::new(l), Box::new(r))),
            2 => inner.clone().prop_map(|p| Pred::Not(Box::new(p))),
            1 => (inner, any::<bool>()).prop_map(|(p, n)| Pred::TruthIsNull(Box::new(p), n)),
        ]
    })
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

// ---------------------------------------------------------------------------------------------
// Tests

fn check_ids(rows: &[Row], p: &Pred, mode: FloatOrder) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let ds = write_table(dir.path(), rows);
    let table = Table::new(&ds);
    let sql = p.to_string();
    let want = naive_ids(p, rows, mode);
    let got = select_indices(&table, &sql).map(|s| s.into_vec());
    match (want, got) {
        (Ok(w), Ok(g)) => prop_assert_eq!(g, w, "{}", sql),
        (Err(_), Err(e)) => {
            prop_assert!(e.to_string().to_lowercase().contains("overflow"), "{sql}: unexpected error {e}")
        }
        (Ok(w), Err(e)) => prop_assert!(false, "{sql}: engine error {e}, naive gives {w:?}"),
        (Err(w), Ok(g)) => prop_assert!(false, "{sql}: engine gives {g:?}, naive error {w}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn predicates_match_naive_evaluation(
        rows in proptest::collection::vec(row(), 0..60),
        p in pred(),
    ) {
        check_ids(&rows, &p, FloatOrder::Total)?;
    }
}

fn i64_at(b: &RecordBatch, col: usize, row: usize) -> Option<i64> {
    let c = b.column(col).as_primitive::<Int64Type>();
    c.is_valid(row).then(|| c.value(row))
}

fn f64_at(b: &RecordBatch, col: usize, row: usize) -> Option<f64> {
    let c = b.column(col).as_primitive::<Float64Type>();
    c.is_valid(row).then(|| c.value(row))
}

fn close(got: Option<f64>, want: Option<f64>) -> bool {
    match (got, want) {
        (None, None) => true,
        (Some(g), Some(w)) => g == w || (g - w).abs() <= 1e-9 * w.abs().max(1.0),
        _ => false,
    }
}

/// count, sum(a), min(b), max(b), avg(a) of some rows.
#[derive(Debug, Default)]
struct Aggs {
    count: i64,
    sum: Option<i64>,
    min: Option<f64>,
    max: Option<f64>,
    avg: Option<f64>,
}

fn naive_aggs(rows: &[&Row]) -> Aggs {
    if rows.is_empty() {
        return Aggs::default();
    }
    let sum: i64 = rows.iter().map(|r| r.a).sum();
    let b = rows.iter().map(|r| r.b);
    Aggs {
        count: rows.len() as i64,
        sum: Some(sum),
        min: b.clone().reduce(f64::min),
        max: b.reduce(f64::max),
        avg: Some(rows.iter().map(|r| r.a as f64).sum::<f64>() / rows.len() as f64),
    }
}

fn check_aggs(
    b: &RecordBatch,
    row: usize,
    first: usize,
    want: &Aggs,
    sql: &str,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(i64_at(b, first, row), Some(want.count), "count: {}", sql);
    prop_assert_eq!(i64_at(b, first + 1, row), want.sum, "sum: {}", sql);
    for (col, what, want) in [(2, "min", want.min), (3, "max", want.max), (4, "avg", want.avg)] {
        let got = f64_at(b, first + col, row);
        prop_assert!(close(got, want), "{} {:?} != {:?}: {}", what, got, want, sql);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(150))]

    #[test]
    fn aggregates_match_naive_computation(
        rows in proptest::collection::vec(row(), 0..60),
        p in pred(),
    ) {
        let Ok(ids) = naive_ids(&p, &rows, FloatOrder::Total) else { return Ok(()) };
        let selected: Vec<&Row> = ids.iter().map(|&i| &rows[i as usize]).collect();
        let dir = tempfile::tempdir().unwrap();
        let ds = write_table(dir.path(), &rows);
        let table = Table::new(&ds);

        let sql = format!("SELECT count(*), sum(a), min(b), max(b), avg(a) FROM samples WHERE {p}");
        let b = query(&table, &sql).map_err(|e| TestCaseError::fail(format!("{sql}: {e}")))?;
        prop_assert_eq!(b.num_rows(), 1);
        check_aggs(&b, 0, 0, &naive_aggs(&selected), &sql)?;

        let sql = format!(
            "SELECT f, count(*), sum(a), min(b), max(b), avg(a) FROM samples WHERE {p} GROUP BY f ORDER BY f"
        );
        let b = query(&table, &sql).map_err(|e| TestCaseError::fail(format!("{sql}: {e}")))?;
        let mut groups: BTreeMap<bool, Vec<&Row>> = BTreeMap::new();
        for r in &selected {
            groups.entry(r.f).or_default().push(r);
        }
        prop_assert_eq!(b.num_rows(), groups.len(), "{}", sql);
        let keys = b.column(0).as_boolean();
        for (k, (flag, members)) in groups.iter().enumerate() {
            prop_assert_eq!(keys.value(k), *flag, "{}", sql);
            check_aggs(&b, k, 1, &naive_aggs(members), &sql)?;
        }
    }
}

fn one_row_table(b: f64) -> (tempfile::TempDir, Dataset) {
    let dir = tempfile::tempdir().unwrap();
    let ds = write_table(dir.path(), &[Row { a: 7, b, f: true, t: "ab".into() }]);
    (dir, ds)
}

#[test]
fn integer_division_and_modulo_by_zero_are_errors() {
    let (_dir, ds) = one_row_table(1.0);
    let table = Table::new(&ds);
    for sql in ["a / 0 = 1", "a % 0 = 1", "(a - 7) = 0 AND a / (a - 7) = 1"] {
        let err = select_indices(&table, sql).unwrap_err();
        assert!(err.to_string().contains("Divide by zero"), "{sql}: {err}");
    }
    // NULL operands give NULL, not an error.
    assert!(select_indices(&table, "a / NULL = 1").unwrap().into_vec().is_empty());
}

/// SQL: arithmetic with a NULL operand is NULL, also when both operands are NULL literals and for
/// `-NULL` (arrow has no arithmetic on its Null type: "Invalid arithmetic operation: Null + Null").
#[test]
fn arithmetic_on_null_literals_is_null() {
    let (_dir, ds) = one_row_table(1.0);
    let table = Table::new(&ds);
    let mut failures = Vec::new();
    for sql in [
        "(NULL + NULL) IS NULL",
        "(NULL - NULL) IS NULL",
        "(NULL * NULL) IS NULL",
        "(NULL / NULL) IS NULL",
        "(NULL % NULL) IS NULL",
        "(-NULL) IS NULL",
        "(NULL + NULL) = a OR TRUE",
    ] {
        match select_indices(&table, sql).map(|ids| ids.into_vec()) {
            Ok(ids) if ids == [0] => {}
            other => failures.push(format!("{sql}: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn arithmetic_with_one_null_operand_is_null() {
    let (_dir, ds) = one_row_table(1.0);
    let table = Table::new(&ds);
    for sql in ["(NULL + a) IS NULL", "(b * NULL) IS NULL", "(NULL / 2) IS NULL", "(-(NULL + a)) IS NULL"] {
        assert_eq!(select_indices(&table, sql).unwrap().into_vec(), [0], "{sql}");
    }
}

#[test]
fn integer_overflow_is_an_error() {
    let (_dir, ds) = one_row_table(1.0);
    let table = Table::new(&ds);
    let err = select_indices(&table, "a * 9223372036854775807 > 0").unwrap_err();
    assert!(err.to_string().to_lowercase().contains("overflow"), "{err}");
}

/// SQL (and IEEE 754 `==`) says -0.0 = 0.0; arrow-ord's totalOrder kernels, which the engine
/// compares with, say -0.0 < 0.0 unless the operands are normalised first.
#[test]
fn negative_zero_equals_zero() {
    let (_dir, ds) = one_row_table(-0.0);
    let table = Table::new(&ds);
    for sql in ["b = 0", "b = 0.0", "b >= 0", "NOT (b < 0)", "b IN (0)", "b BETWEEN 0 AND 1", "-b = b"] {
        assert_eq!(select_indices(&table, sql).unwrap().into_vec(), [0], "{sql}");
    }
}

/// NaN from `inf - inf` carries the sign bit on x86, and totalOrder sorts negative NaN below
/// -inf: `NaN < 0` selects the row. IEEE says every comparison with NaN but `<>` is false;
/// PostgreSQL orders NaN above every number. Either way `NaN < 0` must not hold.
#[test]
fn nan_is_not_below_zero() {
    let (_dir, ds) = one_row_table(1e300);
    let table = Table::new(&ds);
    for sql in ["(b * b - b * b) < 0", "(b * b - b * b) < (-1e300)"] {
        assert!(select_indices(&table, sql).unwrap().is_empty(), "{sql}");
    }
}
