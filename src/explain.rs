//! `beton explain FILE SQL`: what a query touches and what a loader would read for its rows,
//! without printing the query's output: the columns it names, which of them read heap pages, the
//! rows it matches, and the distinct pages and payload bytes of those rows against the file's.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use beton_query::Table;
use beton_storage::{AllocEntry, Dataset};
use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

/// Explains `sql` (a bare predicate or a `SELECT`) on the data table of `file`.
pub fn run(file: &Path, custom: &[String], sql: &str) -> Result<String> {
    let ds = crate::open(file, custom)?;
    let table = Table::new(&ds);
    let ids = beton_query::select_indices(&table, sql)?;

    let names = identifiers(sql)?;
    let columns: Vec<&str> = table.column_names().into_iter().filter(|c| names.contains(*c)).collect();
    let mut heap_columns = Vec::new();
    for c in &columns {
        if table.reads_payloads(c)? {
            heap_columns.push(*c);
        }
    }

    let matched = Reads::of(&ds, ids.iter().flat_map(|i| ds.sample_allocations(i)));
    let total = Reads::of(&ds, (0..ds.num_allocations()).map(|k| ds.allocation(k)));

    let list = |v: &[&str]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    let pct = |part: u64, whole: u64| {
        if whole == 0 {
            String::new()
        } else {
            format!(" ({:.1}%)", part as f64 * 100.0 / whole as f64)
        }
    };
    let n = ds.num_samples();
    let rows: Vec<(&str, String)> = vec![
        ("file", file.display().to_string()),
        ("columns", list(&columns)),
        ("heap columns", list(&heap_columns)),
        ("rows matched", format!("{} of {n}{}", ids.len(), pct(ids.len() as u64, n))),
        (
            "allocations",
            format!(
                "{} of {}{}",
                matched.allocations,
                total.allocations,
                pct(matched.allocations, total.allocations)
            ),
        ),
        (
            "pages",
            format!(
                "{} of {}{}, page size {}",
                matched.pages,
                total.pages,
                pct(matched.pages, total.pages),
                crate::human(ds.page_size())
            ),
        ),
        (
            "payload bytes",
            format!(
                "{} of {}{}, {} of {}",
                matched.bytes,
                total.bytes,
                pct(matched.bytes, total.bytes),
                crate::human(matched.bytes),
                crate::human(total.bytes)
            ),
        ),
    ];
    let width = rows.iter().map(|(k, _)| k.len() + 1).max().unwrap_or(0);
    let mut out = String::new();
    for (key, value) in rows {
        writeln!(out, "{:<width$} {value}", format!("{key}:"))?;
    }
    Ok(out)
}

/// Explains `sql` on a version of the dataset directory `dir`: the columns, the rows matched, and
/// for each data file the rows, pages and payload bytes a loader of those rows would read.
pub fn run_version(dir: &Path, version: Option<&str>, sql: &str) -> Result<String> {
    let v = beton_query::versioned::VersionedDataset::open(dir, crate::versions::version_ref(version))?;
    let view = v.view()?;
    let table = view.table()?;
    let ids = beton_query::select_indices(&table, sql)?;
    let names = identifiers(sql)?;
    let columns: Vec<&str> = table.column_names().into_iter().filter(|c| names.contains(*c)).collect();
    // Matched rows of each data file, by position in the manifest.
    let datasets: Vec<&Dataset> = view.datasets().collect();
    let mut rows: Vec<Vec<u64>> = vec![Vec::new(); datasets.len()];
    for i in ids.iter() {
        let (ds, row) = table.locate(i)?;
        if let Some(k) = datasets.iter().position(|d| std::ptr::eq(*d, ds)) {
            rows[k].push(row);
        }
    }
    let n = table.num_rows();
    let mut out = String::new();
    writeln!(out, "dataset: {} (version {}, {} data files)", dir.display(), v.version(), datasets.len())?;
    writeln!(out, "columns: {}", if columns.is_empty() { "none".to_string() } else { columns.join(", ") })?;
    writeln!(out, "rows matched: {} of {n}", ids.len())?;
    let (mut pages, mut bytes, mut all_pages, mut all_bytes) = (0, 0, 0, 0);
    for ((ds, rows), f) in datasets.iter().zip(&rows).zip(&v.manifest().fragments) {
        let matched = Reads::of(ds, rows.iter().flat_map(|&r| ds.sample_allocations(r)));
        let total = Reads::of(ds, (0..ds.num_allocations()).map(|k| ds.allocation(k)));
        writeln!(
            out,
            "  data file {} ({}): {} rows matched, {} of {} pages, {} of payload",
            f.id,
            f.data_file,
            rows.len(),
            matched.pages,
            total.pages,
            crate::human(matched.bytes)
        )?;
        (pages, bytes, all_pages, all_bytes) =
            (pages + matched.pages, bytes + matched.bytes, all_pages + total.pages, all_bytes + total.bytes);
    }
    writeln!(out, "pages: {pages} of {all_pages}")?;
    writeln!(
        out,
        "payload bytes: {bytes} of {all_bytes}, {} of {}",
        crate::human(bytes),
        crate::human(all_bytes)
    )?;
    Ok(out)
}

/// The identifiers of `sql`, with `a . b` joined into `a.b` (quoted parts unquoted).
fn identifiers(sql: &str) -> Result<HashSet<String>> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize().context("tokenizing the SQL")?;
    let tokens: Vec<Token> = tokens.into_iter().filter(|t| !matches!(t, Token::Whitespace(_))).collect();
    let mut names = HashSet::new();
    let mut i = 0;
    while i < tokens.len() {
        if let Token::Word(w) = &tokens[i] {
            let mut name = w.value.clone();
            while let (Some(Token::Period), Some(Token::Word(next))) = (tokens.get(i + 1), tokens.get(i + 2))
            {
                name.push('.');
                name.push_str(&next.value);
                i += 2;
            }
            names.insert(name);
        }
        i += 1;
    }
    Ok(names)
}

/// Heap reads of a set of allocations.
struct Reads {
    allocations: u64,
    /// Distinct pages that the non-empty allocations lie on (an allocation may span pages).
    pages: u64,
    bytes: u64,
}

impl Reads {
    fn of(ds: &Dataset, entries: impl Iterator<Item = AllocEntry>) -> Reads {
        let (start, page) = (ds.data_start(), ds.page_size().max(1));
        let mut pages = BTreeSet::new();
        let (mut allocations, mut bytes) = (0, 0);
        for e in entries {
            allocations += 1;
            bytes += e.size;
            if e.size > 0 {
                let first = e.ptr.saturating_sub(start) / page;
                let last = (e.ptr + e.size - 1).saturating_sub(start) / page;
                pages.extend(first..=last);
            }
        }
        Reads { allocations, pages: pages.len() as u64, bytes }
    }
}
