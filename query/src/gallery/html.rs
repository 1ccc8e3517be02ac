//! A gallery as HTML: one self-contained page (inline style, thumbnails as JPEG `data:` URIs,
//! no script, no network) or a fragment for a notebook cell. Every number a reader or a test
//! checks is also an attribute: `data-matched` and `data-rows` on the gallery, `data-key` and
//! `data-count` on each group, `data-index` on each thumbnail, `data-column` on each summary.

use std::fmt::Write as _;

use base64::Engine as _;

use beton_storage::Pixels;

use super::model::{Change, ChangeKind, Gallery, Tile};
use super::summary::{ColumnSummary, SummaryKind};
use super::text::cut;

/// JPEG quality of inlined thumbnails.
const QUALITY: u8 = 85;

/// The style of a gallery (scoped to `.beton-gallery`, so a notebook's own style is untouched).
const STYLE: &str = "\
.beton-gallery{font:13px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1d1d1f}\
.beton-gallery h1{font-size:18px;margin:0 0 4px}\
.beton-gallery h2{font-size:14px;margin:14px 0 6px;border-bottom:1px solid #ddd}\
.beton-gallery h2 span,.beton-gallery h3 small,.beton-gallery .meta{color:#666;font-weight:normal}\
.beton-gallery h3{font-size:13px;margin:0 0 4px}\
.beton-gallery code{background:#f3f3f3;padding:0 3px;border-radius:3px}\
.beton-gallery .grid{display:flex;flex-wrap:wrap;gap:8px}\
.beton-gallery figure{margin:0;display:flex;flex-direction:column;align-items:center}\
.beton-gallery figure .frame{display:flex;align-items:center;justify-content:center;background:#f3f3f3}\
.beton-gallery figure img{display:block}\
.beton-gallery figcaption{font-size:11px;color:#333;text-align:center;word-break:break-all}\
.beton-gallery figcaption b{color:#06c}\
.beton-gallery .broken .frame{background:#fde8e8;color:#a00;font-size:11px;text-align:center}\
.beton-gallery .cols{display:flex;flex-wrap:wrap;gap:12px 24px;margin:6px 0}\
.beton-gallery .col table{border-collapse:collapse;font-size:11px}\
.beton-gallery .col td{padding:0 4px;white-space:nowrap}\
.beton-gallery .col td.n{text-align:right;color:#555}\
.beton-gallery .col .bar{width:80px}\
.beton-gallery .col .bar div{height:9px;background:#4a90d9}\
.beton-gallery .col svg rect{fill:#4a90d9}\
.beton-gallery .col svg text{font-size:9px;fill:#555}\
.beton-gallery .note{color:#666;font-style:italic}\
.beton-gallery .sides{display:flex;gap:6px}\
.beton-gallery .side{display:flex;flex-direction:column;align-items:center;font-size:10px;color:#666}\
.beton-gallery .frame.changed{outline:3px solid #f0a020;outline-offset:-3px}\
.beton-gallery .added .frame{outline:3px solid #2a2;outline-offset:-3px}\
.beton-gallery .deleted .frame{outline:3px solid #c33;outline-offset:-3px;opacity:.6}\
.beton-gallery .badge{display:inline-block;padding:0 4px;border-radius:3px;color:#fff;font-size:10px}\
.beton-gallery .badge.added{background:#2a2}.beton-gallery .badge.deleted{background:#c33}\
.beton-gallery table.cells{border-collapse:collapse;font-size:11px;margin:2px auto 0;text-align:left}\
.beton-gallery table.cells th{color:#666;font-weight:normal;padding:0 4px}\
.beton-gallery table.cells td{padding:0 4px;overflow-wrap:anywhere}\
.beton-gallery table.cells td:first-child{white-space:nowrap;color:#555}\
.beton-gallery table.cells tr.changed td{background:#fff1b8;font-weight:600}";

/// Escapes text for HTML content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A number as short text: integers whole, others with 4 significant digits.
pub(crate) fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
        format!("{v:.digits$}")
    }
}

