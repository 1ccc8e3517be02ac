//! Target `sql`: see `beton_query::fuzz::sql`, which holds the harness so that
//! `loader/tests/fuzz_regressions.rs` replays crash inputs (fuzz/regressions/sql/) through the
//! same code. Run: `bash fuzz/run.sh sql 1000000`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| beton_query::fuzz::sql(data));
