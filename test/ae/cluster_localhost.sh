#!/usr/bin/env bash
# ae/run.sh --cluster on a hosts file naming localhost, for real: a stand-in
# clush (ae/collect/local-clush/clush) runs the commands on this machine, so backends
# start and stop as separate processes, the benches reach them over loopback
# TCP, and results and logs are copied back. Every point must be ok, the
# CSVs complete, and no backend left running.
source "$(dirname "$0")/ae_lib.sh"
export PATH="$SMART_SOURCE/ae/collect/local-clush:$PATH"
hosts="$WORK_DIR/hosts.txt"
printf 'memory localhost\ncompute localhost\n' >"$hosts"
out="$WORK_DIR/out" remote="$WORK_DIR/remote"

"$RUN" --cluster "$hosts" --quick --figure 13b --figure 5a --bin "$SMART_BIN" --out "$out" \
  --remote-dir "$remote" >"$WORK_DIR/run.log" 2>&1 || { cat "$WORK_DIR/run.log"; fail "cluster run exited non-zero"; }
python3 - "$out" <<'PY' || fail "cluster results are not as expected"
import csv, glob, os, sys
out = sys.argv[1]
for fig, n, columns in (("13b", 4, 9), ("5a", 2, 14)):
    points = list(csv.DictReader(open(os.path.join(out, "fig-" + fig, "points.csv"))))
    assert len(points) == n and all(p["status"] == "ok" for p in points), \
        "fig %s: %s" % (fig, [(p["point"], p["status"]) for p in points])
    rows = 0
    for f in glob.glob(os.path.join(out, "fig-" + fig, "*.csv")):
        if not f.endswith("points.csv"):
            lines = open(f).read().splitlines()
            assert all(len(l.split(",")) == columns for l in lines), f
            rows += len(lines) - 1
    assert rows == n, "fig %s: %d rows" % (fig, rows)
    log = open(os.path.join(out, points[0]["log"])).read()
    assert "---- localhost" in log, "the bench's log was not copied back: " + log[:300]
PY
grep -q '"transport": "auto"' "$out/configs/smart_config.json" || fail "cluster configs should keep the transport"
grep -q '"hostname": "localhost"' "$out/configs/datastructure.hashtable.json" || fail "memory_servers do not name the memory host"
leftover=$(ls "$remote"/*.pid 2>/dev/null || true)
[[ -z $leftover ]] || fail "backends left running: $leftover"
pass "cluster mode on localhost: backends and benches as separate processes, results copied back"
