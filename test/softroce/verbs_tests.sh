#!/bin/bash
# The verbs transport end to end over Soft-RoCE; runs INSIDE the guest:
#
#   test/softroce/guest.sh -- test/softroce/verbs_tests.sh BUILD_DIR [STEP...]
#
# Steps (all by default): test_rdma READ/WRITE/CAS/FAA with a memory blade in
# another process, the doorbell and GID choices it logs, per-session memory
# windows (and a blade with them turned off), the uuar fallback,
# shared queue pairs, two memory blades on two ports, huge pages, a memory
# blade killed in the middle of a run, and the integration tests (ctest label
# "integration") over verbs. Each step prints PASS or FAIL; the script exits
# non-zero when any failed. Logs: $SOFTROCE_OUT/verbs/. SMART_VERBS_TESTS, a
# ctest -R regex, narrows the integration step (pass it into the guest with
# SOFTROCE_PASS_ENV=SMART_VERBS_TESTS).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SOURCE_DIR=$(cd "$here/../.." && pwd -P)
BUILD_DIR=${1:?usage: verbs_tests.sh BUILD_DIR [STEP...]}
shift
BIN=$BUILD_DIR/bin
LOG_DIR=$SOFTROCE_OUT/verbs
mkdir -p "$LOG_DIR"
source "$here/lib.sh"
WORK=$(mktemp -d /run/verbs-tests.XXXXXX)  # guest-private tmpfs

# Hang guard for a single client run; a client that needs it has failed.
GUARD=120

verbs_config "$WORK/smart.json"
export SMART_CONFIG_PATH=$WORK/smart.json
unset TEST_RDMA_CONF SMART_OPTS

# run_client LOG ARGS...: test_rdma as a client; output (both streams) in LOG.
run_client() {
    local log=$1
    shift
    timeout -k 5 "$GUARD" "$BIN/test_rdma" "$@" > "$log" 2>&1
}

# expect_result LOG TYPE THREADS DEPTH: the upstream result line with a
# positive rate.
expect_result() {
    local line
    line=$(grep "^rdma-$2: #threads=$3, #depth=$4, #block_size=8, BW=" "$1")
    [ -n "$line" ] || { echo "no result line for $2 in $1:"; cat "$1"; return 1; }
    echo "$line"
    echo "$line" | awk -F'IOPS=' '{split($2, a, " "); exit !(a[1] + 0 > 0)}' ||
        { echo "$2 made no progress"; return 1; }
}

t_tools() {
    local t ok=0
    for t in python3 timeout ctest; do
        command -v "$t" > /dev/null || { echo "missing tool: $t"; ok=1; }
    done
    [ -x "$BIN/test_rdma" ] || { echo "missing $BIN/test_rdma (build first)"; ok=1; }
    ibv_devices
    return $ok
}

t_test_rdma_ops() {
    rdma_config "$WORK/blade.json" 64
    start_blade ops "$BIN/test_rdma" --config "$WORK/blade.json" || return 1
    local rc=0 type
    check "the memory blade runs on verbs rxe0" grep -q "on verbs rxe0 port 1" "$LOG_DIR/ops.blade.log" || rc=1
    check "the pool says it is on normal pages (no huge pages reserved)" \
        grep -q "memory pool of 64 MiB on normal pages" "$LOG_DIR/ops.blade.log" || rc=1
    rdma_config "$WORK/client.json" 64 "$BLADE_PORT"
    for type in read write cas faa; do
        run_client "$WORK/$type.log" --config "$WORK/client.json" --type $type --duration 1 2 8 ||
            { echo "test_rdma $type exited $?:"; cat "$WORK/$type.log"; rc=1; continue; }
        check "test_rdma $type: result line" expect_result "$WORK/$type.log" $type 2 8 || rc=1
    done
    # What the client logs about its device (from the READ run).
    cat "$WORK/read.log"
    check "gid_idx -1 picks GID index 1, the RoCE v2 IPv4 GID" \
        grep -q "infiniband.gid_idx unset; using GID index 1 of rxe0 port 1 (::ffff:127.0.0.1, RoCE v2)" \
        "$WORK/read.log" || rc=1
    check "thread_domain falls back to shared with one log line naming the mode" \
        test "$(grep -c 'doorbell mode thread_domain.*ibv_alloc_td: Operation not supported.*mode in effect: shared' \
            "$WORK/read.log")" = 1 || rc=1
    check "retry_cnt 7 is lowered to 6 on rxe, with a log line" \
        grep -q "retry_cnt 7 means retry forever on rxe; using 6" "$WORK/read.log" || rc=1
    check "the memory blade gives each client queue pair a memory window" \
        grep -q "each client queue pair gets its own memory window over the pool" "$LOG_DIR/ops.blade.log" || rc=1
    check "each session got a window per queue pair" \
        grep -q "connected with 2 queue pair(s) and a memory window each" "$LOG_DIR/ops.blade.log" || rc=1
    stop_blade "$BLADE_PID"
    return $rc
}

