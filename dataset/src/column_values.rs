//! What a data file's column files give one field ([`ColumnValues`]): a full column's values
//! and the patches after it, kept as written and made into one array only when a reader needs
//! the whole column. Updating 10 rows of a 100 M-row data file writes a patch of 10 values; a
//! query that does not read the field, `ds[i]` and the next edit never make 100 M of them
//! (docs/FORMAT.md §13).

use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef, UInt64Array};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;

use crate::error::{Error, Result};

/// The column of file-row positions in a patch column file (`docs/FORMAT.md` §13).
pub const PATCH_ROWS: &str = "_row";

/// The fields column files replace or add in a data file, by name, each as written (a full
/// column and patches), made into one array on a reader's first use ([`ColumnValues`]).
pub type Columns = std::collections::BTreeMap<String, Arc<ColumnValues>>;

/// One patch: the data-file rows it sets, ascending (the last of a repeated row kept), and for
/// each the position of its value in `values`.
#[derive(Debug)]
struct Patch {
    rows: Vec<u64>,
    at: Vec<u32>,
    values: ArrayRef,
    /// The patch as written (its rows in file order), for the whole column.
    written: UInt64Array,
}

/// The values column files give one field of a data file: one per data-file row, where a null
/// cell is a row they leave alone (the data file's value stands) or a NULL (see
/// [`crate::versioned::view::FragmentValues::nulls`]). Made of a full column's values (or none:
/// the data file's, all null here) and patches over them, in order (a later one wins); the
/// whole array ([`ColumnValues::array`]) is made once, on first use.
#[derive(Debug)]
pub struct ColumnValues {
    len: usize,
    data_type: DataType,
    base: Option<ArrayRef>,
    patches: Vec<Patch>,
    whole: OnceLock<ArrayRef>,
}

impl ColumnValues {
    /// A full column's values.
    pub fn full(values: ArrayRef) -> ColumnValues {
        ColumnValues {
            len: values.len(),
            data_type: values.data_type().clone(),
            whole: OnceLock::from(Arc::clone(&values)),
            base: Some(values),
            patches: Vec::new(),
        }
    }

    /// No values yet for `len` rows of type `data_type`: every cell null (the data file's value,
    /// or a NULL where it lacks the field), until patches set some.
    pub fn none(len: usize, data_type: DataType) -> ColumnValues {
        ColumnValues { len, data_type, base: None, patches: Vec::new(), whole: OnceLock::new() }
    }

    /// Sets the rows `rows` (data-file positions; a repeated one takes its last value) to
    /// `values`, over what is there: a patch column file's contents (`file` names it in errors).
    ///
    /// # Errors
    /// Rows and values of different lengths or types, a row past the data file's end.
    pub fn patch(&mut self, rows: &ArrayRef, values: ArrayRef, file: &str) -> Result<()> {
        let bad = |why: String| Error::InvalidArgument { what: format!("column file {file}"), why };
        let rows = rows
            .as_any()
            .downcast_ref::<UInt64Array>()
            .ok_or_else(|| bad(format!("its {PATCH_ROWS} column is not uint64")))?;
        if rows.len() != values.len() || values.data_type() != &self.data_type {
            return Err(bad(format!(
                "{} rows for {} {} values",
                rows.len(),
                values.len(),
                values.data_type()
            )));
        }
        if rows.null_count() > 0 {
            return Err(bad("its rows have nulls".into()));
        }
        if let Some(&r) = rows.values().iter().find(|&&r| r >= self.len as u64) {
            return Err(bad(format!("row {r} is past the data file's {}", self.len)));
        }
        let raw = rows.values();
        let (sorted, at) = if raw.windows(2).all(|w| w[0] < w[1]) {
            (raw.to_vec(), (0..raw.len() as u32).collect())
        } else {
            // Stable: of a repeated row, the last value written comes last, and is kept.
            let mut order: Vec<u32> = (0..raw.len() as u32).collect();
            order.sort_by_key(|&j| raw[j as usize]);
            let mut rows: Vec<u64> = Vec::with_capacity(order.len());
            let mut at: Vec<u32> = Vec::with_capacity(order.len());
            for j in order {
                let r = raw[j as usize];
                if rows.last() == Some(&r) {
                    *at.last_mut().expect("a row before") = j;
                } else {
                    rows.push(r);
                    at.push(j);
                }
            }
            (rows, at)
        };
        self.patches.push(Patch { rows: sorted, at, values, written: rows.clone() });
        self.whole = OnceLock::new();
        Ok(())
    }

