//! End-to-end images/s of issue 5's pipeline through the [`Loader`]: RANDOM order, 2 threads,
//! batch 256, every sample counted (`drop_last(false)`), whole epochs, against the baselines the
//! issue names, **interleaved**: each round runs one epoch of every pipeline in turn, and a ratio
//! is taken within each round, so a slow spell of the shared machine moves both sides of it.
//! The figures are the medians over the rounds.
//!
//! Pipelines, over the bench corpus written at `max_resolution` 256 and 512 as JPEG q90 (and
//! as raw at 256):
//!
//! - `beton`: [`RandomResizedCropRGBImageDecoder`] 160 + [`RandomHorizontalFlip`] +
//!   [`NormalizeImage`] (ImageNet, `f16`, CHW), fused, on beton's file (restart markers);
//! - `beton, no restart markers`: the same on the same images written as FFCV writes them;
//! - `beton, area`: the same with [`Interpolation::Area`] (FFCV's resize filter);
//! - `FFCV's method`: FFCV's `RandomResizedCropRGBImageDecoder` done in Rust on FFCV's bytes
//!   (no restart markers): the whole JPEG decoded by libjpeg-turbo with `TJFLAG_FASTDCT` (as
//!   FFCV's `imdecode`), the same crop resized with area averaging (box filter when shrinking,
//!   bilinear when enlarging: OpenCV's `INTER_AREA`, FFCV's resize) by `fast_image_resize`,
//!   then the same flip and normalisation as beton (beton's own, so the comparison is of the
//!   decode and resize);
//! - `decode wall`: every JPEG of beton's file fully decoded by libjpeg-turbo, default settings,
//!   nothing else; `decode wall, FFCV's bytes`: the same on the file without markers.
//!
//! Run: `BETON_BENCH_CORPUS=DIR cargo bench -p beton-loader --bench image_e2e [-- ROUNDS]`
//! (DIR from `benches/bench-corpus.sh DIR 1000 5 0`; without it, the bundled photos);
//! `BETON_E2E_GROUPS=256,512,raw` and `BETON_E2E_PIPELINES=FFCV,wall` (substrings) pick what
//! runs (beton always does).

mod common;

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use beton_loader::image::{
    FloatType, ImagePipeline, Interpolation, NormalizeImage, RandomHorizontalFlip,
    RandomResizedCropRGBImageDecoder,
};
use beton_loader::{ColumnSpec, ElemType, FieldDecoder, Loader, OrderOption, SampleContext};
use beton_storage::{Dataset, ImageMode, Value, WriteMode};
use common::{dataset_in, median, sources, Tj};
use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

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

/// `decoder` + RandomHorizontalFlip + NormalizeImage (ImageNet, f16, CHW).
fn pipeline(decoder: impl FieldDecoder + 'static) -> Arc<dyn FieldDecoder> {
    Arc::new(
        ImagePipeline::new(decoder)
            .then(RandomHorizontalFlip::default())
            .normalize(NormalizeImage::imagenet().dtype(FloatType::F16)),
    )
}

/// One loader per pipeline, over its file.
struct Run {
    name: &'static str,
    loader: Loader,
    n: u64,
    seconds: Vec<f64>,
}

impl Run {
    fn new(name: &'static str, ds: &Arc<Dataset>, decoder: Arc<dyn FieldDecoder>) -> Run {
        let loader = Loader::builder(Arc::clone(ds))
            .threads(2)
            .batch_size(256)
            .order(OrderOption::Random)
            .seed(0)
            .drop_last(false)
            .fields(&["image"])
            .decoder("image", decoder)
            .build()
            .unwrap();
        Run { name, loader, n: ds.num_samples(), seconds: Vec::new() }
    }

    /// One whole epoch: its seconds.
    fn epoch(&mut self) -> f64 {
        let t = Instant::now();
        for batch in self.loader.next_epoch().unwrap() {
            black_box(batch.unwrap());
        }
        t.elapsed().as_secs_f64()
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a number is the rounds. BETON_E2E_GROUPS (`256,512,raw`)
    // and BETON_E2E_PIPELINES (`FFCV,wall`: substrings; beton always runs) pick what runs.
    let rounds = std::env::args().skip(1).find_map(|a| a.parse::<usize>().ok()).unwrap_or(9);
    let filter = |var: &str| -> Vec<String> {
        std::env::var(var).map(|v| v.split(',').map(str::to_string).collect()).unwrap_or_default()
    };
    let (groups, names) = (filter("BETON_E2E_GROUPS"), filter("BETON_E2E_PIPELINES"));
    let picked =
        |list: &[String], what: &str| list.is_empty() || list.iter().any(|w| what.contains(w.as_str()));
    let (root, files) = sources();
    println!(
        "image_e2e: {} images from {root}; RANDOM, 2 threads, batch 256; {rounds} interleaved rounds",
        files.len()
    );
    let rrc = || RandomResizedCropRGBImageDecoder::new((160, 160));
    for (label, max_res, mode) in
        [("256", 256u32, WriteMode::Jpg), ("512", 512, WriteMode::Jpg), ("raw", 256, WriteMode::Raw)]
    {
        if !(groups.is_empty() || groups.iter().any(|g| g == label)) {
            continue;
        }
        let ds = Arc::new(dataset_in(&files, max_res, mode, 1));
        let mut runs = vec![
            Run::new("beton", &ds, pipeline(rrc())),
            Run::new("beton, area", &ds, pipeline(rrc().interpolation(Interpolation::Area))),
        ];
        if mode == WriteMode::Jpg {
            let ffcv_bytes = Arc::new(dataset_in(&files, max_res, mode, 0));
            runs.push(Run::new("beton, no restart markers", &ffcv_bytes, pipeline(rrc())));
            runs.push(Run::new("FFCV's method", &ffcv_bytes, pipeline(FfcvMethod(rrc()))));
            runs.push(Run::new("decode wall", &ds, Arc::new(DecodeWall)));
            runs.push(Run::new("decode wall, FFCV's bytes", &ffcv_bytes, Arc::new(DecodeWall)));
        } else {
            runs.push(Run::new("FFCV's method", &ds, pipeline(FfcvMethod(rrc()))));
        }
        runs.retain(|r| r.name == "beton" || picked(&names, r.name));
        // One epoch each to warm caches and thread-local buffers, then the rounds.
        for r in &mut runs {
            r.epoch();
        }
        for _ in 0..rounds {
            for r in &mut runs {
                let s = r.epoch();
                r.seconds.push(s);
            }
        }
        println!(
            "\n{label}: images/s (median of {rounds} epochs); beton ÷ this (median of the per-round ratios)"
        );
        let beton = runs[0].seconds.clone();
        for r in &runs {
            let ips = r.n as f64 / median(r.seconds.clone());
            let ratios: Vec<f64> = r.seconds.iter().zip(&beton).map(|(t, b)| t / b).collect();
            let (lo, hi) = ratios.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            println!(
                "  {:<28} {:>8.0}   beton {:>5.2}x  (rounds {lo:.2}-{hi:.2})",
                r.name,
                ips,
                median(ratios)
            );
        }
    }
}
