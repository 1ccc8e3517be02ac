#!/usr/bin/env bash
# The main job on the bundled real data: writes the bundled ImageFolder photos
# (examples/data/imagefolder, 155 photos in 6 classes, NOTICE beside them) into a .beton file
# that FFCV 1.0.2 opens as is, then prints `beton info` and checks it with `beton verify`.
# Installs what it needs first. Output: target/beton-main-job/imagefolder.beton
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --quiet --bin beton
out=target/beton-main-job
mkdir -p "$out"
beton=target/release/beton
"$beton" write-imagefolder examples/data/imagefolder "$out/imagefolder.beton" \
  --mode jpg --max-resolution 256 --quality 90 --with-path
echo
"$beton" info "$out/imagefolder.beton"
echo
"$beton" verify --decode-images "$out/imagefolder.beton"
