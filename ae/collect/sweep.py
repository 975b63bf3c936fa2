#!/usr/bin/env python3
"""Runs the sweeps of the paper's figures and records each point.

Per figure, in OUT/fig-<id>/:
  <panel>_<series>.csv   the bench's CSV rows in the upstream column layout, after a header line
  points.csv             every point run: id, series, x, status (ok, or failed: why), seconds, log, row
  SKIPPED                why the figure was not run (application or knob missing, needs a cluster)
Logs of every point are in OUT/logs/<fig>/<point>.log. A point already recorded
as ok is not run again; a figure whose points are all ok is complete.
"""

import argparse
import csv
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benches  # noqa: E402
import cluster  # noqa: E402
import figures  # noqa: E402

POINT_FIELDS = ["point", "panel", "series", "x", "threads", "depth", "bench", "status", "seconds", "log", "row"]


def die(message):
    print("run.sh: " + message, file=sys.stderr)
    sys.exit(2)


class Progress:
    """A line per point on a terminal; quiet in a pipe (failures and summaries always)."""

    def __init__(self):
        self.tty = sys.stderr.isatty()

    def point(self, text):
        if self.tty:
            print(text, file=sys.stderr, flush=True)

    def always(self, text):
        print(text, file=sys.stderr, flush=True)


# The NIC model fitted to ConnectX-6 at 96 threads (docs/nic_model.md).
CX6 = {"rate_mops": 111.1, "wr_cache_entries": 1152, "wr_miss_ns": 14.5, "shared_doorbells": 12,
       "doorbell_handoff_ns": 600}


# The device rate the scaled model is held to at most, in M requests/s: well
# below what the client CPU drives with the local thread counts (about 4-5 M
# on 2 cores), so that the modelled device, not the CPU, is the bottleneck,
# as the NIC is in the paper's runs.
LOCAL_DEVICE_MOPS = 2.5


def nic_model_config(threads):
    """The ConnectX-6 fit scaled from 96 threads to `threads`: device time per request times k = 96/threads
    (or more, to keep the device below LOCAL_DEVICE_MOPS), the cache divided by k, one shared doorbell per
    8 threads (at least one), whose handoff keeps each thread's share of doorbell time."""
    k = max(96.0 / threads, CX6["rate_mops"] / LOCAL_DEVICE_MOPS)
    doorbells = max(1, int(round(CX6["shared_doorbells"] * threads / 96.0)))
    per_thread_share = CX6["shared_doorbells"] / 96.0 / CX6["doorbell_handoff_ns"]  # doorbell rings per ns
    return {"enabled": True, "rate_mops": round(CX6["rate_mops"] / k, 3),
            "wr_cache_entries": max(1, int(round(CX6["wr_cache_entries"] / k))),
            "wr_miss_ns": round(CX6["wr_miss_ns"] * k, 1), "shared_doorbells": doorbells,
            "doorbell_handoff_ns": round(doorbells / (threads * per_thread_share), 1)}


