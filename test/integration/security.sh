#!/usr/bin/env bash
# Authenticated sessions and bounded handshakes between real processes:
#   - a blade with a key: the right key connects; a wrong key (named by its
#     ID) and no key are refused, with a clear error on both sides naming the
#     peer; raw bytes and a key file others may read are no key;
#   - a rotation on SIGHUP: old and new key both accepted, then only the new
#     one; a reload that fails keeps the keys;
#   - beyond loopback without a key the blade refuses to start;
#   - shm: a client running as another user (nobody) does not get the pool,
#     unless the blade's auth.allow_uids lists it, and never a pool kept in a
#     file (needs root; else skipped);
#   - 200 idle TCP peers from one address hold at most 16 places
#     (max_startups_per_source) and do not keep a legitimate client out, nor
#     do 2,000 from 100 addresses when the blade allows 64 clients (at
#     max_startups it drops the longest-waiting unauthenticated peer);
#   - at ulimit -n 1024 the blade serves fewer than max_clients 1023 and says
#     so, and 8 keyed clients connect while 1,400 idle peers from 100
#     addresses hold connections;
#   - with its limit lowered to 96 under it and 160 idle peers, the listener
#     says once that it cannot accept, backs off, and serves again once
#     descriptors free up.
source "$(dirname "$0")/lib.sh"
client="$SMART_BIN/integration_client"
blade="$SMART_BIN/hashtable_backend"

# json_set SRC DST KEY=JSON...: a copy of a JSON file with dotted keys set.
json_set() {
  python3 - "$@" <<'PY'
import json, sys
src, dst, *settings = sys.argv[1:]
config = json.load(open(src)) if src != "-" else {}
for setting in settings:
    key, value = setting.split("=", 1)
    node = config
    *parents, leaf = key.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = json.loads(value)
json.dump(config, open(dst, "w"), indent=2)
PY
}

# grep_log WHAT FILE PATTERN: FILE must hold PATTERN.
grep_log() {
  grep -q -- "$3" "$2" || { cat "$2" >&2; fail "$1: no \"$3\" in $(basename "$2")"; }
}

(cd "$WORK_DIR" && "$SMART_BIN/smart_keygen" blade.key) >"$WORK_DIR/keygen.out"
[[ $(stat -c %a "$WORK_DIR/blade.key") == 600 && $(head -n 1 "$WORK_DIR/blade.key") == "SMART-KEY v1" ]] ||
  fail "smart_keygen did not write a key file with mode 0600"
# What it says to put in a config names the file wherever that config is.
grep -q "\"key_file\": \"$(realpath "$WORK_DIR/blade.key")\"" "$WORK_DIR/keygen.out" ||
  fail "smart_keygen's advice does not name the key by its absolute path: $(cat "$WORK_DIR/keygen.out")"
"$SMART_BIN/smart_keygen" "$WORK_DIR/wrong.key" >/dev/null
json_set - "$WORK_DIR/backend.json" capacity=64 tcp_port=0 "auth={\"key_file\": \"$WORK_DIR/blade.key\"}"
json_set "$SMART_CONFIG_PATH" "$WORK_DIR/right.json" "auth.key_file=\"$WORK_DIR/blade.key\""
json_set "$SMART_CONFIG_PATH" "$WORK_DIR/wrong.json" "auth.key_file=\"$WORK_DIR/wrong.key\""

# --- keys ----------------------------------------------------------------------
start_blade "$blade" "$WORK_DIR/backend.json"
keyed_log="$WORK_DIR/blade$((${#BLADE_PIDS[@]} - 1)).log"
server="127.0.0.1:$BLADE_PORT"
grep_log "the listening line" "$keyed_log" "listening on port $BLADE_PORT at 127.0.0.1, clients must prove the key"

SMART_CONFIG_PATH=$WORK_DIR/right.json "$client" setup-counter --server "$server" --root 1 ||
  fail "a client with the blade's key could not connect"
pass "the right key connects"

