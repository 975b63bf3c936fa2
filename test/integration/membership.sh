#!/usr/bin/env bash
# The membership in etcd across processes (smart_membership over a private
# etcd):
#  1. a member is listed; a second process cannot take its id;
#  2. of four processes racing to register one id, exactly one does;
#  3. a member killed with SIGKILL leaves: a watcher sees its key deleted
#     (the time from the kill is printed, it is not a pass criterion);
#  4. a member stopped with SIGSTOP past its lease leaves, and once resumed
#     it finds its registration lost (exit 3) and does not come back;
#  5. a member that ends normally (SIGTERM) leaves at once;
#  6. with etcd stopped (SIGSTOP): a call fails in bounded time naming
#     etcd, and a member that cannot renew gives up its registration
#     within its lease (exit 3) rather than go on as if it held it;
#  7. an operator's removal deletes the key, and the member finds out;
#  8. the epoch: the first one places the registered blades' shards, and of
#     two proposals of the next one from the same revision, one wins;
#  9. a client's view of the epoch follows it, lapses once etcd cannot
#     confirm it within the epoch lease, and is current again after.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/etcd_lib.sh"
# Nothing here touches a transport: the Soft-RoCE tier has no more to test.
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then
  echo "skipped: etcd alone, no transport (the shm tier runs it)"
  exit 77
fi
start_etcd

# Starts a member in the background and waits until it is registered.
# Sets MEMBER (its pid).
start_member() {
  local key=$1 log=$2
  shift 2
  "$SMART_BIN/smart_membership" --etcd "$ETCD_URL" register --key "$key" --value "addr-of-$key" "$@" >"$log" 2>&1 &
  MEMBER=$!
  for _ in $(seq 1 300); do
    grep -q '^registered' "$log" && return 0
    kill -0 "$MEMBER" 2>/dev/null || { cat "$log" >&2; fail "the member of $key exited before registering"; }
    sleep 0.1
  done
  cat "$log" >&2
  fail "the member of $key did not register"
}

# Waits (at most 30 s, against a hang) until `membership list` of $1 shows
# exactly $2 members.
wait_members() {
  local prefix=$1 want=$2 got=""
  for _ in $(seq 1 300); do
    got=$(membership list --prefix "$prefix" | grep -vc '^#' || true)
    [[ $got == "$want" ]] && return 0
    sleep 0.1
  done
  fail "$prefix has $got members, not $want"
}


P=/test/blades/

# 1.
start_member "${P}1" "$WORK_DIR/m1.log"
m1=$MEMBER
membership list --prefix "$P" >"$WORK_DIR/list.1"
grep -q $'^1\taddr-of-/test/blades/1\t' "$WORK_DIR/list.1" || { cat "$WORK_DIR/list.1" >&2; fail "member 1 not listed"; }
if membership register --key "${P}1" --value intruder >"$WORK_DIR/dup.log" 2>&1; then
  fail "a second process registered the id of a live member"
fi
grep -q "is held by lease" "$WORK_DIR/dup.log" || { cat "$WORK_DIR/dup.log" >&2; fail "the refusal does not name the holder"; }
membership list --prefix "$P" | grep -q 'addr-of-/test/blades/1' || fail "the refused intruder changed member 1's value"
pass "a live member's id cannot be taken"

# 2.
racers=()
for i in 1 2 3 4; do
  "$SMART_BIN/smart_membership" --etcd "$ETCD_URL" register --key "${P}race" --value "racer-$i" \
    >"$WORK_DIR/race.$i.log" 2>&1 &
  racers+=($!)
done
# Until each racer has registered or been refused (at most 30 s).
for _ in $(seq 1 300); do
  winners=$(cat "$WORK_DIR"/race.*.log | grep -c '^registered' || true)
  refused=$(cat "$WORK_DIR"/race.*.log | grep -c 'is held by lease' || true)
  ((winners + refused >= 4)) && break
  sleep 0.1
