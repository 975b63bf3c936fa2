#!/usr/bin/env bash
# How long other clients wait after the holder of a leased remote lock
# stops: five times each, a waiter is already blocked in acquire() when the
# holder is
#   killed (SIGKILL): the memory blade sees the session end and clears its
#                     session word; the waiter reads it (every 10 ms);
#   stopped (SIGSTOP): connected but silent; the waiter takes over once the
#                     word stood still for a whole lease (LEASE_MS, 2000 by
#                     default, the library's default).
# Prints each time (from the signal to the waiter's exit) and the medians.
# Usage: SMART_BIN=build/bin test/bench/lock_resume.sh
source "$(dirname "$0")/../integration/lib.sh"
LEASE_MS=${LEASE_MS:-2000}
start_blade "$SMART_BIN/test_rdma" --config "$(test_rdma_config 64)"
server="127.0.0.1:$BLADE_PORT"
client="$SMART_BIN/integration_client"
"$client" setup-counter --server "$server" --root 1 >/dev/null

# measure SIGNAL: prints the seconds from the signal to the waiter's exit.
measure() {
  local signal=$1
  "$client" lock-hold --server "$server" --root 1 --lease-ms "$LEASE_MS" >"$WORK_DIR/hold.log" 2>&1 &
  local holder=$!
  until grep -q '^holding' "$WORK_DIR/hold.log"; do sleep 0.05; done
  "$client" lock-take --server "$server" --root 1 --lease-ms "$LEASE_MS" --expect took-over >"$WORK_DIR/take.log" 2>&1 &
  local taker=$!
  sleep 0.5  # the taker is connected and waiting
  local t0
  t0=$(date +%s.%N)
  kill "-$signal" "$holder"
  wait "$taker" || { cat "$WORK_DIR/take.log" >&2; fail "the waiter did not take the lock over"; }
  python3 -c "import time; print(f'{time.time() - $t0:.3f}')"
  kill -KILL "$holder" 2>/dev/null || true
  wait "$holder" 2>/dev/null || true
  # Free the word for the next round (the taker exited holding it).
  "$client" lock-take --server "$server" --root 1 --lease-ms 1 --expect took-over >/dev/null 2>&1 || true
}

median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
killed=()
stopped=()
for _ in 1 2 3 4 5; do killed+=("$(measure KILL)"); done
for _ in 1 2 3 4 5; do stopped+=("$(measure STOP)"); done
echo "holder killed:  ${killed[*]} s; median $(median "${killed[@]}") s"
echo "holder stopped: ${stopped[*]} s; median $(median "${stopped[@]}") s (lease ${LEASE_MS} ms)"