SMART_CONFIG_PATH=$WORK_DIR/wrong.json expect_fail "a client with the wrong key" \
  "$client" setup-counter --server "$server" --root 1
blade_id=$(sed -n 's/^id //p' "$WORK_DIR/blade.key")
wrong_id=$(sed -n 's/^id //p' "$WORK_DIR/wrong.key")
grep_log "wrong key, client" "$WORK_DIR/expect_fail.log" "memory blade $server refused the connection"
grep_log "wrong key, client" "$WORK_DIR/expect_fail.log" "the client's key (ID $wrong_id) is not the memory blade's (ID $blade_id)"
grep_log "wrong key, blade" "$keyed_log" "refused client 127.0.0.1:[0-9]*: the client's key (ID $wrong_id)"
pass "wrong key: $(grep -o "the client's key.*blade's (ID [0-9a-f]*)" "$WORK_DIR/expect_fail.log" | head -n 1)"

expect_fail "a client without a key" "$client" setup-counter --server "$server" --root 1
grep_log "no key, client" "$WORK_DIR/expect_fail.log" "memory blade $server refused the connection: .*requires a key"
grep_log "no key, blade" "$keyed_log" "refused client 127.0.0.1:[0-9]*: .*requires a key"
pass "no key: refused on both sides"

# Not keys: 32 raw random bytes (what a key file used to be), and a key file
# that others may read. A blade refuses to start on either, saying what to do.
(umask 077 && head -c 32 /dev/urandom >"$WORK_DIR/raw.key")
json_set - "$WORK_DIR/raw.json" capacity=16 tcp_port=0 "auth={\"key_file\": \"$WORK_DIR/raw.key\"}"
expect_fail "a blade with raw bytes for a key" "$blade" "$WORK_DIR/raw.json"
grep_log "raw key" "$WORK_DIR/expect_fail.log" "raw.key.* is not a key file.*smart_keygen"
cp "$WORK_DIR/blade.key" "$WORK_DIR/open.key" && chmod 644 "$WORK_DIR/open.key"
json_set - "$WORK_DIR/open-key.json" capacity=16 tcp_port=0 "auth={\"key_file\": \"$WORK_DIR/open.key\"}"
expect_fail "a blade with a world-readable key" "$blade" "$WORK_DIR/open-key.json"
grep_log "open key" "$WORK_DIR/expect_fail.log" "open.key.*may be read or written by group or others (mode 0644): chmod 600"
pass "keys: raw bytes and a world-readable key file are refused"

# --- rotation: a second key joins, the first leaves, on SIGHUP ----------------------
"$SMART_BIN/smart_keygen" "$WORK_DIR/next.key" >/dev/null
next_id=$(sed -n 's/^id //p' "$WORK_DIR/next.key")
json_set "$SMART_CONFIG_PATH" "$WORK_DIR/next.json" "auth.key_file=\"$WORK_DIR/next.key\""
json_set - "$WORK_DIR/rotating.json" capacity=16 tcp_port=0 "auth={\"key_file\": \"$WORK_DIR/blade.key\"}"
start_blade "$blade" "$WORK_DIR/rotating.json"
rotating_log="$WORK_DIR/blade$((${#BLADE_PIDS[@]} - 1)).log"
rotating_pid=$BLADE_PID
# reload STEP JSON: rewrites rotating.json's auth, sends SIGHUP, waits for the
# blade to say it reloaded (the STEP-th time).
reload() {
  json_set - "$WORK_DIR/rotating.json" capacity=16 tcp_port=0 "auth=$2"
  kill -HUP "$rotating_pid"
  local i
  for ((i = 0; i < 100; i++)); do
    (($(grep -c "keys reloaded" "$rotating_log") >= $1)) && return 0
    sleep 0.05
  done
  cat "$rotating_log" >&2
  fail "the blade did not reload its keys on SIGHUP"
}
reload 1 "{\"key_file\": \"$WORK_DIR/next.key\", \"also_accept\": [\"$WORK_DIR/blade.key\"]}"
SMART_CONFIG_PATH=$WORK_DIR/right.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 ||
  fail "rotation: a client with the old key could not connect while both keys are accepted"
