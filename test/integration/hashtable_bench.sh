#!/usr/bin/env bash
# hashtable_bench against a hashtable_backend process: the result line and
# the CSV line for a read and a write workload.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 512
config="$WORK_DIR/datastructure.json"
python3 - "$SMART_SOURCE/config/datastructure.json" "$config" "$BLADE_PORT" "$WORK_DIR/out.csv" <<'PY'
import json, sys
src, dst, port, csv = sys.argv[1:5]
c = json.load(open(src))
c.update(max_key=20000, duration=0.5, dump_file_path=csv,
         memory_servers=[{"hostname": "127.0.0.1", "port": int(port)}])
json.dump(c, open(dst, "w"))
PY
for dataset in ycsb-c ycsb-a; do
  out=$(APP_CONFIG_PATH=$config "$SMART_BIN/hashtable_bench" 2 4 --dataset $dataset $([[ $dataset == ycsb-a ]] && echo --no-load)) ||
    fail "hashtable_bench $dataset"
  echo "$out"
  [[ $out =~ HashTable:\ workload\ =\ $dataset,\ \#thread\ =\ 2,\ \#coro_per_thread\ =\ 4,.*throughput\ =\ ([0-9.]+)\ M,\ P50\ latency\ =\ ([0-9.]+)\ us,\ P99\ latency\ =\ ([0-9.]+)\ us ]] ||
    fail "unexpected result line for $dataset"
  python3 -c "import sys; sys.exit(0 if float('${BASH_REMATCH[1]}') > 0 and 0 < float('${BASH_REMATCH[2]}') <= float('${BASH_REMATCH[3]}') else 1)" ||
    fail "$dataset: no progress or inconsistent percentiles"
done
lines=$(grep -c '^HashTable, ycsb-' "$WORK_DIR/out.csv")
((lines == 2)) || fail "expected 2 CSV lines, found $lines"
pass "hashtable_bench result lines and CSV against a separate memory blade"