/// `n` with thousands separators.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The gallery as a page or a fragment.
pub(crate) fn render(g: &Gallery, page: bool) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<div class=\"beton-gallery\" data-matched=\"{}\" data-rows=\"{}\" data-tiles=\"{}\">",
        g.matched,
        g.num_rows,
        g.num_tiles()
    );
    if !page {
        let _ = write!(body, "<style>{STYLE}</style>");
    }
    header(&mut body, g);
    if !g.summaries.is_empty() {
        let _ = write!(body, "<details class=\"summaries\" open><summary>Columns over the {} rows</summary><div class=\"cols\">", count(g.matched));
        for s in &g.summaries {
            summary(&mut body, s);
        }
        body.push_str("</div></details>");
    }
    for group in &g.groups {
        let _ = write!(body, "<section class=\"group\" data-count=\"{}\"", group.count);
        if let Some(key) = &group.key {
            let _ = write!(body, " data-key=\"{}\"", escape(key));
        }
        body.push('>');
        if let (Some(key), Some(by)) = (&group.key, &g.by) {
            let _ = write!(
                body,
                "<h2>{} = {} <span>{} row{} · {} shown</span></h2>",
                escape(by),
                escape(key),
                count(group.count),
                if group.count == 1 { "" } else { "s" },
                group.tiles.len()
            );
        }
        body.push_str("<div class=\"grid\">");
        for tile in &group.tiles {
            match (&tile.change, &g.sides) {
                (Some(change), Some(sides)) => {
                    changed_tile(&mut body, tile, change, sides, g.image_field.as_deref(), g.size)
                }
                _ => self::tile(&mut body, tile, g.size),
            }
        }
        body.push_str("</div></section>");
    }
    if g.hidden_groups.0 > 0 {
        let _ = write!(
            body,
            "<p class=\"note\">{} more group{} ({} rows) not drawn.</p>",
            count(g.hidden_groups.0),
            if g.hidden_groups.0 == 1 { "" } else { "s" },
            count(g.hidden_groups.1)
        );
    }
    if g.matched == 0 {
        body.push_str("<p class=\"note\">No rows to show.</p>");
    }
    body.push_str("</div>");
    if !page {
        return body;
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>body{{margin:16px}}{STYLE}</style></head><body>{body}</body></html>\n",
        escape(&g.title)
    )
}

/// Title and the line saying what is shown.
fn header(out: &mut String, g: &Gallery) {
    let _ = write!(out, "<h1>{}</h1><p class=\"meta\">", escape(&g.title));
    if !g.query.is_empty() {
        let _ = write!(out, "<code>{}</code> · ", escape(&g.query));
    }
    let _ = write!(out, "<b>{}</b> of {} rows", count(g.matched), count(g.num_rows));
    if let Some(by) = &g.by {
        let groups = g.groups.len() as u64 + g.hidden_groups.0;
        let _ = write!(
            out,
            " · by <b>{}</b> ({} group{})",
            escape(by),
            count(groups),
            if groups == 1 { "" } else { "s" }
        );
    }
    let shown = g.num_tiles() as u64;
    if shown < g.matched {
        let _ = write!(out, " · {} shown", count(shown));
    }
    if let Some(image) = &g.image_field {
        let _ = write!(out, " · images: <code>{}</code>", escape(image));
    }
    out.push_str("</p>");
}

/// One thumbnail with its index and captions.
fn tile(out: &mut String, t: &Tile, size: u32) {
    let broken = matches!(t.image, Some(Err(_)));
    let _ = write!(
        out,
        "<figure class=\"tile{}\" data-index=\"{}\" style=\"width:{}px\">",
        if broken { " broken" } else { "" },
        t.index,
        size.max(64)
    );
    frame(out, &t.image, t.index, size, false);
    let _ = write!(out, "<figcaption><b>#{}</b>", t.index);
    for (name, value) in &t.captions {
        let _ = write!(out, "<br>{}: {}", escape(name), escape(value));
    }
    out.push_str("</figcaption></figure>");
}

