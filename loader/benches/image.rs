//! Per-image decode cost of the image decoders, with FFCV's method as the baseline in the same
//! group (read the ratios), one thread:
//!
//! - `beton_rrc_{224,160}`: [`RandomResizedCropRGBImageDecoder`] at 224 / 160 px: crop-aware,
//!   DCT-scaled libjpeg-turbo decode, Catmull-Rom resize into the output buffer.
//! - `beton_rrc_*_oversample_1.5`: the same with DCT scaling kept at least 1.5× the output.
//! - `ffcv_full_decode_crop_resize_*`: FFCV's way: the whole JPEG decoded with libjpeg-turbo
//!   (reused decompressor and buffer), the same crops, resized with the same filter.
//! - `full_decode`: the whole JPEG decoded, nothing else.
//!
//! And end to end (group `image_e2e/{256,512,raw}`): whole epochs of the [`Loader`], **2 threads,
//! batch 256**, RANDOM order, of three pipelines over the same file, images/s:
//!
//! - `beton_rrc160_flip_normalize`: RRC 160 + RandomHorizontalFlip + NormalizeImage (f16), fused;
//! - `decode_wall`: each JPEG fully decoded by libjpeg-turbo (default settings), nothing else;
//! - `ffcv_method_rrc160_flip_normalize`: FFCV's method: the whole JPEG decoded with
//!   `TJFLAG_FASTDCT` (as FFCV's `imdecode`), the crop resized with area averaging (box filter;
//!   bilinear when enlarging: OpenCV's `INTER_AREA`, FFCV's resize) into the slot, then the same
//!   flip and normalisation.
//!
//! - `beton_rrc160_area_flip_normalize`: the same with `Interpolation::Area` (FFCV's resize
//!   filter) instead of Catmull-Rom;
//! - `beton_rrc160_flip_normalize_no_restart_markers`: beton's pipeline on the same JPEGs written
//!   without restart markers (`jpeg_restart_interval: 0`, FFCV's bytes).
//!
//! `raw` is the same images stored raw at max 256 (no decode wall there).
//!
//! Images: the bundled photos (`examples/data/imagefolder`), or `$BETON_BENCH_CORPUS` (an
//! ImageFolder made by `/work/shared/tools/bench-corpus.sh`), written as JPEG q90 at
//! `max_resolution` 256 and 512 (groups `image/256`, `image/512`).
//!
//! Run: `BETON_BENCH_CORPUS=/tmp/corpus cargo bench -p beton-loader --bench image`.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use std::cell::RefCell;
use std::ffi::c_int;
use std::sync::Arc;

use beton_loader::image::{
    FloatType, ImagePipeline, Interpolation, NormalizeImage, RandomHorizontalFlip,
    RandomResizedCropRGBImageDecoder,
};
use beton_loader::{ColumnSpec, ElemType, FieldDecoder, Loader, OrderOption, SampleContext};
use beton_storage::{
    Dataset, FieldSpec, ImageMode, ImageOptions, ImageSource, SampleValue, Value, WriteMode, Writer,
    WriterOptions,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

/// Output sizes: ImageNet's 224 and FFCV's low-resolution training phase (160).
const SIZES: [usize; 2] = [224, 160];

/// The JPEG and PNG files of an ImageFolder, sorted.
fn sources() -> (String, Vec<PathBuf>) {
    let root = std::env::var_os("BETON_BENCH_CORPUS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/data/imagefolder"),
        PathBuf::from,
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jpg" || e == "png"))
        .collect();
    files.sort();
    (root.display().to_string(), files)
}

fn dataset(files: &[PathBuf], max_res: u32) -> Dataset {
    dataset_in(files, max_res, WriteMode::Jpg, 1)
}

/// The files written at `max_res` in `write_mode`, JPEGs with a restart marker every
/// `restart_interval` MCUs (beton's default 1; 0: none, as FFCV writes).
fn dataset_in(files: &[PathBuf], max_res: u32, write_mode: WriteMode, restart_interval: u16) -> Dataset {
    let tag = if write_mode == WriteMode::Raw { "raw" } else { "jpg" };
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("image-bench-{tag}-{max_res}-rst{restart_interval}.beton"));
    let options = ImageOptions {
        jpeg_restart_interval: restart_interval,
        write_mode,
        max_resolution: Some(max_res),
        jpeg_quality: 90,
        jpeg_passthrough: true,
    };
    Writer::new(&path, vec![FieldSpec::rgb_image("image", options)], WriterOptions::default())
        .unwrap()
        .write_indexed(files.len() as u64, |i| {
            Ok(vec![SampleValue::Image(ImageSource::File(files[i as usize].clone()))])
        })
        .unwrap();
    Dataset::open(&path).unwrap()
}

