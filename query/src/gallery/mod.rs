//! Galleries: what a query's rows look like. A [`Gallery`] is a selection of a table's rows
//! (an [`IndexSet`](crate::IndexSet), a predicate or a `SELECT` with an `index` column) grouped by a column, a
//! few rows of each group shown as thumbnails with their index and captions, and a summary of
//! every column over the whole selection (counts of categorical values, histograms of numeric
//! ones, image sizes). It renders as one self-contained HTML page or notebook fragment
//! ([`Gallery::to_html`], thumbnails inlined, no network) and as a PNG contact sheet
//! ([`Gallery::to_png`]).
//!
//! Large selections are never shown whole: a group shows `per_group` rows spread evenly over
//! it (first, last and between, in selection order), at most `max_groups` groups are drawn, and
//! the summaries are computed on the columns (a million rows cost milliseconds), so the page's
//! size depends on what is shown, not on the selection.

use std::collections::HashMap;

use arrow_array::ArrayRef;
use beton_storage::{FieldType, Pixels, Value};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::Table;

mod diff;
mod html;
mod key;
mod model;
mod selection;
mod sheet;
mod summary;
mod text;

pub use diff::{diff_gallery, diff_rows, DiffRow, DiffRows};
pub use html::{index_set_html, table_html};
pub use model::{Before, Change, ChangeKind, Gallery, Group, Tile};
pub use selection::Selection;
pub use summary::{ColumnSummary, SummaryKind};

use key::Key;
use text::{format_cell, value_text, with_class};

/// How to build a gallery.
#[derive(Debug, Clone)]
pub struct GalleryOptions {
    /// Group by this column (any column of the table or of the query's result); `None`: one
    /// group.
    pub by: Option<String>,
    /// Rows shown per group, spread evenly over it.
    pub per_group: usize,
    /// Caption columns under each thumbnail; `None`: the query's own columns for a `SELECT`,
    /// else up to three scalar fields (numbers, booleans, text).
    pub columns: Option<Vec<String>>,
    /// Longest side of a thumbnail, in pixels.
    pub size: u32,
    /// The image field shown; `None`: the first one (a table without one shows captions only).
    pub image: Option<String>,
    /// Summarise every column over the selection.
    pub summaries: bool,
    /// Most groups drawn (the others are counted, and listed in the grouping column's summary).
    pub max_groups: usize,
    /// Class names: a `label` value `k` is shown as `k (classes[k])`.
    pub classes: Option<Vec<String>>,
    /// The page's title.
    pub title: String,
}

impl Default for GalleryOptions {
    fn default() -> Self {
        GalleryOptions {
            by: None,
            per_group: 8,
            columns: None,
            size: 128,
            image: None,
            summaries: true,
            max_groups: 50,
            classes: None,
            title: String::from("beton gallery"),
        }
    }
}

impl GalleryOptions {
    /// Fails with [`Error::InvalidArgument`] for `per_group` or `size` 0.
    fn check(&self) -> Result<()> {
        let invalid =
            |what: &str, why: &str| Err(Error::InvalidArgument { what: what.into(), why: why.into() });
        match (self.per_group, self.size) {
            (0, _) => invalid("rows per group", "must be at least 1"),
            (_, 0) => invalid("thumbnail size", "must be at least 1 pixel"),
            _ => Ok(()),
        }
    }
}

