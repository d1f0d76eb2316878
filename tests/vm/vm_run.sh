#!/usr/bin/env bash
# Boots a real Linux kernel in qemu with the cgroup layout LAYOUT (v2 or v1) and runs the local
# backend's tests there, on this host's own files (its / shared read-only over 9p), then turns
# the guest's TAP into this script's exit status.
#   vm_run.sh LAYOUT WORKDIR MCPBOX [BINARY_SPEC...]
#     WORKDIR      a directory of the build tree for the plan file (visible to the guest)
#     MCPBOX       the mcpbox binary
#     BINARY_SPEC  "name timeout_s path [args]": a test program to run unchanged in the guest
# Exits 77 (skipped, with the reason) when qemu, busybox or a kernel with 9p modules is missing.
# Environment: MCPBOX_VM_KERNEL (a vmlinuz) and MCPBOX_VM_MODULES (its /lib/modules/<version>),
# else the kernel fetched by fetch_kernel.sh into MCPBOX_VM_CACHE (default ~/.cache/mcpbox-vm),
# else /boot's; MCPBOX_VM_ACCEL=kvm|tcg (default: kvm when the CPU shows vmx/svm, else tcg);
# MCPBOX_VM_TIMEOUT (seconds, default 600); MCPBOX_VM_MEM (MiB, default 1024).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
layout=${1:?layout}
work=${2:?workdir}
mcpbox=$(realpath "${3:?mcpbox}")
shift 3
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache=${MCPBOX_VM_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/mcpbox-vm}
timeout_s=${MCPBOX_VM_TIMEOUT:-600}

skip() { echo "1..0 # SKIP $*"; exit 77; }
# The module files the guest needs, in load order (names as in the kernel tree; the ones built
# into a given kernel are simply absent).
# nf_tables and the rest: what the egress rules of a sandbox with a network_policy use (NAT
# redirect, reject; backend/local/egress_rules.h), which the doctor's egress_policy check writes.
modules="virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache
         9pnet 9pnet_virtio 9p overlay tun
         crc32c_generic libcrc32c nfnetlink nf_defrag_ipv4 nf_defrag_ipv6 nf_conntrack nf_nat
         nf_tables nft_chain_nat nft_redir nf_reject_ipv4 nft_reject nft_reject_ipv4"