SMART_CONFIG_PATH=$WORK_DIR/next.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 ||
  fail "rotation: a client with the new key could not connect"
reload 2 "{\"key_file\": \"$WORK_DIR/next.key\"}"
SMART_CONFIG_PATH=$WORK_DIR/right.json expect_fail "rotation: a client with the retired key" \
  "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1
grep_log "retired key" "$WORK_DIR/expect_fail.log" "the client's key (ID $blade_id) is not the memory blade's (ID $next_id)"
SMART_CONFIG_PATH=$WORK_DIR/next.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 ||
  fail "rotation: a client with the new key could not connect after the old one left"
# A reload that names a key file that does not exist changes nothing.
json_set - "$WORK_DIR/rotating.json" capacity=16 tcp_port=0 "auth={\"key_file\": \"$WORK_DIR/missing.key\"}"
kill -HUP "$rotating_pid"
for ((i = 0; i < 100; i++)); do grep -q "were not reloaded" "$rotating_log" && break; sleep 0.05; done
grep_log "failed reload" "$rotating_log" "SIGHUP: the keys were not reloaded, the old ones stay: .*missing.key"
SMART_CONFIG_PATH=$WORK_DIR/next.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 ||
  fail "rotation: a failed reload lost the blade's keys"
pass "rotation on SIGHUP: both keys during the change, then only the new one"

# --- where it listens ------------------------------------------------------------
json_set - "$WORK_DIR/open.json" capacity=16 tcp_port=0
expect_fail "a keyless blade on 0.0.0.0" "$blade" "$WORK_DIR/open.json" --bind 0.0.0.0
grep_log "keyless blade beyond loopback" "$WORK_DIR/expect_fail.log" "refusing to listen on 0.0.0.0 without a key"
start_blade "$blade" "$WORK_DIR/backend.json" --bind 0.0.0.0 --capacity 16
grep_log "the listening line" "$WORK_DIR/blade$((${#BLADE_PIDS[@]} - 1)).log" "listening on port $BLADE_PORT at 0.0.0.0"
SMART_CONFIG_PATH=$WORK_DIR/right.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 ||
  fail "a client could not reach a keyed blade bound to 0.0.0.0"
pass "beyond loopback only with a key"

# --- shm: the pool only for the blade's user and auth.allow_uids ---------------------
nobody_uid=$(id -u nobody 2>/dev/null || echo "")
if [[ ${SMART_TEST_TRANSPORT:-shm} != shm ]]; then
  echo "skip: other-user checks are about the shm transport's memfd (this run is on ${SMART_TEST_TRANSPORT})"
elif (($(id -u) != 0)) || [[ -z $nobody_uid ]] || ! command -v setpriv >/dev/null; then
  echo "skip: running a client as another user needs root, a user 'nobody' and setpriv (uid $(id -u))"