done
sleep 0.5  # a second winner, if the rule were broken, has had its chance to say so
winners=$(cat "$WORK_DIR"/race.*.log | grep -c '^registered' || true)
refused=$(cat "$WORK_DIR"/race.*.log | grep -c 'is held by lease' || true)
[[ $winners == 1 && $refused == 3 ]] || { tail "$WORK_DIR"/race.*.log >&2; fail "$winners racers registered, $refused were refused (want 1 and 3)"; }
winner=$(grep -l '^registered' "$WORK_DIR"/race.*.log | sed 's/.*race\.\([0-9]\)\.log/\1/')
membership list --prefix "$P" | grep -q $'^race\tracer-'"$winner" || fail "the listed value is not the winner's"
for pid in "${racers[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
pass "one of four racing registrations won"

# 3.
"$SMART_BIN/smart_membership" --etcd "$ETCD_URL" watch --prefix "$P" --until-deleted "${P}1" --timeout-ms 30000 \
  >"$WORK_DIR/watch.log" 2>&1 &
watcher=$!
for _ in $(seq 1 100); do grep -q '^watching' "$WORK_DIR/watch.log" && break; sleep 0.1; done
t0=$(date +%s%N)
kill -KILL "$m1"
wait "$m1" 2>/dev/null || true
wait "$watcher" || { cat "$WORK_DIR/watch.log" >&2; fail "the watcher did not see the killed member leave"; }
echo "killed member left after $((($(date +%s%N) - t0) / 1000000)) ms (lease 2000 ms)"
grep -q "^DELETE ${P}1 " "$WORK_DIR/watch.log" || fail "no DELETE event for the killed member"
wait_members "$P" 0
pass "a killed member leaves the membership"

# 4.
start_member "${P}2" "$WORK_DIR/m2.log"
m2=$MEMBER
kill -STOP "$m2"
wait_members "$P" 0
sleep 0.5
kill -CONT "$m2"
expect_exit "$m2" 3 "the resumed member (registration lost)"
grep -q "lock lost" "$WORK_DIR/m2.log" || fail "the resumed member does not say its lease was lost"
wait_members "$P" 0
pass "a stopped member leaves, and on resuming knows it left"

# 5.
start_member "${P}3" "$WORK_DIR/m3.log"
kill -TERM "$MEMBER"
wait "$MEMBER" || fail "the member did not end cleanly on SIGTERM"
[[ $(membership list --prefix "$P" | grep -vc '^#' || true) == 0 ]] || fail "a member that ended is still listed"
pass "a member that ends leaves at once"

# 6.
start_member "${P}4" "$WORK_DIR/m4.log"
m4=$MEMBER
kill -STOP "$ETCD_PID"
t0=$(date +%s%N)
if membership --request-timeout-ms 500 list --prefix "$P" >"$WORK_DIR/stopped.log" 2>&1; then
  kill -CONT "$ETCD_PID"
  fail "a list succeeded against a stopped etcd"
fi
echo "a call to a stopped etcd failed after $((($(date +%s%N) - t0) / 1000000)) ms (bound 500 ms)"
grep -q "etcd range to $ETCD_URL" "$WORK_DIR/stopped.log" || { kill -CONT "$ETCD_PID"; cat "$WORK_DIR/stopped.log" >&2; fail "the error does not name etcd"; }
# It must give up by itself, while etcd is still stopped.
for _ in $(seq 1 600); do kill -0 "$m4" 2>/dev/null || break; sleep 0.1; done
alive=0
kill -0 "$m4" 2>/dev/null && alive=1
kill -CONT "$ETCD_PID"
((alive == 0)) || { kill -KILL "$m4"; fail "a member cut off from etcd still ran 60 s later"; }
expect_exit "$m4" 3 "a member cut off from etcd"
grep -q "no renewal of lease .* was confirmed within the lease" "$WORK_DIR/m4.log" ||
  { cat "$WORK_DIR/m4.log" >&2; fail "the member cut off from etcd does not say why it left"; }
