#!/usr/bin/env bash
# SMART-BT under concurrent client processes, checked against the writers'
# logs of acknowledged writes and deletes (writer_log.h): every key holds
# exactly some writer's last acknowledged value, or is absent after an
# acknowledged delete, and no acknowledged operation was lost.
#   1. Three processes insert at once, on disjoint and overlapping ranges,
#      growing the tree from one leaf to several levels.
#   2. Two processes update the same keys while a third reads: values per
#      key and writer never go back.
#   3. Three writers on 16 keys (one leaf), thousands of rounds.
#   4. Deletes and reinserts interleaved with updates on the same keys.
# Over verbs: the same phases on fewer keys and rounds (btree_lib.sh).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/btree_lib.sh"
start_btree_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
L=$WORK_DIR
# Key ids of phase 1 (enough for three levels either way: more than 45
# leaves of at most 45 keys), keys and rounds of phases 2 and 3.
N=$(sized 10000 3000)
UPDATED=$(sized 2000 600)
ROUNDS=$(sized 20 6)
CONTENDED_ROUNDS=$(sized 2000 200)
CHURNED=$(sized 600 200)

check_bg insert --from 0 --to $((N * 6 / 10)) --writer 0 --log "$L/i0.log"
check_bg insert --from $((N * 4 / 10)) --to "$N" --writer 1 --log "$L/i1.log"
check_bg insert --from 0 --to "$N" --writer 2 --short-values --log "$L/i2.log"
wait_checks
check check-log --from 0 --to $((N * 12 / 10)) --min-height 3 --log "$L/i0.log" --log "$L/i1.log" --log "$L/i2.log"
pass "concurrent inserts, disjoint and overlapping: none lost, one copy each, several levels"

check_bg update --from 0 --to "$UPDATED" --writer 1 --writers 3 --rounds "$ROUNDS" --log "$L/u1.log"
check_bg update --from 0 --to "$UPDATED" --writer 2 --writers 3 --rounds "$ROUNDS" --short-values --log "$L/u2.log"
check_bg read --from 0 --to "$UPDATED" --writers 3 --rounds "$ROUNDS" --duration 3
wait_checks
# Keys from $UPDATED on keep their inserts: their logs come from phase 1.
check check-log --from 0 --to "$N" --log "$L/i0.log" --log "$L/i1.log" --log "$L/i2.log" --log "$L/u1.log" --log "$L/u2.log"
pass "concurrent updates: monotonic per writer, final state matches every acknowledged write"

check insert --from 20000 --to 20016 --writer 0 --log "$L/c0.log" >/dev/null
for w in 1 2 3; do
  check_bg update --from 20000 --to 20016 --writer $w --rounds "$CONTENDED_ROUNDS" --threads 1 --coros 4 --log "$L/c$w.log"
done
wait_checks
check check-log --from 20000 --to 20016 --log "$L/c0.log" --log "$L/c1.log" --log "$L/c2.log" --log "$L/c3.log"
pass "three writers on 16 keys of one leaf: no acknowledged update lost"

# Two writers interleave deletes and reinserts of the same ids while a
# third updates them and a fourth deletes each once; absent ids must have
# had an acknowledged delete that no acknowledged write started after.
check insert --from 30000 --to $((30000 + CHURNED)) --writer 0 --log "$L/d0.log" >/dev/null
for w in 1 2; do
  check_bg churn --from 30000 --to $((30000 + CHURNED)) --writer $w --rounds "$ROUNDS" --log "$L/d$w.log"
done
check_bg update --from 30000 --to $((30000 + CHURNED)) --writer 3 --rounds "$ROUNDS" --allow-missing \
  --log "$L/d3.log"
check_bg delete --from 30000 --to $((30000 + CHURNED)) --writer 4 --allow-missing --log "$L/d4.log"
wait_checks
check check-log --from 30000 --to $((30000 + CHURNED)) --log "$L/d0.log" --log "$L/d1.log" --log "$L/d2.log" \
  --log "$L/d3.log" --log "$L/d4.log"
pass "interleaved deletes, reinserts and updates: the final state matches every writer's acknowledged operations"
