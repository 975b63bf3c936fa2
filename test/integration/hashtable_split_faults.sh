#!/usr/bin/env bash
# A client stopped or killed at each step of a split, and while it builds
# the table under its named root, at exactly that point (SMART_FAULTS fault
# points, no timing luck):
#   kill  the blade sees its session close; another client takes the lock
#         over at once and finishes the split (or builds the table);
#   stop  it stays connected; another client takes over after the lease
#         and has the blade fence it first: resumed, it fails with its
#         session ended (or, had its lock not been taken, finds its split
#         abandoned and goes on with its inserts).
# Every key a surviving writer was told it inserted holds exactly its value,
# once; so do the victim's first keys once inserted again. Last, a work
# request made to fail with a remote access error (with the kills).
#
#   hashtable_split_faults.sh [ACTIONS]   "kill", "stop" or "kill stop" (default)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
# A short lease keeps the stopped cases quick; over verbs (the Soft-RoCE
# guest, much slower) a live client could miss it while descheduled.
# The survivor inserts SURVIVOR keys after the victim stopped at its first
# split. The table is built for 2000 keys (one subtable of 2688 slots), so
# even 4000 more force splits of the survivor's own, each needing the
# victim's lock: over verbs, where an insert costs tens of times what it
# does on shm, 4000 check the same take-over; shm keeps 10000.
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then
  LEASE=(--lease-ms 2000)
  SURVIVOR=4000
else
  LEASE=(--lease-ms 300)
  SURVIVOR=10000
fi
# The actions to run: "kill", "stop" or both (the default); ctest runs them
# as two tests, so that each fits its time limit in the slow guest.
read -ra ACTIONS <<<"${1:-kill stop}"
for action in "${ACTIONS[@]}"; do
  [[ $action == kill || $action == stop ]] || fail "unknown action '$action' (expected kill or stop)"
done

# Waits until process $1 is stopped (SIGSTOP) or gone.
wait_stopped_or_dead() {
  local pid=$1 state
  for _ in $(seq 1 600); do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo X)
    [[ $state == T || $state == X || $state == Z ]] && return 0
    sleep 0.05
  done
  fail "the victim neither stopped nor died at its fault point"
}

# run_victim ACTION POINT LOG ARGS...: runs hashtable_check ARGS in the
# background with the fault; sets VICTIM.
run_victim() {
  local action=$1 point=$2 log=$3
  shift 3
  SMART_FAULTS="$action@point:$point" "$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" "${LEASE[@]}" "$@" \
    >"$log" 2>&1 &
  VICTIM=$!
  wait_stopped_or_dead "$VICTIM"
}

# After a stopped victim's lock was taken over: resume it; it must abandon
# its split (the lock was lost) and finish its inserts.
resume_victim() {
  local log=$1 status
  kill -CONT "$VICTIM"
  # A resumed victim that does not finish is a failure with its log, not a
  # test killed by its time limit with nothing to show.
  for _ in $(seq 1 1200); do
    kill -0 "$VICTIM" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$VICTIM" 2>/dev/null; then
    kill -ABRT "$VICTIM" 2>/dev/null || true
    tail -n 40 "$log" >&2
    fail "the resumed victim did not finish within 120 s"
  fi
  set +e
  wait "$VICTIM"
  status=$?
  set -e
  # A take-over by lease fences the victim first: the blade ended its
  # session, so its requests fail (over shm its own provider refuses them)
  # and it exits saying so.
  if ((status != 0)) && grep -q "ended this client's session" "$log"; then
    return 0
  fi
  ((status == 0)) || { cat "$log" >&2; fail "the resumed victim failed (exit $status)"; }
  grep -q "abandoned its split\|was taken over by another client" "$log" ||
    { cat "$log" >&2; fail "the resumed victim did not report its lost lock"; }
}

# SPLIT_FAULT_CASES="stop@ht.split.frozen ..." runs only those cases. Over
# verbs, where each case costs a minute, the stops run at the two steps that
# write the subtables (frozen, rewriting) and in the build; the stops at the
# lock and the publish run on shm.
if [[ -z ${SPLIT_FAULT_CASES:-} ]] && ((ON_VERBS)); then
  SPLIT_FAULT_CASES="kill@ht.split.locked kill@ht.split.frozen kill@ht.split.rewriting kill@ht.split.publishing"
  SPLIT_FAULT_CASES+=" kill@ht.build.subtable stop@ht.split.frozen stop@ht.split.rewriting stop@ht.build.subtable"
