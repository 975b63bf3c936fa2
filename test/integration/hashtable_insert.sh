#!/usr/bin/env bash
# Concurrent inserts from four processes (2 threads x 4 coroutines each):
# disjoint ranges, overlapping ranges and one range inserted twice at once.
# No key may be lost and each must have exactly one copy.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
check build --expected-keys 40000
check_bg insert --from 0 --to 12000 --writer 0
check_bg insert --from 0 --to 12000 --writer 1
check_bg insert --from 6000 --to 18000 --writer 2
check_bg insert --from 18000 --to 24000 --writer 3
wait_checks
check verify --from 0 --to 24000 --writers 4 --rounds 0
check verify --from 24000 --to 25000 --absent
pass "concurrent inserts: 24000 keys, one copy each"
