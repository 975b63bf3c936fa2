#!/usr/bin/env bash
# SMART-BT with a client killed or stopped at exact points: holding a leaf
# lock, inside the windows of a page write (after the holder's lease check
# and before its write is posted: bt.*.write_checked; with the write posted
# and its completion not seen: bt.*.write_posted, and posted:write), and at
# each step of a leaf split, an internal split and a root growth
# (SMART_FAULTS, include/smart/fault_injection.h). The other clients must
# go on (a killed holder's lock is taken over when the blade sees its
# session close, a stopped one's after the lease, and the stopped holder is
# fenced first), a stopped client that resumes must not undo their work
# (its write lands never, or before the fence), and the final tree must
# hold exactly the acknowledged writes (writers' logs) with a well-formed
# leaf level, whose separators are all in place again (a fresh reader never
# moves right).
#
#   btree_faults.sh [kill|stop]   only the kills or only the stops (default: both)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/btree_lib.sh"
L=$WORK_DIR
ONLY=${1:-}
[[ -z $ONLY || $ONLY == kill || $ONLY == stop ]] || fail "unknown argument '$ONLY' (kill or stop)"
# Over verbs (the Soft-RoCE guest, much slower) the kills run, and three
# stops inside the windows of a page write (VERBS_STOPS): there the fence
# destroys the stopped client's queue pairs, and the NIC carries out a
# request posted before the stop. The lease is long there, so that a live
# client descheduled by the emulation is not taken for a stopped one. The
# internal splits run on fewer keys.
VERBS_STOPS=" stop@point:bt.leaf.write_checked#40 stop@point:bt.split.leaf.write_checked#3 stop@posted:write#40 "
if ((ON_VERBS)); then
  LEASE=(--lease-ms 4000 --retry-timeout-ms 60000)
else
  LEASE=(--lease-ms 800 --retry-timeout-ms 20000)
fi
INTERNAL=$(sized 8000 4000)

# Waits until process $1 is stopped (state T) or gone; fails after 30 s.
wait_stopped_or_gone() {
  local pid=$1 i state
  for ((i = 0; i < 300; ++i)); do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
    [[ $state == T || $state == gone ]] && { echo "$state"; return 0; }
    sleep 0.1
  done
  fail "process $pid neither stopped nor exited"
}

