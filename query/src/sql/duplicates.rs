//! Near-duplicates: every pair of rows whose vectors lie within a distance of each other (in
//! one table, or one row from each of two), and the groups those pairs link.
//!
//! The search is exact and all-pairs, in blocks: a block of rows times a block of rows is one
//! float32 matrix product (`matrixmultiply`'s GEMM), whose entries with the rows' norms give
//! each pair's distance to within a rigorous error bound (`kernels::error_bound`); the pairs
//! that may be within the threshold are then measured with the exact float64 metric (the SQL
//! functions'), so the pairs found are exactly those `l2_distance(a, b) <= t` holds for.

use arrow_array::cast::AsArray;
use arrow_array::{Array, FixedSizeListArray};
use arrow_schema::DataType;
use sqlparser::tokenizer::Span;

use super::functions::{Elements, Metric};
use crate::error::{Error, Result};
use crate::index_set::IndexSet;
use crate::table::Table;

/// Two rows within the threshold: `a` of the first table, `b` of the second (or of the same,
/// with `a < b`), and their distance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    /// The first row (the table's index).
    pub a: u64,
    /// The second row.
    pub b: u64,
    /// Their distance by the metric asked for.
    pub distance: f64,
}

/// Rows of the first side per task (and per GEMM).
const BLOCK_A: usize = 256;
/// Rows of the second side per GEMM.
const BLOCK_B: usize = 2048;

/// One side of a search: its rows' vectors as float32 (in place, or copied), their norms, and
/// the column's elements for the exact metric.
struct Side<'a> {
    ids: Vec<u64>,
    vectors: std::borrow::Cow<'a, [f32]>,
    norms: Vec<f64>,
    elements: Elements<'a>,
}

