#!/usr/bin/env bash
# Puts a Debian kernel (vmlinuz and its modules) for the VM tests into the cache directory
# (MCPBOX_VM_CACHE, default ~/.cache/mcpbox-vm), unpacked from the package without installing
# it: the host's /boot and /lib/modules stay as they are. Idempotent; needs apt's package lists.
set -euo pipefail
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache=${MCPBOX_VM_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/mcpbox-vm}
if ls "$cache"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
    exit 0
fi
# linux-image-amd64 is a metapackage: the kernel is its linux-image-<version> dependency.
kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }'; }
pkg=$(kernel_pkg)
[ -n "$pkg" ] || { apt-get update -qq && pkg=$(kernel_pkg); }
if [ -z "$pkg" ]; then
    echo "fetch_kernel: no linux-image-amd64 in apt's lists (run apt-get update)" >&2
    exit 1
fi
mkdir -p "$cache"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch_kernel: unpacking $pkg into $cache/kernel" >&2
(cd "$tmp" && apt-get download -qq "$pkg" >/dev/null 2>&1)
rm -rf "$cache/kernel.new"
dpkg -x "$tmp"/*.deb "$cache/kernel.new"
rm -rf "$cache/kernel"
mv "$cache/kernel.new" "$cache/kernel"