/// A diff gallery's tile: a changed row's older and newer thumbnails side by side above a
/// table of its captions in both versions, the cells that differ highlighted; an added or a
/// deleted row as one thumbnail with a badge. `sides` names the two versions; the frames are
/// outlined when `image_field` changed.
fn changed_tile(
    out: &mut String,
    t: &Tile,
    change: &Change,
    sides: &(String, String),
    image_field: Option<&str>,
    size: u32,
) {
    let kind = change.kind.name();
    let Some(before) = &change.before else {
        let _ = write!(
            out,
            "<figure class=\"tile {kind}\" data-index=\"{}\" data-row-id=\"{}\" data-change=\"{kind}\" style=\"width:{}px\">",
            t.index,
            change.row_id,
            size.max(64)
        );
        frame(out, &t.image, t.index, size, false);
        let side = if change.kind == ChangeKind::Deleted { &sides.0 } else { &sides.1 };
        let _ = write!(
            out,
            "<figcaption><span class=\"badge {kind}\">{kind}</span> <b>row {}</b> <small>#{} in {}</small>",
            change.row_id,
            t.index,
            escape(side)
        );
        for (name, value) in &t.captions {
            let _ = write!(out, "<br>{}: {}", escape(name), escape(value));
        }
        out.push_str("</figcaption></figure>");
        return;
    };
    let _ = write!(
        out,
        "<figure class=\"tile pair\" data-index=\"{}\" data-before-index=\"{}\" data-row-id=\"{}\" data-change=\"{kind}\" data-changed=\"{}\" style=\"width:{}px\"><div class=\"sides\">",
        t.index,
        before.index,
        change.row_id,
        escape(&change.changed.join(",")),
        (2 * size.max(64) + 6).max(240)
    );
    // The image changed when its field (or one of its columns, `image.width`, ...) did.
    let image_changed = image_field.is_some_and(|f| {
        change.changed.iter().any(|c| c == f || c.strip_prefix(f).is_some_and(|rest| rest.starts_with('.')))
    });
    for (image, index, name) in [(&before.image, before.index, &sides.0), (&t.image, t.index, &sides.1)] {
        out.push_str("<div class=\"side\">");
        frame(out, image, index, size, image_changed);
        let _ = write!(out, "{} · #{index}</div>", escape(name));
    }
    let _ = write!(
        out,
        "</div><figcaption><b>row {}</b><table class=\"cells\"><tr><th></th><th>{}</th><th>{}</th></tr>",
        change.row_id,
        escape(&sides.0),
        escape(&sides.1)
    );
    for ((name, old), (_, new)) in before.captions.iter().zip(&t.captions) {
        let changed = change.changed.contains(name);
        let _ = write!(
            out,
            "<tr{} data-column=\"{}\"><td>{}</td><td>{}</td><td>{}</td></tr>",
            if changed { " class=\"changed\"" } else { "" },
            escape(name),
            escape(name),
            escape(old),
            escape(new)
        );
    }
    out.push_str("</table></figcaption></figure>");
}

/// A `size`-square frame holding a thumbnail (inlined as JPEG), or saying why there is none;
/// nothing for a table without images. `changed` outlines it.
fn frame(
    out: &mut String,
    image: &Option<std::result::Result<Pixels, String>>,
    index: u64,
    size: u32,
    changed: bool,
) {
    let class = if changed { "frame changed" } else { "frame" };
    match image {
        Some(Ok(pixels)) => match beton_storage::image::encode_jpeg(pixels, QUALITY) {
            Ok(jpeg) => {
                let _ = write!(
                    out,
                    "<div class=\"{class}\" style=\"width:{size}px;height:{size}px\"><img src=\"data:image/jpeg;base64,{}\" width=\"{}\" height=\"{}\" alt=\"sample {}\"></div>",
                    base64::engine::general_purpose::STANDARD.encode(jpeg),
                    pixels.width,
                    pixels.height,
                    index
                );
            }
            Err(e) => broken_frame(out, &e.to_string(), size),
        },
        Some(Err(why)) => broken_frame(out, why, size),
        None => {}
    }
}

/// The frame of an image that could not be shown, saying why.
fn broken_frame(out: &mut String, why: &str, size: u32) {
    let _ = write!(
        out,
        "<div class=\"frame\" style=\"width:{size}px;height:{size}px\" title=\"{}\">cannot show this image</div>",
        escape(why)
    );
}

