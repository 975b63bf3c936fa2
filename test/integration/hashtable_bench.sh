#!/usr/bin/env bash
# hashtable_bench against a hashtable_backend process: the result line and
# the CSV line for a read and a write workload.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 512
config="$WORK_DIR/datastructure.json"
# Written whole, not by python3 from the repository's file: python3 takes
# seconds to start in the Soft-RoCE guest.
cat >"$config" <<JSON
{ "dataset": "ycsb-c", "dump_file_path": "$WORK_DIR/out.csv",
  "insert_before_execution": true, "max_key": $(sized 20000 5000), "key_length": 8, "value_length": 8,
  "rehash_key": false, "duration": 0.5, "zipfian_const": 0.99,
  "memory_servers": [ {"hostname": "127.0.0.1", "port": $BLADE_PORT} ] }
JSON
for dataset in ycsb-c ycsb-a; do
  out=$(APP_CONFIG_PATH=$config "$SMART_BIN/hashtable_bench" 2 4 --dataset $dataset $([[ $dataset == ycsb-a ]] && echo --no-load)) ||
    fail "hashtable_bench $dataset"
  echo "$out"
  [[ $out =~ HashTable:\ workload\ =\ $dataset,\ \#thread\ =\ 2,\ \#coro_per_thread\ =\ 4,.*throughput\ =\ ([0-9.]+)\ M,\ P50\ latency\ =\ ([0-9.]+)\ us,\ P99\ latency\ =\ ([0-9.]+)\ us ]] ||
    fail "unexpected result line for $dataset"
  awk -v t="${BASH_REMATCH[1]}" -v p50="${BASH_REMATCH[2]}" -v p99="${BASH_REMATCH[3]}" \
    'BEGIN { exit !(t > 0 && 0 < p50 && p50 <= p99) }' ||
    fail "$dataset: no progress or inconsistent percentiles"
done
[[ $(head -n 1 "$WORK_DIR/out.csv") == "name, workload, threads, coroutines, key_length, value_length, max_key, mops, p50_us, p99_us, retries_per_op, succeeded, not_found, failed" ]] ||
  fail "the CSV does not start with its header: $(head -n 1 "$WORK_DIR/out.csv")"
lines=$(grep -c '^HashTable, ycsb-' "$WORK_DIR/out.csv")
((lines == 2)) || fail "expected 2 CSV lines, found $lines"
pass "hashtable_bench result lines and CSV against a separate memory blade"
