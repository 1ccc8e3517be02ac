//! beton-query: the data table of a `.beton` file as Arrow columns, and index sets.
//!
//! beton's central idea: the per-sample data table is a columnar table one can query, and a query
//! yields an [`IndexSet`] that the loader samples from. [`Table`] materialises the columns a
//! query touches, lazily, with a columnar gather from the row-major table; payload pages are read
//! only for columns whose values live there (text). [`versioned`] makes a directory of data
//! files an editable dataset with one manifest per version.

// One exception, `sql::fused`: calling the loops compiled for AVX2 / AVX-512 after checking at
// run time that the CPU has them, and the vector store of the AVX-512 loop.
#![deny(unsafe_code)]

pub mod columnar;
pub mod copy;
pub mod error;
pub mod explain;
pub mod gallery;
pub mod index_set;
pub mod random;
pub mod splits;
pub mod sql;
pub mod table;
pub mod take;
pub mod versioned;

pub use error::{Error, Result};
pub use index_set::IndexSet;
pub use sql::{query, select_indices};
pub use table::Table;
pub use take::take;
