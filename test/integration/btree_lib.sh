# Shared by the btree_*.sh integration tests (sourced after lib.sh).

# Over verbs the tests run on fewer keys and rounds (sized, lib.sh).

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
