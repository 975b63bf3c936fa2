#!/bin/bash
# Stage 2 of the Soft-RoCE guest, PID 1 after switch_root onto the host's root
# file system (mounted over virtio-9p). Sets up the rxe0 device on loopback,
# runs the job that guest.sh described in /run/softroce/job/job.sh, records its
# exit status in the output dir and powers the guest off.
#
# Only the output dir (and whatever the command itself writes) is written on
# the host; /run, /dev, /proc, /sys and /dev/shm are guest-private.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
BB=/run/softroce/bin/busybox

off() {
    sync
    $BB poweroff -f
    echo o > /proc/sysrq-trigger
    sleep 1000
}

uptime_s() { cut -d' ' -f1 /proc/uptime; }

t_boot=$(uptime_s)
exec </dev/null >/dev/console 2>&1

if ! . /run/softroce/job/job.sh || [ -z "${SOFTROCE_OUT:-}" ]; then
    echo "softroce: FATAL: cannot read the job description" >&2
    off
fi

fatal() {
    echo "softroce: FATAL: $*" >&2
    echo "$*" > "$SOFTROCE_OUT/guest-error"
    off
}

mkdir -p /dev/shm /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || fatal "mount /dev/shm"
mount -t devpts devpts /dev/pts 2>/dev/null
mkdir -p /dev/hugepages && mount -t hugetlbfs hugetlbfs /dev/hugepages 2>/dev/null
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
# The guest's / and /tmp are the host's over 9p, which holds no Unix sockets:
# the shm transport's memfd socket goes to a runtime directory on tmpfs.
mkdir -p -m 0700 /run/user-root && export XDG_RUNTIME_DIR=/run/user-root
hostname softroce-guest 2>/dev/null
ulimit -l unlimited

case ${SOFTROCE_HUGEPAGES:-0} in
    0|'') ;;
    *) echo "$SOFTROCE_HUGEPAGES" > /proc/sys/vm/nr_hugepages ||
           fatal "cannot reserve $SOFTROCE_HUGEPAGES huge pages" ;;
esac

# --- Soft-RoCE on loopback
modprobe rdma_rxe || fatal "modprobe rdma_rxe failed (kernel $(uname -r))"
modprobe rdma_ucm 2>/dev/null || echo "softroce: note: rdma_ucm not loaded (rdma_cm unavailable)"
t_mod=$(uptime_s)
ip link set lo up || fatal "ip link set lo up failed"
rdma link add rxe0 type rxe netdev lo || fatal "rdma link add rxe0 type rxe netdev lo failed"

gid_file=/sys/class/infiniband/rxe0/ports/1/gids/1
want_gid=0000:0000:0000:0000:0000:ffff:7f00:0001
for _ in $(seq 1 100); do
    [ -e /dev/infiniband/uverbs0 ] && [ "$(cat "$gid_file" 2>/dev/null)" = "$want_gid" ] && break
    sleep 0.1
done
[ -e /dev/infiniband/uverbs0 ] || fatal "/dev/infiniband/uverbs0 did not appear"
gid1=$(cat "$gid_file" 2>/dev/null)
[ "$gid1" = "$want_gid" ] || fatal "GID index 1 of rxe0 is '$gid1', expected ::ffff:127.0.0.1"
t_ready=$(uptime_s)

export SOFTROCE_GUEST=1 SOFTROCE_DEV=rxe0 SOFTROCE_GID_INDEX=1 SOFTROCE_OUT
{
    echo "kernel_release=$(uname -r)"
    echo "kernel_version=$(cat /proc/version)"
    echo "cpus=$(nproc)"
    echo "boot_seconds=$t_boot"
    echo "modules_loaded_seconds=$t_mod"
    echo "rxe_ready_seconds=$t_ready"
} > "$SOFTROCE_OUT/guest-info"
echo "softroce: guest up in ${t_boot}s, rxe0 ready at ${t_ready}s; running:$(printf ' %q' "${SOFTROCE_CMD[@]}")"

cd "$SOFTROCE_CWD" || fatal "cannot enter $SOFTROCE_CWD in the guest"
"${SOFTROCE_CMD[@]}" 2>&1 | tee "$SOFTROCE_OUT/command.log"
status=${PIPESTATUS[0]}
t_done=$(uptime_s)

cd /
echo "command_seconds=$(awk -v a="$t_ready" -v b="$t_done" 'BEGIN{printf "%.2f", b-a}')" >> "$SOFTROCE_OUT/guest-info"
$BB dmesg > "$SOFTROCE_OUT/dmesg.log" 2>/dev/null
echo "$status" > "$SOFTROCE_OUT/status.tmp" && mv -f "$SOFTROCE_OUT/status.tmp" "$SOFTROCE_OUT/status"
echo "softroce: command exited with status $status after $(awk -v a="$t_ready" -v b="$t_done" 'BEGIN{printf "%.1f", b-a}')s"
off
