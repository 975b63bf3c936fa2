#!/usr/bin/env bash
# Random reads and writes of random sizes and offsets, checked against a local
# shadow copy, from two client processes at once (each task has its own
# region, so every read has exactly one right answer).
source "$(dirname "$0")/lib.sh"
start_blade "$SMART_BIN/test_rdma" --config "$(test_rdma_config 64)"
server="127.0.0.1:$BLADE_PORT"
iterations=${SHADOW_ITERATIONS:-1500}

# Two processes at once, on disjoint regions (2 x 4 = 8 regions, then 9).
"$SMART_BIN/integration_client" shadow --server "$server" -t 2 -c 4 -k "$iterations" --seed 1 &
first=$!
"$SMART_BIN/integration_client" shadow --server "$server" -t 3 -c 3 -k "$iterations" --seed 2 --first-region 8 &
second=$!
wait $first || fail "first shadow client"
wait $second || fail "second shadow client"
pass "remote memory matched the shadow copy in both clients"
