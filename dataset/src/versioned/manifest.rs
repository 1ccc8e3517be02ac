//! The manifest of one version of a dataset directory (docs/FORMAT.md §13): its data files
//! (fragments) with their row ids, deletions and column files, its schema and named splits, and
//! how it came to be (parent, time, operation, message). A manifest is JSON, written once and
//! never modified; how it is stored (whole, or as its changes to its parent's) is stored.rs's.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use beton_storage::FieldType;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
pub use crate::shared_vec::SharedVec;

/// `format` of every manifest.
pub const FORMAT: &str = "beton-dataset";
/// The manifest layout this crate writes; a reader refuses a newer one. Version 2 added the
/// manifest's own checksum (required from 2 on) and the checksums of the files it references;
/// version 3 stores a manifest as the changes to its parent's fragments (a delta) or whole (a
/// checkpoint), compact, its checksum over its bytes (stored.rs); version 4 adds the state of
/// branches ([`LineState`]), written only by a manifest that has it.
pub const FORMAT_VERSION: u32 = 4;
/// The format of a manifest without [`LineState`] (every manifest of a dataset that never had a
/// branch merged into its main line): readable by the betons of format 3.
pub const FORMAT_WITHOUT_LINES: u32 = 3;

/// One version of a dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] when written by this crate.
    pub format_version: u32,
    /// This version's number: 1 for the first, each commit one more than its parent.
    pub version: u64,
    /// The version this one was made from (none for the first).
    pub parent: Option<u64>,
    /// Commit time, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// What made this version.
    pub operation: Operation,
    /// The user's message, possibly empty.
    #[serde(default)]
    pub message: String,
    /// The smallest row id never given out: new rows get ids from here.
    pub next_row_id: u64,
    /// The smallest fragment id never given out.
    #[serde(default)]
    pub next_fragment_id: u64,
    /// The visible fields, in order.
    pub schema: Vec<SchemaField>,
    /// The data files, in order: a version's rows are theirs, concatenated, less deletions.
    pub fragments: SharedVec<Fragment>,
    /// Named splits: sets of row ids.
    #[serde(default)]
    pub splits: BTreeMap<String, FileRef>,
    /// Class names, label `k` naming class `k` (an ImageFolder's folders), if known: from the
    /// imported file, extended by appends and `set_classes`, renamed by `rename_class`, kept by
    /// every other edit, written into exported files ([`super::classes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<String>>,
    /// Branches: the line of versions this one is on, the row ids it gives out and the versions
    /// of other lines it holds (a merge's). Absent on a dataset that never had a branch merged
    /// into it (its main line gives out row ids from `next_row_id`); such a manifest is format 3,
    /// one with it format 4 (super::branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<LineState>,
    /// How this manifest is stored (not part of its value: never serialised, equal to any other).
    #[serde(skip)]
    pub lineage: Lineage,
}

/// How a manifest is stored, for the next commit's choice between a delta and a checkpoint
/// (stored.rs): the deltas read on top of the last whole manifest (the checkpoint), their bytes
/// and the checkpoint's. A bookkeeping record, not part of the manifest's value: every two
/// compare equal.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lineage {
    /// Deltas between this version and its checkpoint (0: stored whole).
    pub depth: u32,
    /// Bytes of those deltas.
    pub delta_bytes: u64,
    /// Bytes of the checkpoint (0: a manifest made in memory, never stored).
    pub checkpoint_bytes: u64,
    /// The checkpoint's format version (a chain on a checkpoint older than format 3 is ended by
    /// the next commit: an old directory becomes format 3 on its first edit).
    pub checkpoint_format: u32,
}

impl PartialEq for Lineage {
    fn eq(&self, _: &Lineage) -> bool {
        true
    }
}

/// A version's place among the dataset's lines of versions (super::branch): which branch it is
/// on, the row ids its line gives out, its merged-in parent and the other lines' versions it
/// holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineState {
    /// The branch it is on; absent on `main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The next row id this line gives out (each line gives out ids from its own range, so that
    /// rows appended on two branches never share an id).
    pub next_row_id: u64,
    /// The end of this line's range of row ids.
    pub row_id_end: u64,
    /// A merge's second parent: the version merged in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergedParent>,
    /// The newest version of each other line this version holds (by line id; `main` for the
    /// main line): its ancestry, with its own line's versions up to itself.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub holds: BTreeMap<String, u64>,
}

