//! What changed between two versions of a dataset: rows added and deleted (by row id), columns
//! added and dropped, and for each column both have, the rows whose value differs (for images,
//! bytes, JSON and arrays also under the field's own name, compared value by value).

use std::collections::BTreeMap;

use arrow_array::{Array, UInt64Array};

use super::{values, VersionView, VersionedDataset};
use crate::error::Result;

/// The changes from one version to another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// The older version.
    pub from: u64,
    /// The newer version.
    pub to: u64,
    /// Row ids in `to` only.
    pub added: Vec<u64>,
    /// Row ids in `from` only.
    pub deleted: Vec<u64>,
    /// Columns in `to` only.
    pub added_columns: Vec<String>,
    /// Columns in `from` only.
    pub dropped_columns: Vec<String>,
    /// For each column of both, the row ids (in both) whose value differs.
    pub changed: BTreeMap<String, Vec<u64>>,
}

fn is_ascending(ids: &[u64]) -> bool {
    ids.windows(2).all(|w| w[0] < w[1])
}

/// (added, deleted, positions in a, positions in b, ids) of two row-id lists.
type Matched = (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>);

/// Matches two ascending row-id lists in one pass.
fn merge(ida: &[u64], idb: &[u64]) -> Matched {
    let (mut added, mut deleted, mut in_a, mut in_b, mut ids) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < ida.len() || j < idb.len() {
        match (ida.get(i), idb.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                in_a.push(i as u64);
                in_b.push(j as u64);
                ids.push(x);
                i += 1;
                j += 1;
            }
            (Some(&x), Some(&y)) if x < y => {
                deleted.push(x);
                i += 1;
            }
            (Some(&x), None) => {
                deleted.push(x);
                i += 1;
            }
            (_, Some(&y)) => {
                added.push(y);
                j += 1;
            }
            (None, None) => break,
        }
    }
    (added, deleted, in_a, in_b, ids)
}

/// Matches two row-id lists in any order (sorted copies and binary search).
fn match_by_search(ida: &[u64], idb: &[u64]) -> Matched {
    let mut pos_a: Vec<(u64, u64)> = ida.iter().copied().zip(0u64..).collect();
    pos_a.sort_unstable();
    let mut sorted_b = idb.to_vec();
    sorted_b.sort_unstable();
    let added =
        sorted_b.iter().copied().filter(|id| pos_a.binary_search_by_key(id, |p| p.0).is_err()).collect();
    let deleted = pos_a.iter().map(|p| p.0).filter(|id| sorted_b.binary_search(id).is_err()).collect();
    // Rows of both: positions in a and in b, in b's order.
    let (mut in_a, mut in_b, mut ids) = (Vec::new(), Vec::new(), Vec::new());
    for (j, id) in idb.iter().enumerate() {
        if let Ok(k) = pos_a.binary_search_by_key(id, |p| p.0) {
            in_a.push(pos_a[k].1);
            in_b.push(j as u64);
            ids.push(*id);
        }
    }
    (added, deleted, in_a, in_b, ids)
}

/// The differences from `a` to `b`.
///
/// # Errors
/// Errors opening either version's data.
pub fn diff(a: &VersionedDataset, b: &VersionedDataset) -> Result<Diff> {
    diff_views((a, &a.view()?), (b, &b.view()?))
}