fn bench(c: &mut Criterion) {
    let (root, files) = sources();
    eprintln!("image bench: {} images from {root}", files.len());
    for max_res in [256u32, 512] {
        let ds = dataset(&files, max_res);
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
        let mut decompressor = turbojpeg::Decompressor::new().unwrap();
        let mut full = Vec::new();
        let mut resizer = Resizer::new();
        let mut decode_full = |data: &[u8], full: &mut Vec<u8>| -> (u32, u32) {
            let header = decompressor.read_header(data).unwrap();
            full.resize(header.width * header.height * 3, 0);
            let image = turbojpeg::Image {
                pixels: full.as_mut_slice(),
                width: header.width,
                pitch: header.width * 3,
                height: header.height,
                format: turbojpeg::PixelFormat::RGB,
            };
            decompressor.decompress(data, image).unwrap();
            (header.width as u32, header.height as u32)
        };
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
                        let img = ds.get(i, 0).unwrap().as_image().unwrap();
                        let (w, h) = decode_full(img.data, &mut full);
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
                    let img = ds.get(i, 0).unwrap().as_image().unwrap();
                    black_box(decode_full(img.data, &mut full));
                }
            })
        });
        group.finish();
    }
}

/// A libjpeg-turbo decompressor (raw C API, to set `TJPARAM_FASTDCT` as FFCV's `imdecode`).
struct Tj(turbojpeg::raw::tjhandle);

impl Tj {
    fn new(fast_dct: bool) -> Tj {
        use turbojpeg::raw;
        // SAFETY: tj3Init has no preconditions; the handle is checked and owned by Tj.
        let h = unsafe { raw::tj3Init(raw::TJINIT_TJINIT_DECOMPRESS as c_int) };
        assert!(!h.is_null());
        // SAFETY: a live handle; tj3Set reads two integers.
        let rc = unsafe { raw::tj3Set(h, raw::TJPARAM_TJPARAM_FASTDCT as c_int, c_int::from(fast_dct)) };
        assert_eq!(rc, 0);
        Tj(h)
    }

    /// Decodes the whole JPEG to packed RGB in `buf`: (width, height).
    fn decode(&self, data: &[u8], buf: &mut Vec<u8>) -> (u32, u32) {
        use turbojpeg::raw;
        let len = data.len() as raw::size_t;
        // SAFETY: a live handle; `data` is valid for len bytes and only read.
        assert_eq!(unsafe { raw::tj3DecompressHeader(self.0, data.as_ptr(), len) }, 0);
        // SAFETY: a live handle that has read a header.
        let get = |p: raw::TJPARAM| unsafe { raw::tj3Get(self.0, p as c_int) };
        let (w, h) = (get(raw::TJPARAM_TJPARAM_JPEGWIDTH), get(raw::TJPARAM_TJPARAM_JPEGHEIGHT));
        buf.resize(w as usize * h as usize * 3, 0);
        // SAFETY: `buf` holds h rows of w × 3 bytes, the size of the unscaled, uncropped RGB
        // output of this header; `data` is valid for len bytes.
        let rc = unsafe {
            raw::tj3Decompress8(
                self.0,
                data.as_ptr(),
                len,
                buf.as_mut_ptr(),
                w * 3,
                raw::TJPF_TJPF_RGB as c_int,
            )
        };
        assert_eq!(rc, 0);
        (w as u32, h as u32)
    }
}

impl Drop for Tj {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { turbojpeg::raw::tj3Destroy(self.0) }
    }
}

thread_local! {
    static FAST: (Tj, RefCell<Vec<u8>>, RefCell<Resizer>) = (Tj::new(true), RefCell::new(Vec::new()), RefCell::new(Resizer::new()));
    static PLAIN: (Tj, RefCell<Vec<u8>>) = (Tj::new(false), RefCell::new(Vec::new()));
}

/// FFCV's random resized crop, as a field decoder: whole decode (fast IDCT), crop, area resize.
struct FfcvMethod(RandomResizedCropRGBImageDecoder);

impl FieldDecoder for FfcvMethod {
    fn columns(&self, ds: &Dataset, field: usize, epoch: u64) -> beton_loader::Result<Vec<ColumnSpec>> {
        self.0.columns(ds, field, epoch)
    }

