#!/bin/sh
# Stage 1 of the Soft-RoCE guest: /init of the busybox initramfs built by
# guest.sh. Loads the virtio/9p modules, mounts the host's root file system
# over virtio-9p and switches to it, handing over to stage 2 (guest-stage2.sh,
# which runs with the host's userland).
export PATH=/bin:/sbin

/bin/busybox --install -s /bin

fail() {
    echo "softroce-init: FATAL: $*" > /dev/console
    poweroff -f
    echo o > /proc/sysrq-trigger
    sleep 1000
}

mount -t proc proc /proc || fail "mount /proc"
mount -t sysfs sysfs /sys || fail "mount /sys"
mount -t devtmpfs devtmpfs /dev || fail "mount /dev"

for m in $(cat /lib/softroce/modules.order); do
    insmod "/lib/softroce/modules/$m.ko" || fail "insmod $m"
done

# 9p cache mode: "loose" (default) caches data and metadata in the guest, which
# roughly halves exec/compile times compared with "mmap"/"none"; the guest is
# short-lived and stage 2 syncs before powering off.
cache=loose
for arg in $(cat /proc/cmdline); do
    case $arg in softroce.9pcache=*) cache=${arg#*=} ;; esac
done
opts=trans=virtio,version=9p2000.L,msize=512000,cache=$cache
mount -t 9p -o "$opts" hostroot /newroot || fail "cannot mount the host root over 9p"
mount -t tmpfs -o mode=0755,size=256m tmpfs /newroot/run || fail "mount /run"
mkdir -p /newroot/run/softroce/job /newroot/run/softroce/bin
mount -t 9p -o "$opts" softroce_job /newroot/run/softroce/job || fail "cannot mount the job dir over 9p"
cp /bin/busybox /newroot/run/softroce/bin/busybox
cp /lib/softroce/stage2.sh /newroot/run/softroce/bin/stage2.sh

mount --move /proc /newroot/proc || fail "move /proc"
mount --move /sys /newroot/sys || fail "move /sys"
mount --move /dev /newroot/dev || fail "move /dev"

exec switch_root /newroot /bin/bash /run/softroce/bin/stage2.sh
fail "switch_root failed"
