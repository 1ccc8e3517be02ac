//! Per-column summaries of a selection: counts of the values of categorical columns (text,
//! booleans, integers with few distinct values), histograms of numeric ones, and the image
//! sizes of each image field. Computed on whole Arrow columns, so a million rows cost
//! milliseconds (text columns read their payload pages).

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

use super::key::{keys, Key};
use super::selection::Selection;
use super::text::with_class;
use crate::error::Result;
use crate::Table;

/// Integer columns with at most this many distinct values are counted, not binned.
const MAX_CATEGORIES: usize = 20;
/// Most values listed in a count summary (the rest are summed as "other").
const TOP: usize = 10;
/// Bins of a histogram.
const BINS: usize = 20;

/// One column over the selection.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSummary {
    /// The column (`name.size` for an image field's sizes).
    pub column: String,
    /// Its Arrow type, as text.
    pub data_type: String,
    /// Rows summarised.
    pub rows: u64,
    /// Of which null.
    pub nulls: u64,
    /// The summary.
    pub kind: SummaryKind,
}

/// What a summary holds.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryKind {
    /// The most frequent values with their counts (most frequent first, ties in value order),
    /// how many distinct values there are, and the rows of the values not listed.
    Counts {
        /// `(value, rows)`.
        top: Vec<(String, u64)>,
        /// Distinct non-null values.
        distinct: u64,
        /// Rows whose value is not in `top` (nulls excluded).
        other: u64,
    },
    /// The column could not be read: why.
    Unreadable(String),
    /// Equal-width bins from `min` to `max` (the last bin includes `max`).
    Histogram {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
        /// Mean.
        mean: f64,
        /// Rows per bin.
        bins: Vec<u64>,
    },
}

/// Summaries of every column of `table` (but `index` and `row_id`, and the opaque bytes of
/// custom fields) over the selection's rows, then each image field's sizes.
pub(crate) fn summarise(
    table: &Table<'_>,
    selection: &Selection,
    classes: Option<&[String]>,
) -> Result<Vec<ColumnSummary>> {
    let names: Vec<&str> =
        table.column_names().into_iter().filter(|n| !matches!(*n, "index" | "row_id")).collect();
    table.prefetch(&names);
    let at_rows = |name: &str| -> Result<ArrayRef> { selection.gather(table.column(name)?) };
    let mut out = Vec::new();
    for name in &names {
        if matches!(
            table.schema().field_with_name(name).map(|f| f.data_type().clone()),
            Ok(DataType::FixedSizeBinary(_))
        ) {
            continue;
        }
        // A column that cannot be read (text that is not UTF-8, a row that disagrees with the
        // allocation table) is summarised as such: the rest of the page still shows.
        let summary = at_rows(name).and_then(|values| summarise_column(name, values.as_ref(), classes));
        out.push(summary.unwrap_or_else(|e| ColumnSummary {
            column: name.to_string(),
            data_type: String::new(),
            rows: selection.rows.len() as u64,
            nulls: 0,
            kind: SummaryKind::Unreadable(e.to_string()),
        }));
    }
    for (field, ty) in table.fields() {
        if !ty.is_image() {
            continue;
        }
        let (w, h) = (at_rows(&format!("{field}.width"))?, at_rows(&format!("{field}.height"))?);
        let (w, h) = (arrow_cast::cast(&w, &DataType::UInt64)?, arrow_cast::cast(&h, &DataType::UInt64)?);
        let (w, h) = (
            w.as_primitive::<arrow_array::types::UInt64Type>(),
            h.as_primitive::<arrow_array::types::UInt64Type>(),
        );
        let mut counts: HashMap<(u64, u64), u64> = HashMap::new();
        for i in 0..w.len() {
            *counts.entry((w.value(i), h.value(i))).or_default() += 1;
        }
        let mut sizes: Vec<((u64, u64), u64)> = counts.into_iter().collect();
        sizes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let distinct = sizes.len() as u64;
        let listed: Vec<(String, u64)> =
            sizes.iter().take(TOP).map(|((w, h), c)| (format!("{w}×{h}"), *c)).collect();
        let other = sizes.iter().skip(TOP).map(|s| s.1).sum();
        out.push(ColumnSummary {
            column: format!("{field}.size"),
            data_type: "width×height".into(),
            rows: w.len() as u64,
            nulls: 0,
            kind: SummaryKind::Counts { top: listed, distinct, other },
        });
    }
    Ok(out)
}

