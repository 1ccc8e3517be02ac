//! The one error type of beton-loader.

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors from planning epochs and from saving and resuming loader state.
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

    /// Saved state that is not a loader state: bad JSON, a missing field, an unknown version, or
    /// a position past the end of its epoch.
    #[error("invalid loader state: {0}")]
    InvalidState(String),
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::InvalidState(e.to_string())
    }
}
