//! Galleries: what a query's rows look like. A [`Gallery`] is a selection of a table's rows
//! (an [`IndexSet`], a predicate or a `SELECT` with an `index` column) grouped by a column, a
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

use arrow_array::{Array, ArrayRef, RecordBatch, UInt64Array};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use beton_storage::{FieldType, Pixels, Value};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::index_set::IndexSet;
use crate::sql::Selected;
use crate::Table;

mod html;
mod key;
mod sheet;
mod summary;

pub use html::{index_set_html, table_html};
pub use summary::{ColumnSummary, SummaryKind};

use key::Key;

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

/// The rows a gallery shows, in order, and what chose them.
#[derive(Debug, Clone)]
pub struct Selection {
    rows: Vec<u64>,
    /// A query's result, one row per entry of `rows` (captions and grouping may come from it).
    result: Option<RecordBatch>,
    /// The order means something (a SELECT's, rows given one by one): each group shows its
    /// first rows; otherwise rows spread evenly over it.
    ordered: bool,
    /// The query text, or a description of the set.
    described: String,
}

impl Selection {
    /// Every row of `table`.
    pub fn all(table: &Table<'_>) -> Selection {
        Selection {
            rows: (0..table.num_rows()).collect(),
            result: None,
            ordered: false,
            described: String::new(),
        }
    }

    /// These rows, in this order (repeats allowed).
    pub fn of_rows(rows: Vec<u64>) -> Selection {
        Selection { rows, result: None, ordered: true, described: String::new() }
    }

    /// The rows of `set` (table rows), ascending.
    pub fn of_set(set: &IndexSet) -> Selection {
        Selection { rows: set.as_slice().to_vec(), result: None, ordered: false, described: String::new() }
    }

    /// The rows `sql` selects: a bare predicate's matches, or a `SELECT`'s rows in its order
    /// (it must select the `index` column), its other columns becoming captions.
    ///
    /// # Errors
    /// SQL errors (with their position); [`Error::InvalidArgument`] for a `SELECT` without an
    /// `index` column.
    pub fn of_sql(table: &Table<'_>, sql: &str) -> Result<Selection> {
        let mut selection = match crate::sql::select_rows(table, sql)? {
            Selected::Rows(set) => Selection::of_set(&set),
            Selected::Result(batch) => Selection::of_result(batch)?,
        };
        selection.described = sql.trim().to_string();
        Ok(selection)
    }

    /// A query's result (rows in its order): its `index` column (UInt64, or any integer
    /// column without nulls or negatives) names the rows; its other columns become captions.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] without an `index` column, or with one that holds nulls or
    /// negative values.
    pub fn of_result(batch: RecordBatch) -> Result<Selection> {
        let bad = |why: String| Error::InvalidArgument { what: "rows to show".into(), why };
        let Some(index) = batch.column_by_name("index") else {
            let columns: Vec<&str> = batch.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
            return Err(bad(format!(
                "a query's result shows rows only with an `index` column (SELECT index, ... FROM samples ...); \
                 its columns are: {}",
                columns.join(", ")
            )));
        };
        let index = arrow_cast::cast(index, &arrow_schema::DataType::UInt64)
            .map_err(|e| bad(format!("the `index` column is not of row numbers: {e}")))?;
        let index = index
            .as_any()
            .downcast_ref::<UInt64Array>()
            .ok_or_else(|| bad("the `index` column is not of row numbers".into()))?;
        if index.null_count() > 0 {
            return Err(bad("the `index` column has nulls".into()));
        }
        Ok(Selection {
            rows: index.values().to_vec(),
            result: Some(batch),
            ordered: true,
            described: String::new(),
        })
    }

    /// The rows, in order.
    pub fn rows(&self) -> &[u64] {
        &self.rows
    }

    /// `column` (one value per table row) at the selected rows, in selection order: the column
    /// itself when the selection is every row in order.
    fn gather(&self, column: ArrayRef) -> Result<ArrayRef> {
        let every_row =
            self.rows.len() == column.len() && self.rows.iter().enumerate().all(|(i, &r)| i as u64 == r);
        if every_row {
            return Ok(column);
        }
        let rows = UInt64Array::from(self.rows.clone());
        Ok(arrow_select::take::take(column.as_ref(), &rows, None)?)
    }
}

/// One thumbnail: a row, its captions and its picture (or why there is none).
#[derive(Debug, Clone)]
pub struct Tile {
    /// The table row (`index`).
    pub index: u64,
    /// `(column, value)` captions.
    pub captions: Vec<(String, String)>,
    /// The thumbnail, or why it could not be made (a corrupt image is shown as such, not
    /// fatal); `None` when the table has no image field.
    pub image: Option<std::result::Result<Pixels, String>>,
}

/// The rows of one value of the grouping column.
#[derive(Debug, Clone)]
pub struct Group {
    /// The value as shown (`None` for an ungrouped gallery).
    pub key: Option<String>,
    /// Rows of the selection in this group.
    pub count: u64,
    /// The rows shown.
    pub tiles: Vec<Tile>,
}