impl LineState {
    /// The state of a child version on the same line: no merged parent.
    fn child(&self) -> LineState {
        LineState { merged: None, ..self.clone() }
    }
}

/// The version a merge merged in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedParent {
    /// Its branch's name (`main` for the main line).
    pub branch: String,
    /// Its line's id.
    pub line: String,
    /// Its number.
    pub version: u64,
}

/// A field of the schema, by its short type name (`FieldType::from_short_name`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaField {
    /// The field's name.
    pub name: String,
    /// The type's short name (`int`, `rgb_image`, `ndarray`, ...).
    #[serde(rename = "type")]
    pub type_name: String,
    /// Element type of array fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Shape of fixed-shape array fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
}

impl SchemaField {
    /// The schema entry of a field of type `ty`.
    pub fn new(name: &str, ty: &FieldType) -> SchemaField {
        let element = ty.kind().element();
        SchemaField {
            name: name.to_string(),
            type_name: ty.short_name().to_string(),
            dtype: element.map(|(d, _)| d.typestr().to_string()),
            shape: element.and_then(|(_, s)| (!s.is_empty()).then(|| s.to_vec())),
        }
    }

    /// The field's type.
    ///
    /// # Errors
    /// [`Error::Storage`] for a type name this crate does not know.
    pub fn field_type(&self) -> Result<FieldType> {
        Ok(FieldType::from_short_name(&self.type_name, self.dtype.as_deref(), self.shape.as_deref())?)
    }
}

/// One data file of a version and what the version changes about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fragment {
    /// Unique within the dataset, never reused.
    pub id: u64,
    /// The `.beton` file, relative to the dataset directory.
    pub data_file: String,
    /// Rows in the data file (deleted ones included).
    pub num_rows: u64,
    /// The data file's length in bytes, checked when it is opened (absent in manifests written
    /// before format 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_bytes: Option<u64>,
    /// The row id of each row of the data file.
    pub row_ids: RowIds,
    /// Rows of the data file deleted in this version (positions in the file), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletions: Option<FileRef>,
    /// Column files: a field's values come from the last one listing it, else from the data file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<ColumnFile>,
    /// The group copy holding the data file's columnar copy (`data/NAME.group.columns.arrow`,
    /// made for the data files one commit added; docs/FORMAT.md §14), if one does. A cache, not
    /// the truth: missing or not matching, the data file gets a copy of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<String>,
}

impl Fragment {
    /// Rows of this fragment in the version: the data file's, less deletions.
    pub fn num_live_rows(&self) -> u64 {
        self.num_rows - self.deletions.as_ref().map_or(0, |d| d.count)
    }

    /// The column file holding field `name` for this fragment, if one does.
    pub fn column_file(&self, name: &str) -> Option<&ColumnFile> {
        self.columns.iter().rev().find(|c| c.fields.iter().any(|f| f == name))
    }
}

/// The row ids of a fragment's rows, in file order (always ascending).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RowIds {
    /// Row `k` of the data file has id `start + k`.
    Range {
        /// The first row's id.
        start: u64,
    },
    /// The ids, as an index set file (§12's form), one per row of the data file.
    File {
        /// The index set file, relative to the dataset directory.
        file: String,
        /// Its checksum ([`super::integrity::checksum`]), verified when it is read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checksum: Option<String>,
    },
}

/// A file of the dataset directory and the number of ids (or rows) it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// Relative to the dataset directory.
    pub file: String,
    /// Ids in the file.
    pub count: u64,
    /// Its checksum ([`super::integrity::checksum`]), verified when it is read (absent in
    /// manifests written before format 2 and the files they name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

/// An Arrow IPC file with some fields' values for every row of one data file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnFile {
    /// Relative to the dataset directory.
    pub file: String,
    /// The fields it holds.
    pub fields: Vec<String>,
    /// Its checksum ([`super::integrity::checksum`]), verified when it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

