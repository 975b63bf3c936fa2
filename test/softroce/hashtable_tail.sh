#!/bin/bash
# The hash table over verbs on the guest's rxe device: how fast it loads and
# how long its tail is. Runs INSIDE the guest, alone or as a step of
# perftest_compare.sh:
#
#   test/softroce/guest.sh -- test/softroce/hashtable_tail.sh BUILD_DIR [SECONDS [KEYS]]
#
# A hashtable_backend and one hashtable_bench at 2 threads x 8 coroutines:
# load KEYS keys (default 100000), then YCSB-C and YCSB-A for SECONDS each
# (default 5) on the loaded table (the bench is the table's only client:
# --sole-loader). Prints the load rate, each workload's
# throughput, P50, P99 and P99/P50, and the load rate against YCSB-A's. The
# figures are measurements, not pass criteria: the script fails only when a
# run fails or prints no result. SMART_OPTS passes through (e.g. None, to
# see the techniques' part in the tail). Logs: $SOFTROCE_OUT/hashtable_tail/.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SOURCE_DIR=$(cd "$here/../.." && pwd -P)
BUILD_DIR=${1:?usage: hashtable_tail.sh BUILD_DIR [SECONDS [KEYS]]}
SECONDS_PER_RUN=${2:-5}
KEYS=${3:-100000}
BIN=$BUILD_DIR/bin
source "$here/lib.sh"
bench_dirs hashtable_tail
# Loading 100 K keys over rxe takes about 15 s; the guard leaves room.
GUARD=$((SECONDS_PER_RUN * 4 + KEYS / 1000 + 120))

verbs_config "$WORK/smart.json"
export SMART_CONFIG_PATH=$WORK/smart.json

# field LOG NAME: a number from the bench's result line.
field() { result_field "HashTable: " "$1" "$2"; }

t_hashtable_tail() {
    cat > "$WORK/backend.json" <<JSON
{ "capacity": 1024, "tcp_port": 0, "nic_numa_node": -1 }
JSON
    start_blade hashtable "$BIN/hashtable_backend" "$WORK/backend.json" || return 1
    # Written whole: python3 takes seconds to start in the guest.
    cat > "$WORK/datastructure.json" <<JSON
{ "dataset": "ycsb-c", "dump_file_path": "",
  "insert_before_execution": true, "max_key": $KEYS, "key_length": 8, "value_length": 8,
  "rehash_key": false, "duration": $SECONDS_PER_RUN, "zipfian_const": 0.99,
  "memory_servers": [ {"hostname": "127.0.0.1", "port": $BLADE_PORT} ] }
JSON
    local dataset rc=0
    for dataset in ycsb-c ycsb-a; do
        local extra=()
        [ "$dataset" = ycsb-a ] && extra=(--no-load)
        # The only client: the load skips the search for racing copies.
        local cmd=("$BIN/hashtable_bench" 2 8 --dataset "$dataset" --sole-loader "${extra[@]}")
        echo "+ SMART_OPTS=${SMART_OPTS:-} APP_CONFIG_PATH=$WORK/datastructure.json ${cmd[*]}"
        APP_CONFIG_PATH=$WORK/datastructure.json timeout -k 5 "$GUARD" "${cmd[@]}" > "$LOG_DIR/$dataset.log" 2>&1
        local status=$?
        cat "$LOG_DIR/$dataset.log"
        [ $status -eq 0 ] || { echo "hashtable_bench $dataset exited $status"; rc=1; break; }
        [ -n "$(field "$LOG_DIR/$dataset.log" throughput)" ] || { echo "no result line for $dataset"; rc=1; break; }
    done
    stop_blade "$BLADE_PID"
    return $rc
}

step hashtable_bench t_hashtable_tail

load=$(sed -n 's/.*loaded [0-9]* keys in [0-9.]* s (\([0-9.]*\) M inserts\/s.*/\1/p' "$LOG_DIR/ycsb-c.log" 2>/dev/null | head -n 1)
echo
echo "hashtable_tail: rxe0, hashtable_bench 2 8, $KEYS keys, ${SECONDS_PER_RUN} s per workload, SMART_OPTS=${SMART_OPTS:-(all)}"
printf '%-8s %12s %10s %10s %9s\n' workload "M ops/s" "P50 us" "P99 us" "P99/P50"
for dataset in ycsb-c ycsb-a; do
    log=$LOG_DIR/$dataset.log
    t=$(field "$log" throughput) p50=$(field "$log" "P50 latency") p99=$(field "$log" "P99 latency")
    [ -n "$t" ] && [ -n "$p50" ] && [ -n "$p99" ] || { printf '%-8s %s\n' "$dataset" "(no result)"; continue; }
    awk -v d="$dataset" -v t="$t" -v a="$p50" -v b="$p99" \
        'BEGIN { printf "%-8s %12s %10s %10s %8.1fx   (target <= 4x)\n", d, t, a, b, (a > 0 ? b / a : 0) }'
done
ycsb_a=$(field "$LOG_DIR/ycsb-a.log" throughput 2>/dev/null)
if [ -n "$load" ] && [ -n "$ycsb_a" ]; then
    awk -v l="$load" -v a="$ycsb_a" \
        'BEGIN { printf "load     %12s M inserts/s, %.2fx of YCSB-A   (target >= 1x)\n", l, (a > 0 ? l / a : 0) }'
fi
rm -rf "$WORK"
finish
