//! Committing a version: every new file first, then the manifest, published with no-overwrite
//! semantics (a hard link to `_versions/N.json`, which fails when another writer made version N
//! first). Nothing is ever modified in place, so a crash at any point leaves the last committed
//! version whole and at most some unreferenced files, which `cleanup` removes.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

use super::manifest::Manifest;

/// The folder of manifests.
pub const VERSIONS_DIR: &str = "_versions";
/// The folder of tags.
pub const TAGS_DIR: &str = "_tags";
/// Writers' temporary files.
pub const TMP_DIR: &str = "_tmp";

/// A step of a commit at which a test may kill this process (`BETON_CRASH_AT=N`: the N-th
/// step reached aborts, as `kill -9` would: no destructor runs, no buffer is flushed). The crash
/// test (tests/cli_crash.rs) walks every step of every edit with it; unset, it costs one load.
pub fn crash_point() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static AT: OnceLock<Option<u64>> = OnceLock::new();
    static REACHED: AtomicU64 = AtomicU64::new(0);
    if let Some(at) = *AT.get_or_init(|| std::env::var("BETON_CRASH_AT").ok().and_then(|v| v.parse().ok())) {
        if REACHED.fetch_add(1, Ordering::SeqCst) + 1 == at {
            std::process::abort();
        }
    }
}

/// A step of a cleanup or commit on object storage at which a test may make this process
/// pause (`BETON_TEST_PAUSE_MS=N`: N milliseconds at each), as a slow or descheduled machine
/// would: it widens windows between another machine's steps that are otherwise too narrow for a
/// race test to hit. No pause may change what is committed or deleted, only when. Unset, it
/// costs one load.
pub fn pause_point() {
    use std::sync::OnceLock;
    static PAUSE: OnceLock<Option<u64>> = OnceLock::new();
    if let Some(ms) =
        *PAUSE.get_or_init(|| std::env::var("BETON_TEST_PAUSE_MS").ok().and_then(|v| v.parse().ok()))
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// The manifest path of `version`, relative to the dataset directory (zero-padded so names sort).
pub fn manifest_name(version: u64) -> String {
    format!("{VERSIONS_DIR}/{version:020}.json")
}

/// An I/O error naming its path.
pub(crate) fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Storage(beton_storage::Error::Io { path: path.to_path_buf(), source: e })
}

