//! Which page every sample lives on: what QUASI_RANDOM groups samples by.
//!
//! FFCV's memory managers read whole pages, so an order that draws the samples of a few pages at
//! a time reads each page once instead of once per sample. A [`PageMap`] holds, for every sample
//! of a dataset, a page id:
//!
//! - a sample with payloads (images, bytes, arrays, ...) lives on the page of its allocation with
//!   the lowest pointer, `ptr / page_size`, numbered from the first data page;
//! - a sample without payloads (a scalar-only dataset) is read from its row of the data table, so
//!   it is grouped by the `page_size` block of the table holding the start of its row, in ids
//!   after all payload pages, so QUASI_RANDOM still reads neighbouring rows together.
//!
//! Ids are small (from 0, below [`num_pages`](PageMap::num_pages), about the number of pages of
//! the file), so grouping an epoch's samples by page is a counting sort. Most files lay their
//! samples out in order (a writer appends them; a data table is in row order), so each page holds
//! one run of consecutive samples: the map is then stored as the runs' bounds, O(pages) instead
//! of O(samples), and QUASI_RANDOM groups an epoch's ids with a binary search per page. Other
//! maps store one id a sample, as `u32` whenever the ids fit.

use beton_storage::Dataset;

/// The page id of every sample of a dataset; see the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageMap {
    pages: Pages,
    /// One more than the largest id (0 for no samples).
    num_pages: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Pages {
    /// Every id fits in a u32: the case for any file under 2^32 pages.
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
    /// Page `k` holds samples `bounds[k]..bounds[k + 1]`: runs in order, none empty, so ids are
    /// dense and increase with the sample.
    Runs(Vec<u64>),
}

/// No payload seen yet for a sample.
const NONE: u64 = u64::MAX;

impl PageMap {
    /// The page of every sample of `dataset`: one pass over its allocation table (O(allocations),
    /// no allocation per sample), then one over the samples without payloads. A dataset without
    /// payloads, or whose samples' pages increase with the sample, is stored as runs.
    pub fn from_dataset(dataset: &Dataset) -> Self {
        let n = dataset.num_samples();
        let page_size = dataset.page_size().max(1);
        let table = dataset.data_table_offset();
        let row_size = dataset.row_size() as u64;
        if dataset.num_allocations() == 0 {
            return Self::table_runs(n, table, row_size, page_size);
        }
        let mut lowest = vec![NONE; n as usize];
        for k in 0..dataset.num_allocations() {
            let e = dataset.allocation(k);
            // Sample ids were validated on open; `get_mut` keeps a bad one from panicking.
            if let Some(p) = lowest.get_mut(e.sample_id as usize) {
                *p = (*p).min(e.ptr);
            }
        }
        let first_data_page = dataset.data_start() / page_size;
        let mut pages = lowest;
        let mut num_payload_pages = 0;
        for p in pages.iter_mut().filter(|p| **p != NONE) {
            // Allocations lie inside the data pages (validated on open); saturate all the same.
            *p = (*p / page_size).saturating_sub(first_data_page);
            num_payload_pages = num_payload_pages.max(*p + 1);
        }
        for (i, p) in pages.iter_mut().enumerate().filter(|(_, p)| **p == NONE) {
            let table_page = (table + i as u64 * row_size) / page_size - table / page_size;
            *p = num_payload_pages + table_page;
        }
        Self::dense(pages)
    }

    /// The map of a data table's samples without payloads: sample `i` on the `page_size` block
    /// holding the start of its row, as runs (blocks a row steps over are left out).
    fn table_runs(n: u64, table: u64, row_size: u64, page_size: u64) -> Self {
        let mut bounds = vec![0];
        if n > 0 && row_size > 0 {
            let first_block = table / page_size;
            let last_block = (table + (n - 1) * row_size) / page_size;
            for block in first_block + 1..=last_block {
                // The first row starting in `block`.
                let row = (block * page_size - table).div_ceil(row_size);
                if row > *bounds.last().unwrap_or(&0) && row < n {
                    bounds.push(row);
                }
            }
        }
        if n > 0 {
            bounds.push(n);
        }
        let num_pages = bounds.len() as u64 - 1;
        PageMap { pages: Pages::Runs(bounds), num_pages }
    }

