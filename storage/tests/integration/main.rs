//! beton-storage integration tests, one binary (`cargo test -p beton-storage --test integration`):
//! FFCV's golden fixtures, byte-exact layouts, round trips, corrupt files, writer guarantees. The
//! data they read (tests/data, examples/data, fuzz/regressions) is the repository's, shared with
//! the other crates' tests ([`common::repo_root`]).

mod alpha;
mod common;
mod corrupt;
mod fixtures;
mod page_size;
mod robust;
mod roundtrip;
mod verify;
mod writer;
