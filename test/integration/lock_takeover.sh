#!/usr/bin/env bash
# The leased remote lock across processes:
#  1. a holder killed with SIGKILL: another client takes the lock over, seen
#     through the memory blade's session table (five times; the median time
#     from the kill to the take-over is printed, it is not a pass criterion);
#  2. a holder stopped with SIGSTOP (alive, connected, not renewing): another
#     client takes the lock over once the lease expired and has the memory
#     blade fence the holder's session first, so the write the resumed
#     holder makes before its renewal (into another word, which the next
#     holder wrote meanwhile) fails (over verbs at the NIC, over shm in its
#     own provider, which sees its session word changed), and it reports
#     its session ended;
#  3. a free lock is taken without a take-over.
source "$(dirname "$0")/lib.sh"
start_blade "$SMART_BIN/test_rdma" --config "$(test_rdma_config 64)"
server="127.0.0.1:$BLADE_PORT"
client="$SMART_BIN/integration_client"
"$client" setup-counter --server "$server" --root 1 >/dev/null
# The word a holder's critical section writes (its pid), before each renewal.
"$client" setup-counter --server "$server" --root 2 >/dev/null

# Starts a holder in the background; waits until it holds. Sets HOLDER.
start_holder() {
  local log=$1
  shift
  "$client" lock-hold --server "$server" --root 1 "$@" >"$log" 2>&1 &
  HOLDER=$!
  for _ in $(seq 1 600); do
    grep -q '^holding' "$log" && return 0
    kill -0 "$HOLDER" 2>/dev/null || { cat "$log" >&2; fail "the holder exited before holding the lock"; }
    sleep 0.1
  done
  cat "$log" >&2
  fail "the holder did not take the free lock"
}

times=()
for round in 1 2 3 4 5; do
  start_holder "$WORK_DIR/hold.$round.log" --lease-ms 600000
  kill -KILL "$HOLDER"
  killed_at=$(date +%s.%N)
  wait "$HOLDER" 2>/dev/null || true
  # A lease of ten minutes: only the session table can free the lock in time.
  "$client" lock-take --server "$server" --root 1 --lease-ms 600000 --max-wait-ms 20000 --expect took-over \
    >"$WORK_DIR/take.log" 2>&1 ||
    { cat "$WORK_DIR/take.log" >&2; fail "round $round: the lock of a killed holder was not taken over"; }
  took=$(python3 -c "import time; print(f'{time.time() - $killed_at:.3f}')")
  grep -q "holder's session ended" "$WORK_DIR/take.log" ||
    { cat "$WORK_DIR/take.log" >&2; fail "round $round: the take-over did not come from the session table"; }
  times+=("$took")
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
pass "a SIGKILLed holder's lock was taken over 5 times; kill to take-over (incl. process start) median ${median}s: ${times[*]}"

start_holder "$WORK_DIR/hold.stop.log" --lease-ms 400 --scribble-root 2
stopped=$HOLDER
kill -STOP "$stopped"
"$client" lock-take --server "$server" --root 1 --lease-ms 400 --max-wait-ms 20000 --expect took-over >"$WORK_DIR/take.log" 2>&1 ||
  { cat "$WORK_DIR/take.log" >&2; kill -KILL "$stopped"; fail "the lock of a stopped holder was not taken over"; }
grep -q "holder's lease expired" "$WORK_DIR/take.log" ||
  { cat "$WORK_DIR/take.log" >&2; kill -KILL "$stopped"; fail "the stopped holder's lock was not taken over by lease expiry"; }
grep -q "its session fenced" "$WORK_DIR/take.log" ||
  { cat "$WORK_DIR/take.log" >&2; kill -KILL "$stopped"; fail "the taker did not fence the stopped holder"; }
grep -q "memory blade: fencing client" "$WORK_DIR/blade0.log" ||
  { cat "$WORK_DIR/blade0.log" >&2; kill -KILL "$stopped"; fail "the memory blade did not log the fence"; }
# The taker released the lock; a third client holds it now, so that a
# renewal by the resumed holder would have to overwrite somebody's word.
start_holder "$WORK_DIR/hold.third.log" --lease-ms 600000 --scribble-root 2
third=$HOLDER
# The third holder wrote its pid before it said "holding"? Not necessarily:
# wait for its first write.
for _ in $(seq 1 300); do
  "$client" check-counter --server "$server" --root 2 --expect "$third" >/dev/null 2>&1 && break
  sleep 0.1
done
"$client" check-counter --server "$server" --root 2 --expect "$third" >/dev/null ||
  fail "the third holder's write is not in the word"
kill -CONT "$stopped"
set +e
wait "$stopped"
status=$?
set -e
cat "$WORK_DIR/hold.stop.log"
# Fenced: its renewal never reached the word, and it says why.
((status != 0 && status != 3)) || fail "the fenced holder exited $status, expected a failed write or renewal"
grep -q "ended this client's session" "$WORK_DIR/hold.stop.log" ||
  fail "the fenced holder did not report its session ended by the fence"
# Its late write (the one a paused critical section makes) never landed.
"$client" check-counter --server "$server" --root 2 --expect "$third" ||
  fail "the fenced holder's late write landed over the third holder's"
kill -0 "$third" || fail "the third holder died"
grep -q '^lock lost' "$WORK_DIR/hold.third.log" && fail "the resumed holder's renewal broke the third holder's lock"
kill -KILL "$third"
wait "$third" 2>/dev/null || true
pass "a stopped holder was fenced after its lease and, resumed, could neither write nor renew"

"$client" lock-take --server "$server" --root 1 --lease-ms 600000 --expect took-over >"$WORK_DIR/take.log" 2>&1 ||
  { cat "$WORK_DIR/take.log" >&2; fail "the killed third holder's lock was not taken over"; }
"$client" lock-take --server "$server" --root 1 --expect free >"$WORK_DIR/take.log" 2>&1 ||
  { cat "$WORK_DIR/take.log" >&2; fail "a free lock was not taken plainly"; }
pass "a free lock is taken without a take-over"
