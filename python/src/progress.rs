//! Progress of long native calls (`Version.export`, `compact`, `concat`): a Python callable
//! `progress(done, total)` called while the work runs without the GIL. The GIL is taken only to
//! report, at most every [`EVERY`] (and for the last rows), so a bar costs nothing measurable.
//! An exception it raises, its returning False, or Ctrl-C cancels the work (the writer then
//! publishes nothing) and the exception is re-raised in place of the cancel error.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use beton_query::versioned::ExportOptions;
use beton_storage::writer::ProgressFn;
use beton_storage::Progress;
use pyo3::prelude::*;

/// An exception raised by a progress callable, kept to re-raise when the work stops.
pub(crate) type Interrupted = Arc<Mutex<Option<PyErr>>>;

/// The longest wait between two reports to Python: a bar redraws about this often (tqdm's own
/// default `mininterval` is 0.1 s) and Ctrl-C is noticed this fast.
const EVERY: Duration = Duration::from_millis(50);

/// Export options of `num_workers` threads reporting to `progress` (Ctrl-C is checked even
/// without one), and the slot where a raised exception is kept for [`error`].
pub(crate) fn export_options(
    num_workers: usize,
    progress: Option<Py<PyAny>>,
) -> (ExportOptions, Interrupted) {
    let (hook, interrupted) = hook(progress);
    (ExportOptions { num_threads: num_workers, progress: Some(hook) }, interrupted)
}

/// A throttled progress hook calling `progress`, and the slot its exception goes to.
fn hook(progress: Option<Py<PyAny>>) -> (ProgressFn, Interrupted) {
    let interrupted: Interrupted = Arc::default();
    let stop = Arc::clone(&interrupted);
    let last: Mutex<Option<Instant>> = Mutex::new(None);
    let hook: ProgressFn = Arc::new(move |p: Progress| {
        let now = Instant::now();
        {
            let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|t| now.duration_since(t) >= EVERY) || Some(p.done) == p.total;
            if !due {
                return true;
            }
            *last = Some(now);
        }
        call(progress.as_ref(), &stop, p)
    });
    (hook, interrupted)
}

/// Takes the GIL and reports `p` to `progress` (if any): true to go on. Ctrl-C, an exception
/// (kept in `stop`) or False from the callable stops the work.
pub(crate) fn call(progress: Option<&Py<PyAny>>, stop: &Interrupted, p: Progress) -> bool {
    Python::attach(|py| {
        let result = py.check_signals().and_then(|()| match progress {
            Some(cb) => cb.call1(py, (p.done, p.total)).map(|r| !matches!(r.extract::<bool>(py), Ok(false))),
            None => Ok(true),
        });
        result.unwrap_or_else(|e| {
            *stop.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            false
        })
    })
}

/// The exception that cancelled the work, if one did; `err` otherwise.
pub(crate) fn error(interrupted: &Interrupted, err: PyErr) -> PyErr {
    interrupted.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or(err)
}
