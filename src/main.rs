//! `beton`: the command-line tool. Inspect (`info`), check (`verify`) and write (`write-imagefolder`)
//! `.beton` files. All the work is in `beton-storage`; this file parses arguments and prints.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use beton_storage::summary::FieldSummary;
use beton_storage::{
    imagefolder, Dataset, FieldSpec, FieldType, ImageOptions, ImageSource, OpenOptions, SampleValue, Summary,
    WriteMode, Writer, WriterOptions,
};
use clap::{Parser, Subcommand, ValueEnum};

/// beton: FFCV-compatible .beton dataset files.
#[derive(Parser)]
#[command(name = "beton", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a file's header, fields and sizes (bytes per field, jpg/raw image counts).
    Info {
        /// The .beton file.
        file: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Row layout of a foreign custom (type 255) field: NAME=SIZE[:ALIGN].
        #[arg(long, value_name = "NAME=SIZE[:ALIGN]")]
        custom: Vec<String>,
    },
    /// Check every structure, row and allocation; exit 1 naming the first problem.
    Verify {
        /// The .beton file.
        file: PathBuf,
        /// Also decode every image.
        #[arg(long)]
        decode_images: bool,
        /// Row layout of a foreign custom (type 255) field: NAME=SIZE[:ALIGN].
        #[arg(long, value_name = "NAME=SIZE[:ALIGN]")]
        custom: Vec<String>,
    },
    /// Write an ImageFolder (DIR/CLASS/IMAGE) as fields `image` and `label` (FFCV types only).
    WriteImagefolder(WriteArgs),
}

#[derive(clap::Args)]
struct WriteArgs {
    /// Root folder: one sub-folder per class.
    dir: PathBuf,
    /// The .beton file to write (replaced atomically if it exists).
    out: PathBuf,
    /// How images are stored.
    #[arg(long, value_enum, default_value_t = Mode::Jpg)]
    mode: Mode,
    /// Longest side after downscaling (area averaging); default: keep sizes.
    #[arg(long)]
    max_resolution: Option<u32>,
    /// JPEG quality, 1-100.
    #[arg(long, default_value_t = 90)]
    quality: u8,
    /// With --mode smart: store as JPEG when the raw image exceeds this many bytes.
    #[arg(long)]
    smart_threshold: Option<u64>,
    /// With --mode proportion: probability of JPEG per image.
    #[arg(long, default_value_t = 0.5)]
    proportion: f64,
    /// Encoding threads (0: all cores). The output does not depend on it.
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Page size in bytes, a power of two in [2 MiB, 4 GiB).
    #[arg(long, default_value_t = 8 << 20)]
    page_size: u64,
    /// Seed of per-image random choices (--mode proportion).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Add a `path` text field (the image path relative to DIR; a beton extension field).
    #[arg(long)]
    with_path: bool,
    /// Re-encode source JPEGs even when they could be stored as they are.
    #[arg(long)]
    no_passthrough: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Raw,
    Jpg,
    Smart,
    Proportion,
}

fn main() {
    let cli = Cli::parse();
    let (name, result) = match cli.command {
        Command::Info { file, json, custom } => ("info", info(&file, json, &custom)),
        Command::Verify { file, decode_images, custom } => ("verify", verify(&file, decode_images, &custom)),
        Command::WriteImagefolder(args) => ("write-imagefolder", write_imagefolder(&args)),
    };
    if let Err(e) = result {
        eprintln!("beton {name}: {e:#}");
        std::process::exit(1);
    }
}

fn open(file: &Path, custom: &[String]) -> Result<Dataset> {
    let mut options = OpenOptions::new();
    for spec in custom {
        let (name, layout) =
            spec.split_once('=').with_context(|| format!("--custom {spec}: expected NAME=SIZE[:ALIGN]"))?;
        let (size, align) = layout.split_once(':').unwrap_or((layout, "1"));
        let parse =
            |s: &str| s.parse::<usize>().with_context(|| format!("--custom {spec}: '{s}' is not a number"));
        options = options.custom_layout(name, parse(size)?, parse(align)?);
    }
    Ok(options.open(file)?)
}

