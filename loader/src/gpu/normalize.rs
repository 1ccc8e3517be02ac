//! FFCV's `ToTorchImage` + `NormalizeImage` on the GPU: a batch of HWC `u8` images to CHW or
//! HWC `f32` / `f16`, `(x − mean) / std` per channel, each sample optionally mirrored, in one
//! kernel launch ([`NORMALIZE_KERNEL`], compiled with NVRTC at first use per context).
//!
//! The values are those of the CPU pipeline ([`ImagePipeline`](crate::image::ImagePipeline)
//! with [`NormalizeImage`]), bit for bit: the CPU computes `(v as f32 − mean[c]) / std[c]` in
//! IEEE `f32` and rounds to `f16` to nearest even; the kernel does the same operations with
//! `__fsub_rn` / `__fdiv_rn` (no fused multiply-add, no approximate division) and `cvt.rn`.
//! [`normalize_reference`] is the kernel transcribed to Rust (same indexing, same flip rule, same
//! arithmetic); a unit test pins it to the CPU pipeline, a GPU test pins the kernel to it.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use super::context::GpuContext;
use super::driver::{guarded, probe_library};
use crate::decode::SampleContext;
use crate::error::{Error, Result};
use crate::image::{FloatType, Layout, NormalizeImage, SampleRng};

/// The CUDA C source of the normalisation kernels: `normalize_{f32,f16}_{chw,hwc}(src, dst,
/// flip, n, h, w, m0, m1, m2, s0, s1, s2)`, one thread per pixel (grid-stride), `src` the
/// `[n, h, w, 3]` `u8` batch, `flip` one byte per sample (non-zero: mirror), `dst` the
/// `[n, 3, h, w]` or `[n, h, w, 3]` output. Needs no header (the `f16` rounding is one PTX
/// instruction, `cvt.rn.f16.f32`, what `__float2half_rn` compiles to), so NVRTC compiles it
/// without a CUDA include directory.
pub const NORMALIZE_KERNEL: &str = r#"
// beton: NormalizeImage on the GPU. CPU twin: loader/src/gpu/normalize.rs, normalize_reference.
__device__ __forceinline__ float beton_out(float x, float*) { return x; }
__device__ __forceinline__ unsigned short beton_out(float x, unsigned short*) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));  // == __float2half_rn
    return h;
}

template <typename T, bool CHW>
__device__ __forceinline__ void beton_normalize(
    const unsigned char* __restrict__ src, T* __restrict__ dst, const unsigned char* __restrict__ flip,
    unsigned long long n, unsigned long long h, unsigned long long w,
    float m0, float m1, float m2, float s0, float s1, float s2) {
    const float mean[3] = {m0, m1, m2};
    const float sd[3] = {s0, s1, s2};
    const unsigned long long hw = h * w, total = n * hw;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const unsigned long long s = i / hw, p = i - s * hw, y = p / w, x = p - y * w;
        const unsigned long long sx = flip[s] ? w - 1 - x : x;
        const unsigned char* px = src + ((s * h + y) * w + sx) * 3;
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            // The CPU's (v as f32 - mean[c]) / std[c], each step rounded to nearest: no FMA.
            const float v = __fdiv_rn(__fsub_rn((float)px[c], mean[c]), sd[c]);
            const unsigned long long o = CHW ? (s * 3 + c) * hw + p : i * 3 + c;
            dst[o] = beton_out(v, (T*)0);
        }
    }
}

#define BETON_KERNEL(name, T, CHW)                                                              \
    extern "C" __global__ void name(const unsigned char* src, T* dst, const unsigned char* flip, \
                                    unsigned long long n, unsigned long long h, unsigned long long w, \
                                    float m0, float m1, float m2, float s0, float s1, float s2) { \
        beton_normalize<T, CHW>(src, dst, flip, n, h, w, m0, m1, m2, s0, s1, s2);               \
    }
BETON_KERNEL(normalize_f32_chw, float, true)
BETON_KERNEL(normalize_f32_hwc, float, false)
BETON_KERNEL(normalize_f16_chw, unsigned short, true)
BETON_KERNEL(normalize_f16_hwc, unsigned short, false)
"#;

