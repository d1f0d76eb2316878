#!/bin/busybox sh
# PID 1 of the test guest (runs from the initramfs, with busybox only).
#  1. loads the 9p/virtio modules and mounts the host's / read-only at /newroot;
#  2. gives it what a booted Debian host has: writable tmpfs /tmp /run /root /var/tmp, /proc,
#     /sys, /dev, and the cgroup hierarchy of the layout asked for (mcpbox_layout=v2|v1 on the
#     kernel command line, which the kernel passes to init as an environment variable);
#  3. runs the plan (mcpbox_plan=<host path of a bash script>) chrooted there, in a cgroup that
#     mimics a systemd service, with its TAP going to the second serial port;
#  4. powers off. Whatever happens, the host sees either a TAP plan or a failure.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
tap=/dev/ttyS1

say() { echo "mcpbox-vm: $*"; }
die() {
    say "$*"
    echo "not ok 1 - guest setup: $*" > $tap
    echo "1..1" > $tap
    sync
    poweroff -f
}

# No modprobe here: load in passes until nothing more loads (the list order is only a guess at
# the dependency order, which differs between kernel builds).
left=$(cat /modules.list)
for pass in 1 2 3 4 5; do
    again=
    for m in $left; do
        insmod "/modules/$m.ko" 2>/dev/null || again="$again $m"
    done
    [ "$again" = "$left" ] && break
    left=$again
done
[ -n "$left" ] && say "modules not loaded:$left"

R=/newroot
mkdir -p $R /host
opts=ro,trans=virtio,version=9p2000.L,msize=524288,cache=loose
mount -t 9p -o $opts hostroot /host || die "cannot mount the host's / over 9p"
mount -o bind /host $R || die "cannot bind /host"
for d in tmp run root var/tmp; do
    mount -t tmpfs -o mode=1777,size=2g tmpfs $R/$d || die "tmpfs on /$d"
done
chmod 700 $R/root
# Host directories under those (a build tree in /tmp, say) stay visible (mcpbox_keep=a:b:...).
for p in $(echo "$mcpbox_keep" | tr ':' ' '); do
    mkdir -p $R$p && mount -o bind /host$p $R$p || die "cannot keep $p visible"
done
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
ip link set lo up

# The cgroup layouts. The test plan runs in /system.slice/mcpbox-vmtest.service, where systemd
# would put a service, so mcpbox does not sit in the root cgroup (it never does on a real host).
CG=$R/sys/fs/cgroup
SVC=system.slice/mcpbox-vmtest.service
case "$mcpbox_layout" in
v2) # Debian 12 / Ubuntu 22.04+ / Fedora: cgroup2 only, controllers enabled from the root down.
    mount -t cgroup2 -o nsdelegate cgroup2 $CG || die "mount cgroup2"
    echo "+cpu +cpuset +io +memory +pids" > $CG/cgroup.subtree_control || die "root controllers"
    mkdir -p $CG/system.slice/mcpbox-vmtest.service $CG/init.scope
    echo "+cpu +io +memory +pids" > $CG/system.slice/cgroup.subtree_control
    echo $$ > $CG/init.scope/cgroup.procs
    ;;
v1) # systemd's "legacy" layout (Debian 10, CentOS 7, hosts booted with
    # systemd.unified_cgroup_hierarchy=0 and no unified mount): one v1 mount per controller,
    # cpu and cpuacct co-mounted with symlinks, no cgroup2 anywhere.
    mount -t tmpfs -o mode=755 tmpfs $CG || die "tmpfs on /sys/fs/cgroup"
    for c in cpu,cpuacct cpuset memory devices freezer net_cls,net_prio blkio pids perf_event; do
        mkdir -p $CG/$c
        mount -t cgroup -o $c cgroup $CG/$c || die "mount v1 $c"
        # (no service cgroup in cpuset: a new v1 cpuset has no cpus and takes no process)
        [ $c = cpuset ] || mkdir -p $CG/$c/$SVC
    done
    ln -s cpu,cpuacct $CG/cpu
    ln -s cpu,cpuacct $CG/cpuacct
    ln -s net_cls,net_prio $CG/net_cls
    ln -s net_cls,net_prio $CG/net_prio
    mkdir -p $CG/systemd
    mount -t cgroup -o none,name=systemd cgroup $CG/systemd || die "mount name=systemd"
    mkdir -p $CG/systemd/$SVC
    ;;
*) die "unknown mcpbox_layout '$mcpbox_layout'" ;;
esac

say "layout $mcpbox_layout ready; running $mcpbox_plan"
# The host's tree becomes the namespace's root (mount --move, then chroot to it through the
# cwd): a plain chroot into /newroot would make the kernel refuse user namespaces (EPERM), as it
# does to every chrooted process. PID 1 keeps the initramfs as its own root, for poweroff.
cd $R && mount --move . / || die "cannot move the new root to /"
# The plan's shell joins the service cgroup(s) itself (a v1 host has one per hierarchy).
chroot . /bin/bash -c '
    for f in /sys/fs/cgroup/'$SVC'/cgroup.procs /sys/fs/cgroup/*/'$SVC'/cgroup.procs; do
        [ -f "$f" ] && echo $$ > "$f"
    done
    cd /tmp && exec /bin/bash "$0"' "$mcpbox_plan" > $tap 2>&1 < /dev/null
say "plan exited with status $?"
cd /
sync
poweroff -f
