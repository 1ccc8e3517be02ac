//! `IndexSet`: sorted unique row ids, with set algebra, seeded split/sample/shuffle and the
//! binary form. A thin wrapper of `beton_query::IndexSet`.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::from_query;

/// Sorted, unique row ids (a query's answer, a named split); the loader samples from one.
#[pyclass(module = "beton._native", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct IndexSet {
    pub(crate) inner: beton_query::IndexSet,
}

impl IndexSet {
    pub(crate) fn wrap(inner: beton_query::IndexSet) -> Self {
        IndexSet { inner }
    }
}

#[pymethods]
impl IndexSet {
    /// From any iterable of non-negative ints (sorted and deduplicated here).
    #[new]
    #[pyo3(signature = (ids = Vec::new()))]
    fn new(ids: Vec<u64>) -> Self {
        IndexSet { inner: ids.into_iter().collect() }
    }

    /// Every row id of a dataset of `n` rows.
    #[staticmethod]
    fn all(n: u64) -> Self {
        IndexSet { inner: beton_query::IndexSet::all(n) }
    }

    /// The binary form (FORMAT.md §12).
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(IndexSet { inner: beton_query::IndexSet::from_bytes(data).map_err(from_query)? })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// The ids as little-endian u64 bytes (`numpy.frombuffer(..., '<u8')` views them).
    fn _ids_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let bytes: Vec<u8> = self.inner.iter().flat_map(u64::to_le_bytes).collect();
        PyBytes::new(py, &bytes)
    }

    fn tolist(&self) -> Vec<u64> {
        self.inner.as_slice().to_vec()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, id: u64) -> bool {
        self.inner.contains(id)
    }

    fn __getitem__(&self, i: isize) -> PyResult<u64> {
        let n = self.inner.len() as isize;
        let k = if i < 0 { i + n } else { i };
        self.inner
            .get(k.max(0) as usize)
            .filter(|_| (0..n).contains(&k))
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(format!("index {i} of {n} ids")))
    }

    fn __or__(&self, other: &IndexSet) -> IndexSet {
        IndexSet { inner: self.inner.union(&other.inner) }
    }

    fn __and__(&self, other: &IndexSet) -> IndexSet {
        IndexSet { inner: self.inner.intersection(&other.inner) }
    }

    fn __sub__(&self, other: &IndexSet) -> IndexSet {
        IndexSet { inner: self.inner.difference(&other.inner) }
    }

    fn union(&self, other: &IndexSet) -> IndexSet {
        self.__or__(other)
    }

    fn intersection(&self, other: &IndexSet) -> IndexSet {
        self.__and__(other)
    }

    fn difference(&self, other: &IndexSet) -> IndexSet {
        self.__sub__(other)
    }

    /// Seeded partition by `fractions` (summing to at most 1): a list of IndexSets.
    #[pyo3(signature = (fractions, seed = 0))]
    fn split(&self, fractions: Vec<f64>, seed: u64) -> PyResult<Vec<IndexSet>> {
        Ok(self.inner.split(&fractions, seed).map_err(from_query)?.into_iter().map(IndexSet::wrap).collect())
    }

    /// Seeded split keeping the proportions of `keys` (one per id, e.g. labels) in every part.
    #[pyo3(signature = (keys, fractions, seed = 0))]
    fn stratified_split(&self, keys: Vec<i64>, fractions: Vec<f64>, seed: u64) -> PyResult<Vec<IndexSet>> {
        Ok(self
            .inner
            .stratified_split(&keys, &fractions, seed)
            .map_err(from_query)?
            .into_iter()
            .map(IndexSet::wrap)
            .collect())
    }

    /// `n` ids drawn without replacement, seeded.
    #[pyo3(signature = (n, seed = 0))]
    fn sample(&self, n: usize, seed: u64) -> PyResult<IndexSet> {
        Ok(IndexSet { inner: self.inner.sample(n, seed).map_err(from_query)? })
    }

    /// The ids in a seeded random order (a list).
    #[pyo3(signature = (seed = 0))]
    fn shuffled(&self, seed: u64) -> Vec<u64> {
        self.inner.shuffled(seed)
    }

    /// A stable 64-bit hash of the ids (the loader's resume state checks it).
    fn fingerprint(&self) -> u64 {
        self.inner.fingerprint()
    }

    fn __repr__(&self) -> String {
        let head: Vec<String> = self.inner.iter().take(6).map(|i| i.to_string()).collect();
        let more = if self.inner.len() > 6 { ", ..." } else { "" };
        format!("IndexSet({} ids: [{}{more}])", self.inner.len(), head.join(", "))
    }
}