/// [`diff`] over views of the two versions a caller has open already (a diff's gallery reads
/// its rows from the same views).
///
/// # Errors
/// Errors reading either version's data.
pub fn diff_views(
    a: (&VersionedDataset, &VersionView),
    b: (&VersionedDataset, &VersionView),
) -> Result<Diff> {
    let ((a, va), (b, vb)) = (a, b);
    let (ta, tb) = (va.table()?, vb.table()?);
    let (ida, idb) = (ta.row_ids()?, tb.row_ids()?);
    let (added, deleted, in_a, in_b, ids) = match is_ascending(&ida) && is_ascending(&idb) {
        // The usual case (row ids ascend through a version): one merge pass.
        true => merge(&ida, &idb),
        false => match_by_search(&ida, &idb),
    };
    let (in_a, in_b) = (UInt64Array::from(in_a), UInt64Array::from(in_b));
    let names_a = ta.column_names();
    let names_b = tb.column_names();
    let mut changed = BTreeMap::new();
    for name in &names_b {
        if *name == "index" || *name == "row_id" || !names_a.contains(name) {
            continue;
        }
        let (ca, cb) = (ta.column(name)?, tb.column(name)?);
        let rows: Vec<u64> = if ca.data_type() != cb.data_type() {
            ids.clone()
        } else {
            let x = arrow_select::take::take(ca.as_ref(), &in_a, None)?;
            let y = arrow_select::take::take(cb.as_ref(), &in_b, None)?;
            let differs = distinct(&x, &y)?;
            ids.iter().zip(differs).filter(|(_, d)| *d).map(|(id, _)| *id).collect()
        };
        if !rows.is_empty() {
            changed.insert(name.to_string(), rows);
        }
    }
    // Images, bytes, JSON, arrays: their table columns (sizes) can stay the same when a value
    // changes, so edited ones are compared value by value wherever a row's value does not come
    // from the same data-file row in both versions.
    let (ma, mb) = (a.manifest(), b.manifest());
    let schema_a = va.schema()?;
    for (name, ty) in vb.schema()? {
        let in_both = schema_a.iter().any(|(n, t)| *n == name && *t == ty);
        if values::is_plain(&ty) || !in_both || !(ma.edited(&name) || mb.edited(&name)) {
            continue;
        }
        let mut rows = Vec::new();
        for ((&ra, &rb), &id) in in_a.values().iter().zip(in_b.values()).zip(&ids) {
            let (da, fa, ca) = ta.value_source(ra, &name)?;
            let (db, fb, cb) = tb.value_source(rb, &name)?;
            let same_place = !ca && !cb && fa == fb && da.path() == db.path();
            // A NULL and a value differ; two NULLs do not.
            if !same_place && ta.value(ra, &name, &ty)? != tb.value(rb, &name, &ty)? {
                rows.push(id);
            }
        }
        if !rows.is_empty() {
            changed.insert(name, rows);
        }
    }
    Ok(Diff {
        from: a.version(),
        to: b.version(),
        added,
        deleted,
        added_columns: names_b.iter().filter(|n| !names_a.contains(n)).map(|n| n.to_string()).collect(),
        dropped_columns: names_a.iter().filter(|n| !names_b.contains(n)).map(|n| n.to_string()).collect(),
        changed,
    })
}

/// Whether each row of `x` differs from the same row of `y` (IS DISTINCT FROM: two NULLs are the
/// same): Arrow's kernel for flat types, a row comparator for nested ones (vector columns).
fn distinct(x: &dyn arrow_array::Array, y: &dyn arrow_array::Array) -> Result<Vec<bool>> {
    if !x.data_type().is_nested() {
        return Ok(arrow_ord::cmp::distinct(&x, &y)?.iter().map(|d| d.unwrap_or(true)).collect());
    }
    let cmp = arrow_ord::ord::make_comparator(x, y, arrow_schema::SortOptions::default())?;
    Ok((0..x.len())
        .map(|i| match (x.is_valid(i), y.is_valid(i)) {
            (true, true) => cmp(i, i) != std::cmp::Ordering::Equal,
            (a, b) => a != b,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_search_match_rows_alike() {
        let a: Vec<u64> = (0..200).filter(|i| i % 7 != 3).collect();
        let b: Vec<u64> = (0..230).filter(|i| i % 5 != 1).collect();
        let (added, deleted, in_a, in_b, ids) = merge(&a, &b);
        assert_eq!((added.clone(), deleted.clone()), {
            let (ad, de, ..) = match_by_search(&a, &b);
            (ad, de)
        });
        let (_, _, sa, sb, sids) = match_by_search(&a, &b);
        assert_eq!((in_a, in_b, ids), (sa, sb, sids));
        assert!(added.iter().all(|x| !a.contains(x)) && deleted.iter().all(|x| !b.contains(x)));
    }
}
