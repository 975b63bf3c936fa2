"""The paper's figures as sweeps (REFERENCE 7): which bench, which series
(techniques switched through SMART_OPTS and friends), which points.

A figure's points depend on the profile: `quick` (a smoke run of minutes),
`local` (one machine on shm, sized for 2 cores), `softroce` (verbs on
Soft-RoCE in a QEMU guest, sized for one boot), `cluster` (the paper's
settings on real hosts). A figure that cannot run in a mode says why and is
skipped, never faked.
"""

import re

ALL = "ThrdAwareAlloc WorkReqThrot ConflictAvoid SpecLookup"

PROFILES = {
    "quick": {
        "duration": 0.5, "rdma_duration": 0.4, "threads": [1, 2], "rdma_threads": [1, 2],
        "depths": [1, 8], "grid_threads": [2], "max_threads": 2, "zipfs": [0.0, 0.99],
        "datasets": ["ycsb-c"], "max_key": 20000, "rdma_pool_mib": 64,
        "accounts": 20000, "subscribers": 20000, "limit": 40, "rdma_limit": 20, "compute_nodes": [1],
        "latency_model": True, "repeats": 1, "intervals": [64], "dyn_depth": 64, "nic_model": True, "idles": [0, 64],
        "blade_mib": 512, "initiator_cache_mib": 64,
    },
    # Each point three times, in three passes over the figure, so that the
    # other work of a shared machine weighs on every series alike; the plots
    # and the summary take the median.
    "local": {
        "duration": 2, "rdma_duration": 2, "threads": [1, 2], "rdma_threads": [1, 2, 4],
        "depths": [1, 2, 4, 8, 16, 32], "grid_threads": [1, 2], "max_threads": 2,
        "zipfs": [0.0, 0.4, 0.8, 0.9, 0.95, 0.99],
        "datasets": ["ycsb-c", "ycsb-b", "ycsb-a"], "max_key": 1000000, "rdma_pool_mib": 256,
        "accounts": 100000, "subscribers": 100000, "limit": 90, "rdma_limit": 25, "compute_nodes": [1],
        "latency_model": True, "repeats": 3, "intervals": [8, 64, 512], "dyn_depth": 64, "nic_model": True,
        "idles": [0, 2, 8, 32, 128, 512],
    },
    # Over verbs on Soft-RoCE (rxe) inside the QEMU guest of
    # test/softroce/guest.sh (ae/run.sh --softroce): cluster mode on
    # localhost, a backend and a bench process per point, sized so that one
    # boot finishes in about 20 minutes on 2 cores (rxe carries out every
    # request in the guest's kernel: tens of thousands of operations a
    # second, not millions). Memory blades of 1 GiB and clients' caches of
    # 64 MiB fit a guest of 4 GiB.
    "softroce": {
        "duration": 2, "rdma_duration": 2, "threads": [1, 2], "rdma_threads": [1, 2],
        "depths": [1, 4, 16], "grid_threads": [1, 2], "max_threads": 2, "zipfs": [0.0, 0.99],
        "datasets": ["ycsb-c", "ycsb-a"], "max_key": 20000, "rdma_pool_mib": 64,
        "accounts": 20000, "subscribers": 20000, "limit": 90, "rdma_limit": 30, "compute_nodes": None,
        "latency_model": False, "repeats": 1, "intervals": [64], "dyn_depth": 64, "nic_model": False,
        "idles": [0, 32, 512], "blade_mib": 1024, "initiator_cache_mib": 64,
    },
    # The paper's settings (REFERENCE 7.1 and the artifact's common.sh); keys
    # are 10 M rather than 100 M so that a point does not spend minutes loading
    # (--max-key changes it).
    "cluster": {
        "duration": 10, "rdma_duration": 15, "threads": [1, 8, 16, 24, 32, 48, 64, 80, 96],
        "rdma_threads": [1, 8, 16, 32, 48, 64, 80, 96],
        "depths": [1, 4, 8, 16, 24, 32], "grid_threads": [12, 24, 36, 48, 60, 72, 84, 96],
        "max_threads": 96, "zipfs": [0.0, 0.4, 0.8, 0.9, 0.95, 0.99],
        "datasets": ["ycsb-c", "ycsb-b", "ycsb-a"], "max_key": 10000000, "rdma_pool_mib": 1024,
        "accounts": 100000, "subscribers": 100000, "limit": 600, "rdma_limit": 120, "compute_nodes": None,
        "latency_model": False, "repeats": 1, "intervals": [8, 16, 32, 64, 128, 256, 512, 1024, 2048],
        "dyn_depth": 64, "nic_model": False, "idles": [0, 4, 16, 64, 256, 1024, 4096, 8192],
    },
}


