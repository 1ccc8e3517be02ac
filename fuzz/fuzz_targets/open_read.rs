//! Target `open_read`: see `beton_storage::fuzz::open_read` (open + read of arbitrary bytes must
//! never panic), which holds the harness so that storage/tests/integration/corrupt.rs replays
//! crash inputs (fuzz/regressions/open_read/) through the same option choice. Run:
//! `bash fuzz/run.sh open_read 1000000` (cargo-fuzz on the stable toolchain: `RUSTC_BOOTSTRAP=1`
//! lets it pass its `-Z` flags).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| beton_storage::fuzz::open_read(data));
