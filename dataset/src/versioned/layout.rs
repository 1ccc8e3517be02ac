//! The names of a dataset directory's folders and manifests (docs/FORMAT.md §13): one place for
//! every module that reads or writes them, with nothing to import.

/// Folder of data files.
pub const DATA_DIR: &str = "data";
/// Folder of deletion files.
pub const DELETIONS_DIR: &str = "deletions";
/// Folder of split files.
pub const SPLITS_DIR: &str = "splits";
/// Folder of row-id files.
pub const ROW_IDS_DIR: &str = "row_ids";
/// Folder of column files.
pub const COLUMNS_DIR: &str = "columns";
/// The folder of manifests.
pub const VERSIONS_DIR: &str = "_versions";
/// The folder of tags.
pub const TAGS_DIR: &str = "_tags";

/// The manifest path of `version`, relative to the dataset directory (zero-padded so names sort).
pub fn manifest_name(version: u64) -> String {
    format!("{VERSIONS_DIR}/{version:020}.json")
}

/// The folder of checkpoints a cleanup writes: the whole manifest of a version it keeps whose
/// manifest is a delta on a version it removes (docs/FORMAT.md §13).
pub const CHECKPOINTS_DIR: &str = "_checkpoints";

/// The checkpoint path of `version`, relative to the dataset directory.
pub fn checkpoint_name(version: u64) -> String {
    format!("{CHECKPOINTS_DIR}/{version:020}.json")
}

/// What cleanups removed, written by each before it removes a version: the newest version any
/// removed (`{"newest_removed_version": N}`). A commit on a local disk whose base's next
/// version does not exist and was never removed knows its base is the latest without listing
/// the versions (docs/FORMAT.md §13, "Cleanup").
pub const CLEANUP_FILE: &str = "_cleanup.json";

/// The folder of branch records: `_branches/NAME.json` names the line of a branch
/// (docs/FORMAT.md §13, "Branches").
pub const BRANCHES_DIR: &str = "_branches";
/// The folder of branches' lines of versions: `_lines/ID/` holds `line.json` (where the line
/// starts), its manifests and checkpoints.
pub const LINES_DIR: &str = "_lines";
/// The folder of row-id ranges given to lines: `_lines/_ranges/K` is made (no-overwrite) by the
/// branch whose rows take ids from `K << 40` on; never removed, so no range is given twice.
pub const RANGES_DIR: &str = "_lines/_ranges";
/// The name of the main line (the versions in `_versions/`).
pub const MAIN: &str = "main";
/// The row ids of one line's range: main's are below it, a branch's start at a multiple of it.
pub const RANGE_ROWS: u64 = 1 << 40;

/// A line of versions: `main` (the dataset's versions in `_versions/`) or a branch's, whose own
/// versions are in `_lines/ID/` and whose versions up to its start are its parent line's (and so
/// on up to main): version `n` of a branch started at version `k` of main is main's version `n`
/// when `n ≤ k`, else the branch's own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Line {
    /// The line's id: `None` for main.
    pub id: Option<String>,
    /// The branch's name when the line was opened through one (`None` for main).
    pub branch: Option<String>,
    /// The range of row ids the line gives out: ids from `range * RANGE_ROWS` on (0 for main).
    pub range: u64,
    /// Where it starts, nearest first: `(line id or None for main, version)`; the versions up to
    /// the first's number are that line's, up to the next's number the next line's, and so on.
    pub starts: Vec<(Option<String>, u64)>,
}

impl Line {
    /// The main line.
    pub fn main() -> Line {
        Line::default()
    }

    /// True for the main line.
    pub fn is_main(&self) -> bool {
        self.id.is_none()
    }

    /// The id of the line holding version `v` of this line (`None`: main).
    pub fn owner(&self, v: u64) -> Option<&str> {
        let mut owner = self.id.as_deref();
        for (line, start) in &self.starts {
            if v > *start {
                break;
            }
            owner = line.as_deref();
        }
        owner
    }

    /// The id of the line holding version `v`, `main` for the main line.
    pub fn owner_name(&self, v: u64) -> String {
        self.owner(v).unwrap_or(MAIN).to_string()
    }

    /// The version this line starts from (0 for main: its versions are all its own).
    pub fn start(&self) -> u64 {
        self.starts.first().map_or(0, |s| s.1)
    }

    /// The folder of this line's own manifests.
    pub fn versions_dir(&self) -> String {
        match &self.id {
            None => VERSIONS_DIR.to_string(),
            Some(id) => format!("{LINES_DIR}/{id}/{VERSIONS_DIR}"),
        }
    }

    /// The manifest path of version `v` of this line (its own, or a line it starts from).
    pub fn manifest_name(&self, v: u64) -> String {
        match self.owner(v) {
            None => manifest_name(v),
            Some(id) => format!("{LINES_DIR}/{id}/{VERSIONS_DIR}/{v:020}.json"),
        }
    }

    /// The checkpoint path of version `v` of this line.
    pub fn checkpoint_name(&self, v: u64) -> String {
        match self.owner(v) {
            None => checkpoint_name(v),
            Some(id) => format!("{LINES_DIR}/{id}/{CHECKPOINTS_DIR}/{v:020}.json"),
        }
    }

    /// The cleanup record of this line's own versions ([`CLEANUP_FILE`]).
    pub fn cleanup_file(&self) -> String {
        match &self.id {
            None => CLEANUP_FILE.to_string(),
            Some(id) => format!("{LINES_DIR}/{id}/{CLEANUP_FILE}"),
        }
    }

    /// The line a version `v ≤ start` of this one is on, as a line of its own.
    pub fn parent_line(&self) -> Option<Line> {
        let ((id, _), rest) = self.starts.split_first()?;
        Some(Line { id: id.clone(), branch: None, range: 0, starts: rest.to_vec() })
    }
}
