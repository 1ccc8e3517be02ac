//! `beton split`: named splits stored in the file (list, add from a query, random partition,
//! remove). Updates rewrite only the file's split region, crash-safely (FORMAT.md §12).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use beton_query::{select_indices, splits, IndexSet, Table};
use beton_storage::{Dataset, SplitRegion};
use clap::Subcommand;

/// What `beton split` does.
#[derive(Subcommand)]
pub enum Action {
    /// List the splits: name, rows, share of the dataset, stored bytes; and the room left.
    List {
        /// The .beton file.
        file: PathBuf,
    },
    /// Add (or replace) split NAME: the rows a predicate or SELECT matches.
    Add {
        /// The .beton file.
        file: PathBuf,
        /// Split name (letters, digits, _ - . : =).
        name: String,
        /// Which rows: a predicate (`label < 5`) or `SELECT ... FROM samples WHERE ...`.
        sql: String,
    },
    /// Partition the rows at random into named splits, e.g. `train=0.8 val=0.1 test=0.1`.
    Random {
        /// The .beton file.
        file: PathBuf,
        /// NAME=FRACTION pairs; fractions sum to at most 1 (the rest is left out).
        #[arg(required = true, value_name = "NAME=FRACTION")]
        parts: Vec<String>,
        /// Seed of the shuffle: the same seed gives the same splits.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Only partition the rows this predicate or SELECT matches.
        #[arg(long = "where", value_name = "SQL")]
        filter: Option<String>,
        /// Keep the proportions of this column's values in every part (e.g. --stratify label).
        #[arg(long, value_name = "COLUMN")]
        stratify: Option<String>,
    },
    /// Remove splits.
    Remove {
        /// The .beton file.
        file: PathBuf,
        /// Split names.
        #[arg(required = true)]
        names: Vec<String>,
    },
}

/// Runs `action`; returns what to print.
pub fn run(action: &Action) -> Result<String> {
    match action {
        Action::List { file } => list(file),
        Action::Add { file, name, sql } => {
            let ds = crate::open::open(file, &[])?;
            let set = select_indices(&Table::new(&ds), sql)?;
            drop(ds);
            splits::save(file, None, [(name.as_str(), &set)])?;
            Ok(format!("split '{name}': {} rows\n", set.len()))
        }
        Action::Random { file, parts, seed, filter, stratify } => {
            random(file, parts, *seed, filter.as_deref(), stratify.as_deref())
        }
        Action::Remove { file, names } => {
            splits::remove(file, None, names.iter().map(String::as_str))?;
            Ok(format!("removed {}\n", names.join(", ")))
        }
    }
}

/// The splits of a file, for `list` and `info`.
pub struct SplitSummary {
    /// (name, rows, stored bytes) of every split.
    pub splits: Vec<(String, u64, u64)>,
    /// Payload bytes one slot can hold.
    pub room: u64,
    /// Payload bytes the splits take.
    pub used: u64,
}

/// The splits of `ds`.
pub fn summary(ds: &Dataset) -> Result<SplitSummary> {
    let raw = ds.splits()?;
    let decoded = splits::all(ds)?;
    let rows = decoded.iter().map(|(n, s)| (n.clone(), s.len() as u64, raw[n].len() as u64)).collect();
    let region = SplitRegion::of(ds);
    let entries = raw.iter().map(|(n, b)| 1 + n.len() as u64 + 8 + b.len() as u64).sum::<u64>();
    let used = if raw.is_empty() { 0 } else { 4 + entries };
    Ok(SplitSummary { splits: rows, room: region.capacity(), used })
}

fn list(file: &Path) -> Result<String> {
    let ds = crate::open::open(file, &[])?;
    let SplitSummary { splits: rows, room: capacity, used } = summary(&ds)?;
    let n = ds.num_samples().max(1);
    let mut out = String::new();
    if rows.is_empty() {
        writeln!(out, "no splits")?;
    } else {
        let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
        writeln!(out, "{:width$}  {:>12}  {:>7}  {:>10}", "name", "rows", "share", "bytes")?;
        for (name, count, bytes) in &rows {
            let share = 100.0 * *count as f64 / n as f64;
            writeln!(out, "{name:width$}  {count:>12}  {share:>6.1}%  {bytes:>10}")?;
        }
    }
    writeln!(out, "room: {used} of {capacity} bytes used")?;
    Ok(out)
}

fn random(
    file: &Path,
    parts: &[String],
    seed: u64,
    filter: Option<&str>,
    stratify: Option<&str>,
) -> Result<String> {
    let mut names = Vec::new();
    let mut fractions = Vec::new();
    for p in parts {
        let (name, fraction) = p.split_once('=').with_context(|| format!("'{p}': expected NAME=FRACTION"))?;
        let fraction: f64 =
            fraction.parse().with_context(|| format!("'{p}': '{fraction}' is not a fraction like 0.8"))?;
        if !(0.0..=1.0).contains(&fraction) {
            bail!("'{p}': {fraction} is not a fraction in [0, 1]");
        }
        if names.contains(&name) {
            bail!("'{name}' is named twice");
        }
        names.push(name);
        fractions.push(fraction);
    }
    let ds = crate::open::open(file, &[])?;
    let table = Table::new(&ds);
    let rows = match filter {
        Some(sql) => select_indices(&table, sql)?,
        None => IndexSet::all(ds.num_samples()),
    };
    let sets = match stratify {
        None => rows.split(&fractions, seed)?,
        Some(column) => {
            let keys = table.column(column)?;
            let keys = arrow_select::take::take(
                keys.as_ref(),
                &arrow_array::UInt64Array::from(rows.as_slice().to_vec()),
                None,
            )?;
            let keys =
                arrow_row::RowConverter::new(vec![arrow_row::SortField::new(keys.data_type().clone())])?
                    .convert_columns(&[keys])?;
            let keys: Vec<_> = keys.iter().collect();
            rows.stratified_split(&keys, &fractions, seed)?
        }
    };
    drop(table);
    drop(ds);
    splits::save(file, None, names.iter().copied().zip(&sets))?;
    let mut out = String::new();
    for (name, set) in names.iter().zip(&sets) {
        writeln!(out, "split '{name}': {} rows", set.len())?;
    }
    Ok(out)
}
