#!/usr/bin/env python3
"""A small snapshot written by the new sandbox's own setup, no helper (issue 36's restore speed;
backend/local/snapshot_inline.h). Through the real server over stdio.

 path     a small restore leaves the spare helper waiting, untouched (no helper took a job), and
          brings back files, links, a fifo, a hard link, a read-only directory with a file in
          it, modes and times; two restores of it at once are both whole; a set-id file comes
          back without its set-id bits (a setgid directory keeps its bit, as the helper's does).
 hostile  small layers a hostile hand put in the store, through this path: a symlink to a host
          directory then a file through it, a hard link through such a symlink, a name with "..",
          an absolute name, a device node, a hard link out of the three directories, a layer
          whose bytes no longer match its digest: each refused with a clear error, no sandbox
          left, nothing written on the host, the spare untouched.
 mounts   a restore into a sandbox with a copy-on-write mount and a named volume mount below
          /workspace: the layer's files and the mounts' both there, the host directory and the
          volume unchanged.

Runs as root and, through tests/local/rootless, as an ordinary user.
usage: test_snapinit.py --mcpbox PATH --check path|hostile|mounts   (77: cannot run here)
"""
import hashlib
import os
import sys
import tarfile
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_snapfast import spares, spares_now  # noqa: E402
from test_snapshots import at_once, run_check, sandboxes, tinfo, write_layer  # noqa: E402

FILES = ("mkdir -p /workspace/p/ro && echo one > /workspace/p/a && ln -s a /workspace/p/link && "
         "ln /workspace/p/a /workspace/p/hard && mkfifo /tmp/fifo && echo r > /root/r && "
         "echo in > /workspace/p/ro/f && chmod 555 /workspace/p/ro && chmod 640 /workspace/p/a && "
         "touch -d 2001-02-03T04:05:06 /workspace/p/a")
LOOK = ("cat /workspace/p/a /workspace/p/ro/f /root/r; readlink /workspace/p/link; "
        "stat -c '%a %h %Y' /workspace/p/a; stat -c %a /workspace/p/ro; "
        "test -p /tmp/fifo && echo fifo")


def snap_of(s, sid):
    return s.ok("snapshot_sandbox", action="create", sandbox_id=sid)["snapshot_id"]


def one_spare(s):
    """The spare helper's pid, once one waits (made after the snapshot's helper worked)."""
    waiting = spares(s.proc.pid, 1)
    assert len(waiting) == 1, waiting
    return waiting[0]


def check_path(s):
    src = s.ok("create_sandbox")["sandbox_id"]
    code, _, err = s.sh(src, FILES)
    assert code == 0, err
    _, want, _ = s.sh(src, LOOK)
    snap = snap_of(s, src)
    spare = one_spare(s)
    new = s.ok("create_sandbox", snapshot_id=snap)["sandbox_id"]
    assert spares_now(s.proc.pid) == [spare], (spares_now(s.proc.pid), spare)
    _, got, _ = s.sh(new, LOOK)
    assert got == want, f"restored:\n{got}\nsource:\n{want}"
    assert "640 2 981173106" in got and "\n555\n" in got, got
    calls = [("create_sandbox", {"snapshot_id": snap})] * 2
    for r in at_once(s, calls):
        assert not r.get("isError"), r
        _, got, _ = s.sh(r["structuredContent"]["sandbox_id"], LOOK)
        assert got == want, got
    assert spares_now(s.proc.pid) == [spare], (spares_now(s.proc.pid), spare)
    info = {"snapshot_id": snap}
    write_layer(s, info, [tinfo("workspace/suid", data=b"#!/bin/sh\n", mode=0o6755),
                          tinfo("workspace/sgid", tarfile.DIRTYPE, mode=0o2775)])
    new = s.ok("create_sandbox", snapshot_id=snap)["sandbox_id"]
    _, got, _ = s.sh(new, "stat -c %a /workspace/suid /workspace/sgid")
    assert got == "755\n2775\n", got
    print("path: small restores by the setup (the spare left waiting), whole, two at once; "
          "set-id bits dropped from files")


def host_victim(s):
    d = os.path.join(s.base, "victim")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "secret"), "w") as f:
        f.write("host\n")
    return d


def tree(d):
    return sorted((r, sorted(fs)) for r, _, fs in os.walk(d))


