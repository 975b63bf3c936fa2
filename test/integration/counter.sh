#!/usr/bin/env bash
# Two client processes, each THREADS x CORO tasks adding 1 ITER times to one
# remote counter (by FAA or by a CAS retry loop, MODE), must leave it at
# exactly 2 * THREADS * CORO * ITER: no lost update across tasks, threads or
# processes.
source "$(dirname "$0")/lib.sh"
mode=${1:?usage: counter.sh faa|cas}
threads=3 coros=4 iterations=${COUNTER_ITERATIONS:-500}
client="$SMART_BIN/integration_client"

start_blade "$SMART_BIN/test_rdma" --config "$(test_rdma_config 64)"
server="127.0.0.1:$BLADE_PORT"
"$client" setup-counter --server "$server" --root 3

"$client" counter --server "$server" --root 3 --mode "$mode" -t $threads -c $coros -k $iterations &
first=$!
"$client" counter --server "$server" --root 3 --mode "$mode" -t $threads -c $coros -k $iterations &
second=$!
wait $first || fail "first $mode client failed"
wait $second || fail "second $mode client failed"

expected=$((2 * threads * coros * iterations))
"$SMART_BIN/integration_client" check-counter --server "$server" --root 3 --expect $expected ||
  fail "the $mode counter lost updates"
pass "$mode counter reached $expected"
