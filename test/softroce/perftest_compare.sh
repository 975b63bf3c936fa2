#!/bin/bash
# test_rdma against perftest on the same rxe device; runs INSIDE the guest:
#
#   test/softroce/guest.sh -- test/softroce/perftest_compare.sh BUILD_DIR [SECONDS [ROUNDS]]
#
# 8-byte READ: ib_read_bw -s 8 vs test_rdma read with one thread and as many
# requests in flight as perftest keeps (its "Outstand reads", capped by its
# TX depth). CAS: ib_atomic_bw (compare-and-swap) vs test_rdma cas, likewise.
# Each pair runs ROUNDS times, alternating, and the best rate of each counts.
# Prints the message rates and the ratio test_rdma / perftest, and what
# per-session memory windows cost (test_rdma with and without), then the hash
# table's load rate and tail (hashtable_tail.sh) and SMART-DTX's runs after
# population against later ones (dtx_phases.sh), and three of the paper's
# figures over verbs (ae_figures.sh). The ratios are
# measurements, not pass criteria: the script fails only when a run fails, a
# tool is missing, dtx_phases.sh finds a slow phase (a run's P50 above 5x
# a later run's, per unit of guest speed), or a figure's point fails. Logs: $SOFTROCE_OUT/perftest/.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SOURCE_DIR=$(cd "$here/../.." && pwd -P)
BUILD_DIR=${1:?usage: perftest_compare.sh BUILD_DIR [SECONDS [ROUNDS]]}
SECONDS_PER_RUN=${2:-4}
ROUNDS=${3:-3}
# perftest repeats one address; test_rdma spreads its requests over its
# memory_size. A small range compares the two software paths on like work
# (under emulation every new page the responder touches costs a software TLB
# refill); PERF_POOL_MIB=64 shows the cost of the spread.
POOL_MIB=${PERF_POOL_MIB:-2}
BIN=$BUILD_DIR/bin
LOG_DIR=$SOFTROCE_OUT/perftest
mkdir -p "$LOG_DIR"
source "$here/lib.sh"
WORK=$(mktemp -d /run/perftest.XXXXXX)
DEV=${SOFTROCE_DEV:-rxe0}
GID=${SOFTROCE_GID_INDEX:-1}
GUARD=$((SECONDS_PER_RUN * 6 + 60))

verbs_config "$WORK/smart.json"
export SMART_CONFIG_PATH=$WORK/smart.json
# Credit throttling would cap the requests in flight below perftest's.
export SMART_OPTS=ThrdAwareAlloc

wait_listen() { # PORT PID
    local i
    for i in $(seq 1 300); do
        ss -Hltn "sport = :$1" 2> /dev/null | grep -q . && return 0
        kill -0 "$2" 2> /dev/null || return 1
        sleep 0.1
    done
    return 1
}

# perftest NAME TOOL ARGS...: server and client on 127.0.0.1; log in NAME.log.
perftest() {
    local name=$1 tool=$2 port=$3 srv rc_c rc_s
    shift 3
    srv=$LOG_DIR/$name.server.log
    timeout -k 5 "$GUARD" "$tool" -d "$DEV" -x "$GID" -F -p "$port" "$@" > "$srv" 2>&1 &
    local spid=$!
    wait_listen "$port" "$spid" || { echo "$tool server did not listen:"; cat "$srv"; kill "$spid"; return 1; }
    timeout -k 5 "$GUARD" "$tool" -d "$DEV" -x "$GID" -F -p "$port" "$@" 127.0.0.1 > "$LOG_DIR/$name.log" 2>&1
    rc_c=$?
    wait "$spid"
    rc_s=$?
    cat "$LOG_DIR/$name.log"
    [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ] || { echo "$tool: client exit $rc_c, server exit $rc_s"; cat "$srv"; return 1; }
}

# Message rate in M/s from a perftest bandwidth report (last column).
perftest_rate() { awk '/#bytes/ {h=1; next} h && NF >= 5 && $1 ~ /^[0-9]+$/ {print $NF; exit}' "$1"; }
# Requests perftest keeps in flight: its outstanding reads, at most its TX depth.
perftest_depth() {
    awk -F: '/Outstand reads/ {gsub(/ /, "", $2); o=$2} /TX depth/ {gsub(/ /, "", $2); t=$2}
             END {d = (o != "" && t != "" && t + 0 < o + 0) ? t : o; print d}' "$1"
}
# test_rdma prints IOPS in M/s with three decimals, too coarse at rxe's
# speed under emulation; its bandwidth (MB/s, 10^6 bytes) of 8-byte requests
# carries more digits.
test_rdma_rate() {
    sed -n 's/.*#block_size=8, BW=\([0-9.]*\) MB\/s.*/\1/p' "$1" | head -n 1 |
        awk 'NF {printf "%.6f\n", $1 * 1e6 / 8 / 1e6}'
}