t_memory_windows() {
    local rc=0
    # The transport's windows against the device: a key works on its own
    # queue pair only, a revoked key and the pool's own key open nothing.
    timeout -k 5 "$GUARD" "$BIN/verbs_window_test" > "$LOG_DIR/verbs_window_test.log" 2>&1 ||
        { echo "verbs_window_test exited $?:"; rc=1; }
    cat "$LOG_DIR/verbs_window_test.log"
    check "verbs_window_test ran its tests, none skipped" \
        bash -c "grep -q '\[  PASSED  \] 6 tests' '$LOG_DIR/verbs_window_test.log' &&
                 ! grep -q SKIPPED '$LOG_DIR/verbs_window_test.log'" || rc=1
    # Turned off on the memory blade: one log line, and clients still work
    # with the pool's rkey.
    sed 's/"infiniband": {/"infiniband": {"memory_windows": false,/' "$WORK/smart.json" > "$WORK/smart.nowindows.json"
    rdma_config "$WORK/blade.json" 64
    SMART_CONFIG_PATH=$WORK/smart.nowindows.json start_blade nowindows "$BIN/test_rdma" --config "$WORK/blade.json" ||
        return 1
    rdma_config "$WORK/client.json" 64 "$BLADE_PORT"
    run_client "$WORK/nowindows.log" --config "$WORK/client.json" --type cas --duration 1 2 4 ||
        { echo "test_rdma against a blade without windows exited $?:"; cat "$WORK/nowindows.log"; rc=1; }
    check "without windows: result line" expect_result "$WORK/nowindows.log" cas 2 4 || rc=1
    check "without windows: one log line says why" \
        test "$(grep -c 'no per-session memory windows (infiniband.memory_windows is false)' \
            "$LOG_DIR/nowindows.blade.log")" = 1 || rc=1
    check "without windows: no session reports windows" \
        bash -c "! grep -q 'a memory window each' '$LOG_DIR/nowindows.blade.log'" || rc=1
    stop_blade "$BLADE_PID"
    return $rc
}

t_doorbell_modes() {
    rdma_config "$WORK/blade.json" 64
    start_blade doorbell "$BIN/test_rdma" --config "$WORK/blade.json" || return 1
    rdma_config "$WORK/client.json" 64 "$BLADE_PORT"
    local rc=0 mode
    for mode in uuar shared; do
        # The tier's config with another doorbell mode, by sed rather than
        # verbs_config: python3 takes seconds to start in the guest.
        sed "s/\"doorbell\": \"[a-z_]*\"/\"doorbell\": \"$mode\"/" "$WORK/smart.json" > "$WORK/smart.$mode.json"
        check "a config with doorbell $mode" grep -q "\"doorbell\": \"$mode\"" "$WORK/smart.$mode.json" ||
            { rc=1; continue; }
        SMART_CONFIG_PATH=$WORK/smart.$mode.json run_client "$WORK/$mode.log" --config "$WORK/client.json" \
            --type read --duration 1 2 4 || { echo "test_rdma with doorbell $mode exited $?:"; cat "$WORK/$mode.log"; rc=1; continue; }
        check "doorbell $mode: result line" expect_result "$WORK/$mode.log" read 2 4 || rc=1
    done
    check "uuar on rxe falls back to shared with one log line" \
        test "$(grep -c 'doorbell mode uuar needs an mlx5 device.*mode in effect: shared' "$WORK/uuar.log")" = 1 || rc=1
    check "shared logs no doorbell fallback" bash -c "! grep -q 'mode in effect' '$WORK/shared.log'" || rc=1
    stop_blade "$BLADE_PID"
    return $rc
}