/// One column's summary.
fn summary(out: &mut String, s: &ColumnSummary) {
    let _ = write!(
        out,
        "<div class=\"col\" data-column=\"{}\"><h3>{} <small>{}",
        escape(&s.column),
        escape(&s.column),
        escape(&s.data_type)
    );
    if s.nulls > 0 {
        let _ = write!(out, " · {} null", count(s.nulls));
    }
    match &s.kind {
        SummaryKind::Counts { top, distinct, other } => {
            let _ = write!(out, " · {} distinct</small></h3><table>", count(*distinct));
            let most = top.iter().map(|t| t.1).max().unwrap_or(1).max(*other).max(1);
            let row = |out: &mut String, label: &str, n: u64| {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td class=\"bar\"><div style=\"width:{:.1}%\"></div></td><td class=\"n\">{}</td></tr>",
                    label,
                    n as f64 * 100.0 / most as f64,
                    count(n)
                );
            };
            for (value, n) in top {
                row(out, &escape(value), *n);
            }
            if *other > 0 {
                let rest = distinct - top.len() as u64;
                row(
                    out,
                    &format!("<i>{} other value{}</i>", count(rest), if rest == 1 { "" } else { "s" }),
                    *other,
                );
            }
            out.push_str("</table></div>");
        }
        SummaryKind::Unreadable(why) => {
            let _ = write!(out, "</small></h3><p class=\"note\">cannot read: {}</p></div>", escape(why));
        }
        SummaryKind::Histogram { min, max, mean, bins } => {
            let _ = write!(out, " · mean {}</small></h3>", number(*mean));
            histogram(out, *min, *max, bins);
            out.push_str("</div>");
        }
    }
}

/// A histogram as an inline SVG: one bar per bin (hover: its range and rows), min and max below.
fn histogram(out: &mut String, min: f64, max: f64, bins: &[u64]) {
    let (w, h) = (200.0, 48.0);
    let most = bins.iter().copied().max().unwrap_or(1).max(1) as f64;
    let _ = write!(out, "<svg width=\"{w}\" height=\"{}\" role=\"img\" aria-label=\"histogram\">", h + 12.0);
    let bw = w / bins.len().max(1) as f64;
    let step = (max - min) / bins.len().max(1) as f64;
    for (k, &n) in bins.iter().enumerate() {
        let bh = (n as f64 / most * h).max(if n > 0 { 1.0 } else { 0.0 });
        let (lo, hi) = (min + step * k as f64, min + step * (k + 1) as f64);
        let _ = write!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\"><title>{} to {}: {} rows</title></rect>",
            k as f64 * bw,
            h - bh,
            (bw - 1.0).max(0.5),
            number(lo),
            number(hi),
            count(n)
        );
    }
    let _ = write!(
        out,
        "<text x=\"0\" y=\"{0}\">{1}</text><text x=\"{w}\" y=\"{0}\" text-anchor=\"end\">{2}</text></svg>",
        h + 10.0,
        number(min),
        number(max)
    );
}

/// An index set as a short HTML summary: how many ids, their range and first runs, its
/// fingerprint; the same size for a million ids as for ten.
pub fn index_set_html(set: &crate::IndexSet) -> String {
    // The first RUNS_SHOWN runs of consecutive ids, and how many runs there are.
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut total_runs = 0u64;
    let mut previous: Option<u64> = None;
    for id in set.iter() {
        if previous.is_some_and(|p| p + 1 == id) {
            let listed = total_runs == runs.len() as u64;
            if let Some(last) = runs.last_mut().filter(|_| listed) {
                last.1 = id;
            }
        } else {
            total_runs += 1;
            if runs.len() < RUNS_SHOWN {
                runs.push((id, id));
            }
        }
        previous = Some(id);
    }
    let shown: Vec<String> = runs
        .iter()
        .map(|&(a, b)| if a == b { count(a) } else { format!("{}–{}", count(a), count(b)) })
        .collect();
    let more = if total_runs > RUNS_SHOWN as u64 { ", …" } else { "" };
    let range = match (set.as_slice().first(), set.as_slice().last()) {
        (Some(a), Some(b)) => format!(
            " from {} to {} in {} run{}",
            count(*a),
            count(*b),
            count(total_runs),
            if total_runs == 1 { "" } else { "s" }
        ),
        _ => String::new(),
    };
    format!(
        "<div class=\"beton-gallery beton-index-set\" data-count=\"{}\"><style>{STYLE}</style><p><b>IndexSet</b>: {} id{}{range} · fingerprint <code>{:#018x}</code></p><p class=\"meta\">[{}{more}]</p></div>",
        set.len(),
        count(set.len() as u64),
        if set.len() == 1 { "" } else { "s" },
        set.fingerprint(),
        shown.join(", ")
    )
}

