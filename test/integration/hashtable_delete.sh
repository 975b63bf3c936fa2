#!/usr/bin/env bash
# Deletes race with updates of the same keys and with readers; deleted keys
# must stay deleted (an update after the delete fails and nothing brings a
# key back), the others must survive. Then writers interleave deletes and
# reinserts of the same few hundred keys while an updater and a deleter go
# over them too, every third CAS delayed by 20 us (fault injection) to keep
# the windows between a read and its CAS open; every writer logs its last
# acknowledged operation per key, and the final state must match the logs:
# a present key holds exactly one copy of some writer's last acknowledged
# write, and an absent key had an acknowledged delete that no acknowledged
# write started after.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
check insert --expected-keys 10000 --from 0 --to 6000 --writer 0
check_bg delete --from 0 --to 3000
check_bg update --from 0 --to 6000 --writer 1 --rounds 3 --allow-missing
check_bg read --from 0 --to 6000 --writers 2 --rounds 3 --duration 2 --allow-missing
wait_checks
check verify --from 0 --to 3000 --absent
check verify --from 3000 --to 6000 --writers 2 --rounds 3
# Updates of deleted keys must not resurrect them.
check update --from 0 --to 3000 --writer 1 --rounds 1 --allow-missing
check verify --from 0 --to 3000 --absent
pass "deletes are not resurrected"

L=$WORK_DIR
FROM=10000
TO=$((FROM + $(sized 300 120)))
R=$(sized 40 10)
check insert --from $FROM --to $TO --writer 0 --log "$L/d0.log" >/dev/null
for w in 1 2; do
  SMART_FAULTS='delay=20us@cas#3+' check_bg churn --from $FROM --to $TO --writer $w --rounds "$R" --log "$L/d$w.log"
done
SMART_FAULTS='delay=20us@cas#3+' check_bg update --from $FROM --to $TO --writer 3 --rounds "$R" --allow-missing \
  --log "$L/d3.log"
check_bg delete --from $FROM --to $TO --writer 4 --allow-missing --log "$L/d4.log"
wait_checks
check check-log --from $FROM --to $TO --log "$L/d0.log" --log "$L/d1.log" --log "$L/d2.log" --log "$L/d3.log" \
  --log "$L/d4.log"
pass "interleaved deletes, reinserts and updates: the final state matches every writer's acknowledged operations"
