"""What each bench is: its binaries, its CSV columns, its result line.

The column names follow the upstream CSV layouts (REFERENCE sections 2, 5.8
and 6.2) plus the fields this project's benches append; a CSV written by the
collector starts with a header line of these names.
"""

import re

# name -> description of one bench
# The transaction benches' CSV line (SmallBank and TATP print the same fields).
DTX_COLUMNS = ["prefix", "threads", "coroutines", "attempted_mtxn_s", "committed_mtxn_s",
               "p50_us", "p99_us", "abort_rate", "rdma_ops_per_txn", "rdma_mops",
               "conflict_aborts", "logical_aborts", "failed"]

BENCHES = {
    "test_rdma": {
        "client": "test_rdma",
        "server": "test_rdma",          # with no arguments it serves
        "columns": ["prefix", "threads", "depth", "block_size", "bw_mb_s", "iops_m",
                    "conn_ms", "p50_us", "p99_us"],
        "throughput": "iops_m",
        "result": re.compile(r"^rdma-\w+: #threads=\d+, #depth=\d+, .*IOPS=[0-9.]+ M/s", re.M),
        "failed_column": None,
    },
    "hashtable": {
        "client": "hashtable_bench",
        "server": "hashtable_backend",
        "columns": ["name", "workload", "threads", "coroutines", "key_length", "value_length",
                    "max_key", "mops", "p50_us", "p99_us", "retries_per_op", "succeeded",
                    "not_found", "failed"],
        "throughput": "mops",
        "result": re.compile(r"^HashTable(MultiShard)?: workload = .*throughput = [0-9.]+ M", re.M),
        "failed_column": "failed",
    },
    "btree": {
        "client": "btree_bench",
        "server": "btree_backend",
        "columns": ["name", "workload", "threads", "coroutines", "key_length", "value_length",
                    "max_key", "mops", "p50_us", "p99_us", "retries_per_op", "succeeded",
                    "not_found", "failed", "round_trips_per_op"],
        "throughput": "mops",
        "result": re.compile(r"^BPlusTree: workload = .*throughput = [0-9.]+ M", re.M),
        "failed_column": "failed",
    },
    "smallbank": {
        "client": "smallbank_bench",
        "server": "smallbank_backend",
        "columns": DTX_COLUMNS,
        "throughput": "committed_mtxn_s",
        "result": re.compile(r"^dtx-smallbank: #thread = \d+, .*committed txn = [0-9.]+ M/s", re.M),
        "failed_column": "failed",
    },
    "tatp": {
        "client": "tatp_bench",
        "server": "tatp_backend",
        "columns": DTX_COLUMNS,
        "throughput": "committed_mtxn_s",
        "result": re.compile(r"^dtx-tatp: #thread = \d+, .*committed txn = [0-9.]+ M/s", re.M),
        "failed_column": "failed",
    },
}


def parse_row(bench, line):
    """One CSV line of BENCH as a dict of its columns (numbers as float where they parse)."""
    columns = BENCHES[bench]["columns"]
    fields = [f.strip() for f in line.strip().split(",")]
    if len(fields) != len(columns):
        raise ValueError("%s CSV line has %d fields, expected %d (%s): %r" %
                         (bench, len(fields), len(columns), ", ".join(columns), line.strip()))
    row = {}
    for name, value in zip(columns, fields):
        try:
            row[name] = float(value)
        except ValueError:
            row[name] = value
    return row


def data_lines(bench, text):
    """The CSV lines of BENCH in `text`, without blank lines and header lines (the benches write their column
    names first in a new file)."""
    first = BENCHES[bench]["columns"][0]
    return [l for l in text.splitlines() if l.strip() and l.split(",")[0].strip() != first]


def check_output(bench, log_text, csv_lines):
    """Why a finished run of BENCH is a failure, or None when it is not."""
    desc = BENCHES[bench]
    if not desc["result"].search(log_text):
        return "no result line in the output"
    if len(csv_lines) != 1:
        return "expected 1 CSV line, found %d" % len(csv_lines)
    try:
        row = parse_row(bench, csv_lines[0])
    except ValueError as e:
        return str(e)
    failed = desc["failed_column"]
    if failed and row.get(failed, 0) not in (0, 0.0):
        return "the bench reported %d failed operations" % int(row[failed])
    if not isinstance(row.get(desc["throughput"]), float) or row[desc["throughput"]] <= 0:
        return "zero throughput"
    return None


def merge_rows(bench, rows):
    """Rows of one point from several compute nodes as one row: rates add up,
    latencies and per-op ratios are averaged, counts add up."""
    if len(rows) == 1:
        return rows[0]
    desc = BENCHES[bench]
    sums = {desc["throughput"], "bw_mb_s", "attempted_mtxn_s", "rdma_mops", "succeeded",
            "not_found", "failed", "conflict_aborts", "logical_aborts"}
    means = {"p50_us", "p99_us", "retries_per_op", "round_trips_per_op", "abort_rate",
             "rdma_ops_per_txn", "conn_ms"}
    merged = dict(rows[0])
    for name in desc["columns"]:
        values = [r[name] for r in rows]
        if name in sums:
            merged[name] = sum(values)
        elif name in means:
            merged[name] = sum(values) / len(values)
    return merged


def format_row(bench, row):
    """A row dict back as a CSV line in the bench's layout."""
    out = []
    for name in BENCHES[bench]["columns"]:
        v = row[name]
        if isinstance(v, float):
            out.append(("%d" % v) if v == int(v) and name not in ("mops", "iops_m", "p50_us", "p99_us")
                       else ("%.3f" % v if name != "retries_per_op" else "%.4f" % v))
        else:
            out.append(str(v))
    return ", ".join(out)
