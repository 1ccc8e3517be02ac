//! `beton`: the command-line tool. Inspect (`info`, `show`), check (`verify`), query (`query`,
//! `explain`), split (`split`) and write (`write-imagefolder`) `.beton` files; make and edit
//! versioned dataset directories (`import`, `append`, `log`, `tag`, `restore`). The work is in
//! `beton-storage`, `beton-dataset` and `beton-query`; this file parses arguments and prints.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use beton_storage::summary::FieldSummary;
use beton_storage::{
    imagefolder, FieldSpec, FieldType, ImageSource, SampleValue, Summary, Writer, WriterOptions,
};
use clap::{Parser, Subcommand};

mod bench;
mod branches;
mod encode;
mod explain;
mod gallery;
mod open;
mod output;
mod progress;
mod query;
mod show;
mod similar;
mod split;
mod versions;

use encode::EncodeArgs;
use open::{name_file, open};
use output::{classes_line, human};

/// beton: FFCV-compatible .beton dataset files.
#[derive(Parser)]
#[command(name = "beton", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a file's header, fields and sizes (bytes per field, jpg/raw image counts); for a
    /// dataset directory its version, data files, pending deletions, column files and splits.
    Info {
        /// The .beton file or dataset directory.
        file: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// The version of a dataset directory (a number or a tag; default the latest).
        #[arg(long)]
        version: Option<String>,
        /// Row layout of a foreign custom (type 255) field: NAME=SIZE[:ALIGN].
        #[arg(long, value_name = "NAME=SIZE[:ALIGN]")]
        custom: Vec<String>,
    },
    /// Check every structure, row and allocation; exit 1 naming the first problem. For a dataset
    /// directory, every version: its files there, their checksums, its entries consistent, each
    /// data file's structure; exit 1 listing every problem.
    Verify {
        /// The .beton file or dataset directory.
        file: PathBuf,
        /// Also decode every image.
        #[arg(long)]
        decode_images: bool,
        /// Row layout of a foreign custom (type 255) field: NAME=SIZE[:ALIGN].
        #[arg(long, value_name = "NAME=SIZE[:ALIGN]")]
        custom: Vec<String>,
    },
    /// Run SQL on the data table: `SELECT ... FROM samples ...` or a bare predicate (`label < 3`).
    Query {
        /// The .beton file or dataset directory.
        file: PathBuf,
        /// The version of a dataset directory (a number or a tag; default the latest).
        #[arg(long)]
        version: Option<String>,
        /// The query.
        sql: String,
        /// Print one JSON object a row.
        #[arg(long, conflicts_with = "ids")]
        json: bool,
        /// Print the indices of the matching samples, one a line.
        #[arg(long)]
        ids: bool,
        /// A value for `$NAME` in the SQL: a JSON number, true, false, null or "string", else
        /// the text as a string (`--param min=0.5 --param cls=dog`).
        #[arg(long, value_name = "NAME=VALUE", value_parser = query::parse_param)]
        param: Vec<(String, beton_query::Param)>,
        /// Row layout of a foreign custom (type 255) field: NAME=SIZE[:ALIGN].
        #[arg(long, value_name = "NAME=SIZE[:ALIGN]")]
        custom: Vec<String>,
    },
    /// Print every field of samples; `--out x.png` writes one sample's image as a PNG,
    /// `--grid sheet.png` a contact sheet of several samples' images.
    Show {
        /// The .beton file or dataset directory.
        file: PathBuf,
        /// The sample indices (`7`, `3 9 12`, or a range `0..16`).
        #[arg(required = true, value_parser = parse_indices)]
        indices: Vec<Vec<u64>>,
        /// Write a contact sheet of the samples' images (each labelled with its index) here.
        #[arg(long, value_name = "SHEET.png", conflicts_with = "out")]
        grid: Option<PathBuf>,
        /// The version of a dataset directory (a number or a tag; default the latest).
        #[arg(long)]
        version: Option<String>,
        /// Write the decoded image (the first image field, or --field) to this PNG file.
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
        /// Only this field (with --out: the image field to write).
        #[arg(long, value_name = "NAME")]
        field: Option<String>,
        /// Row layout of a foreign custom (type 255) field: NAME=SIZE[:ALIGN].
        #[arg(long, value_name = "NAME=SIZE[:ALIGN]")]
        custom: Vec<String>,
    },
    /// Look at the rows a query selects: a self-contained HTML page (--out) and/or a PNG contact
    /// sheet (--png) of their images, grouped by a column (--by), with per-column summaries.
    Gallery(gallery::GalleryArgs),
    /// Near-duplicate groups: by an image field's perceptual hash (--by image, the default) or a
    /// vector column within --threshold; printed, and shown one line per group (--out/--png).
    Dups(similar::DupsArgs),
    /// A row's nearest neighbours by a vector column, printed and shown (--out).
    Nearest(similar::NearestArgs),
    /// Show what a query touches and reads: columns, heap columns, rows matched, pages and bytes.
    Explain {
        /// The .beton file or dataset directory.
        file: PathBuf,
        /// The version of a dataset directory (a number or a tag; default the latest).
        #[arg(long)]
        version: Option<String>,
        /// The query: `SELECT ... FROM samples ...` or a bare predicate.
        sql: String,
        /// Row layout of a foreign custom (type 255) field: NAME=SIZE[:ALIGN].
        #[arg(long, value_name = "NAME=SIZE[:ALIGN]")]
        custom: Vec<String>,
    },
    /// Run the loader over a file for a few epochs and print throughput, reads and waits.
    Bench(bench::BenchArgs),
    /// Named splits stored in the file: list, add (from SQL), random, remove.
    Split {
        #[command(subcommand)]
        action: split::Action,
    },
    /// Write an ImageFolder (DIR/CLASS/IMAGE) as fields `image` and `label` (FFCV types only).
    WriteImagefolder(WriteArgs),
    #[command(flatten)]
    Versions(versions::Action),
}

