//! `beton gallery FILE [SQL]`: a self-contained HTML page (`--out`) and/or a PNG contact sheet
//! (`--png`) of the rows a query selects, grouped by a column, with per-column summaries; and
//! the contact sheet of `beton show --grid`. The work is in `beton_query::gallery`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use beton_query::gallery::{diff_gallery, DiffRows, Gallery, GalleryOptions, Selection};
use beton_query::Table;

use crate::versions::version_or_branch;

/// `beton gallery`'s arguments.
#[derive(clap::Args)]
pub struct GalleryArgs {
    /// The .beton file or dataset directory.
    file: PathBuf,
    /// The rows to show: a bare predicate (`label = 3`) or `SELECT index, ... FROM samples ...`
    /// (its order and its columns, as captions); default every row.
    sql: Option<String>,
    /// Write the gallery as one self-contained HTML page here (thumbnails inline, no network).
    #[arg(long, value_name = "PAGE.html")]
    out: Option<PathBuf>,
    /// Write a PNG contact sheet here (thumbnails labelled with their index).
    #[arg(long, value_name = "SHEET.png")]
    png: Option<PathBuf>,
    /// Group by this column (e.g. label).
    #[arg(long, value_name = "COLUMN")]
    by: Option<String>,
    /// Rows shown per group, spread evenly over it.
    #[arg(long, default_value_t = 8)]
    n: usize,
    /// Caption columns under each thumbnail, comma-separated (default: the query's columns, or
    /// up to three number/text fields).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    columns: Option<Vec<String>>,
    /// Longest side of a thumbnail, in pixels.
    #[arg(long, default_value_t = 128)]
    size: u32,
    /// The image field shown (default: the first).
    #[arg(long, value_name = "FIELD")]
    image: Option<String>,
    /// Most groups drawn (the others are counted).
    #[arg(long, default_value_t = 50)]
    max_groups: usize,
    /// Leave out the per-column summaries.
    #[arg(long)]
    no_summaries: bool,
    /// The page's title (default: the file's name).
    #[arg(long)]
    title: Option<String>,
    /// The version of a dataset directory (a number or a tag; default the latest).
    #[arg(long)]
    version: Option<String>,
    /// Show what changed from version A to B of a dataset directory (numbers, tags or branch
    /// names): changed rows before beside after, their changed cells highlighted, added and
    /// deleted rows. SQL narrows them (in each version).
    #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with_all = ["version", "by"])]
    diff: Option<Vec<String>>,
    /// Row layout of a foreign custom (type 255) field: NAME=SIZE[:ALIGN].
    #[arg(long, value_name = "NAME=SIZE[:ALIGN]")]
    custom: Vec<String>,
}

/// Runs `beton gallery`; returns what to print.
pub fn run(a: &GalleryArgs) -> Result<String> {
    if a.out.is_none() && a.png.is_none() {
        bail!("say where to write it: --out page.html (a page to open in a browser) and/or --png sheet.png");
    }
    let title = match (&a.title, &a.diff) {
        (Some(t), _) => t.clone(),
        (None, Some(_)) => String::new(), // the diff's: what changed
        (None, None) => file_title(&a.file),
    };
    let options = GalleryOptions {
        by: a.by.clone(),
        per_group: a.n,
        columns: a.columns.clone(),
        size: a.size,
        image: a.image.clone(),
        summaries: !a.no_summaries,
        max_groups: a.max_groups,
        classes: None,
        title,
    };
    let gallery = match a.diff.as_deref() {
        Some([from, to]) => {
            let (older, newer) =
                (version_or_branch(&a.file, Some(from))?, version_or_branch(&a.file, Some(to))?);
            let rows = a.sql.as_deref().map_or(DiffRows::All, DiffRows::Sql);
            diff_gallery(&older, &newer, (from.clone(), to.clone()), rows, &options, &|_, _| {})?
        }
        _ => with_table(&a.file, a.version.as_deref(), &a.custom, |table, classes| {
            let selection = match &a.sql {
                Some(sql) => Selection::of_sql(table, sql)?,
                None => Selection::all(table),
            };
            build(table, &selection, &GalleryOptions { classes, ..options.clone() })
        })?,
    };
    let mut out = String::new();
    let groups = match &gallery.by {
        Some(by) => format!(" in {} groups of {by}", gallery.groups.len() as u64 + gallery.hidden_groups.0),
        None => String::new(),
    };
    let what = format!("{} thumbnails of {} rows{groups}", gallery.num_tiles(), gallery.matched);
    if let Some(path) = &a.out {
        let html = gallery.to_html(true);
        write_atomically(path, html.as_bytes())?;
        out.push_str(&format!(
            "wrote {}: {what} ({})\n",
            path.display(),
            crate::output::human(html.len() as u64)
        ));
    }
    if let Some(path) = &a.png {
        let png = gallery.to_png()?;
        write_atomically(path, &png)?;
        out.push_str(&format!(
            "wrote {}: {what} ({})\n",
            path.display(),
            crate::output::human(png.len() as u64)
        ));
    }
    Ok(out)
}

