//! Branches: lines of versions beside main (docs/FORMAT.md §13 "Branches", docs/VERSIONS.md).
//!
//! A branch is a name (`_branches/NAME.json`, naming a line) and a line of versions
//! (`_lines/ID/`): `line.json` says where it starts (a version of another line, and where that
//! one starts, up to main) and which range of row ids it gives out; its own manifests are in
//! `_lines/ID/_versions/`, committed with the same no-overwrite protocol as main's, so two
//! writers on one branch rebase or conflict as on main, and writers on two branches never meet.
//! Version `n` of a branch started at version `k` is its parent's version `n` for `n ≤ k`.
//!
//! Rows appended on two lines must never share an id (a merge takes both): each branch gives out
//! row ids from its own range of [`RANGE_ROWS`] (`_lines/_ranges/K`, made no-overwrite and never
//! removed, so no range is given twice); main's are below the first.
//!
//! A version records the newest version of every other line it holds ([`LineState::holds`]):
//! its ancestry, as a version vector, so that the common ancestor of two versions is found from
//! their manifests without walking their histories (merge.rs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::commit::{self, read_manifest_on, Line};
use super::layout::{BRANCHES_DIR, LINES_DIR, MAIN, RANGES_DIR, RANGE_ROWS};
use super::manifest::{LineState, Manifest, FORMAT_VERSION};
use super::{lock, VersionRef, VersionedDataset};
use crate::error::{Error, Result};
use crate::store::{self, Store};

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
struct LineRecord {
    id: String,
    /// The branch's name when it was made.
    branch: String,
    range: u64,
    starts: Vec<(Option<String>, u64)>,
    created_ms: u64,
}

/// `_branches/NAME.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct BranchRecord {
    line: String,
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

fn branch_file(name: &str) -> String {
    format!("{BRANCHES_DIR}/{name}.json")
}

