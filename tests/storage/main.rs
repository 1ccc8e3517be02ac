//! beton-storage integration tests, one binary: FFCV's golden fixtures, byte-exact layouts,
//! round trips, corrupt files, writer guarantees.

mod common;
mod corrupt;
mod fixtures;
mod robust;
mod roundtrip;
mod verify;
mod writer;
