"""Reads a collected figure's points (OUT/fig-<id>/points.csv) into series,
for the plots and the summary alike; needs nothing beyond the standard
library, so that the summary's rules can be checked without matplotlib."""

import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "collect"))
import benches  # noqa: E402


def load(out, fig_id):
    """{(panel, series): [(x, row), ...]} of the points recorded ok, and the series in order."""
    path = os.path.join(out, "fig-" + fig_id, "points.csv")
    data, order = {}, []
    if not os.path.exists(path):
        return data, order
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["status"] != "ok":
                continue
            row = benches.parse_row(r["bench"], r["row"])
            key = (r["panel"] or None, r["series"])
            data.setdefault(key, []).append((float(r["x"]), row))
            if r["series"] not in order:
                order.append(r["series"])
    # Repetitions of a point: the run with the median throughput stands for it.
    for key, v in data.items():
        by_x = {}
        for x, row in v:
            by_x.setdefault(x, []).append(row)
        medians = []
        for x, rows in by_x.items():
            rows.sort(key=throughput)
            medians.append((x, rows[(len(rows) - 1) // 2]))
        data[key] = sorted(medians, key=lambda p: p[0])
    return data, order


def throughput(row):
    for col in ("mops", "iops_m", "committed_mtxn_s"):
        if col in row:
            return row[col]
    return 0.0
