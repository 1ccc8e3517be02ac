//! Durable local writes, and the test hooks every commit passes: a new file is written to a
//! temporary name in the dataset's `_tmp/`, synced, then renamed or linked into place, so a
//! name never shows a partial file.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use crate::error::{io, Result};

/// Writers' temporary files, in the dataset directory.
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
///
/// # Errors
/// I/O errors naming the path.
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