/// A built gallery; render it with [`Gallery::to_html`] or [`Gallery::to_png`].
#[derive(Debug, Clone)]
pub struct Gallery {
    /// The page's title.
    pub title: String,
    /// What chose the rows (a query), or empty.
    pub query: String,
    /// Rows in the table.
    pub num_rows: u64,
    /// Rows in the selection.
    pub matched: u64,
    /// The image field shown.
    pub image_field: Option<String>,
    /// The grouping column.
    pub by: Option<String>,
    /// The groups drawn, in key order.
    pub groups: Vec<Group>,
    /// Groups not drawn (over `max_groups`), and their rows.
    pub hidden_groups: (u64, u64),
    /// Per-column summaries over the selection (empty without `summaries`).
    pub summaries: Vec<ColumnSummary>,
    /// The thumbnail size asked for.
    pub size: u32,
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
        if options.per_group == 0 {
            return Err(invalid("rows per group", "must be at least 1".into()));
        }
        if options.size == 0 {
            return Err(invalid("thumbnail size", "must be at least 1 pixel".into()));
        }
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
                tiles.push(Tile { index: selection.rows[p], captions, image: thumbnails.next().flatten() });
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

/// Longest caption text shown, in characters.
const MAX_CAPTION: usize = 60;

/// One Arrow cell as text.
fn format_cell(array: &dyn Array, i: usize) -> String {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type};
    use arrow_schema::DataType;
    if array.is_valid(i) {
        match array.data_type() {
            DataType::Float64 => return short_float(array.as_primitive::<Float64Type>().value(i)),
            DataType::Float32 => return short_float(f64::from(array.as_primitive::<Float32Type>().value(i))),
            _ => {}
        }
    }
    let options = FormatOptions::default().with_null("NULL");
    match ArrayFormatter::try_new(array, &options) {
        Ok(f) => cut(&f.value(i).to_string()),
        Err(_) => String::from("?"),
    }
}

/// One field value as caption text.
fn value_text(value: &Value<'_>) -> String {
    match value {
        Value::Int(v) => v.to_string(),
        Value::Float(v) => short_float(*v),
        Value::Bool(v) => v.to_string(),
        Value::Text(s) | Value::Json(s) => cut(s),
        Value::Image(img) => format!("{}x{} {}", img.width, img.height, img.mode.name()),
        Value::Bytes(b) | Value::NDArray(b) | Value::Array(b) | Value::Custom(b) => {
            format!("{} bytes", b.len())
        }
    }
}

/// A float as a caption: 6 significant digits without trailing zeros (`0.123457`, `2.5`,
/// `1.5e-7`), as `%g` prints; a caption is read, not parsed back (`ds[i]` gives the value).
fn short_float(v: f64) -> String {
    if !v.is_finite() {
        return (if v.is_nan() {
            "NaN"
        } else if v > 0.0 {
            "inf"
        } else {
            "-inf"
        })
        .to_string();
    }
    if v == 0.0 {
        return "0".to_string();
    }
    const DIGITS: i32 = 6;
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    // The exponent after rounding to DIGITS significant digits (999999.7 is 1e6).
    let sci = format!("{:.*e}", (DIGITS - 1) as usize, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..DIGITS).contains(&exp) {
        let decimals = (DIGITS - 1 - exp).max(0) as usize;
        trim(&format!("{v:.decimals$}"))
    } else {
        format!("{}e{exp}", trim(mantissa))
    }
}

/// `text` cut to [`MAX_CAPTION`] characters.
fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_CAPTION) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A `label` value with its class name, when there is one.
fn with_class(column: &str, text: String, classes: Option<&[String]>) -> String {
    let name = (column == "label")
        .then_some(classes)
        .flatten()
        .and_then(|c| text.parse::<usize>().ok().and_then(|k| c.get(k)));
    match name {
        Some(name) => format!("{text} ({name})"),
        None => text,
    }
}

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

    #[test]
    fn class_names_go_with_labels_only() {
        let classes = vec!["cat".to_string(), "dog".to_string()];
        assert_eq!(with_class("label", "1".into(), Some(&classes)), "1 (dog)");
        assert_eq!(with_class("label", "7".into(), Some(&classes)), "7");
        assert_eq!(with_class("other", "1".into(), Some(&classes)), "1");
    }

    #[test]
    fn float_captions_have_six_significant_digits() {
        let cases = [
            (0.1 + 0.2, "0.3"),
            (0.123456789, "0.123457"),
            (2.5, "2.5"),
            (3.0, "3"),
            (-1234.56789, "-1234.57"),
            (999999.7, "1e6"),
            (123456789.0, "1.23457e8"),
            (0.00001234567, "1.23457e-5"),
            (0.0001234567, "0.000123457"),
            (1.5e-7, "1.5e-7"),
            (0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (v, want) in cases {
            assert_eq!(short_float(v), want, "{v}");
        }
        let column = arrow_array::Float64Array::from(vec![Some(1.0 / 3.0), None]);
        assert_eq!(format_cell(&column, 0), "0.333333");
        assert_eq!(format_cell(&column, 1), "NULL");
    }

    #[test]
    fn long_captions_are_cut_on_a_character() {
        let long = "é".repeat(100);
        let c = cut(&long);
        assert_eq!(c.chars().count(), MAX_CAPTION + 1);
        assert!(c.ends_with('…'));
    }
}