    /// A map from the page id of every sample, `pages[i]` for sample `i`: any `u64`s, renumbered
    /// densely in increasing order. For tests, synthetic datasets and custom layouts.
    pub fn from_pages(pages: Vec<u64>) -> Self {
        let mut distinct = pages.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let dense = pages.iter().map(|p| distinct.partition_point(|d| d < p) as u64).collect();
        Self::dense(dense)
    }

    /// The map whose page `k` holds samples `bounds[k]..bounds[k + 1]` (`bounds` increasing from
    /// 0; the last bound is the number of samples).
    pub(crate) fn from_runs(bounds: Vec<u64>) -> Self {
        debug_assert!(bounds.first() == Some(&0) && bounds.windows(2).all(|w| w[0] < w[1]));
        let num_pages = bounds.len().saturating_sub(1) as u64;
        PageMap { pages: Pages::Runs(bounds), num_pages }
    }

    /// Wraps ids that are already small enough to count-sort by, as runs when they never
    /// decrease from one sample to the next (renumbered densely: only their order matters).
    fn dense(pages: Vec<u64>) -> Self {
        let num_pages = pages.iter().max().map_or(0, |&m| m + 1);
        if let Some(bounds) = runs_of(&pages) {
            return Self::from_runs(bounds);
        }
        let pages = if num_pages <= u64::from(u32::MAX) + 1 {
            Pages::Narrow(pages.into_iter().map(|p| p as u32).collect())
        } else {
            Pages::Wide(pages)
        };
        Self { pages, num_pages }
    }

    /// Number of samples mapped.
    pub fn num_samples(&self) -> u64 {
        match &self.pages {
            Pages::Narrow(v) => v.len() as u64,
            Pages::Wide(v) => v.len() as u64,
            Pages::Runs(b) => b.last().copied().unwrap_or(0),
        }
    }

    /// One more than the largest page id: ids are in `0..num_pages()`.
    pub fn num_pages(&self) -> u64 {
        self.num_pages
    }

    /// The page of sample `id`, or `None` if `id >= num_samples()`.
    pub fn page(&self, id: u64) -> Option<u64> {
        let i = usize::try_from(id).ok()?;
        match &self.pages {
            Pages::Narrow(v) => v.get(i).map(|&p| u64::from(p)),
            Pages::Wide(v) => v.get(i).copied(),
            Pages::Runs(b) => (id < self.num_samples()).then(|| b.partition_point(|&s| s <= id) as u64 - 1),
        }
    }

    /// The page of sample `id`, which the caller has checked is mapped.
    pub(crate) fn page_unchecked(&self, id: u64) -> u64 {
        match &self.pages {
            Pages::Narrow(v) => u64::from(v[id as usize]),
            Pages::Wide(v) => v[id as usize],
            Pages::Runs(b) => b.partition_point(|&s| s <= id) as u64 - 1,
        }
    }

    /// The runs' bounds when the map is stored as runs: page `k` holds samples
    /// `bounds[k]..bounds[k + 1]`.
    pub(crate) fn runs(&self) -> Option<&[u64]> {
        match &self.pages {
            Pages::Runs(b) => Some(b),
            _ => None,
        }
    }

    /// The maps of several datasets end to end, each over its samples `rows` (all of them for
    /// `None`; ascending), pages of different datasets distinct and in order: a version's map.
    pub(crate) fn concat(maps: Vec<(PageMap, Option<&[u64]>)>) -> PageMap {
        if maps.iter().all(|(m, _)| m.runs().is_some()) {
            let mut bounds = vec![0u64];
            let mut start = 0u64;
            for (map, rows) in maps {
                let runs = map.runs().unwrap_or(&[]);
                let len = rows.map_or(map.num_samples(), |r| r.len() as u64);
                for &b in runs.iter().skip(1) {
                    // Samples of this dataset before the run's end.
                    let kept = rows.map_or(b, |r| r.partition_point(|&x| x < b) as u64);
                    if start + kept > *bounds.last().unwrap_or(&0) {
                        bounds.push(start + kept);
                    }
                }
                start += len;
            }
            return PageMap::from_runs(bounds);
        }
        let mut pages = Vec::new();
        let mut offset = 0u64;
        for (map, rows) in maps {
            let mut push = |r: u64| pages.push(offset + map.page(r).unwrap_or(0));
            match rows {
                Some(rows) => rows.iter().for_each(|&r| push(r)),
                None => (0..map.num_samples()).for_each(push),
            }
            offset += map.num_pages() + 1;
        }
        PageMap::from_pages(pages)
    }
}

