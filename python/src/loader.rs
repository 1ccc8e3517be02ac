//! `Loader`, `Epoch`, `Batch`, `Column`: the loader's batches as numpy-viewable columns.
//!
//! A `Column` exposes `__array_interface__` over its batch's slot memory, so
//! `numpy.asarray(column)` is a view with no copy, and the array keeps the column (and so the
//! batch) alive: a slot is not reused while any array viewing it exists. Waiting for a batch
//! releases the GIL.

use std::sync::Arc;

use beton_loader::order::{EpochContext, Order as NativeOrder};
use beton_loader::{LoaderState, OrderOption};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict};

use crate::dataset::Dataset;
use crate::errors::from_loader;
use crate::index_set::IndexSet;
use crate::ops::{Decoder, ImagePipeline};

/// FFCV's `OrderOption`: the built-in traversal orders, and FFCV's RANDOM (numpy's
/// permutation, what `beton.loader.Loader` runs for RANDOM on one process).
#[pyclass(module = "beton._native", eq, eq_int, frozen)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Order {
    Sequential,
    Random,
    QuasiRandom,
    FfcvRandom,
}

/// A traversal order written in Python (FFCV's `TraversalOrder`): `sample_order(epoch)` gives
/// the rows this process reads in `epoch`, in order (its own part of a distributed run, as in
/// FFCV). Called once per epoch, with the GIL; an exception it raises is kept and raised by the
/// call that needed the order.
struct PythonOrder {
    object: Py<PyAny>,
    name: String,
    /// The last epoch's order: the loader asks for an epoch's order more than once (its length,
    /// its state, its plan) and a Python order need not be a pure function.
    last: std::sync::Mutex<Option<(u64, Vec<u64>)>>,
    error: std::sync::Mutex<Option<PyErr>>,
}

impl PythonOrder {
    fn call(&self, epoch: u64) -> Vec<u64> {
        // The cache is not locked while Python runs: `sample_order` may ask the loader for its
        // length, which asks for the order again.
        if let Some((e, order)) = self.last.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if *e == epoch {
                return order.clone();
            }
        }
        let result = Python::attach(|py| -> PyResult<Vec<u64>> {
            let order = self.object.bind(py).call_method1("sample_order", (epoch,))?;
            let order = py.import("numpy")?.call_method1("asarray", (order,))?;
            let order = order.call_method1("reshape", (-1,))?.call_method0("tolist")?;
            order
                .extract::<Vec<i128>>()?
                .into_iter()
                .enumerate()
                .map(|(k, r)| {
                    u64::try_from(r).map_err(|_| {
                        PyValueError::new_err(format!(
                            "{}.sample_order({epoch})[{k}] is {r}: rows are 0 or more",
                            self.name
                        ))
                    })
                })
                .collect()
        });
        match result {
            Ok(order) => {
                *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((epoch, order.clone()));
                order
            }
            Err(e) => {
                *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                Vec::new()
            }
        }
    }

    /// The exception the last call raised, if any.
    fn take_error(&self) -> Option<PyErr> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl NativeOrder for PythonOrder {
    fn name(&self) -> String {
        format!("python:{}", self.name)
    }

    fn epoch_order(&self, ctx: &EpochContext<'_>) -> Vec<u64> {
        self.call(ctx.epoch)
    }

    fn rank_order(&self, ctx: &EpochContext<'_>, _rank: usize, _world_size: usize) -> Vec<u64> {
        self.call(ctx.epoch)
    }
}

/// `value` of the argument `name` as a count of at least `min`: a negative or huge Python int
/// is a ValueError naming the argument, not pyo3's anonymous OverflowError.
fn count(name: &str, value: i128, min: usize) -> PyResult<usize> {
    usize::try_from(value).ok().filter(|&v| v >= min).ok_or_else(|| {
        PyValueError::new_err(format!("{name} is {value}: it must be an integer of at least {min}"))
    })
}

/// FFCV's loader over a dataset.
#[pyclass(module = "beton._native")]
pub struct Loader {
    inner: beton_loader::Loader,
    /// A Python traversal order, whose exceptions are raised by the calls that need it.
    python_order: Option<Arc<PythonOrder>>,
}

