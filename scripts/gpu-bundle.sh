#!/usr/bin/env bash
# Builds the GPU tests (loader/tests/gpu.rs, feature `cuda`) here and leaves one stripped,
# self-contained binary (about 9 MB, links only libc) at target/gpu-bundle/gpu-tests, for a
# device machine that has no network and no Rust: carry `target/gpu-bundle` there and run
#   BETON_REQUIRE_GPU=1 target/gpu-bundle/gpu-tests --nocapture --test-threads=1
# (docs/GPU.md). Uses CARGO_TARGET_DIR when set, like scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cargo test -p beton-loader --features cuda --test gpu --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "gpu" and m.get("executable"):
        print(m["executable"])')
mkdir -p target/gpu-bundle
strip -o target/gpu-bundle/gpu-tests "$bin"
ls -l target/gpu-bundle/gpu-tests
