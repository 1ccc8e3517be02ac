//! `beton dups FILE --by image|COLUMN` and `beton nearest FILE INDEX`: near-duplicate groups
//! and a row's nearest neighbours, printed and shown as a gallery (one line per group, or the
//! neighbours in order, each thumbnail captioned with its distance). The search is
//! `beton_query`'s (`near_pairs`, `image_pairs`, `groups`, `nearest`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, UInt64Array};
use beton_query::gallery::{GalleryOptions, Selection};
use beton_query::Table;

use crate::gallery::{build, file_title, with_table, write_atomically};

/// pHash bits two images may differ by and still be near-duplicates, by default (as Python's
/// `IMAGE_THRESHOLD`: re-encoded or resized photos stay within 4, different ones 14 apart).
const IMAGE_THRESHOLD: u32 = 8;

/// `beton dups`' arguments.
#[derive(clap::Args)]
pub struct DupsArgs {
    /// The .beton file or dataset directory.
    file: PathBuf,
    /// An image field (perceptual hash) or a vector column.
    #[arg(long, default_value = "image")]
    by: String,
    /// Most distance within a group: pHash bits for images (default 8; 0: the same pixels), a
    /// distance by --metric for vectors (required).
    #[arg(long)]
    threshold: Option<f64>,
    /// The vectors' distance: l2 or cosine.
    #[arg(long, default_value = "l2")]
    metric: String,
    /// Search only the rows this predicate selects.
    #[arg(long = "where", value_name = "SQL")]
    where_: Option<String>,
    /// Write a gallery of the groups (one line each) as an HTML page here.
    #[arg(long, value_name = "PAGE.html")]
    out: Option<PathBuf>,
    /// Write the gallery as a PNG contact sheet here.
    #[arg(long, value_name = "SHEET.png")]
    png: Option<PathBuf>,
    /// Print one JSON object a row ({"group", "index", "distance"}).
    #[arg(long)]
    json: bool,
    /// The version of a dataset directory (a number or a tag; default the latest).
    #[arg(long)]
    version: Option<String>,
}

/// `beton nearest`'s arguments.
#[derive(clap::Args)]
pub struct NearestArgs {
    /// The .beton file or dataset directory.
    file: PathBuf,
    /// The row whose neighbours to find.
    index: u64,
    /// The vector column (default: the only one).
    #[arg(long)]
    column: Option<String>,
    /// How many neighbours (the row itself left out).
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// l2, cosine or dot.
    #[arg(long, default_value = "l2")]
    metric: String,
    /// Only rows this predicate selects.
    #[arg(long = "where", value_name = "SQL")]
    where_: Option<String>,
    /// Write a gallery of the row and its neighbours as an HTML page here.
    #[arg(long, value_name = "PAGE.html")]
    out: Option<PathBuf>,
    /// Print one JSON object a row ({"rank", "index", "distance"}).
    #[arg(long)]
    json: bool,
    /// The version of a dataset directory (a number or a tag; default the latest).
    #[arg(long)]
    version: Option<String>,
}

/// Whether `name` is an image field of `table`.
fn is_image(table: &Table<'_>, name: &str) -> bool {
    table.fields().into_iter().any(|(n, ty)| n == name && ty.is_image())
}

/// Writes the gallery of `batch` (an `index` column, a grouping column `by`, `distance`).
fn gallery(
    table: &Table<'_>,
    classes: Option<Vec<String>>,
    batch: RecordBatch,
    by: &str,
    title: String,
    out: Option<&PathBuf>,
    png: Option<&PathBuf>,
) -> Result<String> {
    let mut said = String::new();
    if out.is_none() && png.is_none() {
        return Ok(said);
    }
    let options = GalleryOptions {
        by: Some(by.to_string()),
        per_group: 16,
        columns: Some(vec!["distance".into()]),
        summaries: false,
        classes,
        title,
        ..GalleryOptions::default()
    };
    let g = build(table, &Selection::of_result(batch)?, &options)?;
    if g.image_field.is_none() {
        bail!("a gallery draws images, and the dataset has no image field (leave out --out/--png)");
    }
    if let Some(path) = out {
        let html = g.to_html(true);
        write_atomically(path, html.as_bytes())?;
        said.push_str(&format!("wrote {}: {} thumbnails\n", path.display(), g.num_tiles()));
    }
    if let Some(path) = png {
        let sheet = g.to_png()?;
        write_atomically(path, &sheet)?;
        said.push_str(&format!("wrote {}: {} thumbnails\n", path.display(), g.num_tiles()));
    }
    Ok(said)
}

