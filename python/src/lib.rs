//! `beton._native`: the Python bindings. Everything here converts between Python and the Rust
//! crates and releases the GIL around native work; the Python package (`python/beton/`) adds the
//! FFCV-shaped API on top, and nothing of substance lives in either.

/// Sets `dict[name] = &value.name` for each field `name` of `value` (returning the error with
/// `?`), as the bindings hand Rust reports to Python: `set_fields!(d, report; path, num_pages)`.
macro_rules! set_fields {
    ($dict:expr, $value:expr; $($field:ident),+ $(,)?) => {
        $($dict.set_item(stringify!($field), &$value.$field)?;)+
    };
}

/// Adds each class to module `m`: `add_classes!(m; IntField, FloatField)`.
macro_rules! add_classes {
    ($m:expr; $($class:ty),+ $(,)?) => {
        $($m.add_class::<$class>()?;)+
    };
}

mod arrow_write;
mod dataset;
mod errors;
mod fields;
mod gallery;
mod index_set;
mod loader;
mod ops;
mod progress;
mod source;
mod writer;

use pyo3::prelude::*;

/// Every Rust allocation of the extension goes to mimalloc, which keeps freed memory for the next
/// allocation: a query's result (64 MB of row ids for 8 M matches) lands in pages already mapped,
/// where glibc unmaps every block of 32 MiB or more on free and each fresh page costs a fault
/// (docs/PERFORMANCE.md "Memory"). Python's own objects stay with Python's allocator; buffers handed
/// to numpy or pyarrow are freed through Rust (their owner or the C Data Interface's release), so
/// no block crosses allocators.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Run when the module is loaded (`dlopen`), before its first allocation: mimalloc's arenas
/// committed as used, not eagerly in transparent huge pages (`beton_storage::allocator`: a new
/// process's `import beton`, `open` and first query over 2,000 data files touched 20 MB of fresh
/// memory, now 10 MB).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static COMMIT_ON_DEMAND: extern "C" fn() = commit_on_demand;

#[cfg(target_os = "linux")]
extern "C" fn commit_on_demand() {
    // SAFETY: the dynamic loader runs this while loading the module, before any of its code
    // (so before mimalloc's first use here), holding its lock; no beton thread exists yet, and
    // Python's threads do not write the C environment while a module's initialisers run.
    unsafe { beton_storage::allocator::commit_arenas_on_demand() }
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    add_classes!(m; dataset::Dataset, index_set::IndexSet, gallery::Gallery);
    ops::register(m)?;
    fields::register(m)?;
    add_classes!(m; loader::Order, loader::Loader, loader::Epoch, loader::Batch, loader::Column);
    m.add_function(wrap_pyfunction!(writer::write, m)?)?;
    m.add_function(wrap_pyfunction!(arrow_write::write_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(writer::scan_imagefolder, m)?)?;
    m.add_function(wrap_pyfunction!(writer::upload_file, m)?)?;
    m.add_function(wrap_pyfunction!(writer::make_columnar_copy, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
