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

/// A search's metric by name, and whether its scores are negated (`dot`: the largest first).
fn search_metric(name: &str, what: &str) -> Result<(Metric, bool)> {
    match name {
        "l2" => Ok((Metric::L2, false)),
        "cosine" => Ok((Metric::Cosine, false)),
        "dot" => Ok((Metric::Dot, true)),
        other => Err(Error::InvalidArgument {
            what: what.to_string(),
            why: format!("metric '{other}' is not one of cosine, dot, l2"),
        }),
    }
}

/// A float32 score of `metric` (smaller is nearer) from a row's squared norm `nx2` (and its
/// root `nx`, computed once per row, not per query) and its dot product with the query, and the
/// bound on its error (`g`: `kernels::error_bound`).
#[inline]
fn score_bound(
    metric: Metric,
    (nx2, nx): (f64, f64),
    dot: f64,
    qnorm2: f64,
    qnorm: f64,
    g: f64,
) -> (f64, f64) {
    match metric {
        Metric::L2 => (nx2 - 2.0 * dot + qnorm2, g * (nx + qnorm) * (nx + qnorm)),
        Metric::Dot => (-dot, g * nx * qnorm),
        _ => (1.0 - dot / (nx * qnorm), 4.0 * g),
    }
}

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
    nearest_among(table, column, queries, k, rows.map(IndexSet::as_slice), metric)
}

