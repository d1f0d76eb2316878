#!/usr/bin/env python3
"""`mcpbox setup` of two users shares /dev/net/tun: undoing the first keeps it usable by the
second, and the mode goes back when the last setup that opened it up is undone. (Undoing one
user's setup used to reset the device under everyone else: local_image_e2e's user undone
while the rootless suite ran made pasta fail with "Failed to open tun socket".)
Usage: test_setup_shared.py MCPBOX NAME_PREFIX  (as root; 77 otherwise)"""
import glob
import os
import re
import stat
import subprocess
import sys

TUN = "/dev/net/tun"
failures = 0


def check(ok, what):
    global failures
    print(("ok: " if ok else "FAIL: ") + what)
    failures += 0 if ok else 1


def tun_mode():
    return stat.S_IMODE(os.stat(TUN).st_mode)


def others_holding(users):
    """Setup records of users other than ours that hold the device open."""
    held = []
    for rec in glob.glob("/var/lib/mcpbox/setup-*"):
        if os.path.basename(rec)[len("setup-"):] in users or "." in os.path.basename(rec):
            continue
        with open(rec) as f:
            if re.search(r"^tun " + TUN + " ", f.read(), re.M):
                held.append(rec)
    return held


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root (useradd, mcpbox setup)")
        return 77
    mcpbox, prefix = sys.argv[1], sys.argv[2]
    users = [prefix + "1", prefix + "2"]
    if not os.path.exists(TUN):
        print("FAIL: no %s on this host (modprobe tun)" % TUN)
        return 1
    try:
        for u in users:
            subprocess.run(["userdel", "-r", u], stderr=subprocess.DEVNULL)
            subprocess.run(["useradd", "-M", "-s", "/bin/sh", u], check=True)
        before = tun_mode()
        for u in users:
            subprocess.run([mcpbox, "setup", "--user", u], check=True, stdout=subprocess.DEVNULL)
        check(tun_mode() & 0o666 == 0o666, "after both setups the device is usable by everyone")
        out = subprocess.run([mcpbox, "setup", "--user", users[0], "--undo"], check=True,
                             capture_output=True, text=True).stdout
        check(tun_mode() & 0o666 == 0o666,
              "undoing the first user's setup keeps it usable for the second (%o): %s"
              % (tun_mode(), out.strip()))
        subprocess.run([mcpbox, "setup", "--user", users[1], "--undo"], check=True,
                       stdout=subprocess.DEVNULL)
        if others_holding(users):
            check(tun_mode() & 0o666 == 0o666,
                  "other users' setups still hold it (%s): still usable" % others_holding(users))
        else:
            check(tun_mode() == before or before & 0o666 == 0o666,
                  "undoing the last setup puts the mode back (%o, was %o)" % (tun_mode(), before))
    finally:
        for u in users:
            subprocess.run([mcpbox, "setup", "--user", u, "--undo"], stdout=subprocess.DEVNULL)
            subprocess.run(["userdel", "-r", u], stderr=subprocess.DEVNULL)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
