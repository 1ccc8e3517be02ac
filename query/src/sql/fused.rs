//! The commonest WHERE, fused: a conjunction of comparisons of a numeric column with a number
//! (`label < 500 AND score > 0.25 AND "image.width" >= 2`, `score BETWEEN 0.2 AND 0.8`,
//! `label IN (3, 5, 8)`, `label IN (` a hundred classes `)`) or with another numeric column
//! (`score < weight`, `label <> pred`), and a text column's prefix (`name LIKE 'ab%'`), over
//! every row of the table,
//! evaluated in one pass into the selection bitmap (no boolean column per comparison, no AND
//! kernel between them), in morsels of rows spread over all cores (rayon), written in row order:
//! the same bits whatever the number of threads. The set bits then become row ids, morsels in
//! parallel, into a vector written once.
//!
//! The loops are compiled for AVX-512 and AVX2 besides the baseline, and the CPU picks once
//! ([`Isa`]). Measured against arrow's kernels on the same binary (`query/examples/where_ab.rs`,
//! 10 M rows, a 2-core AVX-512 VM): 2.4-2.6x faster on one thread (9.0-11.8 ms: the three columns,
//! 180 MB, are read at about the speed of a plain sum over them), 3.0-3.3x on two; compiled
//! for the baseline only, 0.8x on one thread and 1.4x on two, so on a CPU without AVX2 one
//! thread takes arrow's kernels.
//!
//! Anything else takes the general evaluator (`eval.rs`), and so does anything whose values
//! could make the two disagree: a column with nulls, an unsigned 64-bit column against a
//! negative number. NaN and -0.0 are ordered in the loop as the evaluator orders them. The
//! comparisons are the evaluator's (`narrow_literal`, `coerce`, `sql_float_order`, arrow's total
//! order), which a property test checks on random columns and predicates, with the loops of
//! every instruction set the CPU runs.

use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::Arc;

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
use crate::table::PartColumn;

/// Rows per morsel: a multiple of 64 (whole bitmap words), small enough that its words stay in
/// L1 while each comparison ANDs into them.
const MORSEL: usize = 64 * 1024;

