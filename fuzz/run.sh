#!/usr/bin/env bash
# Runs one fuzz target for RUNS executions (default 1,000,000) on its seeded corpus:
#   bash fuzz/run.sh open_read|load|sql|jpeg [RUNS] [extra libFuzzer flags...]
# Uses cargo-fuzz (installed with `cargo install cargo-fuzz` when missing) on the pinned stable
# toolchain: RUSTC_BOOTSTRAP=1 lets it pass its -Z flags. Address sanitizer on (unsafe SIMD and
# FFI are what it is for). A crash input lands in fuzz/artifacts/TARGET/; once fixed, copy it
# to fuzz/regressions/TARGET/ (replayed by loader/tests/fuzz_regressions.rs and, for open_read,
# storage/tests/integration/corrupt.rs).
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?target: open_read, load, sql or jpeg}
runs=${2:-1000000}
shift $(( $# >= 2 ? 2 : 1 ))
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
bash seed.sh >/dev/null
export RUSTC_BOOTSTRAP=1
max_len=65536
[ "$target" = sql ] && max_len=4096
cargo fuzz run "$target" "corpus/$target" -- -runs="$runs" -max_len="$max_len" -timeout=30 \
  -rss_limit_mb=4096 -print_final_stats=1 "$@"