/// [`nearest`] over `rows` in any order (an index's lists; each row once), or all rows.
pub(crate) fn nearest_among(
    table: &Table,
    column: &str,
    queries: &[Vec<f64>],
    k: usize,
    rows: Option<&[u64]>,
    metric: &str,
) -> Result<Vec<Neighbour>> {
    let bad = |why: String| Error::InvalidArgument { what: format!("nearest in '{column}'"), why };
    let (metric, negate) = search_metric(metric, &format!("nearest in '{column}'"))?;
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
    let picked: Option<Vec<u64>> = rows.map(|r| r.iter().copied().filter(|&i| (i as usize) < n).collect());
    let count = picked.as_ref().map_or(n, Vec::len);
    let row_at = |p: usize| picked.as_ref().map_or(p, |rows| rows[p] as usize);
    if let Elements::F32(values) = elements {
        return Ok(nearest_f32(list, values, d, queries, k, count, &row_at, metric, negate));
    }
    let m = queries.len();
    let per_block = |block: usize| -> Vec<Vec<Candidate>> {
        let mut heaps: Vec<BinaryHeap<Candidate>> =
            (0..m).map(|_| BinaryHeap::with_capacity(k + 1)).collect();
        let mut x = vec![0.0f64; d];
        let start = block * ROWS_PER_TASK;
        for p in start..count.min(start + ROWS_PER_TASK) {
            let i = row_at(p);
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
    let per_query = (0..m).map(|j| blocks.iter().flat_map(|b| b[j].iter().copied()).collect());
    Ok(best(per_query, k, negate))
}

/// The `k` best of each query's candidates, as neighbours.
fn best(per_query: impl Iterator<Item = Vec<Candidate>>, k: usize, negate: bool) -> Vec<Neighbour> {
    let mut out = Vec::new();
    for (j, mut all) in per_query.enumerate() {
        all.sort_unstable();
        out.extend(all.into_iter().take(k).map(|c| Neighbour {
            query: j,
            index: c.index,
            distance: if negate { -c.score } else { c.score },
        }));
    }
    out
}

/// A float with a total order, for heaps of bounds.
#[derive(Clone, Copy, PartialEq)]
struct Bound(f64);

impl Eq for Bound {}

impl Ord for Bound {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl PartialOrd for Bound {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One query vector's selection over float32 scores with error bounds: the `k` smallest upper
/// bounds seen (their largest is a threshold no true top-`k` row's score exceeds) and the rows
/// whose lower bound is within it, to score exactly.
struct Selection {
    k: usize,
    uppers: BinaryHeap<Bound>,
    /// The largest of `uppers` once it holds `k`, else infinity.
    threshold: f64,
    candidates: Vec<(f64, u64)>,
}

impl Selection {
    fn new(k: usize) -> Selection {
        Selection {
            k,
            uppers: BinaryHeap::with_capacity(k + 1),
            threshold: f64::INFINITY,
            candidates: Vec::new(),
        }
    }

    /// A row's float32 `score` with its error bound `err` (most rows fail the first test);
    /// one out of float32's range, NaN or of a zero vector is scored exactly.
    #[inline]
    fn offer(&mut self, score: f64, err: f64, row: u64) {
        if score - err > self.threshold {
            return;
        }
        match score.is_finite() && err.is_finite() {
            true => self.push(score - err, score + err, row),
            false => self.push(f64::NEG_INFINITY, f64::INFINITY, row),
        }
    }

    /// A row whose score lies in `[lower, upper]`.
    #[inline]
    fn push(&mut self, lower: f64, upper: f64, row: u64) {
        if lower > self.threshold {
            return; // the common case, once `k` rows are in
        }
        if upper < self.threshold {
            self.uppers.push(Bound(upper));
            if self.uppers.len() > self.k {
                self.uppers.pop();
            }
            if self.uppers.len() == self.k {
                self.threshold = self.uppers.peek().map_or(f64::INFINITY, |b| b.0);
            }
        }
        self.candidates.push((lower, row));
        if self.candidates.len() >= 4 * self.k + 1024 {
            let t = self.threshold;
            self.candidates.retain(|c| c.0 <= t);
        }
    }
}

/// Rows of float32 vectors scored per task by [`nearest_f32`].
const F32_ROWS_PER_TASK: usize = 8192;
/// Rows scored per call of the float32 kernel (their vectors stay in L1 across the queries).
const F32_TILE: usize = 32;

/// [`nearest`] over a float32 column: float32 scores (the fast kernel) with a rigorous error
/// bound pick the candidates, which the exact float64 metric then ranks, so the rows and
/// distances are exactly those of the float64 path (and of SQL's functions).
#[allow(clippy::too_many_arguments)]
fn nearest_f32(
    list: &arrow_array::FixedSizeListArray,
    values: &[f32],
    d: usize,
    queries: &[Vec<f64>],
    k: usize,
    count: usize,
    row_at: &(dyn Fn(usize) -> usize + Sync),
    metric: Metric,
    negate: bool,
) -> Vec<Neighbour> {
    use rayon::prelude::*;
    let m = queries.len();
    let q32: Vec<Vec<f32>> = queries.iter().map(|q| q.iter().map(|&v| v as f32).collect()).collect();
    let q32s: Vec<&[f32]> = q32.iter().map(Vec::as_slice).collect();
    let qnorm2: Vec<f64> = queries.iter().map(|q| q.iter().map(|v| v * v).sum()).collect();
    let qnorm: Vec<f64> = qnorm2.iter().map(|n| n.sqrt()).collect();
    let g = super::kernels::error_bound(d);
    // A cosine query of a zero vector has no neighbours (no direction).
    let live: Vec<bool> = qnorm2.iter().map(|&n| metric != Metric::Cosine || n > 0.0).collect();
    let per_task = |task: usize| -> Vec<Selection> {
        let mut picks: Vec<Selection> = (0..m).map(|_| Selection::new(k)).collect();
        let (mut norms, mut dots) = (vec![0.0f32; F32_TILE], vec![0.0f32; F32_TILE * m]);
        let mut rows: Vec<&[f32]> = Vec::with_capacity(F32_TILE);
        let mut ids: Vec<u64> = Vec::with_capacity(F32_TILE);
        let start = task * F32_ROWS_PER_TASK;
        let end = count.min(start + F32_ROWS_PER_TASK);
        let mut p = start;
        while p < end {
            rows.clear();
            ids.clear();
            while p < end && rows.len() < F32_TILE {
                let i = row_at(p);
                p += 1;
                if !list.is_null(i) {
                    rows.push(&values[i * d..(i + 1) * d]);
                    ids.push(i as u64);
                }
            }
            super::kernels::block(&rows, &q32s, &mut norms, &mut dots, d);
            for (r, &i) in ids.iter().enumerate() {
                let nx2 = f64::from(norms[r]);
                let norm = (nx2, nx2.sqrt());
                let dots = &dots[r * m..(r + 1) * m];
                for j in (0..m).filter(|&j| live[j]) {
                    let (score, err) = score_bound(metric, norm, f64::from(dots[j]), qnorm2[j], qnorm[j], g);
                    picks[j].offer(score, err, i);
                }
            }
        }
        picks
    };
    let tasks: Vec<Vec<Selection>> =
        (0..count.div_ceil(F32_ROWS_PER_TASK)).into_par_iter().map(per_task).collect();
    // Per query: the threshold over all tasks, then the candidates within it scored exactly.
    let scored: Vec<Vec<Candidate>> = (0..m)
        .into_par_iter()
        .map(|j| {
            let mut uppers: Vec<Bound> = tasks.iter().flat_map(|t| t[j].uppers.iter().copied()).collect();
            uppers.sort_unstable();
            let t = if uppers.len() < k { f64::INFINITY } else { uppers[k - 1].0 };
            tasks
                .iter()
                .flat_map(|task| task[j].candidates.iter())
                .filter(|c| c.0 <= t)
                .filter_map(|&(_, i)| {
                    let i = i as usize;
                    let s = metric.of(&values[i * d..(i + 1) * d], &queries[j])?;
                    Some(Candidate { score: if negate { -s } else { s }, index: i as u64 })
                })
                .collect()
        })
        .collect();
    best(scored.into_iter(), k, negate)
}

/// One query's search over float32 vectors held outside the table (an index's copies, in its
/// lists' order): [`Selection`] over their float32 scores, then the candidates scored exactly
/// from the table's column, as in [`nearest_f32`].
pub(crate) struct CopySearch<'a> {
    metric: Metric,
    negate: bool,
    q: &'a [f64],
    q32: Vec<f32>,
    qnorm2: f64,
    qnorm: f64,
    g: f64,
    d: usize,
    pick: Selection,
}

impl<'a> CopySearch<'a> {
    /// A search for the `k` nearest to `q` by `metric` (`"l2"`, `"cosine"`, `"dot"`).
    ///
    /// # Errors
    /// An unknown metric.
    pub(crate) fn new(q: &'a [f64], k: usize, metric: &str) -> Result<CopySearch<'a>> {
        let (metric, negate) = search_metric(metric, "nearest")?;
        let qnorm2: f64 = q.iter().map(|v| v * v).sum();
        Ok(CopySearch {
            metric,
            negate,
            q,
            q32: q.iter().map(|&v| v as f32).collect(),
            qnorm2,
            qnorm: qnorm2.sqrt(),
            g: super::kernels::error_bound(q.len()),
            d: q.len(),
            pick: Selection::new(k),
        })
    }

    /// Offers the rows `ids` whose vectors are `vectors` (`ids.len() × d`, float32), those
    /// `keep` accepts.
    pub(crate) fn offer(&mut self, ids: &[u64], vectors: &[f32], keep: impl Fn(u64) -> bool) {
        let d = self.d;
        if self.metric == Metric::Cosine && self.qnorm == 0.0 {
            return; // no direction: no neighbours
        }
        let (mut norms, mut dots) = ([0.0f32; F32_TILE], [0.0f32; F32_TILE]);
        let mut rows: Vec<&[f32]> = Vec::with_capacity(F32_TILE);
        let mut tile_ids: Vec<u64> = Vec::with_capacity(F32_TILE);
        let q32 = [self.q32.as_slice()];
        for (chunk_ids, chunk) in ids.chunks(F32_TILE).zip(vectors.chunks(F32_TILE * d)) {
            rows.clear();
            tile_ids.clear();
            for (&i, v) in chunk_ids.iter().zip(chunk.chunks_exact(d)) {
                if keep(i) {
                    rows.push(v);
                    tile_ids.push(i);
                }
            }
            super::kernels::block(&rows, &q32, &mut norms, &mut dots, d);
            for (r, &i) in tile_ids.iter().enumerate() {
                let nx2 = f64::from(norms[r]);
                let (score, err) = score_bound(
                    self.metric,
                    (nx2, nx2.sqrt()),
                    f64::from(dots[r]),
                    self.qnorm2,
                    self.qnorm,
                    self.g,
                );
                self.pick.offer(score, err, i);
            }
        }
    }

    /// Takes in what `other` (a search of the same query over other rows) was offered.
    pub(crate) fn merge(&mut self, other: CopySearch<'_>) {
        let k = self.pick.k;
        for b in other.pick.uppers {
            self.pick.uppers.push(b);
            if self.pick.uppers.len() > k {
                self.pick.uppers.pop();
            }
        }
        if self.pick.uppers.len() == k {
            self.pick.threshold = self.pick.uppers.peek().map_or(f64::INFINITY, |b| b.0);
        }
        let t = self.pick.threshold;
        self.pick.candidates.extend(other.pick.candidates.into_iter().filter(|c| c.0 <= t));
    }

    /// The `k` best rows offered, scored exactly from `list` (the table's vector column), best
    /// first (ties by index), as neighbours of query `query`; and `extra` (exact neighbours of
    /// the same query found elsewhere) merged in.
    ///
    /// # Errors
    /// A column whose elements are not numbers.
    pub(crate) fn finish(
        self,
        list: &arrow_array::FixedSizeListArray,
        query: usize,
        extra: &[Neighbour],
    ) -> Result<Vec<Neighbour>> {
        let elements = Elements::of(list.values(), Span::empty())?;
        let k = self.pick.k;
        let t = self.pick.threshold;
        let mut buf = vec![0.0f64; self.d];
        let mut all: Vec<Candidate> = self
            .pick
            .candidates
            .iter()
            .filter(|c| c.0 <= t)
            .filter_map(|&(_, i)| {
                let s = elements.row(i as usize, self.d, &mut buf).metric(self.metric, self.q)?;
                Some(Candidate { score: if self.negate { -s } else { s }, index: i })
            })
            .collect();
        all.extend(extra.iter().map(|n| Candidate {
            score: if self.negate { -n.distance } else { n.distance },
            index: n.index,
        }));
        let mut out = best(std::iter::once(all), k, self.negate);
        out.iter_mut().for_each(|n| n.query = query);
        Ok(out)
    }
}
