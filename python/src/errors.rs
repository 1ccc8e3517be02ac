//! Rust errors as Python exceptions: corrupt files raise `beton.CorruptFileError` (a
//! `ValueError`), I/O errors `OSError`, unknown names `KeyError`, bad arguments and SQL
//! `ValueError`, the GPU path's errors `RuntimeError`; the message is the Rust error's, which
//! names the file, offset, sample or SQL position.

use pyo3::exceptions::{PyKeyError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    _native,
    CorruptFileError,
    PyValueError,
    "A .beton file whose bytes break the format (the message names the byte offset)."
);

pyo3::create_exception!(
    _native,
    ConflictError,
    PyRuntimeError,
    "Another writer committed a version that changed what this edit read; nothing was committed."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CorruptFileError", m.py().get_type::<CorruptFileError>())?;
    m.add("ConflictError", m.py().get_type::<ConflictError>())
}

fn storage(e: beton_storage::Error) -> PyErr {
    use beton_storage::Error as E;
    let msg = e.to_string();
    match e {
        E::Io { source, .. } => PyOSError::new_err((source.raw_os_error().unwrap_or(0), msg)),
        E::Corrupt { .. } | E::InterruptedWrite { .. } | E::UnsupportedVersion { .. } => {
            CorruptFileError::new_err(msg)
        }
        E::NoSuchField { .. } => PyKeyError::new_err(msg),
        // The file changed under the handle: the file system's business, not the caller's value.
        E::FileChanged { .. } | E::FileReplaced { .. } => PyOSError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

/// A storage error as a Python exception.
pub(crate) fn from_storage(e: beton_storage::Error) -> PyErr {
    storage(e)
}

/// A query error as a Python exception.
pub(crate) fn from_query(e: beton_query::Error) -> PyErr {
    use beton_query::Error as E;
    match e {
        E::Storage(s) => storage(s),
        E::NoSuchColumn { .. } | E::NoSuchSplit { .. } => PyKeyError::new_err(e.to_string()),
        E::Conflict { .. } => ConflictError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// A loader error as a Python exception.
pub(crate) fn from_loader(e: beton_loader::Error) -> PyErr {
    use beton_loader::Error as E;
    match e {
        E::Storage(s) => storage(s),
        E::Query(q) => from_query(q),
        E::Io { .. } => PyOSError::new_err(e.to_string()),
        // No driver, no such device, a failed kernel: what torch raises for CUDA trouble.
        E::Cuda(_) => PyRuntimeError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}
