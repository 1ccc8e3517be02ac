//! Lines of versions (branch.rs has the model): a line's record and the line of a branch's
//! name, tags of a branch's version, the ancestry a version holds, and the state a branch's
//! first own version takes (its range of row ids). mod.rs and commit.rs use these; the edits of
//! branches are branch.rs's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::commit::{self, Line};
use super::layout::{BRANCHES_DIR, LINES_DIR, MAIN, RANGE_ROWS};
use super::manifest::{LineState, Manifest, FORMAT_VERSION};
use crate::error::{Error, Result};
use crate::store::Store;

/// What a tag file names: a version of main (`{"version": N}`), or of a branch's line
/// (`{"line_version": N, "line": ID, "branch": NAME}`: no `version` key, so that a beton from
/// before branches refuses the tag instead of opening main's version N).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TagFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    line_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    line: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    branch: Option<String>,
}

/// What a tag names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tag {
    pub version: u64,
    pub line: Option<String>,
    pub branch: Option<String>,
}

impl Tag {
    /// The tag file's bytes.
    pub(crate) fn to_json(&self) -> String {
        let file = match &self.line {
            // As betons before branches wrote it.
            None => return format!("{{\"version\": {}}}\n", self.version),
            Some(_) => TagFile {
                version: None,
                line_version: Some(self.version),
                line: self.line.clone(),
                branch: self.branch.clone(),
            },
        };
        serde_json::to_string(&file).expect("a tag serialises") + "\n"
    }

    /// Parses a tag file.
    pub(crate) fn parse(bytes: &[u8]) -> std::result::Result<Tag, String> {
        let f: TagFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        match (f.version, f.line_version, f.line) {
            (Some(version), None, None) => Ok(Tag { version, line: None, branch: None }),
            (None, Some(version), Some(line)) => Ok(Tag { version, line: Some(line), branch: f.branch }),
            _ => Err("names neither a version of main nor one of a branch's line".into()),
        }
    }
}

/// `_lines/ID/line.json`: written once when the branch is made.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LineRecord {
    pub(crate) id: String,
    /// The branch's name when it was made.
    pub(crate) branch: String,
    pub(crate) range: u64,
    pub(crate) starts: Vec<(Option<String>, u64)>,
    pub(crate) created_ms: u64,
}

/// `_branches/NAME.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct BranchRecord {
    pub(crate) line: String,
}

/// A branch, as [`VersionedDataset::branches`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchInfo {
    /// Its name (`main` for the main line).
    pub name: String,
    /// Its newest version.
    pub head: u64,
    /// The branch it started from (`main`, another branch's name, or the id of a line whose
    /// branch was deleted) and the version; `None` for main.
    pub start: Option<(String, u64)>,
    /// When it was made, milliseconds since the Unix epoch (0 for main).
    pub created_ms: u64,
    /// Its line's id (`main` for main).
    pub line: String,
}

/// Fails unless `name` can name a branch: 1 to 64 ASCII letters, digits, `_ - .`, not starting
/// with `.` or `_`, not `main`.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        && !name.starts_with('.')
        && !name.starts_with('_')
        && name != MAIN;
    if !ok {
        return Err(Error::InvalidArgument {
            what: format!("branch name {name:?}"),
            why: "must be 1 to 64 ASCII letters, digits, '_', '-' or '.', not starting with '.' or '_', and not \
                  'main' (the main line's name)"
                .into(),
        });
    }
    Ok(())
}

pub(crate) fn branch_file(name: &str) -> String {
    format!("{BRANCHES_DIR}/{name}.json")
}

pub(crate) fn line_file(id: &str) -> String {
    format!("{LINES_DIR}/{id}/line.json")
}

impl Line {
    /// The line with id `id` (`main` or `None`: the main line), from its record.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there is no such line or its record is not valid.
    pub fn by_id(store: &dyn Store, id: Option<&str>) -> Result<Line> {
        let Some(id) = id.filter(|id| *id != MAIN) else { return Ok(Line::main()) };
        let rel = line_file(id);
        let bytes = commit::read_file(store, &rel)?.ok_or_else(|| Error::InvalidArgument {
            what: format!("line {id}"),
            why: format!("{} has no line record {rel}", store.location()),
        })?;
        let record: LineRecord = serde_json::from_slice(&bytes).map_err(|e| Error::InvalidArgument {
            what: format!("line record {}", store.shown(&rel)),
            why: e.to_string(),
        })?;
        if record.id != id || record.range == 0 || record.starts.windows(2).any(|w| w[1].1 >= w[0].1) {
            return Err(super::integrity::corrupt(
                &store.root().join(&rel),
                format!("the record of line {id} is not valid (id {}, range {})", record.id, record.range),
            ));
        }
        Ok(Line {
            id: Some(record.id),
            branch: Some(record.branch),
            range: record.range,
            starts: record.starts,
        })
    }

