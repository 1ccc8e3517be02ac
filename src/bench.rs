//! `beton bench FILE`: runs the loader over a file for a few epochs and prints what each epoch
//! did: throughput, pages and bytes read, cache hits, and where the time went.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use beton_loader::image::{
    CenterCropRGBImageDecoder, FloatType, ImagePipeline, NormalizeImage, RandomHorizontalFlip,
    RandomResizedCropRGBImageDecoder, SimpleRGBImageDecoder,
};
use beton_loader::{Loader, OrderOption};
use beton_query::{select_indices, splits, Table};

/// Arguments of `beton bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// The .beton file.
    file: PathBuf,
    /// Samples per batch.
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    /// Worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Traversal order.
    #[arg(long, value_enum, default_value_t = Order::QuasiRandom)]
    order: Order,
    /// Read with the process cache (pread into a bounded pool) instead of the OS page cache.
    #[arg(long)]
    process_cache: bool,
    /// Bound of the process cache, in pages.
    #[arg(long)]
    cache_pages: Option<usize>,
    /// Epochs to run.
    #[arg(long, default_value_t = 2)]
    epochs: u64,
    /// Only the rows this predicate or SELECT matches.
    #[arg(long = "where", value_name = "SQL")]
    filter: Option<String>,
    /// Only the rows of this named split.
    #[arg(long)]
    split: Option<String>,
    /// Fields to decode, comma-separated (default: every field with a default decoder).
    #[arg(long, value_delimiter = ',')]
    fields: Option<Vec<String>>,
    /// Batches built ahead of the consumer.
    #[arg(long, default_value_t = 3)]
    batches_ahead: usize,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Decode image fields too: `rrc:SIZE` (random resized crop + flip + normalize to f16, the
    /// training pipeline), `center:SIZE` (centre crop + normalize) or `simple` (whole images).
    #[arg(long, value_name = "rrc:SIZE|center:SIZE|simple")]
    images: Option<String>,
    /// Row layout of a foreign custom (type 255) field: NAME=SIZE[:ALIGN].
    #[arg(long, value_name = "NAME=SIZE[:ALIGN]")]
    custom: Vec<String>,
}

/// `--order`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Order {
    /// Rows in order.
    Sequential,
    /// A random permutation per epoch.
    Random,
    /// FFCV's page-aware quasi-random order.
    QuasiRandom,
}

/// Runs the benchmark; returns the report.
pub fn run(args: &BenchArgs) -> Result<String> {
    let ds = Arc::new(crate::open::open(&args.file, &args.custom)?);
    let indices = match (&args.filter, &args.split) {
        (Some(sql), _) => Some(select_indices(&Table::new(&ds), sql)?),
        (None, Some(name)) => Some(splits::get(&ds, name)?),
        (None, None) => None,
    };
    let order = match args.order {
        Order::Sequential => OrderOption::Sequential,
        Order::Random => OrderOption::Random,
        Order::QuasiRandom => OrderOption::QuasiRandom { buffer_pages: None },
    };
    let mut builder = Loader::builder(Arc::clone(&ds))
        .batch_size(args.batch_size)
        .threads(args.threads)
        .order(order)
        .seed(args.seed)
        .os_cache(!args.process_cache)
        .batches_ahead(args.batches_ahead);
    if let Some(i) = indices {
        builder = builder.indices(i);
    }
    if let Some(n) = args.cache_pages {
        builder = builder.cache_pages(n);
    }
    if let Some(spec) = &args.images {
        for f in ds.fields() {
            if f.field_type().is_image() {
                builder = builder.decoder(f.name(), Arc::new(image_pipeline(spec)?));
            }
        }
    }
    let names: Vec<&str>;
    if let Some(fields) = &args.fields {
        names = fields.iter().map(String::as_str).collect();
        builder = builder.fields(&names);
    }
    let mut loader = builder.build()?;
    let mut out = String::new();
    writeln!(
        out,
        "{}: {} of {} samples, batch {}, {} batches an epoch",
        args.file.display(),
        loader.indices().len(),
        ds.num_samples(),
        args.batch_size,
        loader.num_batches()?
    )?;
    writeln!(
        out,
        "{:>5} {:>9} {:>12} {:>10} {:>7} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9}",
        "epoch",
        "seconds",
        "samples/s",
        "MB/s",
        "pages",
        "page MB",
        "hits",
        "direct",
        "busy s",
        "wait s",
        "starved s"
    )?;
    for _ in 0..args.epochs {
        let started = Instant::now();
        let mut epoch = loader.next_epoch()?;
        for batch in epoch.by_ref() {
            batch?;
        }
        let secs = started.elapsed().as_secs_f64();
        let s = epoch.stats();
        writeln!(
            out,
            "{:>5} {:>9.3} {:>12.0} {:>10.1} {:>7} {:>9.1} {:>8} {:>8} {:>9.3} {:>9.3} {:>9.3}",
            loader.epoch() - 1,
            secs,
            s.samples as f64 / secs,
            s.payload_bytes as f64 / secs / 1e6,
            s.pages_read,
            s.page_bytes_read as f64 / 1e6,
            s.cache_hits,
            s.direct_reads,
            s.worker_busy.as_secs_f64(),
            s.worker_wait.as_secs_f64(),
            s.consumer_wait.as_secs_f64(),
        )?;
    }
    writeln!(out, "(busy/wait: summed over worker threads; starved: the consumer waiting for a batch)")?;
    Ok(out)
}

/// The image pipeline `--images` names.
fn image_pipeline(spec: &str) -> Result<ImagePipeline> {
    let normalize = NormalizeImage::imagenet().dtype(FloatType::F16);
    let size = |s: &str| -> Result<(usize, usize)> {
        let n: usize = s.parse().map_err(|_| anyhow::anyhow!("--images {spec}: '{s}' is not a size"))?;
        Ok((n, n))
    };
    Ok(match spec.split_once(':') {
        Some(("rrc", s)) => ImagePipeline::new(RandomResizedCropRGBImageDecoder::new(size(s)?))
            .then(RandomHorizontalFlip::default())
            .normalize(normalize),
        Some(("center", s)) => {
            ImagePipeline::new(CenterCropRGBImageDecoder::new(size(s)?)).normalize(normalize)
        }
        None if spec == "simple" => ImagePipeline::new(SimpleRGBImageDecoder),
        _ => anyhow::bail!("--images {spec}: expected rrc:SIZE, center:SIZE or simple"),
    })
}
