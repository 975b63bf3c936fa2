# A private etcd for a test script (source it after lib.sh):
#
#   start_etcd       etcd on two free loopback ports, its data in WORK_DIR;
#                    sets ETCD_PID and ETCD_URL; stopped when the script exits
#   expect_exit PID STATUS WHO
#                    waits (at most 60 s, against a hang) for process PID
#                    to exit, and fails unless its status is STATUS
#   membership ARGS  smart_membership --etcd $ETCD_URL ARGS, in the
#                    foreground (in the background, run the binary itself,
#                    so that $! is its pid and a signal reaches it)
#
# etcd-server comes from ./deps.sh.

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_etcd() {
  command -v etcd >/dev/null || fail "etcd not found (./deps.sh installs etcd-server)"
  local attempt client peer
  for attempt in 1 2 3; do
    client=$(free_port)
    peer=$(free_port)
    ETCD_URL="http://127.0.0.1:$client"
    rm -rf "$WORK_DIR/etcd.data"
    etcd --name test --data-dir "$WORK_DIR/etcd.data" \
      --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "test=http://127.0.0.1:$peer" >"$WORK_DIR/blade.etcd.$attempt.log" 2>&1 &
    ETCD_PID=$!
    BLADE_PIDS+=("$ETCD_PID")
    for _ in $(seq 1 100); do
      if "$SMART_BIN/smart_membership" --etcd "$ETCD_URL" --request-timeout-ms 500 list --prefix /health-check/ \
        >/dev/null 2>&1; then
        return 0
      fi
      kill -0 "$ETCD_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$ETCD_PID" 2>/dev/null || true
    wait "$ETCD_PID" 2>/dev/null || true
  done
  fail "etcd did not start (logs: blade.etcd.*.log)"
}

membership() {
  "$SMART_BIN/smart_membership" --etcd "$ETCD_URL" "$@"
}

expect_exit() {
  local pid=$1 want=$2 who=$3 rc=0
  for _ in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    fail "$who was still running after 60 s (want exit $want)"
  fi
  wait "$pid" || rc=$?
  [[ $rc == "$want" ]] || fail "$who exited $rc, not $want"
}