/// A name no other file of any writer has: 128 random bits, in hex.
pub fn unique_name() -> String {
    let mut bytes = [0u8; 16];
    let random = File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        // No /dev/urandom: time, process and a counter still never repeat on this machine.
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let count = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bytes[..8].copy_from_slice(&nanos.to_le_bytes());
        bytes[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        bytes[12..].copy_from_slice(&(count as u32).to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to a new file `dir/rel` durably (temporary file, fsync, rename, fsync of the
/// folder); the folder is created when missing. `rel` must be a name no one else uses.
pub fn write_new_file(dir: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(rel);
    let parent = path.parent().unwrap_or(dir).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|e| io(&parent, e))?;
    let tmp = temp_file(dir)?;
    crash_point();
    write_all_synced(tmp.as_file(), bytes).map_err(|e| io(tmp.path(), e))?;
    crash_point();
    tmp.persist_noclobber(&path).map_err(|e| io(&path, e.error))?;
    crash_point();
    sync_dir(&parent);
    Ok(())
}

/// A temporary file in the dataset's `_tmp/` folder, removed when dropped.
pub(crate) fn temp_file(dir: &Path) -> Result<tempfile::NamedTempFile> {
    let tmp_dir = dir.join(TMP_DIR);
    std::fs::create_dir_all(&tmp_dir).map_err(|e| io(&tmp_dir, e))?;
    tempfile::Builder::new().prefix("w-").suffix(".tmp").tempfile_in(&tmp_dir).map_err(|e| io(&tmp_dir, e))
}

/// Writes `bytes` to `f` and fsyncs it; a crash point halfway leaves a torn temporary file,
/// which nothing may ever refer to.
pub(crate) fn write_all_synced(mut f: &File, bytes: &[u8]) -> std::io::Result<()> {
    f.write_all(&bytes[..bytes.len() / 2])?;
    crash_point();
    f.write_all(&bytes[bytes.len() / 2..])?;
    f.sync_all()
}

/// Makes a rename or link in `dir` durable (best effort: some file systems refuse).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// What publishing a manifest came to.
#[derive(Debug)]
pub enum Published {
    /// This manifest is now the version it names.
    Done,
    /// Another writer committed that version number first.
    Taken,
}

/// Publishes `manifest` as `_versions/N.json` (N = its version) unless that exists.
///
/// # Errors
/// I/O errors naming the path; [`Error::InvalidArgument`] on a file system without hard links.
pub fn publish(dir: &Path, manifest: &Manifest) -> Result<Published> {
    // What readers refuse is never written.
    super::integrity::check_manifest(manifest).map_err(|why| Error::InvalidArgument {
        what: format!("commit to {}", super::remote::shown(dir)),
        why: format!("{why}; nothing was committed"),
    })?;
    if let Some(remote) = super::remote::publish(dir, manifest) {
        return remote;
    }
    let versions = dir.join(VERSIONS_DIR);
    std::fs::create_dir_all(&versions).map_err(|e| io(&versions, e))?;
    let tmp = temp_file(dir)?;
    let json = manifest.to_json();
    crash_point();
    write_all_synced(tmp.as_file(), &json).map_err(|e| io(tmp.path(), e))?;
    crash_point();
    let target = dir.join(manifest_name(manifest.version));
    // link(2) creates the name only if it does not exist: the no-overwrite commit point. The
    // manifest's bytes are already durable, so the name never shows a partial manifest.
    match std::fs::hard_link(tmp.path(), &target) {
        Ok(()) => {
            crash_point();
            sync_dir(&versions);
            Ok(Published::Done)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(Published::Taken),
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => Err(Error::InvalidArgument {
            what: format!("dataset directory {}", super::remote::shown(dir)),
            why: "its file system has no hard links, which commits need (no-overwrite publication)".into(),
        }),
        Err(e) => Err(io(&target, e)),
    }
}

/// Every committed version number, ascending.
///
/// # Errors
/// I/O errors reading `_versions/`.
pub fn list_versions(dir: &Path) -> Result<Vec<u64>> {
    let names = match super::remote::list(dir, VERSIONS_DIR) {
        Some(names) => names?,
        None => {
            let versions = dir.join(VERSIONS_DIR);
            let mut names = Vec::new();
            for entry in std::fs::read_dir(&versions).map_err(|e| io(&versions, e))? {
                let entry = entry.map_err(|e| io(&versions, e))?;
                names.extend(entry.file_name().to_str().map(str::to_string));
            }
            names
        }
    };
    let mut out = Vec::new();
    for name in names {
        let Some(stem) = name.strip_suffix(".json") else { continue };
        if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(v) = stem.parse() {
                out.push(v);
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Reads the manifest of `version`.
///
/// # Errors
/// [`Error::InvalidArgument`] when there is no such version (listing the ones there are) or its
/// manifest is not valid.
pub fn read_manifest(dir: &Path, version: u64) -> Result<Manifest> {
    super::remote::fetch(dir, &manifest_name(version))?;
    let path: PathBuf = dir.join(manifest_name(version));
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let there = list_versions(dir)?;
            return Err(Error::InvalidArgument {
                what: "version".into(),
                why: format!(
                    "{} has no version {version}; it has {}",
                    super::remote::shown(dir),
                    describe_versions(&there)
                ),
            });
        }
        Err(e) => return Err(io(&path, e)),
    };
    let m = Manifest::from_json(&bytes, &path)?;
    if m.version != version {
        return Err(Error::InvalidArgument {
            what: format!("manifest {}", path.display()),
            why: format!("says it is version {}", m.version),
        });
    }
    Ok(m)
}

/// "versions 1 to 7" / "no versions".
fn describe_versions(v: &[u64]) -> String {
    match (v.first(), v.last()) {
        (Some(a), Some(b)) if a == b => format!("version {a}"),
        (Some(a), Some(b)) => format!("versions {a} to {b} ({} in all)", v.len()),
        _ => "no versions".into(),
    }
}