/// One column's summary: a vector column's is the histogram of its vectors' L2 norms (a
/// broken embedding is a norm of 0 or far from the others).
fn summarise_column(name: &str, values: &dyn Array, classes: Option<&[String]>) -> Result<ColumnSummary> {
    let dt = values.data_type();
    if let DataType::FixedSizeList(item, d) = dt {
        let norms = l2_norms(values.as_fixed_size_list())?;
        return Ok(ColumnSummary {
            column: name.to_string(),
            data_type: format!("vector of {d} {}, L2 norm", item.data_type().to_string().to_lowercase()),
            rows: values.len() as u64,
            nulls: values.null_count() as u64,
            kind: histogram(&norms)?,
        });
    }
    let numeric = dt.is_integer() || dt.is_floating();
    let counted = if numeric && !dt.is_floating() { few_values(values, MAX_CATEGORIES)? } else { !numeric };
    let kind = if counted { counts(name, values, classes)? } else { histogram(values)? };
    Ok(ColumnSummary {
        column: name.to_string(),
        data_type: dt.to_string(),
        rows: values.len() as u64,
        nulls: values.null_count() as u64,
        kind,
    })
}

/// True when an integer column has at most `limit` distinct values.
fn few_values(values: &dyn Array, limit: usize) -> Result<bool> {
    let ints = arrow_cast::cast(values, &DataType::Float64)?;
    let ints = ints.as_primitive::<Float64Type>();
    let mut seen: Vec<u64> = Vec::with_capacity(limit + 1);
    for v in ints.iter().flatten() {
        let bits = v.to_bits();
        if !seen.contains(&bits) {
            seen.push(bits);
            if seen.len() > limit {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The value counts of a column.
fn counts(name: &str, values: &dyn Array, classes: Option<&[String]>) -> Result<SummaryKind> {
    let mut by_key: HashMap<Key, u64> = HashMap::new();
    for k in keys(values)? {
        if k != Key::Null {
            *by_key.entry(k).or_default() += 1;
        }
    }
    let mut all: Vec<(Key, u64)> = by_key.into_iter().collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let distinct = all.len() as u64;
    let other = all.iter().skip(TOP).map(|(_, c)| c).sum();
    let top = all.into_iter().take(TOP).map(|(k, c)| (with_class(name, k.to_string(), classes), c)).collect();
    Ok(SummaryKind::Counts { top, distinct, other })
}

/// The L2 norm of each vector of a vector column (NULL for a NULL vector), in f64.
pub(crate) fn l2_norms(list: &arrow_array::FixedSizeListArray) -> Result<arrow_array::Float64Array> {
    let d = list.value_length() as usize;
    let values = arrow_cast::cast(list.values(), &DataType::Float64)?;
    let values = values.as_primitive::<Float64Type>().values();
    // A slice's values are sliced with it: its vector i starts at i * d.
    Ok((0..list.len())
        .map(|i| {
            list.is_valid(i).then(|| {
                let v = &values[i * d..(i + 1) * d];
                v.iter().map(|x| x * x).sum::<f64>().sqrt()
            })
        })
        .collect())
}

/// The histogram of a numeric column (no bins when every value is null).
fn histogram(values: &dyn Array) -> Result<SummaryKind> {
    let floats = arrow_cast::cast(values, &DataType::Float64)?;
    let floats = floats.as_primitive::<Float64Type>();
    let (mut min, mut max, mut sum, mut n) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0u64);
    for v in floats.iter().flatten().filter(|v| v.is_finite()) {
        min = min.min(v);
        max = max.max(v);
        sum += v;
        n += 1;
    }
    if n == 0 {
        return Ok(SummaryKind::Histogram { min: 0.0, max: 0.0, mean: 0.0, bins: Vec::new() });
    }
    let bins_n = if max > min { BINS } else { 1 };
    let mut bins = vec![0u64; bins_n];
    let width = (max - min) / bins_n as f64;
    for v in floats.iter().flatten().filter(|v| v.is_finite()) {
        let b = if width > 0.0 { ((v - min) / width) as usize } else { 0 };
        bins[b.min(bins_n - 1)] += 1;
    }
    Ok(SummaryKind::Histogram { min, max, mean: sum / n as f64, bins })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Float64Array, Int64Array, StringArray};

    use super::*;

    #[test]
    fn few_integers_are_counted_with_class_names() {
        let labels: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), Some(0), Some(1), None, Some(1)]));
        let classes = vec!["cat".to_string(), "dog".to_string()];
        let s = summarise_column("label", labels.as_ref(), Some(&classes)).unwrap();
        assert_eq!((s.rows, s.nulls), (5, 1));
        assert_eq!(
            s.kind,
            SummaryKind::Counts {
                top: vec![("1 (dog)".into(), 3), ("0 (cat)".into(), 1)],
                distinct: 2,
                other: 0
            }
        );
    }

    #[test]
    fn many_integers_and_floats_are_binned() {
        let many: ArrayRef = Arc::new(Int64Array::from((0..1000).collect::<Vec<i64>>()));
        let SummaryKind::Histogram { min, max, bins, .. } =
            summarise_column("x", many.as_ref(), None).unwrap().kind
        else {
            panic!("not a histogram")
        };
        assert_eq!((min, max, bins.len(), bins.iter().sum::<u64>()), (0.0, 999.0, BINS, 1000));
        assert!(bins.iter().all(|&b| b == 50));
        let same: ArrayRef = Arc::new(Float64Array::from(vec![2.5; 7]));
        let SummaryKind::Histogram { bins, mean, .. } =
            summarise_column("y", same.as_ref(), None).unwrap().kind
        else {
            panic!("not a histogram")
        };
        assert_eq!((bins, mean), (vec![7], 2.5));
    }

    #[test]
    fn text_lists_the_most_frequent_and_sums_the_rest() {
        let words: Vec<String> =
            (0..30).flat_map(|k| std::iter::repeat_n(format!("w{k:02}"), k + 1)).collect();
        let text: ArrayRef = Arc::new(StringArray::from(words));
        let SummaryKind::Counts { top, distinct, other } =
            summarise_column("t", text.as_ref(), None).unwrap().kind
        else {
            panic!("not counts")
        };
        assert_eq!(distinct, 30);
        assert_eq!(top[0], ("w29".to_string(), 30));
        assert_eq!(top.len(), TOP);
        assert_eq!(other, (1..=20).sum::<u64>());
    }

    #[test]
    fn vectors_are_summarised_by_their_norms_slices_included() {
        use arrow_array::{FixedSizeListArray, Float32Array};
        let values = Float32Array::from(vec![3.0, 4.0, 0.0, 0.0, 6.0, 8.0]);
        let item = Arc::new(arrow_schema::Field::new("item", DataType::Float32, false));
        let list = FixedSizeListArray::new(item, 2, Arc::new(values), None);
        let norms = l2_norms(&list).unwrap();
        assert_eq!(norms.values().to_vec(), vec![5.0, 0.0, 10.0]);
        let sliced = list.slice(1, 2);
        assert_eq!(l2_norms(&sliced).unwrap().values().to_vec(), vec![0.0, 10.0]);
        let s = summarise_column("emb", &list, None).unwrap();
        assert_eq!(s.data_type, "vector of 2 float32, L2 norm");
        assert!(matches!(s.kind, SummaryKind::Histogram { min, max, .. } if min == 0.0 && max == 10.0));
    }
}
