#!/usr/bin/env bash
# The main job on the bundled real data. Installs what it needs first.
#  1. CLI: writes the bundled ImageFolder photos (examples/data/imagefolder, 155 photos in 6
#     classes, NOTICE beside them) into a .beton file that FFCV 1.0.2 opens as is, prints
#     `beton info`, checks it with `beton verify`, stores a stratified split in it, queries it and
#     writes a gallery of its validation split (a self-contained page and a PNG contact sheet).
#  2. Python (examples/main_job.py): Fashion-MNIST's test split and the photos to .beton, a query
#     picks the subset, a small model trains on it with beton's Loader: accuracy, images/s and
#     where the time went. The model is a torch MLP (CPU): the job installs torch into
#     target/py-venv (python/requirements-torch.txt); main_job.py falls back to numpy without it.
#     Then a curation session on a versioned dataset directory: suspects found with SQL over the
#     model's predictions (two added columns), 5 relabelled, 3 deleted, 20 new images appended by
#     DatasetWriter, training again on the new version, the log, the diff, and version 1 again.
#  3. CLI: `beton log`, `diff`, `info` and a query on that dataset directory.
# Output: target/beton-main-job/
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# CARGO_TARGET_DIR when set (a checkout sharing another's build cache), else target/.
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --quiet --bin beton
out=target/beton-main-job
mkdir -p "$out"
beton="$target_dir/release/beton"
"$beton" write-imagefolder examples/data/imagefolder "$out/imagefolder.beton" \
  --mode jpg --max-resolution 256 --quality 90 --with-path
echo
"$beton" info "$out/imagefolder.beton"
echo
"$beton" verify --decode-images "$out/imagefolder.beton"
echo
"$beton" split random "$out/imagefolder.beton" train=0.8 val=0.2 --seed 0 --stratify label
"$beton" query "$out/imagefolder.beton" \
  "SELECT label, count(*) AS photos, avg(image.width) AS mean_width FROM samples WHERE in_split('val') GROUP BY label ORDER BY label"
# A look at the validation split: one page to open in a browser, one contact sheet.
"$beton" gallery "$out/imagefolder.beton" "in_split('val')" --by label --n 6 \
  --out "$out/val-gallery.html" --png "$out/val-gallery.png"

echo
echo "== Python =="
py=target/py-venv/bin/python
[ -x "$py" ] || python3 -m venv target/py-venv
"$py" -m pip install --quiet --disable-pip-version-check maturin numpy pyarrow tqdm
# The same torch as the tests (a no-op once installed; ~70 s the first time, CUDA libraries included).
"$py" -m pip install --quiet --disable-pip-version-check --no-cache-dir -r python/requirements-torch.txt
(cd python && VIRTUAL_ENV="$PWD/../target/py-venv" CARGO_TARGET_DIR="$target_dir" \
  ../target/py-venv/bin/maturin develop --release --quiet)
"$py" examples/main_job.py "$out"
# The curation session main_job.py ran, seen from the CLI: its versions, what changed, the latest.
echo
echo "== the curated dataset, from the CLI =="
"$beton" log "$out/fashion-mnist.dataset"
"$beton" diff "$out/fashion-mnist.dataset" 1
"$beton" info "$out/fashion-mnist.dataset"
"$beton" query "$out/fashion-mnist.dataset" "SELECT label, count(*) AS n, avg(score) AS confidence FROM samples WHERE in_split('val') GROUP BY label ORDER BY label"
