//! `IndexSet`: sorted unique row ids, with set algebra, seeded split/sample/shuffle and the
//! binary form. A thin wrapper of `beton_query::IndexSet`. The doc comments here are the Python
//! docstrings (numpydoc), so they speak Python.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::from_query;
use crate::source::Source;

/// Sorted, unique row ids: a query's answer, a named split, what a loader samples from.
///
/// ``ds.where(sql)`` and ``ds.split(name)`` return one; the set operators ``|``, ``&`` and
/// ``-`` combine them; ``Loader(..., indices=s)`` trains on one.
///
/// Parameters
/// ----------
/// ids : iterable of int, optional
///     Non-negative row ids, in any order, repeats allowed (sorted and deduplicated here).
///
/// Raises
/// ------
/// OverflowError
///     For a negative id.
///
/// Examples
/// --------
/// >>> from beton import IndexSet
/// >>> s = IndexSet([5, 1, 3, 3])
/// >>> len(s), s.tolist()
/// (3, [1, 3, 5])
/// >>> (s | IndexSet([2])).tolist()
/// [1, 2, 3, 5]
#[pyclass(module = "beton._native", frozen, eq, from_py_object)]
#[derive(Clone)]
pub struct IndexSet {
    pub(crate) inner: beton_query::IndexSet,
    /// The dataset (version) whose rows these are, when it made the set: a notebook shows the
    /// set as thumbnails of them. Not part of equality, not pickled.
    pub(crate) source: Option<Source>,
}

impl PartialEq for IndexSet {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl IndexSet {
    pub(crate) fn wrap(inner: beton_query::IndexSet) -> Self {
        IndexSet { inner, source: None }
    }

    /// The set of `source`'s rows `inner`.
    pub(crate) fn of(inner: beton_query::IndexSet, source: Source) -> Self {
        IndexSet { inner, source: Some(source) }
    }

    /// A set made from this one (and `other`): it keeps the source they share.
    fn derived(&self, inner: beton_query::IndexSet, other: Option<&IndexSet>) -> Self {
        let source = match other {
            None => self.source.clone(),
            Some(o) => match (&self.source, &o.source) {
                (Some(a), Some(b)) if a.same(b) => Some(a.clone()),
                (Some(a), None) | (None, Some(a)) => Some(a.clone()),
                _ => None,
            },
        };
        IndexSet { inner, source }
    }
}

#[pymethods]
impl IndexSet {
    #[new]
    #[pyo3(signature = (ids = None), text_signature = "(ids=())")]
    fn new(ids: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(ids) = ids else { return Ok(IndexSet::wrap(beton_query::IndexSet::empty())) };
        match ids.extract::<Vec<u64>>() {
            Ok(ids) => Ok(IndexSet::wrap(ids.into_iter().collect())),
            // Name the first id that is not one (pyo3 says "can't convert negative int to
            // unsigned" without saying which).
            Err(e) => {
                for (k, id) in ids.try_iter()?.enumerate() {
                    let id = id?;
                    if id.extract::<u64>().is_err() {
                        return Err(match id.extract::<i128>() {
                            Ok(n) if n < 0 => pyo3::exceptions::PyValueError::new_err(format!(
                                "IndexSet: id {n} (position {k}) is negative; ids count from 0"
                            )),
                            Ok(n) => pyo3::exceptions::PyValueError::new_err(format!(
                                "IndexSet: id {n} (position {k}) is past 2**64 - 1"
                            )),
                            Err(_) => pyo3::exceptions::PyTypeError::new_err(format!(
                                "IndexSet: {} (position {k}) is not an int",
                                id.repr()?
                            )),
                        });
                    }
                }
                Err(e)
            }
        }
    }

    /// Every row id of a dataset of ``n`` rows: ``0, 1, ..., n - 1``.
    ///
    /// Parameters
    /// ----------
    /// n : int
    ///     The number of rows.
    ///
    /// Returns
    /// -------
    /// IndexSet
    ///
    /// Examples
    /// --------
    /// >>> IndexSet.all(4).tolist()
    /// [0, 1, 2, 3]
    #[staticmethod]
    fn all(n: u64) -> Self {
        IndexSet::wrap(beton_query::IndexSet::all(n))
    }

