#!/usr/bin/env python3
"""Combines the CSV lines that several compute blades wrote for one run into
one line in the bench's own layout: rates and counts add up, latencies and
per-operation ratios are averaged.

    tools/combine_results.py BENCH FILE...

BENCH is test_rdma, hashtable, btree, smallbank or tatp. Each FILE holds the
CSV line of one compute blade (its last line that is not a header is used),
e.g. the --dump-file of each bench started with --sync GROUP:N. The combined
line goes to standard output; a file without such a line, or lines of
different workloads or thread counts, is an error (exit 1); bad arguments
exit 2.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ae", "collect"))
import benches  # noqa: E402

# Columns that must agree for lines to describe one run.
SAME = ("prefix", "name", "workload", "threads", "depth", "coroutines", "key_length", "value_length", "max_key",
        "block_size")


def last_row(bench, path):
    with open(path) as f:
        lines = benches.data_lines(bench, f.read())
    if not lines:
        raise ValueError("%s: no %s CSV line" % (path, bench))
    return benches.parse_row(bench, lines[-1])


def main(argv):
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if len(argv) < 2 else sys.stdout)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    bench, paths = argv[0], argv[1:]
    if bench not in benches.BENCHES:
        print("combine_results: unknown bench \"%s\"; known: %s" % (bench, ", ".join(sorted(benches.BENCHES))),
              file=sys.stderr)
        return 2
    try:
        rows = [last_row(bench, p) for p in paths]
    except (OSError, ValueError) as e:
        print("combine_results: %s" % e, file=sys.stderr)
        return 1
    for name in SAME:
        values = {r[name] for r in rows if name in r}
        if len(values) > 1:
            print("combine_results: the lines disagree on %s (%s): not one run" % (
                name, ", ".join(str(v) for v in sorted(values, key=str))), file=sys.stderr)
            return 1
    print(benches.format_row(bench, benches.merge_rows(bench, rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
