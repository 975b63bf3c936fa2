# Shared by the btree_*.sh integration tests (sourced after lib.sh).

# Over verbs (the Soft-RoCE guest, where a write costs tens of times what it
# costs on shm) the tests keep every check but run on fewer keys and rounds,
# so that the four add minutes, not a quarter of an hour, to the tier.
#   sized SHM VERBS   prints the number for the transport in use
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then ON_VERBS=1; else ON_VERBS=0; fi
sized() {
  if ((ON_VERBS)); then echo "$2"; else echo "$1"; fi
}

# Starts a btree_backend of MIB MiB on a free port; sets BLADE_PORT.
start_btree_blade() {
  local mib=${1:-256}
  local config="$WORK_DIR/backend.$mib.json"
  cat >"$config" <<JSON
{ "dev_dax_path": "", "capacity": $mib, "tcp_port": 0, "nic_numa_node": -1 }
JSON
  start_blade "$SMART_BIN/btree_backend" "$config"
}

# btree_check with the given servers (SERVERS array) and arguments; a
# failure fails the test.
check() {
  local args=()
  local s
  for s in "${SERVERS[@]}"; do args+=(--server "$s"); done
  "$SMART_BIN/btree_check" "${args[@]}" "$@" || fail "btree_check $*"
}

# Runs a check in the background; collect with wait_checks.
CHECK_PIDS=()
check_bg() {
  check "$@" &
  CHECK_PIDS+=($!)
}
wait_checks() {
  local pid status=0
  for pid in "${CHECK_PIDS[@]}"; do wait "$pid" || status=1; done
  CHECK_PIDS=()
  ((status == 0)) || fail "a concurrent btree_check failed"
}
