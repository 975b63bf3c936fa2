#!/usr/bin/env bash
# Clients of a growing table killed with SIGKILL while they insert (and so,
# often, while they split a subtable and hold the resize lock). After each
# kill another client must go on inserting its own keys: it takes the dead
# client's lock over and finishes any split left half done. At the end
# every key a surviving writer was told it inserted holds exactly that
# writer's value, once; the victims' ranges, inserted again by a new writer,
# hold that writer's values, once each (no key the victim had inserted is
# duplicated by the split it died in).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 512
SERVERS=("127.0.0.1:$BLADE_PORT")
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then LEASE=(--lease-ms 2000); else LEASE=(--lease-ms 300); fi
check build --expected-keys 20000 "${LEASE[@]}" >/dev/null

rounds=${CRASH_ROUNDS:-$(sized 6 3)}
again=$(sized 20000 5000)  # the first keys of the victim's range, inserted again
recovered=0
for round in $(seq 1 "$rounds"); do
  victim_from=$((round * 10000000))
  survivor_from=$((round * 10000000 + 5000000))
  "$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" "${LEASE[@]}" --threads 2 --coros 4 \
    insert --from "$victim_from" --to $((victim_from + 1000000)) --writer 0 >"$WORK_DIR/victim.$round.log" 2>&1 &
  victim=$!
  # Let it run into splits, then kill it at a moment that varies by round.
  sleep "0.$((1 + round % 5))"
  kill -KILL "$victim" 2>/dev/null || true
  wait "$victim" 2>/dev/null || true
  out=$("$SMART_BIN/hashtable_check" --server "${SERVERS[0]}" "${LEASE[@]}" insert --from "$survivor_from" \
    --to $((survivor_from + 3000)) --writer 1 2>&1) || { echo "$out" >&2; fail "round $round: the survivor's inserts failed"; }
  echo "round $round: $out"
  n=$(sed -n 's/.*splits of dead clients finished \([0-9]*\).*/\1/p' <<<"$out")
  recovered=$((recovered + ${n:-0}))
done
for round in $(seq 1 "$rounds"); do
  survivor_from=$((round * 10000000 + 5000000))
  check verify --from "$survivor_from" --to $((survivor_from + 3000)) --writer 1 --writers 3 --rounds 0 --exact >/dev/null
  victim_from=$((round * 10000000))
  grep -q "insert: ok" "$WORK_DIR/victim.$round.log" && fail "round $round: the victim finished before it was killed"
  # The first keys of each of the victim's workers, inserted before the kill.
  check insert --from "$victim_from" --to $((victim_from + again)) --writer 2 >/dev/null
  check verify --from "$victim_from" --to $((victim_from + again)) --writer 2 --writers 3 --rounds 0 --exact >/dev/null
done
pass "$rounds clients killed while inserting into a growing table; the survivors went on (splits of dead clients finished: $recovered) and every acknowledged insert is there exactly once"
