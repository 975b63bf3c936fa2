#!/usr/bin/env bash
# Two memory blades, one shard each: keys spread over both, and each blade
# holds its own shard (a client that only knows the second blade finds the
# keys placed there).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 256
first=$BLADE_PORT
start_hashtable_blade 256
second=$BLADE_PORT
SERVERS=("127.0.0.1:$first" "127.0.0.1:$second")
check_bg insert --expected-keys 20000 --from 0 --to 10000 --writer 0
check_bg insert --expected-keys 20000 --from 5000 --to 15000 --writer 1
wait_checks
check verify --from 0 --to 15000 --writers 2 --rounds 0
# Each blade alone holds part of the keys, together all of them.
SERVERS=("127.0.0.1:$first")
on_first=$(check count --from 0 --to 15000 | sed -n 's/^present \([0-9]*\)$/\1/p')
SERVERS=("127.0.0.1:$second")
on_second=$(check count --from 0 --to 15000 | sed -n 's/^present \([0-9]*\)$/\1/p')
echo "keys on the first blade: $on_first, on the second: $on_second"
((on_first > 3000 && on_second > 3000)) || fail "keys are not spread over both blades"
((on_first + on_second == 15000)) || fail "the shards hold $((on_first + on_second)) keys, expected 15000"
pass "two shards on two memory blades"
