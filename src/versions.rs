//! `beton import`, `concat`, `append`, `update`, `delete`, `add-column`, `drop-column`, `log`, `diff`,
//! `tag`, `restore`, `compact`, `cleanup`, `export`, and `info` on a directory: dataset
//! directories and their versions (docs/FORMAT.md §13). The work is in `beton_query::versioned`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use beton_query::versioned::{ExportOptions, ImageFolderOptions, Manifest, VersionRef, VersionedDataset};
use beton_query::SqlEdits;

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
    /// Make DIR a dataset of the rows of SOURCES in order: .beton files (hard-linked) or dataset
    /// directories (their latest versions, exported once), as one version (version 1) however
    /// many sources.
    Concat {
        /// The dataset directory to create.
        dir: PathBuf,
        /// .beton files or dataset directories.
        #[arg(required = true)]
        sources: Vec<PathBuf>,
        /// A message for the log.
        #[arg(long, short, default_value = "")]
        message: String,
    },
    /// Add rows as a new version: a .beton file's (its fields must include the dataset's), or
    /// an ImageFolder's (DIR/CLASS/IMAGE), labelled by class name (new classes added at the
    /// end of the dataset's), with each image's path when the dataset has a `path` field.
    Append {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// The .beton file or ImageFolder to add.
        file: PathBuf,
        /// A message for the log.
        #[arg(short, long, default_value = "")]
        message: String,
        /// How an ImageFolder's images are written (as write-imagefolder's flags).
        #[command(flatten)]
        encode: crate::encode::EncodeArgs,
    },
    /// List the class names (label k names class k), or edit them as a new version: add names
    /// at the end (--add), rename one (--rename OLD=NEW).
    Classes {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// A class name to add at the end; repeat for several.
        #[arg(long)]
        add: Vec<String>,
        /// OLD=NEW: rename class OLD.
        #[arg(long, value_name = "OLD=NEW", conflicts_with = "add")]
        rename: Option<String>,
        /// The version to list (a number or a tag; default the latest).
        #[arg(long, conflicts_with_all = ["add", "rename"])]
        version: Option<String>,
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
        /// The branch whose versions to list (default main).
        #[arg(long, conflicts_with = "graph")]
        branch: Option<String>,
        /// Every branch's versions, newest first, one column per branch, merges drawn.
        #[arg(long, conflicts_with = "json")]
        graph: bool,
    },
    /// Start a branch (at the latest version of --from, or at --version of it); `-d` deletes
    /// one instead (its versions go with the next cleanup).
    Branch {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch's name.
        name: String,
        /// The branch to start from.
        #[arg(long, default_value = "main", conflicts_with = "delete")]
        from: String,
        /// The version of --from to start at (default its latest).
        #[arg(long, conflicts_with = "delete")]
        version: Option<u64>,
        /// Delete the branch.
        #[arg(short, long)]
        delete: bool,
    },
    /// List the branches: name, latest version, where each started.
    Branches {
        /// The dataset directory.
        dir: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Merge a branch's latest version into another branch (main by default), cell by cell;
    /// conflicts are listed and nothing is committed unless --strategy settles them.
    Merge {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to merge in.
        source: String,
        /// The branch to merge into.
        #[arg(long, default_value = "main")]
        into: String,
        /// fail (list conflicts, commit nothing), ours or theirs.
        #[arg(long, default_value = "fail")]
        strategy: String,
        /// A message for the log.
        #[arg(short, long, default_value = "")]
        message: String,
        /// Print JSON (the report, or the conflicts).
        #[arg(long)]
        json: bool,
    },
    /// Name a version (the latest by default); tagged versions are kept by cleanup. `-d`
    /// deletes the tag instead (the version it named can then be cleaned up).
    Tag {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// The tag.
        name: String,
        /// The version to tag.
        #[arg(long, conflicts_with = "delete")]
        version: Option<u64>,
        /// Delete the tag.
        #[arg(short, long)]
        delete: bool,
    },
    /// Make an older version the latest again, as a new version.
    Restore {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// The version to restore.
        version: u64,
    },
    /// Set fields to SQL expressions (`--set label=3 --set "caption='ok'"`) on the rows a
    /// predicate picks (all without --where), as a new version.
    Update {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// FIELD=SQL expression; repeat for several fields.
        #[arg(long = "set", value_name = "FIELD=EXPR", required = true)]
        set: Vec<String>,
        /// The rows to change: a SQL predicate.
        #[arg(long = "where")]
        predicate: Option<String>,
        /// A message for the log.
        #[arg(short, long, default_value = "")]
        message: String,
    },
    /// Delete the rows a SQL predicate picks, as a new version.
    Delete {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// The predicate.
        predicate: String,
        /// A message for the log.
        #[arg(short, long, default_value = "")]
        message: String,
    },
    /// Add a field computed by a SQL expression over each row, as a new version.
    AddColumn {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// The new field's name.
        name: String,
        /// The SQL expression (its type decides the field's: int, float, bool, text).
        expr: String,
        /// A message for the log.
        #[arg(short, long, default_value = "")]
        message: String,
    },
    /// Remove a field from the schema, as a new version (older versions keep it).
    DropColumn {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// The field.
        name: String,
        /// A message for the log.
        #[arg(short, long, default_value = "")]
        message: String,
    },
    /// Show what changed between two versions: rows added and deleted, cells changed per column.
    Diff {
        /// The dataset directory.
        dir: PathBuf,
        /// The older version (number, tag or branch; default: the newer one's parent).
        from: Option<String>,
        /// The newer version (number, tag or branch; default: the latest).
        to: Option<String>,
        /// Print JSON with every row id.
        #[arg(long)]
        json: bool,
    },
    /// Fold data files, deletions and column files into one data file, as a new version.
    Compact {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// Encoding threads (0: all cores).
        #[arg(long, default_value_t = 0)]
        workers: usize,
        /// A message for the log.
        #[arg(short, long, default_value = "")]
        message: String,
    },
    /// Remove old versions (tagged ones are kept) and every file no kept version references.
    Cleanup {
        /// The dataset directory.
        dir: PathBuf,
        /// How many of the newest versions to keep.
        #[arg(long, default_value_t = 1)]
        keep: usize,
        /// Leave files younger than this (a writer may be about to commit them).
        #[arg(long, default_value_t = 3600.0)]
        grace_seconds: f64,
    },
    /// Write a version's rows (all, or --where) as one standalone .beton file FFCV loads.
    Export {
        /// The dataset directory.
        dir: PathBuf,
        /// The branch to work on (default main).
        #[arg(long, value_name = "NAME")]
        branch: Option<String>,
        /// The .beton file to write.
        out: PathBuf,
        /// The rows: a SQL predicate.
        #[arg(long = "where")]
        predicate: Option<String>,
        /// The version (number or tag; default the latest).
        #[arg(long)]
        version: Option<String>,
    },
}

