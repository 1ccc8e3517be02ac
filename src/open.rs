//! Opening `.beton` files for the commands: `--custom` layouts, a clear message for a directory
//! given as a file, and storage errors that name the file.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};
use beton_storage::{Dataset, OpenOptions};

/// Opens `file` with the `--custom NAME=SIZE[:ALIGN]` layouts given.
pub(crate) fn open(file: &Path, custom: &[String]) -> Result<Dataset> {
    open_with(file, custom, OpenOptions::new())
}

/// Opens for SQL: the allocation table is checked only if a query reads payloads, so a query on
/// the data table alone never reads it (a 20M-payload file's table is 480 MB).
pub(crate) fn open_for_query(file: &Path, custom: &[String]) -> Result<Dataset> {
    open_with(file, custom, OpenOptions::new().defer_allocation_checks(true))
}

fn open_with(file: &Path, custom: &[String], mut options: OpenOptions) -> Result<Dataset> {
    if file.is_dir() {
        let stale = beton_storage::stale_temp_files_in(file);
        let mut why = format!("{}: is a directory, not a .beton file", file.display());
        if !stale.is_empty() {
            let _ = write!(
                why,
                "; it holds {} temporary file(s) of interrupted writes (the next write to their \
                 destination removes them): {}",
                stale.len(),
                stale.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            );
        }
        bail!(why);
    }
    for spec in custom {
        let (name, layout) =
            spec.split_once('=').with_context(|| format!("--custom {spec}: expected NAME=SIZE[:ALIGN]"))?;
        let (size, align) = layout.split_once(':').unwrap_or((layout, "1"));
        let parse =
            |s: &str| s.parse::<usize>().with_context(|| format!("--custom {spec}: '{s}' is not a number"));
        options = options.custom_layout(name, parse(size)?, parse(align)?);
    }
    options.open(file).map_err(|e| name_file(file, e))
}

/// Puts `FILE: ` before a storage error unless its message already starts with the file.
pub(crate) fn name_file(file: &Path, e: beton_storage::Error) -> anyhow::Error {
    let name = file.display().to_string();
    if e.to_string().starts_with(&name) {
        e.into()
    } else {
        anyhow::Error::new(e).context(name)
    }
}