/// The bounds of `pages` as runs, when the ids never decrease (the runs renumber them densely,
/// in the same order).
fn runs_of(pages: &[u64]) -> Option<Vec<u64>> {
    let mut bounds = vec![0];
    let mut current = pages.first().copied().unwrap_or(0);
    for (i, &p) in pages.iter().enumerate() {
        if p == current {
            continue;
        }
        if p < current {
            return None;
        }
        current = p;
        bounds.push(i as u64);
    }
    if !pages.is_empty() {
        bounds.push(pages.len() as u64);
    }
    Some(bounds)
}

#[cfg(test)]
mod tests {
    use beton_storage::{FieldSpec, FieldType, SampleValue, Writer, WriterOptions};

    use super::*;

    const MIB: u64 = 1 << 20;

    /// A file of `n` samples on 2 MiB pages in a temporary folder: field `label` (the sample's
    /// index) and a field of type `ty` whose value for sample `i` is `value(i)`.
    fn write(
        ty: FieldType,
        n: u64,
        value: impl Fn(u64) -> SampleValue + Sync,
    ) -> (tempfile::TempDir, Dataset) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages.beton");
        let fields = vec![FieldSpec::new("label", FieldType::Int), FieldSpec::new("value", ty)];
        let opts = WriterOptions { page_size: 2 * MIB, num_threads: 1, ..WriterOptions::default() };
        Writer::new(&path, fields, opts)
            .unwrap()
            .write_indexed(n, |i| Ok(vec![SampleValue::Int(i as i64), value(i)]))
            .unwrap();
        let ds = Dataset::open(&path).unwrap();
        (dir, ds)
    }

    #[test]
    fn from_pages_renumbers_densely_in_order() {
        let map = PageMap::from_pages(vec![70, 5, 5, 1 << 40, 70]);
        let got: Vec<u64> = (0..5).map(|i| map.page(i).unwrap()).collect();
        assert_eq!(got, [1, 0, 0, 2, 1]);
        assert_eq!((map.num_samples(), map.num_pages()), (5, 3));
        assert_eq!(map.page(5), None);
        assert_eq!(PageMap::from_pages(vec![]).num_pages(), 0);
    }

    #[test]
    fn payload_samples_map_to_the_page_of_their_lowest_allocation() {
        // 0.9 MiB payloads on 2 MiB pages: two samples a page.
        let (_dir, ds) = write(FieldType::Bytes, 7, |i| SampleValue::Bytes(vec![i as u8; 900 << 10]));
        let map = PageMap::from_dataset(&ds);
        assert_eq!(map.num_samples(), 7);
        for i in 0..7 {
            let lowest = ds.sample_allocations(i).iter().map(|e| e.ptr).min().unwrap();
            let want = lowest / ds.page_size() - ds.data_start() / ds.page_size();
            assert_eq!(map.page(i), Some(want), "sample {i}");
        }
        let got: Vec<u64> = (0..7).map(|i| map.page(i).unwrap()).collect();
        assert_eq!(got, [0, 0, 1, 1, 2, 2, 3]);
    }

    #[test]
    fn scalar_samples_group_by_data_table_page() {
        let n = 300_000u64; // 16-byte rows: about 131k rows a 2 MiB block of the table
        let (_dir, ds) = write(FieldType::Float, n, |_| SampleValue::Float(0.5));
        assert_eq!(ds.num_allocations(), 0);
        let map = PageMap::from_dataset(&ds);
        let (table, row, ps) = (ds.data_table_offset(), ds.row_size() as u64, ds.page_size());
        for i in [0, 1, 1000, 131_071, 131_072, 200_000, n - 1] {
            assert_eq!(map.page(i), Some((table + i * row) / ps - table / ps), "row {i}");
        }
        assert_eq!(map.num_pages(), (table + (n - 1) * row) / ps - table / ps + 1);
        assert!(map.num_pages() >= 3);
    }
}
