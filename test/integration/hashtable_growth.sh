#!/usr/bin/env bash
# A table built for 2000 keys grows, while other clients insert and read,
# to hold 30000: its capacity must reach 10x the initial one, and every key
# must be found exactly once.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 512
SERVERS=("127.0.0.1:$BLADE_PORT")
check build --expected-keys 2000
initial=$(check capacity | sed -n 's/.*: \([0-9]*\) slots.*/\1/p')
[[ -n $initial ]] || fail "no initial capacity"
echo "initial capacity: $initial slots"
check insert --from 0 --to 1000 --writer 0
check_bg insert --from 1000 --to 16000 --writer 0
check_bg insert --from 16000 --to 31000 --writer 1
check_bg read --from 0 --to 1000 --writers 2 --rounds 0 --duration 3
wait_checks
check capacity --min-slots $((initial * 10))
check verify --from 0 --to 31000 --writers 2 --rounds 0
pass "table grew from $initial slots under concurrent load; all 31000 keys found"
