//! Target `load`: see `beton_loader::fuzz::load`, which holds the harness so that
//! `loader/tests/fuzz_regressions.rs` replays crash inputs (fuzz/regressions/load/) through the
//! same code. Run: `bash fuzz/run.sh load 1000000`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| beton_loader::fuzz::load(data));
