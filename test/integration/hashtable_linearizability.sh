#!/usr/bin/env bash
# Linearizability of the hash table, checked by Porcupine
# (test/linearizability). Three client processes, 2 threads x 4 coroutines
# each, search, insert, update and delete 24 keys drawn with a zipf law for a
# few seconds: 400 operations per coroutine, all 24 coroutines starting one
# at the same instant every 10 ms, every third CAS delayed by 20 us (fault
# injection), so that operations on the hot keys overlap. Each process records every
# operation it issued with its outcome and interval (hashtable_check
# contend --history); then the checker must find one order of all of them,
# key by key, that the table's sequential semantics allows and that respects
# real time. A fourth process is killed with SIGKILL in the middle of its
# operations: those it had invoked and not seen return are in its history
# without a response, and may or may not have taken effect.
#
# On a violation, the histories and Porcupine's visualization of the key's
# history are kept in $SMART_GO_DIR/hashtable_linearizability/.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
source "$SMART_SOURCE/test/linearizability/go_env.sh"
build_checker
start_hashtable_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
L=$WORK_DIR
KEEP=$SMART_GO_DIR/hashtable_linearizability
rm -rf "$KEEP"
D=$(sized 4 2)
N=$((D * 100))
check build --expected-keys 1000 >/dev/null
for w in 0 1 2; do
  SMART_FAULTS='delay=20us@cas#3+' check_bg contend --from 0 --to 24 --writer $w --threads 2 --coros 4 \
    --duration "$D" --ops "$N" --history "$L/h$w.txt"
done
# The victim: every CAS of it sleeps 2 ms (fault injection), so that its
# four coroutines are nearly always in the middle of an operation when it is
# killed (it would run for a minute).
SMART_FAULTS='delay=2ms@cas#1+' "$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" contend --from 0 --to 24 \
  --writer 3 --threads 1 --coros 4 --duration 60 --history "$L/h3.txt" >"$L/victim.log" 2>&1 &
VICTIM=$!
sleep "$((D / 2))"
kill -KILL "$VICTIM"
wait "$VICTIM" 2>/dev/null || true
wait_checks
# Operations invoked and never completed: seq of a "?" record with no other.
unanswered=$(awk '{ n[$1 " " $2]++ } END { for (k in n) if (n[k] == 1) c++; print c + 0 }' "$L/h3.txt")
((unanswered > 0)) || { cat "$L/victim.log" >&2; fail "the killed client left no operation without a response"; }

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
pass "four clients contending on 24 keys, one killed with $unanswered operations unanswered: linearizable"