impl Gallery {
    /// Builds the gallery of `selection` over `table`; `progress(done, total)` is called as
    /// thumbnails are made (from worker threads).
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`] for a grouping or caption column the table (and the query's
    /// result) lacks; [`Error::InvalidArgument`] for an image field that is not one, a row past
    /// the end, `per_group` 0 or `size` 0; storage errors reading columns.
    pub fn build(
        table: &Table<'_>,
        selection: &Selection,
        options: &GalleryOptions,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<Gallery> {
        let invalid = |what: &str, why: String| Error::InvalidArgument { what: what.into(), why };
        options.check()?;
        let num_rows = table.num_rows();
        if let Some(&bad) = selection.rows.iter().find(|&&r| r >= num_rows) {
            return Err(invalid(
                "rows to show",
                format!("row {bad} is past the end of the table ({num_rows} rows)"),
            ));
        }
        let fields = table.fields();
        let image = image_field(&fields, options.image.as_deref())?;
        let columns = Columns { table, selection, classes: options.classes.as_deref() };

        // Groups: each row's key, then the rows shown of each, spread evenly over it.
        let (groups, hidden) = match &options.by {
            None => {
                let n = selection.rows.len();
                let shown = match selection.ordered {
                    true => (0..n.min(options.per_group)).collect(),
                    false => pick(0..n, n, options.per_group),
                };
                (vec![(None, n as u64, shown)], (0, 0))
            }
            Some(by) => columns.groups(by, options)?,
        };

        // Captions and thumbnails of the rows shown.
        let caption_columns = match &options.columns {
            Some(c) => c.clone(),
            None => default_captions(&fields, selection, options.by.as_deref()),
        };
        for c in &caption_columns {
            columns.check(c)?;
        }
        let shown: Vec<usize> =
            groups.iter().flat_map(|(_, _, positions)| positions.iter().copied()).collect();
        if shown.len() > MAX_TILES {
            return Err(invalid(
                "rows per group",
                format!(
                    "{} per group over {} groups would draw {} thumbnails; at most {MAX_TILES} (lower n or max_groups)",
                    options.per_group,
                    groups.len(),
                    shown.len()
                ),
            ));
        }
        let total = shown.len() as u64;
        let done = std::sync::atomic::AtomicU64::new(0);
        let thumbnails: Vec<Option<std::result::Result<Pixels, String>>> = shown
            .par_iter()
            .map(|&p| {
                let thumb = image
                    .as_ref()
                    .map(|(name, ty)| thumbnail(table, selection.rows[p], name, ty, options.size));
                progress(done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1, total);
                thumb
            })
            .collect();
        let mut thumbnails = thumbnails.into_iter();
        let mut drawn = Vec::with_capacity(groups.len());
        for (key, count, positions) in groups {
            let mut tiles = Vec::with_capacity(positions.len());
            for p in positions {
                // A value that cannot be read is captioned with why (the tile still shows).
                let captions = caption_columns
                    .iter()
                    .map(|c| {
                        (c.clone(), columns.caption(c, p).unwrap_or_else(|e| format!("unreadable: {e}")))
                    })
                    .collect();
                tiles.push(Tile {
                    index: selection.rows[p],
                    captions,
                    image: thumbnails.next().flatten(),
                    change: None,
                });
            }
            drawn.push(Group { key, count, tiles });
        }
        let summaries = match options.summaries {
            true => summary::summarise(table, selection, options.classes.as_deref())?,
            false => Vec::new(),
        };
        Ok(Gallery {
            title: options.title.clone(),
            query: selection.described.clone(),
            num_rows,
            matched: selection.rows.len() as u64,
            image_field: image.map(|(n, _)| n),
            by: options.by.clone(),
            groups: drawn,
            hidden_groups: hidden,
            summaries,
            size: options.size,
            sides: None,
        })
    }

    /// The gallery as HTML: a whole page (`page`: doctype, head, inline style) or a fragment
    /// for a notebook cell; thumbnails are inlined as JPEG `data:` URIs.
    pub fn to_html(&self, page: bool) -> String {
        html::render(self, page)
    }

    /// A dataset's card for a notebook: `facts` (`(name, value)` rows) above this gallery's
    /// thumbnails in one strip.
    pub fn to_html_card(&self, facts: &[(String, String)]) -> String {
        html::render_card(self, facts)
    }

    /// The gallery as a PNG contact sheet: a title line, then per group a heading and its
    /// thumbnails, each labelled with its index and first caption.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a sheet too large to encode.
    pub fn to_png(&self) -> Result<Vec<u8>> {
        sheet::render(self)
    }

    /// Number of tiles drawn.
    pub fn num_tiles(&self) -> usize {
        self.groups.iter().map(|g| g.tiles.len()).sum()
    }
}

/// The image field to show: `asked` (which must be one), else the first.
fn image_field(fields: &[(String, FieldType)], asked: Option<&str>) -> Result<Option<(String, FieldType)>> {
    let images: Vec<&(String, FieldType)> = fields.iter().filter(|(_, ty)| ty.is_image()).collect();
    match asked {
        None => Ok(images.first().map(|&f| f.clone())),
        Some(name) => match fields.iter().find(|(n, _)| n == name) {
            Some(f) if f.1.is_image() => Ok(Some(f.clone())),
            found => {
                let names: Vec<&str> = images.iter().map(|(n, _)| n.as_str()).collect();
                Err(Error::InvalidArgument {
                    what: "image field".into(),
                    why: format!(
                        "'{name}' {}; the image fields are: {}",
                        if found.is_some() { "is not an image field" } else { "is not a field" },
                        if names.is_empty() { "(none)".into() } else { names.join(", ") }
                    ),
                })
            }
        },
    }
}

/// Default captions: a query's own columns (but `index`), else up to three scalar fields.
fn default_captions(fields: &[(String, FieldType)], selection: &Selection, by: Option<&str>) -> Vec<String> {
    if let Some(result) = &selection.result {
        return result
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|n| n != "index" && Some(n.as_str()) != by)
            .collect();
    }
    fields
        .iter()
        .filter(|(n, ty)| {
            Some(n.as_str()) != by
                && matches!(ty, FieldType::Int | FieldType::Float | FieldType::Bool | FieldType::Text)
        })
        .map(|(n, _)| n.clone())
        .take(3)
        .collect()
}

/// `want` positions of `0..len` spread evenly over `range` (its first, its last and between).
fn pick(range: std::ops::Range<usize>, len: usize, want: usize) -> Vec<usize> {
    let n = want.min(len);
    let positions: Vec<usize> = range.collect();
    match n {
        0 => Vec::new(),
        1 => vec![positions[0]],
        _ => (0..n).map(|k| positions[k * (len - 1) / (n - 1)]).collect(),
    }
}

/// The thumbnail of `row`'s image, or why there is none.
fn thumbnail(
    table: &Table<'_>,
    row: u64,
    field: &str,
    ty: &FieldType,
    size: u32,
) -> std::result::Result<Pixels, String> {
    let value = table.value(row, field, ty).map_err(|e| e.to_string())?;
    match value {
        Some(Value::Image(image)) => image.thumbnail(size).map_err(|e| format!("sample {row}: {e}")),
        None => Err(format!("sample {row}: field '{field}' is NULL")),
        Some(_) => Err(format!("sample {row}: field '{field}' holds no image")),
    }
}

/// Where the values of a column come from: the query's result when it has the column, else the
/// table (gathered at the selection's rows).
struct Columns<'t, 'a> {
    table: &'t Table<'a>,
    selection: &'t Selection,
    classes: Option<&'t [String]>,
}

impl Columns<'_, '_> {
    /// Fails with [`Error::NoSuchColumn`] for a column neither the result nor the table has.
    fn check(&self, name: &str) -> Result<()> {
        let in_result = self.selection.result.as_ref().is_some_and(|b| b.column_by_name(name).is_some());
        if in_result || self.table.column_names().contains(&name) {
            return Ok(());
        }
        let mut available: Vec<String> = self.table.column_names().into_iter().map(String::from).collect();
        if let Some(b) = &self.selection.result {
            for f in b.schema_ref().fields() {
                if !available.contains(f.name()) {
                    available.push(f.name().clone());
                }
            }
        }
        Err(Error::NoSuchColumn { name: name.to_string(), available: available.join(", ") })
    }

    /// Column `name`'s values at every selected row, in selection order.
    fn values(&self, name: &str) -> Result<ArrayRef> {
        self.check(name)?;
        if let Some(column) = self.selection.result.as_ref().and_then(|b| b.column_by_name(name)) {
            return Ok(column.clone());
        }
        self.selection.gather(self.table.column(name)?)
    }

    /// One caption: column `name` at selection position `p`, as text (a `label` with its class
    /// name; long text cut).
    fn caption(&self, name: &str, p: usize) -> Result<String> {
        let row = self.selection.rows[p];
        let text = match self.selection.result.as_ref().and_then(|b| b.column_by_name(name)) {
            Some(column) => format_cell(column.as_ref(), p),
            None => match self.table.fields().into_iter().find(|(n, _)| n == name) {
                // A field: its value read from the row (no whole-column gather for 8 captions).
                Some((_, ty)) => match self.table.value(row, name, &ty)? {
                    Some(value) => value_text(&value),
                    None => "NULL".to_string(),
                },
                None => {
                    let column = self.table.column(name)?;
                    format_cell(column.as_ref(), row as usize)
                }
            },
        };
        Ok(with_class(name, text, self.classes))
    }

    /// The groups of column `by` drawn (key, rows in the group, positions shown) and the groups
    /// not drawn (how many, their rows).
    #[allow(clippy::type_complexity)]
    fn groups(
        &self,
        by: &str,
        options: &GalleryOptions,
    ) -> Result<(Vec<(Option<String>, u64, Vec<usize>)>, (u64, u64))> {
        let values = self.values(by)?;
        let keys = key::keys(values.as_ref())?;
        // Each distinct key's group number, in first-seen order, then ordered by key.
        let mut ids: HashMap<&Key, usize> = HashMap::new();
        let mut group_of = Vec::with_capacity(keys.len());
        for k in &keys {
            let next = ids.len();
            group_of.push(*ids.entry(k).or_insert(next));
        }
        let mut counts = vec![0usize; ids.len()];
        for &g in &group_of {
            counts[g] += 1;
        }
        let mut order: Vec<(&Key, usize)> = ids.into_iter().collect();
        order.sort_by(|a, b| a.0.cmp(b.0));
        let drawn: Vec<usize> = order.iter().take(options.max_groups).map(|&(_, g)| g).collect();
        let hidden: Vec<usize> = order.iter().skip(options.max_groups).map(|&(_, g)| g).collect();
        // Positions shown: the k-th of n picks in a group of c rows is its member number
        // k·(c−1)/(n−1); one pass over the rows finds them.
        let mut want: HashMap<usize, (usize, usize, Vec<usize>)> =
            drawn.iter().map(|&g| (g, (0, 0, Vec::new()))).collect();
        for (p, &g) in group_of.iter().enumerate() {
            let Some((seen, k, picked)) = want.get_mut(&g) else { continue };
            let (c, n) = (counts[g], options.per_group.min(counts[g]));
            let target = match (self.selection.ordered, n) {
                (true, _) => *k,
                (false, 0 | 1) => 0,
                (false, _) => *k * (c - 1) / (n - 1),
            };
            if *k < n && *seen == target {
                picked.push(p);
                *k += 1;
            }
            *seen += 1;
        }
        let out = order
            .iter()
            .take(options.max_groups)
            .map(|&(key, g)| {
                let picked = want.remove(&g).map(|w| w.2).unwrap_or_default();
                (Some(with_class(by, key.to_string(), self.classes)), counts[g] as u64, picked)
            })
            .collect();
        let hidden_rows = hidden.iter().map(|&g| counts[g] as u64).sum();
        Ok((out, (hidden.len() as u64, hidden_rows)))
    }
}

/// Most thumbnails one gallery draws (a page of them is tens of megabytes already).
pub const MAX_TILES: usize = 20_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_spread_over_the_group() {
        assert_eq!(pick(0..10, 10, 3), vec![0, 4, 9]);
        assert_eq!(pick(0..3, 3, 8), vec![0, 1, 2]);
        assert_eq!(pick(0..5, 5, 1), vec![0]);
        assert!(pick(0..0, 0, 4).is_empty());
    }
}