/// What a commit did, as `beton log` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Operation {
    /// An empty dataset or one written by `DatasetWriter`.
    Create,
    /// A `.beton` file imported (`beton import`).
    Import {
        /// The file imported.
        source: String,
    },
    /// New data files.
    Append {
        /// Rows added.
        rows: u64,
    },
    /// Rows deleted.
    Delete {
        /// The SQL predicate, if the rows were chosen by one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        predicate: Option<String>,
        /// Rows deleted.
        rows: u64,
    },
    /// Cells changed.
    Update {
        /// The SQL predicate, if the rows were chosen by one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        predicate: Option<String>,
        /// The fields changed.
        fields: Vec<String>,
        /// Rows changed.
        rows: u64,
    },
    /// A column added.
    AddColumn {
        /// Its name.
        name: String,
    },
    /// A column dropped.
    DropColumn {
        /// Its name.
        name: String,
    },
    /// Named splits saved or removed.
    Splits {
        /// Splits saved.
        saved: Vec<String>,
        /// Splits removed.
        removed: Vec<String>,
    },
    /// An older version made the latest again.
    Restore {
        /// The version restored.
        version: u64,
    },
    /// Data files rewritten without their deletions and column files.
    Compact {
        /// Fragments folded.
        fragments: Vec<u64>,
    },
    /// A branch's head merged in (its version is the second parent: [`LineState::merged`]).
    Merge {
        /// The branch merged.
        branch: String,
        /// Its head that was merged.
        version: u64,
    },
    /// Class names added or renamed (`set_classes`, `rename_class`).
    Classes {
        /// Names added at the end of the list.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        added: Vec<String>,
        /// `(old, new)` names.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        renamed: Vec<(String, String)>,
    },
}

impl Operation {
    /// A short name (`delete`, `add_column`).
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Import { .. } => "import",
            Operation::Append { .. } => "append",
            Operation::Delete { .. } => "delete",
            Operation::Update { .. } => "update",
            Operation::AddColumn { .. } => "add_column",
            Operation::DropColumn { .. } => "drop_column",
            Operation::Splits { .. } => "splits",
            Operation::Restore { .. } => "restore",
            Operation::Compact { .. } => "compact",
            Operation::Classes { .. } => "classes",
            Operation::Merge { .. } => "merge",
        }
    }
}

impl Manifest {
    /// Version 1 of a dataset: no rows yet, `schema` as given.
    pub fn first(schema: Vec<SchemaField>, operation: Operation) -> Manifest {
        Manifest {
            format: FORMAT.to_string(),
            format_version: FORMAT_WITHOUT_LINES,
            version: 1,
            parent: None,
            timestamp_ms: now_ms(),
            operation,
            message: String::new(),
            next_row_id: 0,
            next_fragment_id: 0,
            schema,
            fragments: SharedVec::new(),
            splits: BTreeMap::new(),
            classes: None,
            lines: None,
            lineage: Lineage::default(),
        }
    }

    /// The first of `n` row ids given out to new rows of this version, from its line's range
    /// (`next_row_id` on a dataset without branches), `next_row_id` kept past every id given
    /// out. [`room_for`] checks that there are `n` left first.
    pub fn give_row_ids(&mut self, n: u64) -> u64 {
        match &mut self.lines {
            None => {
                let start = self.next_row_id;
                self.next_row_id += n;
                start
            }
            Some(line) => {
                let start = line.next_row_id;
                line.next_row_id += n;
                self.next_row_id = self.next_row_id.max(line.next_row_id);
                start
            }
        }
    }

    /// The row id this version's line gives out next.
    pub fn line_next_row_id(&self) -> u64 {
        self.lines.as_ref().map_or(self.next_row_id, |l| l.next_row_id)
    }

    /// The next version made from this one by `operation`: same contents, to be edited.
    ///
    /// # Panics
    /// When this is version `u64::MAX` (edits check [`Manifest::next_version`] first).
    pub fn child(&self, operation: Operation, message: &str) -> Manifest {
        Manifest {
            format_version: if self.lines.is_some() { FORMAT_VERSION } else { FORMAT_WITHOUT_LINES },
            version: self.next_version().expect("edits check that a version is left"),
            parent: Some(self.version),
            timestamp_ms: now_ms(),
            operation,
            message: message.to_string(),
            lineage: Lineage::default(),
            lines: self.lines.as_ref().map(LineState::child),
            ..self.clone()
        }
    }

    /// The number of the version after this one; `None` past the largest.
    pub fn next_version(&self) -> Option<u64> {
        self.version.checked_add(1)
    }

    /// True when some column file holds field `name` (its values are not all the data files').
    pub fn edited(&self, name: &str) -> bool {
        self.fragments.iter().any(|f| f.column_file(name).is_some())
    }

    /// Rows in this version.
    pub fn num_rows(&self) -> u64 {
        self.fragments.iter().map(Fragment::num_live_rows).sum()
    }