/// Runs of consecutive ids listed by [`index_set_html`].
const RUNS_SHOWN: usize = 12;

/// A dataset's card for a notebook: its facts (`(name, value)` rows: path, rows, version,
/// fields, splits, classes) above a strip of thumbnails.
pub(crate) fn render_card(g: &Gallery, facts: &[(String, String)]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<div class=\"beton-gallery beton-dataset\" data-rows=\"{}\" data-tiles=\"{}\"><style>{STYLE}\
         .beton-gallery table.facts th{{text-align:left;padding:0 12px 0 0;vertical-align:top;color:#666;font-weight:normal}}</style>\
         <h1>{}</h1><table class=\"facts\">",
        g.num_rows,
        g.num_tiles(),
        escape(&g.title)
    );
    for (name, value) in facts {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", escape(name), escape(value));
    }
    out.push_str("</table><div class=\"grid\">");
    for group in &g.groups {
        for t in &group.tiles {
            tile(&mut out, t, g.size);
        }
    }
    out.push_str("</div></div>");
    out
}

/// The first `max_rows` rows of a query's result as an HTML table (and how many more there
/// are).
pub fn table_html(batch: &arrow_array::RecordBatch, max_rows: usize) -> String {
    use arrow_cast::display::{ArrayFormatter, FormatOptions};
    let options = FormatOptions::default().with_null("null");
    let schema = batch.schema();
    let mut out = format!(
        "<div class=\"beton-gallery beton-result\" data-rows=\"{}\"><style>{STYLE}\
         .beton-gallery table.rows{{border-collapse:collapse;font-size:12px}}\
         .beton-gallery table.rows td,.beton-gallery table.rows th{{border-bottom:1px solid #eee;padding:1px 8px;text-align:right}}</style>\
         <p><b>QueryResult</b>: {} row{} × {} column{}</p><table class=\"rows\"><tr>",
        batch.num_rows(),
        count(batch.num_rows() as u64),
        if batch.num_rows() == 1 { "" } else { "s" },
        batch.num_columns(),
        if batch.num_columns() == 1 { "" } else { "s" }
    );
    for f in schema.fields() {
        let _ = write!(
            out,
            "<th>{} <small>{}</small></th>",
            escape(f.name()),
            escape(&f.data_type().to_string())
        );
    }
    out.push_str("</tr>");
    let formatters: Vec<Option<ArrayFormatter<'_>>> =
        batch.columns().iter().map(|c| ArrayFormatter::try_new(c.as_ref(), &options).ok()).collect();
    for row in 0..batch.num_rows().min(max_rows) {
        out.push_str("<tr>");
        for f in &formatters {
            let cell = f.as_ref().map_or_else(|| "?".to_string(), |f| cut(&f.value(row).to_string()));
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    if batch.num_rows() > max_rows {
        let more = (batch.num_rows() - max_rows) as u64;
        let _ = write!(
            out,
            "<p class=\"meta\">… {} more row{}</p>",
            count(more),
            if more == 1 { "" } else { "s" }
        );
    }
    out.push_str("</div>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_html_reads_as_markup() {
        assert_eq!(
            escape("<a href=\"x\">O'k & co</a>"),
            "&lt;a href=&quot;x&quot;&gt;O&#39;k &amp; co&lt;/a&gt;"
        );
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(2000.0), "2000");
        assert_eq!(number(0.123456), "0.1235");
        assert_eq!(number(512.3333), "512.3");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(12), "12");
    }

    #[test]
    fn an_index_set_summary_lists_a_few_runs_at_any_size() {
        let million = index_set_html(&crate::IndexSet::all(1_000_000));
        assert!(million.contains("1,000,000 ids from 0 to 999,999 in 1 run"), "{million}");
        assert!(million.len() < 4096);
        let scattered = crate::IndexSet::from_sorted((0..100_000).map(|i| i * 3).collect()).unwrap();
        let html = index_set_html(&scattered);
        assert!(
            html.contains("in 100,000 runs") && html.contains("[0, 3, 6,") && html.contains(", …]"),
            "{html}"
        );
        let runs = crate::IndexSet::from_sorted(vec![1, 2, 3, 10, 11]).unwrap();
        assert!(index_set_html(&runs).contains("[1–3, 10–11]"));
    }
}
