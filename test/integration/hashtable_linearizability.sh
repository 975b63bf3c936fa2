#!/usr/bin/env bash
# Linearizability of the hash table, checked by Porcupine
# (test/linearizability). Client processes, 2 threads x 4 coroutines each,
# search, insert, update, read-modify-write and delete keys drawn with a
# zipf law for a few seconds: D * 100 operations per coroutine, all starting
# one at the same instant every 10 ms, every third CAS delayed by 20 us
# (fault injection), so that operations on the hot keys overlap. Each process
# records every operation it issued with its outcome and interval
# (hashtable_check contend --history); then the checker must find one order
# of all of them, key by key, that the table's sequential semantics allows
# and that respects real time. What else happens, by MODE:
#   kill        (default) a further process is killed with SIGKILL in the
#               middle of its operations: those it had invoked and not seen
#               return are in its history without a response;
#   splits      the table is built for 64 keys and 30% of the operations
#               insert keys of their worker's own (or search one), so that
#               subtables split under the others;
#   duplicates  on 8 keys, racing inserts of an absent key claim different
#               slots (--spread-inserts) and leave copies to remove; two
#               further processes stop for 2 s: an insert after it moved
#               the header of its copy's bucket and before it removed the
#               copies above (ht.duplicates.removing), a reader between a
#               read that found no copy and its confirming read
#               (ht.miss.confirming);
#   stops       further processes are stopped (SIGSTOP, by fault injection)
#               inside the windows of their operations and resumed, each
#               2 s later, while the others go on: an insert between its read
#               of the buckets and its claim, an update between its check
#               and its CAS, a read-modify-write before its check (it must
#               read again: half its wrap guard of 3 s passed) and after it,
#               and one with a CAS posted and not yet carried out. Every
#               process keeps blocks whose tag wraps for 3 s, longer than
#               the stops, so a CAS held past its check cannot meet a slot
#               word that only looks unchanged.
#
#   hashtable_linearizability.sh [MODE]
#
# On a violation, the histories and Porcupine's visualization of the key's
# history are kept in $SMART_GO_DIR/hashtable_linearizability/ (.MODE/ but
# for kill).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
source "$SMART_SOURCE/test/linearizability/go_env.sh"
MODE=${1:-kill}
case $MODE in
  kill | splits | duplicates | stops) ;;
  *) fail "unknown mode '$MODE' (kill, splits, duplicates or stops)" ;;
esac
build_checker
start_hashtable_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
L=$WORK_DIR
KEEP=$SMART_GO_DIR/hashtable_linearizability
[[ $MODE == kill ]] || KEEP+=.$MODE
rm -rf "$KEEP"
D=$(sized 4 2)
N=$((D * 100))
KEYS=24
COMMON=()
EXPECTED=1000
case $MODE in
  splits) EXPECTED=64 COMMON=(--fresh 30) ;;
  duplicates) KEYS=8 COMMON=(--spread-inserts) ;;
  stops) COMMON=(--wrap-guard-ms 3000 --lease-ms 20000) ;;
esac
check build --expected-keys $EXPECTED >/dev/null

# contender W [ARGS...]: writer W's contend in the background, its output in
# $L/c$W.out; its pid is appended to CONTENDERS.
CONTENDERS=()
contender() {
  local w=$1
  shift
  "$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" "${COMMON[@]}" "$@" contend --from 0 --to $KEYS --writer "$w" \
    --history "$L/h$w.txt" >"$L/c$w.out" 2>&1 &
  CONTENDERS+=($!)
}
# The sum of a counter ("splits", "duplicates removed", ...) over the
# contenders' summary lines.
counted() {
  sed -n "s/.*[(,] $1 \([0-9]*\)[,)].*/\1/p" "$L"/c*.out | awk '{ s += $1 } END { print s + 0 }'
}
# Waits until process $1 is stopped (SIGSTOP); fails when it exits first.
wait_stopped() {
  local pid=$1 state
  for _ in $(seq 1 1200); do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo X)
    [[ $state == T ]] && return 0
    [[ $state == X || $state == Z ]] && return 1
    sleep 0.05
  done
  return 1
}