    /// The group copies its fragments name (repeated for each fragment), relative to the
    /// dataset directory: kept by `cleanup` as long as a version names them.
    pub fn copies(&self) -> impl Iterator<Item = &str> {
        self.fragments.iter().filter_map(|f| f.copy.as_deref())
    }

    /// Every file this version references, relative to the dataset directory (not the group
    /// copies, caches that may be missing: [`Manifest::copies`]).
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.fragments
            .iter()
            .flat_map(|f| {
                let row_ids = match &f.row_ids {
                    RowIds::File { file, .. } => Some(file.as_str()),
                    RowIds::Range { .. } => None,
                };
                std::iter::once(f.data_file.as_str())
                    .chain(row_ids)
                    .chain(f.deletions.iter().map(|d| d.file.as_str()))
                    .chain(f.columns.iter().map(|c| c.file.as_str()))
            })
            .chain(self.splits.values().map(|s| s.file.as_str()))
    }
}

/// A relative path of plain components (`data/x.beton`): no `..`, no root, no empty part.
pub(crate) fn is_relative_file(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && path.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\\'))
}

/// Checks that a manifest's entries agree with each other: no data file or other file named
/// twice, no fragment id twice, row-id ranges that do not overlap, ids and counts below the
/// manifest's bounds, column files naming schema fields, no field twice in the schema, totals
/// that fit in 64 bits. Returns what is wrong, naming the version and the entry.
pub(crate) fn check_manifest(m: &Manifest) -> std::result::Result<(), String> {
    check_header(m)?;
    let names = schema_names(m)?;
    let mut files: HashMap<&str, Place<'_>> = HashMap::with_capacity(m.fragments.len() + m.splits.len());
    let mut ids: HashMap<u64, usize> = HashMap::with_capacity(m.fragments.len());
    let mut ranges: Vec<(u64, u64, usize)> = Vec::with_capacity(m.fragments.len());
    let mut total = 0u64;
    for (k, f) in m.fragments.iter().enumerate() {
        if let Some(first) = ids.insert(f.id, k) {
            return bad(m, format!("fragments {first} and {k} both have id {}", f.id));
        }
        check_fragment(m, k, &names, &mut total, &mut ranges)?;
        for (file, what) in named_files(f, k) {
            if let Some(first) = files.insert(file, what) {
                return Err(twice(m, file, first, what));
            }
        }
    }
    for (name, s) in &m.splits {
        let what = Place::Split(name.as_str());
        if s.count > m.next_row_id {
            return bad(
                m,
                format!("split '{name}' has {} row ids, more than next_row_id {}", s.count, m.next_row_id),
            );
        }
        if let Some(first) = files.insert(s.file.as_str(), what) {
            return Err(twice(m, &s.file, first, what));
        }
    }
    check_ranges(m, ranges)
}

