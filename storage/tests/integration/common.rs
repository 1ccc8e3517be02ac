//! Helpers shared by the integration tests: the repo's FFCV fixtures, decompressed on demand.

use std::io::Read;
use std::path::PathBuf;

/// The repository's root: the test data, examples and fuzz inputs are shared by every crate's
/// tests, so they live there, not in this crate.
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The repo's test data folder.
pub fn data_dir() -> PathBuf {
    repo_root().join("tests").join("data")
}

/// Names of every FFCV fixture (`NAME.beton.gz` in tests/data/ffcv).
pub fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir().join("ffcv"))
        .expect("tests/data/ffcv")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".beton.gz").map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 17, "fixtures missing: {names:?}");
    names
}

/// The decompressed bytes of fixture `name`.
pub fn fixture_bytes(name: &str) -> Vec<u8> {
    let gz = std::fs::read(data_dir().join("ffcv").join(format!("{name}.beton.gz"))).expect("fixture");
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut out).expect("gunzip");
    out
}

/// Fixture `name` decompressed into a temporary directory; returns (dir guard, path).
pub fn fixture_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{name}.beton"));
    std::fs::write(&path, fixture_bytes(name)).expect("write fixture");
    (dir, path)
}

/// `NAME.expected.json`.
pub fn expected(name: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(data_dir().join("ffcv").join(format!("{name}.expected.json"))).expect("json");
    serde_json::from_str(&text).expect("expected.json parses")
}

/// SHA-256 in hex.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Parses Python's `float.hex()` output (`-0x1.8p+0`, `inf`, `nan`) to the exact f64.
pub fn parse_py_float_hex(s: &str) -> f64 {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let v = match body {
        "inf" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            let body = body.strip_prefix("0x").expect("0x");
            let (mant, exp) = body.split_once('p').expect("p");
            let exp: i32 = exp.parse().expect("exponent");
            let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
            let int = u64::from_str_radix(int, 16).expect("int part");
            let frac_bits = if frac.is_empty() { 0 } else { u64::from_str_radix(frac, 16).expect("frac") };
            // value = (int + frac / 16^len) * 2^exp; exact for Python's 13-digit mantissas.
            let scale = 4 * frac.len() as i32;
            let m = (int << scale) | frac_bits;
            // Two exact power-of-two steps: 2^(exp - scale) alone underflows for subnormals.
            m as f64 * 2f64.powi(-scale) * 2f64.powi(exp)
        }
    };
    if neg {
        -v
    } else {
        v
    }
}