def slug(text):
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


class Point:
    """One run of one bench: a series of a figure at one x."""

    def __init__(self, fig, series, bench, threads, depth, x, opts=None, env=None, args=None,
                 variant=None, dataset=None, zipf=None, nodes=1, panel=None, rep=0):
        self.fig, self.series, self.bench = fig, series, bench
        self.threads, self.depth, self.x = threads, depth, x
        self.opts = opts                  # SMART_OPTS; None keeps the config (all on)
        self.env = dict(env or {})
        self.args = list(args or [])
        self.variant = variant            # smart_config variant ("shared_qp")
        self.dataset, self.zipf, self.nodes = dataset, zipf, nodes
        self.panel = panel                # sub-plot (dataset, op type, app)
        self.rep = rep                    # which repetition of the same point

    def repeated(self, rep):
        copy = Point(self.fig, self.series, self.bench, self.threads, self.depth, self.x)
        copy.__dict__.update(self.__dict__)
        copy.rep = rep
        return copy

    @property
    def id(self):
        parts = [slug(self.panel or ""), slug(self.series), "t%d" % self.threads, "d%d" % self.depth]
        if self.zipf is not None:
            parts.append("z%g" % self.zipf)
        if self.nodes != 1:
            parts.append("n%d" % self.nodes)
        if "IDLE_USEC" in self.env:
            parts.append("idle%s" % self.env["IDLE_USEC"])
        if "--fluctuate" in self.args:
            parts.append("i%s" % self.args[self.args.index("--fluctuate") + 1])
        if self.rep:
            parts.append("r%d" % (self.rep + 1))
        return "_".join(p for p in parts if p)

    @property
    def csv_name(self):
        return "%s.csv" % "_".join(p for p in (slug(self.panel or ""), slug(self.series)) if p)


class Figure:
    def __init__(self, id, title, bench, claim, xlabel, ylabel, points, notes="", local=None,
                 cluster=None, hardware_effect=None, kind="line"):
        self.id, self.title, self.bench, self.claim = id, title, bench, claim
        self.xlabel, self.ylabel, self.kind = xlabel, ylabel, kind
        self.points_fn = points
        self.notes = notes
        self.local_skip = local           # why the figure cannot run on one machine
        self.cluster_skip = cluster       # why it cannot run at all
        self.hardware_effect = hardware_effect  # what shm lacks to show the claim

    def skip_reason(self, mode):
        if self.cluster_skip:
            return self.cluster_skip
        if mode == "local" and self.local_skip:
            return self.local_skip
        return None

    def points(self, profile, repeats=None):
        """Every run of the figure: its points, once per repetition (repetitions outermost)."""
        p = PROFILES[profile] if isinstance(profile, str) else profile
        base = self.points_fn(p)
        return [pt.repeated(r) for r in range(repeats or p.get("repeats", 1)) for pt in base]


def _rdma(fig, series, op, threads, depth, x, opts, qp_num=-1, shared=False, panel=None):
    return Point(fig, series, "test_rdma", threads, depth, x, opts=opts,
                 env={"QP_NUM": str(qp_num), "TYPE": op}, variant="shared_qp" if shared else None,
                 panel=panel)


def fig3a(p):
    series = [("shared QP", 1, True, "None"), ("multiplexed QP (q=4)", -4, True, "None"),
              ("multiplexed QP (q=2)", -2, True, "None"), ("per-thread QP", -1, False, "None"),
              ("per-thread doorbell", -1, False, "ThrdAwareAlloc")]
    return [_rdma("3a", s, "read", t, 8, t, opts, q, shared)
            for s, q, shared, opts in series for t in p["rdma_threads"]]


