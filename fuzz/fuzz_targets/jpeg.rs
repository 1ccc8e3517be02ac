//! Target `jpeg`: see `beton_loader::fuzz::jpeg`, which holds the harness so that a crash
//! input (none found so far) can be replayed by a test through the same code. Run:
//! `bash fuzz/run.sh jpeg 1000000`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| beton_loader::fuzz::jpeg(data));
