//! The one error type of beton-storage.
//!
//! Every variant says *where*: the file, the byte offset, the sample index or the field name, so
//! that a user can find the problem without a debugger. Corrupt or truncated files are always
//! [`Error::Corrupt`]; nothing in this crate panics on bad input.

use std::path::PathBuf;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors from opening, verifying, reading and writing `.beton` files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file being read or written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The file's bytes break the format. `offset` is the byte offset of the structure at fault.
    #[error("{path}: corrupt file at byte {offset}: {what}")]
    Corrupt {
        /// The file (or `<memory>` for an in-memory buffer).
        path: PathBuf,
        /// Byte offset of the faulty structure.
        offset: u64,
        /// What is wrong, naming the structure (header field, descriptor, sample, allocation).
        what: String,
    },

    /// The file was left by a writer that never finished (FFCV's `alloc_table_ptr` = 0).
    #[error(
        "{path}: interrupted write: alloc_table_ptr is 0, so the writer never finished \
         (the file holds a header from before the first sample and no allocation table); \
         rewrite the dataset"
    )]
    InterruptedWrite {
        /// The file.
        path: PathBuf,
    },

    /// The file shrank (or lost its backing storage) while beton was reading it through its
    /// memory map: a read past its new end got zeros instead of a signal, and those are not
    /// data. The handle stays unusable; reopen the file once its writer is done.
    #[error(
        "{path}: the file was truncated or changed by another program while beton was reading it \
         (reads past its new end failed); reopen it"
    )]
    FileChanged {
        /// The file.
        path: PathBuf,
    },

    /// A write through a handle whose path no longer holds the file it opened (replaced by
    /// another write, or rewritten in place): refused, so it cannot land in a file it did not
    /// open.
    #[error(
        "{path}: the file at this path is no longer the one this handle opened (it was replaced or \
         rewritten since); refusing to write into it: reopen it with beton.open and retry"
    )]
    FileReplaced {
        /// The file.
        path: PathBuf,
    },

    /// The format version is not one this reader understands.
    #[error("{path}: unsupported .beton version {version} (beton reads version {expected}, FFCV 1.x's)")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found in the header.
        version: u16,
        /// The version this reader supports.
        expected: u16,
    },

    /// The named splits do not fit the room the file has for them (FORMAT.md §12).
    #[error(
        "{path}: the splits need {needed} bytes but the file has room for {available} \
         (the spare bytes between its data table and first page, halved for crash safety); \
         remove splits you no longer need, or rewrite the file with beton (which reserves \
         64 KiB + 2 bytes per sample by default, WriterOptions::splits_reserve)"
    )]
    NoRoomForSplits {
        /// The file.
        path: PathBuf,
        /// Bytes of one slot the new splits need.
        needed: u64,
        /// Bytes of one slot the file has.
        available: u64,
    },

    /// A field of type 255 (custom) whose row layout the file does not store.
    #[error(
        "{path}: field '{field}' is a custom field (type id 255) not written by beton; \
         the file does not store its row layout: pass it with \
         OpenOptions::custom_layout(\"{field}\", size, align) (CLI: --custom {field}=SIZE[:ALIGN])"
    )]
    UnknownCustomField {
        /// The file.
        path: PathBuf,
        /// The field name.
        field: String,
    },

    /// A field or option asked for by name does not exist.
    #[error("no field named '{name}'; the fields are: {available}")]
    NoSuchField {
        /// The name asked for.
        name: String,
        /// Comma-separated list of the fields there are.
        available: String,
    },

    /// A sample index past the end.
    #[error("sample {index} is out of range: the dataset has {num_samples} samples")]
    SampleOutOfRange {
        /// The index asked for.
        index: u64,
        /// The number of samples.
        num_samples: u64,
    },

    /// An invalid schema or writer option (field names, page size, dtype, ...).
    #[error("invalid {what}: {why}")]
    InvalidArgument {
        /// The option or schema item at fault.
        what: String,
        /// Why it is invalid.
        why: String,
    },

    /// A sample given to the writer is invalid; names the sample and field.
    #[error("sample {index}, field '{field}': {why}")]
    InvalidSample {
        /// Index of the sample in the source.
        index: u64,
        /// The field at fault.
        field: String,
        /// What is wrong.
        why: String,
    },

    /// A sample's payloads do not fit in one page.
    #[error(
        "sample {index}: its payloads take {bytes} bytes, more than one page of {page_size} bytes \
         (FFCV's rule keeps a sample in one page); use page_size >= {needed}"
    )]
    SampleTooLarge {
        /// Index of the sample.
        index: u64,
        /// Total payload bytes of the sample.
        bytes: u64,
        /// The page size in use.
        page_size: u64,
        /// The smallest valid page size that would fit it.
        needed: u64,
    },

    /// Image bytes that cannot be decoded or encoded.
    #[error("{0}")]
    Image(String),

    /// The source of samples failed (user callback or iterator).
    #[error("sample {index}: the source failed: {source}")]
    Source {
        /// Index of the sample.
        index: u64,
        /// The source's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// An object on remote storage does not exist (HTTP 404, or no such file for `file://`).
    #[error("{url}: not found (no object at this URL)")]
    RemoteNotFound {
        /// The URL opened.
        url: String,
    },

    /// Remote storage refused access (HTTP 401/403): credentials missing, wrong or without the
    /// right to read (or write) this object.
    #[error("{url}: access denied: {what}")]
    RemoteDenied {
        /// The URL.
        url: String,
        /// What the server said.
        what: String,
    },

    /// Remote storage could not be reached (connection refused, DNS failure, timeouts) or kept
    /// failing (5xx, connection resets) for the whole retry budget: names the URL, what failed
    /// (a listing, a byte range), the tries, the budget and its variable, and the last error.
    #[error("{url}: {what}")]
    RemoteUnavailable {
        /// The URL.
        url: String,
        /// What failed, how long it was tried and the last error.
        what: String,
    },

    /// A request to remote storage failed in a way another try would not change (a bad URL, a
    /// request the server does not support), or the object changed since it was opened (its
    /// ETag differs): names the URL and what failed.
    #[error("{url}: {what}")]
    Remote {
        /// The URL.
        url: String,
        /// What failed, with the byte range and the last error.
        what: String,
    },

    /// The write was cancelled (a progress callback asked to stop).
    #[error("write cancelled after {done} samples; nothing was written to {path}")]
    Cancelled {
        /// Samples encoded before the cancel.
        done: u64,
        /// The destination, left untouched.
        path: PathBuf,
    },
}

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// Attaches a sample index and field name to an error from encoding one value.
    pub(crate) fn in_sample(self, index: u64, field: &str) -> Self {
        match self {
            Error::Image(why) | Error::InvalidArgument { why, .. } => {
                Error::InvalidSample { index, field: field.to_string(), why }
            }
            other => other,
        }
    }
}
