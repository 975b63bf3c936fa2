#!/usr/bin/env bash
# Run a command inside a throw-away QEMU guest that has a Soft-RoCE (rdma_rxe)
# device, so the real libibverbs code path can be exercised on a machine
# without an RDMA NIC.
#
#   guest.sh [--timeout SECS] [--out DIR] -- COMMAND [ARGS...]
#
#   --timeout SECS  kill the guest after SECS seconds (default 600)
#   --out DIR       output dir (default: $PWD/softroce-out); the only place
#                   the harness itself writes to besides the cache dir
#
# COMMAND must be reachable through the host's root file system (the guest
# mounts the host's / over virtio-9p and runs the host's userland). It runs as
# root in the caller's working directory, with stdin from /dev/null, and sees
# SOFTROCE_GUEST=1 SOFTROCE_DEV=rxe0 SOFTROCE_GID_INDEX=1 SOFTROCE_OUT=DIR
# SOFTROCE_CACHE. Its combined stdout/stderr goes to the console and to
# DIR/command.log; its exit status becomes the exit status of guest.sh.
# DIR also receives console.log, guest-info (kernel, timings), dmesg.log and
# status.
#
# Exit codes besides the command's own:
#   77   prerequisites missing (qemu, kernel image, busybox-static, ...)
#   124  the guest did not finish before the timeout and was killed
#   125  harness failure (initramfs build, boot, 9p mount, rxe setup, ...)
#   130  interrupted (SIGINT/SIGTERM/SIGHUP); the guest is killed
#
# Environment:
#   SOFTROCE_CACHE     where the initramfs is cached (default: $PWD/softroce-cache)
#   SOFTROCE_KERNEL    guest kernel image (default: newest /boot/vmlinuz-* whose
#                      /lib/modules tree has rdma_rxe, virtio_pci and 9p)
#   SOFTROCE_MEM       guest memory in MiB (default 2048)
#   SOFTROCE_SMP       guest vCPUs (default 2)
#   SOFTROCE_HUGEPAGES number of 2 MiB huge pages to reserve in the guest (default 0)
#   SOFTROCE_PASS_ENV  space-separated names of extra variables to pass into the
#                      guest (PATH, LANG, LC_ALL, TERM and HOME always are)
#   SOFTROCE_QEMU      qemu binary (default: qemu-system-x86_64)
#   SOFTROCE_NICE      nice level for qemu (default 0)
#   SOFTROCE_9P_CACHE  9p cache mode of the host root in the guest: loose
#                      (default, fastest), mmap, none or fscache
set -u
set -o pipefail

readonly HARNESS_VERSION=3
readonly EXIT_MISSING=77 EXIT_TIMEOUT=124 EXIT_HARNESS=125

