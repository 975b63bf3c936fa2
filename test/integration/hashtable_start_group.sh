#!/usr/bin/env bash
# Several compute blades against one memory blade, started together with
# --sync GROUP:N: one loads the keys, two others (started first, with
# --no-load) wait for it. Every blade must arrive before any starts its run,
# and none may start before the loader arrived, that is before the keys
# were in: a run without the barrier would find keys missing. Their CSV
# lines combine into one (tools/combine_results.py) whose counts are the
# sums. A group with a member missing times out naming how many arrived
# and is abandoned (its late member refuses to run alone), and a group name
# used twice is refused. --start-file holds a run until a file exists.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 512
keys=$(sized 100000 20000)
config="$WORK_DIR/datastructure.json"
cat >"$config" <<JSON
{ "dataset": "ycsb-c", "dump_file_path": "",
  "insert_before_execution": true, "max_key": $keys, "key_length": 8, "value_length": 8,
  "rehash_key": false, "duration": 0.5, "zipfian_const": 0.99,
  "memory_servers": [ "127.0.0.1:$BLADE_PORT" ] }
JSON
bench() {  # bench NAME ARGS...: a compute blade, its log in NAME.log and its CSV line in NAME.csv
  local name=$1
  shift
  APP_CONFIG_PATH=$config "$SMART_BIN/hashtable_bench" 1 4 --dump-file "$WORK_DIR/$name.csv" "$@" \
    >"$WORK_DIR/$name.log" 2>&1
}
bench early1 --no-load --sync g1:3 &
p1=$!
bench early2 --no-load --sync g1:3 &
p2=$!
sleep 0.5  # the early ones are waiting by now (if not, the checks below still hold)
bench loader --sync g1:3 || { cat "$WORK_DIR/loader.log"; fail "the loading compute blade failed"; }
for p in $p1 $p2; do wait $p || { cat "$WORK_DIR"/early*.log; fail "a compute blade without load failed"; }; done

python3 - "$WORK_DIR" <<'PY' || fail "the start group did not hold its blades until all arrived"
import re, sys
d = sys.argv[1]
times = {}
for name in ("loader", "early1", "early2"):
    text = open("%s/%s.log" % (d, name)).read()
    m = re.search(r"compute blade (\d) of 3 in start group g1: arrived at (\d+), started at (\d+)", text)
    assert m, "%s: no start group line:\n%s" % (name, text)
    times[name] = (int(m.group(2)), int(m.group(3)))
    assert re.search(r"not found = 0, failed = 0", text), "%s: keys missing or failures:\n%s" % (name, text)
last_arrival = max(a for a, _ in times.values())
first_start = min(s for _, s in times.values())
assert first_start >= last_arrival, "a blade started at %d, before the last arrived at %d" % (first_start, last_arrival)
assert first_start >= times["loader"][0], "a blade started before the loader arrived (keys still loading)"
PY

combined=$(python3 "$SMART_SOURCE/tools/combine_results.py" hashtable "$WORK_DIR"/{loader,early1,early2}.csv) ||
  fail "combine_results failed"
echo "combined: $combined"
python3 - "$combined" "$WORK_DIR" <<'PY' || fail "the combined line is not the sum of the three"
import sys
sys.path.insert(0, __import__("os").environ["SMART_SOURCE"] + "/ae/collect")
import benches
combined = benches.parse_row("hashtable", sys.argv[1])
rows = [benches.parse_row("hashtable", open("%s/%s.csv" % (sys.argv[2], n)).read().strip().splitlines()[-1])
        for n in ("loader", "early1", "early2")]
assert combined["succeeded"] == sum(r["succeeded"] for r in rows), (combined, rows)
assert abs(combined["mops"] - sum(r["mops"] for r in rows)) <= 0.002 * 3, (combined, rows)
assert combined["succeeded"] > 0
PY

# A member missing: the wait ends, naming how many arrived.
if bench lonely --no-load --sync g2:2 --sync-timeout 1; then fail "a start group of 2 started with 1"; fi
grep -q "1 of 2 arrived" "$WORK_DIR/lonely.log" || { cat "$WORK_DIR/lonely.log"; fail "no 'of 2 arrived' in the error"; }
# Its partner, late: the group was abandoned, so it does not run alone.
if bench late --no-load --sync g2:2 --sync-timeout 5; then fail "a blade ran alone in an abandoned group"; fi
grep -q "abandoned" "$WORK_DIR/late.log" || { cat "$WORK_DIR/late.log"; fail "no 'abandoned' in the error"; }
# The same name again: refused.
if bench again --no-load --sync g1:3 --sync-timeout 5; then fail "a used start group name was accepted"; fi
grep -q "used before" "$WORK_DIR/again.log" || { cat "$WORK_DIR/again.log"; fail "no 'used before' in the error"; }

# --start-file F: after its load the bench writes F.ready and runs only once
# F exists (no memory blade shared; test/bench/ab_ratio.sh starts two runs
# together this way).
F=$WORK_DIR/go
bench filed --no-load --start-file "$F" &
pf=$!
for ((i = 0; i < 600; ++i)); do
  [[ -f $F.ready ]] && break
  kill -0 "$pf" 2>/dev/null || { cat "$WORK_DIR/filed.log"; fail "the bench ended before it wrote $F.ready"; }
  sleep 0.1
done
[[ -f $F.ready ]] || fail "no $F.ready within 60 s"
# Its run is 0.5 s: still waiting well after that means it waits for F.
sleep 2
kill -0 "$pf" 2>/dev/null || { cat "$WORK_DIR/filed.log"; fail "the bench ran without waiting for $F"; }
grep -q "throughput" "$WORK_DIR/filed.log" && { cat "$WORK_DIR/filed.log"; fail "a result before $F existed"; }
touch "$F"
wait "$pf" || { cat "$WORK_DIR/filed.log"; fail "the bench failed after $F appeared"; }
grep -q "throughput" "$WORK_DIR/filed.log" || { cat "$WORK_DIR/filed.log"; fail "no result after $F appeared"; }
# A start file that never appears: an error naming it, within --sync-timeout.
if bench unstarted --no-load --start-file "$WORK_DIR/never" --sync-timeout 0.5; then
  fail "a run started without its start file"
fi
grep -q "never did not appear" "$WORK_DIR/unstarted.log" || { cat "$WORK_DIR/unstarted.log"; fail "the timeout does not name the start file"; }
pass "three compute blades started together after the load; combined line; timeout, abandoned group and reused name refused; a start file holds the run until it exists"