    /// Whether the whole array is made (a full column's is; patches' on first use).
    pub fn is_made(&self) -> bool {
        self.whole.get().is_some()
    }

    /// Values: one per data-file row.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The type of its values (a column file's type of the field).
    pub fn data_type(&self) -> &DataType {
        &self.data_type
    }

    /// The rows patches set over the data file's values (no full column under them), ascending,
    /// each with where its cell is ([`ColumnValues::locate`]); `None` over a full column.
    pub fn patched_rows(&self) -> Option<Vec<(u64, (&ArrayRef, usize))>> {
        if self.base.is_some() {
            return None;
        }
        let mut rows: Vec<u64> = self.patches.iter().flat_map(|p| p.rows.iter().copied()).collect();
        rows.sort_unstable();
        rows.dedup();
        rows.into_iter().map(|r| Some((r, self.locate(r as usize)?))).collect()
    }

    /// Whether some cell is null: a row left to the data file (or NULL), without making the
    /// whole array.
    pub fn has_nulls(&self) -> bool {
        match (&self.base, self.whole.get()) {
            (_, Some(whole)) => whole.null_count() > 0,
            (None, None) => self
                .patched_rows()
                .is_none_or(|rows| rows.len() < self.len || rows.iter().any(|(_, (a, at))| a.is_null(*at))),
            (Some(base), None) => {
                let maybe = base.null_count() > 0 || self.patches.iter().any(|p| p.values.null_count() > 0);
                maybe && (0..self.len).any(|r| !self.is_valid(r))
            }
        }
    }

    /// Every cell column files give (where each one's value is), without making the whole
    /// array: the full column's rows and the patched ones, the latest value of each; null cells
    /// included.
    pub fn cells(&self) -> Vec<(&ArrayRef, usize)> {
        match self.patched_rows() {
            Some(rows) => rows.into_iter().map(|(_, cell)| cell).collect(),
            None => (0..self.len).filter_map(|r| self.locate(r)).collect(),
        }
    }

    /// Where the cell of data-file row `row` is: an array and a position in it (the cell may be
    /// null); `None` where no column file gives the row a cell (the data file's value, or a
    /// NULL where it lacks the field). No whole array is made.
    pub fn locate(&self, row: usize) -> Option<(&ArrayRef, usize)> {
        for p in self.patches.iter().rev() {
            if let Ok(k) = p.rows.binary_search(&(row as u64)) {
                return Some((&p.values, p.at[k] as usize));
            }
        }
        self.base.as_ref().filter(|_| row < self.len).map(|base| (base, row))
    }

    /// Whether the cell of data-file row `row` is set (not null), without making the whole array.
    pub fn is_valid(&self, row: usize) -> bool {
        self.locate(row).is_some_and(|(a, k)| a.is_valid(k))
    }

    /// The whole column, made on first use: the base (or nulls) with every patch applied in
    /// order.
    ///
    /// # Errors
    /// Arrow errors interleaving values of a type without a faster path.
    pub fn array(&self) -> Result<ArrayRef> {
        if let Some(whole) = self.whole.get() {
            return Ok(Arc::clone(whole));
        }
        let mut array = match &self.base {
            Some(base) => Arc::clone(base),
            None => arrow_array::new_null_array(&self.data_type, self.len),
        };
        for p in &self.patches {
            array = apply_patch(&array, p.written.values(), &p.values)?;
        }
        Ok(Arc::clone(self.whole.get_or_init(|| array)))
    }
}

/// `base` with the values at rows `rows` replaced by `values` (rows below `base.len()`).
fn apply_patch(base: &ArrayRef, rows: &[u64], values: &ArrayRef) -> Result<ArrayRef> {
    // Ints and floats (labels, scores): written in place into a copy of the base, so patching
    // 10 rows of a 100 M-row field over the data file's values (an all-null base) touches 10
    // values, not a list of 100 M picks.
    use arrow_array::types::{Float64Type, Int64Type};
    if let Some(patched) = scatter::<Int64Type>(base, rows, values) {
        return Ok(patched);
    }
    if let Some(patched) = scatter::<Float64Type>(base, rows, values) {
        return Ok(patched);
    }
    let mut picks: Vec<(usize, usize)> = (0..base.len()).map(|r| (0, r)).collect();
    for (j, &r) in rows.iter().enumerate() {
        picks[r as usize] = (1, j);
    }
    Ok(arrow_select::interleave::interleave(&[base.as_ref(), values.as_ref()], &picks)?)
}