/// [`check_manifest`] of `m`, made from `base` by an edit, where `base` passed it (read or
/// committed): what the edit left alone (fragments shared with `base` in place, schema and
/// splits equal) is not checked again, so that committing an edit of a version of 10,000 data
/// files checks what it changed. Falls back to the whole check for anything else (a fragment
/// moved or removed, ids or row ids that could meet the others').
pub(crate) fn check_child(m: &Manifest, base: &Manifest) -> std::result::Result<(), String> {
    let (old, new) = (&base.fragments, &m.fragments);
    let fits = m.schema == base.schema
        && m.splits == base.splits
        && m.next_fragment_id >= base.next_fragment_id
        && m.next_row_id >= base.next_row_id
        && new.len() >= old.len();
    if !fits {
        return check_manifest(m);
    }
    check_header(m)?;
    let names = schema_names(m)?;
    let mut total = 0u64;
    let mut ranges = Vec::new();
    // Files the edit names that `base` did not name at the same place, and ids it gave out.
    let mut fresh: HashMap<&str, Place<'_>> = HashMap::new();
    let mut ids: HashMap<u64, usize> = HashMap::new();
    for (k, f) in new.iter().enumerate() {
        if new.same_item(k, old, k) {
            let deleted = f.deletions.as_ref().map_or(0, |d| d.count);
            total = total.checked_add(f.num_rows - deleted).ok_or_else(|| too_many_rows(m))?;
            continue;
        }
        let was = old.get(k);
        // In place (the same id and row ids), or new: ids and row ids past the base's, which
        // no fragment left alone can have. Anything else is checked whole.
        let in_place =
            was.is_some_and(|w| w.id == f.id && w.row_ids == f.row_ids && w.num_rows == f.num_rows);
        let new_ids = was.is_none()
            && f.id >= base.next_fragment_id
            && matches!(f.row_ids, RowIds::Range { start } if start >= base.next_row_id);
        if !(in_place || new_ids) {
            return check_manifest(m);
        }
        if let Some(first) = ids.insert(f.id, k) {
            return bad(m, format!("fragments {first} and {k} both have id {}", f.id));
        }
        let mut own_ranges = Vec::new();
        check_fragment(m, k, &names, &mut total, &mut own_ranges)?;
        if new_ids {
            ranges.extend(own_ranges);
        }
        let own: Vec<(&str, Place<'_>)> = named_files(f, k).collect();
        for (j, &(file, what)) in own.iter().enumerate() {
            if let Some(&(_, first)) = own[..j].iter().find(|(n, _)| *n == file) {
                return Err(twice(m, file, first, what));
            }
            if was.is_some_and(|w| named_files(w, k).any(|(n, _)| n == file)) {
                continue;
            }
            if let Some(first) = fresh.insert(file, what) {
                return Err(twice(m, file, first, what));
            }
        }
    }
    // The new names against every other: a few names compared with each (no hashing of
    // 10,000 names).
    if !fresh.is_empty() {
        let fresh: Vec<(&str, Place<'_>)> = fresh.into_iter().collect();
        let meets =
            |file: &str, what: Place<'_>| match fresh.iter().find(|(n, p)| *n == file && !p.same(&what)) {
                Some(&(_, first)) => Err(twice(m, file, first, what)),
                None => Ok(()),
            };
        for (k, f) in new.iter().enumerate() {
            meets(&f.data_file, Place::DataFile(k))?;
            if let RowIds::File { file, .. } = &f.row_ids {
                meets(file, Place::RowIds(k))?;
            }
            if let Some(d) = &f.deletions {
                meets(&d.file, Place::Deletions(k))?;
            }
            for c in &f.columns {
                meets(&c.file, Place::Column(k))?;
            }
        }
        for (name, s) in &m.splits {
            meets(&s.file, Place::Split(name))?;
        }
    }
    check_ranges(m, ranges)
}

/// Where a version names a file: a fragment's (by position) or a split's.
#[derive(Clone, Copy, Debug)]
enum Place<'m> {
    DataFile(usize),
    RowIds(usize),
    Deletions(usize),
    Column(usize),
    Split(&'m str),
}

impl Place<'_> {
    fn same(&self, other: &Place<'_>) -> bool {
        use Place::*;
        match (self, other) {
            (DataFile(a), DataFile(b)) | (RowIds(a), RowIds(b)) | (Deletions(a), Deletions(b)) => a == b,
            (Column(a), Column(b)) => a == b,
            (Split(a), Split(b)) => a == b,
            _ => false,
        }
    }
}

/// "version V: why", the error of a manifest check.
fn bad<T>(m: &Manifest, why: String) -> std::result::Result<T, String> {
    Err(format!("version {}: {why}", m.version))
}

fn too_many_rows(m: &Manifest) -> String {
    format!("version {}: its rows add up to more than 2^64", m.version)
}

/// Fragment `k` named in an error (the words are made only for an error: a version of 10,000
/// data files is checked at every edit).
fn entry(m: &Manifest, k: usize) -> String {
    let f = &m.fragments[k];
    format!("fragment {} (data file {})", f.id, f.data_file)
}

fn place(m: &Manifest, p: Place<'_>) -> String {
    match p {
        Place::DataFile(k) => format!("the data file of {}", entry(m, k)),
        Place::RowIds(k) => format!("the row-id file of {}", entry(m, k)),
        Place::Deletions(k) => format!("the deletion file of {}", entry(m, k)),
        Place::Column(k) => format!("a column file of {}", entry(m, k)),
        Place::Split(name) => format!("the file of split '{name}'"),
    }
}

fn twice(m: &Manifest, file: &str, first: Place<'_>, what: Place<'_>) -> String {
    format!(
        "version {}: {file} is both {} and {}; each file has one place in a version",
        m.version,
        place(m, first),
        place(m, what)
    )
}

/// The version number, parent and format of `m`.
fn check_header(m: &Manifest) -> std::result::Result<(), String> {
    let v = m.version;
    match m.parent {
        _ if v == 0 => Err("version 0: versions start at 1".into()),
        None if v != 1 => bad(m, "has no parent version; only version 1 has none".into()),
        Some(p) if p.checked_add(1) != Some(v) => bad(m, format!("its parent is version {p}, not {}", v - 1)),
        _ => Ok(()),
    }
}

