#!/usr/bin/env python3
"""A named volume's size limit against hostile sandboxes (issue 36), through the real server over
stdio. As root an ext4 image holds it (ENOSPC); as an ordinary user mcpbox's watcher
(backend/local/volume_guard.c) makes the volume read-only in every sandbox that mounts it once
it is at its limit (EROFS), killing what keeps a file there open for writing. Each attack is a
check: two sandboxes filling at once, a writer that holds its file open, a flood of empty files
(entries, not bytes), sparse files and fallocate, hard links and renames from elsewhere and
across volumes, a directory the sandbox made unreadable to the server, and renaming the
directories above the mount while the watcher looks for it. Runs as root and, through
tests/local/rootless, as an ordinary user.

usage: test_volquota.py --mcpbox PATH [--check NAME]   (exit 77 where local sandboxes cannot run)
"""
import argparse
import os
import secrets
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_volumes import ROOT, MIB, Serve, vol, volume_dirs  # noqa: E402

SKIP = 77
WATCHER = "usage watcher (read-only at the limit)"
REFUSED = "No space left" if ROOT else "Read-only file system"
WAIT_S = 20  # the watcher measures every 0.5 s; generous for a loaded CI machine


def name(base):
    return f"{base}-{secrets.token_hex(3)}"


def bg(s, sid, command):
    """Starts command in the sandbox and returns at once (run_command's background)."""
    s.ok("run_command", sandbox_id=sid, command=command, background=True)


def until_refused(s, sid, path, what="a 1 MiB write"):
    """Writes 1 MiB files (path.N) until a write is refused; returns the error."""
    deadline, n = time.monotonic() + WAIT_S, 0
    while time.monotonic() < deadline:
        n += 1
        code, out, err = s.sh(sid, f"dd if=/dev/zero of={path}.{n} bs=1M count=1 2>&1 >/dev/null",
                              30000)
        if code != 0:
            return out + err
        time.sleep(0.2)
    raise AssertionError(f"{what} to {path} was never refused")


def check_fill(s):
    """Two sandboxes fill one volume at once: both are refused, and what got in stays near the
    limit (the overshoot is what they wrote between two measures)."""
    v = name("fill")
    info = s.volume("create", name=v, size_bytes=32 * MIB)
    assert info["limit_enforced_by"] == ("ext4 image (loop mount)" if ROOT else WATCHER), info
    a, b = s.create(vol(v, "/data/v", "rw")), s.create(vol(v, "/mnt/v", "rw"))
    shown = s.ok("get_sandbox", sandbox_id=a)["mounts"]
    assert shown[0]["limit_enforced_by"] == info["limit_enforced_by"], shown
    bg(s, a, "dd if=/dev/zero of=/data/v/a bs=1M count=40")
    bg(s, b, "dd if=/dev/zero of=/mnt/v/b bs=1M count=40")
    err_a = until_refused(s, a, "/data/v/more-a")
    err_b = until_refused(s, b, "/mnt/v/more-b")
    assert REFUSED in err_a and REFUSED in err_b, (err_a, err_b)
    used = s.volume("inspect", name=v)["used_bytes"]
    assert used <= 32 * MIB + 80 * MIB, used  # at most what both dd's could write
    code, out, _ = s.sh(a, "cat /data/v/a | wc -c")
    assert code == 0 and int(out) > 0, "what was written stays readable"
    for sid in (a, b):
        s.ok("destroy_sandbox", sandbox_id=sid)
    s.volume("delete", name=v)
    print(f"fill: two writers at once both refused ({REFUSED}); {used} bytes used of 32 MiB")


