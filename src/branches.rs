//! `beton branch`, `branches`, `merge` and `log --graph`: a dataset directory's branches
//! (docs/VERSIONS.md). The work is in `beton_query::versioned` (branch.rs, merge.rs).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Result};
use beton_query::versioned::merge::{MergeOptions, Strategy};
use beton_query::versioned::VersionRef;

use crate::versions::{open, time, Action};

/// Runs `action` when it is one of this module's (`branch`, `branches`, `merge`, `log --graph`).
pub fn run(action: &Action) -> Option<Result<String>> {
    Some(match action {
        Action::Log { dir, graph: true, .. } => graph(dir),
        Action::Branch { dir, name, delete: true, .. } => delete(dir, name),
        Action::Branch { dir, name, from, version, .. } => create(dir, name, from, *version),
        Action::Branches { dir, json } => list(dir, *json),
        Action::Merge { dir, source, into, strategy, message, json } => {
            merge(dir, source, into, strategy, message, *json)
        }
        _ => return None,
    })
}

/// `beton branch DIR NAME [--from B] [--version N]`.
pub fn create(dir: &Path, name: &str, from: &str, version: Option<u64>) -> Result<String> {
    let from_head = open(dir, VersionRef::Latest)?.on_branch(from, VersionRef::Latest)?;
    let b = from_head.create_branch(name, version)?;
    Ok(format!(
        "{}: branch '{name}' starts at version {} of {from} ({} rows)\n",
        dir.display(),
        b.version(),
        b.num_rows()
    ))
}

/// `beton branch -d DIR NAME`.
pub fn delete(dir: &Path, name: &str) -> Result<String> {
    let head = open(dir, VersionRef::Latest)?.delete_branch(name)?;
    Ok(format!(
        "{}: branch '{name}' deleted (its latest was version {head}; `beton cleanup` removes its versions)\n",
        dir.display()
    ))
}

/// `beton branches DIR`.
pub fn list(dir: &Path, json: bool) -> Result<String> {
    let all = open(dir, VersionRef::Latest)?.branches()?;
    if json {
        let rows: Vec<_> = all
            .iter()
            .map(|b| {
                serde_json::json!({"name": b.name, "head": b.head, "start": b.start,
                                   "created_ms": b.created_ms, "line": b.line})
            })
            .collect();
        return Ok(serde_json::to_string_pretty(&rows)? + "\n");
    }
    let mut out = String::new();
    for b in &all {
        let _ = write!(out, "{:<24} version {:<5}", b.name, b.head);
        if let Some((from, v)) = &b.start {
            let _ = write!(out, " from {from} at version {v}");
        }
        out.push('\n');
    }
    Ok(out)
}

