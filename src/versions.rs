//! `beton import`, `append`, `log`, `tag` and `restore`: dataset directories and their versions
//! (docs/FORMAT.md §13). The work is in `beton_query::versioned`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use beton_query::versioned::{Manifest, VersionRef, VersionedDataset};

/// What to do with a dataset directory.
#[derive(clap::Subcommand)]
pub enum Action {
    /// Make DIR a dataset whose version 1 is FILE (hard-linked, never re-encoded; its splits move
    /// into the manifest).
    Import {
        /// The dataset directory to create.
        dir: PathBuf,
        /// The .beton file.
        file: PathBuf,
    },
    /// Add the rows of a .beton file as a new version (its fields must include the dataset's).
    Append {
        /// The dataset directory.
        dir: PathBuf,
        /// The .beton file to add.
        file: PathBuf,
        /// A message for the log.
        #[arg(short, long, default_value = "")]
        message: String,
    },
    /// List the versions: number, time, operation, rows, message, tags.
    Log {
        /// The dataset directory.
        dir: PathBuf,
        /// Print JSON (the manifests) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Name a version (the latest by default); tagged versions are kept by cleanup.
    Tag {
        /// The dataset directory.
        dir: PathBuf,
        /// The tag.
        name: String,
        /// The version to tag.
        #[arg(long)]
        version: Option<u64>,
    },
    /// Make an older version the latest again, as a new version.
    Restore {
        /// The dataset directory.
        dir: PathBuf,
        /// The version to restore.
        version: u64,
    },
}

impl Action {
    /// The subcommand's name, for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Import { .. } => "import",
            Action::Append { .. } => "append",
            Action::Log { .. } => "log",
            Action::Tag { .. } => "tag",
            Action::Restore { .. } => "restore",
        }
    }
}

/// Runs `action`; returns what to print.
pub fn run(action: &Action) -> Result<String> {
    match action {
        Action::Import { dir, file } => {
            let v = VersionedDataset::import(dir, file)?;
            Ok(format!(
                "{}: version {} imported from {} ({} rows, {} splits)\n",
                dir.display(),
                v.version(),
                file.display(),
                v.num_rows(),
                v.manifest().splits.len()
            ))
        }
        Action::Append { dir, file, message } => {
            let v = open(dir, VersionRef::Latest)?.append_file(file, message)?;
            Ok(format!("{}: version {}, {} rows\n", dir.display(), v.version(), v.num_rows()))
        }
        Action::Log { dir, json } => log(dir, *json),
        Action::Tag { dir, name, version } => {
            let v = open(dir, version.map_or(VersionRef::Latest, VersionRef::Number))?;
            v.tag(name)?;
            Ok(format!("{}: tag '{name}' names version {}\n", dir.display(), v.version()))
        }
        Action::Restore { dir, version } => {
            let v = open(dir, VersionRef::Latest)?.restore(*version)?;
            Ok(format!(
                "{}: version {} restores version {version} ({} rows)\n",
                dir.display(),
                v.version(),
                v.num_rows()
            ))
        }
    }
}

fn open(dir: &Path, at: VersionRef) -> Result<VersionedDataset> {
    if dir.is_file() {
        bail!(
            "{} is a .beton file, not a dataset directory; make one with `beton import DIR {}`",
            dir.display(),
            dir.display()
        );
    }
    Ok(VersionedDataset::open(dir, at)?)
}

fn log(dir: &Path, json: bool) -> Result<String> {
    let v = open(dir, VersionRef::Latest)?;
    let versions = v.versions()?;
    if json {
        return Ok(serde_json::to_string_pretty(&versions)? + "\n");
    }
    let tags = v.tags()?;
    let mut out = String::new();
    for m in versions.iter().rev() {
        let names: Vec<&str> =
            tags.iter().filter(|(_, &t)| t == m.version).map(|(n, _)| n.as_str()).collect();
        let _ = write!(
            out,
            "version {:<4} {}  {:<12} {:>10} rows",
            m.version,
            time(m),
            m.operation.name(),
            m.num_rows()
        );
        if !names.is_empty() {
            let _ = write!(out, "  [{}]", names.join(", "));
        }
        let detail = serde_json::to_value(&m.operation).ok().and_then(|d| {
            let fields: Vec<String> = d
                .as_object()?
                .iter()
                .filter(|(k, _)| *k != "kind")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            (!fields.is_empty()).then(|| fields.join(" "))
        });
        if let Some(detail) = detail {
            let _ = write!(out, "  {detail}");
        }
        if !m.message.is_empty() {
            let _ = write!(out, "  \"{}\"", m.message);
        }
        out.push('\n');
    }
    Ok(out)
}

/// Commit time as `YYYY-MM-DD HH:MM:SS` UTC.
fn time(m: &Manifest) -> String {
    let secs = m.timestamp_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}
