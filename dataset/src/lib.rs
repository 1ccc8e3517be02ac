//! beton-dataset: a beton dataset as one table, and its versions.
//!
//! A dataset is a list of data files (fragments: `.beton` files of beton-storage) with the
//! column, deletion and row-id files that apply to them at a version. [`Table`] shows them as
//! one Arrow table with one index space, materialising the columns asked for, lazily, by a
//! columnar gather from each data file's row-major table (or straight from its
//! [`columnar`] copy). [`IndexSet`] is a set of rows — what a query yields and the loader
//! samples from. [`versioned`] owns the versions of a dataset directory: manifests, atomic
//! commits, conflicts, cleanup and diff (docs/FORMAT.md §13).
//!
//! SQL over a [`Table`] lives one crate up, in beton-query; the loader reads a version's data
//! files through this crate alone.

#![deny(unsafe_code)]

pub mod column_values;
pub mod columnar;
pub mod copy;
pub mod error;
mod gather;
pub mod index_set;
pub mod kept_rows;
pub mod random;
pub mod shared_vec;
pub mod splits;
pub mod store;
pub mod table;
pub mod take;
pub mod versioned;

pub use error::{Error, Result};
pub use index_set::IndexSet;
pub use table::{PartColumn, Table};
pub use take::take;