/// [`apply_patch`] of a primitive column: `base`'s values (zeros allocated lazily for an
/// all-null base) and validity with row `rows[j]` set to `values[j]`, the last of a row
/// repeated winning, as `interleave` gives. `None` for another type.
fn scatter<T: arrow_array::ArrowPrimitiveType>(
    base: &ArrayRef,
    rows: &[u64],
    values: &ArrayRef,
) -> Option<ArrayRef> {
    use arrow_array::cast::AsArray;
    let (base, values) = (base.as_primitive_opt::<T>()?, values.as_primitive_opt::<T>()?);
    let n = base.len();
    let all_null = base.null_count() == n && n > 0;
    let mut out: Vec<T::Native> = match all_null {
        true => vec![T::Native::default(); n],
        false => base.values().to_vec(),
    };
    let mut valid = (base.null_count() > 0 || values.null_count() > 0).then(|| {
        let mut b = arrow_buffer::BooleanBufferBuilder::new(n);
        match base.nulls() {
            Some(nulls) => b.append_buffer(nulls.inner()),
            None => b.append_n(n, true),
        }
        b
    });
    for (j, &r) in rows.iter().enumerate() {
        out[r as usize] = values.value(j);
        if let Some(v) = valid.as_mut() {
            v.set_bit(r as usize, values.is_valid(j));
        }
    }
    let nulls = valid.map(|mut v| NullBuffer::new(v.finish()));
    Some(Arc::new(
        arrow_array::PrimitiveArray::<T>::new(out.into(), nulls).with_data_type(base.data_type().clone()),
    ))
}

#[cfg(test)]
mod tests {
    use arrow_array::{Int64Array, StringArray};

    use super::*;

    fn rows(r: &[u64]) -> ArrayRef {
        Arc::new(UInt64Array::from(r.to_vec()))
    }

    /// Cell by cell, `locate` (no whole array) gives what the whole array holds, over every
    /// shape of patch: unsorted rows, repeated ones (the last wins), patches over patches, over
    /// a full column and over none, values with nulls; ints (scattered in place) and text
    /// (interleaved).
    #[test]
    fn cells_located_without_the_whole_column_are_the_whole_columns() {
        let int = |v: Vec<Option<i64>>| -> ArrayRef { Arc::new(Int64Array::from(v)) };
        let text = |v: Vec<Option<&str>>| -> ArrayRef { Arc::new(StringArray::from(v)) };
        /// A base (or none) and patches (rows, values) over it.
        type Case = (Option<ArrayRef>, Vec<(Vec<u64>, ArrayRef)>);
        let cases: Vec<Case> = vec![
            (None, vec![(vec![7, 2, 7], int(vec![Some(1), Some(2), Some(3)]))]),
            (
                Some(int((0..10).map(Some).collect())),
                vec![
                    (vec![9, 0], int(vec![None, Some(-1)])),
                    (vec![0, 5, 5], int(vec![Some(40), Some(50), None])),
                ],
            ),
            (None, vec![(vec![3], text(vec![Some("a")])), (vec![3, 1], text(vec![None, Some("b")]))]),
            (
                Some(text((0..10).map(|_| Some("x")).collect())),
                vec![(vec![4, 4], text(vec![Some("y"), Some("z")]))],
            ),
        ];
        for (k, (base, patches)) in cases.into_iter().enumerate() {
            let ty = patches[0].1.data_type().clone();
            let mut c = match base {
                Some(b) => ColumnValues::full(b),
                None => ColumnValues::none(10, ty),
            };
            for (r, v) in patches {
                c.patch(&rows(&r), v, "p.arrow").unwrap();
            }
            let located: Vec<Option<String>> = (0..10)
                .map(|r| {
                    c.locate(r).filter(|(a, j)| a.is_valid(*j)).map(|(a, j)| format!("{:?}", a.slice(j, 1)))
                })
                .collect();
            let whole = c.array().unwrap();
            assert_eq!(whole.len(), 10);
            let want: Vec<Option<String>> =
                (0..10).map(|r| whole.is_valid(r).then(|| format!("{:?}", whole.slice(r, 1)))).collect();
            assert_eq!(located, want, "case {k}");
            assert_eq!(c.has_nulls(), whole.null_count() > 0, "case {k}");
            let mut cells: Vec<String> = c
                .cells()
                .iter()
                .filter(|(a, j)| a.is_valid(*j))
                .map(|(a, j)| format!("{:?}", a.slice(*j, 1)))
                .collect();
            let mut valid: Vec<String> = want.iter().flatten().cloned().collect();
            cells.sort();
            valid.sort();
            assert_eq!(cells, valid, "case {k}");
            for r in 0..10 {
                assert_eq!(c.is_valid(r), whole.is_valid(r), "case {k} row {r}");
            }
        }
    }

