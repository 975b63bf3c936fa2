#!/bin/bash
# Self-test of the Soft-RoCE guest; runs INSIDE the guest:
#
#   test/softroce/guest.sh -- "$PWD/test/softroce/selftest.sh"
#
# Checks that rxe0 works with the stock tools (ibv_devinfo, ibv_rc_pingpong,
# perftest) and runs the probe in probe/ (compiled here with the host's gcc)
# that reports the rxe facts the project depends on. Logs go to
# $SOFTROCE_OUT/selftest/. Ends with an "N passed, N failed" line.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
if [ -z "${SOFTROCE_GUEST:-}" ]; then
    echo "selftest.sh: run me inside the guest: $here/guest.sh -- $here/selftest.sh" >&2
    exit 2
fi
missing=
for t in ibv_devinfo ibv_rc_pingpong ib_read_bw ib_atomic_bw gcc ss timeout; do
    command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
[ -e /usr/include/infiniband/verbs.h ] || missing="$missing infiniband/verbs.h"
if [ -n "$missing" ]; then
    echo "selftest.sh: SKIP: missing:$missing" >&2
    echo "selftest.sh: install with: apt-get install -y ibverbs-utils perftest gcc libibverbs-dev iproute2 coreutils" >&2
    exit 77
fi
dev=${SOFTROCE_DEV:-rxe0}
gid=${SOFTROCE_GID_INDEX:-1}
logs=$SOFTROCE_OUT/selftest
mkdir -p "$logs"

passed=0 failed=0
failures=()
now() { date +%s.%N; }
dt() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }

# step NAME FUNCTION: run FUNCTION, its output to the console and NAME.log.
step() {
    local name=$1 t0 rc; shift
    echo
    echo "=== $name"
    t0=$(now)
    "$@" > >(tee "$logs/$name.log") 2>&1
    rc=$?
    sleep 0.2 # let tee drain
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); echo "--- PASS $name ($(dt "$t0") s)"
    else
        failed=$((failed + 1)); failures+=("$name"); echo "--- FAIL $name (exit $rc, $(dt "$t0") s)"
    fi
}

wait_listen() { # PORT PID: wait until PID listens on TCP PORT
    local i
    for i in $(seq 1 300); do
        ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# client_server PORT LIMIT CMD...: run CMD as a server, then as a client of
# 127.0.0.1; both must succeed within LIMIT seconds. The server's output is
# shown after the client's.
client_server() {
    local port=$1 limit=$2 srv_log rc_c rc_s; shift 2
    srv_log=$(mktemp /run/server.XXXXXX)
    timeout "$limit" "$@" > "$srv_log" 2>&1 &
    local spid=$!
    if ! wait_listen "$port" "$spid"; then
        echo "server did not start listening on port $port"; cat "$srv_log"
        kill "$spid" 2>/dev/null; wait "$spid"; return 1
    fi
    timeout "$limit" "$@" 127.0.0.1; rc_c=$?
    wait "$spid"; rc_s=$?
    echo "--- server side:"; cat "$srv_log"; rm -f "$srv_log"
    echo "client exit $rc_c, server exit $rc_s"
    [ $rc_c -eq 0 ] && [ $rc_s -eq 0 ]
}

t_devinfo() {
    ibv_devinfo -d "$dev" -v > /run/devinfo.txt 2>&1 || { cat /run/devinfo.txt; return 1; }
    grep -E "hca_id|transport|state:|active_mtu|max_qp:|max_qp_rd_atom|max_qp_init_rd_atom|atomic_cap|max_mr_size|GID\[ *$gid\]" /run/devinfo.txt
    grep -q PORT_ACTIVE /run/devinfo.txt
}

t_pingpong() {
    client_server 18515 60 ibv_rc_pingpong -d "$dev" -g "$gid" -p 18515 -n 200
}

perf_summary() { # LOG: print the result row of a perftest bandwidth run
    awk '/#bytes/ {h=1; print; next} h && NF>=5 && $1 ~ /^[0-9]+$/ {print; exit}' "$1"
}

t_read_bw() {
    client_server 18516 120 ib_read_bw -d "$dev" -x "$gid" -s 8 -n 2000 -F -p 18516 > /run/rbw.txt 2>&1
    local rc=$?
    cat /run/rbw.txt
    echo "key figures:"
    grep -m1 -i "outstand" /run/rbw.txt
    perf_summary /run/rbw.txt
    return $rc
}

t_atomic_bw() {
    client_server 18517 120 ib_atomic_bw -d "$dev" -x "$gid" -n 2000 -F -p 18517 > /run/abw.txt 2>&1
    local rc=$?
    cat /run/abw.txt
    echo "key figures:"
    grep -m1 -i "outstand" /run/abw.txt
    perf_summary /run/abw.txt
    return $rc
}

# The probe is compiled with the host's gcc (inside the guest, which is slow
# under emulation) and kept in the cache dir, keyed by its source.
probe_src=$here/probe/rxe_probe.c
probe=${SOFTROCE_CACHE:-$SOFTROCE_OUT}/probe/rxe_probe-$(sha256sum "$probe_src" | cut -c1-12)
t_build_probe() {
    if [ -x "$probe" ]; then echo "using cached $probe"; return 0; fi
    mkdir -p "${probe%/*}" &&
        gcc -O2 -Wall -o "$probe.tmp.$$" "$probe_src" -libverbs &&
        mv -f "$probe.tmp.$$" "$probe" &&
        echo "built $probe"
}
probe_run() { [ -x "$probe" ] || { echo "probe not built"; return 1; }; timeout 300 "$probe" -d "$dev" -g "$gid" "$@"; }
t_probe_attrs() { probe_run attrs; }
t_probe_loopback() { probe_run loopback; }
t_probe_hugepage() { probe_run hugepage 8; }
# rxe treats retry_cnt=7 as "retry forever" (like rnr_retry=7), so that case
# gives up after 10 s; 6 and 3 show the finite behaviour.
t_probe_peer_kill_r7() { probe_run peer-kill 14 7 10; }
t_probe_peer_kill_r6() { probe_run peer-kill 14 6 60; }
t_probe_peer_kill_r3() { probe_run peer-kill 12 3 60; }

echo "selftest: kernel $(uname -r), device $dev, gid index $gid, $(nproc) cpus"
step devinfo t_devinfo
step rc_pingpong t_pingpong
step read_bw_8b t_read_bw
step atomic_bw t_atomic_bw
step build_probe t_build_probe
step probe_attrs t_probe_attrs
step probe_loopback t_probe_loopback
step probe_hugepage t_probe_hugepage
step probe_peer_kill_t14_r7 t_probe_peer_kill_r7
step probe_peer_kill_t14_r6 t_probe_peer_kill_r6
step probe_peer_kill_t12_r3 t_probe_peer_kill_r3

echo
[ ${#failures[@]} -eq 0 ] || echo "selftest: failed steps: ${failures[*]}"
echo "selftest: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