fi
wanted() { [[ -z ${SPLIT_FAULT_CASES:-} || " $SPLIT_FAULT_CASES " == *" $1@$2 "* ]]; }
CASES_RUN=()

for point in ht.split.locked ht.split.frozen ht.split.rewriting ht.split.publishing; do
  for action in "${ACTIONS[@]}"; do
    wanted "$action" "$point" || continue
    CASES_RUN+=("$action@$point")
    case_start=$SECONDS
    start_hashtable_blade 256
    SERVERS=("127.0.0.1:$BLADE_PORT")
    check build --expected-keys 2000 "${LEASE[@]}" >/dev/null
    log="$WORK_DIR/victim.$point.$action.log"
    run_victim "$action" "$point" "$log" --threads 1 --coros 4 insert --from 0 --to 12000 --writer 0
    grep -q "insert: ok" "$log" && fail "$point: the victim finished without reaching its fault point"
    out=$(timeout -k 5 150 "$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" "${LEASE[@]}" insert --from 1000000 \
      --to $((1000000 + SURVIVOR)) --writer 1 2>&1) || { echo "$out" >&2; fail "$point/$action: the survivor's inserts failed"; }
    grep -q "took over the resize lock" <<<"$out" ||
      { echo "$out" >&2; fail "$point/$action: the survivor did not take the victim's resize lock over"; }
    # Past ht.split.locked the victim had recorded its split, which the
    # survivor must have finished (at ht.split.locked nothing was written
    # yet; a slow machine may add splits the survivor's own threads took
    # over from one another).
    if [[ $point != ht.split.locked ]]; then
      grep -q "splits of dead clients finished [1-9]" <<<"$out" ||
        { echo "$out" >&2; fail "$point/$action: the survivor did not finish the victim's split"; }
    fi
    if [[ $action == stop ]]; then
      resume_victim "$log"
    else
      wait "$VICTIM" 2>/dev/null || true
    fi
    check verify --from 1000000 --to $((1000000 + SURVIVOR)) --writer 1 --writers 3 --rounds 0 --exact >/dev/null
    check insert --from 0 --to 2000 --writer 2 >/dev/null
    check verify --from 0 --to 2000 --writer 2 --writers 3 --rounds 0 --exact >/dev/null
    stop_blades
    echo "ok: $action at $point: the split was finished by another client; every acknowledged insert found once ($((SECONDS - case_start)) s)"
  done
done

for action in "${ACTIONS[@]}"; do
  wanted "$action" ht.build.subtable || continue
  CASES_RUN+=("$action@ht.build.subtable")
  start_hashtable_blade 256
  SERVERS=("127.0.0.1:$BLADE_PORT")
  log="$WORK_DIR/builder.$action.log"
  run_victim "$action" ht.build.subtable "$log" --expected-keys 400000 build
  check "${LEASE[@]}" --expected-keys 400000 insert --from 0 --to 5000 --writer 1 >/dev/null
  [[ $action == stop ]] && resume_victim "$log"
  [[ $action == kill ]] && { wait "$VICTIM" 2>/dev/null || true; }
  check verify --from 0 --to 5000 --writer 1 --writers 2 --rounds 0 --exact >/dev/null
  stop_blades
  echo "ok: $action while building under the named root: another client built the table"
done
if [[ -n ${SPLIT_FAULT_CASES:-} || " ${ACTIONS[*]} " != *" kill "* ]]; then
  pass "a client at ${CASES_RUN[*]}: others went on, nothing lost"
  exit 0
fi
# A work request that completes with a remote access error (as a NIC
# reports a bad rkey): the operation fails naming it, the table stays whole.
start_hashtable_blade 64
SERVERS=("127.0.0.1:$BLADE_PORT")
check build --expected-keys 2000 >/dev/null
set +e
SMART_FAULTS="fail@read#50" "$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" insert --from 0 --to 1000 --writer 0 \
  >"$WORK_DIR/rae.log" 2>&1
status=$?
set -e
((status != 0)) || fail "a run with a failed READ succeeded"
grep -q "remote access error" "$WORK_DIR/rae.log" || { cat "$WORK_DIR/rae.log" >&2; fail "the remote access error was not reported"; }
check insert --from 0 --to 1000 --writer 1 >/dev/null
check verify --from 0 --to 1000 --writer 1 --writers 2 --rounds 0 --exact >/dev/null
stop_blades
echo "ok: a READ completing with a remote access error failed its operation by name; the table stayed whole"

pass "a client at ${CASES_RUN[*]}, and a READ failed with a remote access error: others went on, nothing lost"