/// `beton merge DIR SOURCE [--into B] [--strategy S]`: the report, or the conflicts (exit 1).
pub fn merge(
    dir: &Path,
    source: &str,
    into: &str,
    strategy: &str,
    message: &str,
    json: bool,
) -> Result<String> {
    let strategy = match strategy {
        "fail" => Strategy::Fail,
        "ours" => Strategy::Ours,
        "theirs" => Strategy::Theirs,
        other => bail!("--strategy {other:?}: expected fail, ours or theirs"),
    };
    let target = open(dir, VersionRef::Latest)?.on_branch(into, VersionRef::Latest)?;
    let options = MergeOptions { strategy, resolve: Vec::new() };
    match target.merge(source, message, &options) {
        Ok((v, r)) if json => Ok(serde_json::to_string_pretty(&serde_json::json!({
            "version": v.version(), "committed": r.committed, "base": r.base, "theirs": r.theirs,
            "rows_added": r.rows_added, "rows_deleted": r.rows_deleted, "cells_set": r.cells_set,
            "resolved": r.resolved.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
        }))? + "\n"),
        Ok((v, r)) if !r.committed => Ok(format!(
            "{}: {into} holds version {} of {source} already: nothing to merge (version {})\n",
            dir.display(),
            r.theirs,
            v.version()
        )),
        Ok((v, r)) => {
            let mut out = format!(
                "{}: version {} of {into} merges version {} of {source} (common ancestor: version {} of {}): \
                 {} rows added, {} deleted, {} cells set\n",
                dir.display(),
                v.version(),
                r.theirs,
                r.base.1,
                r.base.0,
                r.rows_added,
                r.rows_deleted,
                r.cells_set
            );
            if !r.resolved.is_empty() {
                let _ = writeln!(out, "{} conflicts settled by the strategy:", r.resolved.len());
                for c in r.resolved.iter().take(20) {
                    let _ = writeln!(out, "  {c}");
                }
            }
            Ok(out)
        }
        Err(beton_query::Error::MergeConflict { conflicts }) => {
            let mut out = String::new();
            if json {
                let rows: Vec<_> = conflicts
                    .iter()
                    .map(|c| {
                        serde_json::json!({"row_id": c.row_id, "column": c.column, "base": c.base,
                                           "ours": c.ours, "theirs": c.theirs, "kind": c.kind.name()})
                    })
                    .collect();
                out = serde_json::to_string_pretty(&rows)? + "\n";
            } else {
                for c in &conflicts {
                    let _ = writeln!(out, "  {c}");
                }
            }
            bail!(
                "merge of {source} into {into}: {} conflicts, nothing was committed (--strategy ours or theirs \
                 settles them; Python's Dataset.merge(resolve=...) one by one):\n{out}",
                conflicts.len()
            )
        }
        Err(e) => Err(e.into()),
    }
}

/// `beton log DIR --graph`: every branch's versions, newest first, a column per branch: `*` a
/// version, `M` a merge (its second parent named), `|` a branch that exists at that time.
pub fn graph(dir: &Path) -> Result<String> {
    let main = open(dir, VersionRef::Latest)?;
    let branches = main.branches()?;
    // Each branch's own versions (main's all), with the time the branch started.
    let mut rows: Vec<(u64, usize, beton_query::versioned::Manifest)> = Vec::new();
    let mut started: BTreeMap<usize, u64> = BTreeMap::new();
    for (k, b) in branches.iter().enumerate() {
        let v = main.on_branch(&b.name, VersionRef::Latest)?;
        let first_own = v.line().start();
        for m in v.versions()? {
            if k > 0 && m.version <= first_own {
                continue;
            }
            rows.push((m.timestamp_ms, k, m));
        }
        started.insert(k, if k == 0 { 0 } else { b.created_ms });
    }
    rows.sort_by_key(|(t, k, m)| (std::cmp::Reverse(*t), *k, std::cmp::Reverse(m.version)));
    let mut out = String::new();
    let header: Vec<String> = branches.iter().map(|b| b.name.clone()).collect();
    let _ = writeln!(out, "{}", header.join("  "));
    for (t, k, m) in &rows {
        let mut cells = String::new();
        for (j, b) in branches.iter().enumerate() {
            let mark = if j == *k {
                if m.lines.as_ref().and_then(|l| l.merged.as_ref()).is_some() {
                    "M"
                } else {
                    "*"
                }
            } else if started[&j] <= *t {
                "|"
            } else {
                " "
            };
            let _ = write!(cells, "{mark:<width$}  ", width = b.name.len().max(1));
        }
        let merged = m
            .lines
            .as_ref()
            .and_then(|l| l.merged.as_ref())
            .map(|p| format!(" <- {} version {}", p.branch, p.version))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{cells}{} version {:<4} {}  {}{merged}{}",
            branches[*k].name,
            m.version,
            time(m),
            m.operation.name(),
            if m.message.is_empty() { String::new() } else { format!("  \"{}\"", m.message) }
        );
    }
    for (j, b) in branches.iter().enumerate().skip(1) {
        if let Some((from, v)) = &b.start {
            let _ = writeln!(out, "{} started from {from} at version {v}", branches[j].name);
        }
    }
    Ok(out)
}