/// The schema's field names, each once.
fn schema_names(m: &Manifest) -> std::result::Result<BTreeMap<&str, usize>, String> {
    let mut names = BTreeMap::new();
    for (k, field) in m.schema.iter().enumerate() {
        if let Some(first) = names.insert(field.name.as_str(), k) {
            return bad(m, format!("field '{}' is in the schema twice (fields {first} and {k})", field.name));
        }
    }
    Ok(names)
}

/// The files fragment `f` (at position `k`) names, with their places.
fn named_files<'a>(f: &'a Fragment, k: usize) -> impl Iterator<Item = (&'a str, Place<'a>)> {
    let row_ids = match &f.row_ids {
        RowIds::File { file, .. } => Some((file.as_str(), Place::RowIds(k))),
        RowIds::Range { .. } => None,
    };
    std::iter::once((f.data_file.as_str(), Place::DataFile(k)))
        .chain(row_ids)
        .chain(f.deletions.iter().map(move |d| (d.file.as_str(), Place::Deletions(k))))
        .chain(f.columns.iter().map(move |c| (c.file.as_str(), Place::Column(k))))
}

/// Fragment `k`'s own entries against the manifest's bounds and schema (`names`): its rows
/// added to `total`, its row-id range (when a range) to `ranges`.
fn check_fragment(
    m: &Manifest,
    k: usize,
    names: &BTreeMap<&str, usize>,
    total: &mut u64,
    ranges: &mut Vec<(u64, u64, usize)>,
) -> std::result::Result<(), String> {
    let f = &m.fragments[k];
    if f.id >= m.next_fragment_id {
        return bad(
            m,
            format!("{} has an id at or past next_fragment_id {}", entry(m, k), m.next_fragment_id),
        );
    }
    let deleted = f.deletions.as_ref().map_or(0, |d| d.count);
    if deleted > f.num_rows {
        return bad(m, format!("{} deletes {deleted} rows of its {} rows", entry(m, k), f.num_rows));
    }
    *total = total.checked_add(f.num_rows - deleted).ok_or_else(|| too_many_rows(m))?;
    if let RowIds::Range { start } = f.row_ids {
        match start.checked_add(f.num_rows) {
            Some(end) if end <= m.next_row_id => {
                if f.num_rows > 0 {
                    ranges.push((start, end, k));
                }
            }
            _ => {
                return bad(
                    m,
                    format!("{} has row ids at or past next_row_id {}", entry(m, k), m.next_row_id),
                )
            }
        }
    }
    for c in &f.columns {
        if c.fields.is_empty() {
            return bad(m, format!("column file {} of {} holds no field", c.file, entry(m, k)));
        }
        if let Some(name) = c.fields.iter().find(|n| !names.contains_key(n.as_str())) {
            return bad(
                m,
                format!(
                    "column file {} of {} holds field '{name}', which is not in the schema",
                    c.file,
                    entry(m, k)
                ),
            );
        }
    }
    Ok(())
}

/// Row-id ranges `(start, end, position)` that must not overlap.
fn check_ranges(m: &Manifest, mut ranges: Vec<(u64, u64, usize)>) -> std::result::Result<(), String> {
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
        if start < end {
            return bad(
                m,
                format!("{} and {} have overlapping row ids (from {start})", entry(m, a), entry(m, b)),
            );
        }
    }
    Ok(())
}

/// Fails naming the fragments when two of a version's fragments share a row id: their spans
/// (first and last id of each, `None` for an empty one) are compared, and where two overlap
/// (a fragment of ids from two lines' ranges spans the others' after a merge) `shared(a, b)`
/// gives the first id fragments `a` and `b` really share, if any.
pub(crate) fn check_spans(
    dir: &Path,
    m: &Manifest,
    spans: impl IntoIterator<Item = (usize, Option<(u64, u64)>)>,
    shared: impl Fn(usize, usize) -> Option<u64>,
) -> Result<()> {
    let mut sorted: Vec<(u64, u64, usize)> =
        spans.into_iter().filter_map(|(k, s)| s.map(|(a, b)| (a, b, k))).collect();
    sorted.sort_unstable();
    // Spans still open at the current one's first id.
    let mut open: Vec<(u64, usize)> = Vec::new();
    for &(first, last, b) in &sorted {
        open.retain(|&(end, _)| end >= first);
        for &(_, a) in &open {
            if let Some(id) = shared(a, b) {
                let (fa, fb) = (&m.fragments[a], &m.fragments[b]);
                return Err(super::integrity::corrupt(
                    &dir.join(super::layout::manifest_name(m.version)),
                    format!(
                        "version {}: fragments {} and {} have overlapping row ids (row id {id})",
                        m.version, fa.id, fb.id
                    ),
                ));
            }
        }
        open.push((last, b));
    }
    Ok(())
}

