#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this): formatting, lints, every test of
# every crate, the Python package. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CARGO_TERM_COLOR=never
# No incremental caches (GBs on disk for a build that runs once); a developer's own `cargo test`
# keeps them.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# One target dir for the workspace, the Python extension and the fuzz target (CARGO_TARGET_DIR
# when set, so a checkout can share another's build cache).
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
step() { echo; echo "== $* == ($((SECONDS - t0)) s so far)"; }
t0=$SECONDS
step "cargo fmt --check"
cargo fmt --all --check
step "no import cycles between the files of any crate (scripts/module-cycles.py)"
for crate in storage/src dataset/src query/src loader/src python/src testkit/src src; do
  python3 scripts/module-cycles.py "$crate"
done
step "feature sets: the Python and CUDA builds reuse the workspace's artifacts"
python3 scripts/check-feature-sets.py
# Clippy runs inside the build: clippy-driver compiles our crates (as `cargo clippy` runs it,
# through RUSTC_WORKSPACE_WRAPPER, but for the real build instead of a `cargo check` of its own),
# so `-D warnings` costs no second pass over the ~400 dependencies (a separate clippy step took
# 520 s of a fresh clone's 2,511 s run on the 2-core VM). Every cargo and maturin build below
# inherits it: the wrapper is part of our crates' fingerprints, so they all reuse one build.
# Dependencies are compiled by plain rustc as before. Set unconditionally: another wrapper
# would skip the lints.
export RUSTC_WORKSPACE_WRAPPER=clippy-driver
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
step "cargo build of every target, clippy -D warnings on our crates"
# Every target `cargo clippy --all-targets` lints: tests (lib and bin unit tests, integration
# tests), benches (built, not run) and examples. The Python extension's lib (test = false) is
# linted where maturin builds it below.
cargo test --workspace --tests --bench '*' --examples --no-run --quiet
step "cargo test (workspace)"
mkdir -p target
cargo test --workspace --quiet 2>&1 | tee target/test-output.log
# Disk. CI machines share a disk whose free space varies (under 10 GB seen, after the build) and
# torch's install needs ~6 GB at its peak: what nothing later runs goes as soon as it is not
# needed, where the disk is short. (1) Now: the test executables of the workspace (GBs; relinked,
# not recompiled, by the next `cargo test`) and the examples'.
free_gb() { df -Pk "$target_dir" | awk 'NR == 2 { print int($4 / 1048576) }'; }
if [ "$(free_gb)" -lt "${BETON_PRUNE_BELOW_GB:-20}" ]; then
  before=$(free_gb)
  pruned=$( { find "$target_dir/debug/deps" "$target_dir/debug/examples" -maxdepth 1 -type f -perm -u+x ! -name '*.*' -print -delete 2>/dev/null || true; } | wc -l)
  echo "disk: ${before} GB free; removed $pruned test and example executables ($(free_gb) GB free now)"
fi
step "python: the tests' venv (torch comes last), beton._native built into it (maturin, shared target dir)"
# The tests' own venv, holding a debug build of the extension: target/py-venv, where the main
# job and users run, keeps its release build (a debug build there made every figure ~7x worse).
venv=target/test-venv
py=$venv/bin/python
[ -x "$py" ] || python3 -m venv "$venv"
pip_install() { "$py" -m pip install --quiet --disable-pip-version-check --no-cache-dir "$@"; }
# No pip cache (a GB of wheels kept for nothing on a CI machine).
pip_install -r python/requirements-test.txt
# torch's plan: what pip would install for it (pip's dry run reads the wheels' metadata, not the
# wheels; an empty plan once torch is in the venv). Installed one wheel at a time below: pip
# fetches every wheel before it unpacks any, and torch with its CUDA libraries is 2.9 GB
# compressed and 5.3 GB unpacked (a peak of 8.2 GB in one call, 6.2 GB one at a time).
plan=target/torch-plan.txt
pip_install --dry-run --report target/torch-plan.json -r python/requirements-torch.txt
"$py" - target/torch-plan.json > "$plan" <<'PY'
import json, sys
for p in reversed(json.load(open(sys.argv[1]))["install"]):
    print(f"{p['metadata']['name']}=={p['metadata']['version']}")
