#!/usr/bin/env python3
"""Draws each collected figure (OUT/fig-<id>/points.csv) in the paper's layout,
with the paper's numbers beside the measured ones: OUT/fig-<id>/fig-<id>.png and .svg.

Each panel is a pair of axes: what this run measured (solid) and what the
paper reports for the same series (dashed, its own scale: 96 threads on
ConnectX-6 against a few threads on shm).
"""

import argparse
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

matplotlib.rcParams["svg.fonttype"] = "none"   # text as text: small SVGs

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "collect"))
sys.path.insert(0, HERE)
import benches  # noqa: E402
import figures  # noqa: E402
from points import load, throughput  # noqa: E402
from reference import LABEL, PAPER  # noqa: E402

# Per figure: the panels, each (data panel, column, title, paper panel).
PANELS = {
    "4": [("read", "iops_m", "READ", "read"), ("write", "iops_m", "WRITE", "write")],
    "14": [(None, "mops", "14a: throughput", "throughput"),
           (None, "retries_per_op", "14b: retries per op", "retries")],
    "12": [("ycsb-c", "mops", "ycsb-c", "ycsb-c"), ("ycsb-b", "mops", "ycsb-b", "ycsb-b"),
           ("ycsb-a", "mops", "ycsb-a", "ycsb-a"),
           ("ycsb-c", "round_trips_per_op", "ycsb-c: round trips per op", "-")],
    "10": [("smallbank", "committed_mtxn_s", "SmallBank", "smallbank"),
           ("tatp", "committed_mtxn_s", "TATP", "tatp")],
    "9": [("idle", "latency", "idle time after each op, 0 up", None),
          ("coroutines", "latency", "1-16 coroutines per thread, no idle", "-")],
    "11": [("idle", "latency", "idle time after each txn, 0 up", None),
           ("coroutines", "latency", "1-16 coroutines per thread, no idle", "-")],
}
YLABEL = {"iops_m": "Mops", "mops": "Mops", "committed_mtxn_s": "committed Mtxn/s",
          "retries_per_op": "retries per op", "round_trips_per_op": "round trips per op"}


def machine_label(out):
    try:
        with open(os.path.join(out, "run.json")) as f:
            run = json.load(f)
    except (OSError, ValueError):
        return "this run"
    where = "shm, one machine" if run.get("mode") == "local" else "cluster (%d memory, %d compute hosts)" % (
        len(run.get("memory_hosts") or []), len(run.get("compute_hosts") or []))
    return "measured: %s (%s cores), %s, %s profile" % (run.get("machine"), run.get("cores"), where,
                                                        run.get("profile"))


def modeled(out, fig):
    """Whether the figure ran on the shm transport's NIC model."""
    try:
        with open(os.path.join(out, "run.json")) as f:
            return bool(json.load(f).get("nic_model")) and fig.bench == "test_rdma"
    except (OSError, ValueError):
        return False


def panels_for(fig, data):
    if fig.id in PANELS:
        return PANELS[fig.id]
    metric = "latency" if fig.kind == "latency" else benches.BENCHES[
        "smallbank" if fig.bench == "smallbank" else fig.bench]["throughput"]
    names = []
    for panel, _ in data:
        if panel not in names:
            names.append(panel)
    for panel, _, _ in PAPER.get(fig.id, []):
        if panel not in names and not data:
            names.append(panel)
    return [(p, metric, p or "", p) for p in (names or [None])]


def draw_series(ax, points, color, label, dashed, latency):
    if latency:
        xs = [p[0] for p in points]
        ax.plot(xs, [p[1] for p in points], "--" if dashed else "-", marker="o", color=color, label=label + " P50")
        ax.plot(xs, [p[2] for p in points], ":", marker="^", color=color, label=label + " P99")
    else:
        ax.plot([p[0] for p in points], [p[1] for p in points], "--" if dashed else "-", marker="o",
                color=color, label=label)


def plot_figure(out, fig, quiet=False):
    data, order = load(out, fig.id)
    fdir = os.path.join(out, "fig-" + fig.id)
    if not data:
        if not quiet:
            print("plot: fig %s: nothing measured, no plot" % fig.id, file=sys.stderr)
        return None
    paper = PAPER.get(fig.id, [])
    for _, s, _ in paper:
        if s not in order:
            order.append(s)
    colors = {s: plt.cm.tab10(i % 10) for i, s in enumerate(order)}
    panels = panels_for(fig, data)
    latency = fig.kind == "latency"
    f, axes = plt.subplots(len(panels), 2, figsize=(11, 3.4 * len(panels)), squeeze=False)
    for i, (panel, column, title, paper_panel) in enumerate(panels):
        ax, pax = axes[i]
        for s in order:
            pts = data.get((panel, s))
            if not pts:
                continue
            if latency:
                tcol = "mops" if "mops" in pts[0][1] else "committed_mtxn_s"
                series = [(r[tcol], r["p50_us"], r["p99_us"]) for _, r in pts]
            else:
                series = [(x, r[column]) for x, r in pts]
            draw_series(ax, series, colors[s], s, False, latency)
        ax.set_title(("%s: " % title if title else "") + (
            "modeled (shm NIC model, ConnectX-6 fit scaled)" if modeled(out, fig) else "measured"), fontsize=10)
        ax.set_xlabel(fig.xlabel)
        ax.set_ylabel(YLABEL.get(column, fig.ylabel) if not latency else fig.ylabel)
        ax.grid(alpha=0.3)
        if latency:
            ax.set_yscale("log")   # P99 spikes of a shared machine would flatten the P50s
        ax.legend(fontsize=7)
        drew = False
        for ppanel, s, pts in paper:
            if ppanel != paper_panel:
                continue
            draw_series(pax, pts, colors[s], s, True, latency)
            drew = True
        pax.set_title(("%s: " % title if title else "") + LABEL, fontsize=10)
        pax.set_xlabel("Mops" if latency else {"threads": "threads (96 = 2x24 cores x 2 HT)"}.get(
            fig.xlabel, fig.xlabel))
        pax.set_ylabel(YLABEL.get(column, fig.ylabel) if not latency else fig.ylabel)
        pax.grid(alpha=0.3)
        if drew:
            pax.legend(fontsize=7, title=LABEL, title_fontsize=7)
        else:
            pax.text(0.5, 0.5, "no reference numbers", ha="center", va="center", transform=pax.transAxes)
    f.suptitle("%s\n%s" % (fig.title, machine_label(out)), fontsize=11)
    f.tight_layout()
    paths = []
    for ext in ("png", "svg"):
        path = os.path.join(fdir, "fig-%s.%s" % (fig.id, ext))
        f.savefig(path, dpi=90)
        paths.append(path)
    plt.close(f)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--figure", action="append", default=[])
    args = ap.parse_args()
    try:
        chosen = figures.select(args.figure)
    except ValueError as e:
        sys.exit("plot: %s" % e)
    for fid in chosen:
        paths = plot_figure(args.out, figures.BY_ID[fid])
        if paths:
            print("plot: fig %s: %s" % (fid, ", ".join(os.path.relpath(p, args.out) for p in paths)),
                  file=sys.stderr)


if __name__ == "__main__":
    main()