else
  # A world-traversable corner of the work directory with nobody's own copy
  # of the key and config.
  chmod 711 "$WORK_DIR"
  mkdir -m 755 "$WORK_DIR/nobody"
  install -m 600 -o nobody "$WORK_DIR/blade.key" "$WORK_DIR/nobody/smart.key"
  json_set "$SMART_CONFIG_PATH" "$WORK_DIR/nobody/smart.json" "auth.key_file=\"$WORK_DIR/nobody/smart.key\""
  chmod 644 "$WORK_DIR/nobody/smart.json"
  # Nobody's own copy of the client too: the build tree may sit in a
  # directory only root can enter (a checkout under mktemp -d is 0700).
  install -m 755 "$client" "$WORK_DIR/nobody/integration_client"
  nobody_client="$WORK_DIR/nobody/integration_client"
  as_nobody() {
    (cd "$WORK_DIR/nobody" && setpriv --reuid="$nobody_uid" --regid="$(id -g nobody)" --clear-groups \
      env SMART_CONFIG_PATH="$WORK_DIR/nobody/smart.json" "$@")
  }

  as_nobody true || fail "cannot run a command as nobody"
  expect_fail "a client running as nobody" as_nobody "$nobody_client" setup-counter --server "$server" --root 1
  grep_log "other user, client" "$WORK_DIR/expect_fail.log" "memory blade runs as uid 0 and this process as uid $nobody_uid"
  pass "shm, another user: $(grep -o 'cannot reach.*' "$WORK_DIR/expect_fail.log" | head -n 1 | cut -c1-100)..."

  # allow_uids names someone else: the socket is reachable, the credentials
  # check refuses.
  json_set "$WORK_DIR/backend.json" "$WORK_DIR/others.json" capacity=16 'auth.allow_uids=[4242]'
  start_blade "$blade" "$WORK_DIR/others.json"
  expect_fail "nobody, not in allow_uids" as_nobody "$nobody_client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1
  grep_log "not allowed, client" "$WORK_DIR/expect_fail.log" "refuses to share its pool with this process's user (uid $nobody_uid)"
  grep_log "not allowed, blade" "$WORK_DIR/blade$((${#BLADE_PIDS[@]} - 1)).log" "refused the pool to uid $nobody_uid"
  pass "shm, SO_PEERCRED: uid $nobody_uid refused by the blade"

  json_set "$WORK_DIR/backend.json" "$WORK_DIR/allowed.json" capacity=16 "auth.allow_uids=[$nobody_uid]"
  start_blade "$blade" "$WORK_DIR/allowed.json"
  as_nobody "$nobody_client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 >"$WORK_DIR/allowed.log" 2>&1 ||
    { cat "$WORK_DIR/allowed.log" >&2; fail "nobody, listed in allow_uids, could not connect"; }
  pass "shm: a user in allow_uids connects"

  # A pool in a file: its descriptor could truncate the file under the
  # blade, so another user does not get it, even one in allow_uids; the
  # blade's own user does, and the file keeps its size.
  json_set "$WORK_DIR/backend.json" "$WORK_DIR/file.json" capacity=16 "auth.allow_uids=[$nobody_uid]" \
    "backing=\"file:$WORK_DIR/pool.file\""
  start_blade "$blade" "$WORK_DIR/file.json"
  file_size=$(stat -c %s "$WORK_DIR/pool.file")
  expect_fail "nobody, a file pool" as_nobody "$nobody_client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1
  grep_log "file pool, client" "$WORK_DIR/expect_fail.log" "keeps its pool in a file or device"
  grep_log "file pool, blade" "$WORK_DIR/blade$((${#BLADE_PIDS[@]} - 1)).log" \
    "refused the pool to uid $nobody_uid.*file or device"
  SMART_CONFIG_PATH=$WORK_DIR/right.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 ||
    fail "the blade's own user could not map its file pool"
  [[ $(stat -c %s "$WORK_DIR/pool.file") == "$file_size" ]] || fail "the pool file changed size"
  pass "shm: a file pool only for the blade's user ($file_size bytes, unchanged)"
fi

# --- floods -------------------------------------------------------------------------
# flood PORT COUNT [SOURCES]: COUNT idle TCP connections from SOURCES
# loopback addresses (127.0.0.2 on; default 100), held until
# $WORK_DIR/release exists (at most 120 s); sets FLOOD_PID once they are all
# connected. When released it writes to $WORK_DIR/answered how many of its
# connections the blade answered (refused or dropped) meanwhile.
flood() {
  rm -f "$WORK_DIR/release" "$WORK_DIR/flooded" "$WORK_DIR/answered"
  python3 - "$1" "$2" "${3:-100}" "$WORK_DIR/flooded" "$WORK_DIR/release" "$WORK_DIR/answered" <<'PY' &
import os, resource, select, socket, sys, time
port, count, sources = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ready, release, answered = sys.argv[4], sys.argv[5], sys.argv[6]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < count + 64:
    if hard != resource.RLIM_INFINITY and hard < count + 64:
        sys.exit(f"flood: {count} connections need {count + 64} descriptors, and ulimit -n allows {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (count + 64, hard))
peers = []
for i in range(count):
    s = socket.socket()
    s.bind((f"127.0.{(i % sources) // 250}.{2 + (i % sources) % 250}", 0))
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    peers.append(s)
open(ready, "w").write(str(len(peers)))
deadline = time.time() + 120
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.05)
poller = select.poll()
for s in peers:
    poller.register(s, select.POLLIN)
open(answered, "w").write(str(len(poller.poll(0))))
PY
  FLOOD_PID=$!
  local i
  for ((i = 0; i < 600; i++)); do
    [[ -f $WORK_DIR/flooded ]] && return 0
    kill -0 "$FLOOD_PID" 2>/dev/null || fail "the flood of $2 connections failed"
    sleep 0.1
  done
  fail "the flood of $2 connections did not connect within 60 s"
}
release_flood() {
  touch "$WORK_DIR/release"
  wait "$FLOOD_PID" || true
}
answered() { cat "$WORK_DIR/answered" 2>/dev/null || echo 0; }

