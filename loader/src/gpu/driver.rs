//! Loading the CUDA libraries without a panic. cudarc (dynamic loading) `dlopen`s `libcuda` and
//! `libnvrtc` at their first call and panics when they are missing, and resolves each symbol at
//! its first call, panicking when the library lacks it: [`probe_library`] checks first that a
//! library loads, [`guarded`] turns a panic that still comes into an [`Error::Cuda`]. Both the
//! context (`context.rs`) and the kernel modules (`normalize.rs`) open CUDA through these.

use std::panic::{catch_unwind, AssertUnwindSafe};

use cudarc::driver::sys;

use crate::error::{Error, Result};

/// The CUDA driver API version cudarc is built for (its `cuda-12000` feature, set in the
/// workspace `Cargo.toml`): a driver older than this may lack symbols cudarc calls.
pub(super) const DRIVER_API_VERSION: i32 = 12000;

/// The driver's CUDA version (`12040` for 12.4).
pub(super) fn driver_version() -> std::result::Result<i32, cudarc::driver::DriverError> {
    let mut v = 0;
    // SAFETY: `cuDriverGetVersion` writes one int through the pointer, which points to a live
    // local; `probe_library` has shown that libcuda loads, so cudarc's symbol lookup succeeds.
    unsafe { sys::cuDriverGetVersion(&mut v) }.result()?;
    Ok(v)
}

/// Checks that one of the names cudarc tries for the shared library `name` (`"cuda"`,
/// `"nvrtc"`) loads, so that cudarc's own loading (which panics on failure) succeeds.
///
/// # Errors
/// The conventional file name (the one a driver install provides, `libcuda.so.1`) and
/// `"<the dynamic loader's reason>; also tried <the other names>"`.
pub(super) fn probe_library(name: &str) -> std::result::Result<(), (String, String)> {
    let mut candidates = cudarc::get_lib_name_candidates(name);
    candidates.dedup();
    let mut seen = std::collections::HashSet::new();
    candidates.retain(|c| seen.insert(c.clone()));
    // The file a driver (or toolkit) install provides, whose failure is the one worth reading.
    let conventional = match name {
        "cuda" => "libcuda.so.1".to_string(),
        _ => format!("lib{name}.so.{}", DRIVER_API_VERSION / 1000),
    };
    let mut reason = None;
    for file in &candidates {
        // SAFETY: loading the vendor's library runs its initialisers, exactly as cudarc's own
        // loading of the same file does right after; nothing is called through it here.
        match unsafe { libloading::Library::new(file) } {
            Ok(_) => return Ok(()),
            Err(e) if *file == conventional || reason.is_none() => {
                let detail = std::error::Error::source(&e).map(|s| format!(": {s}")).unwrap_or_default();
                reason = Some((file.clone(), format!("{e}{detail}")));
            }
            Err(_) => {}
        }
    }
    let (file, why) = reason.unwrap_or_else(|| (conventional, "no candidate file names".into()));
    let others: Vec<_> = candidates.iter().filter(|c| **c != file).map(String::as_str).collect();
    Err((file, format!("{why}; also tried {}", others.join(", "))))
}

/// Runs `f`, turning a panic inside cudarc (a symbol the driver lacks) into [`Error::Cuda`].
pub(super) fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        Error::Cuda(format!("{what}: the CUDA library failed: {msg}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_that_does_not_exist_is_an_error_naming_it() {
        let (file, why) = probe_library("beton_no_such_library").unwrap_err();
        assert_eq!(file, "libbeton_no_such_library.so.12");
        assert!(why.contains("also tried libbeton_no_such_library.so"), "{why}");
    }

    #[test]
    fn a_panic_inside_becomes_an_error() {
        let e = guarded("testing", || -> () { panic!("Missing symbol cuFoo") }).unwrap_err();
        assert!(e.to_string().contains("Missing symbol cuFoo"), "{e}");
    }
}
