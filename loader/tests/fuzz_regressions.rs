//! Inputs that once crashed (or would have crashed) a fuzz target stay harmless: every file in
//! fuzz/regressions/TARGET/ (gzipped when it ends in `.gz`) is replayed through the target's
//! harness (`beton_loader::fuzz`), on a thread with a 2 MiB stack like any worker's. The `jpeg`
//! target has found no crash, so it has no folder and no test here.

use std::io::Read;
use std::path::PathBuf;

fn replay(target: &str, harness: fn(&[u8])) -> usize {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions").join(target);
    let mut replayed = 0;
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    entries.sort();
    for path in entries {
        let raw = std::fs::read(&path).unwrap();
        let data = if path.extension().is_some_and(|e| e == "gz") {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut out).unwrap();
            out
        } else {
            raw
        };
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || harness(&data))
            .unwrap()
            .join()
            .unwrap_or_else(|_| panic!("{} panicked", path.display()));
        replayed += 1;
    }
    replayed
}

#[test]
fn load_regressions_replay() {
    let n = replay("load", beton_loader::fuzz::load);
    assert!(n >= 1, "no input replayed from fuzz/regressions/load");
}

#[test]
fn sql_regressions_replay() {
    let n = replay("sql", beton_query::fuzz::sql);
    assert!(n >= 5, "{n} inputs replayed from fuzz/regressions/sql");
}
