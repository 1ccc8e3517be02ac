//! A diff's gallery: the rows that differ between two versions, grouped as changed, added and
//! deleted. A changed row shows its older thumbnail beside its newer one and a small table of
//! its caption columns, older and newer value side by side, the cells that differ highlighted;
//! an added row shows as the newer version has it, a deleted one as the older had it. The
//! rows come from [`diff`](crate::versioned::diff) by row id ([`diff_rows`] finds them in both
//! tables); the page is the usual gallery page ([`Gallery::to_html`], [`Gallery::to_png`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use beton_storage::{FieldType, Pixels};
use rayon::prelude::*;

use super::model::{Before, Change, ChangeKind, Gallery, Group, Tile};
use super::{
    default_captions, image_field, pick, summary, thumbnail, Columns, GalleryOptions, Selection, MAX_TILES,
};
use crate::error::{Error, Result};
use crate::versioned::{diff_views, Diff, VersionedDataset};
use crate::Table;

/// Which rows of a diff a gallery shows.
#[derive(Debug, Clone)]
pub enum DiffRows<'a> {
    /// Every row that differs.
    All,
    /// Those a predicate (or `SELECT index ...`) selects, in the version each row is shown
    /// from: the newer for changed and added rows, the older for deleted ones.
    Sql(&'a str),
    /// Rows of the newer version (table row numbers, any order); deleted rows are left out.
    Newer(Vec<u64>),
}

/// The gallery of what changed from `older` to `newer` (named `sides`, as the title and the
/// tiles say): [`diff_views`], [`diff_rows`], narrowed to `rows`, then [`Gallery::build_diff`]. An
/// empty `options.title` becomes `a → b: 3 rows changed, 1 added, 0 deleted (columns label)`;
/// `options.classes` defaults to the newer version's class names.
///
/// # Errors
/// As [`diff_views`], [`Selection::of_sql`] and [`Gallery::build_diff`].
pub fn diff_gallery(
    older: &VersionedDataset,
    newer: &VersionedDataset,
    sides: (String, String),
    rows: DiffRows<'_>,
    options: &GalleryOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Gallery> {
    let (view_before, view_after) = (older.view()?, newer.view()?);
    let d = diff_views((older, &view_before), (newer, &view_after))?;
    let (before, after) = (view_before.table()?, view_after.table()?);
    let mut found = diff_rows(&d, &before, &after)?;
    let sorted = |mut rows: Vec<u64>| {
        rows.sort_unstable();
        rows
    };
    let shown_in = |set: &[u64], row: u64| set.binary_search(&row).is_ok();
    match rows {
        DiffRows::All => {}
        DiffRows::Sql(sql) => {
            let in_after = sorted(Selection::of_sql(&after, sql)?.rows);
            let in_before = match found.iter().any(|r| r.after.is_none()) {
                true => sorted(Selection::of_sql(&before, sql)?.rows),
                false => Vec::new(),
            };
            found.retain(|r| match (r.after, r.before) {
                (Some(a), _) => shown_in(&in_after, a),
                (None, Some(b)) => shown_in(&in_before, b),
                (None, None) => false,
            });
        }
        DiffRows::Newer(rows) => {
            let in_after = sorted(rows);
            found.retain(|r| r.after.is_some_and(|a| shown_in(&in_after, a)));
        }
    }
    let mut options = options.clone();
    if options.title.is_empty() {
        let count = |kind| found.iter().filter(|r| r.kind == kind).count();
        let mut columns: Vec<String> = d.changed.keys().cloned().collect();
        columns.extend(d.added_columns.iter().map(|c| format!("{c} added")));
        columns.extend(d.dropped_columns.iter().map(|c| format!("{c} dropped")));
        options.title = format!(
            "{} → {}: {} rows changed, {} added, {} deleted{}",
            sides.0,
            sides.1,
            count(ChangeKind::Changed),
            count(ChangeKind::Added),
            count(ChangeKind::Deleted),
            if columns.is_empty() { String::new() } else { format!(" (columns {})", columns.join(", ")) }
        );
    }
    if options.classes.is_none() {
        options.classes = view_after.classes()?;
    }
    Gallery::build_diff(&before, &after, &found, sides, &options, progress)
}

/// One row of a diff, found in both tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffRow {
    /// The stable row id.
    pub row_id: u64,
    /// Changed, added or deleted.
    pub kind: ChangeKind,
    /// Its row number in the older version (changed and deleted rows).
    pub before: Option<u64>,
    /// Its row number in the newer version (changed and added rows).
    pub after: Option<u64>,
    /// Columns whose value differs (changed rows), in column order.
    pub changed: Vec<String>,
}