def source_commit(config_dir):
    """The commit of the source tree that holds config_dir, '+changes' after it when the tree differs from
    it, or None outside a git checkout."""
    root = os.path.dirname(os.path.abspath(config_dir))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=20)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=20)
        return head.stdout.strip() + (" +changes" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def uses_nic_model(point, args, profile):
    return (point.bench == "test_rdma" or args.apps_on_nic_model) and args.mode == "local" and args.nic_model \
        and profile.get("nic_model")


def write_configs(out, config_dir, args, profile, memory=None):
    """The configs every point reads, derived from config_dir, written to OUT/configs."""
    cdir = os.path.join(out, "configs")
    os.makedirs(cdir, exist_ok=True)

    def load(name):
        path = os.path.join(config_dir, name)
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            die("cannot read config %s: %s" % (path, e))

    def save(name, obj):
        with open(os.path.join(cdir, name), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")

    smart = load("smart_config.json")
    if args.mode == "local":
        smart["transport"] = "shm"
    if profile.get("initiator_cache_mib"):
        smart["initiator_cache_size"] = profile["initiator_cache_mib"]
    smart.setdefault("shm", {})["latency_ns"] = args.shm_latency_ns
    save("smart_config.json", smart)
    shared = json.loads(json.dumps(smart))
    shared.setdefault("experimental", {})["qp_sharing"] = True
    save("smart_config.shared_qp.json", shared)
    modeled = json.loads(json.dumps(smart))
    modeled["shm"]["latency_ns"] = 2000
    save("smart_config.latency.json", modeled)
    if args.mode == "local":
        # The test_rdma figures with the NIC model: its round trip, and the
        # ConnectX-6 fit scaled to the most threads they run.
        # The application figures' +2us series on the model are the model
        # itself (its round trip is 2 us).
        for name, base in (("nic", smart), ("shared_qp.nic", shared), ("latency.nic", smart)):
            nic = json.loads(json.dumps(base))
            nic["shm"]["latency_ns"] = 2000
            nic["shm"]["nic_model"] = nic_model_config(max(profile["rdma_threads"]))
            save("smart_config.%s.json" % name, nic)

    rdma = load("test_rdma.json")
    rdma.update({"memory_size": profile["rdma_pool_mib"], "dump_file_path": "", "servers": []})
    save("test_rdma.json", rdma)
    ds = load("datastructure.json")
    ds.update({"max_key": args.max_key or profile["max_key"], "dump_file_path": "", "memory_servers": []})
    save("datastructure.json", ds)
    tx = load("transaction.json")
    tx.update({"dump_file_path": "", "memory_servers": []})
    save("transaction.json", tx)
    if memory is not None:
        backend = load("backend.json")
        if profile.get("blade_mib"):
            backend["capacity"] = profile["blade_mib"]
        save("backend.json", backend)
        server = dict(rdma, port=cluster.blades_for("test_rdma", memory)[0][1])
        save("test_rdma.server.json", server)
        host, port = cluster.blades_for("test_rdma", memory)[0]
        save("test_rdma.cluster.json", dict(rdma, servers=[host], port=port))
        for bench in ("hashtable", "btree"):
            save("datastructure.%s.json" % bench, dict(ds, memory_servers=[
                {"hostname": h, "port": p} for h, p in cluster.blades_for(bench, memory)]))
        for bench in ("smallbank", "tatp"):
            save("transaction.%s.json" % bench, dict(tx, memory_servers=[
                {"hostname": h, "port": p} for h, p in cluster.blades_for(bench, memory)]))
    return cdir


def point_command(point, args, profile, bin_dir, cdir):
    """(argv, env) of one point; @CSV@ stands for the CSV file it appends to."""
    variants = [v for v in (point.variant, "nic" if uses_nic_model(point, args, profile) else None) if v]
    env = {"SMART_CONFIG_PATH": os.path.join(cdir, "smart_config%s.json" % "".join("." + v for v in variants))}
    if point.opts is not None:
        env["SMART_OPTS"] = point.opts
    env.update(point.env)
    duration = args.duration or (profile["rdma_duration"] if point.bench == "test_rdma" else profile["duration"])
    exe = os.path.join(bin_dir, benches.BENCHES[point.bench]["client"])
    suffix = "" if args.mode == "local" else ".cluster"
    if point.bench == "test_rdma":
        env["TEST_RDMA_CONF"] = os.path.join(cdir, "test_rdma%s.json" % suffix)
        env["DUMP_FILE_PATH"] = "@CSV@"
        argv = [exe] + (["--local"] if args.mode == "local" else []) + [
            "--duration", str(duration)] + point.args + [str(point.threads), str(point.depth)]
        return argv, env
    if point.bench in ("hashtable", "btree"):
        env["APP_CONFIG_PATH"] = os.path.join(cdir, "datastructure%s.json" % (
            "" if args.mode == "local" else "." + point.bench))
        argv = [exe, str(point.threads), str(point.depth), "--dataset", point.dataset, "--duration", str(duration),
                "--dump-file", "@CSV@", "--quiet"]
        if point.zipf is not None:
            argv += ["--zipf", str(point.zipf)]
        return argv, env
    env["APP_CONFIG_PATH"] = os.path.join(cdir, "transaction%s.json" % (
        "" if args.mode == "local" else "." + point.bench))
    argv = [exe, str(point.threads), str(point.depth), "--duration", str(duration), "--dump-file", "@CSV@",
            "--quiet"]
    argv += ["--accounts", str(profile["accounts"])] if point.bench == "smallbank" else \
        ["--subscribers", str(profile["subscribers"])]
    return argv, env


def run_local(point, argv, env, log_path, csv_path, limit):
    """Runs one point on this machine. Returns (rc, log text, csv lines)."""
    full_env = dict(os.environ)
    for k in ("SMART_OPTS", "DISABLE_CORO_THROT", "MAX_BACKOFF_CYCLE_LOG2", "QP_NUM", "TYPE", "BLKSIZE",
              "ZIPFIAN_CONST", "DATASET_PATH", "MEMORY_NODES", "SMART_FAULTS", "IDLE_USEC"):
        full_env.pop(k, None)
    full_env.update({k: v.replace("@CSV@", csv_path) for k, v in env.items()})
    argv = [a.replace("@CSV@", csv_path) for a in argv]
    if os.path.exists(csv_path):
        os.unlink(csv_path)
    with open(log_path, "w") as log:
        log.write("$ %s %s\n" % (" ".join("%s=%s" % kv for kv in sorted(env.items())), " ".join(argv)))
        log.flush()
        rc = subprocess.call(["timeout", "-k", "5", str(limit)] + argv, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=full_env)
    with open(log_path) as f:
        text = f.read()
    lines = []
    if os.path.exists(csv_path):
        with open(csv_path) as f:
            lines = benches.data_lines(point.bench, f.read())
        os.unlink(csv_path)
    return rc, text, lines


def read_points(path):
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        return {r["point"]: r for r in csv.DictReader(f)}


def append_csv(path, fields, row):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(fields)
        w.writerow(row)


def append_series(path, columns, line):
    """A bench's CSV line as it wrote it (upstream layout), after a header line of its columns."""
    new = not os.path.exists(path)
    with open(path, "a") as f:
        if new:
            f.write(", ".join(columns) + "\n")
        f.write(line.strip() + "\n")


def run_figure(fig, args, profile, bin_dir, cdir, executor, progress):
    fdir = os.path.join(args.out, "fig-" + fig.id)
    reason = fig.skip_reason(args.mode)
    if not reason and fig.local_skip and len(profile["compute_nodes"] or []) < 2:
        # Scale-out over compute hosts, on a cluster of one compute host
        # (--softroce, or a hosts file with one 'compute' line).
        reason = "needs several compute hosts; this run has one"
    points = [] if reason else fig.points(profile, args.repeat)
    if not args.dry_run:
        if args.force and os.path.isdir(fdir):
            shutil.rmtree(fdir)
        os.makedirs(fdir, exist_ok=True)
    if reason:
        progress.always("fig %s: skipped: %s" % (fig.id, reason))
        if not args.dry_run:
            with open(os.path.join(fdir, "SKIPPED"), "w") as f:
                f.write(reason + "\n")
        return 0
    if not args.dry_run and os.path.exists(os.path.join(fdir, "SKIPPED")):
        os.unlink(os.path.join(fdir, "SKIPPED"))
    done = read_points(os.path.join(fdir, "points.csv"))
    todo = [p for p in points if done.get(p.id, {}).get("status") != "ok"]
    if not todo:
        progress.always("fig %s: complete (%d points), not run again (--force runs it again)" % (fig.id, len(points)))
        return 0
    ldir = os.path.join(args.out, "logs", "fig-" + fig.id)
    if not args.dry_run:
        os.makedirs(ldir, exist_ok=True)
    start, failed = time.time(), 0
    for n, point in enumerate(todo, 1):
        limit = args.timeout or profile["rdma_limit" if point.bench == "test_rdma" else "limit"]
        argv, env = point_command(point, args, profile, bin_dir, cdir)
        log_path = os.path.join(ldir, point.id + ".log")
        if args.dry_run:
            executor.print("# fig %s point %s (%s)" % (fig.id, point.id, point.series))
            executor.run_point(point, argv, env, log_path, limit)
            continue
        t0 = time.time()
        if executor is None:
            rc, text, lines = run_local(point, argv, env, log_path, os.path.join(fdir, ".point.csv"), limit)
        else:
            rc, text, lines = executor.run_point(point, argv, env, log_path, limit)
            with open(log_path, "a") as f:
                f.write(text)
        seconds = time.time() - t0
        if rc in (124, 137):
            why = "timed out after %d s" % limit
        elif rc != 0:
            why = "exit code %d" % rc
        else:
            why = benches.check_output(point.bench, text, lines)
        rel_log = os.path.relpath(log_path, args.out)
        status = "ok" if why is None else "failed: " + why
        row_text = lines[0] if (why is None and lines) else ""
        if why is None:
            append_series(os.path.join(fdir, point.csv_name), benches.BENCHES[point.bench]["columns"], row_text)
        else:
            failed += 1
        append_csv(os.path.join(fdir, "points.csv"), POINT_FIELDS,
                   [point.id, point.panel or "", point.series, point.x, point.threads, point.depth, point.bench,
                    status, "%.1f" % seconds, rel_log, row_text])
        if why is None:
            row = benches.parse_row(point.bench, row_text)
            tput = row[benches.BENCHES[point.bench]["throughput"]]
            progress.point("[fig %s %d/%d] %s %s t=%d d=%d x=%s: %.3f (%.1f s)" % (
                fig.id, n, len(todo), point.panel or "", point.series, point.threads, point.depth, point.x,
                tput, seconds))
        else:
            progress.always("[fig %s %d/%d] %s %s: FAILED (%s), log %s" % (
                fig.id, n, len(todo), point.panel or "", point.series, why, log_path))
    if not args.dry_run:
        progress.always("fig %s: %d points run, %d failed, %.0f s" % (fig.id, len(todo), failed, time.time() - start))
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["local", "cluster"], required=True)
    ap.add_argument("--profile", choices=sorted(figures.PROFILES), required=True)
    ap.add_argument("--rig", default=None,
                    help="what the run is on, for the summary (default: the mode; softroce: the guest's rxe)")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--config-dir", required=True)
    ap.add_argument("--figure", action="append", default=[])
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--hosts")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--remote-dir", default="/tmp/smart-ae")
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--timeout", type=int, default=None)
    ap.add_argument("--max-key", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--shm-latency-ns", type=int, default=0)
    ap.add_argument("--no-nic-model", dest="nic_model", action="store_false",
                    help="local mode: test_rdma figures on plain shm instead of the NIC model")
    ap.add_argument("--apps-on-nic-model", action="store_true",
                    help="local mode: the application figures on the NIC model too")
    args = ap.parse_args()
    if args.apps_on_nic_model and not args.nic_model:
        die("--apps-on-nic-model and --no-nic-model contradict each other")
    try:
        chosen = figures.select(args.figure)
    except ValueError as e:
        die("%s" % e)
    profile = figures.PROFILES[args.profile]
    bin_dir = os.path.abspath(args.bin)
    needed = sorted({figures.BY_ID[f].bench for f in chosen} | ({"tatp"} if "10" in chosen else set()))
    for bench in needed:
        names = [benches.BENCHES[bench]["client"]] + ([benches.BENCHES[bench]["server"]]
                                                      if args.mode == "cluster" else [])
        for name in names:
            exe = os.path.join(bin_dir, name)
            if not os.access(exe, os.X_OK):
                die("missing binary %s (build it, or point --bin at a directory that has it)" % exe)
    memory = compute = None
    if args.mode == "cluster":
        try:
            memory, compute = cluster.parse_hosts(args.hosts)
        except cluster.HostsError as e:
            die("%s" % e)
        if not args.dry_run and shutil.which("clush") is None:
            die("--cluster needs clush (Debian package clustershell: apt-get install clustershell)")
        if profile["compute_nodes"] is None:
            profile = dict(profile, compute_nodes=list(range(1, len(compute) + 1)))
    out = args.out
    if args.dry_run:
        cdir = os.path.join(args.remote_dir, "configs")
    else:
        os.makedirs(out, exist_ok=True)
        cdir = write_configs(out, args.config_dir, args, profile, memory)
        with open(os.path.join(out, "run.json"), "w") as f:
            json.dump({"machine": socket.gethostname().split(".")[0], "cores": os.cpu_count(),
                       "cpu": platform.processor() or platform.machine(), "mode": args.mode,
                       "rig": args.rig or args.mode, "commit": source_commit(args.config_dir),
                       "profile": args.profile, "bin": bin_dir, "shm_latency_ns": args.shm_latency_ns,
                       "nic_model": nic_model_config(max(profile["rdma_threads"]))
                       if args.mode == "local" and args.nic_model and profile.get("nic_model") else None,
                       "nic_model_apps": bool(args.apps_on_nic_model and args.mode == "local" and args.nic_model
                                              and profile.get("nic_model")),
                       "repeats": args.repeat or profile.get("repeats", 1),
                       "duration_s": args.duration or profile["duration"],
                       "memory_hosts": memory, "compute_hosts": compute,
                       "load_average_at_start": os.getloadavg()[0],
                       "started": time.strftime("%Y-%m-%d %H:%M:%S")}, f, indent=2)
    executor = None
    if args.mode == "cluster":
        executor = cluster.ClusterExecutor(memory, compute, bin_dir, args.remote_dir,
                                           os.path.join(out, "configs"), args.dry_run)
        executor.setup()
        cdir = os.path.join(args.remote_dir, "configs")
    progress = Progress()
    failed = 0
    for fid in chosen:
        failed += run_figure(figures.BY_ID[fid], args, profile, bin_dir, cdir, executor, progress)
    return 0 if failed == 0 else 3


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("run.sh: interrupted; run again to resume where it stopped", file=sys.stderr)
        sys.exit(130)