    #[test]
    fn a_patch_written_in_place_equals_the_interleaved_one() {
        let patched = |base: &ArrayRef, rows: &ArrayRef, values: &ArrayRef| {
            let mut c = ColumnValues::full(Arc::clone(base));
            c.patch(rows, Arc::clone(values), "f")?;
            c.array()
        };
        use arrow_array::{Float64Array, Int64Array, UInt64Array};
        let n = 1000;
        let rows: ArrayRef = Arc::new(UInt64Array::from(vec![5u64, 999, 0, 5, 17]));
        let bases: Vec<ArrayRef> = vec![
            arrow_array::new_null_array(&arrow_schema::DataType::Int64, n),
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
            Arc::new(Int64Array::from_iter((0..n as i64).map(|x| (x % 3 != 0).then_some(x)))),
        ];
        let values: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
            Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(4), None])),
        ];
        let interleaved = |base: &ArrayRef, values: &ArrayRef| {
            let mut picks: Vec<(usize, usize)> = (0..n).map(|r| (0, r)).collect();
            for (j, r) in [5usize, 999, 0, 5, 17].into_iter().enumerate() {
                picks[r] = (1, j);
            }
            arrow_select::interleave::interleave(&[base.as_ref(), values.as_ref()], &picks).unwrap()
        };
        for base in &bases {
            for v in &values {
                let got = patched(base, &rows, v).unwrap();
                assert_eq!(got.as_ref(), interleaved(base, v).as_ref());
            }
        }
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![0.5, f64::NAN, -0.0, 1.0, 2.0]));
        let base = arrow_array::new_null_array(&arrow_schema::DataType::Float64, n);
        let got = patched(&base, &rows, &floats).unwrap();
        let want = interleaved(&base, &floats);
        assert_eq!(got.to_data().nulls(), want.to_data().nulls());
        let (g, w) = (
            got.as_any().downcast_ref::<Float64Array>().unwrap(),
            want.as_any().downcast_ref::<Float64Array>().unwrap(),
        );
        assert!((0..n).all(|r| g.is_null(r) || g.value(r).to_bits() == w.value(r).to_bits()));
        // A row past the end is an error naming it, as before.
        let past: ArrayRef = Arc::new(UInt64Array::from(vec![n as u64]));
        let one: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        assert!(patched(&bases[1], &past, &one).unwrap_err().to_string().contains("past the data file"));
    }

    #[test]
    fn bad_patches_are_refused_naming_the_file() {
        let mut c = ColumnValues::none(5, DataType::Int64);
        let v: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        let e = c.patch(&rows(&[5]), Arc::clone(&v), "x.arrow").unwrap_err().to_string();
        assert!(e.contains("x.arrow") && e.contains("row 5 is past"), "{e}");
        let e = c.patch(&rows(&[1, 2]), Arc::clone(&v), "x.arrow").unwrap_err().to_string();
        assert!(e.contains("2 rows for 1"), "{e}");
        let f: ArrayRef = Arc::new(arrow_array::Float64Array::from(vec![1.0]));
        assert!(c.patch(&rows(&[1]), f, "x.arrow").is_err());
        let not_u64: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        assert!(c.patch(&not_u64, v, "x.arrow").unwrap_err().to_string().contains("not uint64"));
    }
}
