//! A merge's conflicts (merge.rs), plain data: the error type names them without depending on
//! the merge.

/// What kind of conflict: the first word is the merging branch's ("ours") change, the second
/// the merged branch's ("theirs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConflictKind {
    /// The same cell set to different values.
    Cell,
    /// Ours updated the row, theirs deleted it.
    UpdateDelete,
    /// Ours deleted the row, theirs updated it.
    DeleteUpdate,
    /// Both added the column, with different types or values (per row).
    AddAdd,
    /// Ours changed the column, theirs dropped it.
    ChangeDrop,
    /// Ours dropped the column, theirs changed it.
    DropChange,
    /// A split removed on one side and changed on the other.
    Split,
    /// The class lists diverged (neither extends the other).
    Classes,
}

impl ConflictKind {
    /// Its name in a conflicts table (`cell`, `update_delete`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ConflictKind::Cell => "cell",
            ConflictKind::UpdateDelete => "update_delete",
            ConflictKind::DeleteUpdate => "delete_update",
            ConflictKind::AddAdd => "add_add",
            ConflictKind::ChangeDrop => "change_drop",
            ConflictKind::DropChange => "drop_change",
            ConflictKind::Split => "split",
            ConflictKind::Classes => "classes",
        }
    }
}

/// One conflict of a merge: what the base, ours and theirs hold (values shown as text; `None`
/// for NULL or absent).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conflict {
    /// The row's id (`None` for a whole column, split or the class list).
    pub row_id: Option<u64>,
    /// The column (`None` for a row's conflict; `split:NAME`, `classes`).
    pub column: Option<String>,
    /// The base's value.
    pub base: Option<String>,
    /// Ours.
    pub ours: Option<String>,
    /// Theirs.
    pub theirs: Option<String>,
    /// What kind.
    pub kind: ConflictKind,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "NULL".into());
        match (self.row_id, &self.column) {
            (Some(r), Some(c)) => write!(f, "row {r}, column '{c}'")?,
            (Some(r), None) => write!(f, "row {r}")?,
            (None, Some(c)) => write!(f, "'{c}'")?,
            (None, None) => write!(f, "?")?,
        }
        write!(
            f,
            " ({}): base {}, ours {}, theirs {}",
            self.kind.name(),
            show(&self.base),
            show(&self.ours),
            show(&self.theirs)
        )
    }
}
