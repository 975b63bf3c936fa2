#!/usr/bin/env bash
# Memory blades in the membership (hashtable_backend --etcd, over a private
# etcd):
#  1. a blade registers where clients reach it (its port and pool ID);
#  2. a second blade cannot take a live blade's id, and exits 1 naming it;
#  3. a blade stopped (SIGSTOP) past its lease leaves the membership; once
#     resumed it ends every session (its client's next request fails) and
#     exits 3 instead of serving as if it were still a member;
#  4. a blade killed (SIGKILL) leaves within its lease (the time is printed,
#     not a pass criterion);
#  5. a blade that ends (SIGTERM) leaves at once, exit 0;
#  6. etcd unreachable or --blade-id missing: the blade does not start, and
#     says why (exit 1, exit 2).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/etcd_lib.sh"
start_etcd

config="$WORK_DIR/backend.json"
cat >"$config" <<JSON
{ "dev_dax_path": "", "capacity": 64, "tcp_port": 0, "nic_numa_node": -1 }
JSON
PREFIX=/smart/t/blades/

# Starts a blade of cluster t as $1; waits until it joined. Sets BLADE_PID,
# BLADE_PORT, BLADE_LOG.
start_member_blade() {
  local id=$1
  start_blade "$SMART_BIN/hashtable_backend" "$config" --etcd "$ETCD_URL" --cluster t --blade-id "$id"
  BLADE_LOG="$WORK_DIR/blade$((${#BLADE_PIDS[@]} - 1)).log"
  for _ in $(seq 1 300); do
    grep -q "joined cluster t as blade $id" "$BLADE_LOG" && return 0
    kill -0 "$BLADE_PID" 2>/dev/null || { cat "$BLADE_LOG" >&2; fail "blade $id exited before joining"; }
    sleep 0.1
  done
  fail "blade $id did not join the membership"
}


members() { membership list --prefix "$PREFIX" | grep -vc '^#' || true; }

# 1.
start_member_blade b1
b1=$BLADE_PID b1_port=$BLADE_PORT b1_log=$BLADE_LOG
membership list --prefix "$PREFIX" >"$WORK_DIR/list"
grep -q "^b1	.*\"port\":$b1_port" "$WORK_DIR/list" || { cat "$WORK_DIR/list" >&2; fail "b1 is not listed with its port"; }
pool=$(sed -n 's/.*(pool ID \([0-9a-f]*\)).*/\1/p' "$b1_log")
grep -q "\"pool_id\":\"$pool\"" "$WORK_DIR/list" || fail "b1 is not listed with its pool ID $pool"
pass "a blade registers where clients reach it"

# 2.
rc=0
"$SMART_BIN/hashtable_backend" "$config" --etcd "$ETCD_URL" --cluster t --blade-id b1 >"$WORK_DIR/dup.log" 2>&1 || rc=$?
[[ $rc == 1 ]] || { cat "$WORK_DIR/dup.log" >&2; fail "a second blade with a live id exited $rc, not 1"; }
grep -q "joining the membership: .*is held by lease" "$WORK_DIR/dup.log" || { cat "$WORK_DIR/dup.log" >&2; fail "the refusal does not say the id is held"; }
pass "a live blade's id cannot be taken"

# 3.
server="127.0.0.1:$b1_port"
"$SMART_BIN/integration_client" setup-counter --server "$server" --root 0 >/dev/null
"$SMART_BIN/integration_client" hammer --server "$server" --root 0 -t 1 -c 2 >"$WORK_DIR/hammer.log" 2>&1 &
client=$!
for _ in $(seq 1 100); do grep -q hammering "$WORK_DIR/hammer.log" && break; sleep 0.1; done
kill -0 "$client" 2>/dev/null || { cat "$WORK_DIR/hammer.log" >&2; fail "the client ended before the blade stopped"; }
kill -STOP "$b1"
for _ in $(seq 1 300); do [[ $(members) == 0 ]] && break; sleep 0.1; done
[[ $(members) == 0 ]] || { kill -CONT "$b1"; fail "a stopped blade stayed in the membership"; }
kill -CONT "$b1"
expect_exit "$b1" 3 "the resumed blade (out of the membership)"
grep -q "out of the membership" "$b1_log" || { cat "$b1_log" >&2; fail "the blade does not say it left the membership"; }
expect_exit_nonzero() {
  local pid=$1 rc=0
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; fail "the client still ran 60 s after its blade left"; }
  wait "$pid" || rc=$?
  ((rc != 0)) || fail "the client of a blade that left exited 0"
}
expect_exit_nonzero "$client"
grep -q "integration_client: after" "$WORK_DIR/hammer.log" || { cat "$WORK_DIR/hammer.log" >&2; fail "the client did not report the failure"; }
[[ $(members) == 0 ]] || fail "the resumed blade came back into the membership"
pass "a blade stopped past its lease leaves, and on resuming ends its sessions and exits 3"

# 4.
start_member_blade b2
b2=$BLADE_PID
"$SMART_BIN/smart_membership" --etcd "$ETCD_URL" watch --prefix "$PREFIX" --until-deleted "${PREFIX}b2" \
  --timeout-ms 30000 >"$WORK_DIR/watch.log" 2>&1 &
watcher=$!
for _ in $(seq 1 100); do grep -q '^watching' "$WORK_DIR/watch.log" && break; sleep 0.1; done
t0=$(date +%s%N)
kill -KILL "$b2"
wait "$watcher" || { cat "$WORK_DIR/watch.log" >&2; fail "the watcher did not see the killed blade leave"; }
echo "the killed blade left after $((($(date +%s%N) - t0) / 1000000)) ms (lease 2000 ms)"
pass "a killed blade leaves the membership"

# 5.
start_member_blade b3
kill -TERM "$BLADE_PID"
expect_exit "$BLADE_PID" 0 "a blade asked to end"
[[ $(members) == 0 ]] || fail "a blade that ended is still listed"
pass "a blade that ends leaves at once"

# 6.
rc=0
"$SMART_BIN/hashtable_backend" "$config" --etcd "http://127.0.0.1:$(free_port)" --blade-id x >"$WORK_DIR/noetcd.log" 2>&1 || rc=$?
[[ $rc == 1 ]] || { cat "$WORK_DIR/noetcd.log" >&2; fail "a blade without its etcd exited $rc, not 1"; }
grep -q "joining the membership: .*etcd" "$WORK_DIR/noetcd.log" || { cat "$WORK_DIR/noetcd.log" >&2; fail "the failure does not name etcd"; }
rc=0
"$SMART_BIN/hashtable_backend" "$config" --etcd "$ETCD_URL" >"$WORK_DIR/noid.log" 2>&1 || rc=$?
[[ $rc == 2 ]] || { cat "$WORK_DIR/noid.log" >&2; fail "--etcd without --blade-id exited $rc, not 2"; }
grep -q -- "--blade-id" "$WORK_DIR/noid.log" || fail "the usage error does not name --blade-id"
pass "a blade that cannot join says why and does not start"