/// The rows of `diff` (from `before`'s version to `after`'s) with their row numbers in each
/// table: changed rows by ascending id, then added, then deleted.
///
/// # Errors
/// Errors reading either table's row ids; [`Error::InvalidArgument`] when a row id of the diff
/// is not in the table it should be in (the diff is of other versions).
pub fn diff_rows(diff: &Diff, before: &Table<'_>, after: &Table<'_>) -> Result<Vec<DiffRow>> {
    let (in_before, in_after) = (Positions::of(before)?, Positions::of(after)?);
    let find = |positions: &Positions, id: u64, which: &str| -> Result<u64> {
        positions.find(id).ok_or_else(|| Error::InvalidArgument {
            what: "diff".into(),
            why: format!("row id {id} is not in the {which} version: the diff is of other versions"),
        })
    };
    let mut changed: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (column, ids) in &diff.changed {
        for &id in ids {
            changed.entry(id).or_default().push(column.clone());
        }
    }
    let mut rows = Vec::with_capacity(changed.len() + diff.added.len() + diff.deleted.len());
    for (id, columns) in changed {
        rows.push(DiffRow {
            row_id: id,
            kind: ChangeKind::Changed,
            before: Some(find(&in_before, id, "older")?),
            after: Some(find(&in_after, id, "newer")?),
            changed: columns,
        });
    }
    for &id in &diff.added {
        let after = Some(find(&in_after, id, "newer")?);
        rows.push(DiffRow { row_id: id, kind: ChangeKind::Added, before: None, after, changed: Vec::new() });
    }
    for &id in &diff.deleted {
        let before = Some(find(&in_before, id, "older")?);
        rows.push(DiffRow {
            row_id: id,
            kind: ChangeKind::Deleted,
            before,
            after: None,
            changed: Vec::new(),
        });
    }
    Ok(rows)
}

/// Where each row id is in a table: its row ids themselves when they ascend (the usual case:
/// binary search, no copy sorted), else `(id, row)` pairs sorted by id.
enum Positions {
    Ascending(Vec<u64>),
    Sorted(Vec<(u64, u64)>),
}

impl Positions {
    fn of(table: &Table<'_>) -> Result<Positions> {
        let ids = table.row_ids()?;
        if ids.windows(2).all(|w| w[0] < w[1]) {
            return Ok(Positions::Ascending(ids));
        }
        let mut by_id: Vec<(u64, u64)> = ids.into_iter().zip(0u64..).collect();
        by_id.sort_unstable();
        Ok(Positions::Sorted(by_id))
    }

    /// The row holding `id`.
    fn find(&self, id: u64) -> Option<u64> {
        match self {
            Positions::Ascending(ids) => ids.binary_search(&id).ok().map(|k| k as u64),
            Positions::Sorted(by_id) => by_id.binary_search_by_key(&id, |p| p.0).ok().map(|k| by_id[k].1),
        }
    }
}

/// Most caption columns a diff's tile shows by default.
const DEFAULT_CAPTIONS: usize = 4;