# 200 idle peers from one address: it holds at most max_startups_per_source
# (16) places; the others are dropped, each for the next.
flood "$BLADE_PORT" 200 1
SMART_CONFIG_PATH=$WORK_DIR/right.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 ||
  fail "a client could not connect while 200 idle peers held connections"
sleep 0.5
release_flood
(($(answered) >= 200 - 16)) || fail "of 200 idle peers from one address the blade dropped only $(answered)"
echo "info: of 200 idle peers from one address, $(answered) were dropped"
pass "200 idle peers from one address hold at most 16 places, and a legitimate client still connects"

# More idle peers than the blade takes: each newcomer displaces the handshake
# that has waited longest without proving the key.
json_set "$WORK_DIR/backend.json" "$WORK_DIR/crowded.json" max_clients=64
json_set "$SMART_CONFIG_PATH" "$WORK_DIR/crowded-client.json" "auth.key_file=\"$WORK_DIR/blade.key\"" \
  connect_timeout_ms=60000
SMART_CONFIG_PATH=$WORK_DIR/crowded-client.json start_blade "$blade" "$WORK_DIR/crowded.json"
crowded_log="$WORK_DIR/blade$((${#BLADE_PIDS[@]} - 1)).log"
flood "$BLADE_PORT" 2000
SMART_CONFIG_PATH=$WORK_DIR/right.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 ||
  fail "a client could not connect while 2,000 idle peers crowded a blade of max_clients 64"
release_flood
grep_log "making room" "$crowded_log" "at max_startups (64 handshakes in progress): dropped the handshake of 127.0.[0-9.]*:[0-9]*, unauthenticated"
grep_log "the client's session" "$crowded_log" "session [0-9]*, authenticated"
pass "2,000 idle peers at max_clients 64: a legitimate client still connects"