def fig3b(p):
    return [_rdma("3b", s, "write", t, 8, t, opts)
            for s, opts in (("per-thread QP", "None"), ("per-thread doorbell", "ThrdAwareAlloc"))
            for t in p["rdma_threads"]]


def fig4(p):
    return [_rdma("4", "%d threads" % t, op, t, d, d, "ThrdAwareAlloc", panel=op)
            for op in ("read", "write") for t in p["grid_threads"] for d in p["depths"]]


def fig13a(p):
    series = [("per-thread QP", "None"), ("+ThrdResAlloc", "ThrdAwareAlloc"),
              ("+WorkReqThrot", "ThrdAwareAlloc WorkReqThrot")]
    return [_rdma("13a", s, "read", t, 16, t, opts) for s, opts in series for t in p["rdma_threads"]]


def fig13b(p):
    t = max(p["rdma_threads"])
    series = [("per-thread doorbell", "ThrdAwareAlloc"), ("+WorkReqThrot", "ThrdAwareAlloc WorkReqThrot")]
    return [_rdma("13b", s, "read", t, d, d, opts) for s, opts in series for d in p["depths"]]


def table1(p):
    """test_rdma_dyn's load: the active thread count redrawn every interval (test_rdma --fluctuate)."""
    t = max(p["rdma_threads"])
    series = [("per-thread doorbell", "ThrdAwareAlloc"), ("+WorkReqThrot", "ThrdAwareAlloc WorkReqThrot")]
    return [Point("t1", s, "test_rdma", t, p["dyn_depth"], i, opts=opts, env={"QP_NUM": "-1", "TYPE": "read"},
                  args=["--fluctuate", str(i)]) for s, opts in series for i in p["intervals"]]


def _ht(fig, series, dataset, threads, depth, x, opts, env=None, zipf=None, bench="hashtable", nodes=1,
        panel=None):
    return Point(fig, series, bench, threads, depth, x, opts=opts, env=env, dataset=dataset, zipf=zipf,
                 nodes=nodes, panel=panel)


HT_SERIES = [("RACE", "None"), ("+ThrdAwareAlloc", "ThrdAwareAlloc"),
             ("+WorkReqThrot", "ThrdAwareAlloc WorkReqThrot"), ("SMART-HT", ALL)]


def fig5a(p):
    return [_ht("5a", "RACE", "update-only", t, 8, t, "None") for t in p["threads"]]


def fig5b(p):
    return [_ht("5b", "RACE", "update-only", p["max_threads"], 8, z, "None", zipf=z) for z in p["zipfs"]]


def fig7(p):
    nodes = p["compute_nodes"] or [1]
    return [_ht("7", s, ds, p["max_threads"], 8, n, opts, nodes=n, panel=ds)
            for ds in p["datasets"] for s, opts in (HT_SERIES[0], HT_SERIES[3]) for n in nodes]


def fig8(p):
    return [_ht("8", s, ds, t, 8, t, opts, panel=ds) for ds in p["datasets"] for s, opts in HT_SERIES
            for t in p["threads"]]


# On shm a completion arrives as soon as the initiator polls, so there is no
# latency for coroutines to hide; the latency figures on shm add series with
# the shm transport's round-trip model (smart_config "latency" variant).
MODEL = " (shm +2us)"


def _latency_variants(p, series):
    out = [(s, opts, None) for s, opts in series]
    if p.get("latency_model"):
        out += [(s + MODEL, opts, "latency") for s, opts in series]
    return out


def _latency_curves(fig, bench, series, p, dataset=None):
    """Panel "idle": the paper's curve, depth 8 and IDLE_USEC from 0 up; panel
    "coroutines": no idle time, 1 to 16 coroutines per thread."""
    out = []
    for s, opts, v in _latency_variants(p, series):
        out += [Point(fig, s, bench, p["max_threads"], 8, i, opts=opts, dataset=dataset, variant=v,
                      env={"IDLE_USEC": str(i)}, panel="idle") for i in p["idles"]]
        out += [Point(fig, s, bench, p["max_threads"], d, d, opts=opts, dataset=dataset, variant=v,
                      panel="coroutines") for d in p["depths"] if d <= 16]
    return out


