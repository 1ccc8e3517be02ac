//! `write`: writes a `.beton` file from a Python callable giving each sample's values. Encoding
//! runs on Rust threads without the GIL; only fetching a sample from Python takes it. A progress
//! callable is called after every chunk and can stop the write (as can Ctrl-C), leaving the
//! destination untouched.

use std::path::PathBuf;
use std::sync::Arc;

use beton_storage::{FieldSpec, FieldType, SampleValue, Writer, WriterOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::from_storage;
use crate::fields::{sample_value, Field};
use crate::progress::Interrupted;

fn bad(what: impl Into<String>) -> PyErr {
    PyValueError::new_err(what.into())
}

/// The writer's fields from a dict of name to `beton._native.Field`, in the dict's order.
pub(crate) fn field_specs(fields: &Bound<'_, PyDict>) -> PyResult<Vec<FieldSpec>> {
    fields
        .iter()
        .map(|(name, field)| {
            let name: String = name.extract()?;
            let field = field.cast::<Field>().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "field '{name}': {} is not a field type (beton._native.Field)",
                    field.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?;
            Ok(field.get().spec(name))
        })
        .collect()
}

/// `specs` with every image field flattening transparency onto `background` (`None`: alpha
/// dropped, FFCV's behaviour): `DatasetWriter(alpha_background=)`.
pub(crate) fn with_alpha_background(
    mut specs: Vec<FieldSpec>,
    background: Option<(u8, u8, u8)>,
) -> Vec<FieldSpec> {
    for spec in specs.iter_mut().filter(|s| s.ty.is_image()) {
        spec.image.alpha_background = background.map(|(r, g, b)| [r, g, b]);
    }
    specs
}

/// The writer's page size for Python's `page_size`: `None` chooses it from the payload (the
/// writer's 0); a 0 given is refused as FFCV's `DatasetWriter` refuses it, not taken for `None`.
pub(crate) fn writer_page_size(page_size: Option<u64>) -> PyResult<u64> {
    match page_size {
        None => Ok(0),
        Some(0) => Err(PyValueError::new_err(
            "page_size 0 is not a power of two in [2 MiB, 4 GiB); None chooses it from the payload",
        )),
        Some(p) => Ok(p),
    }
}

/// Writes `num_samples` samples, `get(i)` giving sample i's values in field order.
#[pyfunction]
#[pyo3(signature = (path, fields, num_samples, get, page_size = None, num_workers = 0, seed = 0,
                    chunk_size = 256, progress = None, skip_bad = false, columnar_copy = true,
                    alpha_background = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write<'py>(
    py: Python<'py>,
    path: PathBuf,
    fields: Bound<'py, PyDict>,
    num_samples: u64,
    get: Py<PyAny>,
    page_size: Option<u64>,
    num_workers: usize,
    seed: u64,
    chunk_size: usize,
    progress: Option<Py<PyAny>>,
    skip_bad: bool,
    columnar_copy: bool,
    alpha_background: Option<(u8, u8, u8)>,
) -> PyResult<Bound<'py, PyDict>> {
    let specs = with_alpha_background(field_specs(&fields)?, alpha_background);
    let types: Vec<FieldType> = specs.iter().map(|s| s.ty.clone()).collect();
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let options = WriterOptions {
        page_size: writer_page_size(page_size)?,
        num_threads: num_workers,
        seed,
        chunk_size,
        skip_bad,
        ..Default::default()
    };
    let (options, interrupted) = with_progress(progress, options);
    let writer = Writer::new(&path, specs, options).map_err(from_storage)?;
    type SourceError = Box<dyn std::error::Error + Send + Sync>;
    // User code (`get`: a dataset's `__getitem__`, a field's `encode`) runs on this thread
    // alone, one sample at a time and in order, as with one worker: a dataset with global state
    // (`np.random.seed(i)` then `np.random.randn`) or a reader that is not thread-safe writes
    // what it gives one sample at a time. The writer encodes a chunk on its threads meanwhile.
    let fetch = |i: u64| -> Result<Vec<SampleValue>, SourceError> {
        Python::attach(|py| {
            let sample = get.call1(py, (i,))?;
            let sample = sample.bind(py);
            let items: Vec<Bound<'_, PyAny>> = sample.try_iter()?.collect::<PyResult<_>>()?;
            if items.len() != types.len() {
                return Err(bad(format!("sample {i} has {} values for {} fields", items.len(), types.len())));
            }
            items
                .iter()
                .zip(&types)
                .zip(&names)
                .map(|((v, t), n)| {
                    sample_value(t, v).map_err(|e| bad(format!("sample {i}, field '{n}': {e}")))
                })
                .collect()
        })
        .map_err(|e: PyErr| SourceError::from(e.to_string()))
    };
    let samples = InOrder { next: 0, end: num_samples, failed: false, fetch };
    let result = py.detach(|| writer.write_iter(samples));
    report(py, result, &interrupted, columnar_copy)
}

/// Samples `0..end` fetched in order on the thread that iterates (the writer's calling thread),
/// with an exact length (the writer then places pages straight into the file); no sample is
/// fetched after one that failed.
struct InOrder<F> {
    next: u64,
    end: u64,
    failed: bool,
    fetch: F,
}

