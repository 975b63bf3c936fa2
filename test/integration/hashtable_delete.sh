#!/usr/bin/env bash
# Deletes race with updates of the same keys and with readers; deleted keys
# must stay deleted (an update after the delete fails and nothing brings a
# key back), the others must survive.
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
