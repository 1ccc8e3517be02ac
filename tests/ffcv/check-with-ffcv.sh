#!/usr/bin/env bash
# Proves that the real FFCV 1.0.2 reads what beton writes: writes every kind of file with
# examples/ffcv_compat.rs, loads each with FFCV's Reader and Loader (tests/ffcv/ffcv-load.py),
# and compares every value FFCV sees with beton's own view.
#
# Not part of CI (FFCV's environment downloads ~3 GB). Usage, from the repo root:
#   bash tests/ffcv/check-with-ffcv.sh [OUT_DIR]
# FFCV's venv comes from tests/ffcv/ffcv-env.sh (made at the first run, reused after).
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
tools="$here/tests/ffcv"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
PY="$(bash "$tools/ffcv-env.sh" | tail -n1)"
cargo run --quiet --release --example ffcv_compat -- "$out" > "$out/files.txt"
status=0
while read -r file; do
  args=()
  while IFS= read -r c || [ -n "$c" ]; do [ -n "$c" ] && args+=(--custom "$c"); done < "${file%.beton}.custom"
  if ! "$PY" "$tools/ffcv-load.py" "$file" --json "$file.ffcv.json" "${args[@]}"; then
    status=1; continue
  fi
  "$PY" - "${file%.beton}.beton.json" "$file.ffcv.json" <<'PYEOF' || status=1
import json, sys
beton, ffcv = (json.load(open(p)) for p in sys.argv[1:3])
bad = []
for key in ("metadata_row_size", "alloc_table_entries"):
    if beton[key] != ffcv[key]:
        bad.append(f"{key}: beton {beton[key]} ffcv {ffcv[key]}")
for key, val in beton["header"].items():
    if ffcv["header"][key] != val:
        bad.append(f"header.{key}: beton {val} ffcv {ffcv['header'][key]}")
for i, (b, f) in enumerate(zip(beton["samples"], ffcv["samples"])):
    for name, bv in b.items():
        fv = f[name]
        if isinstance(bv, dict) and "repr" in bv:     # floats: compare values, not spellings
            same = float(bv["repr"]) == float(fv["repr"])
        elif isinstance(bv, dict):
            same = all(fv.get(k) == v for k, v in bv.items())
        else:
            same = bv == fv
        if not same:
            bad.append(f"sample {i} field {name}: beton {bv} ffcv {fv}")
if len(beton["samples"]) != len(ffcv["samples"]):
    bad.append("sample counts differ")
print(f"  {sys.argv[1]}: {len(beton['samples'])} samples, " + ("MISMATCH" if bad else "every value identical in FFCV"))
for b in bad[:10]:
    print("   ", b)
sys.exit(1 if bad else 0)
PYEOF
done < "$out/files.txt"
# A versioned dataset directory (docs/FORMAT.md §13): every data file it holds and an export of an
# edited version load in FFCV, and FFCV sees the edited labels.
cargo build --quiet --release --bin beton
beton="${CARGO_TARGET_DIR:-$here/target}/release/beton"
ds="$out/versioned.dataset"
rm -rf "$ds"
"$beton" write-imagefolder "$here/examples/data/imagefolder" "$out/photos.beton" --max-resolution 64 > /dev/null
"$beton" import "$ds" "$out/photos.beton" > /dev/null
"$beton" append "$ds" "$out/photos.beton" > /dev/null
"$beton" update "$ds" --set "label=label + 10" --where "label = 2" > /dev/null
"$beton" delete "$ds" "index % 7 = 0" > /dev/null
"$beton" add-column "$ds" wide "image.width > image.height" > /dev/null
"$beton" export "$ds" "$out/versioned-export.beton" > /dev/null
for file in "$ds"/data/*.beton "$out/versioned-export.beton"; do
  args=(); [ "$file" = "$out/versioned-export.beton" ] && args=(--custom "wide=|u1")
  if ! "$PY" "$tools/ffcv-load.py" "$file" --json "$file.ffcv.json" "${args[@]}"; then status=1; continue; fi
done
"$PY" - "$out/versioned-export.beton.ffcv.json" <(cd "$here" && "$beton" query "$ds" "SELECT label FROM samples" --json) <<'PYEOF' || status=1
import json, sys
ffcv = [s["label"] for s in json.load(open(sys.argv[1]))["samples"]]
beton = [json.loads(line)["label"] for line in open(sys.argv[2]) if line.strip()]
ok = ffcv == beton and any(l >= 10 for l in ffcv)
print(f"  versioned export: {len(ffcv)} samples, " + ("FFCV sees the edited labels" if ok else "MISMATCH"))
sys.exit(0 if ok else 1)
PYEOF
# Edits of images and added NDArray and JSON columns (column files, from Python): the export
# holds them, and FFCV sees the replaced images' sizes and the arrays' bytes.
BPY="${BETON_PYTHON:-$here/target/py-venv/bin/python}"
"$BPY" - "$out" "$out/photos.beton" <<'PYEOF' || status=1
import hashlib, json, os, shutil, sys
import numpy as np
import beton
from beton.fields import JSONField, NDArrayField
out, photos = sys.argv[1:3]
d = os.path.join(out, "edited-fields.dataset")
shutil.rmtree(d, ignore_errors=True)
ds = beton.import_file(d, photos)
red = np.zeros((20, 30, 3), np.uint8); red[..., 0] = 255
ds.update_rows([1, 5], {"image": [red, red]})
n = len(ds)
ds.add_column("emb", [np.arange(4, dtype=np.float32) * i for i in range(n)], field=NDArrayField(np.float32, (4,)))
ds.add_column("meta", [{"i": i} for i in range(n)], field=JSONField())
ds.export(os.path.join(out, "edited-fields.beton"))
expected = [{"width": ds[i]["image"].shape[1], "height": ds[i]["image"].shape[0],
             "emb": hashlib.sha256((np.arange(4, dtype=np.float32) * i).tobytes()).hexdigest()} for i in range(n)]
json.dump(expected, open(os.path.join(out, "edited-fields.expected.json"), "w"))
PYEOF
if "$PY" "$tools/ffcv-load.py" "$out/edited-fields.beton" --json "$out/edited-fields.beton.ffcv.json"; then
  "$PY" - "$out/edited-fields.beton.ffcv.json" "$out/edited-fields.expected.json" <<'PYEOF' || status=1
import json, sys
ffcv, want = (json.load(open(p)) for p in sys.argv[1:3])
got = [{"width": s["image"]["width"], "height": s["image"]["height"], "emb": s["emb"]["sha256"]} for s in ffcv["samples"]]
ok = got == want and (got[1]["width"], got[1]["height"]) == (30, 20)
print(f"  edited image/NDArray/JSON export: {len(got)} samples, " + ("FFCV sees the edits" if ok else "MISMATCH"))
sys.exit(0 if ok else 1)
PYEOF
else
  status=1
fi
[ $status -eq 0 ] && echo "check-with-ffcv: OK, FFCV 1.0.2 reads every file beton wrote" || echo "check-with-ffcv: FAILED"
exit $status
