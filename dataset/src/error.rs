//! The one error type of beton-dataset, which beton-query shares (it re-exports it).

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors from building tables, evaluating queries and combining index sets.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An error from the storage layer (opening or reading the file).
    #[error(transparent)]
    Storage(#[from] beton_storage::Error),

    /// A column that does not exist; lists the columns there are.
    #[error("no column named '{name}'; the columns are: {available}")]
    NoSuchColumn {
        /// The name asked for.
        name: String,
        /// Comma-separated list of the columns there are.
        available: String,
    },

    /// An invalid argument (fractions that do not sum to at most 1, unsorted ids, ...).
    #[error("invalid {what}: {why}")]
    InvalidArgument {
        /// The argument at fault.
        what: String,
        /// Why it is invalid.
        why: String,
    },

    /// A named split the file does not have; lists the splits it has.
    #[error("no split named '{name}'; the splits are: {available}")]
    NoSuchSplit {
        /// The name asked for.
        name: String,
        /// Comma-separated list of the splits there are, or "(none)".
        available: String,
    },

    /// Serialised bytes that are not an index set.
    #[error("corrupt index set at byte {offset}: {what}")]
    CorruptIndexSet {
        /// Byte offset of the problem.
        offset: u64,
        /// What is wrong.
        what: String,
    },

    /// An SQL text that does not parse, names an unknown column, mixes types or uses syntax beton
    /// does not support. `line` and `column` are 1-based positions in the SQL text (0 when the
    /// position is unknown).
    #[error("SQL error at line {line}, column {column}: {message}")]
    Sql {
        /// What is wrong.
        message: String,
        /// 1-based line in the SQL text.
        line: u64,
        /// 1-based column in the SQL text.
        column: u64,
    },

    /// A concurrent commit changed what an edit read (docs/FORMAT.md §13): the edit was not
    /// committed; open the latest version and edit again.
    #[error("conflict with version {version}: {why}; nothing was committed")]
    Conflict {
        /// The version committed meanwhile.
        version: u64,
        /// What it changed.
        why: String,
    },

    /// A merge found conflicts its strategy leaves to the user: nothing was committed.
    #[error("merge conflict: {} conflict(s), nothing was committed; first: {}", conflicts.len(), conflicts.first().map(|c| c.to_string()).unwrap_or_default())]
    MergeConflict {
        /// The conflicts, sorted by row id and column.
        conflicts: Vec<crate::versioned::conflict::Conflict>,
    },

    /// A file of a dataset directory whose bytes changed after they were written (a checksum
    /// that does not match), or a manifest whose entries contradict each other or the files
    /// they name (a data file named twice, overlapping row ids, a count that does not fit), or
    /// a file leading outside the directory: nothing is read from it. `what` names the version
    /// and the entry where they are known.
    #[error("{path}: damaged dataset file: {what}")]
    Corrupt {
        /// The file at fault (the manifest, for an inconsistent entry).
        path: std::path::PathBuf,
        /// What is wrong.
        what: String,
    },

    /// An Arrow error while building or computing on columns.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
}

/// Whether `e` is a file's "not found" (an [`io`] error of kind `NotFound`).
pub(crate) fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Storage(beton_storage::Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound)
}

/// An I/O error naming its path.
pub(crate) fn io(path: &std::path::Path, e: std::io::Error) -> Error {
    Error::Storage(beton_storage::Error::Io { path: path.to_path_buf(), source: e })
}
