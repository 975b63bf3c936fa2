"""Cluster mode: a hosts file with roles, commands sent with clustershell.

hosts file, one host a line (`#` starts a comment):

    memory  HOST     a memory blade: backends (test_rdma serving, *_backend) run here
    compute HOST     a compute blade: the benches run here

Every host must reach the others by the names given, have the binaries at the
same path (--bin) and accept clush (ssh) from this machine. Results and logs
are copied back with `clush --rcopy`.
"""

import hashlib
import os
import re
import shlex
import subprocess
import time

import benches

HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
BASE_PORT = 12400


class HostsError(Exception):
    pass


def parse_hosts(path):
    """(memory hosts, compute hosts) of a hosts file; raises HostsError naming the bad line."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise HostsError("cannot read hosts file %s: %s" % (path, e.strerror))
    memory, compute = [], []
    for n, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) != 2 or fields[0] not in ("memory", "compute") or not HOST_RE.match(fields[1]):
            raise HostsError("%s:%d: expected 'memory HOST' or 'compute HOST', found '%s'" % (path, n, line.strip()))
        (memory if fields[0] == "memory" else compute).append(fields[1])
    if not memory:
        raise HostsError("%s: no 'memory HOST' line: the backends need at least one memory host" % path)
    if not compute:
        raise HostsError("%s: no 'compute HOST' line: the benches need at least one compute host" % path)
    return memory, compute


def blades_for(bench, memory):
    """(host, port) of every memory blade a point of BENCH uses: test_rdma one, the
    data structures one shard per memory host, the transactions at least two
    blades (a backup each), several on one host when there are fewer hosts."""
    if bench == "test_rdma":
        count = 1
    elif bench in ("smallbank", "tatp"):
        count = max(2, len(memory))
    else:
        count = len(memory)
    offset = {"test_rdma": 0, "hashtable": 20, "btree": 40, "smallbank": 60, "tatp": 80}[bench]
    return [(memory[i % len(memory)], BASE_PORT + offset + i) for i in range(count)]


class ClusterExecutor:
    """Runs points on the hosts of a hosts file through clush, or prints the commands."""

    def __init__(self, memory, compute, bin_dir, remote_dir, local_configs, dry_run, printer=print):
        self.memory, self.compute = memory, compute
        self.bin, self.rdir = bin_dir, remote_dir
        self.local_configs = local_configs
        self.dry_run = dry_run
        self.print = printer
        self.rconf = os.path.join(remote_dir, "configs")

    # -- sending commands -------------------------------------------------

    def clush(self, role, hosts, remote, log=None, check=False):
        """Runs REMOTE (a shell command line) on HOSTS; returns the exit status."""
        cmd = ["clush", "-S", "-w", ",".join(hosts), "--", remote]
        return self._run(role, hosts, cmd, log, check)

    def copy(self, role, hosts, src, dest):
        cmd = ["clush", "-S", "-w", ",".join(hosts), "--copy", src, "--dest", dest]
        return self._run(role, hosts, cmd, None, True)

    def rcopy(self, role, hosts, paths, dest):
        cmd = ["clush", "-S", "-w", ",".join(hosts), "--rcopy"] + paths + ["--dest", dest]
        return self._run(role, hosts, cmd, None, False)

    def _run(self, role, hosts, cmd, log, check):
        if self.dry_run:
            self.print("%s[%s]: %s" % (role, ",".join(hosts), shlex.join(cmd)))
            return 0
        out = open(log, "a") if log else subprocess.DEVNULL
        try:
            rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT if log else None)
        finally:
            if log:
                out.close()
        if check and rc != 0:
            raise RuntimeError("%s failed with exit code %d" % (shlex.join(cmd), rc))
        return rc

    # -- the run ----------------------------------------------------------

    def setup(self):
        everyone = sorted(set(self.memory + self.compute))
        self.clush("all", everyone, "mkdir -p %s" % " ".join(
            shlex.quote(os.path.join(self.rdir, d)) for d in ("logs", "out")))
        self.copy("all", everyone, self.local_configs, self.rdir)

    def _server_command(self, bench, port):
        name = benches.BENCHES[bench]["server"]
        env = "SMART_CONFIG_PATH=%s" % shlex.quote(os.path.join(self.rconf, "smart_config.json"))
        if bench == "test_rdma":
            args = "--config %s --port %d" % (shlex.quote(os.path.join(self.rconf, "test_rdma.server.json")), port)
        else:
            args = "%s --port %d" % (shlex.quote(os.path.join(self.rconf, "backend.json")), port)
        log = os.path.join(self.rdir, "logs", "%s.%d.log" % (name, port))
        pid = os.path.join(self.rdir, "%s.%d.pid" % (name, port))
        return ("cd %s && (env %s nohup %s %s > %s 2>&1 < /dev/null & echo $! > %s)" %
                (shlex.quote(self.rdir), env, shlex.quote(os.path.join(self.bin, name)), args,
                 shlex.quote(log), shlex.quote(pid)), pid)

    def run_point(self, point, command, env, log_path, limit):
        """Runs one point: backends up, the bench on `point.nodes` compute hosts,
        rows and logs copied back, backends down. Returns (rc, log text, csv lines)."""
        blades = blades_for(point.bench, self.memory)
        started = []
        rc = 0
        nodes = self.compute[:point.nodes]
        try:
            for host, port in blades:
                remote, pid = self._server_command(point.bench, port)
                self.clush("memory", [host], remote, log_path, check=True)
                started.append((host, pid))
                # Ready when its port answers, and it is the process just
                # started that answers (not a predecessor still exiting).
                wait = ("for i in $(seq 300); do kill -0 $(cat %s) 2>/dev/null || break; "
                        "(exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null && exit 0; sleep 0.1; done; "
                        "echo 'memory blade on port %d did not start' >&2; exit 1" % (shlex.quote(pid), port, port))
                self.clush("memory", [host], wait, log_path, check=True)
            if len(nodes) < point.nodes:
                return 1, "only %d compute hosts for %d nodes" % (len(self.compute), point.nodes), []
            rcsv = os.path.join(self.rdir, "out", point.id + ".csv")
            rlog = os.path.join(self.rdir, "logs", point.id + ".log")
            bench_cmd = [a.replace("@CSV@", rcsv) for a in command]
            env = {k: v.replace("@CSV@", rcsv) for k, v in env.items()}
            envs = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(env.items()))
            if point.nodes > 1:
                # One node loads; then all run on the loaded structure.
                load = [a for a in bench_cmd]
                load[load.index("--dump-file") + 1] = ""
                load[load.index("--duration") + 1] = "0.5"
                if any(a.endswith("hashtable_bench") for a in load):
                    load.append("--sole-loader")  # the only node that loads
                self.clush("compute", nodes[:1], "cd %s && env %s timeout -k 5 %d %s" % (
                    shlex.quote(self.rdir), envs, limit, shlex.join(load)), log_path, check=True)
                bench_cmd.append("--no-load")
                # All start their timed run together (a barrier on memory
                # blade 0), so that the rates added up overlap in time.
                group = "ae-%s" % hashlib.sha1(("%s %f" % (point.id, time.time())).encode()).hexdigest()[:12]
                bench_cmd += ["--sync", "%s:%d" % (group, point.nodes)]
            remote = "cd %s && rm -f %s && env %s timeout -k 5 %d %s > %s 2>&1" % (
                shlex.quote(self.rdir), shlex.quote(rcsv), envs, limit, shlex.join(bench_cmd), shlex.quote(rlog))
            rc = self.clush("compute", nodes, remote, log_path)
            gathered = os.path.join(os.path.dirname(log_path), "gathered")
            if not self.dry_run:
                os.makedirs(gathered, exist_ok=True)
            self.rcopy("compute", nodes, [rcsv, rlog], gathered)
        except RuntimeError as e:
            # A backend that did not start, a load that failed: this point
            # fails, the sweep goes on.
            return 1, "%s\n" % e, []
        finally:
            for host, pid in started:
                # Wait until it is gone, so that the next point's backend
                # gets the port.
                self.clush("memory", [host], "p=$(cat %s) && kill $p && rm -f %s && for i in $(seq 100); do "
                           "kill -0 $p 2>/dev/null || exit 0; sleep 0.1; done; kill -9 $p" % (
                               shlex.quote(pid), shlex.quote(pid)), log_path)
        if self.dry_run:
            return 0, "", []
        text, lines = "", []
        for host in nodes:
            base = os.path.join(gathered, point.id)
            for path, is_csv in ((base + ".csv." + host, True), (base + ".log." + host, False)):
                try:
                    with open(path) as f:
                        content = f.read()
                except OSError:
                    continue
                if is_csv:
                    lines += benches.data_lines(point.bench, content)
                else:
                    text += "---- %s\n%s" % (host, content)
                os.unlink(path)
        if len(lines) == len(nodes) and len(nodes) > 1:
            try:
                rows = [benches.parse_row(point.bench, l) for l in lines]
                lines = [benches.format_row(point.bench, benches.merge_rows(point.bench, rows))]
            except ValueError:
                pass
        return rc, text, lines