prog=${0##*/}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

die() { echo "$prog: error: $*" >&2; exit "$EXIT_HARNESS"; }
note() { echo "$prog: $*" >&2; }

usage() {
    sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

timeout_s=600
out_dir=
while [ $# -gt 0 ]; do
    case $1 in
        --timeout) [ $# -ge 2 ] || die "--timeout needs a value"; timeout_s=$2; shift 2 ;;
        --timeout=*) timeout_s=${1#*=}; shift ;;
        --out) [ $# -ge 2 ] || die "--out needs a value"; out_dir=$2; shift 2 ;;
        --out=*) out_dir=${1#*=}; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) echo "$prog: unknown argument '$1' (COMMAND must follow '--')" >&2; usage >&2; exit 2 ;;
    esac
done
[ $# -ge 1 ] || { echo "$prog: missing COMMAND after '--'" >&2; usage >&2; exit 2; }
case $timeout_s in ''|*[!0-9]*) die "--timeout must be a whole number of seconds" ;; esac
[ "$timeout_s" -gt 0 ] || die "--timeout must be positive"

cache_dir=${SOFTROCE_CACHE:-$PWD/softroce-cache}
out_dir=${out_dir:-$PWD/softroce-out}
mem=${SOFTROCE_MEM:-2048}
smp=${SOFTROCE_SMP:-2}
hugepages=${SOFTROCE_HUGEPAGES:-0}
qemu=${SOFTROCE_QEMU:-qemu-system-x86_64}
nice_level=${SOFTROCE_NICE:-0}
p9cache=${SOFTROCE_9P_CACHE:-loose}
case $p9cache in none|loose|fscache|mmap) ;; *) die "SOFTROCE_9P_CACHE must be none, loose, fscache or mmap" ;; esac

# ---------------------------------------------------------------- prerequisites
# Modules the initramfs needs to reach the host's root over virtio-9p; their
# dependencies (netfs, fscache, virtio_ring, ...) are resolved via modules.dep.
readonly BOOT_MODULES="virtio_pci 9pnet_virtio 9p"

kernel_has_modules() { # KVER: all modules needed by the harness present?
    local dep=/lib/modules/$1/modules.dep m
    [ -r "$dep" ] || return 1
    for m in $BOOT_MODULES rdma_rxe; do
        grep -Eq "/${m}\.ko(\.[a-z]+)?:" "$dep" && continue
        grep -Eq "/${m}\.ko(\.[a-z]+)?\$" "/lib/modules/$1/modules.builtin" 2>/dev/null && continue
        return 1
    done
}

find_kernel() {
    local f v
    if [ -n "${SOFTROCE_KERNEL:-}" ]; then
        f=$SOFTROCE_KERNEL; v=${f##*/vmlinuz-}
        [ -f "$f" ] && kernel_has_modules "$v" && { echo "$f"; return 0; }
        return 1
    fi
    for f in $(ls -1v /boot/vmlinuz-* 2>/dev/null | tac); do
        v=${f#/boot/vmlinuz-}
        kernel_has_modules "$v" && { echo "$f"; return 0; }
    done
    return 1
}

missing=()
pkgs=()
need() { missing+=("$1"); pkgs+=("$2"); }

command -v "$qemu" >/dev/null 2>&1 || need "$qemu" qemu-system-x86
kernel=$(find_kernel) || { kernel=; need "a kernel image in /boot with rdma_rxe, virtio and 9p modules" linux-image-amd64; }
busybox=
for b in /bin/busybox /usr/bin/busybox; do
    [ -x "$b" ] || continue
    case $(LC_ALL=C ldd "$b" 2>&1) in *"not a dynamic executable"*|*"statically linked"*) busybox=$b; break ;; esac
done
[ -n "$busybox" ] || need "a statically linked busybox" busybox-static
command -v modprobe >/dev/null 2>&1 || need modprobe kmod
command -v rdma >/dev/null 2>&1 || need "rdma (iproute2)" iproute2
command -v ip >/dev/null 2>&1 || need "ip (iproute2)" iproute2
command -v ibv_devinfo >/dev/null 2>&1 || need ibv_devinfo ibverbs-utils
compgen -G '/usr/lib*/libibverbs/librxe-rdmav*.so' >/dev/null ||
    compgen -G '/usr/lib/*/libibverbs/librxe-rdmav*.so' >/dev/null ||
    need "the rxe libibverbs provider" ibverbs-providers
[ -e /etc/libibverbs.d/rxe.driver ] || need "/etc/libibverbs.d/rxe.driver" ibverbs-providers
if [ ${#missing[@]} -gt 0 ]; then
    echo "$prog: FAILED: prerequisites missing:" >&2
    for m in "${missing[@]}"; do echo "  - $m" >&2; done
    echo "$prog: install them with (as root):" >&2
    echo "  apt-get update && apt-get install -y $(printf '%s\n' "${pkgs[@]}" qemu-system-x86 linux-image-amd64 busybox-static rdma-core ibverbs-utils ibverbs-providers perftest iproute2 kmod | awk '!s[$0]++' | tr '\n' ' ')" >&2
    exit "$EXIT_MISSING"
fi
[ -r "$kernel" ] || die "cannot read $kernel (Debian installs it mode 0600: run as root)"
kver=${kernel##*/vmlinuz-}
moddir=/lib/modules/$kver

# ---------------------------------------------------------------- initramfs
# Resolve BOOT_MODULES and their dependencies into load order (relative paths).
resolve_modules() {
    local -A seen=()
    local order=()
    _add() {
        local name=$1 line path deps d
        line=$(grep -E "(^|/)${name}\.ko(\.[a-z]+)?:" "$moddir/modules.dep" | head -n1)
        if [ -z "$line" ]; then
            grep -Eq "/${name}\.ko(\.[a-z]+)?\$" "$moddir/modules.builtin" 2>/dev/null && return 0
            die "module $name not found for kernel $kver"
        fi
        path=${line%%:*}; deps=${line#*:}
        [ -n "${seen[$path]:-}" ] && return 0
        for d in $deps; do
            d=${d##*/}; d=${d%%.ko*}
            _add "$d"
        done
        seen[$path]=1
        order+=("$path")
    }
    local m
    for m in $BOOT_MODULES; do _add "$m"; done
    printf '%s\n' "${order[@]}"
}

mapfile -t mod_paths < <(resolve_modules) || exit "$EXIT_HARNESS"
[ ${#mod_paths[@]} -gt 0 ] || die "could not resolve boot modules for $kver"

init_src=$here/guest-init.sh
stage2_src=$here/guest-stage2.sh
[ -r "$init_src" ] && [ -r "$stage2_src" ] || die "missing $init_src or $stage2_src"

key=$( {
    echo "v$HARNESS_VERSION $kver"
    sha256sum "$busybox" "$init_src" "$stage2_src" "${BASH_SOURCE[0]}"
    for p in "${mod_paths[@]}"; do sha256sum "$moddir/$p"; done
} | sha256sum | cut -c1-16 )
initrd=$cache_dir/initramfs-$kver-$key.cpio

build_initramfs() {
    mkdir -p "$cache_dir" || die "cannot create cache dir $cache_dir"
    local stage tmp p base
    stage=$(mktemp -d "$cache_dir/.build.XXXXXX") || die "mktemp failed in $cache_dir"
    mkdir -p "$stage"/{bin,sbin,proc,sys,dev,newroot,lib/softroce/modules,etc} || die "mkdir failed"
    cp "$busybox" "$stage/bin/busybox" || die "cannot copy busybox"
    ln -s busybox "$stage/bin/sh"
    install -m 0755 "$init_src" "$stage/init" || die "cannot copy init"
    install -m 0755 "$stage2_src" "$stage/lib/softroce/stage2.sh" || die "cannot copy stage2"
    : > "$stage/lib/softroce/modules.order"
    for p in "${mod_paths[@]}"; do
        base=${p##*/}
        case $base in
            *.ko) cp "$moddir/$p" "$stage/lib/softroce/modules/$base" ;;
            *.ko.xz) xz -dc "$moddir/$p" > "$stage/lib/softroce/modules/${base%.xz}" ;;
            *.ko.zst) zstd -qdc "$moddir/$p" > "$stage/lib/softroce/modules/${base%.zst}" ;;
            *.ko.gz) gzip -dc "$moddir/$p" > "$stage/lib/softroce/modules/${base%.gz}" ;;
            *) die "unknown module format: $p" ;;
        esac || die "cannot unpack module $p"
        echo "${base%%.ko*}" >> "$stage/lib/softroce/modules.order"
    done
    tmp=$(mktemp "$cache_dir/.initramfs.XXXXXX") || die "mktemp failed"
    if command -v cpio >/dev/null 2>&1; then
        (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) > "$tmp"
    else
        (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | "$busybox" cpio -o -H newc) > "$tmp" 2>/dev/null
    fi || { rm -rf "$stage" "$tmp"; die "cpio failed"; }
    rm -rf "$stage"
    mv -f "$tmp" "$initrd" || die "cannot store $initrd"
    # Drop stale images of earlier inputs.
    find "$cache_dir" -maxdepth 1 -name 'initramfs-*.cpio' ! -name "${initrd##*/}" -delete 2>/dev/null
    note "built $initrd"
}
[ -s "$initrd" ] || build_initramfs
cache_dir=$(cd "$cache_dir" && pwd -P) || die "cannot resolve $cache_dir"

# ---------------------------------------------------------------- job description
mkdir -p "$out_dir" || die "cannot create output dir $out_dir"
out_dir=$(cd "$out_dir" && pwd -P) || die "cannot resolve $out_dir"
rm -rf "$out_dir/.softroce-job"
rm -f "$out_dir"/{status,command.log,console.log,guest-info,guest-error,dmesg.log}
mkdir "$out_dir/.softroce-job" || die "cannot write into $out_dir"

cwd=$(pwd -P)
job=$out_dir/.softroce-job/job.sh
{
    echo "# generated by $prog"
    printf 'SOFTROCE_OUT=%q\n' "$out_dir"
    printf 'SOFTROCE_CWD=%q\n' "$cwd"
    printf 'SOFTROCE_HUGEPAGES=%q\n' "$hugepages"
    printf 'export SOFTROCE_CACHE=%q\n' "$cache_dir"
    printf 'export PATH=%q\n' "${PATH:-/usr/bin:/bin}:/usr/local/sbin:/usr/sbin:/sbin"
    for v in LANG LC_ALL TERM HOME ${SOFTROCE_PASS_ENV:-}; do
        case $v in *[!A-Za-z0-9_]*|'') continue ;; esac
        [ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"
    done
    printf 'SOFTROCE_CMD=('
    printf '%q ' "$@"
    printf ')\n'
} > "$job" || die "cannot write $job"

# ---------------------------------------------------------------- boot
console_log=$out_dir/console.log
qemu_args=(
    -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem"
    -display none -monitor none -serial stdio -no-reboot
    -kernel "$kernel" -initrd "$initrd"
    -append "console=ttyS0 panic=-1 quiet loglevel=4 softroce.9pcache=$p9cache"
    -nic none
    -fsdev local,id=hostroot,path=/,security_model=none,multidevs=remap
    -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
    -fsdev "local,id=jobdir,path=$out_dir/.softroce-job,security_model=none"
    -device virtio-9p-pci,fsdev=jobdir,mount_tag=softroce_job
)
case $out_dir in *,*) die "output dir must not contain a comma: $out_dir" ;; esac

note "kernel $kernel, initramfs ${initrd##*/}, timeout ${timeout_s}s, output in $out_dir"
start=$(date +%s.%N)

exec {tee_fd}> >(tee "$console_log")
tee_pid=$!
nice -n "$nice_level" timeout --kill-after=10 "$timeout_s" "$qemu" "${qemu_args[@]}" \
    </dev/null >&"$tee_fd" 2>&1 &
qemu_pid=$!
interrupted=
trap 'interrupted=1; kill -TERM "$qemu_pid" 2>/dev/null' INT TERM HUP
while :; do
    wait "$qemu_pid"; qemu_rc=$?
    kill -0 "$qemu_pid" 2>/dev/null || break
done
trap - INT TERM HUP
exec {tee_fd}>&-
wait "$tee_pid" 2>/dev/null
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')

if [ -n "$interrupted" ]; then
    echo "$prog: INTERRUPTED: the guest was stopped after ${elapsed}s" >&2
    exit 130
fi

if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
    echo "$prog: TIMEOUT: the guest did not finish within ${timeout_s}s and was killed (command: $*)" >&2
    exit "$EXIT_TIMEOUT"
fi
if [ -s "$out_dir/guest-error" ]; then
    echo "$prog: FAILED: guest setup error: $(cat "$out_dir/guest-error")" >&2
    exit "$EXIT_HARNESS"
fi
if [ ! -s "$out_dir/status" ]; then
    echo "$prog: FAILED: the guest ended without reporting an exit status (qemu exit $qemu_rc after ${elapsed}s; see $console_log)" >&2
    exit "$EXIT_HARNESS"
fi
status=$(tr -dc '0-9' < "$out_dir/status")
[ -n "$status" ] || die "unreadable status file $out_dir/status"
note "command exited with status $status (guest wall time ${elapsed}s)"
echo "host_wall_seconds=$elapsed" >> "$out_dir/guest-info"
exit "$status"
