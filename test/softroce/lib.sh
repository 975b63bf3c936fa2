# Helpers for the scripts that run INSIDE the Soft-RoCE guest (sourced).
#
#   step NAME FUNCTION [ARGS...]  run a check; its output goes to the console
#                                 and $LOG_DIR/NAME.log; PASS/FAIL is counted
#   finish                        print the summary; exit 1 if any step failed
#   verbs_config PATH [KEY=JSON ...]
#                                 write a smart_config.json on the verbs
#                                 transport from the repository's defaults,
#                                 with KEY (dotted) set to the JSON value
#   rdma_config PATH MIB [SERVER_PORT]
#                                 write a test_rdma.json; with SERVER_PORT a
#                                 client of 127.0.0.1:SERVER_PORT, else a
#                                 memory blade on any free port
#   start_blade NAME CMD...       start a memory blade; sets BLADE_PID and
#                                 BLADE_PORT (from "listening on port N")
#   stop_blade PID                SIGTERM it and wait
#   bench_dirs NAME               for a bench step: LOG_DIR=$SOFTROCE_OUT/NAME
#                                 (made) and WORK, a new folder under /run
#   result_field PREFIX LOG NAME  the number X of "NAME = X" on the first line
#                                 of LOG that starts with PREFIX (a bench's
#                                 result line)
#
# Needs SOURCE_DIR set by the caller, and LOG_DIR (or bench_dirs) before step.
set -u

if [ -z "${SOFTROCE_GUEST:-}" ]; then
    echo "${0##*/}: runs inside the Soft-RoCE guest: test/softroce/guest.sh -- $0 ..." >&2
    exit 2
fi

passed=0 failed=0
failures=()
blade_pids=()

now() { date +%s.%N; }

bench_dirs() {
    LOG_DIR=$SOFTROCE_OUT/$1
    mkdir -p "$LOG_DIR"
    WORK=$(mktemp -d "/run/$1.XXXXXX")
}

result_field() { sed -n "s/^$1.*[ ,]$3 = \([0-9.]*\).*/\1/p" "$2" | head -n 1; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }

step() {
    local name=$1 t0 rc
    shift
    echo
    echo "=== $name"
    t0=$(now)
    ( set -u; "$@" ) > >(tee "$LOG_DIR/$name.log") 2>&1
    rc=$?
    sleep 0.2 # let tee drain
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        echo "--- PASS $name ($(seconds_since "$t0") s)"
    else
        failed=$((failed + 1))
        failures+=("$name")
        echo "--- FAIL $name (exit $rc, $(seconds_since "$t0") s)"
    fi
}

finish() {
    local pid
    for pid in "${blade_pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    echo
    [ ${#failures[@]} -eq 0 ] || echo "${0##*/}: failed steps: ${failures[*]}"
    echo "${0##*/}: $passed passed, $failed failed"
    [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}

verbs_config() {
    local path=$1
    shift
    python3 - "$SOURCE_DIR/config/smart_config.json" "$path" "$@" <<'PY'
import json, sys
src, dst, *settings = sys.argv[1:]
with open(src) as f:
    config = json.load(f)
config["transport"] = "verbs"
# A client registers its whole cache: keep it small in a 3 GiB guest.
config["initiator_cache_size"] = 64
for setting in settings:
    key, value = setting.split("=", 1)
    node = config
    *parents, leaf = key.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = json.loads(value)
with open(dst, "w") as f:
    json.dump(config, f, indent=2)
PY
}

rdma_config() {
    local path=$1 mib=$2 port=${3:-}
    local servers='[]' p=0
    if [ -n "$port" ]; then servers='["127.0.0.1"]'; p=$port; fi
    cat > "$path" <<JSON
{
  "servers": $servers,
  "port": $p,
  "block_size": 8,
  "qp_num": -1,
  "type": "read",
  "duration": 1,
  "memory_size": $mib,
  "dump_file_path": ""
}
JSON
}

start_blade() {
    local name=$1 log i
    shift
    log=$LOG_DIR/$name.blade.log
    "$@" > "$log" 2>&1 &
    BLADE_PID=$!
    blade_pids+=("$BLADE_PID")
    BLADE_PORT=
    for i in $(seq 1 600); do
        BLADE_PORT=$(sed -n 's/.*listening on port \([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
        [ -n "$BLADE_PORT" ] && return 0
        kill -0 "$BLADE_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "memory blade $name did not start listening:"
    cat "$log"
    return 1
}

stop_blade() {
    kill -TERM "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

# check WHAT CONDITION...: print ok/FAILED for one assertion; returns its status.
check() {
    local what=$1
    shift
    if "$@"; then
        echo "ok: $what"
    else
        echo "FAILED: $what"
        return 1
    fi
}
