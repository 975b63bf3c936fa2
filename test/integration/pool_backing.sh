#!/usr/bin/env bash
# Pool backings of the memory blade (backend.json "backing"):
# - file:PATH: a hash table loaded and updated, the memory blade stopped
#   with SIGTERM and later killed with SIGKILL, started again on the same
#   file each time; every key holds the value its writer was last told it
#   wrote, and the table keeps growing after the restart;
# - a file of the wrong size, a file that holds something else, and a
#   device that is not devdax are refused with a message naming them, and
#   the file is left as it was;
# - hugetlb: served from reserved huge pages (reserved here as root, else
#   skipped with the reason).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
L=$WORK_DIR
POOL=$L/pool.img
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then
  # In the Soft-RoCE guest the work directory is the host's, over 9p; the
  # pool file goes to the guest's own tmpfs, where the NIC can register it.
  POOL=$(mktemp /dev/shm/smart-pool.XXXXXX)
  rm -f "$POOL"
  trap 'st=$?; rm -f "$POOL"; (exit $st); cleanup' EXIT
fi

# start_backed_blade MIB BACKING: a hashtable_backend with that backing.
start_backed_blade() {
  local mib=$1 backing=$2
  cat >"$L/backend.backed.json" <<JSON
{ "capacity": $mib, "tcp_port": 0, "nic_numa_node": -1, "backing": "$backing" }
JSON
  start_blade "$SMART_BIN/hashtable_backend" "$L/backend.backed.json"
  SERVERS=("127.0.0.1:$BLADE_PORT")
}

start_backed_blade 256 "file:$POOL"
grep -q "pool in file $POOL (new)" "$L/blade0.log" || fail "the startup line does not name the new pool file"
check insert --expected-keys 64 --from 0 --to 20000 --writer 0 --log "$L/w0.log" >/dev/null
check update --from 0 --to 5000 --writer 1 --rounds 3 --log "$L/w1.log" >/dev/null
kill -TERM "$BLADE_PID"
wait "$BLADE_PID" 2>/dev/null || true

start_backed_blade 256 "file:$POOL"
grep -q "pool in file $POOL (reopened)" "$L/blade1.log" || fail "the restarted blade did not reopen its pool"
check check-log --from 0 --to 20000 --log "$L/w0.log" --log "$L/w1.log"
pass "file backing: after SIGTERM and a restart, all 20000 keys hold their last acknowledged values"

# The table goes on growing after the restart, then the blade is killed.
check insert --from 20000 --to 40000 --writer 2 --log "$L/w2.log" >/dev/null
kill -KILL "$BLADE_PID"
wait "$BLADE_PID" 2>/dev/null || true
start_backed_blade 256 "file:$POOL"
check check-log --from 0 --to 40000 --log "$L/w0.log" --log "$L/w1.log" --log "$L/w2.log"
check verify --from 0 --to 40000 --writers 3 --rounds 3 >/dev/null
pass "file backing: after SIGKILL and a restart, all 40000 keys hold their last acknowledged values, one copy each"
stop_blades

# Refusals leave the file untouched.
sum=$(md5sum <"$POOL")
expect_fail "a pool file of another capacity" "$SMART_BIN/hashtable_backend" --capacity 128 --backing "file:$POOL" \
  "$L/backend.backed.json"
grep -q "holds 268435456 bytes (256 MiB) but \"capacity\" asks for 134217728 bytes (128 MiB)" "$L/expect_fail.log" ||
  fail "wrong-capacity message: $(cat "$L/expect_fail.log")"
[[ $(md5sum <"$POOL") == "$sum" ]] || fail "the refused pool file was changed"
head -c 1048576 /dev/urandom >"$L/junk.img"
expect_fail "a file that is not a pool" "$SMART_BIN/hashtable_backend" --capacity 1 --backing "file:$L/junk.img" \
  "$L/backend.backed.json"
grep -q "holds data that is not a memory-blade pool; refusing to format it" "$L/expect_fail.log" ||
  fail "foreign-file message: $(cat "$L/expect_fail.log")"
expect_fail "a device that is not devdax" "$SMART_BIN/hashtable_backend" --backing devdax:/dev/null \
  "$L/backend.backed.json"
grep -q "\"devdax:/dev/null\" is not a device-DAX device" "$L/expect_fail.log" ||
  fail "devdax message: $(cat "$L/expect_fail.log")"
expect_fail "an unknown backing" "$SMART_BIN/hashtable_backend" --backing tape "$L/backend.backed.json"
grep -q "expected memfd, hugetlb, file:PATH or devdax:PATH, found \"tape\"" "$L/expect_fail.log" ||
  fail "unknown-backing message: $(cat "$L/expect_fail.log")"
pass "a pool file of another capacity, a foreign file, /dev/null as devdax and an unknown backing are refused by name"

# Huge pages: 64 MiB needs 32 pages of 2 MiB.
NR=/proc/sys/vm/nr_hugepages
FREE=/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
if [[ ! -w $NR || ! -r $FREE ]]; then
  echo "SKIP hugetlb: $NR is not writable here (needs root and 2 MiB huge pages)"
else
  before=$(cat "$NR")
  restore() { echo "$before" >"$NR"; }
  trap 'st=$?; restore; rm -f "$POOL"; (exit $st); cleanup' EXIT
  echo $((before + 32)) >"$NR" 2>/dev/null || true
  if (($(cat "$FREE") < 32)); then
    restore
    echo "SKIP hugetlb: the kernel reserved only $(cat "$FREE") free huge pages of the 32 asked for"
  else
    start_backed_blade 64 hugetlb
    grep -q "pool in 2 MiB huge pages (hugetlb, 32 pages)" "$L/blade$((${#BLADE_PIDS[@]} - 1)).log" ||
      fail "the startup line does not say the pool is on huge pages"
    check insert --expected-keys 1000 --from 0 --to 5000 --writer 0 --log "$L/h0.log" >/dev/null
    check check-log --from 0 --to 5000 --log "$L/h0.log"
    stop_blades
    restore
    pass "hugetlb backing: a table served from 32 reserved huge pages holds what was written"
  fi
fi