/// True for a dataset directory.
pub fn is_dataset(path: &Path) -> bool {
    VersionedDataset::is_dataset_dir(path)
}

/// `--version` on a plain `.beton` file: it has version 1 only.
pub fn file_version(file: &Path, version: Option<&str>) -> Result<()> {
    match version {
        None | Some("1") => Ok(()),
        Some(v) => bail!("{} is a .beton file, which has version 1 only (asked for {v})", file.display()),
    }
}

/// Parses `--version`: a number or a tag (default the latest).
pub fn version_ref(v: Option<&str>) -> VersionRef {
    match v {
        None => VersionRef::Latest,
        Some(s) => s.parse().map(VersionRef::Number).unwrap_or_else(|_| VersionRef::Tag(s.to_string())),
    }
}

/// `beton info DIR`: the version, its data files, pending deletions, column files and splits.
///
/// Fails (exit 1) when a file the version names is missing: the version cannot be read.
pub fn info(dir: &Path, version: Option<&str>, json: bool) -> Result<String> {
    let v = VersionedDataset::open(dir, version_ref(version))?;
    let m = v.manifest();
    let missing = v.missing_files()?;
    if !missing.is_empty() {
        bail!(
            "{}: version {} cannot be read: {} of its files {} missing: {} (`beton verify {}` checks every version)",
            dir.display(),
            m.version,
            missing.len(),
            if missing.len() == 1 { "is" } else { "are" },
            missing.join(", "),
            dir.display()
        );
    }
    if json {
        return Ok(serde_json::to_string_pretty(m)? + "\n");
    }
    let latest = v.versions()?.last().map_or(m.version, |l| l.version);
    let mut out = String::new();
    let _ = writeln!(out, "{} (dataset directory)", dir.display());
    let _ = writeln!(
        out,
        "  version {} of {latest}, {} rows, {} data files, made by {}{}",
        m.version,
        m.num_rows(),
        m.fragments.len(),
        m.operation.name(),
        if m.message.is_empty() { String::new() } else { format!(" (\"{}\")", m.message) }
    );
    let fields: Vec<String> = m.schema.iter().map(|f| format!("{} {}", f.name, f.type_name)).collect();
    let _ = writeln!(out, "  fields: {}", fields.join(", "));
    for f in &m.fragments {
        let deleted = f.deletions.as_ref().map_or(0, |d| d.count);
        let _ = write!(out, "  data file {}: {} ({} rows", f.id, f.data_file, f.num_rows);
        if deleted > 0 {
            let _ = write!(out, ", {deleted} deleted pending compaction");
        }
        let edited: Vec<&str> = f.columns.iter().flat_map(|c| c.fields.iter().map(String::as_str)).collect();
        if !edited.is_empty() {
            let _ = write!(out, "; column files for {}", edited.join(", "));
        }
        let _ = writeln!(out, ")");
    }
    for (name, s) in &m.splits {
        let _ = writeln!(out, "  split {name}: {} rows", s.count);
    }
    if let Some(classes) = &m.classes {
        let _ = writeln!(out, "  {}", crate::output::classes_line(classes));
    }
    let tags = v.tags()?;
    if !tags.is_empty() {
        let tags: Vec<String> = tags.iter().map(|(n, v)| format!("{n} = {v}")).collect();
        let _ = writeln!(out, "  tags: {}", tags.join(", "));
    }
    Ok(out)
}

