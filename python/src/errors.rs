//! Rust errors as Python exceptions. Every error beton raises is a `beton.BetonError`, and also
//! the built-in exception Python code already catches for it:
//!
//! | class | also a | for |
//! |---|---|---|
//! | `CorruptFileError` | `ValueError` | bytes that break the format, an interrupted write, a dataset directory's damaged metadata (a checksum that does not match, inconsistent entries, a file leading outside it) |
//! | `QueryError` | `ValueError` | SQL that does not parse or does not type-check |
//! | `SampleError` | `ValueError` | a sample that cannot be written or decoded |
//! | `InvalidArgumentError` | `ValueError` | a bad argument or saved state |
//! | `NotFoundError` | `KeyError` | no such field, column or split |
//! | `BetonIOError` | `OSError` | reading or writing a file; a file changed under its handle |
//! | `MissingFileError` | `FileNotFoundError` | a file that does not exist (ENOENT), an object at a URL that does not (404) |
//! | `AccessDeniedError` | `PermissionError` | remote storage refused the credentials (401/403) |
//! | `ConflictError` | `RuntimeError` | a concurrent commit changed what an edit read |
//! | `MergeConflictError` | `ConflictError` | a merge's conflicts, left to the user (`.conflicts`) |
//! | `GpuError` | `RuntimeError` | the CUDA path |
//!
//! Each carries what the Rust error knows of where: `path`, `sample` (row id), `field`,
//! `offset` (byte offset in the file), `sql_position` (`(line, column)`, from 1); `None` where
//! it does not apply. The message is the Rust error's, which names the same things.

