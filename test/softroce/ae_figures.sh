#!/bin/bash
# ae/run.sh --softroce --quick, inside the guest: the paper's figures over
# verbs on rxe, one backend and one bench process per point (cluster mode on
# localhost). Runs INSIDE the guest, alone or as a step of
# perftest_compare.sh:
#
#   test/softroce/guest.sh -- test/softroce/ae_figures.sh BUILD_DIR
#
# Figures 8 (SMART-HT), 10 (SMART-DTX) and 13b (test_rdma). Fails when a
# point fails, a series has no rows, the run is not recorded as Soft-RoCE,
# or a claim of the summary has no verdict marked (Soft-RoCE).
# Logs and results: $SOFTROCE_OUT/ae_figures/.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SOURCE_DIR=$(cd "$here/../.." && pwd -P)
BUILD_DIR=${1:?usage: ae_figures.sh BUILD_DIR}
source "$here/lib.sh"
bench_dirs ae_figures

t_ae_figures() {
    local out=$LOG_DIR/out
    rm -rf "$out"
    "$SOURCE_DIR/ae/run.sh" --softroce --quick --figure 8 --figure 10 --figure 13b \
        --bin "$BUILD_DIR/bin" --out "$out" --remote-dir "$WORK/remote" || { echo "ae/run.sh --softroce failed"; return 1; }
    python3 - "$out" <<'PY'
import csv, glob, json, os, sys
out = sys.argv[1]
run = json.load(open(os.path.join(out, "run.json")))
assert run.get("rig") == "softroce" and run.get("mode") == "cluster", "run.json: %s" % run
with open(os.path.join(out, "configs", "backend.json")) as f:
    assert json.load(f)["capacity"] <= 1024, "the guest's memory blades are not sized for it"
for fig in ("8", "10", "13b"):
    points = list(csv.DictReader(open(os.path.join(out, "fig-" + fig, "points.csv"))))
    bad = [(p["point"], p["status"], p["log"]) for p in points if p["status"] != "ok"]
    assert points and not bad, "fig %s: %s" % (fig, bad or "no points")
    rows = sum(len(open(f).read().splitlines()) - 1
               for f in glob.glob(os.path.join(out, "fig-" + fig, "*.csv")) if not f.endswith("points.csv"))
    assert rows == len(points), "fig %s: %d rows for %d points" % (fig, rows, len(points))
    print("fig %s: %d points over verbs, all ok" % (fig, len(points)))
index = open(os.path.join(out, "index.md")).read()
claims = [l for l in index.splitlines() if l.startswith("| ") and l.split("|")[1].strip() in ("8", "10", "13b")]
unmarked = [l for l in claims if "(Soft-RoCE)**" not in l]
assert claims and not unmarked, "claims without a Soft-RoCE verdict: %s" % (unmarked or "none listed")
print("%d claims decided, each marked Soft-RoCE" % len(claims))
PY
}

step ae_figures t_ae_figures
rm -rf "$WORK"
finish
