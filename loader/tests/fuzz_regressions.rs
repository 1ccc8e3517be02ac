//! Inputs that once crashed (or would have crashed) a fuzz target stay harmless: every file in
//! fuzz/regressions/TARGET/ (gzipped when it ends in `.gz`) is replayed through the target's
//! harness (`beton_loader::fuzz`), on a thread with a 2 MiB stack like any worker's. The `jpeg`
//! target has found no crash, so it has no folder; its harness (which also holds beton's planes
//! decoder to libjpeg-turbo's planes, byte for byte) runs here over the edge-case JPEGs and
//! damaged copies of the bundled photos.

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

/// A fuzz target's name, the path of its harness as the target calls it, and the harness.
type Harness = (&'static str, &'static str, fn(&[u8]));

/// Every cargo-fuzz target (fuzz/Cargo.toml's `[[bin]]`s, fuzz/fuzz_targets/*.rs) is one line
/// calling its harness, and each harness named here is compiled by this test: CI builds the
/// fuzz workspace only when fuzzing (`fuzz/run.sh`), so this is what keeps the targets building
/// when a harness is renamed or its signature changes.
#[test]
fn every_fuzz_target_is_one_call_of_a_harness_this_workspace_compiles() {
    let harnesses: [Harness; 4] = [
        ("open_read", "beton_storage::fuzz::open_read", beton_storage::fuzz::open_read),
        ("load", "beton_loader::fuzz::load", beton_loader::fuzz::load),
        ("jpeg", "beton_loader::fuzz::jpeg", beton_loader::fuzz::jpeg),
        ("sql", "beton_query::fuzz::sql", beton_query::fuzz::sql),
    ];
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    let mut bins: Vec<(String, String)> = manifest
        .split("[[bin]]")
        .skip(1)
        .map(|table| {
            let value = |key: &str| {
                let line = table.lines().find(|l| l.trim_start().starts_with(&format!("{key} ="))).unwrap();
                line.split('"').nth(1).unwrap().to_string()
            };
            (value("name"), value("path"))
        })
        .collect();
    bins.sort();
    let mut files: Vec<String> = std::fs::read_dir(fuzz.join("fuzz_targets"))
        .unwrap()
        .map(|e| format!("fuzz_targets/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    files.sort();
    let mut paths: Vec<String> = bins.iter().map(|(_, path)| path.clone()).collect();
    paths.sort();
    assert_eq!(paths, files, "fuzz/Cargo.toml's [[bin]] paths and fuzz/fuzz_targets/ differ");
    let mut names: Vec<&str> = harnesses.iter().map(|h| h.0).collect();
    names.sort();
    assert_eq!(
        bins.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(),
        names,
        "targets and harnesses"
    );
    for (name, harness, run) in harnesses {
        let path = &bins.iter().find(|(n, _)| n == name).unwrap().1;
        let source = std::fs::read_to_string(fuzz.join(path)).unwrap();
        let code: Vec<&str> =
            source.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")).collect();
        let want = [
            "#![no_main]".to_string(),
            "use libfuzzer_sys::fuzz_target;".to_string(),
            format!("fuzz_target!(|data: &[u8]| {harness}(data));"),
        ];
        assert_eq!(code, want, "fuzz/{path}: not a one-line call of {harness}");
        // The harness takes any bytes: the empty input returns.
        run(&[]);
    }
}

#[test]
fn the_jpeg_harness_takes_the_edge_corpus_and_damaged_photos() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    let mut sources = Vec::new();
    for dir in ["tests/data/edge-jpegs", "examples/data/imagefolder/fish"] {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(root.join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        sources.extend(files.into_iter().filter(|p| p.extension().is_some_and(|e| e == "jpg")));
    }
    // Damage: a few bytes of the scan changed, the data cut short, a marker inserted (a fixed
    // generator, so that a failure replays).
    let mut next = beton_testkit::xorshift(0x2545_f491_4f6c_dd1d);
    for path in &sources {
        let jpeg = std::fs::read(path).unwrap();
        inputs.push(jpeg.clone());
        if path.to_string_lossy().contains("imagefolder") {
            for round in 0..12 {
                let mut bad = jpeg.clone();
                let from = bad.len() / 4;
                let at = from + (next() as usize) % (bad.len() - from);
                match round % 3 {
                    0 => bad[at] ^= 1 << (next() % 8),
                    1 => bad.truncate(at),
                    _ => bad.splice(at..at, [0xFF, (next() % 256) as u8]).for_each(drop),
                }
                inputs.push(bad);
            }
        }
    }
    assert!(inputs.len() > 100, "{}", inputs.len());
    for (k, jpeg) in inputs.into_iter().enumerate() {
        // The harness's 5-byte prefix: a size (any; the decoders check it against the JPEG's)
        // and the mode (JPEG, RGB).
        let mut data = vec![0x40, 0x01, 0x00, 0x01, 0];
        data.extend_from_slice(&jpeg);
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || beton_loader::fuzz::jpeg(&data))
            .unwrap()
            .join()
            .unwrap_or_else(|_| panic!("input {k} panicked"));
    }
}