use pyo3::exceptions::{
    PyException, PyFileNotFoundError, PyKeyError, PyOSError, PyPermissionError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::PyTypeInfo;

pyo3::create_exception!(beton, BetonError, PyException, "The base of every error beton raises.");

macro_rules! subclass {
    ($name:ident, $builtin:ty, $doc:literal) => {
        subclass!($name, |py| Ok::<_, PyErr>(BetonError::type_object(py)), $builtin, $doc);
    };
    ($name:ident, $parent:expr, $builtin:ty, $doc:literal) => {
        #[doc = $doc]
        pub struct $name;

        impl $name {
            /// The class, with its parent (`BetonError`) and `$builtin` as bases, made once.
            fn type_object(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyType>> {
                static CELL: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> = pyo3::sync::PyOnceLock::new();
                CELL.get_or_try_init(py, || {
                    let parent: Bound<'_, pyo3::types::PyType> = ($parent)(py)?;
                    let bases = PyTuple::new(py, [parent, <$builtin>::type_object(py)])?;
                    let dict = pyo3::types::PyDict::new(py);
                    dict.set_item("__doc__", $doc)?;
                    dict.set_item("__module__", "beton")?;
                    let class = py
                        .import("builtins")?
                        .getattr("type")?
                        .call1((stringify!($name), bases, dict))?
                        .cast_into::<pyo3::types::PyType>()?;
                    Ok::<_, PyErr>(class.unbind())
                })
                .map(|t| t.bind(py).clone())
            }
        }
    };
}

subclass!(
    CorruptFileError,
    PyValueError,
    "A .beton file whose bytes break the format (`offset` says where)."
);
subclass!(QueryError, PyValueError, "SQL that does not parse or type-check (`sql_position` says where).");
subclass!(SampleError, PyValueError, "A sample that cannot be written or decoded (`sample`, `field`).");
subclass!(InvalidArgumentError, PyValueError, "An argument or saved state beton cannot use.");
subclass!(NotFoundError, PyKeyError, "No such field, column or split.");
subclass!(BetonIOError, PyOSError, "Reading or writing a file failed, or a file changed under its handle.");
subclass!(
    MissingFileError,
    BetonIOError::type_object,
    PyFileNotFoundError,
    "A file or dataset directory that does not exist (a BetonIOError and a FileNotFoundError)."
);
subclass!(
    AccessDeniedError,
    BetonIOError::type_object,
    PyPermissionError,
    "Remote storage refused access: missing or wrong credentials (a BetonIOError and a PermissionError)."
);
subclass!(
    ConflictError,
    PyRuntimeError,
    "Another writer committed a version that changed what this edit read; nothing was committed."
);
subclass!(
    MergeConflictError,
    ConflictError::type_object,
    PyRuntimeError,
    "A merge found conflicts its strategy leaves to the user; nothing was committed (`.conflicts`)."
);
subclass!(GpuError, PyRuntimeError, "The CUDA path failed (no driver, no device, a failed kernel).");

/// The classes, for `register` and for `raise`.
#[derive(Clone, Copy)]
enum Kind {
    Corrupt,
    Query,
    Sample,
    Argument,
    NotFound,
    Io,
    Conflict,
    MergeConflict,
    Gpu,
}

/// A merge conflict as Python gets it: `(row_id, column, base, ours, theirs, kind)`.
pub(crate) type ConflictTuple =
    (Option<u64>, Option<String>, Option<String>, Option<String>, Option<String>, &'static str);

/// [`ConflictTuple`] of `c`.
pub(crate) fn conflict_tuple(c: &beton_query::versioned::merge::Conflict) -> ConflictTuple {
    (c.row_id, c.column.clone(), c.base.clone(), c.ours.clone(), c.theirs.clone(), c.kind.name())
}

/// Where an error happened, as far as it is known.
#[derive(Default)]
struct Where {
    path: Option<String>,
    sample: Option<u64>,
    field: Option<String>,
    offset: Option<u64>,
    sql_position: Option<(u64, u64)>,
    errno: Option<i32>,
    conflicts: Option<Vec<ConflictTuple>>,
}

const ATTRIBUTES: [&str; 5] = ["path", "sample", "field", "offset", "sql_position"];

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base = BetonError::type_object(py);
    for name in ATTRIBUTES {
        base.setattr(name, py.None())?;
    }
    m.add("BetonError", base)?;
    m.add("CorruptFileError", CorruptFileError::type_object(py)?)?;
    m.add("QueryError", QueryError::type_object(py)?)?;
    m.add("SampleError", SampleError::type_object(py)?)?;
    m.add("InvalidArgumentError", InvalidArgumentError::type_object(py)?)?;
    m.add("NotFoundError", NotFoundError::type_object(py)?)?;
    m.add("BetonIOError", BetonIOError::type_object(py)?)?;
    m.add("MissingFileError", MissingFileError::type_object(py)?)?;
    m.add("AccessDeniedError", AccessDeniedError::type_object(py)?)?;
    m.add("ConflictError", ConflictError::type_object(py)?)?;
    let merge = MergeConflictError::type_object(py)?;
    // The conflicts of the merge that raised it (the Python layer makes them a table).
    merge.setattr("conflicts", py.None())?;
    m.add("MergeConflictError", merge)?;
    m.add("GpuError", GpuError::type_object(py)?)
}

/// The exception of class `kind` with `message` and the attributes of `at`.
fn raise(kind: Kind, message: String, at: Where) -> PyErr {
    Python::attach(|py| {
        let made = (|| -> PyResult<PyErr> {
            let class = match kind {
                Kind::Corrupt => CorruptFileError::type_object(py)?,
                Kind::Query => QueryError::type_object(py)?,
                Kind::Sample => SampleError::type_object(py)?,
                Kind::Argument => InvalidArgumentError::type_object(py)?,
                Kind::NotFound => NotFoundError::type_object(py)?,
                Kind::Io if at.errno == Some(2) => MissingFileError::type_object(py)?,
                Kind::Io if at.errno == Some(13) => AccessDeniedError::type_object(py)?,
                Kind::Io => BetonIOError::type_object(py)?,
                Kind::Conflict => ConflictError::type_object(py)?,
                Kind::MergeConflict => MergeConflictError::type_object(py)?,
                Kind::Gpu => GpuError::type_object(py)?,
            };
            // OSError(errno, strerror) sets `errno`; one argument for the others.
            let value = match (kind, at.errno) {
                (Kind::Io, Some(errno)) => class.call1((errno, message.clone()))?,
                _ => class.call1((message.clone(),))?,
            };
            value.setattr("path", at.path)?;
            value.setattr("sample", at.sample)?;
            value.setattr("field", at.field)?;
            value.setattr("offset", at.offset)?;
            value.setattr("sql_position", at.sql_position)?;
            if let Some(conflicts) = at.conflicts {
                value.setattr("conflicts", conflicts)?;
            }
            Ok(PyErr::from_value(value))
        })();
        made.unwrap_or_else(|e| e)
    })
}

fn path(p: &std::path::Path) -> Option<String> {
    Some(p.display().to_string())
}

/// The class and location of a storage error.
fn storage_kind(e: &beton_storage::Error) -> (Kind, Where) {
    use beton_storage::Error as E;
    let mut at = Where::default();
    let kind = match e {
        E::Io { path: p, source } => {
            at.path = path(p);
            at.errno = source.raw_os_error();
            Kind::Io
        }
        E::Corrupt { path: p, offset, .. } => {
            at.path = path(p);
            at.offset = Some(*offset);
            Kind::Corrupt
        }
        E::InterruptedWrite { path: p, .. } | E::UnsupportedVersion { path: p, .. } => {
            at.path = path(p);
            Kind::Corrupt
        }
        E::FileChanged { path: p, .. } | E::FileReplaced { path: p, .. } => {
            at.path = path(p);
            Kind::Io
        }
        E::NoRoomForSplits { path: p, .. } => {
            at.path = path(p);
            Kind::Argument
        }
        E::UnknownCustomField { path: p, field } => {
            at.path = path(p);
            at.field = Some(field.clone());
            Kind::Argument
        }
        E::NoSuchField { name, .. } => {
            at.field = Some(name.clone());
            Kind::NotFound
        }
        E::SampleOutOfRange { index, .. } => {
            at.sample = Some(*index);
            Kind::Sample
        }
        E::InvalidSample { index, field, .. } => {
            at.sample = Some(*index);
            at.field = Some(field.clone());
            Kind::Sample
        }
        E::SampleTooLarge { index, .. } | E::Source { index, .. } => {
            at.sample = Some(*index);
            Kind::Sample
        }
        E::Image(_) => Kind::Sample,
        // Remote errors name the URL as their path; a missing object reads as ENOENT, refused
        // access as EACCES (FileNotFoundError, PermissionError).
        E::RemoteNotFound { url } => {
            at.path = Some(url.clone());
            at.errno = Some(2);
            Kind::Io
        }
        E::RemoteDenied { url, .. } => {
            at.path = Some(url.clone());
            at.errno = Some(13);
            Kind::Io
        }
        E::Remote { url, .. } | E::RemoteUnavailable { url, .. } => {
            at.path = Some(url.clone());
            Kind::Io
        }
        E::Cancelled { path: p, .. } => {
            at.path = path(p);
            Kind::Argument
        }
        _ => Kind::Argument,
    };
    (kind, at)
}

fn query_kind(e: &beton_query::Error) -> (Kind, Where) {
    use beton_query::Error as E;
    match e {
        E::Storage(s) => storage_kind(s),
        E::NoSuchColumn { name, .. } => {
            (Kind::NotFound, Where { field: Some(name.clone()), ..Where::default() })
        }
        E::NoSuchSplit { .. } => (Kind::NotFound, Where::default()),
        E::CorruptIndexSet { offset, .. } => {
            (Kind::Corrupt, Where { offset: Some(*offset), ..Where::default() })
        }
        E::Sql { line, column, .. } => {
            (Kind::Query, Where { sql_position: Some((*line, *column)), ..Where::default() })
        }
        E::Conflict { .. } => (Kind::Conflict, Where::default()),
        E::MergeConflict { conflicts } => (
            Kind::MergeConflict,
            Where { conflicts: Some(conflicts.iter().map(conflict_tuple).collect()), ..Where::default() },
        ),
        E::Corrupt { path: p, .. } => (Kind::Corrupt, Where { path: path(p), ..Where::default() }),
        _ => (Kind::Argument, Where::default()),
    }
}

fn loader_kind(e: &beton_loader::Error) -> (Kind, Where) {
    use beton_loader::Error as E;
    match e {
        E::Storage(s) => storage_kind(s),
        E::Query(q) => query_kind(q),
        E::Io { path: p, source } => {
            (Kind::Io, Where { path: path(p), errno: source.raw_os_error(), ..Where::default() })
        }
        E::Sample { index, field, source } => {
            // The inner error's class (a corrupt file stays a CorruptFileError), with the sample.
            let (kind, mut at) = loader_kind(source);
            at.sample = Some(*index);
            at.field = Some(field.clone());
            (if matches!(kind, Kind::Argument) { Kind::Sample } else { kind }, at)
        }
        E::Decode(_) => (Kind::Sample, Where::default()),
        E::Cuda(_) => (Kind::Gpu, Where::default()),
        _ => (Kind::Argument, Where::default()),
    }
}

/// A storage error as a Python exception.
pub(crate) fn from_storage(e: beton_storage::Error) -> PyErr {
    let (kind, at) = storage_kind(&e);
    raise(kind, e.to_string(), at)
}

/// A query error as a Python exception.
pub(crate) fn from_query(e: beton_query::Error) -> PyErr {
    let (kind, at) = query_kind(&e);
    raise(kind, e.to_string(), at)
}

/// A loader error as a Python exception.
pub(crate) fn from_loader(e: beton_loader::Error) -> PyErr {
    let (kind, at) = loader_kind(&e);
    raise(kind, e.to_string(), at)
}