def fig9(p):
    return _latency_curves("9", "hashtable", (HT_SERIES[0], HT_SERIES[3]), p, dataset="ycsb-c")


CA_SERIES = [
    ("without ConflictAvoid", "ThrdAwareAlloc WorkReqThrot SpecLookup", {}),
    ("+Backoff", ALL, {"DISABLE_CORO_THROT": "1", "MAX_BACKOFF_CYCLE_LOG2": "-1"}),
    ("+DynBackoffLimit", ALL, {"DISABLE_CORO_THROT": "1"}),
    ("+CoroThrot", ALL, {}),
]


def fig14(p):
    return [_ht("14", s, "update-only", t, 8, t, opts, env=env) for s, opts, env in CA_SERIES
            for t in p["threads"]]


BT_SERIES = [("Sherman+", "None"), ("Sherman+ with SpecLookup", "SpecLookup"), ("SMART-BT", ALL)]


def fig12(p):
    return [_ht("12", s, ds, t, 8, t, opts, bench="btree", panel=ds) for ds in p["datasets"]
            for s, opts in BT_SERIES for t in p["threads"]]


def fig12so(p):
    nodes = p["compute_nodes"] or [1]
    return [_ht("12so", s, ds, min(p["max_threads"], 94), 8, n, opts, bench="btree", nodes=n, panel=ds)
            for ds in p["datasets"] for s, opts in (BT_SERIES[0], BT_SERIES[2]) for n in nodes]


DTX_SERIES = [("FORD+", "None"), ("SMART-DTX", ALL)]


def fig10(p):
    return [Point("10", s, app, t, 8, t, opts=opts, panel=app) for app in ("smallbank", "tatp")
            for s, opts in DTX_SERIES for t in p["threads"]]


def fig11(p):
    return _latency_curves("11", "smallbank", DTX_SERIES, p)


LATENCY_NOTES = ("Two panels. 'idle' is the paper's curve: 8 coroutines per thread, each idling IDLE_USEC "
                 "microseconds after each operation (0 up to the profile's largest), at the largest thread "
                 "count. 'coroutines' varies the work in flight instead (1 to 16 coroutines per thread, no idle "
                 "time). On shm a completion is there as soon as it is polled, so there is no latency to hide; "
                 "in local mode the series marked '(shm +2us)' run with the shm transport's round-trip model "
                 "(shm.latency_ns = 2000).")

SUPERSEDED_NOTE = ("This table's update does not retry when its slot CAS loses to another client's write of "
                   "the same key: it read the slot within the operation, so it takes effect just before that "
                   "write, where no reader sees it (superseded writes, docs/performance_notes_softroce.md). "
                   "Under update-only load nearly every lost CAS is of that kind, so retries per op stay near 0 "
                   "with or without the techniques, and the claims about retries cannot show here: the lost CAS "
                   "costs one request, not a retry.")