/// `beton verify DIR`: every version of a dataset directory ([`beton_query::versioned::verify_dir`]);
/// fails listing every problem.
pub fn verify(dir: &Path, decode_images: bool) -> Result<String> {
    let r = beton_query::versioned::verify_dir(dir, decode_images, &|_| {})?;
    if !r.problems.is_empty() {
        let mut why = format!(
            "{}: {} problem{} in {} versions:",
            dir.display(),
            r.problems.len(),
            if r.problems.len() == 1 { "" } else { "s" },
            r.versions
        );
        for p in &r.problems {
            let _ = write!(why, "\n  {p}");
        }
        bail!(why);
    }
    let decoded =
        if decode_images { format!(", {} images decoded", r.images_decoded) } else { String::new() };
    Ok(format!(
        "ok: {}: {} versions, {} data files ({} samples, {} allocations checked{decoded}), {} other files\n",
        dir.display(),
        r.versions,
        r.data_files,
        r.samples,
        r.allocations,
        r.other_files
    ))
}

impl Action {
    /// The subcommand's name, for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Import { .. } => "import",
            Action::Concat { .. } => "concat",
            Action::Append { .. } => "append",
            Action::Classes { .. } => "classes",
            Action::Log { .. } => "log",
            Action::Branch { .. } => "branch",
            Action::Branches { .. } => "branches",
            Action::Merge { .. } => "merge",
            Action::Tag { .. } => "tag",
            Action::Restore { .. } => "restore",
            Action::Update { .. } => "update",
            Action::Delete { .. } => "delete",
            Action::AddColumn { .. } => "add-column",
            Action::DropColumn { .. } => "drop-column",
            Action::Diff { .. } => "diff",
            Action::Compact { .. } => "compact",
            Action::Cleanup { .. } => "cleanup",
            Action::Export { .. } => "export",
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
        Action::Concat { dir, sources, message } => {
            // The total comes with the first report: the sources' rows, known once they are open.
            let bar = crate::progress::bar(0, "rows");
            let options = ExportOptions {
                progress: Some(crate::progress::writer_callback(&bar)),
                ..Default::default()
            };
            let v = VersionedDataset::concat(dir, sources, message, &options);
            bar.finish_and_clear();
            let v = v?;
            Ok(format!(
                "{}: version {}, {} rows from {} sources\n",
                dir.display(),
                v.version(),
                v.num_rows(),
                sources.len()
            ))
        }
        Action::Append { dir, branch, file, message, encode } => {
            let latest = open_on(dir, branch.as_deref(), VersionRef::Latest)?;
            let dir = &place(dir, branch.as_deref());
            if !file.is_dir() {
                let v = latest.append_file(file, message)?;
                return Ok(format!("{}: version {}, {} rows\n", dir.display(), v.version(), v.num_rows()));
            }
            let bar = crate::progress::bar(0, "images");
            let options = ImageFolderOptions {
                image: encode.image()?,
                writer: encode.writer(&bar),
                ..Default::default()
            };
            let appended = latest.append_imagefolder(file, &options, message);
            bar.finish_and_clear();
            let (v, report) = appended?;
            let mut out = format!(
                "{}: version {}, {} rows ({} images from {})\n",
                dir.display(),
                v.version(),
                v.num_rows(),
                report.write.num_samples,
                file.display()
            );
            if !report.added_classes.is_empty() {
                writeln!(out, "new classes: {}", report.added_classes.join(", "))?;
            }
            if !report.write.skipped.is_empty() {
                writeln!(out, "skipped {} unreadable images:", report.write.skipped.len())?;
                for (_, why) in &report.write.skipped {
                    writeln!(out, "  {why}")?;
                }
            }
            Ok(out)
        }
        Action::Classes { dir, branch, add, rename, version, message } => {
            classes(dir, branch.as_deref(), add, rename.as_deref(), version, message)
        }
        Action::Log { dir, json, branch, graph: false } => log(dir, branch.as_deref(), *json),
        // branches.rs runs these (main.rs asks it first).
        Action::Log { graph: true, .. }
        | Action::Branch { .. }
        | Action::Branches { .. }
        | Action::Merge { .. } => {
            bail!("beton {}: not a command of versions.rs", action.name())
        }
        Action::Tag { dir, branch, name, delete: true, .. } => {
            let was = open_on(dir, branch.as_deref(), VersionRef::Latest)?.delete_tag(name)?;
            Ok(format!("{}: tag '{name}' deleted (it named version {was})\n", dir.display()))
        }
        Action::Tag { dir, branch, name, version, .. } => {
            let v = open_on(dir, branch.as_deref(), version.map_or(VersionRef::Latest, VersionRef::Number))?;
            let dir = &place(dir, branch.as_deref());
            v.tag(name)?;
            Ok(format!("{}: tag '{name}' names version {}\n", dir.display(), v.version()))
        }
        Action::Restore { dir, branch, version } => {
            let v = open_on(dir, branch.as_deref(), VersionRef::Latest)?.restore(*version)?;
            let dir = &place(dir, branch.as_deref());
            Ok(format!(
                "{}: version {} restores version {version} ({} rows)\n",
                dir.display(),
                v.version(),
                v.num_rows()
            ))
        }
        Action::Update { dir, branch, set, predicate, message } => {
            let set = set
                .iter()
                .map(|s| match s.split_once('=') {
                    Some((f, e)) if !f.trim().is_empty() => Ok((f.trim().to_string(), e.to_string())),
                    _ => bail!("--set {s:?}: expected FIELD=EXPR"),
                })
                .collect::<Result<Vec<_>>>()?;
            let v = open_on(dir, branch.as_deref(), VersionRef::Latest)?.update(
                predicate.as_deref(),
                &set,
                message,
            )?;
            let dir = &place(dir, branch.as_deref());
            let rows = match &v.manifest().operation {
                beton_query::versioned::Operation::Update { rows, .. } => *rows,
                _ => 0,
            };
            Ok(format!("{}: version {}, {rows} rows updated\n", dir.display(), v.version()))
        }
        Action::Delete { dir, branch, predicate, message } => {
            let before = open_on(dir, branch.as_deref(), VersionRef::Latest)?;
            let dir = &place(dir, branch.as_deref());
            let v = before.delete_where(predicate, message)?;
            Ok(format!(
                "{}: version {}, {} rows deleted, {} left\n",
                dir.display(),
                v.version(),
                before.num_rows() - v.num_rows(),
                v.num_rows()
            ))
        }
        Action::AddColumn { dir, branch, name, expr, message } => {
            let v =
                open_on(dir, branch.as_deref(), VersionRef::Latest)?.add_column_sql(name, expr, message)?;
            let dir = &place(dir, branch.as_deref());
            Ok(format!("{}: version {}, column '{name}' added\n", dir.display(), v.version()))
        }
        Action::DropColumn { dir, branch, name, message } => {
            let v = open_on(dir, branch.as_deref(), VersionRef::Latest)?.drop_column(name, message)?;
            let dir = &place(dir, branch.as_deref());
            Ok(format!("{}: version {}, column '{name}' dropped\n", dir.display(), v.version()))
        }
        Action::Diff { dir, from, to, json } => diff(dir, from.as_deref(), to.as_deref(), *json),
        Action::Compact { dir, branch, workers, message } => {
            let v = open_on(dir, branch.as_deref(), VersionRef::Latest)?;
            let dir = &place(dir, branch.as_deref());
            let bar = crate::progress::bar(v.num_rows(), "rows");
            let options = ExportOptions {
                num_threads: *workers,
                progress: Some(crate::progress::writer_callback(&bar)),
            };
            let v = v.compact(&options, message);
            bar.finish_and_clear();
            let v = v?;
            Ok(format!(
                "{}: version {}, {} rows in one data file\n",
                dir.display(),
                v.version(),
                v.num_rows()
            ))
        }
        Action::Cleanup { dir, keep, grace_seconds } => {
            let grace = std::time::Duration::try_from_secs_f64(*grace_seconds)
                .map_err(|e| anyhow::anyhow!("--grace-seconds {grace_seconds}: {e}"))?;
            let r = open(dir, VersionRef::Latest)?.cleanup(*keep, grace)?;
            Ok(format!(
                "{}: removed {} versions and {} files ({} bytes)\n",
                dir.display(),
                r.versions.len(),
                r.files.len(),
                r.bytes
            ))
        }
        Action::Export { dir, branch, out, predicate, version } => {
            let v = open_on(dir, branch.as_deref(), version_ref(version.as_deref()))?;
            let rows = match predicate {
                Some(p) => Some(beton_query::select_indices(&v.view()?.table()?, p)?),
                None => None,
            };
            let bar = crate::progress::bar(rows.as_ref().map_or(v.num_rows(), |r| r.len() as u64), "rows");
            let options = ExportOptions {
                progress: Some(crate::progress::writer_callback(&bar)),
                ..Default::default()
            };
            let copied = v.export(out, rows.as_ref(), &options);
            bar.finish_and_clear();
            let copied = copied?;
            let mut text =
                format!("{}: {} rows of version {}\n", out.display(), copied.report.num_samples, v.version());
            for f in &copied.filled {
                let _ = writeln!(text, "  {}", filled_line(f));
            }
            Ok(text)
        }
    }
}

