#!/usr/bin/env bash
# Throughput of two hashtable_bench builds, measured side by side: runs
# OLD and NEW in turn, PAIRS times (alternating which goes first), and
# prints each pair's NEW/OLD throughput ratio and the median. A shared,
# noisy machine moves both runs of a pair alike, so the ratio says more
# than either figure.
#
#   test/bench/ab_ratio.sh OLD_BENCH NEW_BENCH [WORKLOAD] [PAIRS] [-- BENCH_ARGS...]
#
# e.g. test/bench/ab_ratio.sh /tmp/old/bin/hashtable_bench build/bin/hashtable_bench ycsb-a 9
# (default bench arguments: 2 8 --max-key 1000000 --duration 3; run it from
# a directory where config/ is found, e.g. the source tree).
set -euo pipefail
old=${1:?usage: ab_ratio.sh OLD_BENCH NEW_BENCH [WORKLOAD] [PAIRS] [-- BENCH_ARGS...]}
new=${2:?usage: ab_ratio.sh OLD_BENCH NEW_BENCH [WORKLOAD] [PAIRS] [-- BENCH_ARGS...]}
workload=${3:-ycsb-c}
pairs=${4:-9}
shift $(( $# < 4 ? $# : 4 ))
[[ ${1:-} == -- ]] && shift
args=("$@")
((${#args[@]})) || args=(2 8 --max-key 1000000 --duration 3)
[[ $pairs =~ ^[1-9][0-9]*$ ]] || { echo "ab_ratio.sh: PAIRS must be a positive number, not '$pairs'" >&2; exit 2; }

# throughput BENCH: runs it and prints its throughput (M ops/s).
throughput() {
  local out
  out=$("$1" "${args[@]}" --dataset "$workload" --dump-file "" 2>/dev/null) ||
    { echo "ab_ratio.sh: $1 failed" >&2; exit 1; }
  sed -n 's/.*throughput = \([0-9.]*\) M.*/\1/p' <<<"$out" | tail -n 1
}

ratios=()
for ((i = 1; i <= pairs; ++i)); do
  if ((i % 2)); then
    o=$(throughput "$old"); n=$(throughput "$new")
  else
    n=$(throughput "$new"); o=$(throughput "$old")
  fi
  r=$(awk -v n="$n" -v o="$o" 'BEGIN { printf "%.3f", n / o }')
  ratios+=("$r")
  echo "pair $i: old $o M, new $n M, new/old $r"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
echo "$workload: median new/old over $pairs pairs: $median"