find_kernel() {
    if [ -n "${MCPBOX_VM_KERNEL:-}" ]; then
        kernel=$MCPBOX_VM_KERNEL
        moddir=${MCPBOX_VM_MODULES:?MCPBOX_VM_MODULES must name the kernel\'s module directory}
        return 0
    fi
    local k v
    for k in "$cache"/kernel/boot/vmlinuz-* /boot/vmlinuz-*; do
        [ -r "$k" ] || continue
        v=${k##*/vmlinuz-}
        moddir=${k%/boot/*}/lib/modules/$v
        [ "$k" = "/boot/vmlinuz-$v" ] && moddir=/lib/modules/$v
        if [ -n "$(find "$moddir" -name 9p.ko 2>/dev/null | head -1)" ]; then
            kernel=$k
            return 0
        fi
    done
    return 1
}

qemu=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 missing (Debian: qemu-system-x86)"
busybox=$(command -v busybox) || skip "busybox missing (Debian: busybox-static)"
# A dynamic binary names its loader near its start; the initramfs has no libraries.
head -c 8192 "$busybox" | grep -qa 'ld-linux' &&
    skip "$busybox is dynamically linked (Debian: busybox-static)"
find_kernel || skip "no kernel with 9p modules (run tests/vm/fetch_kernel.sh, or set MCPBOX_VM_KERNEL)"
[ "$(uname -m)" = x86_64 ] || skip "the VM tests boot an x86_64 guest"

# The initramfs: static busybox, our init, the modules. Rebuilt when any input changes.
build_initramfs() {
    local key tmp m f
    key=$( (sha256sum "$here/initramfs_init.sh" "$busybox"; echo "$moddir $modules") | sha256sum | cut -c1-16)
    initramfs=$cache/initramfs-$key.cpio
    [ -s "$initramfs" ] && return 0
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/build.XXXXXX")
    mkdir -p "$tmp"/{bin,proc,sys,dev,newroot,modules}
    cp "$busybox" "$tmp/bin/busybox"
    install -m 755 "$here/initramfs_init.sh" "$tmp/init"
    for m in $modules; do
        f=$(find "$moddir/kernel" -name "$m.ko" | head -1)
        [ -n "$f" ] && cp "$f" "$tmp/modules/" && echo "$m" >> "$tmp/modules.list"
    done
    touch "$tmp/modules.list"
    (cd "$tmp" && find . | "$busybox" cpio -o -H newc 2>/dev/null) > "$tmp.cpio"
    mv "$tmp.cpio" "$initramfs" # atomic: parallel runs may race to build the same file
    rm -rf "$tmp"
    find "$cache" -maxdepth 1 -name 'initramfs-*.cpio' ! -name "${initramfs##*/}" -mmin +60 -delete
}
build_initramfs

accel=${MCPBOX_VM_ACCEL:-}
if [ -z "$accel" ]; then
    # /dev/kvm alone is not enough: under a paravirtualised nested hypervisor (as on the
    # project's Firecracker machines) it exists but cannot run a stock kernel.
    accel=tcg
    [ -w /dev/kvm ] && grep -qE '^flags.* (vmx|svm)( |$)' /proc/cpuinfo && accel=kvm
fi
cpu=max
[ "$accel" = kvm ] && cpu=host

mkdir -p "$work"
work=$(realpath "$work")
plan=$work/plan.sh
console=$work/console.log
tap=$work/tap.out
{
    echo "# written by vm_run.sh: what the guest runs"
    printf 'export MCPBOX_VM_LAYOUT=%q MCPBOX_BIN=%q\n' "$layout" "$mcpbox"
    printf 'export ASAN_OPTIONS=%q UBSAN_OPTIONS=%q\n' "${ASAN_OPTIONS:-}" "${UBSAN_OPTIONS:-}"
    printf 'export HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n'
    printf 'export MCPBOX_VM_BINARIES=%q\n' "$(printf '%s\n' "$@")"
    printf 'export MCPBOX_VM_LIMITS_REPORT=%q\n' "${MCPBOX_VM_LIMITS_REPORT:-}"
    printf 'exec /bin/bash %q\n' "$here/guest_tests.sh"
} > "$plan"
rm -f "$console" "$tap"

# Paths the guest must see through its own tmpfs /tmp, /run, /root, /var/tmp (a build tree
# under /tmp, say): bind-mounted back from the host's copy by the init.
# Kept whole: the top directory under the tmpfs (/tmp/ci-checkout for /tmp/ci-checkout/build/x).
keep=
for p in $work $here $mcpbox $*; do
    case "$p" in
    /tmp/?* | /run/?* | /root/?* | /var/tmp/?*)
        p=$(sed -E 's|^(/var/tmp/[^/]+\|/[^/]+/[^/]+).*|\1|' <<< "$p")
        case ":$keep:" in *":$p:"*) ;; *) keep="$keep${keep:+:}$p" ;; esac ;;
    esac
done

echo "# $layout guest: kernel $kernel, accel $accel, log $console"
start=$(date +%s)
set +e
timeout -k 10 "$timeout_s" "$qemu" -accel "$accel" -cpu "$cpu" -smp 2 -m "${MCPBOX_VM_MEM:-1024}" \
    -nodefaults -nographic -no-reboot -display none \
    -kernel "$kernel" -initrd "$initramfs" \
    -append "console=ttyS0 panic=-1 quiet loglevel=4 mcpbox_layout=$layout mcpbox_plan=$plan mcpbox_keep=$keep $([ "$layout" = v2 ] && echo cgroup_no_v1=all)" \
    -serial "file:$console" -serial "file:$tap" \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    </dev/null >"$work/qemu.out" 2>&1
qrc=$?
set -e
echo "# guest ran $(($(date +%s) - start)) s (qemu exit $qrc)"
[ -f "$tap" ] && cat "$tap"
fail() {
    echo "# FAILED: $*"
    echo "# last lines of the guest console ($console):"
    tail -n 30 "$console" 2>/dev/null | sed 's/^/#   /'
    sed 's/^/#   qemu: /' "$work/qemu.out" 2>/dev/null
    exit 1
}
[ $qrc -eq 124 ] && fail "the guest did not finish within ${timeout_s}s"
grep -qE '^1\.\.[0-9]+' "$tap" 2>/dev/null || fail "no TAP plan from the guest (crashed?)"
grep -qE '^not ok' "$tap" && fail "$(grep -cE '^not ok' "$tap") check(s) failed in the $layout guest"
planned=$(sed -nE 's/^1\.\.([0-9]+).*/\1/p' "$tap" | tail -1)
[ "$(grep -cE '^ok' "$tap")" -eq "$planned" ] || fail "the guest planned $planned checks but ran others"
[ "$planned" -ge 1 ] || fail "no check ran"
exit 0
