#!/usr/bin/env bash
# Writers stopped (SIGSTOP, by fault injection: no timing luck) inside the
# windows of their operations, resumed after other writers of the same keys
# ran, and the final state checked against every writer's log. Unlike
# hashtable_linearizability.sh this needs no Go, so it runs over verbs in
# the Soft-RoCE guest too.
#   updates  a writer stops between its check of the slot word it read and
#            its CAS (ht.write.casing) while another updates the same keys;
#            the final state must match both writers' logs (writer_log.h);
#   rmw      one writer stops between its read-modify-write's read and its
#            check (ht.rmw.modifying: resumed past half its wrap guard, it
#            must read again), another with its CAS posted and not yet
#            carried out (posted:cas), while a third bumps the same keys;
#            every key must count exactly its acknowledged bumps
#            (check-rmw: a lost update leaves it short);
#   duplicates  a writer churns keys with inserts spread over the slots
#            (racing inserts leave duplicates) while two more churn them:
#            one stops after it pinned the lowest copy of a key and before
#            it removes the copies above (ht.duplicates.removing), one
#            between a read that found no copy and its confirming read
#            (ht.miss.confirming); the final state must match the logs;
#   inserts  (shm) churning writers, inserts spread over the slots, one
#            stopped between an insert's read of the buckets and its claim
#            (ht.insert.claiming); the final state must match the logs, one
#            copy per present key.
# Every writer keeps blocks whose tag wraps for longer than the stops
# (--wrap-guard-ms), so a CAS held past its check cannot meet a slot word
# that only looks unchanged; the leases are longer than the stops, so no
# stopped writer is fenced.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
L=$WORK_DIR
# A stop lasts STOP s, between half the wrap guard and the whole of it.
STOP=$(sized 2 5)
COMMON=(--wrap-guard-ms $(sized 3000 8000) --lease-ms $(sized 20000 60000))
K=$(sized 64 16)
R=$(sized 40 6)
check build --expected-keys 20000 "${COMMON[@]}" >/dev/null

# victim NAME FAULT ARGS...: hashtable_check ARGS (VICTIM_TASKS coroutines,
# 2 by default) in the background with SMART_FAULTS=FAULT, output in
# $L/NAME.out; waits until it stopped there, and has it resumed STOP s later
# (while the others run). Sets VICTIM.
victim() {
  local name=$1 fault=$2 state
  shift 2
  SMART_FAULTS=$fault "$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" "${COMMON[@]}" --threads 1 \
    --coros "${VICTIM_TASKS:-2}" "$@" \
    >"$L/$name.out" 2>&1 &
  VICTIM=$!
  for _ in $(seq 1 $((20 * 120))); do
    state=$(awk '{print $3}' "/proc/$VICTIM/stat" 2>/dev/null || echo X)
    if [[ $state == T ]]; then
      (sleep "$STOP" && kill -CONT "$VICTIM") &
      return 0
    fi
    [[ $state == X || $state == Z ]] && break
    sleep 0.05
  done
  cat "$L/$name.out" >&2
  fail "$name never stopped at $fault"
}
# finish PID NAME: waits for the resumed victim, which must succeed.
finish() {
  wait "$1" || { cat "$L/$2.out" >&2; fail "$2 failed after it was resumed"; }
}

# updates
check insert --from 0 --to "$K" --writer 0 --log "$L/u0.log" >/dev/null
victim upd1 'stop@point:ht.write.casing#5' update --from 0 --to "$K" --writer 1 --rounds "$R" --log "$L/u1.log"
V1=$VICTIM
check "${COMMON[@]}" update --from 0 --to "$K" --writer 2 --rounds "$R" --log "$L/u2.log" >/dev/null
finish "$V1" upd1
check check-log --from 0 --to "$K" --log "$L/u0.log" --log "$L/u1.log" --log "$L/u2.log" >/dev/null
echo "ok: a writer stopped between its check and its CAS for ${STOP} s while another updated its keys: nothing lost"

# rmw
check insert --from 1000 --to $((1000 + K)) --writer 0 >/dev/null
victim rmw1 'stop@point:ht.rmw.modifying#5' rmw --from 1000 --to $((1000 + K)) --rounds "$R" --log "$L/r1.log"
V1=$VICTIM
victim rmw2 'stop@posted:cas#40' rmw --from 1000 --to $((1000 + K)) --rounds "$R" --log "$L/r2.log"
V2=$VICTIM
check "${COMMON[@]}" rmw --from 1000 --to $((1000 + K)) --rounds "$R" --log "$L/r3.log" >/dev/null
finish "$V1" rmw1
finish "$V2" rmw2
check check-rmw --from 1000 --to $((1000 + K)) --log "$L/r1.log" --log "$L/r2.log" --log "$L/r3.log" >/dev/null
again=$(sed -n 's/.*slot words read again \([0-9]*\).*/\1/p' "$L/rmw1.out")
((${again:-0} > 0)) || { cat "$L/rmw1.out" >&2; fail "the read-modify-write stopped past half its wrap guard did not read again"; }
echo "ok: read-modify-writes stopped before their check and with their CAS posted, for ${STOP} s: every bump counted once"

# duplicates: 4 keys and many rounds, so that inserts of one key race even
# on a loaded host (the victim stops at its first race; the rounds after
# take well under a second).
D0=3000
DK=4
DR=$(sized 20000 2000)
"$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" "${COMMON[@]}" --spread-inserts --threads 2 --coros 4 churn \
  --from $D0 --to $((D0 + DK)) --writer 1 --rounds $((2 * DR)) --log "$L/d1.log" >"$L/dup1.out" 2>&1 &
CHURNER=$!
VICTIM_TASKS=4 victim dup2 'stop@point:ht.duplicates.removing#1' --spread-inserts churn --from $D0 --to $((D0 + DK)) \
  --writer 2 --rounds "$DR" --log "$L/d2.log"
V2=$VICTIM
victim dup3 'stop@point:ht.miss.confirming#1' --spread-inserts churn --from $D0 --to $((D0 + DK)) --writer 3 \
  --rounds "$DR" --log "$L/d3.log"
V3=$VICTIM
finish "$CHURNER" dup1
finish "$V2" dup2
finish "$V3" dup3
pinned=$(sed -n 's/.*lowest copies pinned \([0-9]*\).*/\1/p' "$L/dup2.out")
((${pinned:-0} > 0)) || { cat "$L/dup2.out" >&2; fail "the insert stopped after its pin reports no pin"; }
check check-log --from $D0 --to $((D0 + DK)) --log "$L/d1.log" --log "$L/d2.log" --log "$L/d3.log" >/dev/null
echo "ok: an insert stopped after pinning the lowest copy of its key and a reader before confirming a miss, for" \
  "${STOP} s, while a third writer churned the keys: logs and table agree"

if ((ON_VERBS)); then
  pass "writers stopped inside their windows and resumed: their logs and the table agree"
  exit 0
fi

# inserts
victim ins1 'stop@point:ht.insert.claiming#3' --spread-inserts churn --from 2000 --to $((2000 + K)) --writer 1 \
  --rounds "$R" --log "$L/c1.log"
V1=$VICTIM
check "${COMMON[@]}" --spread-inserts churn --from 2000 --to $((2000 + K)) --writer 2 --rounds "$R" --log "$L/c2.log" \
  >/dev/null
finish "$V1" ins1
check check-log --from 2000 --to $((2000 + K)) --log "$L/c1.log" --log "$L/c2.log" >/dev/null
echo "ok: an insert stopped between its read and its claim while another writer churned its keys: logs and table agree"
pass "writers stopped inside their windows and resumed: their logs and the table agree"
