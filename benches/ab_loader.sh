#!/usr/bin/env bash
# A/B of the loader's throughput between two `beton` binaries (e.g. a commit and its parent),
# interleaved so that both see the same machine state: for each file, ROUNDS rounds of
# `beton bench` with A then B (B then A on odd rounds), median samples/s of epochs 1.. of each
# run, and the median of the per-round ratios B/A.
#
#   bash benches/ab_loader.sh BETON_A BETON_B ROUNDS FILE[:BENCH ARGS] ...
#
# Example (issue 18's cost of the SIGBUS guard and the per-batch checks):
#   git worktree add /tmp/base HEAD~1 && (cd /tmp/base && cargo build --release --bin beton)
#   cargo build --release --bin beton
#   bash benches/ab_loader.sh /tmp/base/target/release/beton target/release/beton 7 \
#     "blob.beton:--order random --batch-size 64 --epochs 12" \
#     "img.beton:--images rrc:160 --order quasi-random --batch-size 256 --epochs 4" \
#     "ffcv.beton:--images rrc:160 --order quasi-random --batch-size 256 --epochs 4"
#
# Every change to the image path is measured on two files: beton's own (a restart marker every
# MCU) and one FFCV wrote, the file most users start from (no restart markers). Make the latter
# with FFCV 1.0.2 (`benches/python_loader_ab.py --ffcv-written DIR --ffcv-python PY` writes it the
# same way) or, without FFCV's venv, in the same layout with
#   beton write-imagefolder DIR ffcv.beton --mode jpg --quality 90 --max-resolution 256 \
#     --restart-interval 0 --no-passthrough
set -euo pipefail
# shellcheck source=benches/ab_rounds.sh
source "$(dirname "$0")/ab_rounds.sh"
a=$1 b=$2 rounds=$3
shift 3
# Median samples/s over epochs 1.. (epoch 0 warms the page cache) of one `beton bench` run.
rate() {
  local bin=$1 file=$2
  shift 2
  "$bin" bench "$file" --threads 2 "$@" | awk '$1 ~ /^[0-9]+$/ && $1 > 0 { print $3 }' | median
}
for spec in "$@"; do
  file=${spec%%:*}
  args=${spec#*:}
  [ "$args" = "$spec" ] && args=""
  # shellcheck disable=SC2086
  ab_rounds rate "$a" "$b" "$rounds" "$file" $args
  echo "$file [$args]: A ${ab_a} samples/s, B ${ab_b} samples/s, B/A median of ${rounds} rounds ${ab_ratio} (rounds: ${ab_ratios[*]})"
done
