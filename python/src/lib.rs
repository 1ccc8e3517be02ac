//! `beton._native`: the Python bindings. Everything here converts between Python and the Rust
//! crates and releases the GIL around native work; the Python package (`python/beton/`) adds the
//! FFCV-shaped API on top, and nothing of substance lives in either.

mod arrow_write;
mod dataset;
mod errors;
mod fields;
mod index_set;
mod loader;
mod ops;
mod version;
mod writer;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<dataset::Dataset>()?;
    m.add_class::<version::Version>()?;
    m.add_class::<index_set::IndexSet>()?;
    ops::register(m)?;
    fields::register(m)?;
    m.add_class::<loader::Order>()?;
    m.add_class::<loader::Loader>()?;
    m.add_class::<loader::Epoch>()?;
    m.add_class::<loader::Batch>()?;
    m.add_class::<loader::Column>()?;
    m.add_function(wrap_pyfunction!(writer::write, m)?)?;
    m.add_function(wrap_pyfunction!(arrow_write::write_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(writer::scan_imagefolder, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
