//! `Loader`, `Epoch`, `Batch`, `Column`: the loader's batches as numpy-viewable columns.
//!
//! A `Column` exposes `__array_interface__` over its batch's slot memory, so
//! `numpy.asarray(column)` is a view with no copy, and the array keeps the column (and so the
//! batch) alive: a slot is not reused while any array viewing it exists. Waiting for a batch
//! releases the GIL.

use std::sync::Arc;

use beton_loader::image::{
    CenterCropRGBImageDecoder, Cutout, FloatType, ImagePipeline, Interpolation, Layout, NormalizeImage,
    RandomBrightness, RandomContrast, RandomHorizontalFlip, RandomResizedCropRGBImageDecoder,
    RandomSaturation, RandomTranslate, RandomVerticalFlip, SimpleRGBImageDecoder,
};
use beton_loader::{LoaderState, OrderOption};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dataset::Dataset;
use crate::errors::from_loader;
use crate::index_set::IndexSet;

/// An image field's native pipeline, as the Python layer describes it: the decoder
/// `(kind, (h, w), (scale_lo, scale_hi), (ratio_lo, ratio_hi), center_ratio, interpolation)`, the per-sample
/// operations `(kind, a, b, (r, g, b))`, and an optional normalisation `(mean, std, dtype,
/// layout)`.
type ImageSpec = (
    (String, (usize, usize), (f64, f64), (f64, f64), f64, String),
    Vec<(String, f64, f64, (u8, u8, u8))>,
    Option<([f32; 3], [f32; 3], String, String)>,
);

fn image_pipeline(field: &str, (decoder, ops, normalize): ImageSpec) -> PyResult<ImagePipeline> {
    let bad = |what: String| PyValueError::new_err(format!("pipeline of field '{field}': {what}"));
    let (kind, size, scale, ratio, center_ratio, interpolation) = decoder;
    let interpolation = Interpolation::parse(&interpolation).map_err(|e| bad(e.to_string()))?;
    let mut p = match kind.as_str() {
        "simple" => ImagePipeline::new(SimpleRGBImageDecoder),
        "random_resized_crop" => ImagePipeline::new(
            RandomResizedCropRGBImageDecoder::new(size)
                .scale(scale)
                .ratio(ratio)
                .interpolation(interpolation),
        ),
        "center_crop" => ImagePipeline::new(
            CenterCropRGBImageDecoder::new(size).ratio(center_ratio).interpolation(interpolation),
        ),
        other => return Err(bad(format!("unknown image decoder '{other}'"))),
    };
    for (kind, a, b, (r, g, bl)) in ops {
        let fill = [r, g, bl];
        p = match kind.as_str() {
            "horizontal_flip" => p.then(RandomHorizontalFlip { flip_prob: a }),
            "vertical_flip" => p.then(RandomVerticalFlip { flip_prob: a }),
            "translate" => p.then(RandomTranslate { padding: a as usize, fill }),
            "cutout" => p.then(Cutout { crop_size: a as usize, fill }),
            "brightness" => p.then(RandomBrightness { magnitude: a, p: b }),
            "contrast" => p.then(RandomContrast { magnitude: a, p: b }),
            "saturation" => p.then(RandomSaturation { magnitude: a, p: b }),
            other => return Err(bad(format!("unknown image operation '{other}'"))),
        };
    }
    if let Some((mean, std, dtype, layout)) = normalize {
        let dtype = match dtype.as_str() {
            "float32" => FloatType::F32,
            "float16" => FloatType::F16,
            other => return Err(bad(format!("NormalizeImage type {other}: float16 or float32"))),
        };
        let layout = if layout == "chw" { Layout::Chw } else { Layout::Hwc };
        p = p.normalize(NormalizeImage::new(mean, std).dtype(dtype).layout(layout));
    }
    Ok(p)
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
}