/// A number literal, as the evaluator reads it (`literal`: an `i64` when the text is one, else
/// an `f64`).
#[derive(Debug, Clone, Copy, PartialEq)]
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
    /// floats (NaN made one NaN, -0.0 made 0.0, in the loop), the number is normalised.
    Float(Values<'a>, Cmp, f64),
    /// `column IN (integers)`: equal to one of them.
    InInt(&'a [i64], Vec<i64>),
    InU16(&'a [u16], Vec<i64>),
    /// The list without the integers no `u64` equals (negative ones).
    InU64(&'a [u64], Vec<u64>),
    /// A longer list of integers whose range is small: a bit per value from the smallest.
    InBits(IntValues<'a>, Bits),
    /// `column OP column`, row by row.
    Cols(Pair<'a>, Cmp),
    /// A comparison with arithmetic on a side.
    Arith(Box<ArithLeaf<'a>>),
    /// The same in every row (`IS NOT NULL` of a column without NULLs).
    Const(bool),
    /// `column LIKE 'prefix%'` over a text column: its value offsets (one more than its rows)
    /// and bytes, and the prefix.
    Prefix(Texts<'a>, Vec<u8>),
}

/// A text column's value offsets (one more than its rows) and the bytes they point into.
#[derive(Clone, Copy)]
enum Texts<'a> {
    Small(&'a [i32], &'a [u8]),
    Large(&'a [i64], &'a [u8]),
}

/// `left OP right`, each side an operand or two combined, computed as the evaluator computes
/// it: integers (i64 and u16 columns, integer numbers) as `i64`s, checked (an overflow, which
/// the evaluator reports as an error, sets `overflow`, and the caller leaves the predicate to
/// the evaluator); a side with a float as `f64`s; the two sides compared as `i64`s, or as `f64`s
/// in SQL order when either is a float.
struct ArithLeaf<'a> {
    left: Side<'a>,
    cmp: Cmp,
    right: Side<'a>,
    overflow: std::sync::atomic::AtomicBool,
}

/// One side of an [`ArithLeaf`].
struct Side<'a> {
    a: Input<'a>,
    op: Option<(ArithOp, Input<'a>)>,
    /// Computed as `f64`s (an operand is a float).
    float: bool,
}

/// An operand's values: a column's, or a number.
#[derive(Clone, Copy)]
enum Input<'a> {
    Int(&'a [i64]),
    U16(&'a [u16]),
    Float(&'a [f64]),
    IntNum(i64),
    FloatNum(f64),
}

impl Input<'_> {
    fn is_float(self) -> bool {
        matches!(self, Input::Float(_) | Input::FloatNum(_))
    }

    /// A number's value as an `f64`; `None` for a column.
    fn number(self) -> Option<f64> {
        match self {
            Input::IntNum(i) => Some(i as f64),
            Input::FloatNum(x) => Some(x),
            _ => None,
        }
    }
}

/// Buffers of one side of an arithmetic comparison's block: its values and its operands'.
#[derive(Default)]
struct SideScratch {
    out_i: Vec<i64>,
    a_i: Vec<i64>,
    b_i: Vec<i64>,
    out_f: Vec<f64>,
    a_f: Vec<f64>,
    b_f: Vec<f64>,
}

/// An operand's values at `rows` as `i64`s (an integer operand): an i64 column's own (no
/// copy), else widened or repeated into `buffer`.
#[inline(always)]
fn int_operand<'b>(input: Input<'b>, rows: Range<usize>, buffer: &'b mut Vec<i64>) -> &'b [i64] {
    buffer.clear();
    match input {
        Input::Int(v) => return &v[rows],
        Input::U16(v) => buffer.extend(v[rows].iter().map(|x| i64::from(*x))),
        Input::IntNum(i) => buffer.resize(rows.len(), i),
        Input::Float(_) | Input::FloatNum(_) => unreachable!("an integer side has no float"),
    }
    buffer
}

/// An operand's values at `rows` as `f64`s: a float column's own (no copy), else cast (`as`,
/// the evaluator's cast) or repeated into `buffer`.
#[inline(always)]
fn float_operand<'b>(input: Input<'b>, rows: Range<usize>, buffer: &'b mut Vec<f64>) -> &'b [f64] {
    buffer.clear();
    match input {
        Input::Float(v) => return &v[rows],
        Input::Int(v) => buffer.extend(v[rows].iter().map(|x| *x as f64)),
        Input::U16(v) => buffer.extend(v[rows].iter().map(|x| f64::from(*x))),
        Input::IntNum(i) => buffer.resize(rows.len(), i as f64),
        Input::FloatNum(x) => buffer.resize(rows.len(), x),
    }
    buffer
}

impl<'a> Side<'a> {
    /// Its values at `rows` as `i64`s (an integer side), into `out` unless a column's own;
    /// `ok` is cleared on overflow.
    #[inline(always)]
    fn int_values<'b>(
        &self,
        rows: Range<usize>,
        out: &'b mut Vec<i64>,
        a: &'b mut Vec<i64>,
        b: &mut Vec<i64>,
        ok: &mut bool,
    ) -> &'b [i64]
    where
        'a: 'b,
    {
        let Some((op, second)) = self.op else { return int_operand(self.a, rows, out) };
        let n = rows.len();
        let x = &int_operand(self.a, rows.clone(), a)[..n];
        let y = &int_operand(second, rows, b)[..n];
        out.clear();
        out.resize(n, 0);
        let o = &mut out[..n];
        // Wrapping results, and the overflows told by their signs (a sum overflows when it
        // differs in sign from both operands; a difference when the operands differ in sign
        // and it differs from the first), ORed without a branch so that the loops vectorise.
        let mut signs = 0i64;
        match op {
            ArithOp::Add => (0..n).for_each(|i| {
                let r = x[i].wrapping_add(y[i]);
                signs |= (x[i] ^ r) & (y[i] ^ r);
                o[i] = r;
            }),
            ArithOp::Sub => (0..n).for_each(|i| {
                let r = x[i].wrapping_sub(y[i]);
                signs |= (x[i] ^ y[i]) & (x[i] ^ r);
                o[i] = r;
            }),
            ArithOp::Mul => {
                let mut over = false;
                (0..n).for_each(|i| {
                    let (r, v) = x[i].overflowing_mul(y[i]);
                    over |= v;
                    o[i] = r;
                });
                signs |= -i64::from(over);
            }
        }
        *ok &= signs >= 0;
        out
    }

    /// Its values at `rows` as `i64`s (an integer side); `ok` is cleared on overflow.
    #[inline(always)]
    fn i64s<'b>(&self, rows: Range<usize>, s: &'b mut SideScratch, ok: &mut bool) -> &'b [i64]
    where
        'a: 'b,
    {
        let SideScratch { out_i, a_i, b_i, .. } = s;
        self.int_values(rows, out_i, a_i, b_i, ok)
    }

    /// Its values at `rows` as `f64`s: a float side computed in `f64`s, an integer side in
    /// `i64`s (checked: `ok` cleared on overflow) then cast.
    #[inline(always)]
    fn f64s<'b>(&self, rows: Range<usize>, s: &'b mut SideScratch, ok: &mut bool) -> &'b [f64]
    where
        'a: 'b,
    {
        let SideScratch { out_i, a_i, b_i, out_f, a_f, b_f } = s;
        if !self.float {
            let values = self.int_values(rows, out_i, a_i, b_i, ok);
            out_f.clear();
            out_f.extend(values.iter().map(|x| *x as f64));
            return out_f;
        }
        let Some((op, second)) = self.op else { return float_operand(self.a, rows, out_f) };
        let n = rows.len();
        let x = &float_operand(self.a, rows.clone(), a_f)[..n];
        out_f.clear();
        out_f.resize(n, 0.0);
        let o = &mut out_f[..n];
        match second.number() {
            // A number: no column of it made.
            Some(y) => match op {
                ArithOp::Add => (0..n).for_each(|i| o[i] = x[i] + y),
                ArithOp::Sub => (0..n).for_each(|i| o[i] = x[i] - y),
                ArithOp::Mul => (0..n).for_each(|i| o[i] = x[i] * y),
            },
            None => {
                let y = &float_operand(second, rows, b_f)[..n];
                match op {
                    ArithOp::Add => (0..n).for_each(|i| o[i] = x[i] + y[i]),
                    ArithOp::Sub => (0..n).for_each(|i| o[i] = x[i] - y[i]),
                    ArithOp::Mul => (0..n).for_each(|i| o[i] = x[i] * y[i]),
                }
            }
        }
        out_f
    }

    /// The number it is, when it is one (no column, no arithmetic).
    fn constant(&self) -> Option<Input<'_>> {
        match (self.op, self.a) {
            (None, n @ (Input::IntNum(_) | Input::FloatNum(_))) => Some(n),
            _ => None,
        }
    }
}

/// Two columns compared row by row, as the evaluator compares them (`coerce`): integers of two
/// types as `i64`s (i64 and u16; two u64 columns as `u64`s), a float column with any number
/// column as `f64`s in SQL order. A u64 column against another integer type is left to the
/// evaluator (its cast to `i64` can fail). Each pair is put in one order (the comparison
/// flipped to match), so that fewer loops are compiled.
enum Pair<'a> {
    /// i64 with i64.
    Int(&'a [i64], &'a [i64]),
    /// i64 with u16.
    IntU16(&'a [i64], &'a [u16]),
    /// u16 with u16.
    U16(&'a [u16], &'a [u16]),
    /// u64 with u64.
    U64(&'a [u64], &'a [u64]),
    /// A float column with a number column of any type.
    Float(&'a [f64], Values<'a>),
}

/// The values of an integer column, compared as mathematical integers.
enum IntValues<'a> {
    Int(&'a [i64]),
    U16(&'a [u16]),
    U64(&'a [u64]),
}

/// A set of integers as a bitmap over `[base, base + 64 * words.len())`.
struct Bits {
    base: i64,
    words: Vec<u64>,
}

impl Bits {
    /// The set of `items`, if their range is at most [`MAX_IN_RANGE`].
    fn of(items: &[i64]) -> Option<Bits> {
        let (min, max) = (*items.iter().min()?, *items.iter().max()?);
        let span = usize::try_from(i128::from(max) - i128::from(min)).ok()?.checked_add(1)?;
        if span > MAX_IN_RANGE {
            return None;
        }
        let mut words = vec![0u64; span.div_ceil(64)];
        for &i in items {
            let at = (i128::from(i) - i128::from(min)) as usize;
            words[at / 64] |= 1 << (at % 64);
        }
        Some(Bits { base: min, words })
    }

    /// Whether `x` is in the set, in 64-bit arithmetic: past the comparison `x >= base`,
    /// `x - base` fits a `u64`.
    #[inline(always)]
    fn contains(&self, x: i64) -> bool {
        x >= self.base && {
            let at = x.wrapping_sub(self.base) as u64;
            self.words.get((at / 64) as usize).is_some_and(|w| w >> (at % 64) & 1 == 1)
        }
    }
}

/// Lists up to this long compare each row with every item (vectorised); longer ones look rows
/// up in a bitmap ([`Bits`]).
const MAX_IN_LIST: usize = 16;
/// The widest range of a longer list's items the bitmap covers (2 MiB of bits); wider ones are
/// left to the evaluator's hash set.
const MAX_IN_RANGE: usize = 1 << 24;

/// One condition on a column, as written.
#[derive(Debug, Clone)]
enum Condition {
    Cmp(Cmp, Number),
    In(Vec<i64>),
    /// Compared with another column (its name).
    Col(Cmp, String),
    /// `left OP right` where a side is arithmetic (`label + size < 500`, `score * 2 > weight`):
    /// the condition's column is the first one either side reads.
    Arith(Term, Cmp, Term),
    /// `column IS NULL` (`true`) or `IS NOT NULL` (`false`): constant over the columns the fused
    /// pass reads, which have no NULLs (it declines those that have).
    IsNull(bool),
    /// `column LIKE 'prefix%'`: the text starts with these bytes.
    Prefix(Vec<u8>),
}

impl Condition {
    /// The other column a condition reads, if any.
    fn other(&self) -> Option<&str> {
        match self {
            Condition::Col(_, name) => Some(name),
            _ => None,
        }
    }

    /// Every column an arithmetic condition reads, in order (empty for the others).
    fn arith_columns(&self) -> Vec<&str> {
        match self {
            Condition::Arith(l, _, r) => l.columns().into_iter().chain(r.columns()).collect(),
            _ => Vec::new(),
        }
    }
}

/// `+`, `-` or `*`: the arithmetic the fused pass does (division and remainder, whose zero
/// divisors are errors, are left to the evaluator).
#[derive(Debug, Clone, Copy, PartialEq)]
enum ArithOp {
    Add,
    Sub,
    Mul,
}

/// A column or a number.
#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Col(String),
    Num(Number),
}

/// One side of an arithmetic comparison: an operand, or two combined (`label + size`).
#[derive(Debug, Clone, PartialEq)]
enum Term {
    One(Operand),
    Op(Operand, ArithOp, Operand),
}

impl Term {
    fn of(e: &Expr) -> Option<Term> {
        let operand = |e: &Expr| match (column_name(e), number(e)) {
            (Some(c), _) => Some(Operand::Col(c)),
            (None, Some(n)) => Some(Operand::Num(n)),
            _ => None,
        };
        let e = unnested(e);
        if let Expr::BinaryOp { left, op, right } = e {
            let op = match op {
                BinaryOperator::Plus => ArithOp::Add,
                BinaryOperator::Minus => ArithOp::Sub,
                BinaryOperator::Multiply => ArithOp::Mul,
                _ => return None,
            };
            return Some(Term::Op(operand(unnested(left))?, op, operand(unnested(right))?));
        }
        operand(e).map(Term::One)
    }

    fn operands(&self) -> Vec<&Operand> {
        match self {
            Term::One(a) => vec![a],
            Term::Op(a, _, b) => vec![a, b],
        }
    }

    fn columns(&self) -> Vec<&str> {
        self.operands()
            .into_iter()
            .filter_map(|o| match o {
                Operand::Col(c) => Some(c.as_str()),
                Operand::Num(_) => None,
            })
            .collect()
    }
}

/// How a predicate's comparisons combine ([`shape_of`]): its AND, OR and NOT over them, each
/// comparison by its position in the list. Every comparison the fused pass takes is TRUE or
/// FALSE in every row (its columns have no NULLs, its numbers are not NULL), so the two-valued
/// combinations are SQL's three-valued ones.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Atom(usize),
    And(Vec<Shape>),
    Or(Vec<Shape>),
    Not(Box<Shape>),
}

impl Shape {
    /// `out &=` its value over `rows` (one morsel, or one row; `out` holds its words). The
    /// bits past `rows` in the last word are left as they are (never read).
    fn and_into(&self, isa: Isa, leaves: &[Leaf<'_>], rows: Range<usize>, out: &mut [u64]) {
        match self {
            Shape::Atom(i) => isa.and_morsel(std::slice::from_ref(&leaves[*i]), rows, out),
            Shape::And(all) => {
                for s in all {
                    s.and_into(isa, leaves, rows.clone(), out);
                }
            }
            Shape::Or(any) => {
                let (mut union, mut one) = (vec![0u64; out.len()], vec![0u64; out.len()]);
                for s in any {
                    one.fill(u64::MAX);
                    s.and_into(isa, leaves, rows.clone(), &mut one);
                    union.iter_mut().zip(&one).for_each(|(u, o)| *u |= o);
                }
                out.iter_mut().zip(&union).for_each(|(w, u)| *w &= u);
            }
            Shape::Not(s) => {
                let mut one = vec![u64::MAX; out.len()];
                s.and_into(isa, leaves, rows, &mut one);
                out.iter_mut().zip(&one).for_each(|(w, o)| *w &= !o);
            }
        }
    }

    /// Its atoms numbered by `map` (old position to new), `None` when one has no new number.
    fn renumbered(&self, map: &[Option<usize>]) -> Option<Shape> {
        Some(match self {
            Shape::Atom(i) => Shape::Atom(map[*i]?),
            Shape::And(all) => Shape::And(all.iter().map(|s| s.renumbered(map)).collect::<Option<_>>()?),
            Shape::Or(any) => Shape::Or(any.iter().map(|s| s.renumbered(map)).collect::<Option<_>>()?),
            Shape::Not(s) => Shape::Not(Box::new(s.renumbered(map)?)),
        })
    }
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

/// [`conjunction_ids`] as a bit per row of the table (what the tests compare).
#[cfg(test)]
pub(crate) fn conjunction_mask(ctx: &Ctx, predicate: &Expr) -> Option<Result<BooleanBuffer>> {
    conjunction_mask_with(Isa::detected(), ctx, predicate)
}

/// The positions of the matching rows of `predicate` over every row of `ctx`'s table, ascending,
/// when it is a conjunction this module evaluates; `None` for anything else (the caller
/// evaluates it in general). No bitmap of the whole table is made where the table is read a data
/// file at a time, nor for conditions on `index` alone.
pub(crate) fn conjunction_ids(ctx: &Ctx, predicate: &Expr) -> Option<Result<Vec<u64>>> {
    conjunction_ids_with(Isa::detected(), ctx, predicate)
}

/// [`conjunction_mask`] with the loops compiled for `isa`.
#[cfg(test)]
fn conjunction_mask_with(isa: Isa, ctx: &Ctx, predicate: &Expr) -> Option<Result<BooleanBuffer>> {
    Some(conjunction_with(isa, ctx, predicate)?.map(Matched::into_mask))
}

/// [`conjunction_ids`] with the loops compiled for `isa`.
fn conjunction_ids_with(isa: Isa, ctx: &Ctx, predicate: &Expr) -> Option<Result<Vec<u64>>> {
    Some(conjunction_with(isa, ctx, predicate)?.map(|m| m.into_ids(isa)))
}

/// What `predicate` matches, when it is a conjunction this module evaluates.
fn conjunction_with(isa: Isa, ctx: &Ctx, predicate: &Expr) -> Option<Result<Matched>> {
    if ctx.is_grouped() || ctx.num_rows() as u64 != ctx.table().num_rows() {
        return None;
    }
    let mut atoms = Vec::new();
    let top = match shape_of(predicate, &mut atoms)? {
        Shape::And(all) => all,
        one => vec![one],
    };
    // A comparison of `index` with another column, or arithmetic on it, reads it as a column:
    // left to the evaluator (before a column of positions is made only to be declined).
    let is_index = |name: &str| ctx.resolve(name) == INDEX;
    let others_index = |c: &Condition| c.other().into_iter().chain(c.arith_columns()).any(is_index);
    if atoms.iter().any(|(name, c)| others_index(c) || (is_index(name) && c.other().is_some())) {
        return None;
    }
    // Conditions on `index` (the row's position) are a range of rows, not a column to read:
    // `index >= 50000000 AND index < 50000010` touches 10 rows of 100 M, whatever else is asked.
    // Only those of the top conjunction are; one under OR or NOT is left to the evaluator.
    let mut range = vec![false; atoms.len()];
    let top: Vec<Shape> = top
        .into_iter()
        .filter(|s| match s {
            Shape::Atom(i) if is_index(&atoms[*i].0) => {
                range[*i] = true;
                false
            }
            _ => true,
        })
        .collect();
    let mut map = vec![None; atoms.len()];
    let (mut conditions, mut comparisons) = (Vec::new(), Vec::new());
    for (i, atom) in atoms.into_iter().enumerate() {
        match range[i] {
            true => conditions.push(atom),
            false if is_index(&atom.0) => return None,
            false => {
                map[i] = Some(comparisons.len());
                comparisons.push(atom);
            }
        }
    }
    let shape = Shape::And(top).renumbered(&map)?;
    let within = IndexRange::of(&conditions, ctx.num_rows())?;
    if comparisons.is_empty() {
        return Some(Ok(Matched::Range(within)));
    }
    if let Some(parts) = chunked(isa, ctx, &comparisons, &shape, &within) {
        return Some(Ok(Matched::Parts(parts)));
    }
    // The columns first (materialised, cached), then the leaves borrowing them.
    let read = |name: &str| -> Option<ArrayRef> {
        let array = ctx.table().column(&ctx.resolve(name)).ok()?;
        (array.null_count() == 0 && array.len() == ctx.num_rows()).then_some(array)
    };
    type Read = (ArrayRef, Option<ArrayRef>, Vec<ArrayRef>, Condition);
    let mut columns: Vec<Read> = Vec::with_capacity(comparisons.len());
    for (name, condition) in comparisons {
        let other = match condition.other() {
            Some(o) => Some(read(o)?),
            None => None,
        };
        let arith = condition.arith_columns().into_iter().map(read).collect::<Option<Vec<_>>>()?;
        columns.push((read(&name)?, other, arith, condition));
    }
    let leaves = columns
        .iter()
        .map(|(a, b, arith, c)| leaf(a.as_ref(), b.as_deref(), arith, c))
        .collect::<Option<Vec<_>>>()?;
    let arith = |l: &Leaf<'_>| matches!(l, Leaf::Arith(_));
    if leaves.iter().any(arith) && !within.is_all() {
        // Arithmetic over every row, as the evaluator's (whose overflow anywhere is an error).
        return None;
    }
    let mask = evaluate_with(isa, &leaves, &shape, ctx.num_rows(), within.rows());
    let overflowed = |l: &Leaf<'_>| match l {
        Leaf::Arith(x) => x.overflow.load(std::sync::atomic::Ordering::Relaxed),
        _ => false,
    };
    if leaves.iter().any(overflowed) {
        // The evaluator reports the overflow.
        return None;
    }
    Some(Ok(Matched::Mask(within.mask(Some(&mask)))))
}

/// The position column: always the table's first, never a field's (fields may not be named so).
const INDEX: &str = "index";

/// The rows a conjunction's conditions on `index` allow: `lo..hi`, only those listed in `only`
/// (an `IN` list: sorted, unique) when given, less those in `not` (`<>`).
#[derive(Debug, Clone, PartialEq)]
struct IndexRange {
    num_rows: usize,
    lo: usize,
    hi: usize,
    only: Option<Vec<usize>>,
    not: Vec<usize>,
}

impl IndexRange {
    /// The rows of a table of `num_rows` rows that `conditions` (all on `index`) allow, compared
    /// as the evaluator compares a `u64` column with a number: as integers, or as `f64`s for a
    /// float literal (exact: positions fit 2^53). `None` for a NaN (left to the evaluator).
    fn of(conditions: &[(String, Condition)], num_rows: usize) -> Option<IndexRange> {
        let mut r = IndexRange { num_rows, lo: 0, hi: num_rows, only: None, not: Vec::new() };
        let n = num_rows as f64;
        // The first row at or past `x`, and the first row past `x`, as positions in 0..=num_rows.
        let at_or_past = |x: f64| x.ceil().clamp(0.0, n) as usize;
        let past = |x: f64| (x.floor() + 1.0).clamp(0.0, n) as usize;
        for (_, condition) in conditions {
            match condition {
                Condition::In(items) => {
                    let mut rows: Vec<usize> = items
                        .iter()
                        .filter_map(|&i| usize::try_from(i).ok())
                        .filter(|&i| i < num_rows)
                        .collect();
                    rows.sort_unstable();
                    rows.dedup();
                    r.only = Some(match r.only.take() {
                        Some(before) => {
                            before.into_iter().filter(|i| rows.binary_search(i).is_ok()).collect()
                        }
                        None => rows,
                    });
                }
                // (Comparisons between columns never reach here: `conjunction_mask_with`.)
                Condition::Col(..) | Condition::Arith(..) | Condition::IsNull(_) | Condition::Prefix(_) => {
                    return None
                }
                Condition::Cmp(cmp, number) => {
                    let x = match *number {
                        Number::Int(i) => i as f64,
                        Number::Float(x) if x.is_nan() => return None,
                        Number::Float(x) => x,
                    };
                    // An i64 past 2^53 is no exact f64: compared as integers.
                    let exact = |i: i64| i.clamp(0, num_rows as i64) as usize;
                    let (first, after) = match *number {
                        Number::Int(i) => (exact(i), exact(i.saturating_add(1))),
                        Number::Float(_) => (at_or_past(x), past(x)),
                    };
                    let whole = matches!(number, Number::Int(_)) || x.fract() == 0.0;
                    match cmp {
                        Cmp::Lt => r.hi = r.hi.min(first),
                        Cmp::LtEq => r.hi = r.hi.min(after),
                        Cmp::Gt => r.lo = r.lo.max(after),
                        Cmp::GtEq => r.lo = r.lo.max(first),
                        Cmp::Eq if whole => {
                            r.lo = r.lo.max(first);
                            r.hi = r.hi.min(after);
                        }
                        Cmp::Eq => r.hi = 0,
                        Cmp::NotEq if whole && first < after => r.not.push(first),
                        Cmp::NotEq => {}
                    }
                }
            }
        }
        r.hi = r.hi.max(r.lo);
        Some(r)
    }

    /// Whether it allows every row (no condition on `index`, or none that excludes a row).
    fn is_all(&self) -> bool {
        self.lo == 0 && self.hi == self.num_rows && self.only.is_none() && self.not.is_empty()
    }

    /// The rows it allows, ascending.
    fn ids(&self) -> Vec<u64> {
        let allowed = |i: &usize| (self.lo..self.hi).contains(i) && !self.not.contains(i);
        match &self.only {
            Some(only) => only.iter().filter(|i| allowed(i)).map(|&i| i as u64).collect(),
            None if self.not.is_empty() => (self.lo as u64..self.hi as u64).collect(),
            None => (self.lo..self.hi).filter(allowed).map(|i| i as u64).collect(),
        }
    }

    /// The rows to evaluate other conditions over.
    fn rows(&self) -> Range<usize> {
        match &self.only {
            Some(only) => match (only.first(), only.last()) {
                (Some(&a), Some(&b)) => a.max(self.lo)..(b + 1).min(self.hi).max(a.max(self.lo)),
                _ => 0..0,
            },
            None => self.lo..self.hi,
        }
    }

    /// The bitmap of the rows allowed, ANDed with `mask` (of every row) when given.
    fn mask(&self, mask: Option<&BooleanBuffer>) -> BooleanBuffer {
        if let (Some(mask), true) = (mask, self.is_all()) {
            return mask.clone();
        }
        let len = self.num_rows;
        let mut words = vec![0u64; len.div_ceil(64)];
        let set = |words: &mut [u64], i: usize| words[i / 64] |= 1 << (i % 64);
        match &self.only {
            Some(only) => {
                for &i in only.iter().filter(|&&i| (self.lo..self.hi).contains(&i)) {
                    set(&mut words, i);
                }
            }
            None => {
                let (lo, hi) = (self.lo, self.hi);
                if lo < hi {
                    let (first, last) = (lo / 64, (hi - 1) / 64);
                    words[first..=last].fill(u64::MAX);
                    words[first] &= u64::MAX << (lo % 64);
                    words[last] &= u64::MAX >> (63 - (hi - 1) % 64);
                }
            }
        }
        for &i in &self.not {
            words[i / 64] &= !(1 << (i % 64));
        }
        if let Some(mask) = mask {
            let rows = self.rows();
            let bits = mask.inner().as_slice();
            let first = rows.start / 64;
            for (w, word) in words[first..rows.end.div_ceil(64)].iter_mut().enumerate() {
                *word &= word_at(bits, mask.offset() + 64 * (first + w));
            }
        }
        BooleanBuffer::new(Buffer::from_vec(words), 0, len)
    }
}

/// The 64 bits of `bytes` from bit `bit` on (zeros past its end).
fn word_at(bytes: &[u8], bit: usize) -> u64 {
    let (byte, shift) = (bit / 8, bit % 8);
    let mut raw = [0u8; 16];
    let tail = bytes.get(byte..).unwrap_or_default();
    let n = tail.len().min(9);
    raw[..n].copy_from_slice(&tail[..n]);
    (u128::from_le_bytes(raw) >> shift) as u64
}

/// What a fused conjunction matched: a bit per row of the table, or each data file's matches.
enum Matched {
    Mask(BooleanBuffer),
    Parts(PartsMatched),
    /// Conditions on `index` alone: the rows they allow.
    Range(IndexRange),
}

impl Matched {
    /// A bit per row of the table, set where the conjunction holds (the tests' view of it).
    #[cfg(test)]
    fn into_mask(self) -> BooleanBuffer {
        match self {
            Matched::Mask(mask) => mask,
            Matched::Parts(parts) => parts.into_mask(),
            Matched::Range(within) => within.mask(None),
        }
    }

    /// The positions of the rows where the conjunction holds, ascending.
    fn into_ids(self, isa: Isa) -> Vec<u64> {
        match self {
            Matched::Mask(mask) => set_ids_with(isa, &mask),
            Matched::Parts(parts) if parts.within.is_all() => parts.into_ids(isa),
            Matched::Parts(parts) => set_ids_with(isa, &parts.into_mask()),
            // (`index BETWEEN 5000000 AND 5000009` of 100 M rows: 10 ids, no 12.5 MB bitmap.)
            Matched::Range(within) => within.ids(),
        }
    }
}

/// Each data file's matching rows in table order ([`chunked`]), and the rows the conditions on
/// `index` allow.
struct PartsMatched {
    parts: Vec<PartMatched>,
    within: IndexRange,
}

/// One data file's matching rows among the rows it gives the table.
struct PartMatched {
    /// Rows it gives the table.
    rows: usize,
    /// How many of them match.
    count: usize,
    matched: PartMatches,
}

/// A data file's matches as a bit per row, or, where fewer than one row in 32 matches, as the
/// positions of those that do (smaller than the bits, and nothing to scan for them later).
enum PartMatches {
    Bits(BooleanBuffer),
    Rows(Vec<u32>),
}

impl PartsMatched {
    /// The parts' matches as one bitmap of the table's rows, the conditions on `index` applied.
    fn into_mask(self) -> BooleanBuffer {
        let total = self.parts.iter().map(|p| p.rows).sum();
        let mut all = arrow_buffer::BooleanBufferBuilder::new(total);
        for part in &self.parts {
            match &part.matched {
                PartMatches::Bits(bits) => all.append_buffer(bits),
                PartMatches::Rows(rows) => {
                    let at = all.len();
                    all.append_n(part.rows, false);
                    for &r in rows {
                        all.set_bit(at + r as usize, true);
                    }
                }
            }
        }
        self.within.mask(Some(&all.finish()))
    }

    /// The positions of the matching rows (every row allowed by `index`: `within.is_all()`),
    /// written once into one vector, each part's into its own place, parts on all cores.
    fn into_ids(self, isa: Isa) -> Vec<u64> {
        debug_assert!(self.within.is_all());
        let total: usize = self.parts.iter().map(|p| p.count).sum();
        // As `set_ids`: written once, never zeroed first.
        let mut ids: Vec<u64> = Vec::with_capacity(total);
        beton_storage::advise_huge_pages(ids.spare_capacity_mut());
        let mut slots = Vec::with_capacity(self.parts.len());
        let (mut rest, mut start) = (&mut ids.spare_capacity_mut()[..total], 0u64);
        for part in &self.parts {
            let (slot, tail) = rest.split_at_mut(part.count);
            slots.push((slot, start));
            rest = tail;
            start += part.rows as u64;
        }
        let short: usize = slots
            .into_par_iter()
            .zip(self.parts.par_iter())
            .map(|((slot, start), part)| {
                let written = match &part.matched {
                    PartMatches::Rows(rows) => {
                        for (s, &r) in slot.iter_mut().zip(rows) {
                            s.write(start + u64::from(r));
                        }
                        rows.len()
                    }
                    PartMatches::Bits(bits) => {
                        let bytes = &bits.inner().as_slice()[bits.offset() / 8..];
                        let word = |w: usize| word_of(bytes, bits.len(), w);
                        isa.write_ids(&word, 0..bits.len().div_ceil(64), start, slot)
                    }
                };
                usize::from(written != slot.len())
            })
            .sum();
        assert_eq!(short, 0, "a part's ids are its count");
        // SAFETY: the slots tile the first `total` slots of `ids`, and every slot was written
        // (each part wrote exactly its count, checked above: a `Rows` part writes one per row
        // and `write_ids` reports how many it wrote, never past its slot).
        #[allow(unsafe_code)]
        unsafe {
            ids.set_len(total)
        };
        ids
    }
}

/// Set bits in `words` at positions `range`.
fn count_ones(words: &[u64], range: Range<usize>) -> usize {
    let mut n = 0;
    for_each_word(words, range, |_, value| n += value.count_ones() as usize);
    n
}

/// `f(first position, bits)` for each word of `words` that holds positions of `range`, the bits
/// outside `range` cleared.
fn for_each_word(words: &[u64], range: Range<usize>, mut f: impl FnMut(usize, u64)) {
    if range.is_empty() {
        return;
    }
    let (first, last) = (range.start / 64, (range.end - 1) / 64);
    for (w, &word) in words[first..=last].iter().enumerate() {
        let w = first + w;
        let mut value = word;
        if w == first {
            value &= u64::MAX << (range.start % 64);
        }
        if w == last {
            value &= u64::MAX >> (63 - (range.end - 1) % 64);
        }
        f(64 * w, value);
    }
}

/// Word `w` of the bits in `bytes` (little-endian), of which there are `len`: the bits past
/// `len` cleared.
fn word_of(bytes: &[u8], len: usize, w: usize) -> u64 {
    let start = w * 8;
    if w < len / 64 {
        if let Some(Ok(b)) = bytes.get(start..start + 8).map(<[u8; 8]>::try_from) {
            return u64::from_le_bytes(b);
        }
    }
    // The last, partial word (or a buffer that ends early): byte by byte, bits past `len`
    // cleared.
    let mut value = 0u64;
    for (k, b) in bytes.iter().skip(start).take(8).enumerate() {
        value |= u64::from(*b) << (8 * k);
    }
    let live = len.saturating_sub(w * 64).min(64);
    if live == 64 {
        value
    } else {
        value & ((1u64 << live) - 1)
    }
}

/// The conjunction over a table whose columns are read in place from each data file's columnar
/// copy ([`Table::column_parts`](crate::Table::column_parts)): each data file's rows evaluated on
/// their own (data files in parallel) over its file rows into a buffer each thread reuses, the
/// rows patches set compared one by one with their values, then the matches among the kept rows
/// (the deleted rows dropped) kept as bits, or as positions where they are few. No column is
/// concatenated, filtered or patched whole, and no bitmap of the whole table is made unless
/// asked for ([`PartsMatched::into_mask`]): a new process's first query over 2,000 data files
/// touched 25 MB of fresh memory for its bits (made twice, per part then concatenated), whose
/// first touch is slow on some VMs. `None` when a column is not read that way.
fn chunked(
    isa: Isa,
    ctx: &Ctx,
    comparisons: &[(String, Condition)],
    shape: &Shape,
    within: &IndexRange,
) -> Option<PartsMatched> {
    // (Arithmetic reads its columns whole: left to the path below.)
    if comparisons.iter().any(|(_, c)| matches!(c, Condition::Arith(..))) {
        return None;
    }
    // Each comparison's column, and the other column it reads (a comparison between columns).
    let mut per_column = Vec::with_capacity(comparisons.len());
    let mut per_other = Vec::with_capacity(comparisons.len());
    for (name, condition) in comparisons {
        per_column.push(ctx.table().column_parts(&ctx.resolve(name))?);
        per_other.push(match condition.other() {
            Some(o) => Some(ctx.table().column_parts(&ctx.resolve(o))?),
            None => None,
        });
    }
    if per_column.iter().chain(per_other.iter().flatten()).any(|c| c.len() != per_column[0].len()) {
        return None;
    }
    let parts = per_column[0].len();
    // Each data file's first row in the table: those holding no row `within` allows are skipped.
    let starts: Vec<usize> = per_column[0]
        .iter()
        .scan(0, |at, p| {
            let start = *at;
            *at += p.num_rows();
            Some(start)
        })
        .collect();
    let rows = within.rows();
    let matched: Vec<PartMatched> = (0..parts)
        .into_par_iter()
        .map_init(Vec::new, |words: &mut Vec<u64>, k| {
            let first = &per_column[0][k];
            let (len, table_rows) = (first.values.len(), first.num_rows());
            if !(starts[k] < rows.end && rows.start < starts[k] + table_rows) {
                return Some(PartMatched {
                    rows: table_rows,
                    count: 0,
                    matched: PartMatches::Rows(Vec::new()),
                });
            }
            let whole = |a: &'_ dyn Array| a.len() == len && a.null_count() == 0;
            let leaves = per_column
                .iter()
                .zip(&per_other)
                .zip(comparisons)
                .map(|((columns, other), (_, c))| {
                    let a = columns[k].values.as_ref();
                    let b = other.as_ref().map(|o| o[k].values.as_ref());
                    (whole(a) && b.is_none_or(whole)).then(|| leaf(a, b, &[], c)).flatten()
                })
                .collect::<Option<Vec<_>>>()?;
            // Morsels in parallel too: one data file of 100 M rows keeps every core busy.
            words.clear();
            words.resize(len.div_ceil(64), u64::MAX);
            words.par_chunks_mut(MORSEL / 64).enumerate().for_each(|(m, out)| {
                let start = m * MORSEL;
                shape.and_into(isa, &leaves, start..(start + MORSEL).min(len), out);
            });
            // The rows patches set: the conjunction of each, over its patched values.
            let mut patched: Vec<u64> = per_column
                .iter()
                .chain(per_other.iter().flatten())
                .flat_map(|columns| columns[k].patched.iter().map(|(r, _)| *r))
                .collect();
            patched.sort_unstable();
            patched.dedup();
            for r in patched {
                // Row `r`'s cell of a column: its patched value, or the data file's.
                let cell = |columns: &Vec<PartColumn>| -> ArrayRef {
                    let p = &columns[k];
                    match p.patched.binary_search_by_key(&r, |(row, _)| *row) {
                        Ok(j) => Arc::clone(&p.patched[j].1),
                        Err(_) => p.values.slice(r as usize, 1),
                    }
                };
                let cells: Vec<(ArrayRef, Option<ArrayRef>)> =
                    per_column.iter().zip(&per_other).map(|(c, o)| (cell(c), o.as_ref().map(cell))).collect();
                let one = cells
                    .iter()
                    .zip(comparisons)
                    .map(|((a, b), (_, c))| {
                        let valid = a.null_count() == 0 && b.as_ref().is_none_or(|b| b.null_count() == 0);
                        valid.then(|| leaf(a.as_ref(), b.as_deref(), &[], c)).flatten()
                    })
                    .collect::<Option<Vec<_>>>()?;
                let mut bit = [u64::MAX];
                shape.and_into(isa, &one, 0..1, &mut bit);
                let (w, b) = (r as usize / 64, r % 64);
                words[w] = (words[w] & !(1 << b)) | ((bit[0] & 1) << b);
            }
            // The kept rows: their runs between deleted rows (all of the file's when none is).
            let runs: Vec<Range<usize>> = match &first.kept {
                None => std::iter::once(0..len).collect(),
                Some(kept) => kept.runs().map(|r| r.start as usize..r.end as usize).collect(),
            };
            let count: usize = runs.iter().map(|r| count_ones(words, r.clone())).sum();
            let sparse = count < table_rows / 32 && u32::try_from(table_rows).is_ok();
            let matched = if sparse {
                let mut ids = Vec::with_capacity(count);
                let mut at = 0;
                for run in runs {
                    // (Bits below `run.start` are cleared: `first + tz >= run.start`.)
                    for_each_word(words, run.clone(), |first, mut value| {
                        while value != 0 {
                            ids.push((at + first + value.trailing_zeros() as usize - run.start) as u32);
                            value &= value - 1;
                        }
                    });
                    at += run.len();
                }
                PartMatches::Rows(ids)
            } else {
                let bits = BooleanBuffer::new(Buffer::from_slice_ref(&words[..]), 0, len);
                PartMatches::Bits(match &first.kept {
                    None => bits,
                    Some(_) => {
                        let mut out = arrow_buffer::BooleanBufferBuilder::new(table_rows);
                        for run in runs {
                            out.append_packed_range(run, bits.values());
                        }
                        out.finish()
                    }
                })
            };
            Some(PartMatched { rows: table_rows, count, matched })
        })
        .collect::<Option<_>>()?;
    let total: usize = matched.iter().map(|p| p.rows).sum();
    if total != ctx.num_rows() {
        return None;
    }
    Some(PartsMatched { parts: matched, within: within.clone() })
}

/// The shape of `e` over the comparisons it appends to `out`: AND, OR and NOT of `column OP
/// number`, `column OP column`, `column [NOT] BETWEEN number AND number` and `column [NOT] IN
/// (integers)`; `None` for any other form.
fn shape_of(e: &Expr, out: &mut Vec<(String, Condition)>) -> Option<Shape> {
    let mut atom = |c: String, condition: Condition| {
        out.push((c, condition));
        Shape::Atom(out.len() - 1)
    };
    Some(match unnested(e) {
        Expr::BinaryOp { op: op @ (BinaryOperator::And | BinaryOperator::Or), .. } => {
            let mut all = Vec::new();
            for o in operands(e, op) {
                // `a AND (b AND c)`, and BETWEEN's pair, are one conjunction (so that every
                // condition on `index` of the top one is a range of rows); the same for OR.
                match (shape_of(o, out)?, op) {
                    (Shape::And(inner), BinaryOperator::And) | (Shape::Or(inner), BinaryOperator::Or) => {
                        all.extend(inner)
                    }
                    (one, _) => all.push(one),
                }
            }
            match op {
                BinaryOperator::And => Shape::And(all),
                _ => Shape::Or(all),
            }
        }
        Expr::UnaryOp { op: UnaryOperator::Not, expr } => Shape::Not(Box::new(shape_of(expr, out)?)),
        // `c LIKE 'abc%'` (one `%`, last; no `_` nor escape): the text starts with `abc`.
        Expr::Like { negated, any: false, expr, pattern, escape_char: None } => {
            let like = atom(column_name(unnested(expr))?, Condition::Prefix(like_prefix(unnested(pattern))?));
            match negated {
                true => Shape::Not(Box::new(like)),
                false => like,
            }
        }
        Expr::IsNull(expr) => atom(column_name(unnested(expr))?, Condition::IsNull(true)),
        Expr::IsNotNull(expr) => atom(column_name(unnested(expr))?, Condition::IsNull(false)),
        // `c BETWEEN low AND high` is `c >= low AND c <= high` (as the evaluator takes it).
        Expr::Between { expr, negated, low, high } => {
            let (c, low, high) =
                (column_name(unnested(expr))?, number(unnested(low))?, number(unnested(high))?);
            let both = Shape::And(vec![
                atom(c.clone(), Condition::Cmp(Cmp::GtEq, low)),
                atom(c, Condition::Cmp(Cmp::LtEq, high)),
            ]);
            match negated {
                true => Shape::Not(Box::new(both)),
                false => both,
            }
        }
        Expr::InList { expr, list, negated } if !list.is_empty() => {
            let c = column_name(unnested(expr))?;
            let ints = list
                .iter()
                .map(|item| match number(unnested(item)) {
                    Some(Number::Int(i)) => Some(i),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            let is_in = atom(c, Condition::In(ints));
            match negated {
                true => Shape::Not(Box::new(is_in)),
                false => is_in,
            }
        }
        Expr::BinaryOp { left, op, right } => {
            let cmp = Cmp::of(op)?;
            let (left, right) = (unnested(left), unnested(right));
            match (column_name(left), number(right), number(left), column_name(right)) {
                (Some(c), Some(n), _, _) => atom(c, Condition::Cmp(cmp, n)),
                (_, _, Some(n), Some(c)) => atom(c, Condition::Cmp(cmp.flipped(), n)),
                (Some(a), _, _, Some(b)) => atom(a, Condition::Col(cmp, b)),
                _ => {
                    // Arithmetic on a side: `label + size < 500`, `score * 2 > weight`.
                    let condition = Condition::Arith(Term::of(left)?, cmp, Term::of(right)?);
                    let first = condition.arith_columns().first()?.to_string();
                    atom(first, condition)
                }
            }
        }
        _ => return None,
    })
}

/// The operands of a chain of `op` (`a AND b AND c`, which leans left: `(a AND b) AND c`),
/// in order, walked in a loop rather than by recursion.
fn operands<'e>(e: &'e Expr, op: &BinaryOperator) -> Vec<&'e Expr> {
    let mut out = Vec::new();
    let mut e = unnested(e);
    while let Expr::BinaryOp { left, op: o, right } = e {
        if o != op {
            break;
        }
        out.push(right.as_ref());
        e = unnested(left);
    }
    out.push(e);
    out.reverse();
    out
}

fn unnested(mut e: &Expr) -> &Expr {
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

/// The prefix of a `LIKE` pattern that is a string literal of text and one `%` at its end
/// (`'abc%'`: `abc`); `None` for any other pattern (`_`, a `%` elsewhere, a backslash, which
/// arrow's `like` reads as an escape).
fn like_prefix(e: &Expr) -> Option<Vec<u8>> {
    let Expr::Value(v) = e else { return None };
    let sqlparser::ast::Value::SingleQuotedString(text) = &v.value else { return None };
    let prefix = text.strip_suffix('%')?;
    (!prefix.contains(['%', '_', '\\'])).then(|| prefix.as_bytes().to_vec())
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

/// The comparison of `array` with a number or a list, or with `other` (a comparison between
/// columns), as the evaluator makes it; `None` where values could make the two disagree.
fn leaf<'a>(
    array: &'a dyn Array,
    other: Option<&'a dyn Array>,
    arith: &'a [ArrayRef],
    condition: &Condition,
) -> Option<Leaf<'a>> {
    let (cmp, number) = match condition {
        Condition::Cmp(cmp, number) => (*cmp, *number),
        Condition::Col(cmp, _) => return pair(array, other?, *cmp),
        Condition::Arith(l, cmp, r) => return arith_leaf(l, *cmp, r, arith),
        // in_set: integer items of an integer column are a set of i128s, so the mathematical
        // equality.
        // Read only when the column has no NULL (the callers check): its value in every row.
        Condition::IsNull(is_null) if array.null_count() == 0 => return Some(Leaf::Const(!is_null)),
        Condition::IsNull(_) => return None,
        // (Read only when the column has no NULL: the callers check.)
        Condition::Prefix(prefix) => {
            let texts = match array.data_type() {
                DataType::Utf8 => {
                    let a = array.as_string::<i32>();
                    Texts::Small(a.value_offsets(), a.value_data())
                }
                DataType::LargeUtf8 => {
                    let a = array.as_string::<i64>();
                    Texts::Large(a.value_offsets(), a.value_data())
                }
                _ => return None,
            };
            return Some(Leaf::Prefix(texts, prefix.clone()));
        }
        Condition::In(list) if list.len() > MAX_IN_LIST => {
            let values = match array.data_type() {
                DataType::Int64 => IntValues::Int(array.as_primitive::<Int64Type>().values()),
                DataType::UInt16 => IntValues::U16(array.as_primitive::<UInt16Type>().values()),
                DataType::UInt64 => IntValues::U64(array.as_primitive::<UInt64Type>().values()),
                _ => return None,
            };
            return Some(Leaf::InBits(values, Bits::of(list)?));
        }
        Condition::In(list) => {
            return Some(match array.data_type() {
                DataType::Int64 => Leaf::InInt(array.as_primitive::<Int64Type>().values(), list.clone()),
                DataType::UInt16 => Leaf::InU16(array.as_primitive::<UInt16Type>().values(), list.clone()),
                DataType::UInt64 => Leaf::InU64(
                    array.as_primitive::<UInt64Type>().values(),
                    list.iter().filter_map(|i| u64::try_from(*i).ok()).collect(),
                ),
                _ => return None,
            })
        }
    };
    Some(match (array.data_type(), number) {
        (DataType::Int64, Number::Int(n)) => Leaf::Int(array.as_primitive::<Int64Type>().values(), cmp, n),
        // narrow_literal casts the number to u16 when it fits, else coerce widens both to i64:
        // either way the mathematical comparison.
        (DataType::UInt16, Number::Int(n)) => Leaf::U16(array.as_primitive::<UInt16Type>().values(), cmp, n),
        (DataType::UInt64, Number::Int(n)) => {
            Leaf::U64(array.as_primitive::<UInt64Type>().values(), cmp, u64::try_from(n).ok()?)
        }
        (DataType::Float64, n) => Leaf::Float(
            Values::Float(array.as_primitive::<Float64Type>().values()),
            cmp,
            sql_order(as_float(n)),
        ),
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

/// The arithmetic comparison `l OP r` over `arrays`, the columns its operands name in order;
/// `None` for a column the evaluator would cast with a possible error (u64) or not a number.
fn arith_leaf<'a>(l: &Term, cmp: Cmp, r: &Term, arrays: &'a [ArrayRef]) -> Option<Leaf<'a>> {
    let mut next = arrays.iter();
    let mut sides = Vec::with_capacity(2);
    for term in [l, r] {
        let mut inputs = Vec::with_capacity(2);
        for operand in term.operands() {
            inputs.push(match operand {
                Operand::Num(Number::Int(i)) => Input::IntNum(*i),
                Operand::Num(Number::Float(x)) => Input::FloatNum(*x),
                Operand::Col(_) => {
                    let a = next.next()?;
                    match a.data_type() {
                        DataType::Int64 => Input::Int(a.as_primitive::<Int64Type>().values()),
                        DataType::UInt16 => Input::U16(a.as_primitive::<UInt16Type>().values()),
                        DataType::Float64 => Input::Float(a.as_primitive::<Float64Type>().values()),
                        _ => return None,
                    }
                }
            });
        }
        let float = inputs.iter().any(|i| i.is_float());
        let op = match term {
            Term::One(_) => None,
            Term::Op(_, op, _) => Some((*op, inputs[1])),
        };
        sides.push(Side { a: inputs[0], op, float });
    }
    let right = sides.pop()?;
    let left = sides.pop()?;
    Some(Leaf::Arith(Box::new(ArithLeaf {
        left,
        cmp,
        right,
        overflow: std::sync::atomic::AtomicBool::new(false),
    })))
}

/// `a OP b` row by row, as the evaluator's `coerce` compares two number columns; `None` for
/// types it does not take here.
fn pair<'a>(a: &'a dyn Array, b: &'a dyn Array, cmp: Cmp) -> Option<Leaf<'a>> {
    let i64s = |x: &'a dyn Array| x.as_primitive::<Int64Type>().values().as_ref();
    let u16s = |x: &'a dyn Array| x.as_primitive::<UInt16Type>().values().as_ref();
    let u64s = |x: &'a dyn Array| x.as_primitive::<UInt64Type>().values().as_ref();
    let f64s = |x: &'a dyn Array| x.as_primitive::<Float64Type>().values().as_ref();
    let values = |x: &'a dyn Array| -> Option<Values<'a>> {
        Some(match x.data_type() {
            DataType::Int64 => Values::Int(i64s(x)),
            DataType::UInt16 => Values::U16(u16s(x)),
            DataType::UInt64 => Values::U64(u64s(x)),
            DataType::Float64 => Values::Float(f64s(x)),
            _ => return None,
        })
    };
    use DataType::{Float64, Int64, UInt16, UInt64};
    let (pair, cmp) = match (a.data_type(), b.data_type()) {
        (Int64, Int64) => (Pair::Int(i64s(a), i64s(b)), cmp),
        (Int64, UInt16) => (Pair::IntU16(i64s(a), u16s(b)), cmp),
        (UInt16, Int64) => (Pair::IntU16(i64s(b), u16s(a)), cmp.flipped()),
        (UInt16, UInt16) => (Pair::U16(u16s(a), u16s(b)), cmp),
        (UInt64, UInt64) => (Pair::U64(u64s(a), u64s(b)), cmp),
        (Float64, _) => (Pair::Float(f64s(a), values(b)?), cmp),
        (_, Float64) => (Pair::Float(f64s(b), values(a)?), cmp.flipped()),
        _ => return None,
    };
    Some(Leaf::Cols(pair, cmp))
}

fn as_float(n: Number) -> f64 {
    match n {
        Number::Int(i) => i as f64,
        Number::Float(x) => x,
    }
}

/// Every leaf ANDed into one bitmap of `len` rows, morsel by morsel on all cores; the morsels
/// that hold no row of `within` are left clear, unread.
fn evaluate_with(
    isa: Isa,
    leaves: &[Leaf<'_>],
    shape: &Shape,
    len: usize,
    within: Range<usize>,
) -> BooleanBuffer {
    let mut words = vec![0u64; len.div_ceil(64)];
    words.par_chunks_mut(MORSEL / 64).enumerate().for_each(|(m, out)| {
        let rows = m * MORSEL..(m * MORSEL + MORSEL).min(len);
        if rows.start < within.end && within.start < rows.end {
            out.fill(u64::MAX);
            shape.and_into(isa, leaves, rows, out);
        }
    });
    // Bits past the last row stay set in the last word: BooleanBuffer reads only `len` bits.
    BooleanBuffer::new(Buffer::from_vec(words), 0, len)
}

/// The instruction set the comparison loops are compiled for, chosen at run time.
///
/// The crate is built for the baseline x86-64 (SSE2: no 64-bit integer compares, no compare
/// into a mask), so the loops are compiled three times: for AVX-512 (each compare writes 8 bits
/// of the mask), for AVX2, and for the baseline; the CPU picks one once per process.
/// `BETON_SIMD=off` forces the baseline (A/B measurements, `query/examples/where_ab.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    Baseline,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The best set this CPU runs (once per process), unless `BETON_SIMD=off`.
    pub(crate) fn detected() -> Isa {
        static DETECTED: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            if std::env::var_os("BETON_SIMD").is_some_and(|v| v == "off") {
                return Isa::Baseline;
            }
            Isa::available().last().copied().unwrap_or(Isa::Baseline)
        })
    }

    /// Whether the loops compare several values per instruction: with AVX2 or AVX-512, or on
    /// targets whose baseline has vector compares (aarch64's NEON).
    pub(crate) fn vectorised(self) -> bool {
        self != Isa::Baseline || !cfg!(target_arch = "x86_64")
    }

    /// Every set this CPU runs, from the baseline up.
    pub(crate) fn available() -> Vec<Isa> {
        #[allow(unused_mut)]
        let mut sets = vec![Isa::Baseline];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("bmi2") {
                sets.push(Isa::Avx2);
            }
            let avx512 = std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx512vl");
            if avx512 && sets.contains(&Isa::Avx2) {
                sets.push(Isa::Avx512);
            }
        }
        sets
    }

    /// `out &=` every leaf over `rows` (one morsel; `out` holds its words).
    #[allow(unsafe_code)]
    fn and_morsel(self, leaves: &[Leaf<'_>], rows: Range<usize>, out: &mut [u64]) {
        match self {
            Isa::Baseline => and_leaves(leaves, rows, out),
            // SAFETY: `Avx2` and `Avx512` come only from `available`, which checked at run time
            // that this CPU has every feature the function is compiled with (a CPU without them
            // would fault on its first instruction: the tests run every available set).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { and_leaves_avx2(leaves, rows, out) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { and_leaves_avx512(leaves, rows, out) },
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2")]
fn and_leaves_avx2(leaves: &[Leaf<'_>], rows: Range<usize>, out: &mut [u64]) {
    and_leaves(leaves, rows, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi1,bmi2")]
fn and_leaves_avx512(leaves: &[Leaf<'_>], rows: Range<usize>, out: &mut [u64]) {
    and_leaves(leaves, rows, out)
}

/// The loops of one morsel, inlined into each compiled instruction set's function.
#[inline(always)]
fn and_leaves(leaves: &[Leaf<'_>], rows: Range<usize>, out: &mut [u64]) {
    let Range { start, end } = rows;
    for leaf in leaves {
        match leaf {
            Leaf::Int(v, cmp, n) => and_cmp(out, &v[start..end], |x| *x, *cmp, *n),
            Leaf::U16(v, cmp, n) => and_cmp(out, &v[start..end], |x| i64::from(*x), *cmp, *n),
            Leaf::U64(v, cmp, n) => and_cmp(out, &v[start..end], |x| *x, *cmp, *n),
            Leaf::Float(values, cmp, n) => {
                let n = order_key(*n);
                match values {
                    // NaN made one NaN and -0.0 made 0.0 in the loop (the evaluator's order).
                    Values::Float(v) => and_cmp(out, &v[start..end], |x| order_key(sql_order(*x)), *cmp, n),
                    Values::Int(v) => and_cmp(out, &v[start..end], |x| order_key(*x as f64), *cmp, n),
                    Values::U16(v) => and_cmp(out, &v[start..end], |x| order_key(f64::from(*x)), *cmp, n),
                    Values::U64(v) => and_cmp(out, &v[start..end], |x| order_key(*x as f64), *cmp, n),
                }
            }
            Leaf::InInt(v, list) => and_in(out, &v[start..end], |x| *x, list),
            Leaf::InU16(v, list) => and_in(out, &v[start..end], |x| i64::from(*x), list),
            Leaf::InU64(v, list) => and_in(out, &v[start..end], |x| *x, list),
            Leaf::Cols(pair, cmp) => {
                let cmp = *cmp;
                match pair {
                    Pair::Int(x, y) => {
                        and_cmp_pairs(out, &x[start..end], &y[start..end], |v| *v, |v| *v, cmp)
                    }
                    Pair::IntU16(x, y) => {
                        and_cmp_pairs(out, &x[start..end], &y[start..end], |v| *v, |v| i64::from(*v), cmp)
                    }
                    Pair::U16(x, y) => {
                        and_cmp_pairs(out, &x[start..end], &y[start..end], |v| *v, |v| *v, cmp)
                    }
                    Pair::U64(x, y) => {
                        and_cmp_pairs(out, &x[start..end], &y[start..end], |v| *v, |v| *v, cmp)
                    }
                    Pair::Float(x, other) => {
                        let (x, float) = (&x[start..end], |v: &f64| order_key(sql_order(*v)));
                        match other {
                            Values::Float(y) => and_cmp_pairs(out, x, &y[start..end], float, float, cmp),
                            Values::Int(y) => {
                                and_cmp_pairs(out, x, &y[start..end], float, |v| order_key(*v as f64), cmp)
                            }
                            Values::U16(y) => and_cmp_pairs(
                                out,
                                x,
                                &y[start..end],
                                float,
                                |v| order_key(f64::from(*v)),
                                cmp,
                            ),
                            Values::U64(y) => {
                                and_cmp_pairs(out, x, &y[start..end], float, |v| order_key(*v as f64), cmp)
                            }
                        }
                    }
                }
            }
            Leaf::Arith(x) => and_arith(out, x, start..end),
            Leaf::Prefix(texts, prefix) => match *texts {
                Texts::Small(offsets, bytes) => and_prefix(out, &offsets[start..=end], bytes, prefix),
                Texts::Large(offsets, bytes) => and_prefix(out, &offsets[start..=end], bytes, prefix),
            },
            Leaf::Const(true) => {}
            Leaf::Const(false) => out.fill(0),
            Leaf::InBits(values, bits) => match values {
                IntValues::Int(v) => and_into(out, &v[start..end], |x| bits.contains(*x)),
                IntValues::U16(v) => and_into(out, &v[start..end], |x| bits.contains(i64::from(*x))),
                // The items are i64s: a value past i64::MAX is none of them.
                IntValues::U64(v) => {
                    and_into(out, &v[start..end], |x| i64::try_from(*x).is_ok_and(|x| bits.contains(x)))
                }
            },
        }
    }
}

/// `out &= the text starts with prefix`, row by row: `offsets` are the rows' value offsets into
/// `bytes`, one more than the rows. Offsets past `bytes` (never in a valid array) match nothing.
fn and_prefix<O: Copy + TryInto<usize>>(out: &mut [u64], offsets: &[O], bytes: &[u8], prefix: &[u8]) {
    let at = |o: O| o.try_into().unwrap_or(usize::MAX);
    // A prefix of up to 8 bytes is compared as one word: the 8 bytes from the text's start,
    // masked to the prefix's length (2-3x faster than a `memcmp` a row; the last texts, within
    // 8 bytes of the end, compared as slices).
    let short = prefix.len() <= 8;
    let mut word = [0u8; 8];
    word[..prefix.len().min(8)].copy_from_slice(&prefix[..prefix.len().min(8)]);
    let mask = match prefix.len() {
        0 => 0,
        n @ 1..=8 => u64::MAX >> (64 - 8 * n),
        _ => u64::MAX,
    };
    let word = u64::from_le_bytes(word);
    let starts_with = |w: &[O]| {
        let (a, b) = (at(w[0]), at(w[1]));
        if b.checked_sub(a).is_none_or(|n| n < prefix.len()) {
            return false;
        }
        match bytes.get(a..a + 8) {
            Some(head) if short => {
                let head = u64::from_le_bytes(<[u8; 8]>::try_from(head).unwrap_or_default());
                head & mask == word
            }
            _ => bytes.get(a..a + prefix.len()).is_some_and(|head| head == prefix),
        }
    };
    let rows = offsets.len().saturating_sub(1);
    for (w, word) in out.iter_mut().enumerate().take(rows.div_ceil(64)) {
        let block = &offsets[64 * w..(64 * w + 65).min(offsets.len())];
        let mut bits = 0u64;
        for (k, pair) in block.windows(2).enumerate() {
            bits |= u64::from(starts_with(pair)) << k;
        }
        *word &= bits;
    }
}

/// Rows of an arithmetic comparison's block: its sides computed into buffers of this many
/// values (two sides of f64: 16 KiB, in L1), then compared by the vectorised pair loops. Over
/// 10 M rows this took 11–16 % less time than 4,096 (64 KiB, past L1) on `query_compare`'s
/// forms `score * 4 > "image.height"` and `label + "image.width" < 500` (medians of 5
/// interleaved rounds, 2026-11-30).
const ARITH_BLOCK: usize = 1024;

/// `out &= left OP right` of an arithmetic comparison over `rows`, a block at a time.
#[inline(always)]
fn and_arith(out: &mut [u64], x: &ArithLeaf<'_>, rows: Range<usize>) {
    let mut ok = true;
    let (mut left, mut right) = (SideScratch::default(), SideScratch::default());
    // A number on a side (`label + size < 500`) is compared as one.
    let (side, number, cmp) = match (x.left.constant(), x.right.constant()) {
        (_, Some(n)) => (&x.left, Some(n), x.cmp),
        (Some(n), _) => (&x.right, Some(n), x.cmp.flipped()),
        _ => (&x.left, None, x.cmp),
    };
    let float = x.left.float || x.right.float;
    for (b, words) in out.chunks_mut(ARITH_BLOCK / 64).enumerate() {
        let start = rows.start + b * ARITH_BLOCK;
        let block = start..(start + ARITH_BLOCK).min(rows.end);
        if block.is_empty() {
            break;
        }
        match (number, float) {
            (Some(n), true) => {
                let l = side.f64s(block, &mut left, &mut ok);
                let n = n.number().unwrap_or_else(|| unreachable!("a number"));
                and_cmp(words, l, |v| order_key(sql_order(*v)), cmp, order_key(sql_order(n)));
            }
            (Some(n), false) => {
                let l = side.i64s(block, &mut left, &mut ok);
                let Input::IntNum(n) = n else { unreachable!("an integer side's number") };
                and_cmp(words, l, |v| *v, cmp, n);
            }
            // Compared in SQL order: as the order keys of the canonical floats.
            (None, true) => {
                let l = x.left.f64s(block.clone(), &mut left, &mut ok);
                let r = x.right.f64s(block, &mut right, &mut ok);
                let key = |v: &f64| order_key(sql_order(*v));
                and_cmp_pairs(words, l, r, key, key, x.cmp);
            }
            (None, false) => {
                let l = x.left.i64s(block.clone(), &mut left, &mut ok);
                let r = x.right.i64s(block, &mut right, &mut ok);
                and_cmp_pairs(words, l, r, |v| *v, |v| *v, x.cmp);
            }
        }
    }
    if !ok {
        x.overflow.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `out &= key(values) IN list`: per word of 64 rows, one vectorised compare per item, ORed.
#[inline(always)]
fn and_in<T, K: PartialEq + Copy>(out: &mut [u64], values: &[T], key: impl Fn(&T) -> K + Copy, list: &[K]) {
    for (block, word) in values.chunks(64).zip(out.iter_mut()) {
        let mut any = 0u64;
        for &item in list {
            any |= bits_of(block, move |x| key(x) == item);
        }
        *word &= any;
    }
}

/// The bits of `test` over a block of up to 64 values (a whole one as a loop of exactly 64,
/// which the compiler turns into vector compares).
#[inline(always)]
fn bits_of<T>(block: &[T], test: impl Fn(&T) -> bool) -> u64 {
    let mut bits = 0u64;
    if let Ok(block) = <&[T; 64]>::try_from(block) {
        for (k, x) in block.iter().enumerate() {
            bits |= u64::from(test(x)) << k;
        }
    } else {
        for (k, x) in block.iter().enumerate() {
            bits |= u64::from(test(x)) << k;
        }
    }
    bits
}

/// An `i64` ordered as [`f64::total_cmp`] orders floats (arrow's float order): the sign bit
/// flips the magnitude bits of negatives. Integer compares of it vectorise; `total_cmp` per
/// value does not.
#[inline(always)]
fn order_key(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

/// `out &= key(values) OP n`, one loop per operator (each monomorphised, so it vectorises).
#[inline(always)]
fn and_cmp<T, K: Ord + Copy>(out: &mut [u64], values: &[T], key: impl Fn(&T) -> K + Copy, cmp: Cmp, n: K) {
    match cmp {
        Cmp::Eq => and_into(out, values, move |x| key(x) == n),
        Cmp::NotEq => and_into(out, values, move |x| key(x) != n),
        Cmp::Lt => and_into(out, values, move |x| key(x) < n),
        Cmp::LtEq => and_into(out, values, move |x| key(x) <= n),
        Cmp::Gt => and_into(out, values, move |x| key(x) > n),
        Cmp::GtEq => and_into(out, values, move |x| key(x) >= n),
    }
}

/// `out &= key_a(a) OP key_b(b)`, row by row, one loop per operator.
#[inline(always)]
fn and_cmp_pairs<A, B, K: Ord + Copy>(
    out: &mut [u64],
    a: &[A],
    b: &[B],
    key_a: impl Fn(&A) -> K + Copy,
    key_b: impl Fn(&B) -> K + Copy,
    cmp: Cmp,
) {
    match cmp {
        Cmp::Eq => and_pairs(out, a, b, move |x, y| key_a(x) == key_b(y)),
        Cmp::NotEq => and_pairs(out, a, b, move |x, y| key_a(x) != key_b(y)),
        Cmp::Lt => and_pairs(out, a, b, move |x, y| key_a(x) < key_b(y)),
        Cmp::LtEq => and_pairs(out, a, b, move |x, y| key_a(x) <= key_b(y)),
        Cmp::Gt => and_pairs(out, a, b, move |x, y| key_a(x) > key_b(y)),
        Cmp::GtEq => and_pairs(out, a, b, move |x, y| key_a(x) >= key_b(y)),
    }
}

/// `out[w] &= bits of test(a[i], b[i])` over rows `64w..64w+64`: whole words as loops of
/// exactly 64 (vector compares), the last, partial word row by row.
#[inline(always)]
fn and_pairs<A, B>(out: &mut [u64], a: &[A], b: &[B], test: impl Fn(&A, &B) -> bool + Copy) {
    for ((x, y), word) in a.chunks(64).zip(b.chunks(64)).zip(out.iter_mut()) {
        let mut bits = 0u64;
        if let (Ok(x), Ok(y)) = (<&[A; 64]>::try_from(x), <&[B; 64]>::try_from(y)) {
            for k in 0..64 {
                bits |= u64::from(test(&x[k], &y[k])) << k;
            }
        } else {
            for (k, (p, q)) in x.iter().zip(y).enumerate() {
                bits |= u64::from(test(p, q)) << k;
            }
        }
        *word &= bits;
    }
}

/// `out[w] &= bits of test(values[64w..64w+64])`. Whole words go through a loop of exactly 64
/// (which the compiler turns into vector compares); the last, partial word bit by bit.
#[inline(always)]
fn and_into<T>(out: &mut [u64], values: &[T], test: impl Fn(&T) -> bool + Copy) {
    for (block, word) in values.chunks(64).zip(out.iter_mut()) {
        *word &= bits_of(block, test);
    }
}

/// Words per morsel of [`set_ids`].
const ID_MORSEL_WORDS: usize = 1024;

/// The positions of the set bits of `bits`, ascending: counted per morsel of words, then each
/// morsel's ids written into its own part of one vector, morsels on all cores (the same vector
/// whatever the number of threads). The set bits of a WHERE's mask are most of its cost once the
/// comparisons are fused.
pub(crate) fn set_ids(bits: &BooleanBuffer) -> Vec<u64> {
    set_ids_with(Isa::detected(), bits)
}

/// [`set_ids`] with the loop compiled for `isa`.
fn set_ids_with(isa: Isa, bits: &BooleanBuffer) -> Vec<u64> {
    if bits.offset() % 8 != 0 {
        return bits.set_indices().map(|i| i as u64).collect();
    }
    let len = bits.len();
    let bytes = &bits.inner().as_slice()[bits.offset() / 8..];
    // Word `w` holds bits 64w..64w+64 (little-endian bytes), the bits past `len` cleared.
    let word = |w: usize| word_of(bytes, len, w);
    let num_words = len.div_ceil(64);
    let morsels: Vec<(usize, usize)> =
        (0..num_words).step_by(ID_MORSEL_WORDS).map(|w| (w, (w + ID_MORSEL_WORDS).min(num_words))).collect();
    let counts: Vec<usize> =
        morsels.par_iter().map(|&(a, b)| (a..b).map(|w| word(w).count_ones() as usize).sum()).collect();
    let total: usize = counts.iter().sum();
    // Written once, never zeroed first: each huge page is zeroed by the kernel just before the
    // ids land in it, while it is in cache (a zeroed vector was evicted, then read back).
    let mut ids: Vec<u64> = Vec::with_capacity(total);
    beton_storage::advise_huge_pages(ids.spare_capacity_mut());
    // Each morsel's part of `ids`, in order.
    let mut parts = Vec::with_capacity(morsels.len());
    let mut rest = &mut ids.spare_capacity_mut()[..total];
    for &n in &counts {
        let (part, tail) = rest.split_at_mut(n);
        parts.push(part);
        rest = tail;
    }
    let short: usize = parts
        .into_par_iter()
        .zip(morsels.par_iter())
        .map(|(part, &(a, b))| usize::from(isa.write_ids(&word, a..b, 0, part) != part.len()))
        .sum();
    if short != 0 {
        // Not reached: the counts are the same words' popcounts.
        return bits.set_indices().map(|i| i as u64).collect();
    }
    // SAFETY: the parts tile the first `total` slots, and each part's writer reported filling
    // exactly its length, contiguously from its start (`write_ids`).
    #[allow(unsafe_code)]
    unsafe {
        ids.set_len(total)
    };
    ids
}

impl Isa {
    /// Writes the positions of the set bits of words `words` (`word(w)` holds rows
    /// `64w..64w + 64`), plus `origin`, into `part`, from its start; returns how many bits were
    /// set. When that is `part.len()`, every slot of `part` holds an id (none is written past it).
    #[allow(unsafe_code)]
    fn write_ids(
        self,
        word: &impl Fn(usize) -> u64,
        words: Range<usize>,
        origin: u64,
        part: &mut [MaybeUninit<u64>],
    ) -> usize {
        match self {
            // SAFETY: `Avx512` comes only from `available`, which checked at run time that this
            // CPU has every feature the function is compiled with.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { write_ids_avx512(word, words, origin, part) },
            _ => write_ids(word, words, origin, part, 0),
        }
    }
}

/// [`Isa::write_ids`] a bit at a time, from `part[at]` on; returns `at` plus the bits set.
#[inline(always)]
fn write_ids(
    word: &impl Fn(usize) -> u64,
    words: Range<usize>,
    origin: u64,
    part: &mut [MaybeUninit<u64>],
    mut at: usize,
) -> usize {
    for w in words {
        let mut value = word(w);
        let base = origin + (w * 64) as u64;
        while value != 0 {
            if let Some(slot) = part.get_mut(at) {
                slot.write(base + u64::from(value.trailing_zeros()));
            }
            at += 1;
            value &= value - 1;
        }
    }
    at
}

/// [`Isa::write_ids`] 8 rows at a time: each byte of a word picks its rows' ids out of a vector
/// of 8 (`vpcompressq`), stored whole at the next free place; its unused lanes are overwritten
/// by the next store. A word is done this way while the whole of its 64 possible lanes fit in
/// `part`, the last few ids bit by bit.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi1,bmi2,popcnt")]
#[allow(unsafe_code)]
fn write_ids_avx512(
    word: &impl Fn(usize) -> u64,
    words: Range<usize>,
    origin: u64,
    part: &mut [MaybeUninit<u64>],
) -> usize {
    use std::arch::x86_64::{
        _mm512_add_epi64, _mm512_maskz_compress_epi64, _mm512_set1_epi64, _mm512_set_epi64,
    };
    let lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    let mut at = 0;
    for w in words.clone() {
        if at + 64 > part.len() {
            return write_ids(word, w..words.end, origin, part, at);
        }
        let mut value = word(w);
        let mut base = (origin + (w * 64) as u64) as i64;
        while value != 0 {
            let byte = value as u8;
            if byte != 0 {
                let ids = _mm512_maskz_compress_epi64(byte, _mm512_add_epi64(_mm512_set1_epi64(base), lanes));
                let slots = &mut part[at..at + 8];
                // SAFETY: `slots` is 8 u64 slots of `part` (the slice above is bounds-checked),
                // which the unaligned store writes exactly (the lanes past this byte's ids are
                // zeros, overwritten by the next ids).
                unsafe { std::arch::x86_64::_mm512_storeu_epi64(slots.as_mut_ptr().cast(), ids) };
                at += byte.count_ones() as usize;
            }
            value >>= 8;
            base += 8;
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use beton_storage::{Dataset, SampleValue};
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

    /// A temporary folder holding a file of 300 rows, opened: `a` (int), `f` (float; NaN in row 7
    /// and -0.0 in row 8 when `nan`), `b` (bytes: its size is a u64 column), `image` (raw, widths
    /// 1 to 4: a u16 column).
    fn opened(nan: bool) -> (tempfile::TempDir, Dataset) {
        let (tmp, path) = beton_testkit::temp_path("t.beton");
        beton_testkit::write(&path, beton_testkit::schema("a:int f:float b:bytes image:raw"), 300, |i| {
            let k = i as usize;
            let f = match (nan, i) {
                (true, 7) => f64::NAN,
                (true, 8) => -0.0,
                _ => FLOATS[(k * 7) % FLOATS.len()],
            };
            let w = 1 + (k % 4) as u32;
            vec![
                SampleValue::Int(INTS[(k * 5) % INTS.len()]),
                SampleValue::Float(f),
                SampleValue::Bytes(vec![0; k % 6]),
                beton_testkit::rgb(w, 1, vec![9; w as usize * 3]),
            ]
        });
        (tmp, Dataset::open(&path).unwrap())
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
        let (_tmp, ds) = opened(false);
        let table = Table::new(&ds);
        let ctx = Ctx::all(&table);
        for sql in [
            "a < 1",
            "a < 1 AND (f >= 0.5 AND 2 <= b)",
            "-1 < a",
            "\"image.width\" > 2 AND index <> 4",
            "f BETWEEN 0.1 AND 3 AND a < 2",
            "a IN (1, 2, -3) AND \"image.width\" IN (2, 70000) AND b IN (-1, 3)",
            // Comparisons between columns: i64 with i64 or u16, u64 with u64, floats with any.
            "a < f",
            "f >= a AND a <> 3",
            "\"image.width\" <= a AND a = a",
            "b = b AND f > b",
            "\"image.width\" < f AND f < 2",
            // OR and NOT of them, at any depth.
            "a < 1 OR b > 2",
            "a NOT IN (1, 2)",
            "a NOT BETWEEN 1 AND 2",
            "NOT (a < 1 OR f > 2) AND (b = 3 OR (\"image.width\" < 2 AND a <> 0))",
            "index < 10 AND (a IN (1, 2) OR f > 0.5)",
            // Arithmetic on a side.
            "f * 2 > a",
            "\"image.width\" + \"image.width\" > 4",
            "a - a = 0 AND f + 1 > 2.5",
            "f - \"image.width\" < a OR 3 * \"image.width\" >= 2 + f",
            "a * 0 < \"image.width\" - 2",
            // NULL tests of columns without NULLs.
            "f IS NOT NULL AND a < 1",
            "a IS NULL OR NOT (b IS NULL)",
        ] {
            assert!(conjunction_mask(&ctx, &predicate(sql)).is_some(), "{sql}");
        }
        for sql in [
            // `index` under OR or NOT is a column to read: left to the evaluator.
            "index < 10 OR a < 1",
            "NOT (index < 10) AND a < 1",
            "a < 1 OR b + 1 > 2",
            // An overflow (`a` holds i64::MAX), which the evaluator reports; division.
            "a + 1 < 2",
            "f < 1 OR a * 2 > 0",
            "a / 2 < 1",
            // Arithmetic with a condition on `index`: every row is computed, as the evaluator does.
            "index < 10 AND f * 2 > 1",
            // Arithmetic on `index` reads it as a column.
            "a + index < 3",
            "index * 2 > a AND index < 5",
            // A u64 against another integer type: the evaluator casts it to i64, which can fail.
            "a < b",
            "\"image.width\" = b",
            // `index` against a column.
            "index < a",
            "a < 1 AND TRUE",
            "a IN (1, 2.5)",
            "f IN (1, 2)",
            "a IN (1, NULL)",
            "a IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 9223372036854775807)",
            "b > -1",
            "nope < 1",
            "a < 'x'",
            "a BETWEEN b AND 2",
        ] {
            assert!(conjunction_mask(&ctx, &predicate(sql)).is_none(), "{sql}");
        }
        // NaN and -0.0 in a float column are ordered in the loop as the evaluator orders them:
        // -0.0 is 0.0, NaN is above every number.
        let (_tmp, ds) = opened(true);
        let table = Table::new(&ds);
        let ctx = Ctx::all(&table);
        for isa in Isa::available() {
            let rows = |sql: &str| -> Vec<usize> {
                conjunction_mask_with(isa, &ctx, &predicate(sql)).unwrap().unwrap().set_indices().collect()
            };
            assert!(rows("f < 1").contains(&8) && !rows("f < 1").contains(&7), "{isa:?}");
            assert!(rows("f = 0").contains(&8) && rows("f > 1e300").contains(&7), "{isa:?}");
            assert!(!rows("f < 0").contains(&8) && !rows("f <> 0").contains(&8), "{isa:?}");
        }
    }

    #[test]
    fn the_fused_path_gives_the_general_evaluators_rows() {
        for nan in [false, true] {
            let (_tmp, ds) = opened(nan);
            let table = Table::new(&ds);
            for isa in Isa::available() {
                same_rows_as_the_evaluator(&Ctx::all(&table), isa);
            }
        }
    }

    /// Random conjunctions: the fused rows (with the loops compiled for `isa`) are the general
    /// evaluator's.
    fn same_rows_as_the_evaluator(ctx: &Ctx, isa: Isa) {
        // Operators past OPS: `column BETWEEN number AND number`, `column IN (numbers)`,
        // `column OP column`.
        let leaf = (0..COLUMNS.len(), 0..OPS.len() + 6, 0..NUMBERS.len(), any::<bool>());
        let config = ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() };
        let taken = std::sync::atomic::AtomicUsize::new(0);
        // Each leaf joined to the ones before by AND or OR, negated or not, parenthesised
        // around the ones before or not: trees of every shape.
        let join = (0..2usize, any::<bool>(), any::<bool>());
        proptest!(config, |(leaves in proptest::collection::vec((leaf, join), 1..5))| {
            let sql: Vec<String> = leaves
                .iter()
                .map(|&((c, o, n, flip), _)| {
                    let column = format!("\"{}\"", COLUMNS[c]);
                    if o == OPS.len() {
                        let high = NUMBERS[(n * 7 + usize::from(flip) * 5) % NUMBERS.len()];
                        return format!("{column} BETWEEN {} AND {high}", NUMBERS[n]);
                    }
                    if o == OPS.len() + 5 {
                        return format!("{column} IS {}NULL", if flip { "NOT " } else { "" });
                    }
                    if o >= OPS.len() + 3 {
                        // Arithmetic: `column ARITH (number | column) OP (column | number)`.
                        let arith = ["+", "-", "*"][(n + c) % 3];
                        let second = match flip {
                            true => format!("\"{}\"", COLUMNS[(n + 1) % COLUMNS.len()]),
                            false => NUMBERS[(n * 3) % NUMBERS.len()].to_string(),
                        };
                        let rhs = match o == OPS.len() + 3 {
                            true => format!("\"{}\"", COLUMNS[(c + n) % COLUMNS.len()]),
                            false => NUMBERS[(n * 5 + 1) % NUMBERS.len()].to_string(),
                        };
                        return format!("{column} {arith} {second} {} {rhs}", OPS[(n + 2 * c) % OPS.len()]);
                    }
                    if o == OPS.len() + 2 {
                        let other = format!("\"{}\"", COLUMNS[(n + usize::from(flip)) % COLUMNS.len()]);
                        return format!("{column} {} {other}", OPS[(n + c) % OPS.len()]);
                    }
                    if o == OPS.len() + 1 {
                        // Integer items (taken: some out of the column's range), or one float
                        // among them (left to the evaluator).
                        let items: Vec<&str> = [n, n * 3 + 1, n * 5 + 2, n * 11 + usize::from(flip)]
                            .iter()
                            .map(|k| NUMBERS[k % NUMBERS.len()])
                            .filter(|x| flip || !x.contains(['.', 'e']))
                            .collect();
                        return format!("{column} IN ({})", if items.is_empty() { "0".into() } else { items.join(", ") });
                    }
                    if flip { format!("{} {} {column}", NUMBERS[n], OPS[o]) } else { format!("{column} {} {}", OPS[o], NUMBERS[n]) }
                })
                .collect();
            let mut joined = String::new();
            for (k, (text, &(_, (op, not, group)))) in sql.iter().zip(&leaves).enumerate() {
                let text = if not { format!("NOT ({text})") } else { text.clone() };
                joined = match k {
                    0 => text,
                    _ if group => format!("({joined}) {} {text}", ["AND", "OR"][op]),
                    _ => format!("{joined} {} {text}", ["AND", "OR"][op]),
                };
            }
            let sql = joined;
            let e = predicate(&sql);
            if let Some(fused) = conjunction_mask_with(isa, ctx, &e) {
                taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let fused: Vec<usize> = fused.unwrap().set_indices().collect();
                prop_assert_eq!(Ok(fused), general(ctx, &e), "{} ({:?})", sql, isa);
            }
        });
        // Nearly half the cases take the fused path (the others: a u64 column against a
        // negative number, `index` under OR or NOT, which the evaluator reads as a column).
        assert!(taken.into_inner() > 160, "the fused path was hardly taken");
    }

    #[test]
    fn comparisons_between_columns_give_the_evaluators_rows() {
        // Every pair of columns, every operator, with NaN and -0.0 in `f` and without, with the
        // loops of every instruction set: the fused rows are the evaluator's; a u64 column
        // against another integer type, and `index`, are left to it.
        for nan in [false, true] {
            let (_tmp, ds) = opened(nan);
            let table = Table::new(&ds);
            let ctx = Ctx::all(&table);
            for x in COLUMNS {
                for y in COLUMNS {
                    for op in OPS {
                        let sql = format!("\"{x}\" {op} \"{y}\" AND \"image.width\" >= 1");
                        let e = predicate(&sql);
                        let u64_with_int =
                            [x, y].contains(&"b") && [x, y].iter().any(|c| ["a", "image.width"].contains(c));
                        let expect_fused = !u64_with_int && x != "index" && y != "index";
                        for isa in Isa::available() {
                            match conjunction_mask_with(isa, &ctx, &e) {
                                Some(fused) => {
                                    assert!(expect_fused, "{sql}: fused");
                                    let fused: Vec<usize> = fused.unwrap().set_indices().collect();
                                    assert_eq!(Ok(fused), general(&ctx, &e), "{sql} ({isa:?}, nan {nan})");
                                }
                                None => assert!(!expect_fused, "{sql}: not fused"),
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn long_in_lists_give_the_evaluators_rows() {
        let (_tmp, ds) = opened(false);
        let table = Table::new(&ds);
        let ctx = Ctx::all(&table);
        // Columns: a (i64 from INTS), b (u64 sizes 0..6), image.width (u16 1..5), index (u64).
        let lists: [&[i64]; 4] = [
            &[-3, -1, 0, 1, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53],
            &[-9_000_000, 4, 1, 2, 3, 250, 251, 252, 299, 4, 4, 4, 4, 4, 4, 4, 4, 1000],
            &[0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180],
            // Too wide for a bitmap: the evaluator's hash set.
            &[i64::MIN, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, i64::MAX],
        ];
        // Near the ends of i64: the bitmap's offsets must not overflow.
        let high: Vec<i64> = (0..20).map(|k| i64::MAX - k).collect();
        let low: Vec<i64> = (0..20).map(|k| i64::MIN + k).collect();
        let lists: Vec<&[i64]> = lists.iter().copied().chain([high.as_slice(), low.as_slice()]).collect();
        for (k, list) in lists.iter().enumerate() {
            let items: Vec<String> = list.iter().map(i64::to_string).collect();
            for column in COLUMNS.iter().filter(|c| **c != "f") {
                let sql = format!("\"{column}\" IN ({}) AND \"image.width\" >= 1", items.join(", "));
                let e = predicate(&sql);
                for isa in Isa::available() {
                    match conjunction_mask_with(isa, &ctx, &e) {
                        Some(fused) => {
                            // (A list of positions is a set of rows, however wide.)
                            assert!(
                                k != 3 || *column == "index",
                                "{sql}: a range this wide takes the evaluator"
                            );
                            let fused: Vec<usize> = fused.unwrap().set_indices().collect();
                            assert_eq!(Ok(fused), general(&ctx, &e), "{sql} ({isa:?})");
                        }
                        None => assert!(k == 3 && *column != "index", "{sql}: not fused"),
                    }
                }
            }
        }
    }

    #[test]
    fn the_bits_do_not_depend_on_the_number_of_threads() {
        let (_tmp, path) = beton_testkit::temp_path("big.beton");
        let n = 3 * MORSEL as u64 + 17;
        beton_testkit::write(&path, beton_testkit::schema("a:int"), n, |i| {
            vec![SampleValue::Int((i * 7919 % 1000) as i64)]
        });
        let ds = Dataset::open(&path).unwrap();
        let table = Table::new(&ds);
        let e = predicate("a < 500 AND a >= 10");
        let run = |threads: usize, isa: Isa| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| conjunction_mask_with(isa, &Ctx::all(&table), &e).unwrap().unwrap())
        };
        let one = run(1, Isa::Baseline);
        for isa in Isa::available() {
            assert_eq!(one, run(3, isa), "{isa:?}");
        }
        let expected: Vec<usize> =
            (0..n as usize).filter(|i| (10..500).contains(&(i * 7919 % 1000))).collect();
        assert_eq!(one.set_indices().collect::<Vec<_>>(), expected);
        assert_eq!(one.len(), n as usize);
    }

    #[test]
    fn arithmetic_across_blocks_morsels_and_threads() {
        let (_tmp, path) = beton_testkit::temp_path("big.beton");
        let n = 2 * MORSEL + 3 * ARITH_BLOCK + 17;
        let a = |i: usize| (i * 7919 % 1000) as i64;
        let f = |i: usize| (i * 104_729 % 1000) as f64 / 1000.0;
        beton_testkit::write(&path, beton_testkit::schema("a:int f:float"), n as u64, |i| {
            vec![SampleValue::Int(a(i as usize)), SampleValue::Float(f(i as usize))]
        });
        let ds = Dataset::open(&path).unwrap();
        let table = Table::new(&ds);
        let forms: [(&str, &dyn Fn(usize) -> bool); 3] = [
            ("f * 4000 > a", &|i| f(i) * 4000.0 > a(i) as f64),
            ("a + a < 700", &|i| a(i) + a(i) < 700),
            ("a - 3 >= f * 500 AND a < 900", &|i| (a(i) - 3) as f64 >= f(i) * 500.0 && a(i) < 900),
        ];
        for (sql, keep) in forms {
            let expected: Vec<usize> = (0..n).filter(|&i| keep(i)).collect();
            let e = predicate(sql);
            for threads in [1, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                for isa in Isa::available() {
                    let mask =
                        pool.install(|| conjunction_mask_with(isa, &Ctx::all(&table), &e).unwrap().unwrap());
                    assert_eq!(
                        mask.set_indices().collect::<Vec<_>>(),
                        expected,
                        "{sql}, {threads} threads, {isa:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn index_conditions_are_a_range_of_rows_across_morsels_and_threads() {
        let (_tmp, path) = beton_testkit::temp_path("big.beton");
        let n = 3 * MORSEL + 17;
        beton_testkit::write(&path, beton_testkit::schema("a:int"), n as u64, |i| {
            vec![SampleValue::Int((i * 7919 % 1000) as i64)]
        });
        let ds = Dataset::open(&path).unwrap();
        let table = Table::new(&ds);
        let m = MORSEL;
        for sql in [
            format!("index >= {} AND index < {}", m - 3, m + 70),
            format!("index > {} AND a < 500 AND index <= {}", m - 64, 2 * m + 1),
            "index BETWEEN 63 AND 64 AND a >= 0".to_string(),
            format!("index IN ({}, 3, {}, 3) AND index <> 3", m + 5, n + 9),
            format!("index IN ({}, {}) AND a < 1000", 2 * m, n - 1),
            "index < 10 AND index > 20".to_string(),
            "index >= -5 AND index < 2.5 AND index <> -0.0".to_string(),
            "index > 1e300".to_string(),
            format!("index < 99999999999999999999 AND index >= {}", n - 2),
            "index = 7.5".to_string(),
            format!("index = {} AND index <> 9223372036854775807", n / 2),
            format!("index >= {} AND index <> {} AND index <> {}", n - 100, n - 50, n - 1),
            "index >= 0".to_string(),
        ] {
            let e = predicate(&sql);
            let want = general(&Ctx::all(&table), &e).unwrap();
            for isa in Isa::available() {
                for threads in [1, 3] {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                    let got = pool.install(|| conjunction_mask_with(isa, &Ctx::all(&table), &e));
                    let got = got.expect("fused").unwrap();
                    assert_eq!(got.len(), n, "{sql}");
                    assert_eq!(got.set_indices().collect::<Vec<_>>(), want, "{sql} ({isa:?}, {threads})");
                    let ids = pool.install(|| conjunction_ids_with(isa, &Ctx::all(&table), &e));
                    let ids: Vec<usize> =
                        ids.expect("fused").unwrap().into_iter().map(|i| i as usize).collect();
                    assert_eq!(ids, want, "{sql}: ids ({isa:?}, {threads})");
                }
            }
        }
    }

    #[test]
    fn like_prefixes_give_the_evaluators_rows() {
        // Texts at the prefix's edges (empty, shorter, equal, longer, other case, multi-byte,
        // the pattern's own characters), over more rows than a morsel.
        const WORDS: [&str; 13] =
            ["", "a", "ab", "abc", "abd", "b", "ab%", "a_b", "é", "éa", "A", "abcdefghij", "xab"];
        let (_tmp, path) = beton_testkit::temp_path("text.beton");
        let n = MORSEL + 77;
        beton_testkit::write(&path, beton_testkit::schema("t:text i:int"), n as u64, |i| {
            let word = WORDS[(i as usize * 7 + i as usize / 13) % WORDS.len()];
            vec![SampleValue::Text(word.to_string()), SampleValue::Int(i as i64)]
        });
        let ds = Dataset::open(&path).unwrap();
        let table = Table::new(&ds);
        let ctx = Ctx::all(&table);
        for sql in [
            "t LIKE 'ab%'",
            "t LIKE '%'",
            "t LIKE 'é%'",
            "t LIKE 'abcdefghij%'",
            "t LIKE 'abcdefghijk%'",
            "t NOT LIKE 'a%'",
            "t LIKE 'ab%' AND i > 65000",
            "t LIKE 'x%' OR i = 3",
            "NOT (t LIKE 'abc%') AND t LIKE 'a%' AND i < 70000",
        ] {
            let e = predicate(sql);
            let want = general(&ctx, &e).unwrap();
            assert!(!want.is_empty() || sql.contains("abcdefghijk"), "{sql}");
            for isa in Isa::available() {
                for threads in [1, 3] {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                    let got = pool.install(|| conjunction_mask_with(isa, &ctx, &e)).expect("fused").unwrap();
                    assert_eq!(got.set_indices().collect::<Vec<_>>(), want, "{sql} ({isa:?}, {threads})");
                }
            }
        }
        // Patterns the evaluator keeps: `_`, `%` elsewhere, an escape, ILIKE, a column pattern.
        for sql in [
            "t LIKE 'a_%'",
            "t LIKE '%b'",
            "t LIKE 'a%b%'",
            "t LIKE 'ab\\%'",
            "t LIKE 'ab%' ESCAPE '!'",
            "t ILIKE 'ab%'",
            "t LIKE t",
        ] {
            assert!(conjunction_mask(&ctx, &predicate(sql)).is_none(), "{sql} is not fused");
        }
    }

    #[test]
    fn set_ids_are_the_set_bits_at_any_offset_and_thread_count() {
        let n = 3 * ID_MORSEL_WORDS * 64 + 77;
        let bools: Vec<bool> = (0..n).map(|i| (i * 2654435761usize) % 7 < 3 || i == n - 1).collect();
        let bits = BooleanBuffer::from(bools.clone());
        let expected: Vec<u64> = (0..n).filter(|&i| bools[i]).map(|i| i as u64).collect();
        for isa in Isa::available() {
            let run = |threads: usize, b: &BooleanBuffer| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| set_ids_with(isa, b))
            };
            assert_eq!(run(1, &bits), expected, "{isa:?}");
            assert_eq!(run(3, &bits), expected, "{isa:?}");
            // A slice at a byte offset and one at a bit offset; trailing bits are never counted.
            for offset in [8, 13] {
                let sliced = bits.slice(offset, n - offset - 5);
                let want: Vec<u64> =
                    (offset..n - 5).filter(|&i| bools[i]).map(|i| (i - offset) as u64).collect();
                assert_eq!(run(2, &sliced), want, "offset {offset} {isa:?}");
            }
            // Every density, dense and sparse words, all set, none set.
            for density in [0, 1, 10, 50, 90, 100] {
                let bools: Vec<bool> = (0..n).map(|i| (i * 2654435761usize) % 100 < density).collect();
                let want: Vec<u64> = (0..n).filter(|&i| bools[i]).map(|i| i as u64).collect();
                assert_eq!(run(2, &BooleanBuffer::from(bools)), want, "density {density} {isa:?}");
            }
        }
        assert!(set_ids(&BooleanBuffer::new_unset(100)).is_empty());
        assert_eq!(set_ids(&BooleanBuffer::new_set(3)), vec![0, 1, 2]);
    }
}
