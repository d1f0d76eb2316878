#!/usr/bin/env python3
"""Restore and fork made cheaper (issue 36's two speed targets; docs/local-backend.md, "Snapshots
and forks"): a helper that says it is done is answered at once and reaped later, the spare is
refilled after the answer, and a fork of one copy is spliced pipe to pipe. Through the real
server over stdio.

 again    a restored sandbox is snapshotted again and forked, and its files are whole in both;
          the snapshot it came from deleted while it runs: it keeps its files, and its own
          snapshot still restores; two restores of one snapshot at once are both whole.
 reap     restores, snapshots and forks, then no helper left behind: none a zombie of the
          server, none running, whatever the order (the reaping is deferred past the answer).
 small    a layer small enough to restore from the server's loop (checked whole against its
          digest first, then handed to the helper in one pipe) and one just too large for it
          (streamed by a worker), two of each at once, all whole; a small layer damaged in the
          store, and one that writes through a link, refused with no sandbox left.
 one      a fork of one copy (the spliced path) of a hostile source: the same bytes, no link
          followed out, no setuid bit, the fifo kept; a sparse file past twice its disk is
          refused with no copy left and the source thawed; a failed restore is never answered
          as done (a disk too small: refused, the sandbox it made gone).

Runs as root and, through tests/local/rootless, as an ordinary user.
usage: test_snaplower.py --mcpbox PATH --check again|reap|one|small   (77: cannot run here)
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_snapfast import HOSTILE, LOOK, fork, layers_left  # noqa: E402
from test_snapshots import at_once, run_check, sandboxes, tinfo, write_layer  # noqa: E402

FILES = ("mkdir -p /workspace/p && head -c 3000000 /dev/urandom > /workspace/p/big && "
         "echo t > /tmp/t && echo r > /root/r && ln -s big /workspace/p/link")
SUM = "md5sum < /workspace/p/big; cat /tmp/t /root/r; readlink /workspace/p/link"


def snap_of(s, sid):
    return s.ok("snapshot_sandbox", action="create", sandbox_id=sid)["snapshot_id"]


def check_again(s):
    src = s.ok("create_sandbox")["sandbox_id"]
    code, _, err = s.sh(src, FILES)
    assert code == 0, err
    _, want, _ = s.sh(src, SUM)
    first = snap_of(s, src)
    restored = s.ok("create_sandbox", snapshot_id=first)["sandbox_id"]
    s.ok("snapshot_sandbox", action="delete", snapshot_id=first)
    _, got, _ = s.sh(restored, SUM)
    assert got == want, (got, want)
    s.sh(restored, "echo second > /workspace/p/new")
    second = snap_of(s, restored)
    for sid in [s.ok("create_sandbox", snapshot_id=second)["sandbox_id"]] + fork(s, restored, 2):
        _, got, _ = s.sh(sid, SUM + "; cat /workspace/p/new")
        assert got == want + "second\n", (sid, got)
    calls = [("create_sandbox", {"snapshot_id": second})] * 2
    both = at_once(s, calls)
    ids = set()
    for r in both:
        assert not r.get("isError"), r
        ids.add(r["structuredContent"]["sandbox_id"])
    assert len(ids) == 2, ids
    for sid in ids:
        _, got, _ = s.sh(sid, SUM + "; cat /workspace/p/new")
        assert got == want + "second\n", (sid, got)
    print("again: a restored sandbox snapshotted and forked whole; its snapshot deleted under "
          "it; two restores at once whole")


def helpers(pid):
    """The server's snapshot helpers other than the waiting spare: (pid, state) each."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if int(fields[1]) != pid:
            continue
        if fields[0] == "Z" or argv[1:2] == [b"__snapshot-helper"] and argv[2:3] != [b"wait"]:
            out.append((int(d), fields[0]))
    return out


def check_reap(s):
    src = s.ok("create_sandbox")["sandbox_id"]
    s.sh(src, FILES)
    snap = snap_of(s, src)
    made = []
    for _ in range(6):
        made.append(s.ok("create_sandbox", snapshot_id=snap)["sandbox_id"])
    made += fork(s, src, 1) + fork(s, src, 3)
    snap_of(s, made[0])
    for sid in made[:3]:
        _, got, _ = s.sh(sid, "cat /tmp/t")
        assert got == "t\n", got
    left = helpers(s.proc.pid)
    for _ in range(250):  # the last answer's refill reaps what is left: it runs after it
        if not left:
            break
        time.sleep(0.02)
        left = helpers(s.proc.pid)
    assert left == [], left
    print("reap: no helper left, zombie or running, after restores, snapshots and forks")