#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (dataset, batch_size, num_workers = 0, order = "sequential", seed = 0, drop_last = true,
                        batches_ahead = 3, os_cache = true, indices = None, rank = 0, world_size = 1,
                        fields = None, cache_pages = None, image_pipelines = None, views = None,
                        index_list = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        dataset: &Bound<'_, PyAny>,
        batch_size: i128,
        num_workers: i128,
        order: &str,
        seed: i128,
        drop_last: bool,
        batches_ahead: i128,
        os_cache: bool,
        indices: Option<IndexSet>,
        rank: i128,
        world_size: i128,
        fields: Option<Vec<String>>,
        cache_pages: Option<i128>,
        image_pipelines: Option<Vec<(String, ImageSpec)>>,
        views: Option<Vec<(String, String, ImageSpec)>>,
        index_list: Option<Vec<i128>>,
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
        let order = match order.to_ascii_lowercase().as_str() {
            "sequential" => OrderOption::Sequential,
            "random" => OrderOption::Random,
            "quasi_random" => OrderOption::QuasiRandom { buffer_pages: None },
            other => {
                return Err(PyValueError::new_err(format!(
                    "order '{other}': expected 'sequential', 'random' or 'quasi_random'"
                )))
            }
        };
        let b = if let Ok(d) = dataset.cast::<Dataset>() {
            beton_loader::Loader::builder(Arc::clone(&d.get().inner))
        } else if let Ok(v) = dataset.cast::<crate::version::Version>() {
            let opened = v.get().opened();
            beton_loader::Loader::builder_parts(
                beton_loader::Parts::of_version(&opened.view).map_err(from_loader)?,
            )
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "Loader takes a Dataset or a dataset Version",
            ));
        };
        let mut b = b
            .batch_size(batch_size)
            .threads(num_workers)
            .order(order)
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
        for (name, spec) in image_pipelines.unwrap_or_default() {
            b = b.decoder(&name, Arc::new(image_pipeline(&name, spec)?));
        }
        for (name, source, spec) in views.unwrap_or_default() {
            b = b.view(&name, &source, Arc::new(image_pipeline(&name, spec)?));
        }
        let names: Vec<&str>;
        if let Some(f) = &fields {
            names = f.iter().map(String::as_str).collect();
            b = b.fields(&names);
        }
        Ok(Loader { inner: b.build().map_err(from_loader)? })
    }

    /// Batches per epoch on this rank.
    fn __len__(&self) -> PyResult<usize> {
        self.inner.num_batches().map_err(from_loader)
    }

    /// The epoch the next `epoch()` call runs.
    #[getter]
    fn next_epoch_number(&self) -> u64 {
        self.inner.epoch()
    }

    /// Starts the next epoch.
    fn epoch(&mut self) -> PyResult<Epoch> {
        let e = self.inner.next_epoch().map_err(from_loader)?;
        Ok(Epoch { inner: Some(e) })
    }

    /// Resumes from a state saved by `Epoch.state()` (JSON text).
    fn resume(&mut self, state: &str) -> PyResult<()> {
        let state = LoaderState::from_json(state).map_err(from_loader)?;
        self.inner.resume(&state).map_err(from_loader)
    }

    /// The sample ids the loader reads.
    fn indices(&self) -> IndexSet {
        IndexSet::wrap(self.inner.indices().clone())
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
            d.set_item("batches", s.batches)?;
            d.set_item("samples", s.samples)?;
            d.set_item("payload_bytes", s.payload_bytes)?;
            d.set_item("pages_read", s.pages_read)?;
            d.set_item("page_bytes_read", s.page_bytes_read)?;
            d.set_item("cache_hits", s.cache_hits)?;
            d.set_item("direct_reads", s.direct_reads)?;
            d.set_item("cache_pages", s.cache_pages)?;
            d.set_item("slots", s.slots)?;
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

/// One column of a batch, viewable by numpy without a copy.
#[pyclass(module = "beton._native", frozen)]
pub struct Column {
    batch: Arc<beton_loader::Batch>,
    /// Column index; `None` for the row ids.
    which: Option<usize>,
}

#[pymethods]
impl Column {
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