/// Fails with [`Error::InvalidArgument`] unless version `m` has row ids left for new data files
/// of `rows` rows each, fragment ids for them and a version number after it: checked before an
/// edit writes anything.
pub(crate) fn room_for(m: &Manifest, rows: impl IntoIterator<Item = u64>) -> Result<()> {
    let mut next_row_id = m.next_row_id;
    let mut line_next = m.lines.as_ref().map(|l| (l.next_row_id, l.row_id_end));
    let mut next_fragment_id = m.next_fragment_id;
    let refuse = |why: String| Error::InvalidArgument {
        what: format!("an edit of version {}", m.version),
        why: format!("{why}; nothing was written"),
    };
    for n in rows {
        next_row_id = next_row_id.checked_add(n).ok_or_else(|| {
            refuse(format!("{n} more rows would take row ids past 2^64 - 1 (the next is {})", m.next_row_id))
        })?;
        if let Some((next, end)) = &mut line_next {
            *next = next.checked_add(n).filter(|after| after <= end).ok_or_else(|| {
                refuse(format!(
                    "{n} more rows would take this branch's row ids past the end of its range ({end})"
                ))
            })?;
        }
        next_fragment_id = next_fragment_id.checked_add(1).ok_or_else(|| {
            refuse(format!(
                "a data file more would take fragment ids past 2^64 - 1 (the next is {})",
                m.next_fragment_id
            ))
        })?;
    }
    room_for_version(m)
}