def check_one(s):
    src = s.ok("create_sandbox", memory="512MiB")["sandbox_id"]
    code, out, err = s.sh(src, HOSTILE)
    assert code == 0 and out.strip() == "ok", err
    _, want, _ = s.sh(src, LOOK)
    (copy,) = fork(s, src, 1)
    _, got, _ = s.sh(copy, LOOK)
    assert got.split()[:6] == ["/etc", "/proc/1/root", "2000", "fifo", "0", want.split()[5]], got
    assert got.split()[6] == want.split()[6], got  # /etc/passwd: the copy's own, untouched
    assert layers_left(s) == []
    small = s.ok("create_sandbox", disk="64MiB")["sandbox_id"]
    code, _, err = s.sh(small, "truncate -s 2G /workspace/sparse && echo x > /workspace/x")
    assert code == 0, err
    before = sandboxes(s)
    s.refused("snapshot_sandbox", ["sparse", "fork again"], action="fork", sandbox_id=small,
              count=1)
    assert sandboxes(s) == before, (sandboxes(s), before)
    _, out, _ = s.sh(small, "cat /workspace/x")
    assert out == "x\n", out
    snap = snap_of(s, src)  # 20 MB of random bytes: more than a 16 MiB disk holds
    s.refused("create_sandbox", ["disk"], snapshot_id=snap, disk="16MiB")
    assert sandboxes(s) == before, (sandboxes(s), before)
    print("one: a fork of one copy of a hostile source whole and safe; a sparse one refused; a "
          "failed restore refused, nothing left")


def check_small(s):
    import tarfile
    src = s.ok("create_sandbox")["sandbox_id"]
    sums = {}
    for size in (200000, 300000):  # a layer below RESTORE_SMALL_MAX (256 KiB) and one above it
        s.sh(src, f"rm -f /workspace/b; head -c {size} /dev/urandom > /workspace/b; "
                  "echo s > /tmp/s")
        _, want, _ = s.sh(src, "md5sum < /workspace/b; cat /tmp/s")
        sums[snap_of(s, src)] = want
    calls = [("create_sandbox", {"snapshot_id": snap}) for snap in sums for _ in range(2)]
    for (_, args), r in zip(calls, at_once(s, calls)):
        assert not r.get("isError"), r
        _, got, _ = s.sh(r["structuredContent"]["sandbox_id"], "md5sum < /workspace/b; cat /tmp/s")
        assert got == sums[args["snapshot_id"]], (args, got)
    before = sandboxes(s)
    info = {"snapshot_id": next(iter(sums))}
    layer = os.path.join(s.state, "image-store", "blobs", "sha256", s.ok(
        "snapshot_sandbox", action="get", snapshot_id=info["snapshot_id"])["layer"][7:])
    with open(layer, "r+b") as f:  # one byte of file data flipped: a tar has no checksum on it
        f.seek(5000)
        b = f.read(1)
        f.seek(5000)
        f.write(bytes([b[0] ^ 0xFF]))
    s.refused("create_sandbox", ["damaged", "delete the snapshot"], snapshot_id=info["snapshot_id"])
    assert sandboxes(s) == before, (sandboxes(s), before)
    write_layer(s, info, [tinfo("workspace/f", tarfile.FIFOTYPE), tinfo("workspace/l",
                          tarfile.SYMTYPE, link="/etc"), tinfo("workspace/l/passwd", data=b"x")])
    s.refused("create_sandbox", ["restoring"], snapshot_id=info["snapshot_id"])
    assert sandboxes(s) == before, (sandboxes(s), before)
    print("small: layers either side of the small-layer size whole, two of each at once; a "
          "damaged small layer and one writing through a link refused, nothing left")


def main():
    return run_check("snaplower", ["again", "reap", "one", "small"], globals())


if __name__ == "__main__":
    sys.exit(main())
