#!/usr/bin/env bash
# How long other clients wait after a SMART-DTX client dies holding record
# locks: five times each, a survivor runs SmallBank transfers between two
# accounts (every transaction needs both records) while a victim locks both
# and, between its validation and its writes (fault point
# dtx.commit.validated), is
#   killed (SIGKILL): the memory blade ends its session; the survivor's
#                     lease watch sees that and recovers the locks;
#   stopped (SIGSTOP): connected but silent; the survivor recovers the locks
#                     once the holder's word stood still for a lease (2 s).
# Prints each round's longest wait of the survivor for a commit (the
# survivor's own figure, so it excludes process start-up) and the medians,
# then checks that the money still adds up.
# Usage: SMART_BIN=build/bin test/bench/dtx_resume.sh
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/dtx_lib.sh"
bench="$SMART_BIN/smallbank_bench"
start_dtx_blades "$SMART_BIN/smallbank_backend" 128
cat >"$WORK_DIR/transaction.json" <<JSON
{
  "memory_servers": $DTX_SERVERS,
  "smallbank": {"num_accounts": 2, "num_hot_accounts": 2},
  "nr_transactions": 1000, "duration": 4, "backup_degree": 1, "dump_file_path": ""
}
JSON
use_transaction_config "$WORK_DIR/transaction.json"

# measure ACTION DURATION: the survivor's longest wait for a commit, in ms.
measure() {
  local action=$1 duration=$2
  "$bench" 1 1 --transfers-only --duration "$duration" >"$WORK_DIR/survivor.log" 2>&1 &
  local survivor=$!
  until grep -q 'opened in' "$WORK_DIR/survivor.log"; do sleep 0.05; done
  sleep 0.5
  SMART_FAULTS="$action@point:dtx.commit.validated#1" "$bench" 1 1 --transfers-only --duration 30 --quiet \
    >"$WORK_DIR/victim.log" 2>&1 &
  local victim=$!
  wait "$survivor" || { cat "$WORK_DIR/survivor.log" >&2; fail "the survivor failed"; }
  if [[ $action == stop ]]; then
    [[ $(awk '{print $3}' "/proc/$victim/stat" 2>/dev/null) == T ]] || fail "the victim is not stopped"
    kill -KILL "$victim"
  fi
  set +e
  wait "$victim"
  local status=$?
  set -e
  ((status == 137)) || { cat "$WORK_DIR/victim.log" >&2; fail "the victim exited $status, not killed"; }
  grep -q "dead clients' transactions recovered [1-9]" "$WORK_DIR/survivor.log" ||
    { cat "$WORK_DIR/survivor.log" >&2; fail "the survivor recovered nothing"; }
  sed -n 's/.*longest wait of a task for a commit \([0-9.]*\) ms.*/\1/p' "$WORK_DIR/survivor.log"
}

median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
killed=()
stopped=()
for _ in 1 2 3 4 5; do killed+=("$(measure kill 3)"); done
for _ in 1 2 3 4 5; do stopped+=("$(measure stop 5)"); done
"$bench" 1 1 --check-only --expect-delta 0 --quiet >"$WORK_DIR/check.log" 2>&1 ||
  { cat "$WORK_DIR/check.log" >&2; fail "after the deaths the money does not add up"; }
echo "victim killed:  ${killed[*]} ms; median $(median "${killed[@]}") ms"
echo "victim stopped: ${stopped[*]} ms; median $(median "${stopped[@]}") ms (lease 2000 ms)"
echo "money adds up, replicas equal, no lock left"
