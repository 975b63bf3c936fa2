#!/usr/bin/env bash
# Two writer processes update the same keys for several rounds while a
# reader process checks that, per key and writer, values never go back to an
# older round. Afterwards each key holds one written value, exactly once.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
check insert --expected-keys 10000 --from 0 --to 2000 --writer 0
check_bg update --from 0 --to 2000 --writer 0 --rounds 25
check_bg update --from 0 --to 2000 --writer 1 --rounds 25
check_bg read --from 0 --to 2000 --writers 2 --rounds 25 --duration 3
wait_checks
check verify --from 0 --to 2000 --writers 2 --rounds 25
pass "concurrent updates: monotonic per writer, one value per key"