PY
(cd python && VIRTUAL_ENV="$PWD/../$venv" CARGO_TARGET_DIR="$target_dir" "../$py" -m maturin develop --quiet)
step "python: stubs checked against the built module (mypy.stubtest), then the wheel in a fresh venv"
(cd python && "../$py" -m mypy.stubtest beton --mypy-config-file mypy.ini)
BETON_VENV="$venv" bash scripts/wheel-check.sh
# (The wheel's venv, ~300 MB, is for benchmarks run by hand; nothing below uses it.)
rm -rf target/wheel-venv
# The GPU path (feature `cuda`, docs/GPU.md) builds without CUDA (cudarc loads the driver at run
# time). Its `gpu_*` tests need a device: without one each prints "SKIPPED: ..." and the summary
# below counts it as skipped, not passed. The default build above stays free of cudarc. NVRTC
# comes from torch's plan (nvidia-cuda-nvrtc-cu12, the version torch pins): with it on the library
# path the kernel is compiled to PTX and checked, with no GPU.
step "feature cuda: unit tests, GPU tests (skipped without a device), clippy as they build"
nvrtc=$(grep -E '^nvidia-cuda-nvrtc-cu12==' "$plan" || true)
[ -z "$nvrtc" ] || pip_install --no-deps "$nvrtc"
# (With storage's `remote` feature as the workspace build has it, and every other feature set
# equal to it (scripts/check-feature-sets.py): only beton-loader itself is compiled again. The
# code behind the feature is in the lib and tests/gpu.rs, both linted as these build them.)
cuda_features="cuda,beton-storage/remote"
cargo test -p beton-loader --features "$cuda_features" --lib --quiet gpu:: 2>&1 | tee target/cuda-test-output.log
nvrtc_dir=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib 2>/dev/null | head -n 1 || true)
ld_path="${LD_LIBRARY_PATH:-}"
if [ -n "$nvrtc_dir" ]; then ld_path="$PWD/$nvrtc_dir${ld_path:+:$ld_path}"; fi
LD_LIBRARY_PATH="$ld_path" cargo test -p beton-loader --features "$cuda_features" --test gpu -- --nocapture --test-threads=1 2>&1 | tee -a target/cuda-test-output.log
grep -q "^test result: ok" target/cuda-test-output.log && ! grep -qE "^test result: FAILED" target/cuda-test-output.log
echo "GPU tests skipped (no CUDA device or NVRTC): $(grep -oE 'SKIPPED: (gpu|nvrtc)_' target/cuda-test-output.log | wc -l)"
# The fuzz targets (fuzz/, a workspace of its own built by cargo-fuzz when fuzzing) are one-line
# calls of harnesses in our crates: loader/tests/fuzz_regressions.rs compiles each harness and
# checks that every target is that one line, so they need no build of their own here.
step "python: torch, then pytest"
# Disk (2): nothing compiled is needed any more but the CLI (test_growing_dataset.py runs it).
# Where torch is still to come and the disk is short, the build goes (the next run compiles
# again: ~24 min on 2 cores).
if [ -s "$plan" ] && [ "$(free_gb)" -lt "${BETON_TORCH_NEEDS_GB:-12}" ]; then
  before=$(free_gb)
  if [ -x "$target_dir/debug/beton" ]; then mv "$target_dir/debug/beton" "$target_dir/beton-cli"; fi
  rm -rf "$target_dir/debug"
  mkdir -p "$target_dir/debug"
  if [ -x "$target_dir/beton-cli" ]; then mv "$target_dir/beton-cli" "$target_dir/debug/beton"; fi
  echo "disk: ${before} GB free, torch to install; removed the build but the CLI ($(free_gb) GB free now)"
fi
# torch (CPU use): without it the DDP and ToTensor tests cannot run, and BETON_REQUIRE_TORCH=1
# makes them fail rather than skip (python/tests/conftest.py).
t_torch=$SECONDS
while read -r req; do pip_install --no-deps "$req" < /dev/null; done < "$plan"
pip_install -r python/requirements-torch.txt
echo "torch ready ($((SECONDS - t_torch)) s)"
# Debian's chromium (headless) renders a gallery page in python/tests/test_gallery.py;
# BETON_REQUIRE_BROWSER=1 makes that test fail rather than skip without it.
if ! command -v chromium >/dev/null 2>&1; then
  echo "[test] installing chromium (apt-get) for the gallery's browser test" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >&2
fi
BETON_REQUIRE_BROWSER=1 BETON_REQUIRE_TORCH=1 BETON_REQUIRE_MOTO=1 BETON_REQUIRE_RAY=1 "$py" -m pytest -q -p no:cacheprovider -rs python/tests 2>&1 | tee target/pytest-output.log
grep -qE "^[0-9]+ passed" target/pytest-output.log && ! grep -qE "[0-9]+ (failed|error)" target/pytest-output.log
echo
echo "all checks passed in $((SECONDS - t0)) s"
# One closing line for the whole suite (every crate's test binaries summed).
# Rust: "test result: ok. N passed; M failed; K ignored"; pytest: "N passed, K skipped in 1.0s";
# a test that printed "SKIPPED: <test>: <why>" (a GPU test without a device or NVRTC, a SIMD
# test on a CPU without its instructions) passed in libtest's count: moved to skipped
# (libtest's "test x ... " or --quiet's dots may precede it on its line).
awk '{ n = gsub(/SKIPPED: [A-Za-z0-9_]+: /, "&"); p -= n; s += n }
     /^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1); if ($i ~ /^ignored;?$/) s += $(i-1) } }
     /^[0-9]+ passed/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed,?$/) p += $(i-1); if ($i ~ /^(failed|errors?),?$/) f += $(i-1); if ($i ~ /^skipped,?$/) s += $(i-1) } }
     END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' target/test-output.log target/cuda-test-output.log target/pytest-output.log
