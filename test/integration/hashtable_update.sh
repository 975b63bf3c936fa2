#!/usr/bin/env bash
# Writer processes update the same keys while a reader checks that, per key
# and writer, values never go back to an older round. Every writer logs its
# last acknowledged write of each key; the final state must match the logs:
# each key holds exactly some writer's last acknowledged value, and no
# acknowledged write that started after that one returned was lost. Then
# the same with three writers on 16 keys for thousands of rounds, so that
# their writes to one key overlap all the time; every third CAS of theirs
# waits 20 us (fault injection), holding the window between an update's
# read of the slot and its CAS open while the others write.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
L=$WORK_DIR
N=$(sized 2000 800)
R=$(sized 25 10)
check insert --expected-keys 10000 --from 0 --to $N --writer 0 --log "$L/w0.log" >/dev/null
check_bg update --from 0 --to $N --writer 1 --rounds $R --log "$L/w1.log"
check_bg update --from 0 --to $N --writer 2 --rounds $R --log "$L/w2.log"
check_bg read --from 0 --to $N --writers 3 --rounds $R --duration 3
wait_checks
check verify --from 0 --to $N --writers 3 --rounds $R >/dev/null
check check-log --from 0 --to $N --log "$L/w0.log" --log "$L/w1.log" --log "$L/w2.log"
pass "concurrent updates: monotonic per writer, and the final state matches every writer's acknowledged writes"

check insert --from 5000 --to 5016 --writer 0 --log "$L/c0.log" >/dev/null
for w in 1 2 3; do
  SMART_FAULTS='delay=20us@cas#3+' check_bg update --from 5000 --to 5016 --writer $w --rounds $(sized 3000 600) --threads 1 \
    --coros 4 --log "$L/c$w.log"
done
wait_checks
check check-log --from 5000 --to 5016 --log "$L/c0.log" --log "$L/c1.log" --log "$L/c2.log" --log "$L/c3.log"
pass "three writers on 16 keys: no acknowledged update lost"
