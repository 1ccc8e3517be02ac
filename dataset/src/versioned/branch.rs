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

use super::commit::{self, read_manifest_on, Line};
use super::layout::{MAIN, RANGES_DIR, RANGE_ROWS};
use super::lines::{branch_file, branch_names, check_name, line_file, BranchRecord, LineRecord};
use super::{lock, VersionRef, VersionedDataset};
use crate::error::{Error, Result};
use crate::store::{self, Store};

pub use super::lines::BranchInfo;

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
