#!/usr/bin/env python3
"""Snapshots, restore and fork of local sandboxes (issue 36), through the real server over stdio.

 basic    snapshot a sandbox while a command runs in it (it keeps running: frozen, then thawed),
          list, get; create_sandbox {snapshot_id} brings back /workspace, /tmp and /root with
          their modes and owners, the snapshot's env and limits; the source is untouched;
          identical states share one layer; delete; another owner sees none of it.
 errors   bad and unknown ids, a destroyed sandbox, a restore into a disk smaller than the
          snapshot (the sandbox it made is gone, the snapshot still there), a damaged layer in
          the store, a full store (cap), and no half-written snapshot ever listed.
 hostile  a sandbox that plants links, fifos, setuid files, a host mount and a flood of files,
          and races the snapshot with renames: the snapshot holds only its own files, the restore
          follows no link out, and no setuid bit comes back.
 fork     fork_sandbox: N copies of a live sandbox, each its own id, files and limits; the source
          keeps running and a write in one copy shows in no other.

Runs as root and, through tests/local/rootless, as an ordinary user.
usage: test_snapshots.py --mcpbox PATH --check basic|errors|hostile|fork   (77: cannot run here)
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SKIP = 77


class Serve(Client):
    def __init__(self, mcpbox, state, extra=(), env=None):
        super().__init__(serve_argv(mcpbox, state, "--local-pool", 0, *extra),
                         stderr=subprocess.DEVNULL, cwd="/", env=env)
        self.initialize("snapshot-test")

    def tool(self, tool_name, **args):
        res = self.call_tool(tool_name, args)
        return res.get("isError", False), res.get("structuredContent"), result_text(res)

    def ok(self, tool_name, **args):
        err, out, text = self.tool(tool_name, **args)
        assert not err, f"{tool_name} {args}: {text}"
        return out

    def refused(self, name, words, **args):
        err, _, text = self.tool(name, **args)
        assert err, f"{name} {args} was accepted"
        for w in words:
            assert w in text, f"{name} {args}: {w!r} not in {text!r}"
        print(f"  refused {name}: {text[:150]}")
        return text

    def sh(self, sid, command):
        out = self.ok("run_command", sandbox_id=sid, command=command)
        return out["exit_code"], out.get("stdout", ""), out.get("stderr", "")

    def close(self):
        super().close(timeout=60)


SETUP = ("mkdir -p /workspace/proj/sub && echo hello > /workspace/proj/a.txt && "
         "chmod 640 /workspace/proj/a.txt && ln -s a.txt /workspace/proj/link && "
         "echo tmpdata > /tmp/t.txt && echo rc > /root/.rc && mkfifo /workspace/fifo && "
         "head -c 300000 /dev/urandom > /workspace/proj/sub/big.bin && "
         "ln /workspace/proj/a.txt /workspace/proj/hard")
LOOK = ("cat /workspace/proj/a.txt /tmp/t.txt /root/.rc; readlink /workspace/proj/link; "
        "stat -c '%a %u' /workspace/proj/a.txt; test -p /workspace/fifo && echo fifo; "
        "md5sum < /workspace/proj/sub/big.bin; echo $SNAPVAR")


def snap(s, sid, name=None):
    args = {"action": "create", "sandbox_id": sid}
    if name:
        args["name"] = name
    out = s.ok("snapshot_sandbox", **args)
    assert out["state"] == "ready" and out["snapshot_id"].startswith("snap-"), out
    return out


def check_basic(s):
    src = s.ok("create_sandbox", env={"SNAPVAR": "v1"}, memory="256MiB")["sandbox_id"]
    code, _, err = s.sh(src, SETUP)
    assert code == 0, err
    _, want, _ = s.sh(src, LOOK)
    # A command that runs across the snapshot: it must not be killed, only paused.
    runner = s.ok("run_command", sandbox_id=src, background=True,
                  command="i=0; while [ $i -lt 40 ]; do i=$((i+1)); sleep 0.05; done; echo done")
    info = snap(s, src, "first")
    assert info["sandbox_id"] == src and info["name"] == "first", info
    assert "owner" not in info, info
    got = s.ok("snapshot_sandbox", action="get", snapshot_id=info["snapshot_id"])
    assert got["snapshot_id"] == info["snapshot_id"] and got["layer"] == info["layer"], got
    listed = s.ok("snapshot_sandbox", action="list")["snapshots"]
    assert [x["snapshot_id"] for x in listed] == [info["snapshot_id"]], listed
    st = s.ok("get_command", sandbox_id=src, command_id=runner["command_id"], wait_seconds=10)
    assert st["status"] == "exited" and st["exit_code"] == 0, st
    # The restore: the same files, modes, owners, env, limits.
    new = s.ok("create_sandbox", snapshot_id=info["snapshot_id"])
    assert new["sandbox_id"] != src and new.get("snapshot_id") == info["snapshot_id"], new
    # (a user without cgroups has no memory limit to report: the record still carries it)
    assert got["limits"]["memory_bytes"] == 256 << 20, got["limits"]
    assert new["limits"].get("memory_bytes", 256 << 20) == 256 << 20, new["limits"]
    _, got_look, _ = s.sh(new["sandbox_id"], LOOK)
    assert got_look == want, f"restored:\n{got_look}\nsource:\n{want}"
    _, links, _ = s.sh(new["sandbox_id"], "stat -c %h /workspace/proj/a.txt")
    assert links == "2\n", f"hard links restored as links: {links!r}"
    # Writes in the copy stay there; the source is untouched and still runs.
    s.sh(new["sandbox_id"], "echo changed > /workspace/proj/a.txt")
    _, a, _ = s.sh(src, "cat /workspace/proj/a.txt")
    assert a == "hello\n", a
    # The same state again shares the layer.
    again = snap(s, src)
    assert again["layer"] == info["layer"], (again, info)
    blobs = glob.glob(os.path.join(s.state, "image-store", "blobs", "sha256", "*"))
    assert len(blobs) == 1, blobs
    s.ok("snapshot_sandbox", action="delete", snapshot_id=again["snapshot_id"])
    assert len(glob.glob(os.path.join(s.state, "image-store", "blobs", "sha256", "*"))) == 1
    s.ok("snapshot_sandbox", action="delete", snapshot_id=info["snapshot_id"])
    assert glob.glob(os.path.join(s.state, "image-store", "blobs", "sha256", "*")) == []
    assert s.ok("snapshot_sandbox", action="list")["snapshots"] == []
    print(f"basic: snapshot of a sandbox with a command running, restored file for file "
          f"(hard links: {links.strip()}), layer shared and deleted")


def sandboxes(s):
    return sorted(x["sandbox_id"] for x in s.ok("list_sandboxes")["sandboxes"])


def store(s, *parts):
    return os.path.join(s.state, "image-store", *parts)


def tmp_left(s):
    return os.listdir(store(s, "tmp")) if os.path.isdir(store(s, "tmp")) else []


def check_errors(s):
    s.refused("snapshot_sandbox", ["sandbox_id"], action="create")
    s.refused("snapshot_sandbox", ["no snapshot"], action="get", snapshot_id="../../etc/passwd")
    s.refused("snapshot_sandbox", ["no snapshot"], action="delete", snapshot_id="snap-ffff")
    s.refused("create_sandbox", ["no snapshot"], snapshot_id="snap-0123")
    src = s.ok("create_sandbox")["sandbox_id"]
    code, _, err = s.sh(src, "head -c 12000000 /dev/urandom > /workspace/big && echo x > /tmp/x")
    assert code == 0, err
    info = snap(s, src)
    before = sandboxes(s)
    # Too small a disk for the snapshot: refused, the sandbox it made is gone, the snapshot kept.
    s.refused("create_sandbox", ["disk"], snapshot_id=info["snapshot_id"], disk="8m")
    assert sandboxes(s) == before, (sandboxes(s), before)
    assert s.ok("snapshot_sandbox", action="get", snapshot_id=info["snapshot_id"])
    # A damaged layer in the store: a clear error, no sandbox left, nothing else lost.
    blob = store(s, "blobs", "sha256", info["layer"][7:])
    with open(blob, "r+b") as f:
        f.seek(4096)
        f.write(b"\xff" * 4096)
    s.refused("create_sandbox", ["damaged"], snapshot_id=info["snapshot_id"])
    os.truncate(blob, 1000)
    s.refused("create_sandbox", ["damaged"], snapshot_id=info["snapshot_id"])
    os.unlink(blob)
    s.refused("create_sandbox", ["missing"], snapshot_id=info["snapshot_id"])
    assert sandboxes(s) == before
    s.ok("snapshot_sandbox", action="delete", snapshot_id=info["snapshot_id"])
    # Past twice its disk (a sparse file here), a snapshot stops with nothing left behind.
    sp = s.ok("create_sandbox", disk="64m")["sandbox_id"]
    s.sh(sp, "truncate -s 4G /workspace/sparse")
    s.refused("snapshot_sandbox", ["twice the sandbox's disk", "sparse"], action="create",
              sandbox_id=sp)
    assert tmp_left(s) == [], tmp_left(s)
    s.ok("destroy_sandbox", sandbox_id=sp)
    # A destroyed sandbox cannot be snapshotted.
    s.ok("destroy_sandbox", sandbox_id=src)
    s.refused("snapshot_sandbox", [src], action="create", sandbox_id=src)
    # The store's cap counts snapshots: over it, refused, nothing listed, nothing left in tmp/.
    s.close()
    env = dict(os.environ, MCPBOX_IMAGE_STORE_MAX_BYTES="4000000")
    t = Serve(s.mcpbox, s.state, env=env)
    t.state = s.state
    try:
        sid = t.ok("create_sandbox")["sandbox_id"]
        t.sh(sid, "head -c 6000000 /dev/urandom > /workspace/big")
        t.refused("snapshot_sandbox", ["image store is full", "MCPBOX_IMAGE_STORE_MAX_BYTES"],
                  action="create", sandbox_id=sid)
        assert t.ok("snapshot_sandbox", action="list")["snapshots"] == []
        assert tmp_left(t) == [], tmp_left(t)
        code, out, _ = t.sh(sid, "echo still")
        assert out == "still\n", out  # thawed after the failure
        t.sh(sid, "rm /workspace/big")
        # A tar far larger than the sandbox's disk (a sparse file, stored whole) stops at the
        # cap, at once, and leaves nothing behind.
        t.sh(sid, "truncate -s 20G /workspace/sparse")
        t0 = time.monotonic()
        t.refused("snapshot_sandbox", ["image store is full"], action="create", sandbox_id=sid)
        assert time.monotonic() - t0 < 20, "the snapshot ran on past the cap"
        assert tmp_left(t) == [] and t.ok("snapshot_sandbox", action="list")["snapshots"] == []
        t.sh(sid, "rm -f /workspace/sparse")
        # Hard links are links in the layer: 200 of a 1 MB file take 1 MB, not 200.
        t.sh(sid, "head -c 1000000 /dev/urandom > /workspace/f && "
                  "for i in $(seq 1 200); do ln /workspace/f /workspace/h$i; done")
        linked = snap(t, sid)
        assert linked["size_bytes"] < 2000000, linked
        t.ok("snapshot_sandbox", action="delete", snapshot_id=linked["snapshot_id"])
        assert snap(t, sid)["state"] == "ready"
    finally:
        t.close()
    print("errors: bad ids, a destroyed sandbox, a small disk, a damaged or missing layer and "
          "a full store all refused with nothing left behind")


def write_layer(s, info, members):
    """Replaces the snapshot's layer with a tar of members [(TarInfo, bytes|None)], and points
    its record at it (as a hostile hand on the store would)."""
    import hashlib
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for ti, data in members:
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    digest = hashlib.sha256(raw).hexdigest()
    with open(store(s, "blobs", "sha256", digest), "wb") as f:
        f.write(raw)
    rec_path = store(s, "snapshots", info["snapshot_id"] + ".json")
    with open(rec_path) as f:
        rec = json.load(f)
    rec["layer"] = "sha256:" + digest
    with open(rec_path, "w") as f:
        json.dump(rec, f)


def tinfo(name, kind=None, data=b"", link="", mode=0o644):
    import tarfile
    ti = tarfile.TarInfo(name)
    ti.type = kind or tarfile.REGTYPE
    ti.size = len(data) if ti.type == tarfile.REGTYPE else 0
    ti.linkname, ti.mode = link, mode
    return ti, data if ti.type == tarfile.REGTYPE else None


def check_hostile(s):
    import tarfile
    src = s.ok("create_sandbox")["sandbox_id"]
    plant = ("ln -s /etc /workspace/etc-link && ln -s /proc/1/root /workspace/root-link && "
             "mkfifo /tmp/fifo && (chmod 4755 /bin/true 2>/dev/null; true) && "
             "cp /bin/true /workspace/suid && (chmod u+s /workspace/suid 2>/dev/null; true) && "
             "mkdir /workspace/flood && cd /workspace/flood && "
             "for i in $(seq 1 3000); do : > f$i; done && echo ok")
    code, out, err = s.sh(src, plant)
    assert code == 0, err
    # A renamer racing the snapshot: frozen, it cannot swap anything mid-read.
    s.ok("run_command", sandbox_id=src, background=True,
         command="while :; do mv /workspace/a /workspace/b 2>/dev/null; "
                 "ln -sfn /etc /workspace/a; mv /workspace/b /workspace/a 2>/dev/null; done")
    info = snap(s, src)
    new = s.ok("create_sandbox", snapshot_id=info["snapshot_id"])["sandbox_id"]
    _, out, _ = s.sh(new, "readlink /workspace/etc-link; ls /workspace/flood | wc -l; "
                          "test -p /tmp/fifo && echo fifo; "
                          "find / -xdev -perm /6000 -path '/workspace/*' | wc -l")
    assert out.split() == ["/etc", "3000", "fifo", "0"], out
    before = sandboxes(s)
    # Hand-made layers: outside the writable space, "..", a link to walk through, a device.
    bad = [
        ([tinfo("etc/passwd", data=b"x")], "outside"),
        ([tinfo("workspace/../../etc/passwd", data=b"x")], "outside"),
        ([tinfo("/workspace/abs", data=b"x")], "outside"),
        ([tinfo("workspace/l", tarfile.SYMTYPE, link="/etc"),
          tinfo("workspace/l/x", data=b"x")], "restoring"),
        ([tinfo("workspace/h", tarfile.LNKTYPE, link="etc/shadow")], "outside"),
        ([tinfo("workspace/dev", tarfile.CHRTYPE)], "outside"),
    ]
    for members, word in bad:
        write_layer(s, info, members)
        s.refused("create_sandbox", [word], snapshot_id=info["snapshot_id"])
        assert sandboxes(s) == before, members
    # A setuid bit in a layer does not come back.
    write_layer(s, info, [tinfo("workspace/s", data=b"#!/bin/sh\n", mode=0o6755)])
    ok = s.ok("create_sandbox", snapshot_id=info["snapshot_id"])["sandbox_id"]
    _, out, _ = s.sh(ok, "stat -c %a /workspace/s")
    assert out.strip() == "755", out
    check_races(s)
    print("hostile: links, fifos, a flood and a racing renamer snapshotted as they are; layers "
          "reaching out refused with no sandbox left; setuid bits dropped; two snapshots at "
          "once, and a destroy racing a snapshot, leave only whole snapshots")


def at_once(s, calls):
    """tools/call of each (name, args) sent together; their results in order."""
    ids = [s.request("tools/call", s.tool_params(n, a)) for n, a in calls]
    res = s.replies(ids, "calls at once")
    return [res[i] for i in ids]


def check_races(s):
    a = s.ok("create_sandbox")["sandbox_id"]
    b = s.ok("create_sandbox")["sandbox_id"]
    s.sh(a, "head -c 20000000 /dev/urandom > /workspace/a")
    s.sh(b, "head -c 20000000 /dev/urandom > /workspace/b")
    ra, rb = at_once(s, [("snapshot_sandbox", {"action": "create", "sandbox_id": a}),
                         ("snapshot_sandbox", {"action": "create", "sandbox_id": b})])
    assert not ra.get("isError") and not rb.get("isError"), (ra, rb)
    sa, sb = ra["structuredContent"], rb["structuredContent"]
    assert sa["layer"] != sb["layer"] and sa["sandbox_id"] == a and sb["sandbox_id"] == b
    for snap_info, name in ((sa, "a"), (sb, "b")):
        new = s.ok("create_sandbox", snapshot_id=snap_info["snapshot_id"])["sandbox_id"]
        code, out, _ = s.sh(new, f"ls /workspace; test -e /workspace/{'b' if name == 'a' else 'a'}"
                                 " && echo mixed")
        assert out == f"{name}\n", (name, out)
    # A destroy racing a snapshot: the snapshot is whole or refused, never half there.
    c = s.ok("create_sandbox")["sandbox_id"]
    s.sh(c, "head -c 30000000 /dev/urandom > /workspace/c")
    rs, rd = at_once(s, [("snapshot_sandbox", {"action": "create", "sandbox_id": c}),
                         ("destroy_sandbox", {"sandbox_id": c})])
    assert not rd.get("isError"), rd
    listed = [x for x in s.ok("snapshot_sandbox", action="list")["snapshots"]
              if x["sandbox_id"] == c]
    if rs.get("isError"):
        assert listed == [], listed
        print(f"  snapshot racing destroy: refused: {result_text(rs)[:120]}")
    else:
        assert [x["snapshot_id"] for x in listed] == [rs["structuredContent"]["snapshot_id"]]
        new = s.ok("create_sandbox", snapshot_id=listed[0]["snapshot_id"])["sandbox_id"]
        _, out, _ = s.sh(new, "stat -c %s /workspace/c")
        assert out == "30000000\n", out
        print("  snapshot racing destroy: whole")
    assert tmp_left(s) == [], tmp_left(s)


def check_fork(s):
    src = s.ok("create_sandbox", env={"SNAPVAR": "f"}, memory="300MiB")["sandbox_id"]
    code, _, err = s.sh(src, SETUP)
    assert code == 0, err
    _, want, _ = s.sh(src, LOOK)
    runner = s.ok("run_command", sandbox_id=src, background=True,
                  command="sleep 1; echo survived")
    out = s.ok("snapshot_sandbox", action="fork", sandbox_id=src, count=3)
    copies = [x["sandbox_id"] for x in out["sandboxes"]]
    assert out["sandbox_id"] == src and len(set(copies)) == 3 and src not in copies, out
    for x in out["sandboxes"]:
        assert x["forked_from"] == src, x
        assert x["limits"].get("memory_bytes", 300 << 20) == 300 << 20, x  # (none: no cgroups)
    for i, c in enumerate(copies):
        _, got, _ = s.sh(c, LOOK)
        assert got == want, f"copy {c}:\n{got}\nsource:\n{want}"
        s.sh(c, f"echo copy{i} > /workspace/proj/a.txt")
    for i, c in enumerate(copies):
        _, a, _ = s.sh(c, "cat /workspace/proj/a.txt")
        assert a == f"copy{i}\n", (c, a)
    _, a, _ = s.sh(src, "cat /workspace/proj/a.txt")
    assert a == "hello\n", a
    st = s.ok("get_command", sandbox_id=src, command_id=runner["command_id"], wait_seconds=10)
    assert st["status"] == "exited" and st["exit_code"] == 0, st
    # Each copy has its own identity and life: destroying one leaves the others.
    s.ok("destroy_sandbox", sandbox_id=copies[0])
    _, a, _ = s.sh(copies[1], "echo alive")
    assert a == "alive\n"
    # Nothing is kept as a snapshot, and no layer stays behind.
    assert s.ok("snapshot_sandbox", action="list")["snapshots"] == []
    assert glob.glob(os.path.join(s.state, "image-store", "blobs", "sha256", "*")) == []
    s.refused("snapshot_sandbox", ["count"], action="fork", sandbox_id=src, count=17)
    s.refused("snapshot_sandbox", ["sbx-nope"], action="fork", sandbox_id="sbx-nope")
    print("fork: three copies with the source's files and limits, each its own; the source "
          "kept running")


def cli(s, *args, ok=True):
    r = subprocess.run([s.mcpbox, "sandbox", "--state-dir", s.state, *args],
                       capture_output=True, text=True, timeout=120)
    assert (r.returncode == 0) == ok, f"mcpbox sandbox {args}: {r.returncode} {r.stderr}"
    return r.stdout if ok else r.stderr


def check_cli(s):
    src = s.ok("create_sandbox")["sandbox_id"]
    s.sh(src, "echo from-cli > /workspace/c.txt")
    made = json.loads(cli(s, "snapshot", "create", src, "--name", "cli", "-o", "json"))
    sid = made["snapshot_id"]
    assert made["name"] == "cli" and made["state"] == "ready", made
    assert sid in cli(s, "snapshot", "ls") and sid in cli(s, "snapshot", "ls", src)
    assert json.loads(cli(s, "snapshot", "get", sid, "-o", "json"))["layer"] == made["layer"]
    new = cli(s, "snapshot", "restore", sid).strip()
    _, out, _ = s.sh(new, "cat /workspace/c.txt")
    assert out == "from-cli\n", out
    forks = cli(s, "snapshot", "fork", src, "--count", "2").split()
    assert len(forks) == 2 and all(f.startswith("sbx-") for f in forks), forks
    # mcpbox image ls shows snapshots beside images, counted in the store's usage.
    r = subprocess.run([s.mcpbox, "image", "--state-dir", s.state, "-o", "json", "ls"],
                       capture_output=True, text=True, timeout=60)
    listed = json.loads(r.stdout)
    assert [x["snapshot_id"] for x in listed["snapshots"]] == [sid], listed
    assert listed["store_bytes"] >= made["size_bytes"], listed
    r = subprocess.run([s.mcpbox, "image", "--state-dir", s.state, "ls"], capture_output=True,
                       text=True, timeout=60)
    assert sid in r.stdout and "snapshot" in r.stdout, r.stdout
    assert "no snapshot" in cli(s, "snapshot", "rm", "snap-0000", ok=False)
    cli(s, "snapshot", "rm", sid)
    assert sid not in cli(s, "snapshot", "ls")
    print("cli: snapshot create, ls, get, restore, fork, rm; image ls lists snapshots")


def run_check(prefix, checks, scope, allow_dir=False):
    """The main of the snapshot tests: --mcpbox and --check NAME (one of checks) run
    scope["check_" + NAME] against a server of its own on fresh state, removed after; with
    allow_dir, the server may mount BASE/allowed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--check", required=True, choices=checks)
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="mcpbox-%s-" % prefix, dir="/tmp")
    os.chmod(base, 0o755)
    state = os.path.join(base, "state")
    extra = ()
    if allow_dir:
        os.makedirs(os.path.join(base, "allowed"))
        extra = ("--allow-dir", os.path.join(base, "allowed"))
    try:
        s = Serve(a.mcpbox, state, extra=extra)
        s.mcpbox, s.state, s.base = a.mcpbox, state, base
        try:
            err, _, text = s.tool("create_sandbox")
            if err and "unsupported" in text.lower():
                print(f"SKIP: {text}")
                return SKIP
            scope["check_" + a.check](s)
        finally:
            if s.proc.stdin and not s.proc.stdin.closed:
                s.close()
    finally:
        subprocess.run([a.mcpbox, "sandbox", "--state-dir", state, "rm", "--all"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


def main():
    return run_check("snap", ["basic", "errors", "hostile", "fork", "cli"], globals())


if __name__ == "__main__":
    sys.exit(main())
