#!/usr/bin/env bash
# A table built for 64 keys grows to 5 million with three concurrent
# inserting clients: past the depth that the slots' directory bits cover
# (splits then read the keys' blocks), with every key found exactly once
# holding the value its writer was told it inserted.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
# Over verbs (the Soft-RoCE guest: slower, and 3 GiB of memory) the table
# grows to 600 K keys, still past depth 12.
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then
  KEYS=${GROW_KEYS:-600000}
  start_hashtable_blade 384
else
  KEYS=${GROW_KEYS:-5000000}
  start_hashtable_blade 1536
fi
SERVERS=("127.0.0.1:$BLADE_PORT")
check build --expected-keys 64 >/dev/null
initial=$(check capacity | sed -n 's/.*: \([0-9]*\) slots.*/\1/p')
third=$((KEYS / 3))
check_bg insert --from 0 --to $third --writer 0
check_bg insert --from $third --to $((2 * third)) --writer 1
check_bg insert --from $((2 * third)) --to "$KEYS" --writer 2
wait_checks
check capacity
depth=$(check capacity | sed -n 's/.*global depth \([0-9]*\).*/\1/p')
((depth > 12)) || fail "the directory reached depth $depth only; the test means to pass 12"
check verify --from 0 --to $third --writer 0 --writers 3 --rounds 0 --exact >/dev/null
check verify --from $third --to $((2 * third)) --writer 1 --writers 3 --rounds 0 --exact >/dev/null
check verify --from $((2 * third)) --to "$KEYS" --writer 2 --writers 3 --rounds 0 --exact >/dev/null
pass "a table built for 64 keys ($initial slots) grew to $KEYS keys at directory depth $depth; each found once with its writer's value"