# stop_contenders POINT...: writer 3 + i contends (STOPPED_TASKS
# coroutines, 2 by default) with SMART_FAULTS stop@POINT[i] and is resumed
# 2 s after it stopped there, while the others go on; waits for every
# resume. A writer that never stops leaves $L/unstopped.i.
stop_contenders() {
  local points=("$@") resumers=() i victim
  for i in "${!points[@]}"; do
    SMART_FAULTS="stop@${points[$i]}" contender $((3 + i)) --threads 1 --coros "${STOPPED_TASKS:-2}" --duration "$D" \
      --ops "$N"
    victim=${CONTENDERS[-1]}
    (
      wait_stopped "$victim" || { echo "writer $((3 + i)) never stopped at ${points[$i]}" >"$L/unstopped.$i"; exit 0; }
      sleep 2
      kill -CONT "$victim"
    ) &
    resumers+=($!)
  done
  for i in "${resumers[@]}"; do wait "$i"; done
}

for w in 0 1 2; do
  SMART_FAULTS='delay=20us@cas#3+' contender $w --threads 2 --coros 4 --duration "$D" --ops "$N"
done
what=""
case $MODE in
  kill)
    # The victim: every CAS of it sleeps 2 ms, so that its four coroutines
    # are nearly always in the middle of an operation when it is killed (it
    # would run for a minute).
    SMART_FAULTS='delay=2ms@cas#1+' "$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" contend --from 0 --to $KEYS \
      --writer 3 --threads 1 --coros 4 --duration 60 --history "$L/h3.txt" >"$L/victim.log" 2>&1 &
    VICTIM=$!
    sleep "$((D / 2))"
    kill -KILL "$VICTIM"
    wait "$VICTIM" 2>/dev/null || true
    ;;
  stops)
    # The 20th CAS: past the opening of the table, among the operations.
    stop_contenders point:ht.insert.claiming#2 point:ht.write.casing#2 point:ht.rmw.modifying#2 \
      point:ht.rmw.casing#2 posted:cas#20
    ;;
  duplicates)
    # An insert stopped after it moved its copy's bucket header and before
    # it removed the copies above; a reader stopped between a read that
    # found no copy and the read that must confirm it.
    # Four tasks, so that the insert meets a duplicate early.
    STOPPED_TASKS=4 stop_contenders point:ht.duplicates.removing#1 point:ht.miss.confirming#2
    ;;
esac
status=0
for pid in "${CONTENDERS[@]}"; do wait "$pid" || status=1; done
if ((status != 0)); then
  tail -n 5 "$L"/c*.out >&2
  fail "a contending hashtable_check failed"
fi
case $MODE in
  kill)
    # Operations invoked and never completed: seq of a "?" record with no other.
    unanswered=$(awk '{ n[$1 " " $2]++ } END { for (k in n) if (n[k] == 1) c++; print c + 0 }' "$L/h3.txt")
    ((unanswered > 0)) || { cat "$L/victim.log" >&2; fail "the killed client left no operation without a response"; }
    what="four clients contending on $KEYS keys, one killed with $unanswered operations unanswered"
    ;;
  splits)
    splits=$(counted splits)
    ((splits > 0)) || fail "the table did not split during the run"
    what="three clients contending on $KEYS keys while inserting their own, through $splits splits"
    ;;
  duplicates)
    if compgen -G "$L/unstopped.*" >/dev/null; then cat "$L"/unstopped.* >&2; fail "a client never stopped at its point"; fi
    removed=$(counted "duplicates removed")
    ((removed > 0)) || fail "racing inserts left no duplicate to remove"
    what="three clients contending on $KEYS keys with inserts spread over the slots, $removed duplicates removed,"
    what+=" one inserter stopped before removing its duplicates and one reader before confirming a miss"
    ;;
  stops)
    if compgen -G "$L/unstopped.*" >/dev/null; then cat "$L"/unstopped.* >&2; fail "a client never stopped at its point"; fi
    read_again=$(sed -n 's/.*slot words read again \([0-9]*\).*/\1/p' "$L/c5.out")
    ((${read_again:-0} > 0)) ||
      { cat "$L/c5.out" >&2; fail "the read-modify-write stopped before its check did not read its slot again"; }
    what="three clients contending on $KEYS keys and five stopped inside their windows for 2 s each"
    ;;
esac

set +e
time "$CHECKER" --timeout 60s --html "$L/violation.html" "$L"/h*.txt
status=$?
set -e
if ((status != 0)); then
  mkdir -p "$KEEP"
  cp "$L"/h*.txt "$KEEP"/
  [[ -f $L/violation.html ]] && cp "$L/violation.html" "$KEEP"/
  ((status == 3)) && fail "the check ran out of its time limit (unknown); histories in $KEEP"
  fail "the table's history is not linearizable (checker exit $status); histories and visualization in $KEEP"
fi
pass "$what: linearizable"
