#!/usr/bin/env bash
# Batched loads (HashTable::load_batch, hashtable_check load) from several
# processes into a table built small, so that they split it under each
# other: two loaders of disjoint ranges run to the end while a third is
# killed, once at a batch's CAS round (its blocks written, no slot claimed
# yet), once at a CAS in the middle of that round (part of the batch
# claimed). A new loader then loads each victim's range again (its keys
# have no other loader now). At the end every key holds exactly the value
# of the last loader that was told it loaded it, once (check-log against
# the loaders' logs), and the half-loaded batches left no second copy.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then LEASE=(--lease-ms 2000); else LEASE=(--lease-ms 300); fi
N=$(sized 30000 6000)
L=$WORK_DIR
check build --expected-keys 2000 "${LEASE[@]}" >/dev/null

# run_victim N FAULT: loads range N (writer 10+N) until FAULT kills it.
run_victim() {
  local n=$1 fault=$2 status=0
  SMART_FAULTS="$fault" "$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" "${LEASE[@]}" load \
    --from $((n * N)) --to $(((n + 1) * N)) --writer $((10 + n)) >"$L/victim.$n.log" 2>&1 || status=$?
  ((status == 137)) || { cat "$L/victim.$n.log" >&2; fail "victim $n ($fault) exited $status, not killed"; }
}

# Round 1: killed at its 30th CAS round; round 2: at its 200th slot CAS.
check_bg load --from 0 --to "$N" --writer 0 --log "$L/l0.log" "${LEASE[@]}"
check_bg load --from "$N" --to $((2 * N)) --writer 1 --log "$L/l1.log" "${LEASE[@]}"
run_victim 2 "kill@point:ht.load.claiming#30"
run_victim 3 "kill@cas#200"
wait_checks
echo "loaders 0 and 1 done; victims killed at a CAS round and within one"

# The victims' ranges, loaded again by writers 2 and 3.
check load --from $((2 * N)) --to $((3 * N)) --writer 2 --log "$L/l2.log" "${LEASE[@]}" >/dev/null
check load --from $((3 * N)) --to $((4 * N)) --writer 3 --log "$L/l3.log" "${LEASE[@]}" >/dev/null
check check-log --from 0 --to $((4 * N)) --writers 14 "${LEASE[@]}" \
  --log "$L/l0.log" --log "$L/l1.log" --log "$L/l2.log" --log "$L/l3.log" >"$L/final.out"
cat "$L/final.out"
pass "batched loads through splits, two loaders killed mid-batch: every acknowledged key holds its last loader's value, once"