impl Loader {
    /// `result`, or the exception the Python order raised while computing it.
    fn checked<T>(&self, result: beton_loader::Result<T>) -> PyResult<T> {
        if let Some(e) = self.python_order.as_ref().and_then(|o| o.take_error()) {
            return Err(e);
        }
        result.map_err(from_loader)
    }
}

#[pymethods]
impl Loader {
    /// `order` is an `Order` or a Python object with FFCV's `sample_order(epoch)`;
    /// `pipelines` maps an output name to a `Decoder` (a field read by it) or an
    /// `ImagePipeline` (an image field, or with its `source`, a view of one).
    #[new]
    #[pyo3(signature = (dataset, batch_size, num_workers = 0, order = None, seed = 0, drop_last = true,
                        batches_ahead = 3, os_cache = true, indices = None, rank = 0, world_size = 1,
                        fields = None, cache_pages = None, pipelines = None, index_list = None,
                        fill_nulls = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        dataset: &Bound<'_, PyAny>,
        batch_size: i128,
        num_workers: i128,
        order: Option<&Bound<'_, PyAny>>,
        seed: i128,
        drop_last: bool,
        batches_ahead: i128,
        os_cache: bool,
        indices: Option<IndexSet>,
        rank: i128,
        world_size: i128,
        fields: Option<Vec<String>>,
        cache_pages: Option<i128>,
        pipelines: Option<&Bound<'_, PyDict>>,
        index_list: Option<Vec<i128>>,
        fill_nulls: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let batch_size = count("batch_size", batch_size, 1)?;
        let num_workers = count("num_workers", num_workers, 0)?;
        let seed = u64::try_from(seed)
            .map_err(|_| PyValueError::new_err(format!("seed {seed}: must be an integer in [0, 2**64)")))?;
        let batches_ahead = count("batches_ahead", batches_ahead, 1)?;
        let (rank, world_size) = (count("rank", rank, 0)?, count("world_size", world_size, 1)?);
        let cache_pages = cache_pages.map(|n| count("cache_pages", n, 1)).transpose()?;
        let index_list = index_list
            .map(|rows| {
                rows.into_iter()
                    .enumerate()
                    .map(|(k, r)| {
                        u64::try_from(r).map_err(|_| {
                            PyValueError::new_err(format!("indices[{k}] is {r}: row ids are 0 or more"))
                        })
                    })
                    .collect::<PyResult<Vec<u64>>>()
            })
            .transpose()?;
        let mut python_order = None;
        let order: Arc<dyn NativeOrder> = match order {
            None => Arc::new(OrderOption::Sequential),
            Some(o) => match o.cast::<Order>() {
                Ok(o) => Arc::new(match *o.get() {
                    Order::Sequential => OrderOption::Sequential,
                    Order::Random => OrderOption::Random,
                    Order::QuasiRandom => OrderOption::QuasiRandom { buffer_pages: None },
                    Order::FfcvRandom => OrderOption::FfcvRandom,
                }),
                Err(_) if o.hasattr("sample_order")? => {
                    let name = o.get_type().qualname()?.to_string();
                    let p = Arc::new(PythonOrder {
                        object: o.clone().unbind(),
                        name,
                        last: Default::default(),
                        error: Default::default(),
                    });
                    python_order = Some(Arc::clone(&p));
                    p
                }
                Err(_) => {
                    return Err(PyTypeError::new_err(format!(
                        "order {}: an Order or an object with sample_order(epoch) (a TraversalOrder)",
                        o.repr()?
                    )))
                }
            },
        };
        let Ok(d) = dataset.cast::<Dataset>() else {
            return Err(PyTypeError::new_err("Loader takes a Dataset"));
        };
        let opened = d.get().opened();
        let parts = beton_loader::Parts::of_version(&opened).map_err(from_loader)?;
        let b = beton_loader::Loader::builder_parts(parts);
        let mut b = b
            .batch_size(batch_size)
            .threads(num_workers)
            .custom_order(order)
            .seed(seed)
            .drop_last(drop_last)
            .batches_ahead(batches_ahead)
            .os_cache(os_cache)
            .distributed(rank, world_size);
        if let Some(i) = indices {
            b = b.indices(i.inner);
        }
        if let Some(rows) = index_list {
            b = b.index_list(rows);
        }
        if let Some(n) = cache_pages {
            b = b.cache_pages(n);
        }
        for (name, spec) in pipelines.map(|d| d.iter().collect::<Vec<_>>()).unwrap_or_default() {
            let name: String = name.extract()?;
            if let Ok(p) = spec.cast::<ImagePipeline>() {
                let p = p.get();
                let decoder: Arc<dyn beton_loader::FieldDecoder> = p.inner.clone();
                b = match &p.source {
                    Some(source) => b.view(&name, source, decoder),
                    None => b.decoder(&name, decoder),
                };
            } else if let Ok(d) = spec.cast::<Decoder>() {
                b = b.decoder(&name, d.get().field_decoder());
            } else {
                return Err(PyTypeError::new_err(format!(
                    "pipeline of '{name}': {} is neither a Decoder nor an ImagePipeline",
                    spec.repr()?
                )));
            }
        }
        // What a NULL of a field decodes as: an int, float or bool (checked against the field
        // by the builder).
        for (name, value) in fill_nulls.iter().flat_map(|d| d.iter()) {
            let name: String = name.extract()?;
            let value = if value.is_instance_of::<pyo3::types::PyBool>() {
                beton_storage::Value::Bool(value.extract()?)
            } else if value.is_instance_of::<pyo3::types::PyInt>() {
                beton_storage::Value::Int(value.extract()?)
            } else if let Ok(v) = value.extract::<f64>() {
                beton_storage::Value::Float(v)
            } else {
                return Err(PyTypeError::new_err(format!(
                    "fill_nulls['{name}']: {} is not an int, float or bool",
                    value.repr()?
                )));
            };
            b = b.fill_null(&name, value);
        }
        let names: Vec<&str>;
        if let Some(f) = &fields {
            names = f.iter().map(String::as_str).collect();
            b = b.fields(&names);
        }
        let inner = b.build().map_err(from_loader)?;
        Ok(Loader { inner, python_order })
    }

    /// Batches per epoch on this rank.
    fn __len__(&self) -> PyResult<usize> {
        self.checked(self.inner.num_batches())
    }

    /// The epoch the next `epoch()` call runs.
    #[getter]
    fn next_epoch_number(&self) -> u64 {
        self.inner.epoch()
    }

    /// Sets the epoch the next `epoch()` runs.
    fn set_epoch(&mut self, epoch: u64) {
        self.inner.set_epoch(epoch);
    }

    /// Starts the next epoch.
    fn epoch(&mut self) -> PyResult<Epoch> {
        let e = self.inner.next_epoch();
        let e = self.checked(e)?;
        Ok(Epoch { inner: Some(e) })
    }

    /// Resumes from a state saved by `Epoch.state()` (JSON text).
    fn resume(&mut self, state: &str) -> PyResult<()> {
        let state = LoaderState::from_json(state).map_err(from_loader)?;
        let r = self.inner.resume(&state);
        self.checked(r)
    }

    /// The sample ids the loader reads, as a set.
    fn indices(&self) -> IndexSet {
        IndexSet::wrap(self.inner.indices().clone())
    }

    /// The rows the loader reads, one per sample: FFCV's `indices` as given (repeats and order
    /// kept), else the set's ids ascending.
    fn index_rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rows = self.inner.index_rows();
        // One copy, into a bytearray that the (writable) array keeps alive.
        let bytes = PyByteArray::new_with(py, rows.len() * 8, |buf| {
            for (chunk, r) in buf.chunks_exact_mut(8).zip(&rows) {
                chunk.copy_from_slice(&r.to_le_bytes());
            }
            Ok(())
        })?;
        py.import("numpy")?.call_method1("frombuffer", (bytes, "<u8"))
    }
}