fn info(file: &Path, json: bool, custom: &[String]) -> Result<()> {
    let ds = open(file, custom)?;
    let s = Summary::of(&ds)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!("{}", s.path);
    println!(
        "  version {}, {} samples, {} fields, row {} bytes",
        s.version,
        s.num_samples,
        s.fields.len(),
        s.row_bytes
    );
    println!(
        "  {} pages of {}, allocation table at byte {} ({} entries), file {}",
        s.num_pages,
        human(s.page_size),
        s.alloc_table_ptr,
        s.num_allocations,
        human(s.file_bytes)
    );
    let rows: Vec<[String; 6]> = s
        .fields
        .iter()
        .map(|f: &FieldSummary| {
            let images = match (f.jpg, f.raw) {
                (Some(j), Some(r)) => format!("{j} jpg, {r} raw"),
                _ => String::new(),
            };
            [
                f.name.clone(),
                format!("{} ({})", f.type_name, f.type_id),
                f.row_offset.to_string(),
                human(f.payload_bytes),
                images,
                f.arguments.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let header = ["field", "type (id)", "row offset", "payload", "images", "arguments"].map(String::from);
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().chain([&header]).map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for r in [&header].into_iter().chain(&rows) {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("  {}", cells.join("  ").trim_end());
    }
    Ok(())
}

fn verify(file: &Path, decode_images: bool, custom: &[String]) -> Result<()> {
    let ds = open(file, custom).with_context(|| format!("{} is not a valid .beton file", file.display()))?;
    let report = beton_storage::verify(&ds, decode_images)?;
    println!(
        "ok: {}: {} samples and {} allocations checked{}",
        file.display(),
        report.samples,
        report.allocations,
        if decode_images { format!(", {} images decoded", report.images_decoded) } else { String::new() }
    );
    Ok(())
}

fn write_imagefolder(a: &WriteArgs) -> Result<()> {
    let start = Instant::now();
    let folder = imagefolder::scan(&a.dir)?;
    let write_mode = match a.mode {
        Mode::Raw => WriteMode::Raw,
        Mode::Jpg => WriteMode::Jpg,
        Mode::Smart => match a.smart_threshold {
            Some(threshold) => WriteMode::Smart { threshold },
            None => bail!("--mode smart needs --smart-threshold BYTES"),
        },
        Mode::Proportion => WriteMode::Proportion { probability: a.proportion },
    };
    let image = ImageOptions {
        write_mode,
        max_resolution: a.max_resolution,
        jpeg_quality: a.quality,
        jpeg_passthrough: !a.no_passthrough,
    };
    let mut fields = vec![FieldSpec::rgb_image("image", image), FieldSpec::new("label", FieldType::Int)];
    if a.with_path {
        fields.push(FieldSpec::new("path", FieldType::Text));
    }
    let n = folder.samples.len() as u64;
    let bar = indicatif::ProgressBar::with_draw_target(Some(n), indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} images  {per_sec}  eta {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let progress_bar = bar.clone();
    let options = WriterOptions {
        page_size: a.page_size,
        num_threads: a.workers,
        seed: a.seed,
        progress: Some(Arc::new(move |p: beton_storage::Progress| {
            progress_bar.set_position(p.done);
            true
        })),
        ..WriterOptions::default()
    };
    let report = Writer::new(&a.out, fields, options)?.write_indexed(n, |i| {
        let (path, label) = &folder.samples[i as usize];
        let mut sample =
            vec![SampleValue::Image(ImageSource::File(path.clone())), SampleValue::Int(*label as i64)];
        if a.with_path {
            let rel = path.strip_prefix(&a.dir).unwrap_or(path);
            sample.push(SampleValue::Text(rel.to_string_lossy().into_owned()));
        }
        Ok(sample)
    });
    bar.finish_and_clear();
    let report = report?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "wrote {}: {} images in {} classes, {} pages, {} in {:.1} s ({:.0} images/s)",
        report.path.display(),
        report.num_samples,
        folder.classes.len(),
        report.num_pages,
        human(report.file_len),
        secs,
        report.num_samples as f64 / secs.max(1e-9)
    );
    Ok(())
}

/// Bytes in binary units: `8.0 MiB`.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
