//! [`GpuContext`]: one device's CUDA context and the loader's stream on it, opened so that a
//! machine without a driver or without the device gets an [`Error::Cuda`], never a panic.
//!
//! cudarc (dynamic loading) `dlopen`s `libcuda` at the first driver call and panics when it is
//! missing, and resolves each symbol at its first call, panicking when the driver lacks it. So
//! [`GpuContext::open`] probes the library itself first (the same names cudarc tries), checks
//! the driver's version against the API cudarc was built for, and runs the cudarc calls under
//! `catch_unwind` as a last guard.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use cudarc::driver::{sys, CudaContext, CudaStream};

use super::normalize::NormalizeKernels;
use crate::error::{Error, Result};

/// The CUDA driver API version cudarc is built for (its `cuda-12000` feature, set in the
/// workspace `Cargo.toml`): a driver older than this may lack symbols cudarc calls.
const DRIVER_API_VERSION: i32 = 12000;

/// A CUDA context on one device with the stream the loader's copies and kernels run on, and the
/// kernels compiled for it so far.
pub struct GpuContext {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The normalisation kernels, compiled at first use ([`GpuContext::normalize`]); a failed
    /// compilation is not cached, so the error repeats with its log.
    pub(super) normalize: Mutex<Option<Arc<NormalizeKernels>>>,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext").field("ordinal", &self.ctx.ordinal()).finish_non_exhaustive()
    }
}

impl GpuContext {
    /// Opens device `ordinal`: its primary context and a new stream.
    ///
    /// # Errors
    /// [`Error::Cuda`] when the CUDA driver library cannot be loaded ("no CUDA driver found
    /// (libcuda.so.1 could not be loaded): ..."), the driver fails to initialise (no device, a
    /// broken install), is older than CUDA 12.0, or has no device `ordinal` ("CUDA device 3
    /// requested, 1 present").
    ///
    /// # Panics
    /// Never: a panic inside cudarc is caught and returned as [`Error::Cuda`].
    pub fn open(ordinal: usize) -> Result<Self> {
        probe_library("cuda").map_err(|(file, why)| {
            Error::Cuda(format!("no CUDA driver found ({file} could not be loaded): {why}"))
        })?;
        guarded("opening a CUDA context", || Self::open_probed(ordinal))?
    }

    /// [`GpuContext::open`] once `libcuda` is known to load.
    fn open_probed(ordinal: usize) -> Result<Self> {
        let driver = |what: &str, e: cudarc::driver::DriverError| {
            Error::Cuda(format!("CUDA device {ordinal}: {what} failed: {e}"))
        };
        cudarc::driver::result::init().map_err(|e| driver("driver initialisation (cuInit)", e))?;
        let version = driver_version().map_err(|e| driver("cuDriverGetVersion", e))?;
        if version < DRIVER_API_VERSION {
            return Err(Error::Cuda(format!(
                "the CUDA driver supports CUDA {}.{}, older than the CUDA 12.0 API beton is built for",
                version / 1000,
                version % 1000 / 10
            )));
        }
        let count = CudaContext::device_count().map_err(|e| driver("cuDeviceGetCount", e))?;
        if usize::try_from(count).map_or(true, |n| ordinal >= n) {
            return Err(Error::Cuda(format!("CUDA device {ordinal} requested, {count} present")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("creating its context", e))?;
        let stream = ctx.new_stream().map_err(|e| driver("creating a stream", e))?;
        Ok(GpuContext { ctx, stream, normalize: Mutex::new(None) })
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The cudarc context (for code that needs the raw driver API).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream the loader's copies and kernels run on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Free and total device memory, bytes.
    ///
    /// # Errors
    /// [`Error::Cuda`] when the driver call fails.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(|e| self.error("cuMemGetInfo", e))
    }

    /// An [`Error::Cuda`] naming this device and the step that failed.
    pub(super) fn error(&self, what: &str, e: impl std::fmt::Display) -> Error {
        Error::Cuda(format!("CUDA device {}: {what} failed: {e}", self.ordinal()))
    }
}

/// The driver's CUDA version (`12040` for 12.4).
fn driver_version() -> std::result::Result<i32, cudarc::driver::DriverError> {
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
