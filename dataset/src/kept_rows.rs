//! The rows of a data file a version keeps ([`KeptRows`]): its rows less its deleted ones,
//! held as the deleted ones. Deleting 5 rows of a 100 M-row data file makes no list of the
//! 100 M rows kept: a row is found by a binary search over the deletions, a column's kept
//! values are its runs between them; the list is made only for a reader that asks for it.

use std::sync::{Arc, OnceLock};

use arrow_buffer::BooleanBuffer;

use crate::error::{Error, Result};
use crate::IndexSet;

/// A data file's rows less its deleted ones, ascending.
#[derive(Debug)]
pub struct KeptRows {
    file_rows: u64,
    deleted: IndexSet,
    list: OnceLock<Arc<Vec<u64>>>,
}

impl KeptRows {
    /// The rows of a data file of `file_rows` rows less `deleted`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a deleted row past the end.
    pub fn new(file_rows: u64, deleted: IndexSet) -> Result<KeptRows> {
        if let Some(last) = deleted.last().filter(|&d| d >= file_rows) {
            return Err(Error::InvalidArgument {
                what: "deleted rows".into(),
                why: format!("row {last} is past the data file's {file_rows} rows"),
            });
        }
        Ok(KeptRows { file_rows, deleted, list: OnceLock::new() })
    }

    /// Rows kept.
    pub fn len(&self) -> u64 {
        self.file_rows - self.deleted.len() as u64
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows of the data file.
    pub fn file_rows(&self) -> u64 {
        self.file_rows
    }

    /// The deleted rows, ascending.
    pub fn deleted(&self) -> &IndexSet {
        &self.deleted
    }

    /// The data-file row of the `local`-th kept row (`local < len()`), without listing them:
    /// `local` plus the deleted rows before it.
    pub fn get(&self, local: u64) -> u64 {
        // d[i] - i (the kept rows before the i-th deleted one) never decreases: the deleted
        // rows before the answer are those with d[i] - i <= local.
        let d = self.deleted.as_slice();
        let (mut lo, mut hi) = (0usize, d.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if d[mid] - mid as u64 <= local {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        local + lo as u64
    }

    /// The position among the kept rows of data-file row `row`; `None` when it is deleted (or
    /// past the end).
    pub fn local(&self, row: u64) -> Option<u64> {
        if row >= self.file_rows {
            return None;
        }
        match self.deleted.as_slice().binary_search(&row) {
            Ok(_) => None,
            Err(before) => Some(row - before as u64),
        }
    }

    /// The kept rows as runs `start..end`, ascending.
    pub fn runs(&self) -> impl Iterator<Item = std::ops::Range<u64>> + '_ {
        let ends = self.deleted.iter().chain(std::iter::once(self.file_rows));
        let mut next = 0u64;
        ends.filter_map(move |d| {
            let run = next..d;
            next = d + 1;
            (!run.is_empty()).then_some(run)
        })
    }

    /// The kept rows, one by one.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs().flatten()
    }

    /// A bit per data-file row, set where it is kept.
    pub fn mask(&self) -> BooleanBuffer {
        let n = self.file_rows as usize;
        let mut words = vec![u64::MAX; n.div_ceil(64)];
        for d in self.deleted.iter() {
            words[d as usize / 64] &= !(1 << (d % 64));
        }
        BooleanBuffer::new(arrow_buffer::Buffer::from_vec(words), 0, n)
    }

    /// The kept rows as a list, made on first use (what gathering from the data file's rows
    /// and the loader read).
    pub fn list(&self) -> Arc<Vec<u64>> {
        Arc::clone(self.list.get_or_init(|| {
            let mut rows = Vec::with_capacity(self.len() as usize);
            for run in self.runs() {
                rows.extend(run);
            }
            Arc::new(rows)
        }))
    }

    /// Whether the list is made.
    pub fn is_listed(&self) -> bool {
        self.list.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way of reading the kept rows agrees with the plain list, over random deletions
    /// (none, all, runs at both ends).
    #[test]
    fn kept_rows_read_any_way_agree_with_the_list() {
        let mut state = 7u64;
        for case in 0..300u64 {
            let n = case % 131;
            let mut deleted = Vec::new();
            for r in 0..n {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if (state >> 33) % 5 < case % 6 {
                    deleted.push(r);
                }
            }
            let kept = KeptRows::new(n, IndexSet::from_sorted(deleted.clone()).unwrap()).unwrap();
            let want: Vec<u64> = (0..n).filter(|r| !deleted.contains(r)).collect();
            assert_eq!(kept.len(), want.len() as u64);
            assert_eq!(kept.iter().collect::<Vec<_>>(), want, "case {case}");
            assert!(!kept.is_listed());
            for (local, &row) in want.iter().enumerate() {
                assert_eq!(kept.get(local as u64), row, "case {case}");
                assert_eq!(kept.local(row), Some(local as u64), "case {case}");
            }
            for &d in &deleted {
                assert_eq!(kept.local(d), None);
            }
            assert_eq!(kept.local(n), None);
            let mask: Vec<u64> = kept.mask().set_indices().map(|i| i as u64).collect();
            assert_eq!(mask, want);
            assert_eq!(kept.list().as_slice(), want.as_slice());
            let runs: Vec<_> = kept.runs().collect();
            assert!(runs.windows(2).all(|w| w[0].end < w[1].start) && runs.iter().all(|r| !r.is_empty()));
        }
        assert!(KeptRows::new(3, IndexSet::from_sorted(vec![3]).unwrap()).is_err());
    }
}
