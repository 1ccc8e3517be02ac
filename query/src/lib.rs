//! beton-query: SQL over a dataset's table, yielding index sets; explain and galleries.
//!
//! beton's central idea: the per-sample data table is a columnar table one can query, and a query
//! yields an [`IndexSet`] that the loader samples from. The table, index sets and versions live
//! in beton-dataset ([`Table`], [`IndexSet`], [`versioned`]), re-exported here; this crate adds
//! [`sql`] (a query → an index set or Arrow columns), the edits driven by SQL
//! ([`SqlEdits`]), [`explain`] and [`gallery`].

// Two exceptions, `sql::fused` and `sql::kernels`: calling the loops compiled for AVX2 / AVX-512
// (FMA) after checking at run time that the CPU has them, and the vector store of the AVX-512
// loop.
#![deny(unsafe_code)]

pub mod edits;
pub mod explain;
pub mod fuzz;
pub mod gallery;
pub mod sql;

pub use beton_dataset::{columnar, copy, error, index_set, random, splits, store, table, take, versioned};
pub use beton_dataset::{Error, IndexSet, Result, Table};
pub use edits::SqlEdits;
pub use sql::{
    groups, image_hashes, image_pairs, image_pairs_between, near_pairs, near_pairs_between, nearest, query,
    query_with, select_indices, select_indices_with, IvfIndex, Neighbour, Pair, Param,
};
