#!/usr/bin/env bash
# Linearizability of the B+tree, checked by Porcupine (test/linearizability).
# Three client processes, 2 threads x 4 coroutines each, search, insert,
# update, delete and read-modify-write 400 key ids drawn with a zipf law
# for a few seconds: short values (in the leaf) and long ones (in value
# blocks), in a tree that starts empty and splits into several leaves while
# it runs; 250 operations per coroutine, all coroutines starting one at the
# same instant every tick, every third CAS delayed by 20 us (fault
# injection), so that operations on the hot keys overlap. Each process
# records every operation it issued with its outcome and interval
# (btree_check contend --history); then the checker must find one order of
# all of them, key by key, that the tree's sequential semantics allows and
# that respects real time.
#
# Two more clients fail: one is killed with SIGKILL holding a leaf lock in
# the middle of its operations (the blade sees its session close, its locks
# are taken over at once); one is stopped with SIGSTOP inside a page write's window (its
# write posted and, on shm, not carried out), held while the others take its
# lock over by lease (fencing it) and go on, then resumed: its write must
# never land, and its operation stays without a response. Operations without
# a response may or may not have taken effect; every other outcome must be
# the truth.
#
# On a violation, the histories and Porcupine's visualization of the key's
# history are kept in $SMART_GO_DIR/btree_linearizability/.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/btree_lib.sh"
source "$SMART_SOURCE/test/linearizability/go_env.sh"
build_checker
start_btree_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
L=$WORK_DIR
KEEP=$SMART_GO_DIR/btree_linearizability
rm -rf "$KEEP"
D=4
N=250
LEASE=(--lease-ms 300 --retry-timeout-ms 30000)
IDS=(--from 0 --to 400 --zipf 0.6)
check build >/dev/null

# Waits until process $1 is stopped (state T); fails after 30 s or if it ends.
wait_stopped() {
  local pid=$1 i state
  for ((i = 0; i < 300; ++i)); do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
    [[ $state == T ]] && return 0
    [[ $state == gone ]] && return 1
    sleep 0.1
  done
  return 1
}

# The stopped client: its 30th write-back of a leaf entry, posted with its
# release, stops the process (SIGSTOP) before the request is carried out.
SMART_FAULTS='stop@point:bt.leaf.write_posted#30' "$SMART_BIN/btree_check" --server "${SERVERS[0]}" "${LEASE[@]}" \
  contend "${IDS[@]}" --writer 4 --threads 1 --coros 4 --duration 60 --end-on-error --history "$L/h4.txt" \
  >"$L/stopped.log" 2>&1 &
STOPPED=$!
wait_stopped "$STOPPED" || { cat "$L/stopped.log" >&2; fail "the client to stop never reached its point"; }

for w in 0 1 2; do
  SMART_FAULTS='delay=20us@cas#3+' check_bg contend "${IDS[@]}" --writer $w --threads 2 --coros 4 \
    --duration "$D" --ops "$N" "${LEASE[@]}" --history "$L/h$w.txt" >"$L/c$w.out"
done
# The killed client: SIGKILL holding a leaf lock, after its lease check and
# before its 60th write-back is posted; its other coroutines are in the
# middle of their operations too.
SMART_FAULTS='kill@point:bt.leaf.write_checked#60' "$SMART_BIN/btree_check" --server "${SERVERS[0]}" "${LEASE[@]}" \
  contend "${IDS[@]}" --writer 3 --threads 1 --coros 4 --duration "$D" --ops "$N" --history "$L/h3.txt" \
  >"$L/killed.log" 2>&1 &
KILLED=$!
status=0
wait "$KILLED" || status=$?
((status == 137)) || { cat "$L/killed.log" >&2; fail "the client to kill exited with $status, not killed at its point"; }
wait_checks
kill -CONT "$STOPPED"
status=0
wait "$STOPPED" || status=$?
((status == 0)) || { cat "$L/stopped.log" >&2; fail "the resumed client failed ($status)"; }
# Meanwhile another client took its lock over by lease and had the blade
# end its session (the fence): resumed, its posted write was refused, an
# unknown outcome, never an acknowledgement.
grep -q "ended by an error: .*outcome unknown.*ended this client's session" "$L/stopped.log" ||
  { cat "$L/stopped.log" >&2; fail "the resumed client's write was not refused by the fence and reported as of unknown outcome"; }

# Operations invoked and never completed: seq of a "?" record with no other.
unanswered() { awk '{ n[$1 " " $2]++ } END { for (k in n) if (n[k] == 1) c++; print c + 0 }' "$1"; }
killed_open=$(unanswered "$L/h3.txt")
stopped_open=$(unanswered "$L/h4.txt")
((killed_open > 0)) || { cat "$L/killed.log" >&2; fail "the killed client left no operation without a response"; }
((stopped_open > 0)) || fail "the stopped client left no operation without a response"
rmws=$(awk '$4 == "rmw" && $6 != "?" && $6 != "not-found"' "$L"/h[012].txt | wc -l)
((rmws > 0)) || fail "no read-modify-write found its key"

set +e
time "$CHECKER" --timeout 60s --html "$L/violation.html" "$L"/h*.txt
status=$?
set -e
if ((status != 0)); then
  mkdir -p "$KEEP"
  cp "$L"/h*.txt "$KEEP"/
  [[ -f $L/violation.html ]] && cp "$L/violation.html" "$KEEP"/
  ((status == 3)) && fail "the check ran out of its time limit (unknown); histories in $KEEP"
  fail "the tree's history is not linearizable (checker exit $status); histories and visualization in $KEEP"
fi
check verify --from 0 --to 0 >/dev/null
splits=$(grep -ho "leaf splits [0-9]*" "$L"/c*.out "$L/stopped.log" | awk '{ s += $3 } END { print s + 0 }')
((splits > 0)) || fail "no leaf split happened while the clients contended"
pass "five clients on 400 keys, $rmws read-modify-writes that found their key, one killed ($killed_open unanswered), one stopped in a write and fenced ($stopped_open unanswered), $splits leaf splits: linearizable"
