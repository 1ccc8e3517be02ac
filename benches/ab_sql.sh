#!/usr/bin/env bash
# A/B of SQL between two `beton` binaries (e.g. a commit and its parent), interleaved so that
# both see the same machine state: for each query, ROUNDS rounds of `beton query FILE SQL` with A
# then B (B then A on odd rounds), the median wall time of each (process start, open, query,
# printing its answer: give queries with short answers, such as `SELECT count(*) ...` or a
# GROUP BY) and the median of the per-round ratios B/A. One warm-up run of each first (it makes
# the file's columnar copy when it has none, and fills the page cache).
#
#   bash benches/ab_sql.sh BETON_A BETON_B ROUNDS FILE SQL ...
#
# Example (issue 38's A/B; sql4m.beton: 4 M rows of label int, score float, group int):
#   bash benches/ab_sql.sh /tmp/beton-old target/release/beton 9 /tmp/sql4m.beton \
#     "SELECT count(*) FROM samples WHERE label < 100 AND score > 0.5" \
#     'SELECT "group", count(*), avg(score) FROM samples GROUP BY "group"'
set -euo pipefail
# shellcheck source=benches/ab_rounds.sh
source "$(dirname "$0")/ab_rounds.sh"
a=$1 b=$2 rounds=$3 file=$4
shift 4
# Microseconds one run of `beton query FILE SQL` takes.
took() {
  local s e
  s=$(date +%s%N)
  "$1" query "$2" "$3" > /dev/null
  e=$(date +%s%N)
  echo $(((e - s) / 1000))
}
for sql in "$@"; do
  "$a" query "$file" "$sql" > /dev/null
  "$b" query "$file" "$sql" > /dev/null
  ab_rounds took "$a" "$b" "$rounds" "$file" "$sql"
  echo "$sql: A $((${ab_a%.*} / 1000)) ms, B $((${ab_b%.*} / 1000)) ms, B/A median of $rounds rounds $ab_ratio (rounds: ${ab_ratios[*]})"
done