#[derive(clap::Args)]
struct WriteArgs {
    /// Root folder: one sub-folder per class.
    dir: PathBuf,
    /// The .beton file to write (replaced atomically if it exists).
    out: PathBuf,
    /// Add a `path` text field (the image path relative to DIR; a beton extension field).
    #[arg(long)]
    with_path: bool,
    #[command(flatten)]
    encode: EncodeArgs,
}

/// mimalloc keeps freed memory for the next allocation: a query's 64 MB of row ids lands in pages
/// already mapped (glibc unmaps every block of 32 MiB or more on free, and a fresh page costs a
/// fault each; docs/PERFORMANCE.md "Memory").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // SAFETY: first thing in `main`, before any thread is started (`beton_storage::allocator`: a
    // query's fresh memory touched in 4 KiB pages where used, not whole huge pages).
    unsafe { beton_storage::allocator::commit_arenas_on_demand() };
    let cli = Cli::parse();
    let (name, result) = match cli.command {
        Command::Info { file, json, version, custom } => match versions::is_dataset(&file) {
            true => ("info", versions::info(&file, version.as_deref(), json)),
            false => (
                "info",
                versions::file_version(&file, version.as_deref()).and_then(|()| info(&file, json, &custom)),
            ),
        },
        Command::Verify { file, decode_images, custom } => match versions::is_dataset(&file) {
            true => ("verify", versions::verify(&file, decode_images)),
            false => ("verify", verify(&file, decode_images, &custom)),
        },
        Command::Show { file, indices, grid, version, out, field, custom } => {
            let indices: Vec<u64> = indices.concat();
            (
                "show",
                show::run_many(
                    &file,
                    version.as_deref(),
                    &custom,
                    &indices,
                    field.as_deref(),
                    out.as_deref(),
                    grid.as_deref(),
                ),
            )
        }
        Command::Gallery(args) => ("gallery", gallery::run(&args)),
        Command::Dups(args) => ("dups", similar::dups(&args)),
        Command::Nearest(args) => ("nearest", similar::nearest(&args)),
        Command::Explain { file, version, sql, custom } => {
            let explained = match versions::is_dataset(&file) {
                true => explain::run_version(&file, version.as_deref(), &sql),
                false => versions::file_version(&file, version.as_deref())
                    .and_then(|()| explain::run(&file, &custom, &sql)),
            };
            ("explain", explained)
        }
        Command::WriteImagefolder(args) => ("write-imagefolder", write_imagefolder(&args)),
        Command::Split { action } => ("split", split::run(&action)),
        Command::Versions(action) => {
            (action.name(), branches::run(&action).unwrap_or_else(|| versions::run(&action)))
        }
        Command::Bench(args) => ("bench", bench::run(&args)),
        Command::Query { file, version, sql, json, ids, param, custom } => {
            let output = if ids {
                query::Output::Ids
            } else if json {
                query::Output::Json
            } else {
                query::Output::Table
            };
            ("query", query::run(&file, version.as_deref(), &custom, &sql, &param, output))
        }
    };
    let failed = |e: anyhow::Error| -> ! {
        // Not eprintln!: it panics when stderr is closed.
        let _ = writeln!(std::io::stderr(), "beton {name}: {}", chain(&e));
        std::process::exit(1)
    };
    let text = result.unwrap_or_else(|e| failed(e));
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => {}
        // `beton info FILE | head`: the reader went away; that is not the tool's failure.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => failed(anyhow::Error::new(e).context("writing to stdout")),
    }
}

