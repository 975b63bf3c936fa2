#!/usr/bin/env bash
# SMART-BT with a client killed or stopped at exact points: holding a leaf
# lock, and at each step of a leaf split, an internal split and a root
# growth (SMART_FAULTS, include/smart/fault_injection.h). The other clients
# must go on (a killed holder's lock is taken over when the blade sees its
# session close, a stopped one's after the lease), a stopped client that
# resumes must not undo their work, and the final tree must hold exactly the
# acknowledged writes (writers' logs) with a well-formed leaf level, whose
# separators are all in place again (a fresh reader never moves right).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/btree_lib.sh"
L=$WORK_DIR
# Over verbs (the Soft-RoCE guest, much slower) only the kills run, as in
# hashtable_split_faults: the blade sees a killed client's session close,
# so no lease has to run out; a live client that is descheduled there for
# long could miss a short lease. The internal splits run on fewer keys.
if ((ON_VERBS)); then
  LEASE=(--lease-ms 2000 --retry-timeout-ms 60000)
  ACTIONS=" kill "
else
  LEASE=(--lease-ms 800 --retry-timeout-ms 20000)
  ACTIONS=" kill stop "
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
# stop), survivors inserting odd and even ids meanwhile.
run_case() {
  local action=$1 rule=$2 to=$3
  [[ $ACTIONS == *" $action "* ]] || return 0
  local case_start=$SECONDS
  start_btree_blade 256
  SERVERS=("127.0.0.1:$BLADE_PORT")
  rm -f "$L"/*.log
  SMART_FAULTS="$rule" "$SMART_BIN/btree_check" --server "${SERVERS[0]}" "${LEASE[@]}" --threads 1 --coros 2 \
    insert --from 0 --to "$to" --writer 0 --writers 3 --parity even --log "$L/victim.log" >"$L/victim.out" 2>&1 &
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
  # Where the victim stopped holding a page lock, a survivor took it over.
  if [[ $rule == *leaf.locked* || $rule == *sibling_written* ]]; then
    grep -q "take-overs [1-9]" "$L/odd.out" "$L/even.out" ||
      { cat "$L/odd.out" "$L/even.out" >&2; fail "$rule: no survivor took the victim's lock over"; }
  fi
  local logs=(--log "$L/odd.log" --log "$L/even.log")
  if [[ $action == stop ]]; then
    # Resumed, the victim either finds its lock taken over and stops with
    # an error, or (holding no lock at its point) finishes its work.
    kill -CONT "$victim"
    local status=0
    wait "$victim" || status=$?
    if ((status != 0)); then
      grep -q "taken over" "$L/victim.out" || { cat "$L/victim.out" >&2; fail "$rule: the resumed victim failed for another reason"; }
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
run_case kill 'kill@point:bt.split.leaf.sibling_written#3' 3000
run_case stop 'stop@point:bt.split.leaf.sibling_written#3' 3000
run_case kill 'kill@point:bt.split.leaf.linked#3' 3000
run_case stop 'stop@point:bt.split.leaf.linked#3' 3000
run_case kill 'kill@point:bt.root.written#1' 3000
run_case kill 'kill@point:bt.split.internal.sibling_written#1' "$INTERNAL"
run_case stop 'stop@point:bt.split.internal.sibling_written#1' "$INTERNAL"
run_case kill 'kill@point:bt.split.internal.linked#1' "$INTERNAL"
# The third internal split needs more keys than the verbs tier can afford.
((ON_VERBS)) || run_case kill 'kill@point:bt.split.internal.linked#3' 20000