impl Gallery {
    /// The gallery of a diff's `rows` (from [`diff_rows`]) between `before` and `after`, the
    /// versions named `sides` (older, newer): groups `changed`, `added` and `deleted` (those
    /// with rows), each showing `per_group` rows spread over it. Captions: `options.columns`,
    /// else the columns that changed, then scalar fields, up to four. `summaries` summarise
    /// the newer version's changed and added rows. `progress(done, total)` is called as
    /// thumbnails are made (two per changed row).
    ///
    /// # Errors
    /// As [`Gallery::build`]: a caption column neither version has, an image field that is
    /// not one, `per_group` or `size` 0, a row number past a table's end.
    pub fn build_diff(
        before: &Table<'_>,
        after: &Table<'_>,
        rows: &[DiffRow],
        sides: (String, String),
        options: &GalleryOptions,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<Gallery> {
        let invalid = |what: &str, why: String| Error::InvalidArgument { what: what.into(), why };
        options.check()?;
        for (row, table, which) in rows
            .iter()
            .flat_map(|r| [(r.before, before, "older"), (r.after, after, "newer")])
            .filter_map(|(r, t, w)| r.map(|r| (r, t, w)))
        {
            if row >= table.num_rows() {
                return Err(invalid(
                    "rows to show",
                    format!("row {row} is past the end of the {which} version ({} rows)", table.num_rows()),
                ));
            }
        }
        let (fields_before, fields_after) = (before.fields(), after.fields());
        let image = image_field(&fields_after, options.image.as_deref())?;
        let image_before = image
            .as_ref()
            .and_then(|(name, _)| fields_before.iter().find(|(n, t)| n == name && t.is_image()).cloned());

        let captions = match &options.columns {
            Some(c) => c.clone(),
            None => default_diff_captions(rows, &fields_after, image.as_ref().map(|i| i.0.as_str())),
        };
        let nothing = Selection::of_rows(Vec::new());
        // Each version's table with its column names.
        let (older, newer) = ((before, before.column_names()), (after, after.column_names()));
        for c in &captions {
            if !newer.1.contains(&c.as_str()) && !older.1.contains(&c.as_str()) {
                // The newer version's error, listing its columns.
                Columns { table: after, selection: &nothing, classes: None }.check(c)?;
            }
        }

        // Groups in a fixed order; each shows rows spread over it.
        let mut groups: Vec<(ChangeKind, Vec<usize>, Vec<usize>)> = Vec::new();
        for kind in [ChangeKind::Changed, ChangeKind::Added, ChangeKind::Deleted] {
            let members: Vec<usize> = (0..rows.len()).filter(|&k| rows[k].kind == kind).collect();
            if !members.is_empty() {
                let shown = pick(0..members.len(), members.len(), options.per_group);
                let shown = shown.into_iter().map(|p| members[p]).collect();
                groups.push((kind, members, shown));
            }
        }
        let shown: Vec<usize> = groups.iter().flat_map(|g| g.2.iter().copied()).collect();
        if shown.len() > MAX_TILES {
            return Err(invalid(
                "rows per group",
                format!(
                    "{} per group would draw {} thumbnails; at most {MAX_TILES}",
                    options.per_group,
                    shown.len()
                ),
            ));
        }

        // Thumbnails (both sides of a changed row), in parallel.
        let total: u64 = shown
            .iter()
            .map(|&k| u64::from(rows[k].before.is_some()) + u64::from(rows[k].after.is_some()))
            .sum();
        let done = AtomicU64::new(0);
        let thumb = |table: &Table<'_>, row: Option<u64>, field: &Option<(String, FieldType)>| {
            let row = row?;
            let made = field.as_ref().map(|(name, ty)| thumbnail(table, row, name, ty, options.size));
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            Some(made.unwrap_or_else(|| Err(format!("sample {row}: the older version has no image field"))))
        };
        type Thumb = Option<std::result::Result<Pixels, String>>;
        let thumbnails: Vec<(Thumb, Thumb)> = shown
            .par_iter()
            .map(|&k| {
                let r = &rows[k];
                match image {
                    None => (None, None),
                    Some(_) => (thumb(before, r.before, &image_before), thumb(after, r.after, &image)),
                }
            })
            .collect();

        // Captions of each side, read row by row (a few dozen values).
        let caption = |(table, names): &(&Table<'_>, Vec<&str>), row: u64, name: &str| -> String {
            if !names.contains(&name) {
                return "—".to_string();
            }
            let selection = Selection::of_rows(vec![row]);
            Columns { table, selection: &selection, classes: options.classes.as_deref() }
                .caption(name, 0)
                .unwrap_or_else(|e| format!("unreadable: {e}"))
        };
        let mut thumbnails = thumbnails.into_iter();
        let mut drawn = Vec::with_capacity(groups.len());
        for (kind, members, shown) in groups {
            let mut tiles = Vec::with_capacity(shown.len());
            for k in shown {
                let r = &rows[k];
                let (thumb_before, thumb_after) = thumbnails.next().unwrap_or((None, None));
                let side = |version: &(&Table<'_>, Vec<&str>), row: u64| -> Vec<(String, String)> {
                    captions.iter().map(|c| (c.clone(), caption(version, row, c))).collect()
                };
                let tile = match (r.before, r.after) {
                    (Some(b), Some(a)) => {
                        let (old, new) = (side(&older, b), side(&newer, a));
                        // Highlighted: the diff's columns, and any caption that reads differently
                        // (a column one version lacks).
                        let mut changed = r.changed.clone();
                        for ((name, x), (_, y)) in old.iter().zip(&new) {
                            if x != y && !changed.contains(name) {
                                changed.push(name.clone());
                            }
                        }
                        let before = Some(Before { index: b, captions: old, image: thumb_before });
                        let change = Change { row_id: r.row_id, kind, before, changed };
                        Tile { index: a, captions: new, image: thumb_after, change: Some(change) }
                    }
                    (None, Some(a)) => Tile {
                        index: a,
                        captions: side(&newer, a),
                        image: thumb_after,
                        change: Some(Change { row_id: r.row_id, kind, before: None, changed: Vec::new() }),
                    },
                    (Some(b), None) => Tile {
                        index: b,
                        captions: side(&older, b),
                        image: thumb_before,
                        change: Some(Change { row_id: r.row_id, kind, before: None, changed: Vec::new() }),
                    },
                    (None, None) => continue,
                };
                tiles.push(tile);
            }
            drawn.push(Group { key: Some(kind.name().to_string()), count: members.len() as u64, tiles });
        }

        let summaries = match options.summaries {
            true => {
                let mut newer: Vec<u64> = rows.iter().filter_map(|r| r.after).collect();
                newer.sort_unstable();
                let selection = Selection { ordered: false, ..Selection::of_rows(newer) };
                summary::summarise(after, &selection, options.classes.as_deref())?
            }
            false => Vec::new(),
        };
        Ok(Gallery {
            title: options.title.clone(),
            query: String::new(),
            num_rows: after.num_rows(),
            matched: rows.len() as u64,
            image_field: image.map(|(n, _)| n),
            by: Some("change".to_string()),
            groups: drawn,
            hidden_groups: (0, 0),
            summaries,
            size: options.size,
            sides: Some(sides),
        })
    }
}

/// A diff tile's default captions: the columns that changed (but the image shown), then the
/// newer version's scalar fields, up to [`DEFAULT_CAPTIONS`].
fn default_diff_captions(
    rows: &[DiffRow],
    fields: &[(String, FieldType)],
    image: Option<&str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        for c in &r.changed {
            if Some(c.as_str()) != image && !out.contains(c) {
                out.push(c.clone());
            }
        }
    }
    out.sort();
    for c in default_captions(fields, &Selection::of_rows(Vec::new()), None) {
        if out.len() >= DEFAULT_CAPTIONS {
            break;
        }
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}
