#!/bin/bash
# SMART-DTX over verbs on the guest's rxe device: does a bench run slower
# right after its tables are populated than later in the same boot? Runs
# INSIDE the guest, alone or as a step of perftest_compare.sh:
#
#   test/softroce/guest.sh -- test/softroce/dtx_phases.sh BUILD_DIR [SECONDS [RUNS]]
#
# For SmallBank, then TATP: two memory blades (the bench's backend, one
# backup of every table), then RUNS runs (default 3) of SECONDS each (default
# 4) at 2 threads x 8 coroutines, each a new client process; the first run
# populates the tables. Per run it prints the committed rate, P50 and P99,
# rxe's retransmissions (completer_retry_err) and the guest's speed (a fixed
# CPU loop timed before and after the run).
#
# Fails when a run's P50 is more than 5x the P50 of a later run of the same
# bench, both taken per unit of guest speed: a phase that waits on time (a
# timer, a lease) shows, a host that starved the guest's CPUs during one run
# does not. A host busy enough to slow the guest itself shows in the speed
# column. A last step checks that the check fails on a first run slowed on
# purpose (fault injection). Logs: $SOFTROCE_OUT/dtx_phases/.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SOURCE_DIR=$(cd "$here/../.." && pwd -P)
BUILD_DIR=${1:?usage: dtx_phases.sh BUILD_DIR [SECONDS [RUNS]]}
SECONDS_PER_RUN=${2:-4}
RUNS=${3:-3}
BIN=$BUILD_DIR/bin
source "$here/lib.sh"
bench_dirs dtx_phases
# Populating 100 K accounts takes about 2 s over rxe, 20 K subscribers about 3 s.
GUARD=$((SECONDS_PER_RUN * 4 + 120))
MAX_RATIO=5

verbs_config "$WORK/smart.json"
export SMART_CONFIG_PATH=$WORK/smart.json

# The guest's speed: seconds a fixed CPU loop takes (longer while the host
# keeps the guest's CPUs from running).
cpu_loop_seconds() {
    local t0
    t0=$(now)
    awk 'BEGIN { for (i = 0; i < 300000; i++) s += i * i }'
    seconds_since "$t0"
}

retransmissions() {
    rdma statistic show link rxe0/1 2>/dev/null | sed -n 's/.* completer_retry_err \([0-9]*\).*/\1/p'
}

# field LOG NAME: a number from the bench's result line ("NAME = X").
field() { result_field "dtx-" "$1" "$2"; }

# run_bench NAME SIZE_JSON [RUNS [FAULTS_OF_RUN_1]]: blades, RUNS runs (the
# first with SMART_FAULTS=FAULTS_OF_RUN_1 when given), one table line per
# run in $WORK/NAME.runs.
run_bench() {
    local name=$1 size=$2 runs=${3:-$RUNS} faults=${4:-} p0 p1 b0 b1 i
    cat > "$WORK/backend.json" <<JSON
{ "capacity": 256, "tcp_port": 0, "nic_numa_node": -1 }
JSON
    start_blade "${name}0" "$BIN/${name}_backend" "$WORK/backend.json" || return 1
    p0=$BLADE_PORT b0=$BLADE_PID
    start_blade "${name}1" "$BIN/${name}_backend" "$WORK/backend.json" || return 1
    p1=$BLADE_PORT b1=$BLADE_PID
    cat > "$WORK/$name.json" <<JSON
{ "memory_servers": [{"hostname": "127.0.0.1", "port": $p0}, {"hostname": "127.0.0.1", "port": $p1}],
  $size, "nr_transactions": 1000, "duration": $SECONDS_PER_RUN, "backup_degree": 1, "dump_file_path": "" }
JSON
    local rc=0
    : > "$WORK/$name.runs"
    for i in $(seq 1 "$runs"); do
        local log=$LOG_DIR/$name.$i.log before after r0 r1 status env=()
        [ "$i" = 1 ] && [ -n "$faults" ] && env=(SMART_FAULTS="$faults")
        before=$(cpu_loop_seconds)
        r0=$(retransmissions)
        env APP_CONFIG_PATH="$WORK/$name.json" "${env[@]}" timeout -k 5 "$GUARD" "$BIN/${name}_bench" 2 8 \
            > "$log" 2>&1
        status=$?
        r1=$(retransmissions)
        after=$(cpu_loop_seconds)
        grep "^dtx-" "$log"
        [ $status -eq 0 ] || { echo "${name}_bench run $i exited $status:"; tail -n 20 "$log"; rc=1; break; }
        local p50 p99 rate
        p50=$(field "$log" "P50 latency") p99=$(field "$log" "P99 latency") rate=$(field "$log" "committed txn")
        [ -n "$p50" ] && [ -n "$p99" ] && [ -n "$rate" ] || { echo "no result line in run $i"; rc=1; break; }
        echo "$i $rate $p50 $p99 $((${r1:-0} - ${r0:-0})) $before $after" >> "$WORK/$name.runs"
    done
    stop_blade "$b0"
    stop_blade "$b1"
    return $rc
}

# verdict NAME: prints the runs and fails when an earlier run's P50 per unit
# of guest speed is more than MAX_RATIO times a later run's.
verdict() {
    local name=$1
    echo "$name: 2 threads x 8 coroutines, $SECONDS_PER_RUN s per run (run 1 populated the tables)"
    awk -v max="$MAX_RATIO" '
        { run[NR] = $1; rate[NR] = $2; p50[NR] = $3; p99[NR] = $4; rtx[NR] = $5; speed[NR] = ($6 + $7) / 2
          norm[NR] = (speed[NR] > 0) ? p50[NR] / speed[NR] : p50[NR] }
        END {
          printf "%-4s %14s %12s %12s %16s %12s\n", "run", "M txn/s", "P50 us", "P99 us", "retransmissions", "CPU loop s"
          for (i = 1; i <= NR; i++)
              printf "%-4s %14s %12s %12s %16s %12.2f\n", run[i], rate[i], p50[i], p99[i], rtx[i], speed[i]
          if (NR < 2) { print "fewer than 2 runs: nothing to compare"; exit 1 }
          bad = 0
          for (i = 1; i < NR; i++)
              for (j = i + 1; j <= NR; j++)
                  if (norm[j] > 0 && norm[i] / norm[j] > max) {
                      printf "FAILED: run %d P50 is %.1fx that of run %d, per unit of guest speed (limit %dx)\n", i, norm[i] / norm[j], j, max
                      bad = 1
                  }
          if (!bad) printf "ok: no run P50 above %dx a later run of the same bench\n", max
          exit bad
        }' "$WORK/$name.runs"
}

t_smallbank() { run_bench smallbank '"smallbank": {"num_accounts": 100000, "num_hot_accounts": 4000}' && verdict smallbank; }
t_tatp() { run_bench tatp '"tatp": {"num_subscriber": 20000}' && verdict tatp; }
# The check itself can fail: a first run whose client sleeps 50 ms at every
# fourth CAS (a phase that waits on time) must be caught.
t_check_catches_a_slow_phase() {
    run_bench smallbank '"smallbank": {"num_accounts": 2000, "num_hot_accounts": 100}' 2 'delay=50ms@cas#4+' ||
        return 1
    if verdict smallbank; then
        echo "FAILED: a first run slowed by a sleep at every fourth CAS passed the check"
        return 1
    fi
    echo "ok: the slowed first run failed the check, as it must"
}

step smallbank_phases t_smallbank
step tatp_phases t_tatp
step check_catches_a_slow_phase t_check_catches_a_slow_phase
rm -rf "$WORK"
finish