/// A field's NULLs an export wrote as a filler, as a line: the field, how many, the first rows.
fn filled_line(f: &beton_query::copy::Filled) -> String {
    let shown: Vec<String> = f.rows.iter().take(8).map(u64::to_string).collect();
    let more = if f.rows.len() > 8 { ", ..." } else { "" };
    format!(
        "field '{}' is NULL in {} row{} (a .beton file holds a value in every row): written as {} in rows {}{more}",
        f.field,
        f.rows.len(),
        if f.rows.len() == 1 { "" } else { "s" },
        f.with,
        shown.join(", ")
    )
}

fn diff(dir: &Path, from: Option<&str>, to: Option<&str>, json: bool) -> Result<String> {
    let b = version_or_branch(dir, to)?;
    let a = match (from, b.manifest().parent) {
        (Some(f), _) => version_or_branch(dir, Some(f))?,
        (None, Some(p)) => b.open_at(VersionRef::Number(p))?,
        (None, None) => b.clone(),
    };
    let d = beton_query::versioned::diff(&a, &b)?;
    if json {
        let value = serde_json::json!({
            "from": d.from, "to": d.to, "added": d.added, "deleted": d.deleted,
            "added_columns": d.added_columns, "dropped_columns": d.dropped_columns, "changed": d.changed,
        });
        return Ok(serde_json::to_string_pretty(&value)? + "\n");
    }
    let mut out = format!("version {} -> {}\n", d.from, d.to);
    let _ = writeln!(out, "  rows added: {}, deleted: {}", d.added.len(), d.deleted.len());
    for c in &d.added_columns {
        let _ = writeln!(out, "  column added: {c}");
    }
    for c in &d.dropped_columns {
        let _ = writeln!(out, "  column dropped: {c}");
    }
    for (c, rows) in &d.changed {
        let head: Vec<String> = rows.iter().take(8).map(u64::to_string).collect();
        let more = if rows.len() > 8 { ", ..." } else { "" };
        let _ = writeln!(out, "  {c}: {} rows changed (row ids {}{more})", rows.len(), head.join(", "));
    }
    Ok(out)
}

