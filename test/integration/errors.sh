#!/usr/bin/env bash
# Failures a user meets first: no memory blade at the address, a bad address
# argument, and an access outside the pool. Each must be a clear error, never
# a hang or a crash.
source "$(dirname "$0")/lib.sh"
client="$SMART_BIN/integration_client"

# A port nobody listens on: take a free one and release it.
closed_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
expect_fail "connecting to a closed port" "$client" counter --server "127.0.0.1:$closed_port" --root 0
grep -q "127.0.0.1:$closed_port" "$WORK_DIR/expect_fail.log" || {
  cat "$WORK_DIR/expect_fail.log" >&2
  fail "the error does not name the address it tried"
}
grep -qi "refused" "$WORK_DIR/expect_fail.log" || {
  cat "$WORK_DIR/expect_fail.log" >&2
  fail "the error does not say the connection was refused"
}
pass "closed port: $(tail -n 1 "$WORK_DIR/expect_fail.log")"

expect_fail "a malformed server address" "$client" counter --server "localhost" --root 0
grep -q "HOST:PORT" "$WORK_DIR/expect_fail.log" || fail "the error does not say what form was expected"
pass "bad address: $(tail -n 1 "$WORK_DIR/expect_fail.log")"

# test_rdma as a client against the closed port, through its config file.
config="$WORK_DIR/client.json"
sed -e 's/"servers": \[\]/"servers": ["127.0.0.1"]/' -e "s/\"port\": 0/\"port\": $closed_port/" \
  "$(test_rdma_config 64)" >"$config"
expect_fail "test_rdma against a closed port" "$SMART_BIN/test_rdma" --config "$config" 1 1
grep -qi "refused" "$WORK_DIR/expect_fail.log" || {
  cat "$WORK_DIR/expect_fail.log" >&2
  fail "test_rdma's error does not say the connection was refused"
}
pass "test_rdma, closed port: $(tail -n 1 "$WORK_DIR/expect_fail.log")"

# A peer that accepts the connection but never answers the handshake: the
# client must give up after connect_timeout_ms, not wait forever.
silent_config="$WORK_DIR/silent.json"
python3 - "$SMART_CONFIG_PATH" "$silent_config" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["connect_timeout_ms"] = 1000
json.dump(config, open(sys.argv[2], "w"))
PY
python3 - "$WORK_DIR/silent.port" <<'PY' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
conns = []
deadline = time.time() + 60
s.settimeout(1)
while time.time() < deadline:
    try:
        conns.append(s.accept()[0])
    except socket.timeout:
        pass
PY
silent=$!
for _ in $(seq 1 100); do [[ -s $WORK_DIR/silent.port ]] && break; sleep 0.1; done
SMART_CONFIG_PATH=$silent_config expect_fail "a peer that never answers" \
  "$client" counter --server "127.0.0.1:$(cat "$WORK_DIR/silent.port")" --root 0
kill $silent 2>/dev/null || true
grep -qiE "time(d)? ?out" "$WORK_DIR/expect_fail.log" || {
  cat "$WORK_DIR/expect_fail.log" >&2
  fail "the error does not say the handshake timed out"
}
pass "silent peer: $(tail -n 1 "$WORK_DIR/expect_fail.log")"

start_blade "$SMART_BIN/test_rdma" --config "$(test_rdma_config 64)"
"$client" bad-access --server "127.0.0.1:$BLADE_PORT" || fail "out-of-bounds access"
pass "out-of-bounds access gave a clear error and left the client usable"