/// Sample indices: one (`7`) or a half-open range (`0..16`).
fn parse_indices(text: &str) -> std::result::Result<Vec<u64>, String> {
    let number =
        |t: &str| t.trim().parse::<u64>().map_err(|_| format!("'{t}' is not a sample index (0, 1, ...)"));
    match text.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (number(a)?, number(b)?);
            if b <= a {
                return Err(format!("the range {text} is empty (write START..END with END > START)"));
            }
            if b - a > 10_000 {
                return Err(format!("the range {text} has {} samples; at most 10000 at a time", b - a));
            }
            Ok((a..b).collect())
        }
        None => Ok(vec![number(text)?]),
    }
}

/// The error and its causes joined by `: `, leaving out a cause its parent's message already
/// ends with (storage errors print their source, e.g. `PATH: No such file or directory`).
fn chain(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let msg = cause.to_string();
        if !text.ends_with(&msg) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&msg);
        }
    }
    text
}

fn info(file: &Path, json: bool, custom: &[String]) -> Result<String> {
    let ds = open(file, custom)?;
    let s = Summary::of(&ds).map_err(|e| name_file(file, e))?;
    let split::SplitSummary { splits, room, used } = split::summary(&ds)?;
    let classes = ds.classes().map_err(|e| name_file(file, e))?;
    if json {
        let mut value = serde_json::to_value(&s)?;
        value["splits"] = splits
            .iter()
            .map(|(name, rows, bytes)| serde_json::json!({"name": name, "rows": rows, "bytes": bytes}))
            .collect();
        value["split_room"] = serde_json::json!({"bytes": room, "used": used});
        value["classes"] = serde_json::json!(classes);
        value["stale_temp_files"] =
            beton_storage::stale_temp_files(file).iter().map(|p| p.display().to_string()).collect();
        return Ok(serde_json::to_string_pretty(&value)? + "\n");
    }
    let mut out = String::new();
    let plural = |n: u64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    writeln!(out, "{}", s.path)?;
    writeln!(
        out,
        "  version {}, {}, {}, row {}",
        s.version,
        plural(s.num_samples, "sample"),
        plural(s.fields.len() as u64, "field"),
        plural(s.row_bytes as u64, "byte"),
    )?;
    writeln!(
        out,
        "  {} of {}, allocation table at byte {} ({} {}), file {}",
        plural(s.num_pages, "page"),
        human(s.page_size),
        s.alloc_table_ptr,
        s.num_allocations,
        if s.num_allocations == 1 { "entry" } else { "entries" },
        human(s.file_bytes)
    )?;
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
        writeln!(out, "  {}", cells.join("  ").trim_end())?;
    }
    let listed: Vec<String> =
        splits.iter().map(|(name, rows, _)| format!("{name} ({})", plural(*rows, "row"))).collect();
    writeln!(
        out,
        "  splits: {} (room: {used} of {room} bytes used)",
        if listed.is_empty() { "none".to_string() } else { listed.join(", ") }
    )?;
    if let Some(classes) = &classes {
        writeln!(out, "  {}", classes_line(classes))?;
    }
    out.push_str(&stale_note(file));
    Ok(out)
}

/// A note on temporary files that killed writers left beside `file` (empty when none).
fn stale_note(file: &Path) -> String {
    let stale = beton_storage::stale_temp_files(file);
    if stale.is_empty() {
        return String::new();
    }
    let mut note = format!(
        "  note: {} temporary file(s) of interrupted writes to this path (the next write removes them):\n",
        stale.len()
    );
    for p in &stale {
        let _ = writeln!(note, "    {}", p.display());
    }
    note
}

