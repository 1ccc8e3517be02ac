//! The GPU path (feature `cuda`). Tests named `gpu_*` need a CUDA device: without one they print
//! `SKIPPED: <test>: no CUDA device: <reason>` to stderr and return, so a GPU-less run shows what
//! it did not test (set `BETON_REQUIRE_GPU=1` to make them fail instead, on a machine that has a
//! GPU). The other tests run everywhere: a missing driver is a clean error, and the kernel's CPU
//! twin equals the CPU pipeline through the whole loader.
#![cfg(feature = "cuda")]

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use beton_dataset::random::Stream;
use beton_loader::gpu::{compile_normalize_kernel, normalize_reference, BatchDims, FlipRule, GpuContext};
use beton_loader::image::{
    FloatType, ImagePipeline, Layout, NormalizeImage, RandomHorizontalFlip, SimpleRGBImageDecoder,
};
use beton_loader::{Error, FieldDecoder, Loader, OrderOption, SampleContext};
use beton_storage::{
    Dataset, FieldSpec, ImageOptions, ImageSource, Pixels, SampleValue, WriteMode, Writer, WriterOptions,
};

const SEED: u64 = 11;
const BATCH: usize = 5;
const SIZE: (usize, usize) = (12, 9);

/// Device 0, or `None` after printing why the test is skipped (a panic with
/// `BETON_REQUIRE_GPU=1`).
fn gpu(test: &str) -> Option<GpuContext> {
    match GpuContext::open(0) {
        Ok(g) => Some(g),
        Err(e) if std::env::var_os("BETON_REQUIRE_GPU").is_some_and(|v| v == "1") => {
            panic!("{test}: BETON_REQUIRE_GPU=1 but no CUDA device: {e}")
        }
        Err(e) => {
            // One write, so the line is not split by libtest's own output (scripts/test.sh
            // counts these lines).
            let line = format!("SKIPPED: {test}: no CUDA device: {e}\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
    }
}

/// Noise images (every byte value, neighbours unrelated), stored raw so decoding is exact.
fn dataset(path: &Path, n: u64) -> Arc<Dataset> {
    let (h, w) = SIZE;
    let mut noise = Stream::from_seed(0x2545_f491_4f6c_dd1d);
    let images: Vec<Vec<u8>> =
        (0..n).map(|_| (0..h * w * 3).map(|_| (noise.next_u64() >> 56) as u8).collect()).collect();
    let options = ImageOptions::with_mode(WriteMode::Raw);
    Writer::new(path, vec![FieldSpec::rgb_image("image", options)], WriterOptions::default())
        .unwrap()
        .write_indexed(n, |i| {
            let data = images[i as usize].clone();
            Ok(vec![SampleValue::Image(ImageSource::Pixels(Pixels {
                width: w as u32,
                height: h as u32,
                channels: 3,
                data,
            }))])
        })
        .unwrap();
    Arc::new(Dataset::open(path).unwrap())
}

/// Each batch of epoch 0 as (sample indices, image column bytes).
fn batches(ds: &Arc<Dataset>, dec: Arc<dyn FieldDecoder>) -> Vec<(Vec<u64>, Vec<u8>)> {
    let mut l = Loader::builder(Arc::clone(ds))
        .batch_size(BATCH)
        .threads(2)
        .seed(SEED)
        .order(OrderOption::Random)
        .drop_last(false)
        .decoder("image", dec)
        .build()
        .unwrap();
    let epoch = l.next_epoch().unwrap();
    epoch
        .map(|b| {
            let b = b.unwrap();
            (b.indices().to_vec(), b.column("image").unwrap().bytes.to_vec())
        })
        .collect()
}

/// The flip rule of [`cpu_pipeline`] (its operation 0) and each batch's flags for epoch 0.
const FLIP: FlipRule = FlipRule::Op { position: 0, flip_prob: 0.5 };

fn flags(indices: &[u64]) -> Vec<u8> {
    let ctxs: Vec<_> =
        indices.iter().map(|&index| SampleContext { index, seed: SEED, epoch: 0, position: 0 }).collect();
    FLIP.flags(&ctxs)
}

fn cpu_pipeline(norm: NormalizeImage) -> Arc<dyn FieldDecoder> {
    Arc::new(ImagePipeline::new(SimpleRGBImageDecoder).then(RandomHorizontalFlip::default()).normalize(norm))
}

fn dims(indices: &[u64]) -> BatchDims {
    BatchDims { num_samples: indices.len(), height: SIZE.0, width: SIZE.1 }
}

const CASES: [(FloatType, Layout); 4] = [
    (FloatType::F32, Layout::Chw),
    (FloatType::F32, Layout::Hwc),
    (FloatType::F16, Layout::Chw),
    (FloatType::F16, Layout::Hwc),
];

#[test]
fn open_is_a_clean_error_without_a_driver_or_device() {
    // No machine has device 4096: without a driver this names the missing library, with one
    // the device count. Either way an `Error::Cuda`, not a panic.
    match GpuContext::open(4096) {
        Err(Error::Cuda(msg)) => {
            eprintln!("GpuContext::open(4096): {msg}");
            assert!(
                msg.starts_with("no CUDA driver found (libcuda.so.1 could not be loaded)")
                    || msg.contains("CUDA device 4096 requested")
                    || msg.contains("cuInit"),
                "{msg}"
            );
        }
        other => panic!("expected Error::Cuda, got {other:?}"),
    }
}

#[test]
fn reference_equals_the_cpu_pipeline_through_the_loader() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(&dir.path().join("noise.beton"), 13);
    let raw = batches(&ds, Arc::new(SimpleRGBImageDecoder));
    let all: Vec<u8> = raw.iter().flat_map(|(i, _)| flags(i)).collect();
    assert!(all.contains(&0) && all.contains(&1), "flipped and unflipped samples: {all:?}");
    for (dtype, layout) in CASES {
        let norm = NormalizeImage::imagenet().dtype(dtype).layout(layout);
        let cpu = batches(&ds, cpu_pipeline(norm));
        assert_eq!(cpu.len(), raw.len());
        for ((indices, u8s), (cpu_indices, want)) in raw.iter().zip(&cpu) {
            assert_eq!(indices, cpu_indices);
            let got = normalize_reference(u8s, dims(indices), &flags(indices), &norm).unwrap();
            assert!(got == *want, "{dtype:?} {layout:?} batch {indices:?}");
        }
    }
}

/// Compiling needs NVRTC only, no device: where `libnvrtc.so.12` loads (a CUDA toolkit, or PyPI's
/// `nvidia-cuda-nvrtc-cu12` on `LD_LIBRARY_PATH`), this checks the kernel compiles and that its
/// PTX does what the CPU does: no fused multiply-add, IEEE division, f16 rounded to nearest even.
#[test]
fn nvrtc_compiles_the_normalize_kernel_to_ieee_ptx() {
    let ptx = match compile_normalize_kernel() {
        Ok(ptx) => ptx.to_src(),
        Err(Error::Cuda(msg)) if msg.starts_with("NVRTC, needed to compile the kernels, is missing") => {
            let line = format!("SKIPPED: nvrtc_compiles_the_normalize_kernel_to_ieee_ptx: {msg}\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            return;
        }
        Err(e) => panic!("{e}"),
    };
    for name in ["normalize_f32_chw", "normalize_f32_hwc", "normalize_f16_chw", "normalize_f16_hwc"] {
        assert!(ptx.contains(&format!(".entry {name}(")), "{name} missing from the PTX");
    }
    assert!(!ptx.contains("fma."), "the PTX fuses a multiply-add");
    assert!(ptx.contains("sub.rn.f32") && ptx.contains("div.rn.f32"), "IEEE subtraction and division");
    assert!(ptx.contains("cvt.rn.f16.f32"), "f16 rounding to nearest even");
}

#[test]
fn gpu_kernel_equals_the_cpu_pipeline() {
    let Some(gpu) = gpu("gpu_kernel_equals_the_cpu_pipeline") else { return };
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(&dir.path().join("noise.beton"), 13);
    let raw = batches(&ds, Arc::new(SimpleRGBImageDecoder));
    for (dtype, layout) in CASES {
        let norm = NormalizeImage::imagenet().dtype(dtype).layout(layout);
        let cpu = batches(&ds, cpu_pipeline(norm));
        for ((indices, u8s), (_, want)) in raw.iter().zip(&cpu) {
            let got = gpu.normalize_host(u8s, dims(indices), &flags(indices), &norm).unwrap();
            // Bit for bit, f16 included (both round the same f32 to nearest even).
            let diff = got.iter().zip(want).position(|(a, b)| a != b);
            assert!(diff.is_none(), "{dtype:?} {layout:?} batch {indices:?}: first differing byte {diff:?}");
        }
    }
}

#[test]
fn gpu_kernel_equals_the_reference_on_a_large_batch() {
    let Some(gpu) = gpu("gpu_kernel_equals_the_reference_on_a_large_batch") else { return };
    // More pixels than one grid's threads (65535 blocks x 256), so the grid-stride loop runs.
    let dims = BatchDims { num_samples: 70, height: 480, width: 517 };
    let mut x = 1u32;
    let src: Vec<u8> = (0..dims.input_bytes())
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect();
    let flips: Vec<u8> = (0..dims.num_samples).map(|s| (s % 3 == 0) as u8).collect();
    for (dtype, layout) in CASES {
        let norm = NormalizeImage::imagenet().dtype(dtype).layout(layout);
        let got = gpu.normalize_host(&src, dims, &flips, &norm).unwrap();
        let want = normalize_reference(&src, dims, &flips, &norm).unwrap();
        assert!(got == want, "{dtype:?} {layout:?}");
    }
}

#[test]
fn gpu_repeated_launches_keep_device_memory_flat() {
    let Some(gpu) = gpu("gpu_repeated_launches_keep_device_memory_flat") else { return };
    let dims = BatchDims { num_samples: 64, height: 224, width: 224 };
    let src = vec![7u8; dims.input_bytes()];
    let flips = vec![1u8; dims.num_samples];
    let norm = NormalizeImage::imagenet().dtype(FloatType::F16);
    // Warm up: the kernel compiles and the stream's memory pool settles.
    for _ in 0..3 {
        gpu.normalize_host(&src, dims, &flips, &norm).unwrap();
    }
    let (free_before, _) = gpu.mem_info().unwrap();
    for _ in 0..100 {
        gpu.normalize_host(&src, dims, &flips, &norm).unwrap();
    }
    let (free_after, total) = gpu.mem_info().unwrap();
    let lost = free_before.saturating_sub(free_after);
    eprintln!("device memory: {lost} bytes lost over 100 launches ({free_after} of {total} free)");
    // 100 leaked batches would be 100 x 9.6 MB; allow one batch of pool slack.
    assert!(lost <= dims.input_bytes() * 3, "{lost} bytes lost");
}

#[test]
fn gpu_device_past_the_count_is_an_error() {
    let Some(gpu) = gpu("gpu_device_past_the_count_is_an_error") else { return };
    drop(gpu);
    let count = (0..64).take_while(|&i| GpuContext::open(i).is_ok()).count();
    match GpuContext::open(count) {
        Err(Error::Cuda(msg)) => assert_eq!(msg, format!("CUDA device {count} requested, {count} present")),
        other => panic!("expected Error::Cuda, got {other:?}"),
    }
}
