#!/usr/bin/env bash
# ae/run.sh --cluster HOSTS --dry-run on a hosts file naming localhost prints,
# per host and role, the commands it would send: backends (or test_rdma
# serving) on the memory host, benches on the compute host, results copied
# back. Bad input is refused with a message naming what is wrong.
source "$(dirname "$0")/ae_lib.sh"
hosts="$WORK_DIR/hosts.txt"
printf '# two roles on one host\nmemory localhost\ncompute localhost   # the benches\n' >"$hosts"

out=$("$RUN" --cluster "$hosts" --dry-run --quick --bin "$SMART_BIN" --out "$WORK_DIR/out" \
  --figure 8 --figure 13b --figure 10 --figure 12 2>&1) || { echo "$out"; fail "dry run exited non-zero"; }
[[ ! -e $WORK_DIR/out ]] || fail "a dry run wrote results"
echo "$out" >"$WORK_DIR/dry-run.txt"
python3 - "$SMART_BIN" "$WORK_DIR/dry-run.txt" <<'PY' || { head -20 "$WORK_DIR/dry-run.txt"; fail "dry-run commands are not as expected"; }
import re, sys
bin_dir = sys.argv[1]
lines = open(sys.argv[2]).read().splitlines()
roles = {"memory": [], "compute": [], "all": []}
for l in lines:
    m = re.match(r"^(memory|compute|all)\[([^\]]+)\]: (clush .*)$", l)
    if m:
        assert m.group(2) == "localhost", l
        roles[m.group(1)].append(m.group(3))
assert roles["all"], "no setup commands"
for want in ("hashtable_backend", "btree_backend", "smallbank_backend", "tatp_backend"):
    assert any(bin_dir + "/" + want in c for c in roles["memory"]), "no %s on the memory host" % want
assert any(re.search(re.escape(bin_dir) + r"/test_rdma --config \S+ --port \d+", c) for c in roles["memory"]), \
    "test_rdma does not serve on the memory host"
for c in roles["memory"]:
    assert "_bench" not in c, "a bench on the memory host: " + c
    assert "--rcopy" not in c
starts = [c for c in roles["memory"] if "nohup" in c]
stops = [c for c in roles["memory"] if re.search(r"p=\$\(cat \S+\.pid\) && kill \$p", c)]
assert len(starts) == len(stops) > 0, "%d backends started, %d stopped" % (len(starts), len(stops))
runs = [c for c in roles["compute"] if "timeout" in c]
for want in ("hashtable_bench", "btree_bench", "smallbank_bench", "tatp_bench", "test_rdma"):
    assert any(bin_dir + "/" + want in c for c in runs), "no %s on the compute host" % want
for c in runs:
    assert "_backend" not in c, "a backend on the compute host: " + c
    assert "--local" not in c, "a bench with an embedded blade in cluster mode: " + c
assert sum("--rcopy" in c for c in roles["compute"]) == len(runs), "results not copied back for every run"
# fig 8 quick: 4 series x 2 thread counts; 13b: 2 x 2; 10: 2 apps x 2 x 2; 12: 3 x 2;
# 12so (selected by "12") skipped: one compute host
points = [l for l in lines if l.startswith("# fig ")]
assert len(points) == 8 + 4 + 8 + 6, "%d points printed" % len(points)
assert any("fig 12so: skipped: needs several compute hosts" in l for l in lines), "12so not skipped on one host"
PY

# One compute host: the scale-out figures are skipped, saying why.
one=$("$RUN" --cluster "$hosts" --dry-run --bin "$SMART_BIN" --out "$WORK_DIR/out1" --figure 7 2>&1) ||
  { echo "$one"; fail "one-host dry run of fig 7 exited non-zero"; }
grep -q "fig 7: skipped: needs several compute hosts; this run has one" <<<"$one" ||
  { echo "$one"; fail "fig 7 on one compute host is not skipped"; }

# Two compute hosts: the scale-out points run the bench on both, started
# together through a start group of 2 after one of them loaded.
printf 'memory localhost\ncompute localhost\ncompute 127.0.0.1\n' >"$WORK_DIR/two.txt"
"$RUN" --cluster "$WORK_DIR/two.txt" --dry-run --bin "$SMART_BIN" --out "$WORK_DIR/out2" --figure 7 \
  >"$WORK_DIR/two.txt.out" 2>&1 || { cat "$WORK_DIR/two.txt.out"; fail "two-host dry run exited non-zero"; }
python3 - "$WORK_DIR/two.txt.out" <<'PY' || fail "scale-out points do not start their compute blades together"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
runs = [l for l in lines if re.match(r"^compute\[localhost,127\.0\.0\.1\]: clush .*hashtable_bench", l)]
assert runs, "no bench run on both compute hosts"
for l in runs:
    m = re.search(r"--sync (ae-[0-9a-f]{12}):(\d+)", l)
    assert m and m.group(2) == "2", "no --sync GROUP:2 in: " + l
    assert "--no-load" in l, "a scale-out run that loads again: " + l
groups = [re.search(r"--sync (\S+):", l).group(1) for l in runs]
assert len(set(groups)) == len(groups), "two points share a start group name"
PY

expect_refusal "unknown figure \"99\"" --cluster "$hosts" --dry-run --bin "$SMART_BIN" --figure 99
printf 'memory localhost\nstorage localhost\n' >"$WORK_DIR/bad.txt"
expect_refusal "bad.txt:2: expected 'memory HOST' or 'compute HOST', found 'storage localhost'" \
  --cluster "$WORK_DIR/bad.txt" --dry-run --bin "$SMART_BIN"
printf 'memory localhost\n' >"$WORK_DIR/nocompute.txt"
expect_refusal "no 'compute HOST' line" --cluster "$WORK_DIR/nocompute.txt" --dry-run --bin "$SMART_BIN"
mkdir "$WORK_DIR/emptybin"
expect_refusal "missing binary $WORK_DIR/emptybin/hashtable_bench" \
  --cluster "$hosts" --dry-run --bin "$WORK_DIR/emptybin" --figure 8
expect_refusal "hosts file '$WORK_DIR/none.txt' not found" --cluster "$WORK_DIR/none.txt" --dry-run
expect_refusal "--dry-run needs --cluster" --local --dry-run
expect_refusal "unknown argument '--bogus'" --local --bogus
pass "dry run on localhost names backends on the memory role and benches on the compute role; bad input refused"