impl<'a> Side<'a> {
    fn of(list: &'a FixedSizeListArray, d: usize, rows: Option<&IndexSet>) -> Result<Side<'a>> {
        let elements = Elements::of(list.values(), Span::empty())?;
        let n = list.len();
        let all = rows.is_none() && list.null_count() == 0;
        let ids: Vec<u64> = match rows {
            Some(r) => r.iter().filter(|&i| (i as usize) < n && !list.is_null(i as usize)).collect(),
            None => (0..n as u64).filter(|&i| !list.is_null(i as usize)).collect(),
        };
        let vectors = match (&elements, all) {
            (Elements::F32(v), true) => std::borrow::Cow::Borrowed(&v[..n * d]),
            _ => {
                let mut out = vec![0.0f32; ids.len() * d];
                let mut buf = vec![0.0f64; d];
                for (k, &i) in ids.iter().enumerate() {
                    elements.fill(i as usize * d, &mut buf);
                    for (o, x) in out[k * d..(k + 1) * d].iter_mut().zip(&buf) {
                        *o = *x as f32;
                    }
                }
                std::borrow::Cow::Owned(out)
            }
        };
        let rows: Vec<&[f32]> = vectors.chunks_exact(d.max(1)).collect();
        let mut norms32 = vec![0.0f32; rows.len()];
        super::kernels::block(&rows, &[], &mut norms32, &mut [], d);
        let norms = norms32.iter().map(|&n| f64::from(n).sqrt()).collect();
        Ok(Side { ids, vectors, norms, elements })
    }
}

/// The vector column `column` of `table`, checked, and its length.
pub(crate) fn vector_column(table: &Table, column: &str, what: &str) -> Result<(FixedSizeListArray, usize)> {
    let values = table.column(column)?;
    let DataType::FixedSizeList(_, d) = values.data_type() else {
        return Err(Error::InvalidArgument {
            what: format!("{what} in '{column}'"),
            why: format!("the column is {}, not a vector column", values.data_type()),
        });
    };
    let d = *d as usize;
    Ok((values.as_fixed_size_list().clone(), d))
}

fn metric_of(name: &str, threshold: f64, what: &str) -> Result<Metric> {
    let bad = |why: String| Error::InvalidArgument { what: what.to_string(), why };
    let metric = match name {
        "l2" => Metric::L2,
        "cosine" => Metric::Cosine,
        other => return Err(bad(format!("metric '{other}' is not one of cosine, l2 (a distance)"))),
    };
    if !(threshold >= 0.0 && threshold.is_finite()) {
        return Err(bad(format!("threshold must be a distance of at least 0, not {threshold}")));
    }
    Ok(metric)
}

/// Every pair of rows of `table` (of `rows`, or all) whose vectors in `column` are within
/// `threshold` of each other by `metric` (`"l2"` or `"cosine"`), `a < b`, in order; rows whose
/// vector is NULL (or, for cosine, zero) are in none.
///
/// # Errors
/// [`Error::InvalidArgument`] for another metric, a negative or non-finite threshold, a column
/// that is not a vector column; as [`Table::column`].
pub fn near_pairs(
    table: &Table,
    column: &str,
    threshold: f64,
    metric: &str,
    rows: Option<&IndexSet>,
) -> Result<Vec<Pair>> {
    let what = format!("near-duplicates in '{column}'");
    let metric = metric_of(metric, threshold, &what)?;
    let (list, d) = vector_column(table, column, "near-duplicates")?;
    let side = Side::of(&list, d, rows)?;
    Ok(search(&side, &side, true, d, metric, threshold))
}

/// Every pair of a row of `a` (of `rows_a`) and a row of `b` (of `rows_b`) whose vectors in
/// `column` (of one length in both) are within `threshold` by `metric`, in order of `a`, then
/// `b`.
///
/// # Errors
/// As [`near_pairs`]; vectors of two lengths.
pub fn near_pairs_between(
    a: &Table,
    rows_a: Option<&IndexSet>,
    b: &Table,
    rows_b: Option<&IndexSet>,
    column: &str,
    threshold: f64,
    metric: &str,
) -> Result<Vec<Pair>> {
    let what = format!("near-duplicates in '{column}'");
    let metric = metric_of(metric, threshold, &what)?;
    let (list_a, da) = vector_column(a, column, "near-duplicates")?;
    let (list_b, db) = vector_column(b, column, "near-duplicates")?;
    if da != db {
        return Err(Error::InvalidArgument {
            what,
            why: format!("the first dataset's vectors have {da} elements, the second's {db}"),
        });
    }
    let (sa, sb) = (Side::of(&list_a, da, rows_a)?, Side::of(&list_b, db, rows_b)?);
    Ok(search(&sa, &sb, false, da, metric, threshold))
}

/// The pairs of `a` × `b` within `threshold` (`same`: one side, pairs `a < b` only).
fn search(a: &Side, b: &Side, same: bool, d: usize, metric: Metric, threshold: f64) -> Vec<Pair> {
    use rayon::prelude::*;
    let g = super::kernels::error_bound(d);
    // Compared in the squared space for l2 (what the float32 sums give).
    let limit = if metric == Metric::L2 { threshold * threshold } else { threshold };
    let blocks = a.ids.len().div_ceil(BLOCK_A);
    let found: Vec<Vec<Pair>> = (0..blocks)
        .into_par_iter()
        .map(|blk| {
            let a0 = blk * BLOCK_A;
            let a1 = a.ids.len().min(a0 + BLOCK_A);
            let (ma, mut out) = (a1 - a0, Vec::new());
            let mut dots = vec![0.0f32; BLOCK_A * BLOCK_B];
            let (mut x, mut y) = (vec![0.0f64; d], vec![0.0f64; d]);
            let mut b0 = if same { a0 } else { 0 };
            while b0 < b.ids.len() {
                let b1 = b.ids.len().min(b0 + BLOCK_B);
                let mb = b1 - b0;
                if d > 0 {
                    gemm(&a.vectors[a0 * d..a1 * d], &b.vectors[b0 * d..b1 * d], ma, mb, d, &mut dots);
                }
                for i in 0..ma {
                    let (na, ka) = (a.norms[a0 + i], a0 + i);
                    let row = &dots[i * mb..(i + 1) * mb];
                    let start = if same { (ka + 1).saturating_sub(b0) } else { 0 };
                    for (j, &dot) in row.iter().enumerate().skip(start) {
                        let nb = b.norms[b0 + j];
                        let dot = f64::from(dot);
                        let (score, err) = match metric {
                            Metric::L2 => (na * na + nb * nb - 2.0 * dot, g * (na + nb) * (na + nb)),
                            _ => (1.0 - dot / (na * nb), 4.0 * g),
                        };
                        // Most pairs fail here; NaN (a zero vector, overflow) falls through.
                        if score - err > limit {
                            continue;
                        }
                        let kb = b0 + j;
                        a.elements.fill(a.ids[ka] as usize * d, &mut x);
                        b.elements.fill(b.ids[kb] as usize * d, &mut y);
                        if let Some(dist) = metric.of(&x, &y).filter(|&t| t <= threshold) {
                            out.push(Pair { a: a.ids[ka], b: b.ids[kb], distance: dist });
                        }
                    }
                }
                b0 = b1;
            }
            out
        })
        .collect();
    let mut pairs: Vec<Pair> = found.into_iter().flatten().collect();
    pairs.sort_by(|p, q| p.a.cmp(&q.a).then(p.b.cmp(&q.b)));
    pairs
}

/// `out[i * mb + j] = a[i] · b[j]` for `ma` rows of `a` and `mb` rows of `b`, each of `d`
/// floats, row-major.
pub(crate) fn gemm(a: &[f32], b: &[f32], ma: usize, mb: usize, d: usize, out: &mut [f32]) {
    assert!(a.len() >= ma * d && b.len() >= mb * d && out.len() >= ma * mb);
    #[allow(unsafe_code)] // a foreign kernel's raw-pointer interface (see the crate's note)
    // SAFETY: `a` holds ma × d floats (row stride d, column stride 1), `b` as bᵀ holds d × mb
    // (row stride 1, column stride d), `out` ma × mb (row stride mb): all asserted in bounds
    // above; `out` does not alias the inputs (a `&mut` borrow).
    unsafe {
        matrixmultiply::sgemm(
            ma,
            d,
            mb,
            1.0,
            a.as_ptr(),
            d as isize,
            1,
            b.as_ptr(),
            1,
            d as isize,
            0.0,
            out.as_mut_ptr(),
            mb as isize,
            1,
        );
    }
}

/// The groups `pairs` link (connected components: a row is in a group when it is within the
/// threshold of any member), as `(group, index, distance)`: the groups numbered from 0 in order
/// of their first row, each group's rows in ascending order, `distance` the row's to its
/// nearest other member (so never over the threshold).
pub fn groups(pairs: &[Pair]) -> Vec<(usize, u64, f64)> {
    let mut ids: Vec<u64> = pairs.iter().flat_map(|p| [p.a, p.b]).collect();
    ids.sort_unstable();
    ids.dedup();
    let at = |id: u64| ids.binary_search(&id).unwrap_or_default();
    let mut parent: Vec<usize> = (0..ids.len()).collect();
    let mut nearest = vec![f64::INFINITY; ids.len()];
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for p in pairs {
        let (pa, pb) = (at(p.a), at(p.b));
        nearest[pa] = nearest[pa].min(p.distance);
        nearest[pb] = nearest[pb].min(p.distance);
        let (x, y) = (root(&mut parent, pa), root(&mut parent, pb));
        // The smaller position is the root: a group's root is its first row.
        if x != y {
            parent[x.max(y)] = x.min(y);
        }
    }
    let mut by_root: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for i in 0..ids.len() {
        let r = root(&mut parent, i);
        by_root.entry(r).or_default().push(i);
    }
    by_root
        .into_values()
        .enumerate()
        .flat_map(|(g, members)| members.into_iter().map(move |i| (g, i)))
        .map(|(g, i)| (g, ids[i], nearest[i]))
        .collect()
}

/// The image field `field` of `table`, checked.
fn image_field(table: &Table, field: &str) -> Result<beton_storage::FieldType> {
    let fields = table.fields();
    let Some((_, ty)) = fields.iter().find(|(name, _)| name == field) else {
        return Err(Error::InvalidArgument {
            what: format!("near-duplicates by '{field}'"),
            why: format!(
                "no such field; the image fields are: {}",
                fields
                    .iter()
                    .filter(|(_, t)| t.is_image())
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };
    if !ty.is_image() {
        return Err(Error::InvalidArgument {
            what: format!("near-duplicates by '{field}'"),
            why: format!("'{field}' is a {} field, not an image field", ty.kind().name()),
        });
    }
    Ok(ty.clone())
}

/// The rows of `rows` (or all) and their images' perceptual hashes (`ImageRef::phash`), in
/// parallel; rows whose image is NULL are left out.
///
/// # Errors
/// A field that is not an image field; an image that does not decode (naming its sample).
pub fn image_hashes(table: &Table, field: &str, rows: Option<&IndexSet>) -> Result<Vec<(u64, u64)>> {
    use rayon::prelude::*;
    let ty = image_field(table, field)?;
    let ids: Vec<u64> = match rows {
        Some(r) => r.iter().filter(|&i| i < table.num_rows()).collect(),
        None => (0..table.num_rows()).collect(),
    };
    let hashes: Vec<Option<(u64, u64)>> = ids
        .par_iter()
        .map(|&i| match table.value(i, field, &ty)? {
            Some(beton_storage::Value::Image(image)) => image.phash().map(|h| Some((i, h))).map_err(|e| {
                Error::InvalidArgument { what: format!("sample {i}, field '{field}'"), why: e.to_string() }
            }),
            _ => Ok(None),
        })
        .collect::<Result<_>>()?;
    Ok(hashes.into_iter().flatten().collect())
}

/// Every pair of rows of `table` (of `rows`) whose images in `field` are within `threshold`
/// bits by perceptual hash (`distance`: the Hamming distance), `a < b`, in order. Threshold 0
/// asks for exact duplicates: the same pHash *and* the same decoded pixels.
///
/// # Errors
/// As [`image_hashes`]; a threshold over 64.
pub fn image_pairs(table: &Table, field: &str, threshold: u32, rows: Option<&IndexSet>) -> Result<Vec<Pair>> {
    let hashes = image_hashes(table, field, rows)?;
    let pairs = hamming_pairs(&hashes, &hashes, true, threshold, field)?;
    exact_only(pairs, threshold, (table, table), field)
}

/// [`image_pairs`] between a row of `a` and a row of `b`.
///
/// # Errors
/// As [`image_pairs`].
pub fn image_pairs_between(
    a: &Table,
    rows_a: Option<&IndexSet>,
    b: &Table,
    rows_b: Option<&IndexSet>,
    field: &str,
    threshold: u32,
) -> Result<Vec<Pair>> {
    let (ha, hb) = (image_hashes(a, field, rows_a)?, image_hashes(b, field, rows_b)?);
    let pairs = hamming_pairs(&ha, &hb, false, threshold, field)?;
    exact_only(pairs, threshold, (a, b), field)
}

/// Pairs of `(row, hash)` of `a` × `b` at most `threshold` bits apart (`same`: `a < b`).
fn hamming_pairs(
    a: &[(u64, u64)],
    b: &[(u64, u64)],
    same: bool,
    threshold: u32,
    field: &str,
) -> Result<Vec<Pair>> {
    use rayon::prelude::*;
    if threshold > 64 {
        return Err(Error::InvalidArgument {
            what: format!("near-duplicates by '{field}'"),
            why: format!("threshold {threshold} is over 64 bits, a pHash's length"),
        });
    }
    let found: Vec<Vec<Pair>> = a
        .par_chunks(BLOCK_A)
        .enumerate()
        .map(|(blk, chunk)| {
            let mut out = Vec::new();
            for (k, &(ia, ha)) in chunk.iter().enumerate() {
                let from = if same { blk * BLOCK_A + k + 1 } else { 0 };
                for &(ib, hb) in &b[from.min(b.len())..] {
                    let bits = (ha ^ hb).count_ones();
                    if bits <= threshold {
                        out.push(Pair { a: ia, b: ib, distance: f64::from(bits) });
                    }
                }
            }
            out
        })
        .collect();
    Ok(found.into_iter().flatten().collect())
}

/// For threshold 0, the pairs whose decoded pixels are the same (a pHash match is not an exact
/// duplicate); other thresholds keep every pair.
fn exact_only(
    pairs: Vec<Pair>,
    threshold: u32,
    (ta, tb): (&Table, &Table),
    field: &str,
) -> Result<Vec<Pair>> {
    use rayon::prelude::*;
    if threshold > 0 {
        return Ok(pairs);
    }
    let (tya, tyb) = (image_field(ta, field)?, image_field(tb, field)?);
    let pixels = |t: &Table,
                  ty: &beton_storage::FieldType,
                  i: u64|
     -> Result<Option<beton_storage::Pixels>> {
        match t.value(i, field, ty)? {
            Some(beton_storage::Value::Image(image)) => image.decode().map(Some).map_err(|e| {
                Error::InvalidArgument { what: format!("sample {i}, field '{field}'"), why: e.to_string() }
            }),
            _ => Ok(None),
        }
    };
    let same: Vec<bool> = pairs
        .par_iter()
        .map(|p| Ok(pixels(ta, &tya, p.a)? == pixels(tb, &tyb, p.b)?))
        .collect::<Result<_>>()?;
    Ok(pairs.into_iter().zip(same).filter(|(_, s)| *s).map(|(p, _)| p).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(a: u64, b: u64, distance: f64) -> Pair {
        Pair { a, b, distance }
    }

    #[test]
    fn groups_are_connected_components_in_order_of_their_first_row() {
        // A chain 9-4-30 (4 and 30 are never paired directly), a pair 2-7, and 30 again.
        let pairs = [pair(4, 9, 0.5), pair(2, 7, 0.1), pair(9, 30, 0.2), pair(4, 30, 0.9)];
        assert_eq!(
            groups(&pairs),
            vec![(0, 2, 0.1), (0, 7, 0.1), (1, 4, 0.5), (1, 9, 0.2), (1, 30, 0.2)],
            "each row's distance is to its nearest member"
        );
        assert!(groups(&[]).is_empty());
    }

    #[test]
    fn hamming_pairs_within_the_threshold_and_not_past_64() {
        let hashes = [(0, 0u64), (1, 0b111), (2, u64::MAX), (3, 0b1)];
        let pairs = hamming_pairs(&hashes, &hashes, true, 2, "image").unwrap();
        let got: Vec<(u64, u64, f64)> = pairs.iter().map(|p| (p.a, p.b, p.distance)).collect();
        assert_eq!(got, vec![(0, 3, 1.0), (1, 3, 2.0)]);
        let all = hamming_pairs(&hashes, &hashes, true, 64, "image").unwrap();
        assert_eq!(all.len(), 6);
        assert!(hamming_pairs(&hashes, &hashes, true, 65, "image").is_err());
    }
}