/// The contact sheet of `rows` of `file` (`beton show --grid`): each thumbnail labelled with its
/// index and first caption.
pub fn grid(
    file: &Path,
    version: Option<&str>,
    custom: &[String],
    rows: &[u64],
    field: Option<&str>,
    out: &Path,
) -> Result<String> {
    let title = file_title(file);
    let gallery = with_table(file, version, custom, |table, classes| {
        let options = GalleryOptions {
            per_group: rows.len().max(1),
            size: 160,
            image: field.map(String::from),
            summaries: false,
            classes,
            title: title.clone(),
            ..GalleryOptions::default()
        };
        build(table, &Selection::of_rows(rows.to_vec()), &options)
    })?;
    if gallery.image_field.is_none() {
        bail!("--grid draws images, and {} has no image field", file.display());
    }
    let png = gallery.to_png()?;
    write_atomically(out, &png)?;
    Ok(format!(
        "wrote {}: {} thumbnails ({})\n",
        out.display(),
        gallery.num_tiles(),
        crate::output::human(png.len() as u64)
    ))
}

/// A file's name, as a page title.
pub(crate) fn file_title(file: &Path) -> String {
    file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into())
}

/// Runs `f` on the table of `file` (a version of it, for a dataset directory) with its class
/// names.
pub(crate) fn with_table<T>(
    file: &Path,
    version: Option<&str>,
    custom: &[String],
    f: impl FnOnce(&Table<'_>, Option<Vec<String>>) -> Result<T>,
) -> Result<T> {
    if crate::versions::is_dataset(file) {
        let v = beton_query::versioned::VersionedDataset::open(file, crate::versions::version_ref(version))?;
        let view = v.view()?;
        return f(&view.table()?, v.manifest().classes.clone());
    }
    crate::versions::file_version(file, version)?;
    let ds = crate::open::open_for_query(file, custom)?;
    let classes = ds.classes().map_err(|e| crate::open::name_file(file, e))?;
    f(&Table::new(&ds), classes)
}

/// Builds the gallery with a progress bar of the thumbnails made.
pub(crate) fn build(table: &Table<'_>, selection: &Selection, options: &GalleryOptions) -> Result<Gallery> {
    let bar = crate::progress::bar(0, "thumbnails");
    let moved = bar.clone();
    let gallery = Gallery::build(table, selection, options, &move |done, total| {
        moved.set_length(total);
        moved.set_position(done);
    });
    bar.finish_and_clear();
    Ok(gallery?)
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed into place: the
/// destination is never half-written.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().with_context(|| format!("{} is not a file name", path.display()))?;
    let temp = dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let written = std::fs::write(&temp, bytes).and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(anyhow::Error::new(e).context(format!("writing {}", path.display())));
    }
    Ok(())
}
