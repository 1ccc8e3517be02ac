//! What a query touches and what a loader of its rows would read, without running the query's
//! output: the columns it names, which of them read heap pages, the rows it matches, and the
//! distinct pages and payload bytes of those rows against the whole dataset's, per data file for
//! a dataset directory's version. `beton explain` prints an [`Explain`]; Python's
//! `Dataset.explain` returns it. It lives here, not in the CLI, so that both give the same plan.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::path::PathBuf;

use beton_storage::{AllocEntry, Dataset};
use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{Error, Result};
use crate::versioned::VersionView;
use crate::Table;

/// Heap reads of a set of allocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reads {
    /// Allocation entries (payloads), empty ones included.
    pub allocations: u64,
    /// Distinct pages that the non-empty allocations lie on (an allocation may span pages).
    pub pages: u64,
    /// Payload bytes.
    pub bytes: u64,
}

impl Reads {
    /// The reads of `entries`, allocations of `ds`.
    pub fn of(ds: &Dataset, entries: impl Iterator<Item = AllocEntry>) -> Reads {
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

    /// Every allocation of `ds`.
    pub fn all(ds: &Dataset) -> Reads {
        Reads::of(ds, (0..ds.num_allocations()).map(|k| ds.allocation(k)))
    }

    /// The allocations of rows `rows` of `ds`.
    pub fn rows(ds: &Dataset, rows: impl Iterator<Item = u64>) -> Reads {
        Reads::of(ds, rows.flat_map(|r| ds.sample_allocations(r)))
    }

    fn add(self, other: Reads) -> Reads {
        Reads {
            allocations: self.allocations + other.allocations,
            pages: self.pages + other.pages,
            bytes: self.bytes + other.bytes,
        }
    }
}

/// What a loader of the matched rows reads from one data file of a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFileReads {
    /// The fragment's id in the manifest.
    pub id: u64,
    /// The data file, relative to the dataset directory.
    pub data_file: String,
    /// Matched rows that lie in this file.
    pub rows_matched: u64,
    /// Reads of those rows.
    pub matched: Reads,
    /// Reads of every allocation of the file.
    pub total: Reads,
}

/// What was explained: a `.beton` file or a version of a dataset directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A `.beton` file.
    File(PathBuf),
    /// Version `version` of the dataset directory `dir`.
    Version {
        /// The dataset directory.
        dir: PathBuf,
        /// The version's number.
        version: u64,
    },
}

/// The plan of one query: what it touches and what a loader of its rows reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explain {
    /// What was explained.
    pub source: Source,
    /// The SQL text.
    pub sql: String,
    /// The data table's columns the SQL names, in table order.
    pub columns: Vec<String>,
    /// Of those, the ones whose values are read from payload pages (text, for example).
    pub heap_columns: Vec<String>,
    /// The data-table bytes reading those columns reads: columnar copies' bytes of the columns
    /// they hold, and whole row-major data tables for the rest (heap bytes of text not counted).
    pub scan: crate::table::ScanBytes,
    /// Rows the query matches.
    pub rows_matched: u64,
    /// Rows of the dataset.
    pub num_rows: u64,
    /// The largest page size of the data files.
    pub page_size: u64,
    /// Reads of the matched rows, over all data files.
    pub matched: Reads,
    /// Reads of every allocation, over all data files.
    pub total: Reads,
    /// Per data file, for a version (empty for a `.beton` file).
    pub data_files: Vec<DataFileReads>,
    /// The matched rows.
    pub ids: crate::IndexSet,
    /// For a file on remote storage: what was fetched so far and what the matched rows'
    /// payloads still need.
    pub remote: Option<RemoteReads>,
}

/// Range requests and bytes of a dataset on remote storage (see `beton_storage::remote`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteReads {
    /// Requests made so far by this handle (opening included).
    pub requests: u64,
    /// Bytes they fetched.
    pub bytes: u64,
    /// Requests reading the matched rows' payloads would make now (blocks already present
    /// cost none).
    pub requests_needed: u64,
    /// Bytes they would fetch.
    pub bytes_needed: u64,
}

/// Explains `sql` (a bare predicate or a `SELECT`) on `view`, a `.beton` file or a version of a
/// dataset directory alike: the columns it touches, the rows it matches, and the rows, pages
/// and payload bytes a loader of those rows would read, per data file for a version. For data
/// files on remote storage, what was fetched so far and what the matched rows still need.
///
/// # Errors
/// SQL errors (with their line and column), storage errors reading the allocation tables;
/// manifest and column-file errors reading a version's table.
pub fn explain(view: &VersionView, sql: &str) -> Result<Explain> {
    let table = view.table()?;
    let ids = crate::select_indices(&table, sql)?;
    let (columns, heap_columns) = touched(&table, sql)?;
    let scan = table.scan_bytes(&columns.iter().map(String::as_str).collect::<Vec<_>>())?;
    // Matched rows of each data file (its own row numbers: deleted rows are not table rows),
    // by position in the view.
    let datasets: Vec<&Dataset> = view.datasets()?;
    let mut rows: Vec<Vec<u64>> = vec![Vec::new(); datasets.len()];
    for i in ids.iter() {
        let (ds, row) = table.locate(i)?;
        if let Some(k) = datasets.iter().position(|d| std::ptr::eq(*d, ds)) {
            rows[k].push(row);
        }
    }
    let mut data_files = Vec::new();
    let (mut matched, mut total) = (Reads::default(), Reads::default());
    let mut remote: Option<RemoteReads> = None;
    for (k, (ds, rows)) in datasets.iter().zip(&rows).enumerate() {
        let (file_matched, file_total) = (Reads::rows(ds, rows.iter().copied()), Reads::all(ds));
        (matched, total) = (matched.add(file_matched), total.add(file_total));
        if let Some(v) = view.version() {
            let f = &v.manifest().fragments[k];
            data_files.push(DataFileReads {
                id: f.id,
                data_file: f.data_file.clone(),
                rows_matched: rows.len() as u64,
                matched: file_matched,
                total: file_total,
            });
        }
        if let (Some(s), Some((requests_needed, bytes_needed))) =
            (ds.remote_stats(), ds.remote_plan(rows.iter().copied()))
        {
            let r = remote.get_or_insert_with(RemoteReads::default);
            r.requests += s.requests;
            r.bytes += s.bytes;
            r.requests_needed += requests_needed;
            r.bytes_needed += bytes_needed;
        }
    }
    let source = match view.version() {
        Some(v) => Source::Version { dir: v.dir().to_path_buf(), version: v.version() },
        None => Source::File(datasets[0].path().to_path_buf()),
    };
    Ok(Explain {
        source,
        sql: sql.to_string(),
        columns,
        heap_columns,
        scan,
        rows_matched: ids.len() as u64,
        num_rows: table.num_rows(),
        page_size: datasets.iter().map(|d| d.page_size()).max().unwrap_or(0),
        matched,
        total,
        data_files,
        ids,
        remote,
    })
}