def check_held(s):
    """A writer that keeps its file open (a read-only remount is refused while it does): as a
    user it is killed and the volume still goes read-only."""
    v = name("held")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/v", "rw"))
    bg(s, a, "echo $$ > /tmp/held.pid; exec 3>/data/v/held; while :; do "
             "head -c 1048576 /dev/zero >&3 || exit 9; sleep 0.1; done")
    time.sleep(0.5)
    pid = s.sh(a, "cat /tmp/held.pid")[1].strip()
    assert pid, "the writer did not start"
    s.sh(a, "dd if=/dev/zero of=/data/v/bulk bs=1M count=36 >/dev/null 2>&1")
    err = until_refused(s, a, "/data/v/after")
    assert REFUSED in err, err
    deadline = time.monotonic() + WAIT_S
    while s.sh(a, f"kill -0 {pid}")[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert s.sh(a, f"kill -0 {pid}")[0] != 0, "the writer holding its file still runs"
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    print("held: the writer that kept its file open ended; the volume refused the rest")


def check_entries(s):
    """A flood of empty files: bytes stay near zero, but entries count (as root ext4's inodes,
    as a user one per 16 KiB of the limit)."""
    v = name("inodes")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/v", "rw"))
    flood = ("i=0; while [ $i -lt 20000 ]; do printf '' > /data/v/f$i 2>/dev/null || break; "
             "i=$((i+1)); done; echo $i")
    code, out, err = s.sh(a, flood, 120000)
    # the shell is killed (code None) when it holds a file open as the watcher remounts
    assert out.strip().isdigit() or (code is None and not ROOT), (code, out, err)
    made = int(out.strip()) if out.strip().isdigit() else -1
    if made in (20000, -1):  # killed, or all made before the watcher looked: now it refuses
        err = until_refused(s, a, "/data/v/next", "a file after the flood")
        assert REFUSED in err, err
    assert made < 20000 or not ROOT, f"{made} files in a 32 MiB ext4"
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    print(f"entries: a flood of empty files stopped ({made} made; -1: the shell was killed)")


def check_sparse(s):
    """A sparse file takes no room and is allowed; fallocate takes room and counts."""
    v = name("sparse")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/v", "rw"))
    code, _, err = s.sh(a, "truncate -s 100G /data/v/sparse && sleep 1.5 && echo ok > /data/v/ok")
    assert code == 0, f"a sparse file made the volume refuse writes: {err}"
    code, out, err = s.sh(a, "fallocate -l 40M /data/v/alloc 2>&1")
    err = out + err
    if code == 0:
        err = until_refused(s, a, "/data/v/after")
    assert REFUSED in err, err
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    print("sparse: 100 GB of holes allowed, 40 MB of fallocate counted")


def check_links(s):
    """Hard links into the volume from elsewhere, and renames across volumes, are refused
    (EXDEV: another mount); what mv copies instead is counted."""
    v, w = name("links"), name("other")
    s.volume("create", name=v, size_bytes=32 * MIB)
    s.volume("create", name=w, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/v", "rw"), vol(w, "/data/w", "rw"))
    code, out, err = s.sh(a, "dd if=/dev/zero of=/tmp/big bs=1M count=40 2>/dev/null; "
                             "ln /tmp/big /data/v/big 2>&1; echo x > /data/w/f; "
                             "python3 -c 'import os; os.rename(\"/data/w/f\", \"/data/v/f\")' 2>&1")
    assert (out + err).count("cross-device") >= 2, (out, err)
    s.sh(a, "mv /tmp/big /data/v/big 2>/dev/null")  # a copy: counted
    err = until_refused(s, a, "/data/v/after")
    assert REFUSED in err, err
    assert s.sh(a, "echo y > /data/w/g")[0] == 0, "the other volume stays writable"
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    s.volume("delete", name=w)
    print("links: hard link and rename across mounts refused (EXDEV); mv's copy counted")


def check_hidden(s):
    """Bytes under a directory the sandbox made unreadable (mode 000) still count."""
    v = name("hidden")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/v", "rw"))
    code, _, err = s.sh(a, "mkdir /data/v/h && dd if=/dev/zero of=/data/v/h/big bs=1M count=40 "
                           "2>/dev/null; chmod 000 /data/v/h")
    err = until_refused(s, a, "/data/v/after")
    assert REFUSED in err, err
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    print("hidden: a mode-000 directory did not hide its bytes")


def check_dodge(s):
    """Renaming the directories above the mount in a loop does not hide it from the watcher."""
    v = name("dodge")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/x/v", "rw"))
    bg(s, a, "while :; do mv /data/x /data/y 2>/dev/null; mv /data/y /data/x 2>/dev/null; done")
    s.sh(a, "dd if=/dev/zero of=/data/x/v/big bs=1M count=40 2>/dev/null || "
            "dd if=/dev/zero of=/data/y/v/big bs=1M count=40 2>/dev/null")
    deadline, err = time.monotonic() + WAIT_S, ""
    while time.monotonic() < deadline and REFUSED not in err:
        _, err, _ = s.sh(a, "for d in x y; do dd if=/dev/zero of=/data/$d/v/after bs=1M count=1 "
                            "2>&1 >/dev/null; done")
        time.sleep(0.2)
    assert REFUSED in err, err
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    print("dodge: renaming the mount's parents in a loop did not hide the volume")


def check_parent_hidden(s):
    """A directory above the mount made mode 000 does not hide the mount from the watcher."""
    v = name("parent")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/x/v", "rw"))
    code, _, err = s.sh(a, "chmod 000 /data/x /data && "
                           "dd if=/dev/zero of=/data/x/v/big bs=1M count=40 2>/dev/null; true")
    assert code == 0, err
    err = until_refused(s, a, "/data/x/v/after")
    assert REFUSED in err, err
    assert s.sh(a, "echo alive")[1] == "alive\n", "the sandbox itself is still usable"
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    print("parent: a mode-000 directory above the mount did not hide it")


def check_release(s):
    """Once usage falls back under the limit (files removed on the host) the volume is writable
    again in the sandbox that still mounts it. As a user only (as root the image gives the
    space back at once: test_volumes.py)."""
    if ROOT:
        return
    v = name("release")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/v", "rw"))
    s.sh(a, "dd if=/dev/zero of=/data/v/big bs=1M count=40 2>/dev/null; true")
    assert REFUSED in until_refused(s, a, "/data/v/after")
    data = [os.path.join(s.state, "volumes", d, "mnt", "data") for d in volume_dirs(s.state)]
    big = [os.path.join(d, "big") for d in data if os.path.exists(os.path.join(d, "big"))]
    assert len(big) == 1, big
    os.unlink(big[0])
    deadline, code = time.monotonic() + WAIT_S, 1
    while code != 0 and time.monotonic() < deadline:
        time.sleep(0.3)
        code = s.sh(a, "echo back > /data/v/back")[0]
    assert code == 0, "the volume stayed read-only under its limit"
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    print("release: writable again once the host removed the file")


def check_twice(s):
    """One volume mounted twice in one sandbox, ro first and rw second: the rw one is made
    read-only too (not only the first mount of the volume found), and, as a user, once usage
    falls back only the mount the watcher changed is writable again, not the one asked ro."""
    v = name("twice")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/a", "ro"), vol(v, "/data/b", "rw"))
    s.sh(a, "dd if=/dev/zero of=/data/b/big bs=1M count=40 2>/dev/null; true")
    err = until_refused(s, a, "/data/b/after")
    assert REFUSED in err, err
    if not ROOT:
        data = [os.path.join(s.state, "volumes", d, "mnt", "data") for d in volume_dirs(s.state)]
        for d in data:
            if os.path.exists(os.path.join(d, "big")):
                os.unlink(os.path.join(d, "big"))
        deadline, code = time.monotonic() + WAIT_S, 1
        while code != 0 and time.monotonic() < deadline:
            time.sleep(0.3)
            code = s.sh(a, "echo back > /data/b/back")[0]
        assert code == 0, "the rw mount stayed read-only under the limit"
        code, out, err = s.sh(a, "echo no > /data/a/no")
        assert code != 0 and "Read-only" in out + err, "the mount asked ro became writable"
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    print("twice: the rw mount of a volume mounted twice was held; the ro one stayed ro")


def check_deep(s):
    """Bytes below 300 nested directories (deeper than the walk goes): as a user the volume is
    counted as at its limit, never as empty. As root ext4 has no such depth limit: skipped."""
    if ROOT:
        return
    v = name("deep")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/v", "rw"))
    code, _, err = s.sh(a, "cd /data/v && i=0; while [ $i -lt 300 ]; do mkdir d && cd d || exit 1; "
                           "i=$((i+1)); done; echo x > f")
    if code == 0:  # all made before the watcher looked past level 256
        err = until_refused(s, a, "/data/v/after")
    assert REFUSED in err, err
    s.ok("destroy_sandbox", sandbox_id=a)
    s.volume("delete", name=v)
    print("deep: a volume deeper than the walk goes counted as at its limit")


def check_private(s):
    """Not an attack: a directory a sandbox keeps private (mode 700, as mkdtemp makes) under the
    limit neither makes the volume read-only nor stops a later rw mount of it."""
    v = name("private")
    s.volume("create", name=v, size_bytes=32 * MIB)
    a = s.create(vol(v, "/data/v", "rw"))
    code, _, err = s.sh(a, "mkdir -m 700 /data/v/p && echo x > /data/v/p/f && "
                           "mkdir -m 000 /data/v/q && sleep 2 && echo y > /data/v/y")
    assert code == 0, f"a private directory made the volume refuse writes: {err}"
    s.ok("destroy_sandbox", sandbox_id=a)
    b = s.create(vol(v, "/data/v", "rw"))
    code, _, err = s.sh(b, "sleep 2 && echo z > /data/v/z")
    assert code == 0, err
    s.ok("destroy_sandbox", sandbox_id=b)
    s.volume("delete", name=v)
    print("private: mode 700 and 000 directories under the limit left the volume writable")


CHECKS = {"fill": check_fill, "held": check_held, "entries": check_entries,
          "sparse": check_sparse, "links": check_links, "hidden": check_hidden,
          "dodge": check_dodge, "parent": check_parent_hidden, "release": check_release,
          "twice": check_twice, "deep": check_deep,
          "private": check_private}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--check", choices=sorted(CHECKS))
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="mcpbox-volquota-")
    os.chmod(base, 0o755)
    s = Serve(args.mcpbox, os.path.join(base, "state"))
    try:
        err, _, text = s.tool("create_sandbox")
        if err:
            print(f"SKIP: local sandboxes cannot run here: {text}")
            return SKIP
        s.ok("destroy_sandbox", sandbox_id=_["sandbox_id"])
        for key, fn in CHECKS.items():
            if args.check in (None, key):
                fn(s)
    finally:
        s.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
