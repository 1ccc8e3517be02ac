#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this): formatting, lints, every test of
# every crate, and a build of the fuzz target. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CARGO_TERM_COLOR=never
step() { echo; echo "== $* =="; }
t0=$SECONDS
step "cargo fmt --check"
cargo fmt --all --check
step "cargo clippy (all targets, -D warnings)"
cargo clippy --workspace --all-targets --quiet -- -D warnings
step "cargo test (workspace)"
cargo test --workspace --quiet 2>&1 | tee /tmp/beton-test.log
step "fuzz target builds (plain cargo, shared target dir)"
CARGO_TARGET_DIR="$PWD/target" cargo build --quiet --manifest-path fuzz/Cargo.toml
echo
echo "all checks passed in $((SECONDS - t0)) s"
