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
