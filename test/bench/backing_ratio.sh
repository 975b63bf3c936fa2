#!/usr/bin/env bash
# Each pool backing against the default (memfd), measured side by side: a
# hashtable_backend with memfd and one with BACKING (2 GiB each) serve at
# once, and hashtable_bench YCSB-C (2x8, 1 M keys, test/bench/ab_ratio.sh)
# and test_rdma 2 8 (8-byte READs over 1 GiB) run against both at the same
# time, PAIRS times; prints each pair's BACKING/memfd ratio and the medians.
#
#   test/bench/backing_ratio.sh [PAIRS] [BACKING...]
#
# Default backings: hugetlb (reserve the pages first, as root:
# echo 1100 > /proc/sys/vm/nr_hugepages) and a file on /dev/shm. Run from
# the source tree after a build (build/bin). "memfd" as a BACKING measures
# the method against itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
pairs=${1:-5}
shift || true
backings=("$@")
((${#backings[@]})) || backings=(hugetlb "file:/dev/shm/smart_backing_ratio.pool")
work=$(mktemp -d /tmp/backing_ratio.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f /dev/shm/smart_backing_ratio.pool
  rm -rf "$work"
}
trap cleanup EXIT

# start NAME BACKING: a hashtable_backend; prints its port.
start() {
  echo '{ "capacity": 2048, "tcp_port": 0, "nic_numa_node": -1 }' >"$work/$1.backend.json"
  build/bin/hashtable_backend --backing "$2" "$work/$1.backend.json" >"$work/$1.log" 2>&1 &
  pids+=($!)
  local port="" k
  for k in $(seq 300); do
    port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$work/$1.log")
    [[ -n $port ]] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $port ]] || { echo "backing_ratio: the $2 memory blade did not start:" >&2; cat "$work/$1.log" >&2; exit 1; }
  cat >"$work/$1.ds.json" <<JSON
{ "dataset": "ycsb-c", "dump_file_path": "", "insert_before_execution": true,
  "max_key": 1000000, "key_length": 8, "value_length": 8, "rehash_key": false, "duration": 4, "zipfian_const": 0.99,
  "memory_servers": [ {"hostname": "127.0.0.1", "port": $port} ] }
JSON
  cat >"$work/$1.rdma.json" <<JSON
{ "servers": ["127.0.0.1"], "port": $port, "block_size": 8, "qp_num": -1, "type": "read", "duration": 4,
  "memory_size": 1024, "dump_file_path": "" }
JSON
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

start base memfd
for i in "${!backings[@]}"; do
  b=${backings[$i]}
  side="b$i"
  start "$side" "$b"
  grep -m1 "listening" "$work/$side.log"
  test/bench/ab_ratio.sh --old-env "APP_CONFIG_PATH=$work/base.ds.json" --new-env "APP_CONFIG_PATH=$work/$side.ds.json" \
    build/bin/hashtable_bench build/bin/hashtable_bench ycsb-c "$pairs" -- 2 8 --duration 4 --sole-loader |
    tail -n 1 | sed "s|^|$b: hashtable_bench |"
  ratios=()
  for p in $(seq "$pairs"); do
    build/bin/test_rdma --config "$work/base.rdma.json" 2 8 >"$work/a.out" 2>&1 &
    a=$!
    build/bin/test_rdma --config "$work/$side.rdma.json" 2 8 >"$work/b.out" 2>&1 &
    wait "$a" $!
    x=$(sed -n 's/.*IOPS=\([0-9.]*\) M.*/\1/p' "$work/a.out")
    y=$(sed -n 's/.*IOPS=\([0-9.]*\) M.*/\1/p' "$work/b.out")
    [[ -n $x && -n $y ]] || { echo "backing_ratio: test_rdma gave no result:" >&2; cat "$work/a.out" "$work/b.out" >&2; exit 1; }
    r=$(awk -v x="$x" -v y="$y" 'BEGIN {printf "%.3f", y / x}')
    ratios+=("$r")
    echo "pair $p: test_rdma memfd $x M, $b $y M, ratio $r"
  done
  echo "$b: test_rdma 2 8: median $b/memfd over $pairs pairs (run together): $(printf '%s\n' "${ratios[@]}" | median)"
  kill "${pids[-1]}"
  wait "${pids[-1]}" 2>/dev/null || true
  unset 'pids[-1]'
  rm -f /dev/shm/smart_backing_ratio.pool
done