/// The table's columns `sql` names, and those of them that read payload pages.
fn touched(table: &Table<'_>, sql: &str) -> Result<(Vec<String>, Vec<String>)> {
    let names = identifiers(sql)?;
    let columns: Vec<String> =
        table.column_names().into_iter().filter(|c| names.contains(*c)).map(String::from).collect();
    let mut heap = Vec::new();
    for c in &columns {
        if table.reads_payloads(c)? {
            heap.push(c.clone());
        }
    }
    Ok((columns, heap))
}

/// The identifiers of `sql`, with `a . b` joined into `a.b` (quoted parts unquoted).
fn identifiers(sql: &str) -> Result<HashSet<String>> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize().map_err(|e| Error::Sql {
        message: format!("tokenizing the SQL: {}", e.message),
        line: e.location.line,
        column: e.location.column,
    })?;
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

/// Bytes in binary units: `8.0 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// ` (12.5%)`, or nothing when `whole` is 0.
fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        String::new()
    } else {
        format!(" ({:.1}%)", part as f64 * 100.0 / whole as f64)
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// `beton explain`'s text: `key: value` lines.
impl fmt::Display for Explain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (m, t, n) = (&self.matched, &self.total, self.num_rows);
        let mut rows: Vec<(&str, String)> = Vec::new();
        match &self.source {
            Source::File(path) => rows.push(("file", path.display().to_string())),
            Source::Version { dir, version } => rows.push((
                "dataset",
                format!("{} (version {version}, {} data files)", dir.display(), self.data_files.len()),
            )),
        }
        rows.push(("columns", list(&self.columns)));
        rows.push(("heap columns", list(&self.heap_columns)));
        let s = &self.scan;
        let mut read = Vec::new();
        if s.columnar > 0 || !s.columnar_columns.is_empty() {
            read.push(format!(
                "{} from the columnar copy ({})",
                human_bytes(s.columnar),
                s.columnar_columns.join(", ")
            ));
        }
        if s.row_major > 0 {
            read.push(format!("{} gathered from the row-major data table", human_bytes(s.row_major)));
        }
        rows.push(("table bytes", if read.is_empty() { "none".into() } else { read.join(", ") }));
        rows.push(("rows matched", format!("{} of {n}{}", self.rows_matched, pct(self.rows_matched, n))));
        rows.push((
            "allocations",
            format!("{} of {}{}", m.allocations, t.allocations, pct(m.allocations, t.allocations)),
        ));
        rows.push((
            "pages",
            format!(
                "{} of {}{}, page size {}",
                m.pages,
                t.pages,
                pct(m.pages, t.pages),
                human_bytes(self.page_size)
            ),
        ));
        rows.push((
            "payload bytes",
            format!(
                "{} of {}{}, {} of {}",
                m.bytes,
                t.bytes,
                pct(m.bytes, t.bytes),
                human_bytes(m.bytes),
                human_bytes(t.bytes)
            ),
        ));
        if let Some(r) = &self.remote {
            rows.push((
                "remote",
                format!(
                    "{} requests, {} fetched so far; the matched rows need {} more requests, {}",
                    r.requests,
                    human_bytes(r.bytes),
                    r.requests_needed,
                    human_bytes(r.bytes_needed)
                ),
            ));
        }
        let width = rows.iter().map(|(k, _)| k.len() + 1).max().unwrap_or(0);
        for (key, value) in rows {
            writeln!(f, "{:<width$} {value}", format!("{key}:"))?;
        }
        for d in &self.data_files {
            writeln!(
                f,
                "  data file {} ({}): {} rows matched, {} of {} pages, {} of payload",
                d.id,
                d.data_file,
                d.rows_matched,
                d.matched.pages,
                d.total.pages,
                human_bytes(d.matched.bytes)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_join_dotted_names() {
        let names = identifiers("image.width > 3 AND \"label\" < 2").unwrap();
        assert!(names.contains("image.width") && names.contains("label"), "{names:?}");
        assert!(identifiers("'unterminated").is_err());
    }

    #[test]
    fn human_bytes_units() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(8 << 20), "8.0 MiB");
    }
}
