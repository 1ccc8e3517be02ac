//! Images/s of the loader on the same JPEGs in the pages the writer chooses for them (issue 39:
//! small data files stay small) and in FFCV's 8 MiB pages, **interleaved**: each round runs one
//! round of every variant in turn and takes each chosen-pages ÷ 8 MiB ratio within the round, so
//! a slow spell of the shared machine moves both sides of it. Figures are medians over rounds.
//!
//! Variants, each over both files (2 threads, batch 256, every sample, page cache warm; a round
//! is one epoch of the RRC pipeline, 100 of a payload-only one):
//!
//! - `RRC 160, RANDOM`: [`RandomResizedCropRGBImageDecoder`] 160 + flip + ImageNet normalise
//!   (`f16`), through the OS page cache (issue 5's pipeline);
//! - `payload, RANDOM`: each sample's JPEG bytes only touched (its first and last byte), so that
//!   per-sample and per-page costs are not hidden behind decoding;
//! - `payload, QUASI_RANDOM, process cache`: the same through the process cache
//!   (`os_cache(false)`), which reads whole pages, in the page-aware order;
//! - `payload, RANDOM, process cache`.
//!
//! Run: `BETON_BENCH_CORPUS=DIR cargo bench -p beton-loader --bench small_pages [-- ROUNDS]`
//! (DIR from `benches/bench-corpus.sh DIR 3000 5 0`; without it, the bundled photos), written
//! at `max_resolution` 256 and 128 (small JPEGs) as JPEG q90.

// The image benches' helpers; this one uses two of them.
#[allow(dead_code)]
mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use beton_loader::image::{
    FloatType, ImagePipeline, NormalizeImage, RandomHorizontalFlip, RandomResizedCropRGBImageDecoder,
};
use beton_loader::{ColumnSpec, ElemType, FieldDecoder, Loader, OrderOption, SampleContext};
use beton_storage::{Dataset, Value, WriteMode};
use common::{dataset_paged, median, sources};

/// Touches a JPEG's first and last byte: the loader's per-sample cost without decoding.
struct Payload;

impl FieldDecoder for Payload {
    fn columns(&self, ds: &Dataset, field: usize, _: u64) -> beton_loader::Result<Vec<ColumnSpec>> {
        let name = ds.fields()[field].name().to_string();
        Ok(vec![ColumnSpec { name, elem: ElemType::U8, shape: vec![1] }])
    }

    fn decode(&self, value: Value<'_>, _: &SampleContext, out: &mut [&mut [u8]]) -> beton_loader::Result<()> {
        let Value::Image(img) = value else { panic!("not an image") };
        out[0][0] = img.data[0] ^ img.data[img.data.len() - 1];
        Ok(())
    }
}

fn rrc() -> Arc<dyn FieldDecoder> {
    Arc::new(
        ImagePipeline::new(RandomResizedCropRGBImageDecoder::new((160, 160)))
            .then(RandomHorizontalFlip::default())
            .normalize(NormalizeImage::imagenet().dtype(FloatType::F16)),
    )
}

/// One loader over one file, timed over `epochs` epochs a round.
struct Run {
    name: String,
    loader: Loader,
    /// Samples a round.
    n: u64,
    epochs: usize,
    seconds: Vec<f64>,
}

/// A variant: its decoder, order, whether through the OS cache, and epochs a round.
type Variant = (Arc<dyn FieldDecoder>, OrderOption, bool, usize);

/// Makes a variant's decoder (one for each of its two loaders).
type MakeDecoder = fn() -> Arc<dyn FieldDecoder>;

impl Run {
    fn new(name: String, ds: &Arc<Dataset>, (decoder, order, os_cache, epochs): Variant) -> Run {
        let loader = Loader::builder(Arc::clone(ds))
            .threads(2)
            .batch_size(256)
            .order(order)
            .os_cache(os_cache)
            .seed(0)
            .drop_last(false)
            .fields(&["image"])
            .decoder("image", decoder)
            .build()
            .unwrap();
        Run { name, loader, n: ds.num_samples() * epochs as u64, epochs, seconds: Vec::new() }
    }

    /// Seconds of one round (`epochs` epochs).
    fn round(&mut self) -> f64 {
        let t = Instant::now();
        for _ in 0..self.epochs {
            for batch in self.loader.next_epoch().unwrap() {
                black_box(batch.unwrap());
            }
        }
        t.elapsed().as_secs_f64()
    }
}

fn main() {
    let rounds = std::env::args().skip(1).find_map(|a| a.parse::<usize>().ok()).unwrap_or(9);
    let (root, files) = sources();
    println!(
        "small_pages: {} images from {root}; 2 threads, batch 256; {rounds} interleaved rounds",
        files.len()
    );
    for max_res in [256u32, 128] {
        let chosen = Arc::new(dataset_paged(&files, max_res, WriteMode::Jpg, 1, 0));
        let ffcv = Arc::new(dataset_paged(&files, max_res, WriteMode::Jpg, 1, 8 << 20));
        let payload: u64 = (0..chosen.num_allocations()).map(|k| chosen.allocation(k).size).sum();
        println!(
            "\nmax_resolution {max_res}: {:.1} MB of JPEGs; chosen pages {} KiB: file {:.1} MB; 8 MiB pages: file {:.1} MB",
            payload as f64 / 1e6,
            chosen.page_size() >> 10,
            chosen.file_len() as f64 / 1e6,
            ffcv.file_len() as f64 / 1e6
        );
        let quasi = OrderOption::QuasiRandom { buffer_pages: None };
        // A payload-only epoch takes about a millisecond: its round is 100 epochs.
        let variants: [(&str, MakeDecoder, OrderOption, bool, usize); 4] = [
            ("RRC 160, RANDOM", rrc, OrderOption::Random, true, 1),
            ("payload, RANDOM", || Arc::new(Payload), OrderOption::Random, true, 100),
            ("payload, QUASI_RANDOM, process cache", || Arc::new(Payload), quasi, false, 100),
            ("payload, RANDOM, process cache", || Arc::new(Payload), OrderOption::Random, false, 100),
        ];
        let mut runs = Vec::new();
        for (name, decoder, order, os_cache, epochs) in variants {
            runs.push(Run::new(
                format!("{name}, chosen pages"),
                &chosen,
                (decoder(), order, os_cache, epochs),
            ));
            runs.push(Run::new(format!("{name}, 8 MiB pages"), &ffcv, (decoder(), order, os_cache, epochs)));
        }
        for r in &mut runs {
            r.round();
        }
        for _ in 0..rounds {
            for r in &mut runs {
                let s = r.round();
                r.seconds.push(s);
            }
        }
        println!(
            "  images/s (median of {rounds} rounds): chosen pages, 8 MiB pages; chosen ÷ 8 MiB (median of the per-round ratios)"
        );
        for pair in runs.chunks(2) {
            let (c, f) = (&pair[0], &pair[1]);
            let ratios: Vec<f64> = c.seconds.iter().zip(&f.seconds).map(|(tc, tf)| tf / tc).collect();
            let (lo, hi) = ratios.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            println!(
                "  {:<40} {:>9.0}   {:>9.0}   {:>5.3}x  (rounds {lo:.3}-{hi:.3})",
                c.name.trim_end_matches(", chosen pages"),
                c.n as f64 / median(c.seconds.clone()),
                f.n as f64 / median(f.seconds.clone()),
                median(ratios)
            );
        }
    }
}