/// Threads per block of the normalisation kernel (a multiple of the warp size; the kernel is
/// memory-bound, so any such size does).
const BLOCK_THREADS: u32 = 256;

/// A batch's shape: `num_samples` images of `height × width` RGB pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchDims {
    /// Images in the batch.
    pub num_samples: usize,
    /// Rows per image.
    pub height: usize,
    /// Columns per image.
    pub width: usize,
}

impl BatchDims {
    /// Bytes of the `u8` HWC input batch.
    pub fn input_bytes(&self) -> usize {
        self.num_samples * self.height * self.width * 3
    }

    /// Bytes of the normalised output batch in `dtype`.
    pub fn output_bytes(&self, dtype: FloatType) -> usize {
        self.input_bytes() * value_bytes(dtype)
    }
}

fn value_bytes(dtype: FloatType) -> usize {
    match dtype {
        FloatType::F32 => 4,
        FloatType::F16 => 2,
    }
}

/// Where a sample's horizontal flip comes from, so that the GPU mirrors exactly the samples the
/// CPU pipeline would.
///
/// The kernel mirrors after every CPU operation, so this equals the CPU pipeline only when the
/// flip is its last geometric operation (colour jitters may follow: they commute with a flip;
/// `Cutout` or `RandomTranslate` after the flip do not).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlipRule {
    /// No flip.
    Never,
    /// A [`RandomHorizontalFlip`](crate::image::RandomHorizontalFlip) that is operation number
    /// `position` of an [`ImagePipeline`](crate::image::ImagePipeline) (the stream
    /// [`SampleRng::for_op`]`(ctx, position)`).
    Op {
        /// Index of the flip among the pipeline's operations.
        position: u64,
        /// Its `flip_prob`.
        flip_prob: f64,
    },
    /// The flip fused into a crop decoder (`RandomResizedCropRGBImageDecoder::flip(p)`).
    Fused {
        /// The decoder's flip probability.
        flip_prob: f64,
    },
}

impl FlipRule {
    /// Whether the sample of `ctx` is mirrored: the same draw as the CPU path.
    pub fn flips(&self, ctx: &SampleContext) -> bool {
        match *self {
            FlipRule::Never => false,
            FlipRule::Op { position, flip_prob } => SampleRng::for_op(ctx, position).chance(flip_prob),
            // As the crop decoders: no draw at all when the probability is 0.
            FlipRule::Fused { flip_prob } => flip_prob > 0.0 && SampleRng::for_flip(ctx).chance(flip_prob),
        }
    }

    /// One flag per sample of a batch (the kernel's `flip` array).
    pub fn flags<'a>(&self, samples: impl IntoIterator<Item = &'a SampleContext>) -> Vec<u8> {
        samples.into_iter().map(|ctx| u8::from(self.flips(ctx))).collect()
    }
}

/// The normalisation kernel on the CPU: the little-endian output bytes the kernel writes for the
/// `u8` HWC batch `src` of shape `dims`, mirroring sample `s` when `flips[s] != 0`.
///
/// # Errors
/// [`Error::InvalidArgument`] when `src` is not `dims.input_bytes()` long or `flips` has not one
/// flag per sample.
pub fn normalize_reference(
    src: &[u8],
    dims: BatchDims,
    flips: &[u8],
    norm: &NormalizeImage,
) -> Result<Vec<u8>> {
    check(src.len(), dims, flips.len())?;
    let BatchDims { num_samples: n, height: h, width: w } = dims;
    let size = value_bytes(norm.dtype);
    let mut dst = vec![0u8; dims.output_bytes(norm.dtype)];
    let hw = h * w;
    for i in 0..n * hw {
        let (s, p) = (i / hw, i % hw);
        let (y, x) = (p / w, p % w);
        let sx = if flips[s] != 0 { w - 1 - x } else { x };
        let px = &src[((s * h + y) * w + sx) * 3..][..3];
        for (c, &value) in px.iter().enumerate() {
            let v = (f32::from(value) - norm.mean[c]) / norm.std[c];
            let o = match norm.layout {
                Layout::Chw => (s * 3 + c) * hw + p,
                Layout::Hwc => i * 3 + c,
            };
            let out = &mut dst[o * size..][..size];
            match norm.dtype {
                FloatType::F32 => out.copy_from_slice(&v.to_le_bytes()),
                FloatType::F16 => out.copy_from_slice(&crate::image::f32_to_f16(v).to_le_bytes()),
            }
        }
    }
    Ok(dst)
}

