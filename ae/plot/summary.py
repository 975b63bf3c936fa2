#!/usr/bin/env python3
"""Writes OUT/index.md: every figure with its plot, the claim it supports, and
whether this run shows it, decided from the data by the rule stated beside it.

A claim about a hardware effect shm does not have (doorbell contention, NIC
cache thrashing) is reported as one this run cannot show when the run was on
shm; the measured ratio is still given, as what the machine does.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "collect"))
sys.path.insert(0, HERE)
import csv  # noqa: E402

import benches  # noqa: E402
import figures  # noqa: E402
from points import load  # noqa: E402

THRESHOLD = 1.05
MODEL = figures.MODEL


def tput(row):
    for col in ("mops", "iops_m", "committed_mtxn_s"):
        if col in row:
            return row[col]
    raise KeyError("no throughput column")


def value(data, panel, series, col=None, at="max", x_max=None):
    """The column (throughput when None) of a series at its largest (or smallest) x; with x_max, the
    largest x not above it."""
    pts = data.get((panel, series))
    if pts and x_max is not None:
        pts = [(x, r) for x, r in pts if x <= x_max]
    if not pts:
        return None
    x, row = pts[-1] if at == "max" else pts[0]
    v = tput(row) if col is None else row.get(col)
    return v


def peak_over_last(data, panel, series):
    pts = data.get((panel, series))
    if not pts:
        return None
    return max(tput(r) for _, r in pts), tput(pts[-1][1])


def ratio_claim(num, den, what):
    """(ratio, text) of num/den; None when a side is missing."""
    if num is None or den is None:
        return None, "no data for %s (points failed or not run)" % what
    if den == 0:
        if num == 0:
            # Measured, and nothing to compare: the quantity never grew.
            return 1.0, "%s: 0 / 0 (none in either)" % what
        return float("inf"), "%s: %.4g / 0" % (what, num)
    return num / den, "%s = %.4g / %.4g = %.2f" % (what, num, den, num / den)


def panels(data):
    return sorted({p for p, _ in data}, key=lambda p: (p is None, p or ""))


def series_names(data):
    return {s for _, s in data}


def pick(data, base, local):
    """The latency-model variant of a series on shm when it was run."""
    return base + MODEL if local and (base + MODEL) in series_names(data) else base


def series_ratio(claim, rule, num, den, what, x_max=None):
    """A rule comparing two series of a one-panel figure at its largest x (not above x_max when given):
    (claim, rule text, function)."""
    return (claim, "%s > %.2f" % (rule, THRESHOLD),
            lambda d, l: [ratio_claim(value(d, None, num, x_max=x_max), value(d, None, den, x_max=x_max), what)])


# Each rule: (claim, rule text, function(data, local) -> list of (ratio, text)).
# cores: the threads that can run at once on the machine that ran the benches
# (None when unknown or spread over hosts).
def rules_for(fid, cores=None):
    most = "at the largest x measured"
    # Threads contend for a doorbell only while they run at the same time:
    # beyond the cores, the scheduler takes turns between them and a thread
    # rings alone for a whole time slice, so the doorbell claims compare at
    # the most threads that fit the cores.
    together = ("at the most threads not above the machine's %d cores (beyond them threads take turns and do "
                "not ring at once)" % cores) if cores else most
    if fid == "3a":
        return [series_ratio("per-thread doorbells scale where shared queue pairs do not",
                             "per-thread doorbell / shared QP throughput %s" % together, "per-thread doorbell",
                             "shared QP", "per-thread doorbell / shared QP", x_max=cores)]
    if fid == "3b":
        return [series_ratio("per-thread doorbells scale WRITEs", "per-thread doorbell / per-thread QP %s" % together,
                             "per-thread doorbell", "per-thread QP", "doorbell / QP", x_max=cores)]
    if fid == "4":
        def f(d, l):
            out = []
            for p in panels(d):
                top = max((s for pp, s in d if pp == p), key=lambda s: int(s.split()[0]))
                pl = peak_over_last(d, p, top)
                out.append(ratio_claim(pl and pl[0], pl and pl[1], "%s %s: peak / deepest" % (p, top)))
            return out
        return [("too many outstanding work requests lower throughput",
                 "at the most threads, peak over depths / throughput at the deepest > %.2f" % THRESHOLD, f)]
    if fid == "13a":
        return [series_ratio("thread-aware allocation and throttling add throughput",
                             "+WorkReqThrot / per-thread QP %s" % most, "+WorkReqThrot", "per-thread QP",
                             "+WorkReqThrot / per-thread QP")]
    if fid == "13b":
        return [series_ratio("work-request throttling keeps throughput at high depth",
                             "+WorkReqThrot / per-thread doorbell at the deepest depth", "+WorkReqThrot",
                             "per-thread doorbell", "+WorkReqThrot / doorbell")]
    if fid == "t1":
        def f(d, l):
            throttled = dict(d.get((None, "+WorkReqThrot"), []))
            out = [ratio_claim(tput(throttled[x]) if x in throttled else None, tput(row),
                               "interval %s ms: +WorkReqThrot / doorbell" % x)
                   for x, row in d.get((None, "per-thread doorbell"), [])]
            return out or [ratio_claim(None, None, "+WorkReqThrot / doorbell")]
        return [("adaptive throttling follows a changing number of active threads",
                 "+WorkReqThrot / per-thread doorbell at every interval > %.2f" % THRESHOLD, f)]
    if fid == "5a":
        return [("CAS retries waste IOPS: retries per op grow with threads",
                 "RACE retries per op at the most threads / at 1 thread > %.2f" % THRESHOLD,
                 lambda d, l: [ratio_claim(value(d, None, "RACE", "retries_per_op"),
                                           value(d, None, "RACE", "retries_per_op", "min"), "retries most / fewest threads")])]
    if fid == "5b":
        return [("skew causes retries: throughput falls as zipf rises",
                 "RACE throughput at zipf 0 / at the highest zipf > %.2f" % THRESHOLD,
                 lambda d, l: [ratio_claim(value(d, None, "RACE", at="min"), value(d, None, "RACE"),
                                           "zipf 0 / zipf max")])]
    if fid in ("7", "12so"):
        name = "SMART-HT" if fid == "7" else "SMART-BT"
        return [("throughput scales with compute nodes",
                 "%s throughput at the most nodes / at 1 node > %.2f, every workload" % (name, THRESHOLD),
                 lambda d, l: [ratio_claim(value(d, p, name), value(d, p, name, at="min"), "%s most / 1 node" % p)
                               for p in panels(d)])]
    if fid == "8":
        return [("SMART-HT beats RACE (the techniques together)",
                 "SMART-HT / RACE %s > %.2f, every workload" % (most, THRESHOLD),
                 lambda d, l: [ratio_claim(value(d, p, "SMART-HT"), value(d, p, "RACE"), "%s SMART-HT / RACE" % p)
                               for p in panels(d)]),
                ("speculative lookup saves a round trip",
                 "ycsb-c SMART-HT / +WorkReqThrot %s > %.2f (they differ by SpecLookup and ConflictAvoid, "
                 "and ycsb-c has no conflicts)" % (most, THRESHOLD),
                 lambda d, l: [ratio_claim(value(d, "ycsb-c", "SMART-HT"), value(d, "ycsb-c", "+WorkReqThrot"),
                                           "ycsb-c SMART-HT / +WorkReqThrot")]),
                ("throughput scales with threads",
                 "SMART-HT at the most threads / at 1 thread > %.2f, every workload" % THRESHOLD,
                 lambda d, l: [ratio_claim(value(d, p, "SMART-HT"), value(d, p, "SMART-HT", at="min"),
                                           "%s most / 1 thread" % p) for p in panels(d)])]
    if fid in ("9", "11"):
        name = "SMART-HT" if fid == "9" else "SMART-DTX"
        base = "RACE" if fid == "9" else "FORD+"
        return [("coroutines hide latency",
                 "%s throughput at 16 / at 1 coroutine per thread > %.2f (on shm: the +2us latency model)" % (
                     name, THRESHOLD),
                 lambda d, l: [ratio_claim(value(d, "coroutines", pick(d, name, l)),
                                           value(d, "coroutines", pick(d, name, l), at="min"),
                                           "%s most / 1 coroutine" % pick(d, name, l))]),
                ("%s sustains more load than %s" % (name, base),
                 "%s / %s throughput with no idle time > %.2f (on shm: the +2us latency model)" % (
                     name, base, THRESHOLD),
                 lambda d, l: [ratio_claim(value(d, "idle", pick(d, name, l), at="min"),
                                           value(d, "idle", pick(d, base, l), at="min"),
                                           "%s / %s at idle 0" % (pick(d, name, l), pick(d, base, l)))])]
    if fid == "14":
        return [("conflict avoidance cuts retries per op",
                 "retries per op without ConflictAvoid / with it (+CoroThrot) %s > %.2f" % (most, THRESHOLD),
                 lambda d, l: [ratio_claim(value(d, None, "without ConflictAvoid", "retries_per_op"),
                                           value(d, None, "+CoroThrot", "retries_per_op"), "retries off / on")])]
    if fid == "12":
        def spec(d, l):
            r = ratio_claim(value(d, "ycsb-c", "Sherman+ with SpecLookup"), value(d, "ycsb-c", "Sherman+"),
                            "ycsb-c with / without SpecLookup")
            rt = (value(d, "ycsb-c", "Sherman+", "round_trips_per_op"),
                  value(d, "ycsb-c", "Sherman+ with SpecLookup", "round_trips_per_op"))
            if None not in rt:
                r = (r[0], r[1] + " (round trips per op %.3f without, %.3f with: the index cache already "
                     "reaches a leaf in one READ; a speculative hit reads one 64-B line instead of the 1 KiB leaf)"
                     % rt)
            return [r]
        return [("speculative lookup makes a lookup cheaper",
                 "ycsb-c throughput of Sherman+ with SpecLookup / Sherman+ %s > %.2f" % (most, THRESHOLD), spec),
                ("SMART-BT beats Sherman+", "SMART-BT / Sherman+ %s > %.2f, every workload" % (most, THRESHOLD),
                 lambda d, l: [ratio_claim(value(d, p, "SMART-BT"), value(d, p, "Sherman+"), "%s SMART-BT / Sherman+" % p)
                               for p in panels(d)])]
    if fid == "10":
        return [("SMART-DTX commits more than FORD+", "SMART-DTX / FORD+ %s > %.2f, both benchmarks" % (most, THRESHOLD),
                 lambda d, l: [ratio_claim(value(d, p, "SMART-DTX"), value(d, p, "FORD+"), "%s SMART-DTX / FORD+" % p)
                               for p in panels(d)]),
                ("throughput scales with threads", "SMART-DTX at the most threads / at 1 thread > %.2f" % THRESHOLD,
                 lambda d, l: [ratio_claim(value(d, p, "SMART-DTX"), value(d, p, "SMART-DTX", at="min"),
                                           "%s most / 1 thread" % p) for p in panels(d)])]
    return []


def verdict(results, hardware, local, modeled=False, softroce=False):
    ratios = [r for r, _ in results]
    detail = "; ".join(t for _, t in results)
    if hardware and local and not modeled and not softroce:
        return "cannot be shown on shm", "%s: a hardware effect this run has no model of. Measured (what this " \
            "machine does): %s" % (hardware, detail)
    if not results or any(r is None for r in ratios):
        return "no data", detail or "nothing measured"
    outcome = "shown" if all(r > THRESHOLD for r in ratios) else "not shown"
    if softroce:
        return outcome + " (Soft-RoCE)", (
            "over rxe, a software NIC in the guest's kernel, which has only in part what the claim is about "
            "(%s): %s" % (hardware, detail) if hardware else "over verbs on rxe: %s" % detail)
    if local and modeled:
        return outcome + " (modeled)", "with the shm transport's NIC model, not hardware: %s" % detail
    return outcome, detail


def point_counts(out, fid):
    path = os.path.join(out, "fig-" + fid, "points.csv")
    ok, failed = 0, []
    if os.path.exists(path):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["status"] == "ok":
                    ok += 1
                else:
                    failed.append(r)
    # A point that failed and then succeeded on a later run counts once, as ok.
    oks = set()
    if os.path.exists(path):
        with open(path, newline="") as f:
            oks = {r["point"] for r in csv.DictReader(f) if r["status"] == "ok"}
    failed = [r for r in failed if r["point"] not in oks]
    return ok, failed


def runs_per_point(out):
    """The most runs recorded ok for one point (repetitions have ids ending _rN)."""
    import re
    most = 1
    for fig in figures.FIGURES:
        path = os.path.join(out, "fig-" + fig.id, "points.csv")
        if not os.path.exists(path):
            continue
        counts = {}
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["status"] == "ok":
                    base = re.sub(r"_r\d+$", "", r["point"])
                    counts[base] = counts.get(base, 0) + 1
        most = max([most] + list(counts.values()))
    return most


def rig_label(run):
    """What a run ran on, in a few words: a column heading beside other rigs."""
    if run.get("rig") == "softroce":
        return "Soft-RoCE (rxe, verbs)"
    if run.get("mode") == "local":
        if run.get("nic_model_apps"):
            return "shm, every figure on the NIC model"
        return "shm (test_rdma figures on the NIC model)" if run.get("nic_model") else "shm"
    return "verbs, %s" % run.get("mode", "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = args.out
    try:
        with open(os.path.join(out, "run.json")) as f:
            run = json.load(f)
    except (OSError, ValueError):
        run = {}
    local = run.get("mode") == "local"
    softroce = run.get("rig") == "softroce"
    # Between hosts, the runner's cores say nothing of the compute hosts'.
    cores = run.get("cores") if local or softroce else None
    rig = run.get("rig") or run.get("mode", "?")
    lines = ["# Reproducing the SMART paper: %s, %s" % (run.get("machine", "?"), rig), ""]
    lines += ["- machine: %s, %s cores; mode: %s (%s); profile: %s; started %s" % (
        run.get("machine"), run.get("cores"), rig,
        "shm, memory blades inside each bench" if local else
        "verbs on Soft-RoCE (rxe) in a QEMU guest, a backend and a bench process per point" if softroce else
        "verbs between hosts",
        run.get("profile"), run.get("started")) + (
            "; source commit %s" % run["commit"] if run.get("commit") else "") + (
            "; load average %.1f at the start" % run["load_average_at_start"] if "load_average_at_start" in run else ""),
              "- each point ran %d time(s)%s; with several runs the plots and verdicts use the run with the "
              "median throughput (every run is in the CSVs)" % (
                  runs_per_point(out), ", %s s each" % run["duration_s"] if "duration_s" in run else ""),
              ""]
    if local and run.get("nic_model"):
        nic = run["nic_model"]
        lines += ["On shm there is no NIC. The doorbell and throttling figures (3a, 3b, 4, 13a, 13b, Table 1)%s "
                  "therefore ran with the shm transport's NIC model (docs/nic_model.md): the ConnectX-6 fit "
                  "scaled to %s threads (%.3g M requests/s, %d cached work requests, +%.4g ns a miss, %d shared "
                  "doorbell(s), %.4g ns a handoff, 2 us round trip). Their verdicts are marked **modeled**: "
                  "they show what the model does, not what a NIC does." % (
                      " and, in this run, the application figures too" if run.get("nic_model_apps") else "",
                      round(96 * nic["rate_mops"] / 111.1), nic["rate_mops"], nic["wr_cache_entries"],
                      nic["wr_miss_ns"], nic["shared_doorbells"], nic["doorbell_handoff_ns"]), ""]
    if softroce:
        lines += ["Soft-RoCE is the kernel's software RoCE device: the real verbs path (queue pairs, doorbells "
                  "rung through the provider, completions from a completion queue), with every request carried "
                  "out by the guest's CPUs, so a run does tens of thousands of operations a second. It has no "
                  "on-chip cache of work requests to thrash and no doorbell registers; claims about those are "
                  "decided by the rule all the same and say so. Verdicts are marked **Soft-RoCE**.", ""]
    if local:
        lines += ["Without a NIC model, shm has no doorbell register shared between threads, no NIC cache for "
                  "outstanding work requests to thrash, and a completion is there as soon as it is polled. "
                  "Figures run on plain shm show what this machine does, not the paper's hardware effect; "
                  "their claims are marked as ones this run cannot show. Claims about software effects (CAS retries, conflict avoidance, speculative "
                  "lookup, coroutines, thread scaling) are decided from the data by the rule given "
                  "(a ratio above %.2f). Threads are few (the machine has %s cores), so 'the most threads' "
                  "is a handful, not the paper's 96." % (THRESHOLD, run.get("cores")), ""]
    table = ["| figure | claim | rule | verdict |", "| --- | --- | --- | --- |"]
    sections = []
    # What ae/plot/rigs.py puts beside other rigs' runs: one entry a claim.
    claims = []
    for fig in figures.FIGURES:
        fdir = os.path.join(out, "fig-" + fig.id)
        if not os.path.isdir(fdir):
            continue
        skipped = os.path.join(fdir, "SKIPPED")
        sec = ["## %s" % fig.title, ""]
        if os.path.exists(skipped):
            with open(skipped) as f:
                why = f.read().strip()
            table.append("| %s | %s | | skipped: %s |" % (fig.id, fig.claim, why))
            claims.append({"figure": fig.id, "claim": fig.claim, "verdict": "skipped: " + why})
            sec += ["Skipped: %s." % why, ""]
            sections += sec
            continue
        if not os.path.exists(os.path.join(fdir, "points.csv")):
            # Plots or CSVs left from elsewhere, but no point run into this
            # folder: not a run that measured nothing.
            for claim, rule, _ in rules_for(fig.id, cores):
                table.append("| %s | %s | %s | not run here |" % (fig.id, claim, rule))
                claims.append({"figure": fig.id, "claim": claim, "verdict": "not run here"})
            sections += sec + ["Not run into this folder (it has no points.csv): `ae/run.sh --figure %s "
                               "--out %s` runs it." % (fig.id, out), ""]
            continue
        data, _ = load(out, fig.id)
        ok, failed = point_counts(out, fig.id)
        if os.path.exists(os.path.join(fdir, "fig-%s.png" % fig.id)):
            sec += ["![fig %s](fig-%s/fig-%s.png)" % (fig.id, fig.id, fig.id), "",
                    "([SVG](fig-%s/fig-%s.svg); data: `fig-%s/*.csv`, points in `fig-%s/points.csv`)" % (
                        fig.id, fig.id, fig.id, fig.id), ""]
        if fig.notes:
            sec += ["Notes: " + fig.notes, ""]
        sec.append("Points: %d ok, %d failed." % (ok, len(failed)))
        for r in failed:
            sec.append("- failed: %s (%s): %s; log `%s`" % (r["point"], r["series"], r["status"], r["log"]))
        sec.append("")
        for claim, rule, fn in rules_for(fig.id, cores):
            v, detail = verdict(fn(data, local), fig.hardware_effect, local,
                                modeled=bool(run.get("nic_model")) and (
                                    fig.bench == "test_rdma" or bool(run.get("nic_model_apps"))), softroce=softroce)
            table.append("| %s | %s | %s | **%s** |" % (fig.id, claim, rule, v))
            claims.append({"figure": fig.id, "claim": claim, "verdict": v})
            sec += ["- Claim: %s. Rule: %s. **%s**: %s." % (claim, rule, v[:1].upper() + v[1:], detail)]
        sec.append("")
        sections += sec
    lines += table + [""] + sections
    with open(os.path.join(out, "index.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "verdicts.json"), "w") as f:
        json.dump({"rig": rig_label(run), "commit": run.get("commit"), "started": run.get("started"),
                   "claims": claims}, f, indent=1)
        f.write("\n")
    print("summary: %s" % os.path.join(out, "index.md"), file=sys.stderr)


if __name__ == "__main__":
    main()
