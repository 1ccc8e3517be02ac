//! The commonest WHERE, fused: a conjunction of comparisons of a numeric column with a number
//! (`label < 500 AND score > 0.25 AND "image.width" >= 2`) over every row of the table,
//! evaluated in one pass into the selection bitmap (no boolean column per comparison, no AND
//! kernel between them), in morsels of rows spread over all cores (rayon), written in row order:
//! the same bits whatever the number of threads.
//!
//! Anything else takes the general evaluator (`eval.rs`), and so does anything whose values
//! could make the two disagree: a column with nulls, a float column holding NaN or -0.0, an
//! unsigned 64-bit column against a negative number. The comparisons are the evaluator's
//! (`narrow_literal`, `coerce`, `sql_float_order`, arrow's total order), which a property test
//! checks on random columns and predicates.

use std::cmp::Ordering;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt16Type, UInt64Type};
use arrow_array::{Array, ArrayRef};
use arrow_buffer::{BooleanBuffer, Buffer};
use arrow_schema::DataType;
use rayon::prelude::*;
use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator};

use super::ast::{column_name, negated_number};
use super::scope::Ctx;
use crate::error::Result;

/// Rows per morsel: a multiple of 64 (whole bitmap words), small enough that its words stay in
/// L1 while each comparison ANDs into them.
const MORSEL: usize = 64 * 1024;

/// A number literal, as the evaluator reads it (`literal`: an `i64` when the text is one, else
/// an `f64`).
#[derive(Debug, Clone, Copy)]
enum Number {
    Int(i64),
    Float(f64),
}

