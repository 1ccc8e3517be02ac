//! `EncodeArgs`: the flags that say how an ImageFolder's images are encoded and written, shared
//! by `write-imagefolder` and `append DIR FOLDER`, and the image and writer options they give.

use anyhow::{bail, Result};
use beton_storage::{ImageOptions, WriteMode, WriterOptions};
use clap::ValueEnum;

use crate::progress;

/// How an ImageFolder's images are encoded and written (`write-imagefolder`, `append DIR FOLDER`).
#[derive(clap::Args)]
pub(crate) struct EncodeArgs {
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
    /// Page size in bytes, a power of two in [2 MiB, 4 GiB). Default: chosen from the
    /// images (small pages for a small folder, so its file is not padded to 8 MiB pages;
    /// FFCV's 8 MiB from 64 MiB of images up).
    #[arg(long)]
    page_size: Option<u64>,
    /// Seed of per-image random choices (--mode proportion).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Re-encode source JPEGs even when they could be stored as they are.
    #[arg(long)]
    no_passthrough: bool,
    /// Store passed-through JPEGs exactly as given: only their header is read (no check of
    /// their data, no restart markers added); a corrupt one fails when it is loaded.
    #[arg(long)]
    no_verify: bool,
    /// A JPEG restart marker every N MCUs (0: none, FFCV's bytes). With markers, crop decoders
    /// entropy-decode only the part of each JPEG around the crop.
    #[arg(long, value_name = "N", default_value_t = 1)]
    restart_interval: u16,
    /// Leave out images that cannot be read or decoded (listed at the end) instead of stopping.
    #[arg(long)]
    pub(crate) skip_bad: bool,
    /// Composite transparent images (PNGs with alpha or tRNS) onto this colour, e.g.
    /// 255,255,255; by default alpha is dropped as FFCV does, showing the colours under
    /// transparent pixels (the images are counted at the end).
    #[arg(long, value_name = "R,G,B", value_parser = parse_rgb)]
    pub(crate) alpha_background: Option<[u8; 3]>,
}

/// `R,G,B` (each 0 to 255), for `--alpha-background`.
fn parse_rgb(text: &str) -> std::result::Result<[u8; 3], String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let channel = |s: &str| s.parse::<u8>().map_err(|_| format!("{s:?} is not 0 to 255"));
    match parts.as_slice() {
        [r, g, b] => Ok([channel(r)?, channel(g)?, channel(b)?]),
        _ => Err(format!("{text:?}: give three numbers 0 to 255 as R,G,B, e.g. 255,255,255")),
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Raw,
    Jpg,
    Smart,
    Proportion,
}

impl EncodeArgs {
    /// The image options these flags give.
    pub(crate) fn image(&self) -> Result<ImageOptions> {
        let write_mode = match self.mode {
            Mode::Raw => WriteMode::Raw,
            Mode::Jpg => WriteMode::Jpg,
            Mode::Smart => match self.smart_threshold {
                Some(threshold) => WriteMode::Smart { threshold },
                None => {
                    bail!("--mode smart needs --smart-threshold BYTES (store as JPEG above this raw size)")
                }
            },
            Mode::Proportion => WriteMode::Proportion { probability: self.proportion },
        };
        if self.smart_threshold.is_some() && !matches!(self.mode, Mode::Smart) {
            bail!("--smart-threshold applies to --mode smart only");
        }
        Ok(ImageOptions {
            write_mode,
            max_resolution: self.max_resolution,
            jpeg_quality: self.quality,
            jpeg_passthrough: !self.no_passthrough,
            jpeg_restart_interval: self.restart_interval,
            verify: !self.no_verify,
            alpha_background: self.alpha_background,
        })
    }

    /// The writer options these flags give, with a progress bar of `n` images (0: learnt from
    /// the writer).
    pub(crate) fn writer(&self, bar: &indicatif::ProgressBar) -> WriterOptions {
        WriterOptions {
            page_size: self.page_size.unwrap_or(0),
            num_threads: self.workers,
            seed: self.seed,
            progress: Some(progress::writer_callback(bar)),
            skip_bad: self.skip_bad,
            ..WriterOptions::default()
        }
    }
}