t_shared_qp() {
    # The paper's shared-QP baseline: 4 threads on one queue pair.
    rdma_config "$WORK/blade.json" 64
    start_blade sharedqp "$BIN/test_rdma" --config "$WORK/blade.json" || return 1
    rdma_config "$WORK/client.json" 64 "$BLADE_PORT"
    sed -i 's/"qp_num": -1/"qp_num": 1/' "$WORK/client.json"
    local rc=0
    run_client "$WORK/sharedqp.log" --config "$WORK/client.json" --type faa --duration 1 4 4 ||
        { echo "test_rdma with one shared queue pair exited $?:"; cat "$WORK/sharedqp.log"; rc=1; }
    [ $rc = 0 ] && { check "4 threads on 1 queue pair: result line" expect_result "$WORK/sharedqp.log" faa 4 4 || rc=1; }
    check "the memory blade saw one queue pair" grep -q "with 1 queue pair" "$LOG_DIR/sharedqp.blade.log" || rc=1
    stop_blade "$BLADE_PID"
    return $rc
}

t_two_blades() {
    rdma_config "$WORK/blade.json" 64
    start_blade first "$BIN/test_rdma" --config "$WORK/blade.json" || return 1
    local first_pid=$BLADE_PID first_port=$BLADE_PORT
    start_blade second "$BIN/test_rdma" --config "$WORK/blade.json" || { stop_blade "$first_pid"; return 1; }
    local second_pid=$BLADE_PID second_port=$BLADE_PORT rc=0
    check "two different ports ($first_port, $second_port)" test "$first_port" != "$second_port" || rc=1
    rdma_config "$WORK/first.json" 64 "$first_port"
    rdma_config "$WORK/second.json" 64 "$second_port"
    # Both clients at once, one per memory blade.
    run_client "$WORK/first.log" --config "$WORK/first.json" --type write --duration 2 1 8 &
    local a=$!
    run_client "$WORK/second.log" --config "$WORK/second.json" --type cas --duration 2 1 8 &
    local b=$!
    wait $a || { echo "client of the first memory blade exited $?:"; cat "$WORK/first.log"; rc=1; }
    wait $b || { echo "client of the second memory blade exited $?:"; cat "$WORK/second.log"; rc=1; }
    check "first memory blade: result line" expect_result "$WORK/first.log" write 1 8 || rc=1
    check "second memory blade: result line" expect_result "$WORK/second.log" cas 1 8 || rc=1
    check "each memory blade served its client" \
        grep -q "connected with 1 queue pair" "$LOG_DIR/first.blade.log" "$LOG_DIR/second.blade.log" || rc=1
    stop_blade "$first_pid"
    stop_blade "$second_pid"
    return $rc
}

t_huge_pages() {
    # 40 pages of 2 MiB hold a 64 MiB pool; the guest's /proc is its own.
    echo 40 > /proc/sys/vm/nr_hugepages || { echo "cannot reserve huge pages"; return 1; }
    rdma_config "$WORK/blade.json" 64
    start_blade huge "$BIN/test_rdma" --config "$WORK/blade.json" || return 1
    local rc=0
    check "the pool is on huge pages" grep -q "memory pool of 64 MiB on 2 MiB huge pages" "$LOG_DIR/huge.blade.log" || rc=1
    rdma_config "$WORK/client.json" 64 "$BLADE_PORT"
    run_client "$WORK/huge.log" --config "$WORK/client.json" --type read --duration 1 1 8 ||
        { echo "test_rdma exited $?:"; cat "$WORK/huge.log"; rc=1; }
    check "READ from a huge-page pool: result line" expect_result "$WORK/huge.log" read 1 8 || rc=1
    stop_blade "$BLADE_PID"
    echo 0 > /proc/sys/vm/nr_hugepages
    return $rc
}