/// Runs `beton dups`; returns what to print.
pub fn dups(a: &DupsArgs) -> Result<String> {
    let title = format!("near-duplicates in {}", file_title(&a.file));
    with_table(&a.file, a.version.as_deref(), &[], |table, classes| {
        let rows = a.where_.as_deref().map(|w| beton_query::select_indices(table, w)).transpose()?;
        let image = is_image(table, &a.by);
        let (pairs, within) = if image {
            let t = a.threshold.unwrap_or(f64::from(IMAGE_THRESHOLD));
            if t.fract() != 0.0 || !(0.0..=64.0).contains(&t) {
                bail!("--threshold for an image is a number of pHash bits from 0 to 64, not {t}");
            }
            (beton_query::image_pairs(table, &a.by, t as u32, rows.as_ref())?, format!("{t} pHash bits"))
        } else {
            let Some(t) = a.threshold else {
                bail!(
                    "'{}' is not an image field: a search by a vector column needs --threshold (a {} distance)",
                    a.by,
                    a.metric
                );
            };
            (
                beton_query::near_pairs(table, &a.by, t, &a.metric, rows.as_ref())?,
                format!("{t} by {}", a.metric),
            )
        };
        let groups = beton_query::groups(&pairs);
        let mut out = String::new();
        if a.json {
            for (g, i, d) in &groups {
                out.push_str(&serde_json::json!({"group": g, "index": i, "distance": d}).to_string());
                out.push('\n');
            }
        } else {
            let n = groups.last().map_or(0, |g| g.0 + 1);
            out.push_str(&format!(
                "{n} groups of near-duplicates, {} rows, by '{}' within {within}; deleting all but the first of each would drop {}\n",
                groups.len(),
                a.by,
                groups.len() - n
            ));
            let mut shown = 0;
            for g in 0..n.min(20) {
                let members: Vec<String> =
                    groups.iter().filter(|m| m.0 == g).map(|m| format!("{} ({})", m.1, trim(m.2))).collect();
                shown += members.len();
                out.push_str(&format!("  group {g}: {}\n", members.join(", ")));
            }
            if shown < groups.len() {
                out.push_str(&format!("  ... {} more groups (--json lists them all)\n", n - 20));
            }
        }
        let batch = RecordBatch::try_from_iter([
            ("group", Arc::new(Int64Array::from_iter_values(groups.iter().map(|g| g.0 as i64))) as ArrayRef),
            ("index", Arc::new(UInt64Array::from_iter_values(groups.iter().map(|g| g.1))) as ArrayRef),
            ("distance", Arc::new(Float64Array::from_iter_values(groups.iter().map(|g| g.2))) as ArrayRef),
        ])?;
        if !groups.is_empty() {
            out.push_str(&gallery(
                table,
                classes,
                batch,
                "group",
                title.clone(),
                a.out.as_ref(),
                a.png.as_ref(),
            )?);
        } else if a.out.is_some() || a.png.is_some() {
            out.push_str("no groups: no gallery written\n");
        }
        Ok(out)
    })
}

/// A distance as printed: whole numbers without decimals, else 4 significant digits.
fn trim(d: f64) -> String {
    if d.fract() == 0.0 {
        format!("{d:.0}")
    } else {
        format!("{d:.4}")
    }
}

/// Runs `beton nearest`; returns what to print.
pub fn nearest(a: &NearestArgs) -> Result<String> {
    let title = format!("nearest to row {} in {}", a.index, file_title(&a.file));
    with_table(&a.file, a.version.as_deref(), &[], |table, classes| {
        let vectors: Vec<String> = table
            .fields()
            .into_iter()
            .filter(|(_, ty)| {
                ty.kind()
                    .columns()
                    .iter()
                    .any(|c| matches!(c.source, beton_storage::field::ColumnSource::Vector(..)))
            })
            .map(|(n, _)| n)
            .collect();
        let column = match (&a.column, vectors.as_slice()) {
            (Some(c), _) => c.clone(),
            (None, [one]) => one.clone(),
            (None, []) => bail!("the dataset has no vector column (a 1-D NDArrayField of numbers); `beton dups --by image` finds similar images"),
            (None, many) => bail!("say which vector column: --column {}", many.join(" or --column ")),
        };
        if a.index >= table.num_rows() {
            bail!("row {} is past the end: the dataset has {} rows", a.index, table.num_rows());
        }
        let list = table.column(&column)?;
        let list = arrow_array::cast::AsArray::as_fixed_size_list_opt(list.as_ref())
            .ok_or_else(|| anyhow::anyhow!("'{column}' is not a vector column"))?
            .clone();
        if arrow_array::Array::is_null(&list, a.index as usize) {
            bail!("row {} has no vector in '{column}' (NULL)", a.index);
        }
        let row = list.value(a.index as usize);
        let cast = arrow_cast::cast(&row, &arrow_schema::DataType::Float64)?;
        let q: Vec<f64> =
            arrow_array::cast::AsArray::as_primitive::<arrow_array::types::Float64Type>(cast.as_ref())
                .values()
                .to_vec();
        let rows = a.where_.as_deref().map(|w| beton_query::select_indices(table, w)).transpose()?;
        let found = beton_query::nearest(table, &column, &[q], a.k + 1, rows.as_ref(), &a.metric)?;
        let found: Vec<_> = found.into_iter().filter(|n| n.index != a.index).take(a.k).collect();
        let mut out = String::new();
        for (rank, n) in found.iter().enumerate() {
            if a.json {
                out.push_str(
                    &serde_json::json!({"rank": rank + 1, "index": n.index, "distance": n.distance})
                        .to_string(),
                );
                out.push('\n');
            } else {
                if rank == 0 {
                    out.push_str(&format!("nearest to row {} by {} of '{column}':\n", a.index, a.metric));
                }
                out.push_str(&format!(
                    "  {:>3}. row {:>8}  distance {}\n",
                    rank + 1,
                    n.index,
                    trim(n.distance)
                ));
            }
        }
        // The row itself first (distance 0), then its neighbours: one line in the gallery.
        let mut index = vec![a.index];
        let mut distance = vec![0.0];
        index.extend(found.iter().map(|n| n.index));
        distance.extend(found.iter().map(|n| n.distance));
        let batch = RecordBatch::try_from_iter([
            ("query", Arc::new(Int64Array::from(vec![0i64; index.len()])) as ArrayRef),
            ("index", Arc::new(UInt64Array::from(index)) as ArrayRef),
            ("distance", Arc::new(Float64Array::from(distance)) as ArrayRef),
        ])?;
        out.push_str(&gallery(table, classes, batch, "query", title.clone(), a.out.as_ref(), None)?);
        Ok(out)
    })
}
