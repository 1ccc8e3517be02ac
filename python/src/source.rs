//! `Source`: what an index set's rows are rows of (an open dataset version), and the notebook
//! repr of a set of its rows. Apart from `gallery`, which takes index sets, so that index sets
//! need not import it.

use std::sync::Arc;

use beton_query::gallery::{Gallery as RustGallery, GalleryOptions, Selection};
use beton_query::versioned::VersionView;
use beton_query::Table;

/// Thumbnails a notebook shows of an index set or a query's result.
const REPR_TILES: usize = 16;
/// Thumbnail size in notebook reprs.
const REPR_SIZE: u32 = 96;

/// What an index set's rows are rows of: a dataset as it was open when the set was made (a
/// `.beton` file, or a version of a dataset directory).
#[derive(Clone)]
pub(crate) struct Source(pub(crate) Arc<VersionView>);

impl Source {
    /// True when both are the same open dataset (version).
    pub(crate) fn same(&self, other: &Source) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A title: the file's or directory's name (and the version).
    pub(crate) fn title(&self) -> String {
        let name = |p: &std::path::Path| {
            p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into())
        };
        match self.0.version() {
            None => self.0.file().map(|d| name(d.path())).unwrap_or_default(),
            Some(v) => format!("{} (version {})", name(v.dir()), v.version()),
        }
    }

    /// Runs `f` on the table and class names.
    pub(crate) fn with_table<T>(
        &self,
        f: impl FnOnce(&Table<'_>, Option<Vec<String>>) -> beton_query::Result<T>,
    ) -> beton_query::Result<T> {
        f(&self.0.table()?, self.0.classes()?)
    }

    /// Thumbnails of `set`'s rows, spread over it, as a notebook fragment.
    pub(crate) fn set_html(&self, set: &beton_query::IndexSet) -> beton_query::Result<String> {
        let title = format!("{} rows of {}", set.len(), self.title());
        self.with_table(|table, classes| {
            let options = repr_options(title, classes);
            Ok(RustGallery::build(table, &Selection::of_set(set), &options, &|_, _| {})?.to_html(false))
        })
    }
}

/// Gallery options of a notebook repr: 16 small thumbnails, no summaries (instant at any size).
pub(crate) fn repr_options(title: String, classes: Option<Vec<String>>) -> GalleryOptions {
    GalleryOptions {
        per_group: REPR_TILES,
        size: REPR_SIZE,
        summaries: false,
        classes,
        title,
        ..GalleryOptions::default()
    }
}
