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
