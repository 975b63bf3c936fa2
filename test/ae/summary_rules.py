#!/usr/bin/env python3
"""Checks of ae/plot/summary.py's rules on made-up data: the doorbell claims
(Figs. 3a, 3b) compare at the most threads that fit the machine's cores, and
at the largest x measured when the cores are unknown."""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["SMART_SOURCE"], "ae", "plot"))
import summary  # noqa: E402


def series(points):
    return [(x, {"mops": m}) for x, m in points]


def ratios(fid, data, cores):
    (claim, rule, fn), = summary.rules_for(fid, cores)
    return [r for r, _ in fn(data, True)], rule


def main():
    # Past the 2 cores, the per-thread QP catches up (the threads take turns).
    data = {(None, "per-thread doorbell"): series([(1, 2.4), (2, 2.4), (4, 2.4)]),
            (None, "per-thread QP"): series([(1, 2.4), (2, 1.6), (4, 2.4)]),
            (None, "shared QP"): series([(1, 2.4), (2, 1.2), (4, 2.4)])}
    failures = []
    for fid, den in (("3b", 1.6), ("3a", 1.2)):
        got, rule = ratios(fid, data, 2)
        if got != [2.4 / den]:
            failures.append("fig %s with 2 cores: ratios %s, want [%.3f] (at 2 threads)" % (fid, got, 2.4 / den))
        if "2 cores" not in rule:
            failures.append("fig %s: the rule does not say it stops at the cores: %s" % (fid, rule))
        got, _ = ratios(fid, data, None)
        if got != [1.0]:
            failures.append("fig %s, cores unknown: ratios %s, want [1.0] (at 4 threads)" % (fid, got))
    # A machine with fewer cores than the fewest threads measured has no point to compare.
    got, _ = ratios("3b", {k: series([(4, 2.4)]) for k in data}, 2)
    if got != [None]:
        failures.append("fig 3b, only x beyond the cores: ratios %s, want [None]" % got)
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("PASS: doorbell claims compare at the most threads that fit the cores")


if __name__ == "__main__":
    main()
