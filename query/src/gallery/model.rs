//! What a built gallery holds: its groups of tiles and its summaries, the input of every
//! renderer (HTML, PNG). Built by [`Gallery::build`](super::Gallery::build) in the parent;
//! kept apart from it so that the renderers, which the builder's methods call, depend on the
//! data alone.

use beton_storage::Pixels;

use super::summary::ColumnSummary;

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
    /// In a diff's gallery: how this row changed (`None` in every other gallery).
    pub change: Option<Change>,
}

/// How a row changed from one version to another, as a diff's gallery shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// In both versions, some cells differ: shown before beside after.
    Changed,
    /// In the newer version only.
    Added,
    /// In the older version only: shown as it was.
    Deleted,
}

impl ChangeKind {
    /// `changed`, `added` or `deleted`.
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Changed => "changed",
            ChangeKind::Added => "added",
            ChangeKind::Deleted => "deleted",
        }
    }
}

/// A diff gallery tile's change: the row's id, what happened to it, the older row beside a
/// changed one, and the columns whose cells differ (highlighted).
#[derive(Debug, Clone)]
pub struct Change {
    /// The stable row id.
    pub row_id: u64,
    /// Changed, added or deleted.
    pub kind: ChangeKind,
    /// A changed row as the older version has it (its captions have the tile's columns).
    pub before: Option<Before>,
    /// Columns whose value differs between the versions (the image field when the image
    /// changed), highlighted.
    pub changed: Vec<String>,
}

/// A changed row in the older version.
#[derive(Debug, Clone)]
pub struct Before {
    /// Its row number in the older version.
    pub index: u64,
    /// `(column, value)` captions, the same columns as the tile's (`—` for a column the older
    /// version lacks).
    pub captions: Vec<(String, String)>,
    /// Its thumbnail, or why there is none.
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
    /// A diff's gallery: the names of the older and the newer version (`None` otherwise).
    pub sides: Option<(String, String)>,
}