    fn decode(
        &self,
        value: Value<'_>,
        ctx: &SampleContext,
        out: &mut [&mut [u8]],
    ) -> beton_loader::Result<()> {
        let Value::Image(img) = value else { panic!("not an image") };
        let (side, _) = self.0.output_size(ctx.epoch);
        FAST.with(|(tj, buf, resizer)| {
            let mut buf = buf.borrow_mut();
            let (w, h, pixels) = match img.mode {
                ImageMode::Jpg => {
                    let (w, h) = tj.decode(img.data, &mut buf);
                    (w, h, &buf[..])
                }
                ImageMode::Raw => (u32::from(img.width), u32::from(img.height), img.data),
            };
            let crop = self.0.crop(w, h, ctx);
            let src = ImageRef::new(w, h, pixels, PixelType::U8x3).unwrap();
            let side = side as u32;
            let mut dst = Image::from_slice_u8(side, side, &mut *out[0], PixelType::U8x3).unwrap();
            let filter = if crop.width >= side { FilterType::Box } else { FilterType::Bilinear };
            let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(filter)).crop(
                f64::from(crop.x),
                f64::from(crop.y),
                f64::from(crop.width),
                f64::from(crop.height),
            );
            resizer.borrow_mut().resize(&src, &mut dst, &options).unwrap();
        });
        Ok(())
    }
}

/// The decode wall, as a field decoder: each JPEG fully decoded, one byte kept.
struct DecodeWall;

impl FieldDecoder for DecodeWall {
    fn columns(&self, ds: &Dataset, field: usize, _: u64) -> beton_loader::Result<Vec<ColumnSpec>> {
        let name = ds.fields()[field].name().to_string();
        Ok(vec![ColumnSpec { name, elem: ElemType::U8, shape: vec![1] }])
    }

    fn decode(&self, value: Value<'_>, _: &SampleContext, out: &mut [&mut [u8]]) -> beton_loader::Result<()> {
        let Value::Image(img) = value else { panic!("not an image") };
        PLAIN.with(|(tj, buf)| {
            let mut buf = buf.borrow_mut();
            tj.decode(img.data, &mut buf);
            out[0][0] = buf[buf.len() / 2];
        });
        Ok(())
    }
}

fn pipeline(decoder: impl FieldDecoder + 'static) -> Arc<dyn FieldDecoder> {
    Arc::new(
        ImagePipeline::new(decoder)
            .then(RandomHorizontalFlip::default())
            .normalize(NormalizeImage::imagenet().dtype(FloatType::F16)),
    )
}

/// Whole epochs through the loader, 2 threads, batch 256.
fn end_to_end(c: &mut Criterion) {
    let (_, files) = sources();
    for (label, max_res, mode) in
        [("256", 256u32, WriteMode::Jpg), ("512", 512, WriteMode::Jpg), ("raw", 256, WriteMode::Raw)]
    {
        let ds = Arc::new(dataset_in(&files, max_res, mode, 1));
        let n = ds.num_samples();
        let mut group = c.benchmark_group(format!("image_e2e/{label}"));
        group.throughput(Throughput::Elements(n));
        group.sample_size(10);
        group.warm_up_time(std::time::Duration::from_secs(1));
        group.measurement_time(std::time::Duration::from_secs(5));
        let mut pipelines: Vec<(&str, Arc<dyn FieldDecoder>)> = vec![
            ("beton_rrc160_flip_normalize", pipeline(RandomResizedCropRGBImageDecoder::new((160, 160)))),
            (
                "beton_rrc160_area_flip_normalize",
                pipeline(
                    RandomResizedCropRGBImageDecoder::new((160, 160)).interpolation(Interpolation::Area),
                ),
            ),
            (
                "ffcv_method_rrc160_flip_normalize",
                pipeline(FfcvMethod(RandomResizedCropRGBImageDecoder::new((160, 160)))),
            ),
        ];
        let mut datasets = vec![Arc::clone(&ds); pipelines.len()];
        if mode == WriteMode::Jpg {
            pipelines.push(("decode_wall", Arc::new(DecodeWall)));
            datasets.push(Arc::clone(&ds));
            // The same JPEGs without restart markers (as FFCV writes them): what cutting the
            // crop's intervals out is worth.
            pipelines.push((
                "beton_rrc160_flip_normalize_no_restart_markers",
                pipeline(RandomResizedCropRGBImageDecoder::new((160, 160))),
            ));
            datasets.push(Arc::new(dataset_in(&files, max_res, mode, 0)));
        }
        for ((name, decoder), ds) in pipelines.into_iter().zip(datasets) {
            let mut loader = Loader::builder(ds)
                .threads(2)
                .batch_size(256)
                .order(OrderOption::Random)
                .seed(0)
                // Every sample counts (the throughput is n per epoch): no batch is dropped.
                .drop_last(false)
                .fields(&["image"])
                .decoder("image", decoder)
                .build()
                .unwrap();
            group.bench_function(name, |b| {
                b.iter(|| {
                    for batch in loader.next_epoch().unwrap() {
                        black_box(batch.unwrap());
                    }
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench, end_to_end);
criterion_main!(benches);
