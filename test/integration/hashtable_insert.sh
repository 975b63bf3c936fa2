#!/usr/bin/env bash
# Concurrent inserts from four processes (2 threads x 4 coroutines each):
# disjoint ranges, overlapping ranges and one range inserted twice at once.
# No key may be lost and each must have exactly one copy.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
Q=$(sized 6000 2000)  # a quarter of the keys
check build --expected-keys $((Q * 40 / 6))
check_bg insert --from 0 --to $((2 * Q)) --writer 0
check_bg insert --from 0 --to $((2 * Q)) --writer 1
check_bg insert --from $Q --to $((3 * Q)) --writer 2
check_bg insert --from $((3 * Q)) --to $((4 * Q)) --writer 3
wait_checks
check verify --from 0 --to $((4 * Q)) --writers 4 --rounds 0
check verify --from $((4 * Q)) --to $((4 * Q + 1000)) --absent
pass "concurrent inserts: $((4 * Q)) keys, one copy each"
