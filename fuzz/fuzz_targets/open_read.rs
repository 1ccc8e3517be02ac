//! Open + read of arbitrary bytes must never panic: `Dataset` validation, every field of the
//! first samples (images decoded), the allocation index, `Summary` and `verify`.
//!
//! Run: `bash fuzz/run.sh open_read 1000000` (cargo-fuzz on the stable toolchain:
//! `RUSTC_BOOTSTRAP=1` lets it pass its `-Z` flags). CI type-checks it without cargo-fuzz:
//! `cargo check --manifest-path fuzz/Cargo.toml`. A crash input, once fixed, goes to
//! fuzz/regressions/open_read/, replayed by storage/tests/integration/corrupt.rs (`fuzz_input`
//! there mirrors the option choice below).

#![no_main]

use beton_storage::{OpenOptions, Summary};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the options, so custom-field files are explored too.
    let (options, bytes) = match data.split_first() {
        Some((b, rest)) if b % 2 == 1 => {
            (OpenOptions::new().custom_layout("ext", (*b as usize) % 17, 1 << ((b >> 1) % 4)), rest)
        }
        Some((_, rest)) => (OpenOptions::new(), rest),
        None => (OpenOptions::new(), data),
    };
    let Ok(ds) = options.open_bytes(bytes.to_vec()) else { return };
    for i in 0..ds.num_samples().min(16) {
        for k in 0..ds.fields().len() {
            if let Ok(v) = ds.get(i, k) {
                if let Some(img) = v.as_image() {
                    let _ = img.decode();
                }
            }
        }
        let _ = ds.sample_allocations(i);
    }
    if ds.num_samples() <= 4096 {
        let _ = Summary::of(&ds);
        let _ = beton_storage::verify(&ds, false);
    }
});