wait_members "$P" 0
pass "with etcd stopped, calls fail in bounded time and a member gives up its lease"

# 7.
start_member "${P}5" "$WORK_DIR/m5.log"
m5=$MEMBER
membership remove --key "${P}5" | grep -q "^removed ${P}5" || fail "remove did not report the removal"
if membership remove --key "${P}5" 2>/dev/null; then fail "removing an absent member succeeded"; fi
expect_exit "$m5" 3 "the removed member"
pass "an operator's removal ends the member's registration"

# 8.
for b in m1 m2 m3; do
  start_member "/smart/e/blades/$b" "$WORK_DIR/e.$b.log"
done
membership epoch init --cluster e --replicas 2 --shards 6 >"$WORK_DIR/init.log" || fail "epoch init failed"
grep -q '^won: epoch 1 open' "$WORK_DIR/init.log" || fail "epoch init did not put epoch 1"
grep -q '"shards":\[\["m1","m2"\],\["m2","m3"\],\["m3","m1"\]' "$WORK_DIR/init.log" || { cat "$WORK_DIR/init.log" >&2; fail "the registered blades were not placed in order"; }
rev=$(membership epoch show --cluster e | sed -n 's/^epoch 1 open at revision \([0-9]*\):.*/\1/p')
[[ -n $rev ]] || fail "epoch show did not print epoch 1 and its revision"
membership epoch remove --cluster e --blade m1 --expect-revision "$rev" >"$WORK_DIR/p1.log" 2>&1 &
p1=$!
membership epoch remove --cluster e --blade m2 --expect-revision "$rev" >"$WORK_DIR/p2.log" 2>&1 &
p2=$!
rc1=0 rc2=0
wait "$p1" || rc1=$?
wait "$p2" || rc2=$?
[[ "$rc1 $rc2" == "0 5" || "$rc1 $rc2" == "5 0" ]] || { cat "$WORK_DIR"/p[12].log >&2; fail "two proposals from one revision exited $rc1 and $rc2 (want one 0, one 5)"; }
winner=m1
[[ $rc2 == 0 ]] && winner=m2
membership epoch show --cluster e >"$WORK_DIR/e2.log"
grep -q '^epoch 2 fencing' "$WORK_DIR/e2.log" || fail "the epoch is not number 2 after the proposals"
if grep -q "\"$winner\":" "$WORK_DIR/e2.log"; then fail "the winning proposal's removed blade is still a member"; fi
if membership epoch init --cluster e --replicas 2 --shards 6 >/dev/null 2>&1; then
  fail "a second epoch 1 was put over an existing epoch"
fi
pass "of two epoch proposals from one revision, one won"

# 9.
"$SMART_BIN/smart_membership" --etcd "$ETCD_URL" epoch follow --cluster e --lease-ms 1000 >"$WORK_DIR/follow.log" 2>&1 &
follower=$!
wait_line() {
  local pattern=$1 what=$2
  for _ in $(seq 1 300); do
    grep -q "$pattern" "$WORK_DIR/follow.log" && return 0
    sleep 0.1
  done
  cat "$WORK_DIR/follow.log" >&2
  fail "the follower did not print $what"
}
wait_line '^epoch 2 fencing' "the epoch it started in"
membership epoch add --cluster e --blade "$winner" >/dev/null || fail "epoch add failed"
wait_line '^epoch 3 fencing' "the next epoch"
kill -STOP "$ETCD_PID"
wait_line '^lapsed: epoch view of cluster .e.: not confirmed' "that its view lapsed with etcd stopped"
kill -CONT "$ETCD_PID"
wait_line '^current again: epoch 3' "that its view is current again"
kill -TERM "$follower"
wait "$follower" || fail "the follower did not end cleanly"
pass "a client's epoch view follows the epoch, and lapses within its lease when etcd cannot confirm it"