t_killed_blade() {
    rdma_config "$WORK/blade.json" 64
    start_blade killed "$BIN/test_rdma" --config "$WORK/blade.json" || return 1
    rdma_config "$WORK/client.json" 64 "$BLADE_PORT"
    # The client would run for 60 s; the memory blade dies after 2.
    run_client "$WORK/killed.log" --config "$WORK/client.json" --type read --duration 60 2 8 &
    local client=$! rc=0 status killed_at
    sleep 2
    check "the client is still running before the kill" kill -0 $client || { cat "$WORK/killed.log"; return 1; }
    kill -KILL "$BLADE_PID"
    killed_at=$(now)
    wait $client
    status=$?
    echo "client exited with status $status $(seconds_since "$killed_at") s after the memory blade was killed:"
    cat "$WORK/killed.log"
    check "the client exits non-zero" test "$status" -ne 0 || rc=1
    check "the client was not stopped by the hang guard" test "$status" -ne 124 -a "$status" -ne 137 || rc=1
    # The root cause, in ibv_wc_status_str's words, not the flush behind it:
    # a peer that stopped answering, or (its memory windows revoked as the
    # process went) a dead key that the closed connection explains.
    check "it reports the failed request with its completion status" \
        grep -q "test_rdma: read failed: .*\(transport retry counter exceeded\|remote access error.*the memory blade ended this client's session\)" \
        "$WORK/killed.log" || rc=1
    return $rc
}

t_integration() {
    # The multi-process tests of the shm tier, over verbs: every test ctest
    # knows under the label "integration", run with its own command and
    # environment (running ctest itself here would race the host's ctest
    # over the build tree's Testing/ directory).
    ctest --test-dir "$BUILD_DIR" -L '^integration$' ${SMART_VERBS_TESTS:+-R "$SMART_VERBS_TESTS"} \
        --show-only=json-v1 > "$WORK/integration.json" ||
        { echo "cannot list the integration tests"; return 1; }
    python3 - "$WORK/integration.json" > "$WORK/integration.list" <<'PY' || return 1
import json, shlex, sys
tests = json.load(open(sys.argv[1]))["tests"]
if not tests:
    sys.exit("no test with the label 'integration' in this build")
for t in tests:
    env = []
    for p in t.get("properties", []):
        if p["name"] == "ENVIRONMENT":
            env = p["value"]
    print(shlex.quote(t["name"]), " ".join(shlex.quote(e) for e in env), "--",
          " ".join(shlex.quote(c) for c in t["command"]))
PY
    # They all use this tier's smart_config.json (verbs, a 64 MiB initiator
    # cache), written once above: python3 takes seconds to start in the
    # guest, and every script would otherwise write its own; and each client
    # registers its whole cache, which costs a 256 MiB one about 1.5 s more
    # per process on rxe under emulation.
    local rc=0 name line count=0 t0
    while read -r line; do
        name=${line%% *}
        count=$((count + 1))
        t0=$(now)
        if (eval "set -- ${line#* }"; envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
            cd "$BUILD_DIR" && timeout -k 5 480 env SMART_TEST_TRANSPORT=verbs \
                SMART_TEST_SMART_CONFIG="$WORK/smart.json" "${envs[@]}" "$@") \
            > "$LOG_DIR/$name.log" 2>&1; then
            echo "ok: $name over verbs in $(seconds_since "$t0") s ($(tail -n 1 "$LOG_DIR/$name.log"))"
        else
            local status=$?
            if ((status == 77)); then
                echo "skipped: $name over verbs ($(tail -n 1 "$LOG_DIR/$name.log"))"
            else
                echo "FAILED: $name over verbs (exit $status, $(seconds_since "$t0") s):"
                tail -n 30 "$LOG_DIR/$name.log"
                rc=1
            fi
        fi
    done < "$WORK/integration.list"
    echo "$count integration test(s) run over verbs"
    return $rc
}

all_steps="tools test_rdma_ops memory_windows doorbell_modes shared_qp two_blades huge_pages killed_blade integration"
steps=${*:-$all_steps}
echo "verbs_tests: build $BUILD_DIR, steps: $steps"
for s in $steps; do
    case " $all_steps " in *" $s "*) step "$s" "t_$s" ;; *) echo "unknown step $s"; failed=$((failed + 1)) ;; esac
done
rm -rf "$WORK"
finish
