#!/usr/bin/env bash
# Builds beton's wheel with maturin and proves it installs and runs where nothing is compiled:
# a manylinux, abi3 wheel (libjpeg-turbo linked in statically: the extension needs only libc,
# libm and libgcc_s), installed with pip --only-binary :all: into a fresh venv (numpy and pyarrow
# from PyPI), then the Python quickstart (examples/quickstart.py) runs from outside the source
# tree against the installed package.
#
# Usage: bash scripts/wheel-check.sh [--release]
#   --release   what a release ships (`maturin build --release`); scripts/test.sh builds the dev
#               profile instead, which reuses the test build's artifacts (the packaging is the same).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
profile_flag=()
[ "${1:-}" = "--release" ] && profile_flag=(--release)
# The venv with maturin (BETON_VENV: scripts/test.sh passes its own; default the main job's).
build_venv="${BETON_VENV:-target/py-venv}"
py=$build_venv/bin/python
out=target/wheels
rm -rf "$out"
(cd python && VIRTUAL_ENV="$repo/$build_venv" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}" \
  "$repo/$py" -m maturin build "${profile_flag[@]}" --quiet --out "$repo/$out")
wheel=$(ls "$out"/beton-*.whl)
echo "built $wheel"
case "$(basename "$wheel")" in
  beton-*-cp39-abi3-manylinux_*_x86_64.whl) ;;
  *) echo "wheel-check: $(basename "$wheel") is not a manylinux abi3 x86_64 wheel" >&2; exit 1 ;;
esac
# The extension's dynamic dependencies: the C runtime only, no libjpeg/libturbojpeg.
"$py" - "$wheel" <<'PY'
import subprocess, sys, tempfile, zipfile
with tempfile.TemporaryDirectory() as tmp:
    with zipfile.ZipFile(sys.argv[1]) as z:
        so = [n for n in z.namelist() if n.endswith(".so")]
        assert so == ["beton/_native.abi3.so"], so
        z.extract(so[0], tmp)
    needed = [l.split("[")[1].rstrip("]") for l in subprocess.run(
        ["readelf", "-d", f"{tmp}/{so[0]}"], capture_output=True, text=True, check=True).stdout.splitlines()
        if "(NEEDED)" in l]
allowed = {"libc.so.6", "libm.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "libpthread.so.0", "libdl.so.2"}
assert set(needed) <= allowed, f"the extension needs {sorted(set(needed) - allowed)}"
print("extension needs only", ", ".join(needed))
PY
venv=target/wheel-venv
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary :all: "$wheel[arrow]"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && "$repo/$venv/bin/python" -I -c "import beton, sys; assert beton.__file__.startswith(sys.prefix), beton.__file__" \
  && "$repo/$venv/bin/python" -I "$repo/examples/quickstart.py" "$tmp/out")
echo "wheel-check: ok"
