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
mkdir -p target
cargo test --workspace --quiet 2>&1 | tee target/test-output.log
step "fuzz target builds (plain cargo, shared target dir)"
CARGO_TARGET_DIR="$PWD/target" cargo build --quiet --manifest-path fuzz/Cargo.toml
echo
echo "all checks passed in $((SECONDS - t0)) s"
# One closing line for the whole suite (every crate's test binaries summed).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1); if ($i ~ /^ignored;?$/) s += $(i-1) } }
     END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' target/test-output.log