/// The version `at` names: a number or tag (as `--version`), or a branch's name (its latest;
/// a tag of the same name wins); main's latest for `None`.
pub fn version_or_branch(dir: &Path, at: Option<&str>) -> Result<VersionedDataset> {
    let latest = open(dir, VersionRef::Latest)?;
    let r = version_ref(at);
    if let VersionRef::Tag(name) = &r {
        if !latest.tags()?.contains_key(name) {
            return match latest.on_branch(name, VersionRef::Latest) {
                Ok(v) => Ok(v),
                Err(e) => {
                    bail!("{name:?} is neither a version, a tag nor a branch of {}: {e}", dir.display())
                }
            };
        }
    }
    Ok(latest.open_at(r)?)
}

/// The version `at` of branch `branch` (main when `None`) of `dir`.
pub(crate) fn open_on(dir: &Path, branch: Option<&str>, at: VersionRef) -> Result<VersionedDataset> {
    match branch {
        None | Some("main") => open(dir, at),
        Some(name) => {
            open(dir, VersionRef::Latest)?;
            Ok(VersionedDataset::open_branch(dir, name, at)?)
        }
    }
}

/// Where an edit went, as its report says it: `DIR`, or `DIR (branch NAME)`.
fn place(dir: &Path, branch: Option<&str>) -> PathBuf {
    match branch {
        None | Some("main") => dir.to_path_buf(),
        Some(name) => PathBuf::from(format!("{} (branch {name})", dir.display())),
    }
}

