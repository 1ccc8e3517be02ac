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
a=$1 b=$2 rounds=$3 file=$4
shift 4
# Seconds one run of `beton query` takes.
took() {
  local s e
  s=$(date +%s%N)
  "$@" > /dev/null
  e=$(date +%s%N)
  echo $(((e - s) / 1000))
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for sql in "$@"; do
  "$a" query "$file" "$sql" > /dev/null
  "$b" query "$file" "$sql" > /dev/null
  ta=() tb=() ratios=()
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then x=$(took "$a" query "$file" "$sql"); y=$(took "$b" query "$file" "$sql")
    else y=$(took "$b" query "$file" "$sql"); x=$(took "$a" query "$file" "$sql"); fi
    ta+=("$x") tb+=("$y")
    ratios+=("$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.4f", y / x }')")
  done
  ma=$(printf '%s\n' "${ta[@]}" | median)
  mb=$(printf '%s\n' "${tb[@]}" | median)
  mr=$(printf '%s\n' "${ratios[@]}" | median)
  echo "$sql: A $((${ma%.*} / 1000)) ms, B $((${mb%.*} / 1000)) ms, B/A median of $rounds rounds $mr (rounds: ${ratios[*]})"
done