    /// The line of branch `name` (`main`: the main line).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a branch that does not exist, naming those that do.
    pub fn of_branch(store: &dyn Store, name: &str) -> Result<Line> {
        if name == MAIN {
            return Ok(Line::main());
        }
        check_name(name)?;
        let Some(bytes) = store.read_fresh(&branch_file(name))? else {
            let there = branch_names(store)?;
            return Err(Error::InvalidArgument {
                what: format!("branch '{name}'"),
                why: format!("{} has no such branch; its branches are: main{}", store.location(), {
                    there.iter().map(|b| format!(", {b}")).collect::<String>()
                }),
            });
        };
        let record: BranchRecord = serde_json::from_slice(&bytes).map_err(|e| Error::InvalidArgument {
            what: format!("branch record {}", store.shown(&branch_file(name))),
            why: e.to_string(),
        })?;
        let mut line = Line::by_id(store, Some(&record.line))?;
        line.branch = Some(name.to_string());
        Ok(line)
    }

    /// This line's id as ancestry maps key it (`main` for main).
    pub fn key(&self) -> &str {
        self.id.as_deref().unwrap_or(MAIN)
    }

    /// The line version `v` of this one is on, as a line of its own (this one when `v` is its
    /// own).
    pub fn line_of(&self, v: u64) -> Line {
        let mut line = self.clone();
        while !line.is_main() && v <= line.start() {
            line = line.parent_line().expect("a branch's line starts somewhere");
        }
        line
    }
}

/// The names of the branches (not main), sorted.
pub(crate) fn branch_names(store: &dyn Store) -> Result<Vec<String>> {
    Ok(store
        .list(BRANCHES_DIR)?
        .into_iter()
        .filter_map(|f| f.strip_suffix(".json").map(str::to_string))
        .collect())
}

/// The ancestry of version `m` of the line with key `owner`: the newest version of every line it
/// holds, its own included.
pub(crate) fn ancestry(m: &Manifest, owner: &str) -> BTreeMap<String, u64> {
    let mut out = m.lines.as_ref().map(|l| l.holds.clone()).unwrap_or_default();
    out.insert(owner.to_string(), m.version);
    out
}

/// Makes `new`, the next version of `line` made from `base`, the first version of a branch's
/// own when `base` is the version it starts from: it gives out row ids from the line's range
/// and holds `base`'s ancestry.
pub(crate) fn adopt(line: &Line, base: &Manifest, new: &mut Manifest) {
    if line.is_main() || line.owner(base.version) == line.id.as_deref() {
        return;
    }
    let mut holds = ancestry(base, line.owner(base.version).unwrap_or(MAIN));
    holds.remove(line.key());
    new.lines = Some(LineState {
        branch: line.branch.clone(),
        next_row_id: line.range * RANGE_ROWS,
        row_id_end: (line.range + 1).saturating_mul(RANGE_ROWS),
        merged: None,
        holds,
    });
    new.format_version = FORMAT_VERSION;
}

/// The line a tag names.
pub(crate) fn tag_line(store: &dyn Store, tag: &Tag) -> Result<Line> {
    let mut line = Line::by_id(store, tag.line.as_deref())?;
    if let Some(branch) = &tag.branch {
        line.branch = Some(branch.clone());
    }
    Ok(line)
}

/// Main and every line with a record (of a branch or of one deleted).
pub(crate) fn all_lines(store: &dyn Store) -> Result<Vec<Line>> {
    let mut out = vec![Line::main()];
    for id in store.list(LINES_DIR)? {
        if id.starts_with('_') || id.contains('.') {
            continue;
        }
        match Line::by_id(store, Some(&id)) {
            Ok(line) => out.push(line),
            // A folder whose record is not there yet (a branch being made writes it first).
            Err(_) if commit::read_file(store, &format!("{LINES_DIR}/{id}/line.json"))?.is_none() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