pub(crate) fn open(dir: &Path, at: VersionRef) -> Result<VersionedDataset> {
    if dir.is_file() {
        bail!(
            "{} is a .beton file, not a dataset directory; make one with `beton import DIR {}`",
            dir.display(),
            dir.display()
        );
    }
    Ok(VersionedDataset::open(dir, at)?)
}

/// `beton classes DIR`: the class names, one a line with its label; or an edit of them.
fn classes(
    dir: &Path,
    branch: Option<&str>,
    add: &[String],
    rename: Option<&str>,
    version: &Option<String>,
    message: &str,
) -> Result<String> {
    let v = open_on(dir, branch, version_ref(version.as_deref()))?;
    let dir = &place(dir, branch);
    let v = match (add.is_empty(), rename) {
        (true, None) => v,
        (false, _) => {
            let mut names = v.manifest().classes.clone().unwrap_or_default();
            names.extend(add.iter().cloned());
            v.set_classes(&names, message)?
        }
        (true, Some(pair)) => match pair.split_once('=') {
            Some((old, new)) => v.rename_class(old, new, message)?,
            None => bail!("--rename {pair:?}: expected OLD=NEW"),
        },
    };
    let Some(names) = &v.manifest().classes else {
        return Ok(format!("{}: version {} has no class names\n", dir.display(), v.version()));
    };
    let mut out = format!("{}: version {}, {} classes\n", dir.display(), v.version(), names.len());
    for (label, name) in names.iter().enumerate() {
        let _ = writeln!(out, "{label:>6}  {name}");
    }
    Ok(out)
}

fn log(dir: &Path, branch: Option<&str>, json: bool) -> Result<String> {
    let v = open(dir, VersionRef::Latest)?;
    let v = match branch {
        Some(b) => v.on_branch(b, VersionRef::Latest)?,
        None => v,
    };
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
pub(crate) fn time(m: &Manifest) -> String {
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
