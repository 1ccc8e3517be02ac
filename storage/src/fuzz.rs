//! The fuzz harness of target `open_read` (`fuzz/fuzz_targets/open_read.rs`), here so that the
//! regression test (`storage/tests/integration/corrupt.rs`) replays crash inputs through the
//! same option choice, and so that the workspace's build type-checks what the target runs
//! (`loader/tests/fuzz_regressions.rs` checks that every target is a one-line call of its
//! harness). It must return (any result is fine) and never panic, abort, hang or raise a
//! signal, whatever `data` holds.

use crate::{OpenOptions, Summary};

/// The target's choice of options: an odd first byte `b` declares the custom field "ext" with
/// size `b % 17` and alignment `1 << ((b >> 1) % 4)` (so that custom-field files are explored
/// too); the rest is the file.
pub fn options(data: &[u8]) -> (OpenOptions, &[u8]) {
    match data.split_first() {
        Some((b, rest)) if b % 2 == 1 => {
            (OpenOptions::new().custom_layout("ext", (*b as usize) % 17, 1 << ((b >> 1) % 4)), rest)
        }
        Some((_, rest)) => (OpenOptions::new(), rest),
        None => (OpenOptions::new(), data),
    }
}

/// Target `open_read`: open and read of arbitrary bytes: `Dataset` validation, every field of
/// the first 16 samples (images decoded), their allocations, and for up to 4,096 samples
/// [`Summary`] and [`verify`](crate::verify).
pub fn open_read(data: &[u8]) {
    let (options, bytes) = options(data);
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
        let _ = crate::verify(&ds, false);
    }
}
