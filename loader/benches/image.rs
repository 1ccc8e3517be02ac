//! Per-image decode cost of the image decoders, with FFCV's method as the baseline in the same
//! group (read the ratios), one thread:
//!
//! - `beton_rrc_{224,160}`: [`RandomResizedCropRGBImageDecoder`] at 224 / 160 px on beton's file
//!   (restart markers): the crop's intervals decoded to planes, DCT-scaled, each plane resized
//!   (Catmull-Rom) and converted to RGB into the output buffer.
//! - `beton_rrc_*_oversample_1.5`: the same with DCT scaling kept at least 1.5× the output.
//! - `ffcv_full_decode_crop_resize_*`: FFCV's way on FFCV's bytes (the same images written without
//!   restart markers): the whole JPEG decoded with libjpeg-turbo (reused decompressor and
//!   buffer), the same crops, resized with the same filter (`fast_image_resize` Catmull-Rom).
//! - `full_decode`: the whole JPEG decoded (FFCV's bytes), nothing else.
//!
//! End to end through the loader (2 threads, batch 256, interleaved rounds): `image_e2e.rs`.
//!
//! Images: the bundled photos (`examples/data/imagefolder`), or `$BETON_BENCH_CORPUS` (an
//! ImageFolder made by `benches/bench-corpus.sh`), written as JPEG q90 at
//! `max_resolution` 256 and 512 (groups `image/256`, `image/512`).
//!
//! Run: `BETON_BENCH_CORPUS=/tmp/corpus cargo bench -p beton-loader --bench image`.

use std::hint::black_box;
use std::path::PathBuf;

use beton_loader::image::RandomResizedCropRGBImageDecoder;
use beton_loader::{FieldDecoder, SampleContext};
use beton_storage::{Dataset, WriteMode};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

/// Output sizes: ImageNet's 224 and FFCV's low-resolution training phase (160).
const SIZES: [usize; 2] = [224, 160];

mod common;

use common::{dataset_in, sources, Tj};

fn dataset(files: &[PathBuf], max_res: u32) -> Dataset {
    dataset_in(files, max_res, WriteMode::Jpg, 1)
}

fn bench(c: &mut Criterion) {
    let (root, files) = sources();
    eprintln!("image bench: {} images from {root}", files.len());
    for max_res in [256u32, 512] {
        let ds = dataset(&files, max_res);
        // FFCV's method and the whole decode run on FFCV's bytes (no restart markers).
        let ffcv_bytes = dataset_in(&files, max_res, WriteMode::Jpg, 0);
        let n = ds.num_samples();
        let mean: f64 = (0..n)
            .map(|i| {
                let img = ds.get(i, 0).unwrap().as_image().unwrap();
                f64::from(img.width) * f64::from(img.height)
            })
            .sum::<f64>()
            / n as f64;
        eprintln!("max_resolution {max_res}: {n} images, mean {:.0} px", mean);
        let mut group = c.benchmark_group(format!("image/{max_res}"));
        group.throughput(Throughput::Elements(n));
        group.sample_size(10);
        group.warm_up_time(std::time::Duration::from_secs(1));
        group.measurement_time(std::time::Duration::from_secs(3));
        let ctx = |i| SampleContext { index: i, seed: 0, epoch: 0, position: 0 };
        let tj = Tj::new(false);
        let mut full = Vec::new();
        let mut resizer = Resizer::new();
        for size in SIZES {
            let mut out = vec![0u8; size * size * 3];
            for (name, dec) in [
                (format!("beton_rrc_{size}"), RandomResizedCropRGBImageDecoder::new((size, size))),
                (
                    format!("beton_rrc_{size}_oversample_1.5"),
                    RandomResizedCropRGBImageDecoder::new((size, size)).oversample(1.5),
                ),
            ] {
                group.bench_function(name, |b| {
                    b.iter(|| {
                        for i in 0..n {
                            dec.decode(ds.get(i, 0).unwrap(), &ctx(i), &mut [&mut out]).unwrap();
                            black_box(&out);
                        }
                    })
                });
            }
            let rrc = RandomResizedCropRGBImageDecoder::new((size, size));
            group.bench_function(format!("ffcv_full_decode_crop_resize_{size}"), |b| {
                b.iter(|| {
                    for i in 0..n {
                        let img = ffcv_bytes.get(i, 0).unwrap().as_image().unwrap();
                        let (w, h) = tj.decode(img.data, &mut full);
                        let crop = rrc.crop(w, h, &ctx(i));
                        let src = ImageRef::new(w, h, &full, PixelType::U8x3).unwrap();
                        let side = size as u32;
                        let mut dst = Image::from_slice_u8(side, side, &mut out, PixelType::U8x3).unwrap();
                        let options = ResizeOptions::new()
                            .resize_alg(ResizeAlg::Convolution(FilterType::CatmullRom))
                            .crop(
                                f64::from(crop.x),
                                f64::from(crop.y),
                                f64::from(crop.width),
                                f64::from(crop.height),
                            );
                        resizer.resize(&src, &mut dst, &options).unwrap();
                        black_box(&out);
                    }
                })
            });
        }
        group.bench_function("full_decode", |b| {
            b.iter(|| {
                for i in 0..n {
                    let img = ffcv_bytes.get(i, 0).unwrap().as_image().unwrap();
                    black_box(tj.decode(img.data, &mut full));
                }
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