/// One epoch's batches, in order. `close()` (or garbage collection) stops its threads.
#[pyclass(module = "beton._native")]
pub struct Epoch {
    inner: Option<beton_loader::Epoch>,
}

#[pymethods]
impl Epoch {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Batch>> {
        let Some(epoch) = self.inner.as_mut() else { return Ok(None) };
        match py.detach(|| epoch.next()) {
            Some(Ok(b)) => Ok(Some(Batch { inner: b })),
            Some(Err(e)) => {
                self.inner = None;
                Err(from_loader(e))
            }
            None => Ok(None),
        }
    }

    fn __len__(&self) -> usize {
        self.inner.as_ref().map_or(0, |e| e.num_batches())
    }

    /// The state to save to resume after the batches consumed so far (JSON text).
    fn state(&self) -> PyResult<String> {
        self.inner
            .as_ref()
            .map(|e| e.state().to_json())
            .ok_or_else(|| PyValueError::new_err("the epoch is closed"))
    }

    /// Counters of the epoch so far.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        if let Some(e) = &self.inner {
            let s = e.stats();
            set_fields!(d, s; batches, samples, payload_bytes, pages_read, page_bytes_read, cache_hits,
                              direct_reads, cache_pages, slots);
            d.set_item("worker_busy_s", s.worker_busy.as_secs_f64())?;
            d.set_item("worker_wait_s", s.worker_wait.as_secs_f64())?;
            d.set_item("consumer_wait_s", s.consumer_wait.as_secs_f64())?;
        }
        Ok(d)
    }

    /// Stops the epoch's threads now (batches already taken stay valid).
    fn close(&mut self, py: Python<'_>) {
        if let Some(e) = self.inner.take() {
            py.detach(|| drop(e));
        }
    }
}