fn verify(file: &Path, decode_images: bool, custom: &[String]) -> Result<String> {
    let ds = open(file, custom)?;
    let bar = progress::bar(ds.num_samples(), "samples");
    let report = beton_storage::verify_with_progress(&ds, decode_images, &|done, _| bar.set_position(done));
    bar.finish_and_clear();
    let report = report.map_err(|e| name_file(file, e))?;
    let decoded =
        if decode_images { format!(", {} images decoded", report.images_decoded) } else { String::new() };
    // Every stored split decodes and names rows of the file.
    let splits = beton_query::splits::all(&ds)?.len();
    let splits = if splits > 0 { format!(", {splits} splits") } else { String::new() };
    Ok(format!(
        "ok: {} samples, {} allocations checked{decoded}{splits}\n{}",
        report.samples,
        report.allocations,
        stale_note(file)
    ))
}

fn write_imagefolder(w: &WriteArgs) -> Result<String> {
    let start = Instant::now();
    let a = &w.encode;
    let image = a.image()?;
    let folder = imagefolder::scan(&w.dir)?;
    // The `path` text field is UTF-8: refuse other names up front rather than mangle them.
    let rel_paths: Vec<String> = if w.with_path {
        folder
            .samples
            .iter()
            .map(|(path, _)| {
                let rel = path.strip_prefix(&w.dir).unwrap_or(path);
                rel.to_str().map(str::to_owned).with_context(|| {
                    format!("--with-path: {} is not valid UTF-8 (the path field is text)", path.display())
                })
            })
            .collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    let mut fields = vec![FieldSpec::rgb_image("image", image), FieldSpec::new("label", FieldType::Int)];
    if w.with_path {
        fields.push(FieldSpec::new("path", FieldType::Text));
    }
    let n = folder.samples.len() as u64;
    let bar = progress::bar(n, "images");
    let options = WriterOptions {
        // The default room for splits, plus room for the class names (twice: two slots).
        splits_reserve: Some((64 << 10) + 2 * n + 2 * serde_json::to_vec(&folder.classes)?.len() as u64),
        ..a.writer(&bar)
    };
    let report = Writer::new(&w.out, fields, options).and_then(|w| {
        w.write_indexed(n, |i| {
            let (path, label) = &folder.samples[i as usize];
            let mut sample = vec![
                SampleValue::Image(ImageSource::File(path.clone())),
                SampleValue::Int(i64::from(*label)),
            ];
            if let Some(rel) = rel_paths.get(i as usize) {
                sample.push(SampleValue::Text(rel.clone()));
            }
            Ok(sample)
        })
    });
    bar.finish_and_clear();
    // A bad image's error names its file (the writer does); say how to go past it.
    let report = report.map_err(|e| match e {
        beton_storage::Error::InvalidSample { .. } if !a.skip_bad => {
            anyhow::Error::new(e).context("--skip-bad leaves unreadable images out")
        }
        e => e.into(),
    })?;
    // The class names, where FFCV never reads (the split region, FORMAT.md §12).
    beton_storage::save_classes(&report.path, None, Some(&folder.classes))
        .map_err(|e| name_file(&report.path, e))?;
    // The columnar copy of the data table, for queries (made after the last in-place write).
    beton_query::columnar::after_write(&report.path);
    let secs = start.elapsed().as_secs_f64();
    let mut out = format!(
        "wrote {}: {} images in {} classes, {} pages of {}, {} in {:.1} s ({:.0} images/s)\n",
        report.path.display(),
        report.num_samples,
        folder.classes.len(),
        report.num_pages,
        human(report.page_size),
        human(report.file_len),
        secs,
        report.num_samples as f64 / secs.max(1e-9)
    );
    if report.alpha_flattened > 0 {
        let hint = match a.alpha_background {
            None => "; --alpha-background R,G,B composites onto a colour instead",
            Some(_) => "",
        };
        writeln!(
            out,
            "{} images had transparency: {}{hint}",
            report.alpha_flattened, report.alpha_flattening
        )?;
    }
    if !report.skipped.is_empty() {
        writeln!(out, "skipped {} unreadable images:", report.skipped.len())?;
        for (_, why) in &report.skipped {
            writeln!(out, "  {why}")?;
        }
    }
    Ok(out)
}
