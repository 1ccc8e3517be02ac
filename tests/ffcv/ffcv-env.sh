#!/usr/bin/env bash
# ffcv-env.sh -- create (or reuse) a Python venv holding the REAL FFCV 1.0.2,
# used to write ground-truth .beton fixtures and to check files written by
# other implementations (see ffcv-fixtures.py and ffcv-load.py beside this file).
# Copied from the project's shared tools (shared/tools/ffcv-env.sh), unchanged but for the
# paths in this comment; tests/ffcv/check-with-ffcv.sh runs it.
#
# Usage:  bash tests/ffcv/ffcv-env.sh          # prints the venv's python path last
#         FFCV_VENV=/some/dir bash tests/ffcv/ffcv-env.sh
#         PY=$(bash tests/ffcv/ffcv-env.sh | tail -n1)
#
# Idempotent: system packages are installed only when missing, the venv is
# reused, and pip runs only when the pinned versions below are not all present.
# Needs root (or sudo) for apt-get when system packages are missing.
# Debian 12 (bookworm), CPython 3.11, x86_64. Downloads ~3 GB the first time
# (torch from the Python package index pulls the CUDA runtime wheels; the
# CPU-only build is not on that index, and `pip install --no-deps torch` then
# fails at `import torch` with "libcudart.so.12: cannot open shared object").
set -euo pipefail

VENV="${FFCV_VENV:-$HOME/.cache/beton-ffcv-venv}"
BASE_PY="${FFCV_BASE_PYTHON:-python3}"

# ---- pinned versions (verified together on Debian 12 / CPython 3.11.7) ----
PINS=(
  "numpy==1.26.4"
  "numba==0.60.0"
  "llvmlite==0.43.0"
  "torch==2.2.2"
  "torchvision==0.17.2"
  "opencv-python==4.9.0.80"
  "pillow==10.4.0"
  "terminaltables==3.1.10"
  "pytorch-pfn-extras==0.7.7"
  "fastargs==1.2.0"
  "assertpy==1.1"
  "tqdm==4.66.5"
  "psutil==6.0.0"
)
FFCV_PIN="ffcv==1.0.2"

log() { echo "[ffcv-env] $*" >&2; }

# ---- 1. system packages (headers + libs that ffcv's C extension links) ----
SYS_PKGS=(pkg-config g++ libopencv-dev libturbojpeg0-dev)
missing=()
for p in "${SYS_PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  log "installing system packages: ${missing[*]}"
  $SUDO apt-get update >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi
pkg-config --exists opencv4 || { log "pkg-config cannot find opencv4"; exit 1; }
pkg-config --exists libturbojpeg || { log "pkg-config cannot find libturbojpeg"; exit 1; }

# ---- 2. the venv ----
if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv at $VENV"
  "$BASE_PY" -m venv "$VENV"
fi
PY="$VENV/bin/python"

# ---- 3. python packages (only if the pinned set is not already there) ----
check_pins() {
  "$PY" - "$FFCV_PIN" "${PINS[@]}" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
bad = []
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have != want:
        bad.append(f"{name}: have {have}, want {want}")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
EOF
}

if ! check_pins; then
  log "installing pinned python packages into $VENV"
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  "$PY" -m pip install -q "${PINS[@]}" >&2
  # ffcv 1.0.2 is an sdist only: it builds ffcv/_libffcv (C++) against the
  # system opencv4 + libturbojpeg found by pkg-config. Its setup.py lists no
  # pins and imports PIL without declaring it; the constraints keep pip from
  # moving the pins above.
  CONSTRAINTS="$(mktemp)"
  printf '%s\n' "${PINS[@]}" > "$CONSTRAINTS"
  "$PY" -m pip install -q -c "$CONSTRAINTS" "$FFCV_PIN" >&2
  rm -f "$CONSTRAINTS"
  check_pins || { log "pinned versions still not satisfied"; exit 1; }
fi

# ---- 4. smoke test: imports + the C extension loads ----
"$PY" - <<'EOF' >&2
import ffcv, ffcv.libffcv, ffcv.writer, ffcv.loader, ffcv.fields, numpy, torch, cv2, numba
from importlib.metadata import version
print("[ffcv-env] ok: ffcv", version("ffcv"), "numpy", numpy.__version__,
      "numba", numba.__version__, "torch", torch.__version__, "cv2", cv2.__version__)
EOF

echo "$PY"