# One case: a victim inserting even ids with fault rule $2 ($1: kill or
# stop; further arguments go to the victim's btree_check), survivors
# inserting odd and even ids meanwhile.
run_case() {
  local action=$1 rule=$2 to=$3
  shift 3
  [[ -z $ONLY || $ONLY == "$action" ]] || return 0
  if ((ON_VERBS)); then
    [[ $action == kill || $VERBS_STOPS == *" $rule "* ]] || return 0
  fi
  local case_start=$SECONDS
  start_btree_blade 256
  SERVERS=("127.0.0.1:$BLADE_PORT")
  rm -f "$L"/*.log
  SMART_FAULTS="$rule" "$SMART_BIN/btree_check" --server "${SERVERS[0]}" "${LEASE[@]}" --threads 1 --coros 2 \
    insert --from 0 --to "$to" --writer 0 --writers 3 --parity even --log "$L/victim.log" "$@" >"$L/victim.out" 2>&1 &
  local victim=$!
  local state
  state=$(wait_stopped_or_gone "$victim")
  if [[ $state == gone ]]; then
    local status=0
    wait "$victim" || status=$?
    if [[ $action == kill ]]; then
      ((status == 137)) || { cat "$L/victim.out" >&2; fail "$rule: the victim exited with $status, not killed at the point"; }
    else
      cat "$L/victim.out" >&2
      fail "$rule: the victim exited ($status) before reaching the point"
    fi
  fi
  check_bg insert --from 0 --to "$to" --writer 1 --writers 3 --parity odd "${LEASE[@]}" --log "$L/odd.log" >"$L/odd.out"
  check_bg insert --from 0 --to "$to" --writer 2 --writers 3 --parity even "${LEASE[@]}" --log "$L/even.log" >"$L/even.out"
  wait_checks
  # Where the victim stopped holding a page lock, a survivor took it over;
  # a stopped one (its session alive) by lease, fencing it first.
  local holding=0
  [[ $rule == *leaf.locked* || $rule == *sibling_written* || $rule == *write_checked* ||
     $rule == *point:*write_posted* ]] && holding=1
  # A request posted before the stop is carried out by the NIC over verbs,
  # and on shm only at the next poll (held unexecuted, with its lock).
  [[ $rule == *@posted:* ]] && holding=$((!ON_VERBS))
  if ((holding)); then
    grep -q "take-overs [1-9]" "$L/odd.out" "$L/even.out" ||
      { cat "$L/odd.out" "$L/even.out" >&2; fail "$rule: no survivor took the victim's lock over"; }
    if [[ $action == stop ]]; then
      grep -q "holders fenced [1-9]" "$L/odd.out" "$L/even.out" ||
        { cat "$L/odd.out" "$L/even.out" >&2; fail "$rule: the stopped victim's lock was taken over without a fence"; }
    fi
  fi
  local logs=(--log "$L/odd.log" --log "$L/even.log")
  if [[ $action == stop ]]; then
    # Resumed, the victim finds its lock taken over (before its write: an
    # error, nothing written) or its session ended by the fence (a write
    # it then posts, or had posted, never lands: an unknown outcome), or,
    # holding no lock at its point, finishes its work.
    kill -CONT "$victim"
    local status=0
    wait "$victim" || status=$?
    if ((status != 0)); then
      grep -Eq "taken over|outcome unknown|ended this client's session" "$L/victim.out" ||
        { cat "$L/victim.out" >&2; fail "$rule: the resumed victim failed for another reason"; }
    fi
    # Stopped after its lease check in a write that decides an insert (a
    # leaf entry's, or a leaf split's), with its write to post (or posted
    # and, on shm, not carried out): the insert is of unknown outcome, never
    # acknowledged. (An internal page's write decides no operation: the
    # victim's insert stands, and its next one fails on the ended session.)
    if [[ $rule == *leaf.write_checked* || ($rule == *leaf.write_posted* && $ON_VERBS == 0) ]]; then
      ((status != 0)) && grep -q "outcome unknown" "$L/victim.out" ||
        { cat "$L/victim.out" >&2; fail "$rule: the resumed victim's write was not reported as of unknown outcome"; }
    fi
    [[ -f $L/victim.log ]] && logs+=(--log "$L/victim.log")
  fi
  check check-log --from 0 --to "$to" --writers 3 --min-height 2 "${LEASE[@]}" "${logs[@]}" >"$L/final.out"
  # Splits the victim left unfinished were completed: a fresh client finds
  # every key without a sibling hop.
  grep -q "moved right 0)" "$L/final.out" ||
    { cat "$L/final.out" >&2; fail "$rule: a split the victim left is still unfinished"; }
  stop_blades
  pass "$rule: the others went on; every acknowledged insert is there, once, in a well-formed tree ($((SECONDS - case_start)) s)"
}

run_case stop 'stop@point:bt.leaf.locked#40' 3000
run_case kill 'kill@point:bt.leaf.locked#40' 3000
run_case stop 'stop@point:bt.leaf.write_checked#40' 3000
run_case stop 'stop@point:bt.leaf.write_posted#40' 3000
run_case stop 'stop@posted:write#40' 3000 --short-values
run_case stop 'stop@point:bt.split.leaf.write_checked#3' 3000
run_case stop 'stop@point:bt.split.leaf.write_posted#3' 3000
run_case kill 'kill@point:bt.split.leaf.sibling_written#3' 3000
run_case stop 'stop@point:bt.split.leaf.sibling_written#3' 3000
run_case kill 'kill@point:bt.split.leaf.linked#3' 3000
run_case stop 'stop@point:bt.split.leaf.linked#3' 3000
run_case kill 'kill@point:bt.root.written#1' 3000
run_case kill 'kill@point:bt.split.internal.sibling_written#1' "$INTERNAL"
run_case stop 'stop@point:bt.split.internal.sibling_written#1' "$INTERNAL"
run_case stop 'stop@point:bt.internal.write_checked#2' "$INTERNAL"
run_case kill 'kill@point:bt.split.internal.linked#1' "$INTERNAL"
# The third internal split needs more keys than the verbs tier can afford.
((ON_VERBS)) || run_case kill 'kill@point:bt.split.internal.linked#3' 20000