impl<T, E, F: FnMut(u64) -> Result<T, E>> Iterator for InOrder<F> {
    type Item = Result<T, E>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end || self.failed {
            return None;
        }
        let item = (self.fetch)(self.next);
        self.next += 1;
        self.failed = item.is_err();
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.failed { 0 } else { usize::try_from(self.end - self.next).unwrap_or(usize::MAX) };
        (left, Some(left))
    }
}

/// `options` (from Python's arguments) with a progress hook after every chunk: Ctrl-C (even
/// without a callable), an exception in `progress(done, total)` or its returning False stops the
/// write; the exception is kept in the returned slot for [`report`] to re-raise.
pub(crate) fn with_progress(
    progress: Option<Py<PyAny>>,
    options: WriterOptions,
) -> (WriterOptions, Interrupted) {
    let interrupted: Interrupted = Arc::default();
    let stop = Arc::clone(&interrupted);
    // Every chunk is reported (not throttled): the writer's chunks are its steps.
    let hook: beton_storage::writer::ProgressFn =
        Arc::new(move |p: beton_storage::Progress| crate::progress::call(progress.as_ref(), &stop, p));
    (WriterOptions { progress: Some(hook), ..options }, interrupted)
}

/// A finished write as the dict Python gets (`path`, `num_samples`, `num_pages`, `page_size`,
/// `file_len`, `skipped`), or its error: the progress callable's exception when it stopped the write.
/// `columnar_copy`: whether the file gets its columnar copy (not a temporary file that is
/// uploaded or moved into a dataset directory right after).
pub(crate) fn report<'py>(
    py: Python<'py>,
    result: beton_storage::Result<beton_storage::WriteReport>,
    interrupted: &Interrupted,
    columnar_copy: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let report = result.map_err(|e| {
        interrupted.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_else(|| from_storage(e))
    })?;
    if columnar_copy {
        py.detach(|| beton_query::columnar::after_write(&report.path));
    }
    warn_alpha_dropped(py, &report)?;
    report_dict(py, &report)
}

/// A `UserWarning` when images with transparency were written with their alpha dropped (the
/// default, FFCV's behaviour), which shows the colours under transparent pixels: the report
/// counts them, but a report is easy to leave unread.
pub(crate) fn warn_alpha_dropped(py: Python<'_>, report: &beton_storage::WriteReport) -> PyResult<()> {
    if report.alpha_flattened == 0 || report.alpha_flattening.contains("composited") {
        return Ok(());
    }
    let message = std::ffi::CString::new(format!(
        "{}: {} images had transparency, flattened with {}: colours under transparent pixels \
         show; pass alpha_background=(r, g, b) to composite onto a colour instead",
        report.path.display(),
        report.alpha_flattened,
        report.alpha_flattening
    ))
    .unwrap_or_default();
    PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyUserWarning>(), &message, 1)
}

/// Makes the columnar copy of the file at `path` where a writer would (`columnar::after_write`):
/// after a write whose last step rewrote part of the file, such as ImageFolder's class names.
#[pyfunction]
pub(crate) fn make_columnar_copy(py: Python<'_>, path: PathBuf) {
    py.detach(|| beton_query::columnar::after_write(&path));
}

/// A write's report as the dict Python gets: `path`, `num_samples`, `num_pages`, `page_size`,
/// `file_len`, `skipped`, `alpha_flattened` (images with transparency flattened) and `alpha_flattening`
/// (how).
pub(crate) fn report_dict<'py>(
    py: Python<'py>,
    report: &beton_storage::WriteReport,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    set_fields!(d, report; path, num_samples, num_pages, page_size, file_len, skipped, alpha_flattened,
                alpha_flattening);
    Ok(d)
}

/// A copy's NULLs written as fillers, by field: `[(field, filler, rows)]`.
pub(crate) type FilledRows = Vec<(String, String, Vec<u64>)>;

/// A copy's NULLs written as fillers, as Python gets them ([`FilledRows`]).
pub(crate) fn filled(filled: &[beton_query::copy::Filled]) -> FilledRows {
    filled.iter().map(|f| (f.field.clone(), f.with.to_string(), f.rows.clone())).collect()
}

/// Class names, and every image with its label.
type Scanned = (Vec<String>, Vec<(PathBuf, u32)>);

/// Scans an ImageFolder with torchvision's rules: `(classes, [(path, label)])`.
#[pyfunction]
pub(crate) fn scan_imagefolder(py: Python<'_>, root: PathBuf) -> PyResult<Scanned> {
    let folder = py.detach(|| beton_storage::imagefolder::scan(&root)).map_err(from_storage)?;
    Ok((folder.classes, folder.samples))
}

/// Uploads the local file `path` as the object `url` (multipart above 16 MiB): how a Ray write
/// task puts its data file into a dataset on object storage before the driver commits it.
#[pyfunction]
pub(crate) fn upload_file(py: Python<'_>, path: PathBuf, url: String) -> PyResult<()> {
    py.detach(|| beton_storage::remote::objects::upload(&url, &path)).map_err(from_storage)
}