fn line_file(id: &str) -> String {
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
fn branch_names(store: &dyn Store) -> Result<Vec<String>> {
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

impl VersionedDataset {
    /// Opens version `at` of branch `branch` of the dataset at `dir` (`main`: the main line).
    ///
    /// # Errors
    /// As [`VersionedDataset::open`]; [`Error::InvalidArgument`] for a branch that does not
    /// exist.
    pub fn open_branch(dir: &std::path::Path, branch: &str, at: VersionRef) -> Result<VersionedDataset> {
        let store = store::open(dir)?;
        let line = Line::of_branch(&*store, branch)?;
        Self::open_on(store, line, at)
    }

    /// Version `at` of branch `branch` of the same dataset, through this handle's store.
    ///
    /// # Errors
    /// As [`VersionedDataset::open_branch`].
    pub fn on_branch(&self, branch: &str, at: VersionRef) -> Result<VersionedDataset> {
        let line = Line::of_branch(&**self.store(), branch)?;
        Self::open_on(std::sync::Arc::clone(self.store()), line, at)
    }

    /// Starts branch `name` at `version` of this handle's line (this version when `None`);
    /// returns a handle on it. Edits through that handle commit to the branch.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad name, one in use, or a version the line does not
    /// have; I/O and remote errors.
    pub fn create_branch(&self, name: &str, version: Option<u64>) -> Result<VersionedDataset> {
        check_name(name)?;
        let store = &**self.store();
        let version = version.unwrap_or(self.version());
        if store.read_fresh(&branch_file(name))?.is_some() {
            return Err(Error::InvalidArgument {
                what: format!("branch '{name}'"),
                why: format!("{} has a branch of that name already", store.location()),
            });
        }
        // The start is read under the lock a cleanup waits for: it is there until the branch
        // names it (cleanup keeps every branch's start).
        let _edit = lock::edit(self.dir())?;
        let from = self.line().line_of(version);
        read_manifest_on(store, &from, version)?;
        let range = take_range(store)?;
        let id = format!("b{}", commit::unique_name());
        let mut starts = vec![(from.id.clone(), version)];
        starts.extend(from.starts.iter().cloned());
        let record =
            LineRecord { id: id.clone(), branch: name.to_string(), range, starts, created_ms: now_ms() };
        let json = serde_json::to_vec(&record).expect("a line record serialises");
        if !store.put_new(&line_file(&id), &json)? {
            return Err(Error::InvalidArgument {
                what: format!("branch '{name}'"),
                why: format!("line id {id} is taken (retry)"),
            });
        }
        let branch = serde_json::to_vec(&BranchRecord { line: id }).expect("a branch record serialises");
        if !store.put_new(&branch_file(name), &branch)? {
            return Err(Error::InvalidArgument {
                what: format!("branch '{name}'"),
                why: format!("another writer made a branch of that name meanwhile in {}", store.location()),
            });
        }
        self.on_branch(name, VersionRef::Latest)
    }

    /// The branches, `main` first, with their heads and starts.
    ///
    /// # Errors
    /// I/O and remote errors; records that are not valid.
    pub fn branches(&self) -> Result<Vec<BranchInfo>> {
        let store = &**self.store();
        let main = Line::main();
        let mut out = vec![BranchInfo {
            name: MAIN.to_string(),
            head: super::latest(store, &main)?,
            start: None,
            created_ms: 0,
            line: MAIN.to_string(),
        }];
        let names = branch_names(store)?;
        let mut lines = Vec::with_capacity(names.len());
        for name in names {
            // A branch deleted between the listing and the read is no branch.
            match Line::of_branch(store, &name) {
                Ok(line) => lines.push((name, line)),
                Err(_) if store.read_fresh(&branch_file(&name))?.is_none() => continue,
                Err(e) => return Err(e),
            }
        }
        let name_of = |id: &Option<String>| match id {
            None => MAIN.to_string(),
            Some(id) => lines
                .iter()
                .find(|(_, l)| l.id.as_deref() == Some(id))
                .map_or_else(|| id.clone(), |(n, _)| n.clone()),
        };
        for (name, line) in &lines {
            let created_ms = line_created_ms(store, line)?;
            out.push(BranchInfo {
                name: name.clone(),
                head: super::latest(store, line)?,
                start: line.starts.first().map(|(id, v)| (name_of(id), *v)),
                created_ms,
                line: line.key().to_string(),
            });
        }
        Ok(out)
    }

    /// Deletes branch `name` (its name; its versions stay readable through tags and the
    /// branches started from it, and `cleanup` removes the rest). Returns its head.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `main` or a branch that does not exist.
    pub fn delete_branch(&self, name: &str) -> Result<u64> {
        if name == MAIN {
            return Err(Error::InvalidArgument {
                what: "branch 'main'".into(),
                why: "the main line cannot be deleted".into(),
            });
        }
        let store = &**self.store();
        let line = Line::of_branch(store, name)?;
        let head = super::latest(store, &line)?;
        store.remove(&branch_file(name))?;
        Ok(head)
    }

    /// The lines of every branch there is (not main).
    pub(crate) fn branch_lines(&self) -> Result<Vec<Line>> {
        let store = &**self.store();
        let mut out = Vec::new();
        for name in branch_names(store)? {
            match Line::of_branch(store, &name) {
                Ok(line) => out.push(line),
                Err(_) if store.read_fresh(&branch_file(&name))?.is_none() => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

fn line_created_ms(store: &dyn Store, line: &Line) -> Result<u64> {
    let Some(id) = &line.id else { return Ok(0) };
    let bytes = commit::read_file(store, &line_file(id))?.unwrap_or_default();
    Ok(serde_json::from_slice::<LineRecord>(&bytes).map_or(0, |r| r.created_ms))
}

/// A range of row ids no line has: `_lines/_ranges/K` made no-overwrite, K from 1 on.
fn take_range(store: &dyn Store) -> Result<u64> {
    let taken = store.list(RANGES_DIR)?.iter().filter_map(|n| n.parse::<u64>().ok()).max().unwrap_or(0);
    let mut k = taken + 1;
    loop {
        if k.checked_mul(RANGE_ROWS).and_then(|s| s.checked_add(RANGE_ROWS)).is_none() {
            return Err(Error::InvalidArgument {
                what: "a new branch".into(),
                why: "no range of row ids is left for it".into(),
            });
        }
        if store.put_new(&format!("{RANGES_DIR}/{k}"), b"")? {
            return Ok(k);
        }
        k += 1;
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