/// One comparison `column OP number`, its values borrowed from the column.
enum Leaf<'a> {
    Int(&'a [i64], Cmp, i64),
    U16(&'a [u16], Cmp, i64),
    U64(&'a [u64], Cmp, u64),
    /// Compared as `f64` in SQL order: the column's values are `as f64` of its integers or its
    /// floats (checked free of NaN and -0.0), the number is normalised.
    Float(Values<'a>, Cmp, f64),
}

/// The values of a column compared as floats.
enum Values<'a> {
    Int(&'a [i64]),
    U16(&'a [u16]),
    U64(&'a [u64]),
    Float(&'a [f64]),
}

#[derive(Debug, Clone, Copy)]
enum Cmp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

impl Cmp {
    fn of(op: &BinaryOperator) -> Option<Cmp> {
        Some(match op {
            BinaryOperator::Eq => Cmp::Eq,
            BinaryOperator::NotEq => Cmp::NotEq,
            BinaryOperator::Lt => Cmp::Lt,
            BinaryOperator::LtEq => Cmp::LtEq,
            BinaryOperator::Gt => Cmp::Gt,
            BinaryOperator::GtEq => Cmp::GtEq,
            _ => return None,
        })
    }

    /// `b OP' a` for `a OP b`.
    fn flipped(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::LtEq => Cmp::GtEq,
            Cmp::Gt => Cmp::Lt,
            Cmp::GtEq => Cmp::LtEq,
            same => same,
        }
    }

    #[inline(always)]
    fn holds(self, o: Ordering) -> bool {
        match self {
            Cmp::Eq => o == Ordering::Equal,
            Cmp::NotEq => o != Ordering::Equal,
            Cmp::Lt => o == Ordering::Less,
            Cmp::LtEq => o != Ordering::Greater,
            Cmp::Gt => o == Ordering::Greater,
            Cmp::GtEq => o != Ordering::Less,
        }
    }
}

/// The evaluator's float order: NaN made one NaN, -0.0 made 0.0, then arrow's total order.
#[inline(always)]
fn sql_order(x: f64) -> f64 {
    if x.is_nan() {
        f64::NAN
    } else {
        x + 0.0
    }
}

/// The matching rows of `predicate` over every row of `ctx`'s table, when it is a conjunction
/// this module evaluates; `None` for anything else (the caller evaluates it in general).
pub(crate) fn conjunction_mask(ctx: &Ctx, predicate: &Expr) -> Option<Result<BooleanBuffer>> {
    if ctx.is_grouped() || ctx.num_rows() as u64 != ctx.table().num_rows() {
        return None;
    }
    let mut comparisons = Vec::new();
    if !comparisons_of(predicate, &mut comparisons) || comparisons.is_empty() {
        return None;
    }
    // The columns first (materialised, cached), then the leaves borrowing them.
    let mut columns: Vec<(ArrayRef, Cmp, Number)> = Vec::with_capacity(comparisons.len());
    for (name, cmp, number) in comparisons {
        let array = ctx.table().column(&ctx.resolve(&name)).ok()?;
        if array.null_count() > 0 || array.len() != ctx.num_rows() {
            return None;
        }
        columns.push((array, cmp, number));
    }
    let leaves = columns.iter().map(|(a, cmp, n)| leaf(a.as_ref(), *cmp, *n)).collect::<Option<Vec<_>>>()?;
    Some(Ok(evaluate(&leaves, ctx.num_rows())))
}

/// Appends the comparisons of an AND-tree of `column OP number` to `out`; false for any other
/// form.
fn comparisons_of(e: &Expr, out: &mut Vec<(String, Cmp, Number)>) -> bool {
    // An AND chain leans left (`a AND b AND c` is `(a AND b) AND c`): walked in a loop.
    let mut e = e;
    loop {
        match e {
            Expr::Nested(inner) => e = inner,
            Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
                if !comparisons_of(right, out) {
                    return false;
                }
                e = left;
            }
            Expr::BinaryOp { left, op, right } => {
                let Some(cmp) = Cmp::of(op) else { return false };
                let found = match (column_name(unnested(left)), number(unnested(right))) {
                    (Some(c), Some(n)) => Some((c, cmp, n)),
                    _ => match (number(unnested(left)), column_name(unnested(right))) {
                        (Some(n), Some(c)) => Some((c, cmp.flipped(), n)),
                        _ => None,
                    },
                };
                let Some(found) = found else { return false };
                out.push(found);
                return true;
            }
            _ => return false,
        }
    }
}

fn unnested(mut e: &Expr) -> &Expr {
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

/// A number literal (or a negated one) as the evaluator parses it.
fn number(e: &Expr) -> Option<Number> {
    let text = match e {
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => format!("-{}", negated_number(expr)?),
        _ => negated_number(e)?.to_string(),
    };
    match text.parse::<i64>() {
        Ok(i) => Some(Number::Int(i)),
        Err(_) => text.parse::<f64>().ok().map(Number::Float),
    }
}

/// The comparison of `array` with `number`, as the evaluator makes it; `None` where values
/// could make the two disagree.
fn leaf(array: &dyn Array, cmp: Cmp, number: Number) -> Option<Leaf<'_>> {
    Some(match (array.data_type(), number) {
        (DataType::Int64, Number::Int(n)) => Leaf::Int(array.as_primitive::<Int64Type>().values(), cmp, n),
        // narrow_literal casts the number to u16 when it fits, else coerce widens both to i64:
        // either way the mathematical comparison.
        (DataType::UInt16, Number::Int(n)) => Leaf::U16(array.as_primitive::<UInt16Type>().values(), cmp, n),
        (DataType::UInt64, Number::Int(n)) => {
            Leaf::U64(array.as_primitive::<UInt64Type>().values(), cmp, u64::try_from(n).ok()?)
        }
        (DataType::Float64, n) => {
            let values = array.as_primitive::<Float64Type>().values();
            if values.iter().any(|x| x.is_nan() || x.to_bits() == (-0.0f64).to_bits()) {
                return None;
            }
            Leaf::Float(Values::Float(values), cmp, sql_order(as_float(n)))
        }
        (DataType::Int64, Number::Float(x)) => {
            Leaf::Float(Values::Int(array.as_primitive::<Int64Type>().values()), cmp, sql_order(x))
        }
        (DataType::UInt16, Number::Float(x)) => {
            Leaf::Float(Values::U16(array.as_primitive::<UInt16Type>().values()), cmp, sql_order(x))
        }
        (DataType::UInt64, Number::Float(x)) => {
            Leaf::Float(Values::U64(array.as_primitive::<UInt64Type>().values()), cmp, sql_order(x))
        }
        _ => return None,
    })
}

fn as_float(n: Number) -> f64 {
    match n {
        Number::Int(i) => i as f64,
        Number::Float(x) => x,
    }
}

/// Every leaf ANDed into one bitmap of `len` rows, morsel by morsel on all cores.
fn evaluate(leaves: &[Leaf<'_>], len: usize) -> BooleanBuffer {
    let mut words = vec![u64::MAX; len.div_ceil(64)];
    words.par_chunks_mut(MORSEL / 64).enumerate().for_each(|(m, out)| {
        let start = m * MORSEL;
        let end = (start + MORSEL).min(len);
        for leaf in leaves {
            match leaf {
                Leaf::Int(v, cmp, n) => and_into(out, &v[start..end], |x| cmp.holds(x.cmp(n))),
                Leaf::U16(v, cmp, n) => and_into(out, &v[start..end], |x| cmp.holds(i64::from(*x).cmp(n))),
                Leaf::U64(v, cmp, n) => and_into(out, &v[start..end], |x| cmp.holds(x.cmp(n))),
                Leaf::Float(values, cmp, n) => {
                    let holds = |x: f64| cmp.holds(x.total_cmp(n));
                    match values {
                        Values::Float(v) => and_into(out, &v[start..end], |x| holds(*x)),
                        Values::Int(v) => and_into(out, &v[start..end], |x| holds(*x as f64)),
                        Values::U16(v) => and_into(out, &v[start..end], |x| holds(f64::from(*x))),
                        Values::U64(v) => and_into(out, &v[start..end], |x| holds(*x as f64)),
                    }
                }
            }
        }
    });
    // Bits past the last row stay set in the last word: BooleanBuffer reads only `len` bits.
    BooleanBuffer::new(Buffer::from_vec(words), 0, len)
}

/// `out[w] &= bits of test(values[64w..64w+64])`.
#[inline(always)]
fn and_into<T>(out: &mut [u64], values: &[T], test: impl Fn(&T) -> bool) {
    for (word, block) in out.iter_mut().zip(values.chunks(64)) {
        let mut bits = 0u64;
        for (k, x) in block.iter().enumerate() {
            bits |= u64::from(test(x)) << k;
        }
        *word &= bits;
    }
}

#[cfg(test)]
mod tests {
    use beton_storage::{
        Dataset, FieldSpec, FieldType, ImageOptions, ImageSource, Pixels, SampleValue, WriteMode, Writer,
        WriterOptions,
    };
    use proptest::prelude::*;

    use super::*;
    use crate::sql::eval::null_as_false;
    use crate::sql::parse::{parse, tokenize, Parsed};
    use crate::Table;

    /// Values at the edges of every comparison: extremes, zeros, NaN, fractions.
    const INTS: [i64; 8] = [i64::MIN, -3, -1, 0, 1, 2, 3, i64::MAX];
    const FLOATS: [f64; 10] =
        [f64::NEG_INFINITY, -2.5, -1e-300, 0.0, 0.1, 0.25, 1.0, 3.0, 1e300, f64::INFINITY];
    /// Number literals as written in SQL.
    const NUMBERS: [&str; 16] = [
        "0",
        "1",
        "3",
        "-1",
        "2.5",
        "-2.5",
        "0.0",
        "-0.0",
        "0.1",
        "1e300",
        "65535",
        "70000",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "99999999999999999999",
    ];
    const COLUMNS: [&str; 5] = ["a", "f", "b", "image.width", "index"];
    const OPS: [&str; 6] = ["=", "<>", "<", "<=", ">", ">="];

    /// 300 rows: `a` (int), `f` (float; NaN in row 7 and -0.0 in row 8 when `nan`), `b` (bytes: its size is a
    /// u64 column), `image` (raw, widths 1 to 4: a u16 column).
    fn file(dir: &std::path::Path, nan: bool) -> std::path::PathBuf {
        let path = dir.join(if nan { "nan.beton" } else { "plain.beton" });
        let fields = vec![
            FieldSpec::new("a", FieldType::Int),
            FieldSpec::new("f", FieldType::Float),
            FieldSpec::new("b", FieldType::Bytes),
            FieldSpec::rgb_image("image", ImageOptions::with_mode(WriteMode::Raw)),
        ];
        Writer::new(&path, fields, WriterOptions::default())
            .unwrap()
            .write_indexed(300, |i| {
                let k = i as usize;
                let f = match (nan, i) {
                    (true, 7) => f64::NAN,
                    (true, 8) => -0.0,
                    _ => FLOATS[(k * 7) % FLOATS.len()],
                };
                let w = 1 + (k % 4) as u32;
                Ok(vec![
                    SampleValue::Int(INTS[(k * 5) % INTS.len()]),
                    SampleValue::Float(f),
                    SampleValue::Bytes(vec![0; k % 6]),
                    SampleValue::Image(ImageSource::Pixels(Pixels {
                        width: w,
                        height: 1,
                        channels: 3,
                        data: vec![9; w as usize * 3],
                    })),
                ])
            })
            .unwrap();
        path
    }

    fn predicate(sql: &str) -> Expr {
        let parsed = parse(sql, tokenize(sql).unwrap()).unwrap();
        match &parsed {
            Parsed::Predicate(e) => (**e).clone(),
            Parsed::Select(_) => unreachable!(),
        }
    }

    /// The general evaluator's rows, or its error.
    fn general(ctx: &Ctx, e: &Expr) -> std::result::Result<Vec<usize>, String> {
        let v = ctx.eval(e).map_err(|e| e.to_string())?;
        let mask = null_as_false(v.array.as_boolean());
        Ok(mask.values().set_indices().collect())
    }

    #[test]
    fn the_fused_path_takes_conjunctions_of_comparisons_only() {
        let tmp = tempfile::tempdir().unwrap();
        let ds = Dataset::open(file(tmp.path(), false)).unwrap();
        let table = Table::new(&ds);
        let ctx = Ctx::all(&table);
        for sql in
            ["a < 1", "a < 1 AND (f >= 0.5 AND 2 <= b)", "-1 < a", "\"image.width\" > 2 AND index <> 4"]
        {
            assert!(conjunction_mask(&ctx, &predicate(sql)).is_some(), "{sql}");
        }
        for sql in [
            "a < 1 OR b > 2",
            "a < b",
            "a + 1 < 2",
            "a < 1 AND TRUE",
            "a IN (1, 2)",
            "b > -1",
            "nope < 1",
            "a < 'x'",
        ] {
            assert!(conjunction_mask(&ctx, &predicate(sql)).is_none(), "{sql}");
        }
        // NaN or -0.0 in a float column: the general way (its order is the evaluator's business).
        let ds = Dataset::open(file(tmp.path(), true)).unwrap();
        let table = Table::new(&ds);
        assert!(conjunction_mask(&Ctx::all(&table), &predicate("f < 1")).is_none());
        assert!(general(&Ctx::all(&table), &predicate("f < 1")).unwrap().contains(&8));
        assert!(conjunction_mask(&Ctx::all(&table), &predicate("a < 1")).is_some());
    }

    #[test]
    fn the_fused_path_gives_the_general_evaluators_rows() {
        let tmp = tempfile::tempdir().unwrap();
        let ds = Dataset::open(file(tmp.path(), false)).unwrap();
        let table = Table::new(&ds);
        let ctx = Ctx::all(&table);
        let leaf = (0..COLUMNS.len(), 0..OPS.len(), 0..NUMBERS.len(), any::<bool>());
        let config = ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() };
        let taken = std::sync::atomic::AtomicUsize::new(0);
        proptest!(config, |(leaves in proptest::collection::vec(leaf, 1..4))| {
            let sql: Vec<String> = leaves
                .iter()
                .map(|&(c, o, n, flip)| {
                    let column = format!("\"{}\"", COLUMNS[c]);
                    if flip { format!("{} {} {column}", NUMBERS[n], OPS[o]) } else { format!("{column} {} {}", OPS[o], NUMBERS[n]) }
                })
                .collect();
            let sql = sql.join(" AND ");
            let e = predicate(&sql);
            if let Some(fused) = conjunction_mask(&ctx, &e) {
                taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let fused: Vec<usize> = fused.unwrap().set_indices().collect();
                prop_assert_eq!(Ok(fused), general(&ctx, &e), "{}", sql);
            }
        });
        // Most cases take the fused path (the others: a u64 column against a negative number).
        assert!(taken.into_inner() > 256, "the fused path was hardly taken");
    }

    #[test]
    fn the_bits_do_not_depend_on_the_number_of_threads() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("big.beton");
        let n = 3 * MORSEL as u64 + 17;
        Writer::new(&path, vec![FieldSpec::new("a", FieldType::Int)], WriterOptions::default())
            .unwrap()
            .write_indexed(n, |i| Ok(vec![SampleValue::Int((i * 7919 % 1000) as i64)]))
            .unwrap();
        let ds = Dataset::open(&path).unwrap();
        let table = Table::new(&ds);
        let e = predicate("a < 500 AND a >= 10");
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| conjunction_mask(&Ctx::all(&table), &e).unwrap().unwrap())
        };
        let one = run(1);
        assert_eq!(one, run(3));
        let expected: Vec<usize> =
            (0..n as usize).filter(|i| (10..500).contains(&(i * 7919 % 1000))).collect();
        assert_eq!(one.set_indices().collect::<Vec<_>>(), expected);
        assert_eq!(one.len(), n as usize);
    }
}