# run_pair LABEL PERFTEST_TOOL PORT TEST_RDMA_TYPE PERFTEST_ARGS...: ROUNDS
# alternating runs of perftest and test_rdma (so that a change in the host's
# load hits both alike); writes "DEPTH BEST_PERFTEST_RATE BEST_TEST_RDMA_RATE"
# to $WORK/LABEL.result.
run_pair() {
    local label=$1 tool=$2 port=$3 type=$4 round perf_rate ours depth=
    local best_perf=0 best_ours=0
    shift 4
    rdma_config "$WORK/blade.json" "$POOL_MIB"
    start_blade "$label" "$BIN/test_rdma" --config "$WORK/blade.json" || return 1
    rdma_config "$WORK/client.json" "$POOL_MIB" "$BLADE_PORT"
    for round in $(seq 1 "$ROUNDS"); do
        perftest "$label.perftest.$round" "$tool" "$port" -D "$SECONDS_PER_RUN" "$@" || { stop_blade "$BLADE_PID"; return 1; }
        perf_rate=$(perftest_rate "$LOG_DIR/$label.perftest.$round.log")
        [ -n "$depth" ] || depth=$(perftest_depth "$LOG_DIR/$label.perftest.$round.log")
        [ -n "$perf_rate" ] && [ -n "$depth" ] ||
            { echo "cannot read the message rate or depth from $tool's report"; stop_blade "$BLADE_PID"; return 1; }
        echo "perftest keeps $depth requests in flight"
        local cmd=("$BIN/test_rdma" --config "$WORK/client.json" --type "$type" --duration "$SECONDS_PER_RUN" 1 "$depth")
        echo "+ SMART_OPTS=$SMART_OPTS ${cmd[*]}"
        timeout -k 5 "$GUARD" "${cmd[@]}" > "$LOG_DIR/$label.test_rdma.$round.log" 2>&1
        local rc=$?
        cat "$LOG_DIR/$label.test_rdma.$round.log"
        [ $rc -eq 0 ] || { echo "test_rdma exited $rc"; stop_blade "$BLADE_PID"; return 1; }
        ours=$(test_rdma_rate "$LOG_DIR/$label.test_rdma.$round.log")
        [ -n "$ours" ] || { echo "no result in test_rdma's output"; stop_blade "$BLADE_PID"; return 1; }
        echo "round $round: perftest $perf_rate M/s, test_rdma $ours M/s"
        best_perf=$(awk -v a="$best_perf" -v b="$perf_rate" 'BEGIN{print (b > a) ? b : a}')
        best_ours=$(awk -v a="$best_ours" -v b="$ours" 'BEGIN{print (b > a) ? b : a}')
    done
    stop_blade "$BLADE_PID"
    echo "$depth $best_perf $best_ours" > "$WORK/$label.result"
}

