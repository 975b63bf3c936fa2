#!/usr/bin/env python3
"""Writes one table of every claim against every rig it ran on.

    ae/plot/rigs.py --out FILE DIR [DIR ...]

Each DIR is the output folder of one ae/run.sh (its verdicts.json, which
ae/plot/summary.py writes beside index.md): e.g. a --local run, a --local
--apps-on-nic-model run and a --softroce run. The table has a row a claim
and a column a run, each cell that run's verdict. A claim is decided when at
least one run shows it or not (on whatever rig, modeled or not), or skipped
it for a stated reason; "no data", "not run here" and "cannot be shown on
shm" decide nothing. After writing FILE, exits 1 and names the claims that
no run decided, so a script can insist that every claim has a verdict.
"""

import argparse
import json
import os
import sys


def decided(verdict):
    return verdict.startswith(("shown", "not shown", "skipped"))


def load(folder):
    path = os.path.join(folder, "verdicts.json")
    try:
        with open(path) as f:
            run = json.load(f)
    except OSError as e:
        sys.exit("rigs.py: %s: %s (run ae/plot/summary.py --out %s first)" % (path, e.strerror, folder))
    except ValueError as e:
        sys.exit("rigs.py: %s: not JSON: %s" % (path, e))
    claims = run.get("claims")
    if not isinstance(claims, list) or not all(
            isinstance(c, dict) and all(isinstance(c.get(k), str) for k in ("figure", "claim", "verdict"))
            for c in claims):
        sys.exit("rigs.py: %s: expected \"claims\": a list of {figure, claim, verdict} strings" % path)
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the Markdown file to write")
    ap.add_argument("folders", nargs="+", metavar="DIR", help="output folders of ae/run.sh")
    args = ap.parse_args()
    runs = [(d, load(d)) for d in args.folders]

    order, cells = [], {}
    for i, (_, run) in enumerate(runs):
        for c in run["claims"]:
            key = (c["figure"], c["claim"])
            if key not in cells:
                order.append(key)
                cells[key] = [""] * len(runs)
            cells[key][i] = c["verdict"]

    base = os.path.dirname(os.path.abspath(args.out))
    lines = ["# The paper's claims on every rig", "",
             "One row a claim, one column a run of `ae/run.sh` (its summary is linked); each cell is that "
             "run's verdict, decided from its data by the rule its summary states. Written by "
             "`ae/plot/rigs.py`.", ""]
    for d, run in runs:
        lines.append("- [%s](%s): %s; source commit %s; started %s" % (
            os.path.basename(os.path.normpath(d)), os.path.relpath(os.path.join(d, "index.md"), base),
            run.get("rig", "?"), run.get("commit") or "unknown", run.get("started") or "unknown"))
    lines += ["", "| figure | claim | " + " | ".join(os.path.basename(os.path.normpath(d)) for d, _ in runs) + " |",
              "| --- | --- |" + " --- |" * len(runs)]
    open_claims = []
    for key in order:
        row = cells[key]
        lines.append("| %s | %s | %s |" % (key[0], key[1], " | ".join(
            ("**%s**" % v if decided(v) and not v.startswith("skipped") else v) or "(not in this run)" for v in row)))
        if not any(decided(v) for v in row):
            open_claims.append(key)
    lines += ["", "%d of %d claims have a verdict from at least one run." % (len(order) - len(open_claims),
                                                                           len(order))]
    if open_claims:
        lines += ["", "No run decided:"] + ["- %s: %s" % k for k in open_claims]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("rigs: %s" % args.out, file=sys.stderr)
    if open_claims:
        print("rigs.py: no run decided %d claim(s): %s" % (
            len(open_claims), "; ".join("%s: %s" % k for k in open_claims)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