def check_hostile(s):
    src = s.ok("create_sandbox")["sandbox_id"]
    s.sh(src, "echo x > /workspace/x")
    info = {"snapshot_id": snap_of(s, src)}
    spare = one_spare(s)
    victim = host_victim(s)
    absolute = f"/tmp/mcpbox-snapinit-{uuid.uuid4().hex[:8]}"
    with open("/etc/passwd", "rb") as f:
        passwd = hashlib.sha256(f.read()).hexdigest()
    host_before, before = tree(victim), sandboxes(s)
    layers = {
        "a symlink then a file through it": ([
            tinfo("workspace/l", tarfile.SYMTYPE, link=victim),
            tinfo("workspace/l/planted", data=b"x")], ["restoring the snapshot failed"]),
        "a relative symlink then a file through it": ([
            tinfo("workspace/up", tarfile.SYMTYPE, link="../../../../../../../../etc"),
            tinfo("workspace/up/passwd", data=b"x")], ["restoring the snapshot failed"]),
        "a hard link through a symlink": ([
            tinfo("workspace/l", tarfile.SYMTYPE, link=victim),
            tinfo("workspace/h", tarfile.LNKTYPE, link="workspace/l/secret")],
            ["restoring the snapshot failed"]),
        "a name with ..": ([tinfo("workspace/../../../../tmp/dotdot", data=b"x")],
                           ["outside /workspace", "delete that snapshot"]),
        "an absolute name": ([tinfo(absolute, data=b"x")], ["outside /workspace"]),
        "a device node": ([tinfo("workspace/null", tarfile.CHRTYPE)], ["of a kind not restored"]),
        "a hard link out": ([tinfo("workspace/pw", tarfile.LNKTYPE, link="etc/passwd")],
                            ["outside /workspace"]),
    }
    for what, (members, words) in layers.items():
        write_layer(s, info, members)
        s.refused("create_sandbox", words, snapshot_id=info["snapshot_id"])
        assert sandboxes(s) == before, (what, sandboxes(s), before)
    write_layer(s, info, [tinfo("workspace/ok", data=b"fine")])
    rec = os.path.join(s.state, "image-store", "snapshots", info["snapshot_id"] + ".json")
    with open(rec) as f:
        layer = f.read().split('"sha256:')[1].split('"')[0]
    path = os.path.join(s.state, "image-store", "blobs", "sha256", layer)
    with open(path, "r+b") as f:  # the file's data: a tar has no checksum on it
        f.seek(1536)
        f.write(b"F")
    s.refused("create_sandbox", ["damaged", "delete the snapshot"], snapshot_id=info["snapshot_id"])
    assert sandboxes(s) == before, (sandboxes(s), before)
    assert tree(victim) == host_before, tree(victim)
    assert not os.path.exists(absolute) and not os.path.exists("/tmp/dotdot")
    with open("/etc/passwd", "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == passwd, "/etc/passwd changed"
    assert spares_now(s.proc.pid) == [spare], (spares_now(s.proc.pid), spare)
    print(f"hostile: {len(layers) + 1} hostile small layers refused, nothing left or written")


def check_mounts(s):
    proj = os.path.join(s.base, "allowed", "proj")
    os.makedirs(proj)
    with open(os.path.join(proj, "host.txt"), "w") as f:
        f.write("host\n")
    host_before = tree(proj)
    src = s.ok("create_sandbox")["sandbox_id"]
    code, _, err = s.sh(src, "mkdir -p /workspace/app && echo snap > /workspace/app/fromsnap && "
                             "echo top > /workspace/top")
    assert code == 0, err
    snap = snap_of(s, src)
    name = "snapinit" + uuid.uuid4().hex[:6]
    s.ok("volume", action="create", name=name)
    w = s.ok("create_sandbox", mounts=[{"volume": name, "target": "/workspace/vol", "mode": "rw"}])
    s.sh(w["sandbox_id"], "echo vol > /workspace/vol/v")
    s.ok("destroy_sandbox", sandbox_id=w["sandbox_id"])
    new = s.ok("create_sandbox", snapshot_id=snap, mounts=[
        {"source": proj, "target": "/workspace/app", "mode": "copy-on-write"},
        {"volume": name, "target": "/workspace/vol", "mode": "ro"}])["sandbox_id"]
    code, got, err = s.sh(new, "cat /workspace/top /workspace/app/fromsnap /workspace/app/host.txt "
                               "/workspace/vol/v; ls /workspace/vol")
    assert code == 0 and got == "top\nsnap\nhost\nvol\nv\n", (code, got, err)
    assert tree(proj) == host_before, tree(proj)
    print("mounts: a restore under a copy-on-write mount and a volume: both there, the host and "
          "the volume unchanged")


def main():
    return run_check("snapinit", ["path", "hostile", "mounts"], globals(), allow_dir=True)


if __name__ == "__main__":
    sys.exit(main())