t_tools() {
    local t ok=0
    for t in ib_read_bw ib_atomic_bw ss timeout python3; do
        command -v "$t" > /dev/null || { echo "missing tool: $t (Debian: perftest, iproute2, coreutils)"; ok=1; }
    done
    [ -x "$BIN/test_rdma" ] || { echo "missing $BIN/test_rdma (build first)"; ok=1; }
    return $ok
}
# What per-session memory windows cost: test_rdma against a memory blade
# with them and one without (infiniband.memory_windows false), alternating,
# ROUNDS times each for READ and CAS at depth 8; writes the per-round ratios
# (with / without) to $WORK/windows.TYPE.ratios.
t_windows_cost() {
    sed 's/"infiniband": {/"infiniband": {"memory_windows": false,/' "$WORK/smart.json" > "$WORK/smart.nowindows.json"
    rdma_config "$WORK/blade.json" "$POOL_MIB"
    start_blade windows "$BIN/test_rdma" --config "$WORK/blade.json" || return 1
    local with_pid=$BLADE_PID with_port=$BLADE_PORT
    SMART_CONFIG_PATH=$WORK/smart.nowindows.json start_blade nowindows "$BIN/test_rdma" --config "$WORK/blade.json" ||
        { stop_blade "$with_pid"; return 1; }
    local without_pid=$BLADE_PID without_port=$BLADE_PORT rc=0 type round side
    grep -q "gets its own memory window" "$LOG_DIR/windows.blade.log" ||
        { echo "the first memory blade has no windows:"; cat "$LOG_DIR/windows.blade.log"; rc=1; }
    grep -q "no per-session memory windows (infiniband.memory_windows is false)" "$LOG_DIR/nowindows.blade.log" ||
        { echo "the second memory blade did not turn windows off:"; cat "$LOG_DIR/nowindows.blade.log"; rc=1; }
    [ $rc = 0 ] || { stop_blade "$with_pid"; stop_blade "$without_pid"; return 1; }
    for type in read cas; do
        : > "$WORK/windows.$type.ratios"
        for round in $(seq 1 "$ROUNDS"); do
            local with_rate= without_rate= order="with without"
            # Each side goes first every other round.
            [ $((round % 2)) = 0 ] && order="without with"
            for side in $order; do
                local port_var=${side}_port
                rdma_config "$WORK/client.$side.json" "$POOL_MIB" "${!port_var}"
                local log=$LOG_DIR/windows.$type.$side.$round.log
                timeout -k 5 "$GUARD" "$BIN/test_rdma" --config "$WORK/client.$side.json" --type "$type" \
                    --duration "$SECONDS_PER_RUN" 1 8 > "$log" 2>&1 || { echo "test_rdma exited $?:"; cat "$log"; rc=1; }
                local rate
                rate=$(test_rdma_rate "$log")
                [ -n "$rate" ] || { echo "no result in $log"; rc=1; rate=0; }
                if [ $side = with ]; then with_rate=$rate; else without_rate=$rate; fi
            done
            echo "windows $type round $round: with $with_rate M/s, without $without_rate M/s"
            awk -v a="$with_rate" -v b="$without_rate" 'BEGIN { if (b > 0) printf "%.4f\n", a / b }' \
                >> "$WORK/windows.$type.ratios"
        done
    done
    stop_blade "$with_pid"
    stop_blade "$without_pid"
    return $rc
}

t_read() { run_pair read ib_read_bw 18600 read -s 8; }
t_cas() { run_pair cas ib_atomic_bw 18601 cas -A CMP_AND_SWAP; }

step tools t_tools
step read_8b t_read
step cas t_cas
step windows_cost t_windows_cost

echo
echo "perftest_compare: $DEV, 1 thread, best of $ROUNDS alternating runs of ${SECONDS_PER_RUN} s, test_rdma over $POOL_MIB MiB, $(nproc) guest CPUs"
printf '%-10s %8s %18s %18s %8s\n' op depth "perftest M/s" "test_rdma M/s" ratio
for label in read cas; do
    [ -f "$WORK/$label.result" ] || { printf '%-10s %s\n' "$label" "(no result)"; continue; }
    python3 - "$label" $(cat "$WORK/$label.result") <<'PY'
import sys
label, depth, perf, ours = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
ratio = ours / perf if perf > 0 else float("nan")
name = {"read": "READ 8 B", "cas": "CAS"}[label]
print(f"{name:<10} {depth:>8} {perf:>18.6f} {ours:>18.6f} {ratio:>8.2f}   (target >= 0.95)")
PY
done
echo
echo "memory windows: test_rdma 1 thread, depth 8, with / without per-session windows, median of $ROUNDS alternating pairs"
for type in read cas; do
    [ -s "$WORK/windows.$type.ratios" ] || { printf '%-10s %s\n' "$type" "(no result)"; continue; }
    sort -n "$WORK/windows.$type.ratios" |
        awk -v t="$type" '{r[NR] = $1} END {m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2;
                          printf "%-10s median ratio %.3f (pairs %s..%s)\n", t, m, r[1], r[NR]}'
done
rm -rf "$WORK"
# The hash table's load rate and tail over verbs, in the same boot.
# perftest_compare turns throttling off for itself; the table runs as configured.
step hashtable_tail env -u SMART_OPTS "$here/hashtable_tail.sh" "$BUILD_DIR"
# SMART-DTX's first runs after population against later ones (fails on a
# slow phase: a run's P50 above 5x a later run's).
step dtx_phases env -u SMART_OPTS "$here/dtx_phases.sh" "$BUILD_DIR"
# The paper's figures over verbs (ae/run.sh --softroce --quick, three of them).
step ae_figures env -u SMART_OPTS "$here/ae_figures.sh" "$BUILD_DIR"
finish
