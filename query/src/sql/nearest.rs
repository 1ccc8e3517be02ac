//! Exact nearest neighbours of several query vectors in one pass over a vector column: each
//! block of rows is read once for all the query vectors (in parallel over blocks), each query
//! keeping its `k` best rows in a heap; the blocks' bests are merged per query. The distances are
//! the SQL functions' (`functions::Metric`), so `ds.nearest` and `ORDER BY l2_distance(emb, $q)`
//! agree to the last bit.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_schema::DataType;
use sqlparser::tokenizer::Span;

use super::functions::{Elements, Metric};
use crate::error::{Error, Result};
use crate::index_set::IndexSet;
use crate::table::Table;

/// One row found for one query vector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbour {
    /// The query vector's position among those given.
    pub query: usize,
    /// The row (the table's index).
    pub index: u64,
    /// Its distance (`l2`, `cosine`) or inner product (`dot`).
    pub distance: f64,
}

/// Rows a parallel task reads.
const ROWS_PER_TASK: usize = 4096;

/// A candidate: smaller `score` is nearer (the inner product negated), ties by smaller index.
#[derive(Clone, Copy)]
struct Candidate {
    score: f64,
    index: u64,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then(self.index.cmp(&other.index))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

/// Keeps the `k` smallest candidates pushed.
fn keep(heap: &mut BinaryHeap<Candidate>, k: usize, c: Candidate) {
    if heap.len() < k {
        heap.push(c);
    } else if heap.peek().is_some_and(|worst| c < *worst) {
        heap.pop();
        heap.push(c);
    }
}

/// The `k` rows of `table` (of `rows`, or all) whose vectors in `column` are nearest each of
/// `queries` by `metric` (`"l2"`, `"cosine"`, `"dot"`: the largest inner product first), best
/// first, ties broken by index; rows whose vector is NULL (or, for `cosine`, zero) are left out.
///
/// # Errors
/// [`Error::InvalidArgument`] for an unknown metric, `k` of 0, a column that is not a vector
/// column, or a query vector of another length; as [`Table::column`].
pub fn nearest(
    table: &Table,
    column: &str,
    queries: &[Vec<f64>],
    k: usize,
    rows: Option<&IndexSet>,
    metric: &str,
) -> Result<Vec<Neighbour>> {
    let bad = |why: String| Error::InvalidArgument { what: format!("nearest in '{column}'"), why };
    let (metric, negate) = match metric {
        "l2" => (Metric::L2, false),
        "cosine" => (Metric::Cosine, false),
        "dot" => (Metric::Dot, true),
        other => return Err(bad(format!("metric '{other}' is not one of cosine, dot, l2"))),
    };
    if k == 0 {
        return Err(bad("k must be at least 1".into()));
    }
    let values = table.column(column)?;
    let DataType::FixedSizeList(_, d) = values.data_type() else {
        return Err(bad(format!("the column is {}, not a vector column", values.data_type())));
    };
    let d = *d as usize;
    if let Some((j, q)) = queries.iter().enumerate().find(|(_, q)| q.len() != d) {
        return Err(bad(format!("query vector {j} has {} elements, the column's vectors {d}", q.len())));
    }
    let list = values.as_fixed_size_list();
    let elements = Elements::of(list.values(), Span::empty())?;
    let n = list.len();
    let picked: Option<Vec<u64>> = rows.map(|r| r.iter().filter(|&i| (i as usize) < n).collect());
    let count = picked.as_ref().map_or(n, Vec::len);
    let m = queries.len();
    let per_block = |block: usize| -> Vec<Vec<Candidate>> {
        let mut heaps: Vec<BinaryHeap<Candidate>> =
            (0..m).map(|_| BinaryHeap::with_capacity(k + 1)).collect();
        let mut x = vec![0.0f64; d];
        let start = block * ROWS_PER_TASK;
        for p in start..count.min(start + ROWS_PER_TASK) {
            let i = picked.as_ref().map_or(p, |rows| rows[p] as usize);
            if list.is_null(i) {
                continue;
            }
            // The row is read once for every query vector (it stays in cache across them).
            let row = elements.row(i, d, &mut x);
            for (heap, q) in heaps.iter_mut().zip(queries) {
                if let Some(s) = row.metric(metric, q) {
                    keep(heap, k, Candidate { score: if negate { -s } else { s }, index: i as u64 });
                }
            }
        }
        heaps.into_iter().map(BinaryHeap::into_vec).collect()
    };
    use rayon::prelude::*;
    let blocks: Vec<Vec<Vec<Candidate>>> =
        (0..count.div_ceil(ROWS_PER_TASK)).into_par_iter().map(per_block).collect();
    let mut out = Vec::with_capacity(m * k);
    for j in 0..m {
        let mut all: Vec<Candidate> = blocks.iter().flat_map(|b| b[j].iter().copied()).collect();
        all.sort_unstable();
        out.extend(all.into_iter().take(k).map(|c| Neighbour {
            query: j,
            index: c.index,
            distance: if negate { -c.score } else { c.score },
        }));
    }
    Ok(out)
}
