#!/usr/bin/env bash
# A table built for 64 keys grows to 5 million with three concurrent
# inserting clients: past the depth that the slots' directory bits cover
# (splits then read the keys' blocks) and past the room of its directory,
# built for 2^9 entries (it moves to 2^13, then 2^17 entries, while the
# other clients read the old array), with every key found exactly once
# holding the value its writer was told it inserted.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
# Over verbs (the Soft-RoCE guest: emulated, about 100x slower, 3 GiB of
# memory) the table grows to 80 K keys, past depth 9, so that its directory
# moves once (from 2^9 entries to 2^13) while the others read it; the splits
# beyond the slots' 12 directory bits and the second move are the same code
# on either transport and are covered on shm.
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then
  KEYS=${GROW_KEYS:-80000}
  MIN_DEPTH=9
  # Splits there take long enough for a live splitter to miss a 2 s lease.
  SLOW=(--lease-ms 10000 --retry-timeout-ms 60000)
  start_hashtable_blade 256
else
  KEYS=${GROW_KEYS:-5000000}
  MIN_DEPTH=12
  SLOW=()
  start_hashtable_blade 1536
fi
SERVERS=("127.0.0.1:$BLADE_PORT")
check build --expected-keys 64 --directory-capacity-depth 9 >/dev/null
initial=$(check capacity | sed -n 's/.*: \([0-9]*\) slots.*/\1/p')
third=$((KEYS / 3))
check_bg "${SLOW[@]}" insert --from 0 --to $third --writer 0
check_bg "${SLOW[@]}" insert --from $third --to $((2 * third)) --writer 1
check_bg "${SLOW[@]}" insert --from $((2 * third)) --to "$KEYS" --writer 2
wait_checks
check capacity
depth=$(check capacity | sed -n 's/.*global depth \([0-9]*\).*/\1/p')
((depth > MIN_DEPTH)) || fail "the directory reached depth $depth only; the test means to pass $MIN_DEPTH"
check verify --from 0 --to $third --writer 0 --writers 3 --rounds 0 --exact >/dev/null
check verify --from $third --to $((2 * third)) --writer 1 --writers 3 --rounds 0 --exact >/dev/null
check verify --from $((2 * third)) --to "$KEYS" --writer 2 --writers 3 --rounds 0 --exact >/dev/null
pass "a table built for 64 keys ($initial slots) grew to $KEYS keys at directory depth $depth; each found once with its writer's value"
