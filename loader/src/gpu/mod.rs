//! The GPU path of the loader (feature `cuda`, docs/GPU.md): what exists so far is the part that
//! can be built and checked without a device.
//!
//! - [`GpuContext::open`]: a CUDA context and stream on one device, or a clean
//!   [`Error::Cuda`](crate::Error::Cuda) (no driver, no such device, a driver older than the
//!   CUDA 12.0 API beton binds), never a panic. cudarc loads `libcuda` and `libnvrtc` with
//!   `dlopen` at first use and panics when they are missing, so the libraries are probed here
//!   first.
//! - [`NORMALIZE_KERNEL`]: FFCV's `ToTorchImage` + `NormalizeImage` (+ a per-sample horizontal
//!   flip) as one CUDA kernel, compiled with NVRTC at first use and cached per context
//!   ([`GpuContext::normalize`]); [`normalize_reference`] is its CPU twin, value for value, and
//!   [`FlipRule`] draws the flips from the same per-sample streams as the CPU pipeline.
//!
//! Not here yet (docs/GPU.md has the plan): the pinned slot ring, the device buffer ring and
//! the DLPack hand-off to torch.

mod context;
mod driver;
mod normalize;

pub use context::GpuContext;
pub use normalize::{compile_normalize_kernel, normalize_reference, BatchDims, FlipRule, NORMALIZE_KERNEL};
