# Helpers for the multi-process integration tests. Source it from a test
# script; it needs SMART_BIN (the build's bin/ directory, set by ctest).
#
#   start_blade CMD [ARGS...]  run a memory blade in the background, wait for
#                              "listening on port N"; sets BLADE_PID, BLADE_PORT
#   stop_blades                SIGTERM every blade started here and wait
#   smart_test_config          path of a smart_config.json for the transport
#                              in SMART_TEST_TRANSPORT (shm by default)
#   test_rdma_config [MIB]     path of a test_rdma.json: MIB MiB, any free port
#   bad ARGS... -- WORD        $bench with ARGS must exit 2 naming WORD
#   expect_fail MSG CMD...     run CMD, which must exit non-zero
#   pass MSG / fail MSG        report and (fail) exit 1
#
# Every blade is stopped when the script exits, however it exits.
set -euo pipefail

: "${SMART_BIN:?SMART_BIN must name the bin directory of a build}"
SMART_SOURCE=${SMART_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
TEST_NAME=$(basename "$0" .sh)
WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/smart-${TEST_NAME}.XXXXXX")
BLADE_START_TIMEOUT=${BLADE_START_TIMEOUT:-60}
BLADE_PIDS=()

fail() {
  echo "FAIL: $TEST_NAME: $*" >&2
  exit 1
}

pass() {
  echo "ok: $*"
}

stop_blades() {
  local pid
  for pid in "${BLADE_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${BLADE_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  BLADE_PIDS=()
}

cleanup() {
  local status=$?
  stop_blades
  if ((status != 0)); then
    local log
    for log in "$WORK_DIR"/blade*.log; do
      [[ -f $log ]] || continue
      echo "---- $log" >&2
      tail -n 20 "$log" >&2
    done
  fi
  rm -rf "$WORK_DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Over verbs (the Soft-RoCE guest, where every instruction is emulated and a
# write costs tens of times what it costs on shm) the tests keep every check
# but run on fewer keys and rounds; shm runs the full sizes.
#   sized SHM VERBS   prints the number for the transport in use
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then ON_VERBS=1; else ON_VERBS=0; fi
sized() {
  if ((ON_VERBS)); then echo "$2"; else echo "$1"; fi
}

# wait_stopped PID: waits until process PID is stopped (SIGSTOP, state T);
# fails (returns 1) when it exits first or has not stopped within 120 s.
wait_stopped() {
  local pid=$1 state
  for ((i = 0; i < 1200; ++i)); do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
    [[ $state == T ]] && return 0
    [[ $state == gone || $state == Z ]] && return 1
    sleep 0.1
  done
  return 1
}

# Writes a smart_config.json for SMART_TEST_TRANSPORT (shm or verbs) and
# prints its path. The verbs variant keeps the repository's settings and
# adds SMART_TEST_GID_INDEX when set (the Soft-RoCE guest sets it).
# SMART_TEST_SMART_CONFIG names one already written for the transport, used
# as is: the Soft-RoCE tier writes it once for all its tests, since python3
# takes seconds to start in the emulated guest.
smart_test_config() {
  local transport=${SMART_TEST_TRANSPORT:-shm}
  local path="$WORK_DIR/smart_config.$transport.json"
  if [[ ! -f $path && -n ${SMART_TEST_SMART_CONFIG:-} ]]; then
    cp "$SMART_TEST_SMART_CONFIG" "$path"
  elif [[ ! -f $path ]]; then
    python3 - "$SMART_SOURCE/config/smart_config.json" "$path" "$transport" "${SMART_TEST_GID_INDEX:-}" <<'PY'
import json, sys
src, dst, transport, gid = sys.argv[1:5]
with open(src) as f:
    config = json.load(f)
config["transport"] = transport
if gid:
    config["infiniband"]["gid_idx"] = int(gid)
with open(dst, "w") as f:
    json.dump(config, f, indent=2)
PY
  fi
  echo "$path"
}

# Starts a memory blade in the background and waits for its port.
start_blade() {
  local n=${#BLADE_PIDS[@]}
  local log="$WORK_DIR/blade$n.log"
  : >"$log"
  "$@" >"$log" 2>&1 &
  local pid=$!
  BLADE_PIDS+=("$pid")
  local waited=0 port=""
  while ((waited < BLADE_START_TIMEOUT * 10)); do
    port=$(sed -n 's/.*listening on port \([0-9][0-9]*\).*/\1/p' "$log" | head -n 1 || true)
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "memory blade '$*' exited before listening"; }
    sleep 0.1
    waited=$((waited + 1))
  done
  [[ -n $port ]] || { cat "$log" >&2; fail "memory blade '$*' did not listen within ${BLADE_START_TIMEOUT}s"; }
  BLADE_PID=$pid
  BLADE_PORT=$port
}

# bad ARGS... -- WORD: "$bench 1 1 --dump-file '' ARGS" (bench: set by the
# test) must exit 2 with WORD in its message.
bad() {
  local word=${*: -1}
  local args=("${@:1:$#-2}")
  set +e
  "$bench" 1 1 --dump-file "" "${args[@]}" >"$WORK_DIR/out" 2>&1
  local status=$?
  set -e
  ((status == 2)) || { cat "$WORK_DIR/out" >&2; fail "'${args[*]}' exited $status, expected 2"; }
  grep -q -- "$word" "$WORK_DIR/out" || { cat "$WORK_DIR/out" >&2; fail "'${args[*]}': the message does not name $word"; }
}

# Runs a command that must fail; its output goes to $WORK_DIR/expect_fail.log.
expect_fail() {
  local what=$1
  shift
  if "$@" >"$WORK_DIR/expect_fail.log" 2>&1; then
    cat "$WORK_DIR/expect_fail.log" >&2
    fail "$what: the command succeeded"
  fi
}

# Writes a test_rdma.json for a memory blade of MIB MiB on a free port and
# prints its path.
test_rdma_config() {
  local mib=${1:-64}
  local path="$WORK_DIR/test_rdma.$mib.json"
  cat >"$path" <<JSON
{
  "servers": [],
  "port": 0,
  "block_size": 8,
  "qp_num": -1,
  "type": "read",
  "duration": 1,
  "memory_size": $mib,
  "dump_file_path": ""
}
JSON
  echo "$path"
}

# Every process of a test reads the test's smart_config.json.
SMART_CONFIG_PATH=$(smart_test_config)
export SMART_CONFIG_PATH