FIGURES = [
    Figure("3a", "Fig. 3a: 8-B READ, depth 8, QP sharing vs per-thread doorbell", "test_rdma",
           "per-thread doorbells scale where shared and multiplexed queue pairs do not",
           "threads", "Mops", fig3a,
           notes="Shared and multiplexed queue pairs use experimental.qp_sharing with QP_NUM=1, -4, -2.",
           hardware_effect="doorbell-register contention between threads is an RNIC effect; shm has no doorbell"),
    Figure("3b", "Fig. 3b: 8-B WRITE, depth 8, per-thread QP vs per-thread doorbell", "test_rdma",
           "per-thread doorbells scale WRITEs too", "threads", "Mops", fig3b,
           hardware_effect="doorbell-register contention is an RNIC effect; shm has no doorbell"),
    Figure("4", "Fig. 4: READ/WRITE throughput over threads x depth (per-thread doorbell)", "test_rdma",
           "too many outstanding work requests lower throughput (NIC cache thrashing)",
           "work requests in flight per thread", "Mops", fig4,
           hardware_effect="WQE/QP-context cache thrashing in the RNIC; shm has no NIC cache"),
    Figure("13a", "Fig. 13a: READ depth 16: per-thread QP, +ThrdResAlloc, +WorkReqThrot", "test_rdma",
           "thread-aware allocation and throttling each add throughput", "threads", "Mops", fig13a,
           hardware_effect="both techniques remove RNIC effects (doorbell contention, cache thrashing)"),
    Figure("13b", "Fig. 13b: READ at the largest thread count, depth 1-32, throttling off/on", "test_rdma",
           "work-request throttling keeps throughput at high depth", "work requests in flight per thread",
           "Mops", fig13b, hardware_effect="the drop at high depth is RNIC cache thrashing; shm has none"),
    Figure("t1", "Table 1: fluctuating load (test_rdma_dyn)", "test_rdma",
           "adaptive throttling follows a changing number of active threads", "interval (ms)", "Mops",
           table1, notes="Every interval the active thread count is drawn again from the upstream range "
           "(36 to 95 of 96, scaled to the threads used); test_rdma --fluctuate, as test_rdma_dyn.",
           hardware_effect="throttling pays off against RNIC cache thrashing; shm has no NIC cache"),
    Figure("5a", "Fig. 5a: RACE update-only over threads (zipf 0.99)", "hashtable",
           "CAS retries waste IOPS: retries per op grow with threads", "threads", "Mops", fig5a,
           notes=SUPERSEDED_NOTE),
    Figure("5b", "Fig. 5b: RACE update-only over zipf skew", "hashtable",
           "skew causes retries: throughput falls as zipf rises", "zipf theta", "Mops", fig5b),
    Figure("7", "Fig. 7: SMART-HT scale-out over compute nodes", "hashtable",
           "throughput scales with compute nodes", "compute nodes", "Mops", fig7,
           local="needs several compute hosts: run with --cluster"),
    Figure("8", "Fig. 8: SMART-HT over threads, techniques added one by one", "hashtable",
           "the techniques together beat RACE, and throughput scales with threads", "threads", "Mops", fig8),
    Figure("9", "Fig. 9: SMART-HT latency vs throughput (ycsb-c)", "hashtable",
           "coroutines hide latency: more work in flight, more throughput", "Mops", "latency (us)", fig9,
           notes=LATENCY_NOTES, kind="latency"),
    Figure("14", "Fig. 14: update-only, conflict avoidance step by step", "hashtable",
           "conflict avoidance cuts retries per op", "threads", "Mops", fig14, notes=SUPERSEDED_NOTE),
    Figure("12", "Fig. 12: SMART-BT over threads (scale-up)", "btree",
           "speculative lookup saves a round trip", "threads", "Mops", fig12),
    Figure("12so", "Fig. 12 (scale-out): SMART-BT over compute nodes", "btree",
           "throughput scales with compute nodes", "compute nodes", "Mops", fig12so,
           local="needs several compute hosts: run with --cluster"),
    Figure("10", "Fig. 10: SMART-DTX SmallBank and TATP over threads", "smallbank",
           "SMART-DTX commits more than FORD+, and throughput scales with threads", "threads",
           "committed Mtxn/s", fig10),
    Figure("11", "Fig. 11: SmallBank latency vs throughput", "smallbank",
           "coroutines hide latency: more work in flight, more throughput", "committed Mtxn/s",
           "latency (us)", fig11, notes=LATENCY_NOTES, kind="latency"),
]

BY_ID = {f.id: f for f in FIGURES}


def select(names):
    """Figure ids for the names given (`8`, `3a`; `3` means 3a and 3b); raises on an unknown one."""
    if not names:
        return [f.id for f in FIGURES]
    chosen = []
    for name in names:
        name = name.strip().lower().replace("fig", "").replace("table", "t")
        hits = [f.id for f in FIGURES if f.id == name or re.fullmatch(re.escape(name) + r"[a-z]+", f.id)]
        if not hits:
            raise ValueError("unknown figure \"%s\"; known: %s" % (name, ", ".join(f.id for f in FIGURES)))
        chosen += [h for h in hits if h not in chosen]
    return chosen