fn check(src_len: usize, dims: BatchDims, num_flags: usize) -> Result<()> {
    if src_len != dims.input_bytes() {
        return Err(Error::InvalidArgument {
            what: "normalize input".into(),
            why: format!("{src_len} bytes for a {dims:?} batch of RGB u8 ({} bytes)", dims.input_bytes()),
        });
    }
    if num_flags != dims.num_samples {
        return Err(Error::InvalidArgument {
            what: "normalize flip flags".into(),
            why: format!("{num_flags} flags for {} samples", dims.num_samples),
        });
    }
    Ok(())
}

/// Compiles [`NORMALIZE_KERNEL`] to PTX with NVRTC (no device needed; [`GpuContext::normalize`]
/// does this once per context): IEEE arithmetic as on the CPU, no FMA contraction, no flush to
/// zero, correctly rounded division.
///
/// # Errors
/// [`Error::Cuda`] when NVRTC cannot be loaded ("NVRTC, needed to compile the kernels, is
/// missing (libnvrtc.so.12 could not be loaded): ...") or the compilation fails (with NVRTC's
/// log).
pub fn compile_normalize_kernel() -> Result<Ptx> {
    probe_library("nvrtc").map_err(|(file, why)| {
        Error::Cuda(format!(
            "NVRTC, needed to compile the kernels, is missing ({file} could not be loaded): {why}"
        ))
    })?;
    let opts = CompileOptions {
        fmad: Some(false),
        ftz: Some(false),
        prec_div: Some(true),
        name: Some("beton_normalize.cu".into()),
        ..CompileOptions::default()
    };
    guarded("compiling the normalize kernel", || {
        cudarc::nvrtc::compile_ptx_with_opts(NORMALIZE_KERNEL, opts)
    })?
    .map_err(|e| {
        let why = match e {
            CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => format!("{other:?}"),
        };
        Error::Cuda(format!("compiling the normalize kernel (NVRTC) failed: {why}"))
    })
}

/// The four compiled kernels of [`NORMALIZE_KERNEL`].
struct NormalizeKernels {
    f32_chw: CudaFunction,
    f32_hwc: CudaFunction,
    f16_chw: CudaFunction,
    f16_hwc: CudaFunction,
}

impl NormalizeKernels {
    fn get(&self, dtype: FloatType, layout: Layout) -> &CudaFunction {
        match (dtype, layout) {
            (FloatType::F32, Layout::Chw) => &self.f32_chw,
            (FloatType::F32, Layout::Hwc) => &self.f32_hwc,
            (FloatType::F16, Layout::Chw) => &self.f16_chw,
            (FloatType::F16, Layout::Hwc) => &self.f16_hwc,
        }
    }

    /// Compiles [`NORMALIZE_KERNEL`] with NVRTC for `gpu`'s device and loads it.
    fn compile(gpu: &GpuContext) -> Result<Self> {
        let ptx = compile_normalize_kernel()
            .map_err(|e| Error::Cuda(format!("CUDA device {}: {e}", gpu.ordinal())))?;
        let module =
            gpu.context().load_module(ptx).map_err(|e| gpu.error("loading the normalize kernel", e))?;
        let load =
            |name: &str| module.load_function(name).map_err(|e| gpu.error(&format!("loading {name}"), e));
        Ok(NormalizeKernels {
            f32_chw: load("normalize_f32_chw")?,
            f32_hwc: load("normalize_f32_hwc")?,
            f16_chw: load("normalize_f16_chw")?,
            f16_hwc: load("normalize_f16_hwc")?,
        })
    }
}

impl GpuContext {
    /// The normalisation kernels, compiled at the first call on this context.
    fn normalize_kernels(&self) -> Result<Arc<NormalizeKernels>> {
        self.kernels(NormalizeKernels::compile)
    }

