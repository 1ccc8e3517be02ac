# Sourced by benches/ab_loader.sh and benches/ab_sql.sh: the interleaved A/B both run.

# The median of the numbers on stdin, one a line.
median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.10g\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# `ab_rounds MEASURE A B ROUNDS ARGS...`: ROUNDS rounds of `MEASURE A ARGS...` and
# `MEASURE B ARGS...` (A first on even rounds, B first on odd ones, so both see the same machine
# state), each printing one number. Sets ab_a and ab_b (the medians of each side), ab_ratio (the
# median of the per-round ratios B/A) and ab_ratios (every round's).
ab_rounds() {
  local measure=$1 a=$2 b=$3 rounds=$4 r x y
  shift 4
  local xs=() ys=()
  ab_ratios=()
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then x=$("$measure" "$a" "$@"); y=$("$measure" "$b" "$@")
    else y=$("$measure" "$b" "$@"); x=$("$measure" "$a" "$@"); fi
    xs+=("$x") ys+=("$y")
    ab_ratios+=("$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.4f", y / x }')")
  done
  ab_a=$(printf '%s\n' "${xs[@]}" | median)
  ab_b=$(printf '%s\n' "${ys[@]}" | median)
  ab_ratio=$(printf '%s\n' "${ab_ratios[@]}" | median)
}
