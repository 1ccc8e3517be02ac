//! [`GpuContext`]: one device's CUDA context and the loader's stream on it, opened so that a
//! machine without a driver or without the device gets an [`Error::Cuda`], never a panic.
//!
//! cudarc (dynamic loading) `dlopen`s `libcuda` at the first driver call and panics when it is
//! missing, and resolves each symbol at its first call, panicking when the driver lacks it. So
//! [`GpuContext::open`] probes the library itself first (the same names cudarc tries), checks
//! the driver's version against the API cudarc was built for, and runs the cudarc calls under
//! `catch_unwind` as a last guard.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaStream};

use super::driver::{driver_version, guarded, probe_library, DRIVER_API_VERSION};
use crate::error::{Error, Result};

/// A CUDA context on one device with the stream the loader's copies and kernels run on, and the
/// kernels compiled for it so far.
pub struct GpuContext {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The kernels compiled for this context so far, one entry per kernel set's type (each
    /// kernel module keeps its own, through [`GpuContext::kernels`], so this file names none).
    kernels: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
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
        Ok(GpuContext { ctx, stream, kernels: Mutex::new(HashMap::new()) })
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

    /// The kernel set `K` for this context, made by `compile` at the first call and shared after;
    /// a failed compilation is not cached, so the error repeats with its log. The lock is held
    /// while compiling, so two threads never compile the same set twice.
    ///
    /// # Errors
    /// What `compile` returns; [`Error::Cuda`] when the cache's lock is poisoned.
    pub(super) fn kernels<K: Any + Send + Sync>(
        &self,
        compile: impl FnOnce(&Self) -> Result<K>,
    ) -> Result<Arc<K>> {
        let mut cached =
            self.kernels.lock().map_err(|_| Error::Cuda("GPU kernel cache lock poisoned".into()))?;
        // Entries are keyed by their type, so the downcast always succeeds.
        if let Some(k) = cached.get(&TypeId::of::<K>()).and_then(|k| Arc::clone(k).downcast::<K>().ok()) {
            return Ok(k);
        }
        let k = Arc::new(compile(self)?);
        cached.insert(TypeId::of::<K>(), Arc::clone(&k) as Arc<dyn Any + Send + Sync>);
        Ok(k)
    }

    /// An [`Error::Cuda`] naming this device and the step that failed.
    pub(super) fn error(&self, what: &str, e: impl std::fmt::Display) -> Error {
        Error::Cuda(format!("CUDA device {}: {what} failed: {e}", self.ordinal()))
    }
}
