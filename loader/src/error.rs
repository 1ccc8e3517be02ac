//! The one error type of beton-loader.

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors from building loaders, planning epochs, decoding batches and resuming.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An invalid argument (batch size 0, rank outside the world, ids the page map lacks, ...).
    #[error("invalid {what}: {why}")]
    InvalidArgument {
        /// The argument at fault.
        what: String,
        /// Why it is invalid.
        why: String,
    },

    /// A saved state resumed in a loader it does not belong to; names the first field that
    /// differs.
    #[error(
        "cannot resume: the saved loader state has {field} = {saved}, but this loader has \
         {field} = {current}"
    )]
    StateMismatch {
        /// The field that differs (`indices_fingerprint`, `world_size`, `order`, ...).
        field: &'static str,
        /// Its value in the saved state.
        saved: String,
        /// Its value in the loader resuming it.
        current: String,
    },

    /// An error from the storage layer (opening or reading the file).
    #[error(transparent)]
    Storage(#[from] beton_storage::Error),

    /// An error from the query layer (a version's manifest, a query's rows).
    #[error(transparent)]
    Query(#[from] beton_dataset::Error),

    /// An operating-system error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A decoder could not write a value (raised by decoders; the loader wraps it in
    /// [`Error::Sample`]).
    #[error("{0}")]
    Decode(String),

    /// Decoding one field of one sample failed.
    #[error("sample {index}, field '{field}': {source}")]
    Sample {
        /// The sample's row id.
        index: u64,
        /// The field.
        field: String,
        /// What went wrong.
        #[source]
        source: Box<Error>,
    },

    /// Saved state that is not a loader state: bad JSON, a missing field, an unknown version, or
    /// a position past the end of its epoch.
    #[error("invalid loader state: {0}")]
    InvalidState(String),

    /// The GPU path (feature `cuda`) could not run: no driver, no such device, a driver older
    /// than the API beton binds, a kernel that failed to compile, a failed launch or copy. The
    /// message names the device and the step.
    #[error("{0}")]
    Cuda(String),
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::InvalidState(e.to_string())
    }
}

/// An error of beton-storage's JPEG codec layer ([`beton_storage::jpeg`]) met while decoding a
/// sample: its message as a [`Error::Decode`] (the loader names the sample around it).
pub(crate) fn from_codec(e: beton_storage::Error) -> Error {
    match e {
        beton_storage::Error::Image(why) => Error::Decode(why),
        e => Error::Storage(e),
    }
}
