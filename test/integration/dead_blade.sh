#!/usr/bin/env bash
# A memory blade killed (SIGKILL) in the middle of a run: the client must
# report an error and exit non-zero by itself. A hang is caught by the
# test's own deadline (DEAD_BLADE_DEADLINE seconds), not by ctest.
source "$(dirname "$0")/lib.sh"
deadline=${DEAD_BLADE_DEADLINE:-60}
start_blade "$SMART_BIN/test_rdma" --config "$(test_rdma_config 64)"
server="127.0.0.1:$BLADE_PORT"
"$SMART_BIN/integration_client" setup-counter --server "$server" --root 0

"$SMART_BIN/integration_client" hammer --server "$server" --root 0 -t 2 -c 4 >"$WORK_DIR/hammer.log" 2>&1 &
client=$!
# Let it run until it has done work, then kill the blade.
for _ in $(seq 1 100); do
  grep -q hammering "$WORK_DIR/hammer.log" && break
  sleep 0.1
done
sleep 1
kill -0 $client 2>/dev/null || { cat "$WORK_DIR/hammer.log" >&2; fail "the client ended before the blade was killed"; }
kill -KILL "$BLADE_PID"
killed_at=$(date +%s.%N)

status=""
for _ in $(seq 1 $((deadline * 10))); do
  if ! kill -0 $client 2>/dev/null; then
    set +e
    wait $client
    status=$?
    set -e
    break
  fi
  sleep 0.1
done
if [[ -z $status ]]; then
  kill -KILL $client 2>/dev/null || true
  fail "the client still ran ${deadline}s after its memory blade died"
fi
took=$(python3 -c "import time; print(f'{time.time() - $killed_at:.2f}')")
cat "$WORK_DIR/hammer.log"
((status != 0)) || fail "the client exited 0 after its memory blade died"
grep -q "integration_client: after" "$WORK_DIR/hammer.log" || fail "the client did not report the failure"
pass "the client reported the dead blade and exited $status, ${took}s after the kill"