    /// Launches the normalisation of the device batch `src` (`u8` HWC, shape `dims`) into `dst`
    /// (`dims.output_bytes(norm.dtype)` bytes, `f32` / `f16` little-endian in `norm.layout`) on
    /// [`GpuContext::stream`], mirroring sample `s` when `flips[s] != 0`. Asynchronous: the
    /// values are there once the stream reaches this point.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for buffers of the wrong size; [`Error::Cuda`] when NVRTC is
    /// missing, the kernel fails to compile (the log is in the message) or the launch fails.
    pub fn normalize(
        &self,
        src: &CudaSlice<u8>,
        dims: BatchDims,
        flips: &CudaSlice<u8>,
        norm: &NormalizeImage,
        dst: &mut CudaSlice<u8>,
    ) -> Result<()> {
        check(src.len(), dims, flips.len())?;
        if dst.len() != dims.output_bytes(norm.dtype) {
            return Err(Error::InvalidArgument {
                what: "normalize output".into(),
                why: format!("{} bytes for {} values", dst.len(), dims.input_bytes()),
            });
        }
        let pixels = dims.num_samples * dims.height * dims.width;
        if pixels == 0 {
            return Ok(());
        }
        let kernels = self.normalize_kernels()?;
        let func = kernels.get(norm.dtype, norm.layout);
        // Enough blocks to fill any current GPU; the kernel's grid-stride loop covers the rest.
        let blocks = pixels.div_ceil(BLOCK_THREADS as usize).min(65_535) as u32;
        let cfg =
            LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK_THREADS, 1, 1), shared_mem_bytes: 0 };
        let (n, h, w) = (dims.num_samples as u64, dims.height as u64, dims.width as u64);
        let [m0, m1, m2] = norm.mean;
        let [s0, s1, s2] = norm.std;
        let mut launch = self.stream().launch_builder(func);
        launch.arg(src).arg(dst).arg(flips).arg(&n).arg(&h).arg(&w);
        launch.arg(&m0).arg(&m1).arg(&m2).arg(&s0).arg(&s1).arg(&s2);
        // SAFETY: the arguments match the kernel's parameters in number, order and type (three
        // device pointers, three u64, six f32, as BETON_KERNEL declares); `src` holds
        // `n·h·w·3` bytes and `flips` `n` (checked above), `dst` `n·h·w·3` values of the
        // kernel's type (checked above; device allocations are aligned far beyond 4 bytes), and
        // the kernel touches no index past those. cudarc records the stream's use of the
        // slices, so none is freed before the kernel is done.
        unsafe { launch.launch(cfg) }.map_err(|e| self.error("launching the normalize kernel", e))?;
        Ok(())
    }

    /// [`GpuContext::normalize`] from and to host memory, synchronously (tests and one-off use;
    /// the loader will keep its batches on the device).
    ///
    /// # Errors
    /// As [`GpuContext::normalize`], and [`Error::Cuda`] when a copy fails.
    pub fn normalize_host(
        &self,
        src: &[u8],
        dims: BatchDims,
        flips: &[u8],
        norm: &NormalizeImage,
    ) -> Result<Vec<u8>> {
        check(src.len(), dims, flips.len())?;
        let stream = self.stream();
        let d_src = stream.clone_htod(src).map_err(|e| self.error("copying the batch to the device", e))?;
        let d_flips = stream.clone_htod(flips).map_err(|e| self.error("copying the flip flags", e))?;
        let mut d_dst = stream
            .alloc_zeros::<u8>(dims.output_bytes(norm.dtype))
            .map_err(|e| self.error("allocating the output", e))?;
        self.normalize(&d_src, dims, &d_flips, norm, &mut d_dst)?;
        let out = stream.clone_dtoh(&d_dst).map_err(|e| self.error("copying the output back", e))?;
        stream.synchronize().map_err(|e| self.error("synchronising the stream", e))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{ImageMut, ImageOp, RandomHorizontalFlip};

    /// A deterministic batch of every byte value (neighbouring values unrelated).
    fn batch(len: usize) -> Vec<u8> {
        let mut noise = crate::random::Stream::from_seed(0x9e37_79b9_7f4a_7c15);
        (0..len).map(|_| (noise.next_u64() >> 56) as u8).collect()
    }

    fn ctx(index: u64) -> SampleContext {
        SampleContext { index, seed: 5, epoch: 2, position: 0 }
    }

    /// The CPU pipeline's output for one sample: the flip operation (number 0) with the sample's
    /// own stream, then `NormalizeImage`'s lookup-table write, as `ImagePipeline::decode` runs
    /// them.
    fn cpu_pipeline(
        image: &[u8],
        (h, w): (usize, usize),
        c: &SampleContext,
        norm: &NormalizeImage,
    ) -> Vec<u8> {
        let mut px = image.to_vec();
        let mut img = ImageMut::new(&mut px, h, w).unwrap();
        RandomHorizontalFlip::default().apply(&mut img, &mut SampleRng::for_op(c, 0));
        let mut out = vec![0u8; h * w * 3 * value_bytes(norm.dtype)];
        // (ImagePipeline folds the flip into this write; `folded_flips_equal_running_the_ops`
        // shows that gives these bytes.)
        crate::image::Prepared::new(*norm).write(&mut px, (h, w), false, &mut out);
        out
    }

    #[test]
    fn reference_equals_the_cpu_pipeline_bit_for_bit() {
        let dims = BatchDims { num_samples: 16, height: 5, width: 7 };
        let src = batch(dims.input_bytes());
        let ctxs: Vec<_> = (0..16).map(|i| ctx(100 + i)).collect();
        let rule = FlipRule::Op { position: 0, flip_prob: 0.5 };
        let flips = rule.flags(&ctxs);
        assert!(flips.contains(&0) && flips.contains(&1), "both cases covered: {flips:?}");
        let sample = dims.height * dims.width * 3;
        for dtype in [FloatType::F32, FloatType::F16] {
            for layout in [Layout::Chw, Layout::Hwc] {
                let norm = NormalizeImage::imagenet().dtype(dtype).layout(layout);
                let got = normalize_reference(&src, dims, &flips, &norm).unwrap();
                let per = sample * value_bytes(dtype);
                for (s, c) in ctxs.iter().enumerate() {
                    let want =
                        cpu_pipeline(&src[s * sample..][..sample], (dims.height, dims.width), c, &norm);
                    assert_eq!(&got[s * per..][..per], want.as_slice(), "{dtype:?} {layout:?} sample {s}");
                }
            }
        }
    }

    #[test]
    fn fused_flip_rule_draws_the_decoders_stream() {
        let c = ctx(9);
        assert_eq!(FlipRule::Fused { flip_prob: 0.5 }.flips(&c), SampleRng::for_flip(&c).chance(0.5));
        assert!(!FlipRule::Fused { flip_prob: 0.0 }.flips(&c));
        assert!(FlipRule::Op { position: 3, flip_prob: 1.0 }.flips(&c));
        assert!(!FlipRule::Never.flips(&c));
    }

    #[test]
    fn reference_rejects_mismatched_buffers() {
        let dims = BatchDims { num_samples: 2, height: 2, width: 2 };
        let norm = NormalizeImage::imagenet();
        assert!(normalize_reference(&[0; 23], dims, &[0, 0], &norm).is_err());
        assert!(normalize_reference(&[0; 24], dims, &[0], &norm).is_err());
        assert_eq!(normalize_reference(&[0; 24], dims, &[0, 1], &norm).unwrap().len(), 96);
    }

    #[test]
    fn kernel_source_declares_the_four_kernels_and_no_header() {
        for name in ["normalize_f32_chw", "normalize_f32_hwc", "normalize_f16_chw", "normalize_f16_hwc"] {
            assert!(NORMALIZE_KERNEL.contains(&format!("BETON_KERNEL({name},")), "{name}");
        }
        assert!(!NORMALIZE_KERNEL.contains("#include"));
        assert!(NORMALIZE_KERNEL.contains("__fdiv_rn(__fsub_rn("));
    }
}