# The usual descriptor limit, 1024 (soft and hard): max_clients 1023 does
# not fit, so the blade says how many clients it serves instead. 1,400 idle
# peers then cannot make accept() fail, and 8 clients with the key, started
# while the flood holds its connections, all connect (each gives up after
# 5 s: connect_timeout_ms). The flood comes from 100 addresses, 14 each,
# under max_startups_per_source. Twice: with the default max_startups (at
# most 256 unauthenticated peers, the longest waiting dropped for each
# newcomer), and with max_startups raised to max_clients and no early
# drops, where only the descriptor budget keeps accept() from failing.
json_set "$SMART_CONFIG_PATH" "$WORK_DIR/brisk.json" "auth.key_file=\"$WORK_DIR/blade.key\"" connect_timeout_ms=5000
json_set "$WORK_DIR/backend.json" "$WORK_DIR/wide-open.json" 'max_startups="1022:0:1022"'
for config in backend wide-open; do
  start_blade bash -c 'ulimit -n 1024 && exec "$0" "$@"' "$blade" "$WORK_DIR/$config.json" --capacity 16
  usual_log="$WORK_DIR/blade$((${#BLADE_PIDS[@]} - 1)).log"
  grep_log "the descriptor limit" "$usual_log" \
    "max_clients 1023 (.*) needs [0-9]* open files, but this process may open only 1024 .*serving at most [0-9]* clients"
  flood "$BLADE_PORT" 1400
  started=$(date +%s%N)
  keyed_pids=()
  for i in 1 2 3 4 5 6 7 8; do
    SMART_CONFIG_PATH=$WORK_DIR/brisk.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root "$i" \
      >"$WORK_DIR/keyed$i.log" 2>&1 &
    keyed_pids+=($!)
  done
  connected=0
  for i in "${!keyed_pids[@]}"; do
    if wait "${keyed_pids[$i]}"; then
      connected=$((connected + 1))
    else
      cat "$WORK_DIR/keyed$((i + 1)).log" >&2
    fi
  done
  elapsed_ms=$((($(date +%s%N) - started) / 1000000))
  release_flood
  ((connected == 8)) ||
    { tail -n 20 "$usual_log" >&2; fail "ulimit -n 1024, 1,400 idle peers ($config.json): $connected of 8 keyed clients connected"; }
  if grep -q "cannot accept connections" "$usual_log"; then
    cat "$usual_log" >&2
    fail "ulimit -n 1024 ($config.json): the blade ran out of descriptors"
  fi
  echo "info: $config.json: 8 keyed clients connected during a flood of 1,400 in $elapsed_ms ms"
  pass "ulimit -n 1024, 1,400 idle peers ($config.json): all 8 keyed clients connect, and accept() never fails"
done

# The limit lowered under a running blade (to 96; a blade needs a dozen or
# two of its own), so that its budget from the start no longer holds: it
# runs out while the flood of 160 holds its connections.
# Its handshakes wait for 60 s, so the flood is one episode.
# No early drops either (max_startups from 400 on): a drop would free a
# descriptor and start a second episode.
json_set "$SMART_CONFIG_PATH" "$WORK_DIR/patient.json" connect_timeout_ms=60000
json_set "$WORK_DIR/backend.json" "$WORK_DIR/no-drops.json" 'max_startups="400:30:800"'
SMART_CONFIG_PATH=$WORK_DIR/patient.json start_blade "$blade" "$WORK_DIR/no-drops.json" --capacity 16
low_log="$WORK_DIR/blade$((${#BLADE_PIDS[@]} - 1)).log"
low_pid=$BLADE_PID
prlimit --pid "$low_pid" --nofile=96:96 || fail "prlimit could not lower the blade's open-file limit"
flood "$BLADE_PORT" 160
for ((i = 0; i < 300; i++)); do
  grep -q "cannot accept connections" "$low_log" && break
  sleep 0.1
done
grep_log "out of descriptors" "$low_log" "cannot accept connections: Too many open files (this process may open 96 files"
ticks() { awk '{print $14 + $15}' "/proc/$low_pid/stat"; }
before=$(ticks)
sleep 2
after=$(ticks)
count=$(grep -c "cannot accept connections" "$low_log")
((count == 1)) || { cat "$low_log" >&2; fail "the accept failure was logged $count times, expected once"; }
echo "info: CPU time of the blade over 2 s of EMFILE: $(((after - before) * 10)) ms"
release_flood
SMART_CONFIG_PATH=$WORK_DIR/right.json "$client" setup-counter --server "127.0.0.1:$BLADE_PORT" --root 1 ||
  fail "the blade did not serve again after descriptors freed up"
grep_log "recovery" "$low_log" "accepting connections again"
# Backing off, the listener tries a few times a second (at least once a
# second); spinning on the readable socket it would try millions of times.
attempts=$(sed -n 's/.*accepting connections again (\([0-9]*\) attempts failed.*/\1/p' "$low_log" | sort -n | tail -n 1)
[[ -n $attempts ]] && ((attempts < 1000)) ||
  { cat "$low_log" >&2; fail "the listener tried to accept ${attempts:-?} times while out of descriptors: it spins"; }
echo "info: $attempts accept attempts failed while out of descriptors"
pass "open-file limit lowered to 96 under the blade: logged once, backed off, served again"
