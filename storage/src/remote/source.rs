//! What a replica reads from: the [`Source`] trait (range reads of one object), what an object is
//! ([`ObjectInfo`]) and an entry of a listing ([`Entry`]). Implemented by `store.rs` with the
//! `remote` feature; the replica (`mod.rs`) holds a `Box<dyn Source>`.

use std::ops::Range;

use crate::error::Result;

/// What a remote object is: its length and a version string (ETag, else last-modified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectInfo {
    pub(crate) len: u64,
    pub(crate) version: String,
}

/// Where a replica's bytes come from: range reads of one object.
pub(crate) trait Source: Send + Sync {
    /// The URL, for errors and names.
    fn url(&self) -> &str;
    /// Reads bytes `ranges` of the object (each within its length), concurrently, at most
    /// `in_flight` at a time, each retried on transient failures; hands each range's bytes to
    /// `done` (with its position in `ranges`) as soon as it arrives, in any order. Stops at the
    /// first error, its own or `done`'s.
    fn fetch(
        &self,
        ranges: &[Range<u64>],
        in_flight: usize,
        done: &mut dyn FnMut(usize, Vec<u8>) -> Result<()>,
    ) -> Result<()>;
}

/// An object of a listing ([`objects::list_entries`](super::objects::list_entries)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name, relative to the folder listed.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written.
    pub modified: std::time::SystemTime,
}
