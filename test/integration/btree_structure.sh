#!/usr/bin/env bash
# SMART-BT's structure under concurrent processes: deletes are never
# undone, scans during splits are sorted, without duplicates, and include
# every key present throughout; a torn leaf is detected and read again; a
# tree on two memory blades. Over verbs: the same on fewer keys
# (btree_lib.sh).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/btree_lib.sh"
start_btree_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
N=$(sized 6000 2000)
N2=$(sized 5000 2000)

# Even ids present throughout; odd ids inserted (splitting leaves) while
# other processes scan and read.
check insert --from 0 --to "$N" --writer 0 --parity even >/dev/null
check_bg insert --from 0 --to "$N" --writer 1 --writers 2 --threads 1 --parity odd
check_bg scan --from 0 --to "$N" --writers 2 --even-stable --duration 2
check_bg scan --from 0 --to "$N" --writers 2 --even-stable --duration 2 --threads 1
wait_checks
pass "scans during splits: sorted, no duplicates, every key present throughout"

check_bg delete --from 0 --to "$N" --even-stable
check_bg read --from 0 --to "$N" --writers 2 --allow-missing --duration 1
wait_checks
check verify --from 0 --to "$N" --writers 2 --absent --even-stable
pass "deleted keys are never found again; the others stay"
check insert --from 0 --to "$N" --writer 1 --writers 2 >/dev/null
check verify --from 0 --to "$N" --writers 2
pass "deleted keys inserted again"

check torn
pass "a torn leaf is detected and read again"

start_btree_blade 256
SERVERS=("127.0.0.1:$BLADE_PORT")
start_btree_blade 256
SERVERS+=("127.0.0.1:$BLADE_PORT")
check_bg insert --from 0 --to "$N2" --writer 0 --log "$WORK_DIR/b0.log"
check_bg insert --from $((N2 / 2)) --to $((N2 * 3 / 2)) --writer 1 --log "$WORK_DIR/b1.log"
wait_checks
check check-log --from 0 --to $((N2 * 3 / 2)) --min-height 2 --log "$WORK_DIR/b0.log" --log "$WORK_DIR/b1.log"
pass "a tree on two memory blades"