/// Fails with [`Error::InvalidArgument`] when `m` is the largest version number there can be.
pub(crate) fn room_for_version(m: &Manifest) -> Result<()> {
    match m.next_version() {
        Some(_) => Ok(()),
        None => Err(Error::InvalidArgument {
            what: format!("an edit of version {}", m.version),
            why: "it is the largest version number there can be (2^64 - 1); nothing was written".into(),
        }),
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_paths_outside_the_directory() {
        let mut m = Manifest::first(vec![SchemaField::new("label", &FieldType::Int)], Operation::Create);
        m.next_row_id = 10;
        m.next_fragment_id = 1;
        m.fragments.push(Fragment {
            id: 0,
            data_file: "data/a.beton".into(),
            num_rows: 10,
            data_bytes: Some(100),
            row_ids: RowIds::Range { start: 0 },
            deletions: Some(FileRef { file: "deletions/a.bidx".into(), count: 2, checksum: None }),
            columns: vec![ColumnFile {
                file: "columns/a.arrow".into(),
                fields: vec!["label".into()],
                checksum: Some("crc32:00000000".into()),
            }],
            copy: None,
        });
        let back = Manifest::from_json(&m.to_json(), Path::new("t")).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.num_rows(), 8);
        assert_eq!(back.files().count(), 3);
        for bad in ["../x", "/etc/passwd", "data//x", "data/./x", ""] {
            let mut b = m.clone();
            b.fragments[0].data_file = bad.into();
            let err = Manifest::from_json(&b.to_json(), Path::new("t")).unwrap_err().to_string();
            assert!(err.contains("not a plain path"), "{bad}: {err}");
        }
        let newer = String::from_utf8(m.to_json()).unwrap().replace(
            &format!("\"format_version\":{FORMAT_WITHOUT_LINES}"),
            &format!("\"format_version\":{}", FORMAT_VERSION + 1),
        );
        let err = Manifest::from_json(newer.as_bytes(), Path::new("t")).unwrap_err().to_string();
        assert!(err.contains("newer"), "{err}");
        assert!(Manifest::from_json(b"{}", Path::new("t")).is_err());
    }

    /// A valid version of `n` fragments (some with deletions, column files, row-id files) and
    /// a split.
    fn valid(n: u64) -> Manifest {
        let mut m = Manifest::first(vec![SchemaField::new("label", &FieldType::Int)], Operation::Create);
        m.version = 7;
        m.parent = Some(6);
        for id in 0..n {
            m.fragments.push(Fragment {
                id,
                data_file: format!("data/{id}.beton"),
                num_rows: 10,
                data_bytes: Some(100),
                row_ids: match id % 4 {
                    3 => RowIds::File { file: format!("row_ids/{id}.bidx"), checksum: None },
                    _ => RowIds::Range { start: id * 10 },
                },
                deletions: (id % 3 == 1).then(|| FileRef {
                    file: format!("deletions/{id}.bidx"),
                    count: 2,
                    checksum: None,
                }),
                columns: match id % 5 {
                    2 => vec![ColumnFile {
                        file: format!("columns/{id}.arrow"),
                        fields: vec!["label".into()],
                        checksum: None,
                    }],
                    _ => Vec::new(),
                },
                copy: None,
            });
        }
        m.next_fragment_id = n;
        m.next_row_id = n * 10;
        m.splits
            .insert("train".into(), FileRef { file: "splits/train.bidx".into(), count: 3, checksum: None });
        check_manifest(&m).unwrap();
        m
    }

    proptest::proptest! {
        /// Checking only what an edit changed gives the whole check's answer, for edits that
        /// keep a version valid and edits that break it in every way the check knows.
        #[test]
        fn checking_a_child_agrees_with_checking_it_whole(
            n in 1u64..12,
            edits in proptest::collection::vec((0u8..14, 0usize..16, 0usize..16), 1..4),
        ) {
            let base = valid(n);
            let mut m = base.child(Operation::Create, "");
            for (kind, a, b) in edits {
                let len = m.fragments.len();
                let (a, b) = (a % len.max(1), b % len.max(1));
                let file = |m: &Manifest, k: usize| m.fragments[k].data_file.clone();
                match kind {
                    // Valid edits: an append, a deletion file, a column file, a new column file.
                    0 => {
                        let (id, start) = (m.next_fragment_id, m.next_row_id);
                        m.fragments.push(Fragment {
                            id, data_file: format!("data/n{id}.beton"), num_rows: 5, data_bytes: None,
                            row_ids: RowIds::Range { start }, deletions: None, columns: Vec::new(),
                            copy: None,
                        });
                        m.next_fragment_id += 1;
                        m.next_row_id += 5;
                    }
                    1 if len > 0 => m.fragments[a].deletions =
                        Some(FileRef { file: format!("deletions/e{a}.bidx"), count: 1, checksum: None }),
                    2 if len > 0 => m.fragments[a].columns.push(ColumnFile {
                        file: format!("columns/e{a}-{b}.arrow"), fields: vec!["label".into()], checksum: None }),
                    // Broken: a file named twice (in places of every kind), ids and row ids.
                    3 if len > 1 => { let f = file(&m, b); m.fragments[a].data_file = f; }
                    4 if len > 0 => { let f = file(&m, b); m.fragments[a].columns.push(
                        ColumnFile { file: f, fields: vec!["label".into()], checksum: None }); }
                    5 if len > 0 => m.fragments[a].deletions =
                        Some(FileRef { file: "splits/train.bidx".into(), count: 1, checksum: None }),
                    6 if len > 1 => { let id = m.fragments[b].id; m.fragments[a].id = id; }
                    7 if len > 0 => m.fragments[a].row_ids = RowIds::Range { start: (b as u64) * 7 },
                    8 if len > 0 => m.fragments[a].deletions =
                        Some(FileRef { file: format!("deletions/x{a}.bidx"), count: 11, checksum: None }),
                    9 if len > 0 => m.fragments[a].columns.push(ColumnFile {
                        file: format!("columns/y{a}.arrow"), fields: vec!["nope".into()], checksum: None }),
                    10 if len > 0 => { let f = m.fragments[b].clone(); m.fragments.push(f); }
                    11 => m.next_row_id = m.next_row_id.saturating_sub(b as u64 * 3),
                    12 if len > 0 => m.fragments.retain(|f| f.id as usize != a),
                    13 if len > 0 => { let d = m.fragments[b].deletions.clone(); if let Some(d) = d {
                        m.fragments[a].deletions = Some(d); } }
                    _ => {}
                }
            }
            let whole = check_manifest(&m);
            let child = check_child(&m, &base);
            proptest::prop_assert_eq!(whole.is_ok(), child.is_ok(), "whole {:?}, child {:?}", whole, child);
        }
    }
}