/// A batch: its columns view the slot, which is not reused while any of them is alive.
#[pyclass(module = "beton._native", frozen)]
#[derive(Clone)]
pub struct Batch {
    inner: beton_loader::Batch,
}

#[pymethods]
impl Batch {
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The column names, in pipeline order.
    fn names(&self) -> Vec<String> {
        self.inner.specs().iter().map(|c| c.name.clone()).collect()
    }

    /// Column `name` (use `numpy.asarray` on it).
    fn column(&self, name: &str) -> PyResult<Column> {
        let k = self.inner.specs().iter().position(|c| c.name == name).ok_or_else(|| {
            PyKeyError::new_err(format!("no column '{name}'; the columns are {:?}", self.names()))
        })?;
        Ok(Column { batch: Arc::new(self.inner.clone()), which: Some(k) })
    }

    /// The samples' row ids (a column of u64).
    fn indices(&self) -> Column {
        Column { batch: Arc::new(self.inner.clone()), which: None }
    }

    #[getter]
    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    #[getter]
    fn number(&self) -> usize {
        self.inner.number()
    }
}

/// One column of a batch, viewable by numpy without a copy, and by any framework through
/// DLPack (`torch.from_dlpack(column)`), also without a copy.
#[pyclass(module = "beton._native", frozen)]
pub struct Column {
    batch: Arc<beton_loader::Batch>,
    /// Column index; `None` for the row ids.
    which: Option<usize>,
}

#[pymethods]
impl Column {
    /// DLPack export (the array API's `__dlpack__`): a capsule over the slot's memory, through
    /// numpy's view of it, which keeps this column (and so the batch's slot) alive as long as
    /// the consumer holds the tensor.
    #[pyo3(signature = (**kwargs))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let array = slf.py().import("numpy")?.call_method1("asarray", (slf,))?;
        array.getattr("__dlpack__")?.call((), kwargs)
    }

    /// DLPack device: `(1, 0)`, CPU memory.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }

    /// numpy's array interface (version 3): shape, typestr and the slot's address. The memory
    /// is writable: the batch is the caller's until every view of it is gone.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let (ptr, shape, typestr): (usize, Vec<usize>, &str) = match self.which {
            None => {
                let ids = self.batch.indices();
                (ids.as_ptr() as usize, vec![ids.len()], "<u8")
            }
            Some(k) => {
                let col = self.batch.column_at(k);
                let mut shape = vec![self.batch.len()];
                shape.extend(&col.spec.shape);
                (col.bytes.as_ptr() as usize, shape, col.spec.elem.numpy())
            }
        };
        d.set_item("shape", pyo3::types::PyTuple::new(py, shape)?)?;
        d.set_item("typestr", typestr)?;
        d.set_item("data", (ptr, false))?;
        d.set_item("version", 3)?;
        Ok(d)
    }
}