    /// Reads the binary form (docs/FORMAT.md §12: gaps or a bitmap, whichever is smaller).
    ///
    /// Parameters
    /// ----------
    /// data : bytes
    ///     What ``to_bytes`` gave.
    ///
    /// Returns
    /// -------
    /// IndexSet
    ///
    /// Raises
    /// ------
    /// ValueError
    ///     For bytes that are not an index set, naming the offset of the problem.
    ///
    /// Examples
    /// --------
    /// >>> s = IndexSet([1, 7])
    /// >>> IndexSet.from_bytes(s.to_bytes()) == s
    /// True
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(IndexSet::wrap(beton_query::IndexSet::from_bytes(data).map_err(from_query)?))
    }

    /// The binary form (docs/FORMAT.md §12), as stored in a file's named splits.
    ///
    /// Returns
    /// -------
    /// bytes
    ///
    /// Examples
    /// --------
    /// >>> IndexSet([1, 7]).to_bytes()[:4]
    /// b'BIDX'
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// The ids as little-endian u64 bytes (`numpy.frombuffer(..., '<u8')` views them).
    fn _ids_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let bytes: Vec<u8> = self.inner.iter().flat_map(u64::to_le_bytes).collect();
        PyBytes::new(py, &bytes)
    }

    /// numpy's array interface (version 3): the ids as a read-only ``uint64`` array with no copy
    /// (``numpy.asarray(ids)``). The set is immutable, so its memory stays as it is for as long
    /// as the view (which holds the set) lives.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let ids = self.inner.as_slice();
        let d = PyDict::new(py);
        d.set_item("shape", (ids.len(),))?;
        d.set_item("typestr", "<u8")?;
        d.set_item("data", (ids.as_ptr() as usize, true))?;
        d.set_item("version", 3)?;
        Ok(d)
    }

    /// The ids, ascending, as a list.
    ///
    /// Returns
    /// -------
    /// list of int
    ///
    /// Examples
    /// --------
    /// >>> IndexSet([3, 1]).tolist()
    /// [1, 3]
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
        self.derived(self.inner.union(&other.inner), Some(other))
    }

    fn __and__(&self, other: &IndexSet) -> IndexSet {
        self.derived(self.inner.intersection(&other.inner), Some(other))
    }

    fn __sub__(&self, other: &IndexSet) -> IndexSet {
        self.derived(self.inner.difference(&other.inner), Some(other))
    }

    /// The ids in either set (``a | b``).
    ///
    /// Parameters
    /// ----------
    /// other : IndexSet
    ///
    /// Returns
    /// -------
    /// IndexSet
    ///
    /// Examples
    /// --------
    /// >>> IndexSet([1, 2]).union(IndexSet([2, 5])).tolist()
    /// [1, 2, 5]
    fn union(&self, other: &IndexSet) -> IndexSet {
        self.__or__(other)
    }

    /// The ids in both sets (``a & b``).
    ///
    /// Parameters
    /// ----------
    /// other : IndexSet
    ///
    /// Returns
    /// -------
    /// IndexSet
    ///
    /// Examples
    /// --------
    /// >>> IndexSet([1, 2]).intersection(IndexSet([2, 5])).tolist()
    /// [2]
    fn intersection(&self, other: &IndexSet) -> IndexSet {
        self.__and__(other)
    }

    /// The ids of this set not in ``other`` (``a - b``).
    ///
    /// Parameters
    /// ----------
    /// other : IndexSet
    ///
    /// Returns
    /// -------
    /// IndexSet
    ///
    /// Examples
    /// --------
    /// >>> IndexSet([1, 2]).difference(IndexSet([2, 5])).tolist()
    /// [1]
    fn difference(&self, other: &IndexSet) -> IndexSet {
        self.__sub__(other)
    }

    /// Seeded random partition into parts of the given fractions of the ids.
    ///
    /// Parameters
    /// ----------
    /// fractions : list of float
    ///     One per part, each in [0, 1], summing to at most 1 (ids left over go to no part).
    /// seed : int, default 0
    ///     The same seed gives the same parts.
    ///
    /// Returns
    /// -------
    /// list of IndexSet
    ///     Disjoint, one per fraction.
    ///
    /// Raises
    /// ------
    /// ValueError
    ///     For fractions out of range or summing to more than 1.
    ///
    /// Examples
    /// --------
    /// >>> train, val = IndexSet.all(10).split([0.8, 0.2], seed=0)
    /// >>> len(train), len(val), len(train & val)
    /// (8, 2, 0)
    #[pyo3(signature = (fractions, seed = 0))]
    fn split(&self, fractions: Vec<f64>, seed: u64) -> PyResult<Vec<IndexSet>> {
        Ok(self
            .inner
            .split(&fractions, seed)
            .map_err(from_query)?
            .into_iter()
            .map(|s| self.derived(s, None))
            .collect())
    }

    /// Seeded split keeping the proportions of ``keys`` (one per id, e.g. labels) in every part.
    ///
    /// Parameters
    /// ----------
    /// keys : list of int
    ///     The key of each id, in id order (``len(keys) == len(self)``).
    /// fractions : list of float
    ///     As in ``split``.
    /// seed : int, default 0
    ///
    /// Returns
    /// -------
    /// list of IndexSet
    ///
    /// Raises
    /// ------
    /// ValueError
    ///     For a keys list of another length, or bad fractions.
    ///
    /// Examples
    /// --------
    /// >>> a, b = IndexSet.all(4).stratified_split([0, 0, 1, 1], [0.5, 0.5])
    /// >>> len(a), len(b)
    /// (2, 2)
    #[pyo3(signature = (keys, fractions, seed = 0))]
    fn stratified_split(&self, keys: Vec<i64>, fractions: Vec<f64>, seed: u64) -> PyResult<Vec<IndexSet>> {
        Ok(self
            .inner
            .stratified_split(&keys, &fractions, seed)
            .map_err(from_query)?
            .into_iter()
            .map(|s| self.derived(s, None))
            .collect())
    }

    /// ``n`` ids drawn without replacement, seeded.
    ///
    /// Parameters
    /// ----------
    /// n : int
    ///     How many; at most ``len(self)``.
    /// seed : int, default 0
    ///
    /// Returns
    /// -------
    /// IndexSet
    ///
    /// Raises
    /// ------
    /// ValueError
    ///     When ``n`` exceeds the ids there are.
    ///
    /// Examples
    /// --------
    /// >>> len(IndexSet.all(100).sample(10, seed=1))
    /// 10
    #[pyo3(signature = (n, seed = 0))]
    fn sample(&self, n: usize, seed: u64) -> PyResult<IndexSet> {
        Ok(self.derived(self.inner.sample(n, seed).map_err(from_query)?, None))
    }

    /// The ids in a seeded random order.
    ///
    /// Parameters
    /// ----------
    /// seed : int, default 0
    ///
    /// Returns
    /// -------
    /// list of int
    ///
    /// Examples
    /// --------
    /// >>> sorted(IndexSet([4, 2, 9]).shuffled(seed=3))
    /// [2, 4, 9]
    #[pyo3(signature = (seed = 0))]
    fn shuffled(&self, seed: u64) -> Vec<u64> {
        self.inner.shuffled(seed)
    }

    /// A stable 64-bit hash of the ids (the loader's resume state checks it).
    ///
    /// Returns
    /// -------
    /// int
    ///
    /// Examples
    /// --------
    /// >>> IndexSet([1, 2]).fingerprint() == IndexSet([2, 1]).fingerprint()
    /// True
    fn fingerprint(&self) -> u64 {
        self.inner.fingerprint()
    }

    /// The set as HTML for a notebook: how many ids and which runs, and thumbnails of its rows
    /// (spread over it) when a dataset made it (``ds.where``, ``ds.split``). Small for any size.
    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        let html = beton_query::gallery::index_set_html(&self.inner);
        match &self.source {
            None => Ok(html),
            Some(source) => {
                let thumbnails = py.detach(|| source.set_html(&self.inner)).map_err(from_query)?;
                Ok(format!("{html}{thumbnails}"))
            }
        }
    }

    /// `IndexSet(155 ids: [0, 1, 2, 3, 4, 5, ...], fingerprint 0x…)`: short for any size.
    fn __repr__(&self) -> String {
        let head: Vec<String> = self.inner.iter().take(6).map(|i| i.to_string()).collect();
        let more = if self.inner.len() > 6 { ", ..." } else { "" };
        format!(
            "IndexSet({} ids: [{}{more}], fingerprint {:#018x})",
            self.inner.len(),
            head.join(", "),
            self.inner.fingerprint()
        )
    }
}
