#!/usr/bin/env bash
# Throughput of two hashtable_bench builds, measured side by side: PAIRS
# times, runs OLD and NEW and prints each pair's NEW/OLD throughput ratio,
# then the median.
#
#   test/bench/ab_ratio.sh [--in-turn] [--old-args 'ARGS'] [--new-args 'ARGS']
#       [--old-env 'VAR=VALUE ...'] [--new-env 'VAR=VALUE ...']
#       OLD_BENCH NEW_BENCH [WORKLOAD] [PAIRS] [-- BENCH_ARGS...]
#
# OLD_BENCH and NEW_BENCH may be one program: --old-args/--new-args add
# arguments to one side only and --old-env/--new-env set its environment,
# so that a technique off against on is measured the same way (e.g.
# --old-args --no-hocl, or --old-env 'SMART_OPTS=ThrdAwareAlloc'). Two
# different benches (hashtable_bench against btree_bench) work too.
#
# Each build runs in its own source tree (TREE/build*/bin/NAME runs in
# TREE, with TREE/config), so an older commit reads the configs it knows.
# To compare against an older commit: git worktree add /tmp/old COMMIT,
# build it there (./build.sh), then pass /tmp/old/build/bin/NAME as OLD.
#
# By default the two runs of a pair go at the same time, sharing the
# machine: whatever else the host does then slows both alike, and on a
# shared 2-core VM the ratio of one build against itself stays within 2%
# (run one after the other, it spread over 0.75-1.3). Each run's absolute
# figure is then about half of what it gets alone; the ratio is the
# measurement; both timed runs start together once both loaded (each
# bench's --start-file; a build older than that flag starts right after
# its own load, and the script says so). --in-turn runs them one after the
# other instead, alternating which goes first (absolute figures as alone,
# much noisier ratios).
#
# WORKLOAD '-' passes no --dataset (the transaction benches, whose
# "committed txn" rate is the throughput), e.g.
#   test/bench/ab_ratio.sh --in-turn OLD/tatp_bench build/bin/tatp_bench - 9 -- 2 8 --duration 4
#
# e.g. test/bench/ab_ratio.sh /tmp/old/bin/hashtable_bench build/bin/hashtable_bench ycsb-a 9
# (default bench arguments: 2 8 --max-key 1000000 --duration 4; run it from
# a directory where config/ is found, e.g. the source tree).
set -euo pipefail
usage="usage: ab_ratio.sh [--in-turn] [--old-args A] [--new-args A] [--old-env E] [--new-env E] OLD_BENCH NEW_BENCH [WORKLOAD] [PAIRS] [-- BENCH_ARGS...]"
together=1
old_args=() new_args=() old_env=() new_env=()
while [[ ${1:-} == --* && ${1:-} != -- ]]; do
  case $1 in
    --in-turn) together=0; shift ;;
    --old-args) read -r -a old_args <<<"${2:?$usage}"; shift 2 ;;
    --new-args) read -r -a new_args <<<"${2:?$usage}"; shift 2 ;;
    --old-env) read -r -a old_env <<<"${2:?$usage}"; shift 2 ;;
    --new-env) read -r -a new_env <<<"${2:?$usage}"; shift 2 ;;
    *) echo "ab_ratio.sh: unknown option $1; $usage" >&2; exit 2 ;;
  esac
done
for e in "${old_env[@]}" "${new_env[@]}"; do
  [[ $e == [A-Za-z_]*=* ]] || { echo "ab_ratio.sh: '$e' is not VAR=VALUE" >&2; exit 2; }
done
old=${1:?$usage}
new=${2:?$usage}
workload=${3:-ycsb-c}
pairs=${4:-9}
shift $(( $# < 4 ? $# : 4 ))
[[ ${1:-} == -- ]] && shift
args=("$@")
((${#args[@]})) || args=(2 8 --max-key 1000000 --duration 4)
[[ $pairs =~ ^[1-9][0-9]*$ ]] || { echo "ab_ratio.sh: PAIRS must be a positive number, not '$pairs'" >&2; exit 2; }
for b in "$old" "$new"; do
  [[ -x $b ]] || { echo "ab_ratio.sh: $b is not an executable" >&2; exit 2; }
done
old=$(realpath "$old")
new=$(realpath "$new")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Each build reads its own configs: a bench at TREE/build*/bin/NAME runs in
# TREE when TREE/config holds smart_config.json, else here.
tree_of() {
  local dir
  dir=$(cd "$(dirname "$1")" && pwd)
  for _ in 1 2 3; do
    dir=$(dirname "$dir")
    [[ -f $dir/config/smart_config.json ]] && { echo "$dir"; return; }
  done
  pwd
}
old_tree=$(tree_of "$old")
new_tree=$(tree_of "$new")
# Run together, both timed runs start at once after both loads, when both
# builds take --start-file (a build without it starts its run right after
# its own load, so the one that loads faster starts early).
start_files=0
if ((together)) && "$old" --help 2>/dev/null | grep -q -- --start-file &&
   "$new" --help 2>/dev/null | grep -q -- --start-file; then
  start_files=1
elif ((together)); then
  echo "ab_ratio.sh: a build without --start-file: each timed run starts right after its own load" >&2
fi

# run SIDE FILE: runs that side's bench (old or new), writes its throughput
# (M ops/s) to FILE.
run() {
  local bench tree extra=() env_vars=()
  if [[ $1 == old ]]; then
    bench=$old tree=$old_tree extra=("${old_args[@]}") env_vars=("${old_env[@]}")
  else
    bench=$new tree=$new_tree extra=("${new_args[@]}") env_vars=("${new_env[@]}")
  fi
  local dataset=(--dataset "$workload")
  [[ $workload == - ]] && dataset=()
  ((start_files)) && extra+=(--start-file "$2.start")
  if ! (cd "$tree" && env "${env_vars[@]}" "$bench" "${args[@]}" "${extra[@]}" "${dataset[@]}" --dump-file "" \
    --quiet) >"$2.out" 2>"$2.err"; then
    echo "ab_ratio.sh: $bench ($1) failed:" >&2
    tail -n 5 "$2.err" >&2
    return 1
  fi
  sed -n 's/.*\(throughput\|committed txn\) = \([0-9.]*\) M.*/\2/p' "$2.out" | tail -n 1 >"$2"
  [[ -s $2 ]] || { echo "ab_ratio.sh: $bench ($1) printed no throughput" >&2; return 1; }
}

ratios=()
for ((i = 1; i <= pairs; ++i)); do
  if ((together)); then
    rm -f "$out"/*.start "$out"/*.start.ready
    run old "$out/old" & a=$!
    run new "$out/new" & b=$!
    if ((start_files)); then
      # Both loaded (or one ended, which its wait below reports): start both.
      while [[ ! -f $out/old.start.ready || ! -f $out/new.start.ready ]] &&
            kill -0 "$a" 2>/dev/null && kill -0 "$b" 2>/dev/null; do
        sleep 0.01
      done
      touch "$out/old.start" "$out/new.start"
    fi
    wait "$a" && wait "$b" || exit 1
  elif ((i % 2)); then
    run old "$out/old" && run new "$out/new" || exit 1
  else
    run new "$out/new" && run old "$out/old" || exit 1
  fi
  o=$(<"$out/old") n=$(<"$out/new")
  r=$(awk -v n="$n" -v o="$o" 'BEGIN { printf "%.3f", n / o }')
  ratios+=("$r")
  echo "pair $i: old $o M, new $n M, new/old $r"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
echo "$workload: median new/old over $pairs pairs ($( ((together)) && echo "run together" || echo "run in turn")): $median"
