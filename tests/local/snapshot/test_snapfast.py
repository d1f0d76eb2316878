#!/usr/bin/env python3
"""Fork streamed (issue 36's speed): the source's files read once and written into every copy
at once through pipes (backend/local/local_fork_stream.c), through the real server over stdio.

 stream   a hostile source (links out, a fifo, setuid files, a flood of files, 20 MB of random
          bytes, a renamer racing the read) forked into four: every copy gets the same bytes,
          follows no link out (its /etc untouched), no setuid bit; the source runs on; no layer
          file is left in the image store.
 limits   a sparse file far past the source's disk: the fork is refused with what to do, no copy
          is left, the source is thawed and runs; a source whose files nearly fill its disk is
          copied whole (each copy has the source's disk).
 race     two forks of one source at once both whole; a fork racing the source's destroy is
          whole or refused, never a copy left behind from a failed one.
 spare    the helper exec'd ahead (snapshot_helper_spare.c): one waits, holding only its own
          fds; killed, the next restore starts a cold one and is whole; a fork takes it and
          starts the rest cold; none outlives the server.

Runs as root and, through tests/local/rootless, as an ordinary user.
usage: test_snapfast.py --mcpbox PATH --check stream|limits|race|spare   (77: cannot run here)
"""
import glob
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_snapshots import at_once, run_check, sandboxes  # noqa: E402

HOSTILE = ("ln -s /etc /workspace/etc-link && ln -s /proc/1/root /workspace/root-link && "
           "mkfifo /tmp/fifo && cp /bin/true /workspace/suid && "
           "(chmod u+s,g+s /workspace/suid 2>/dev/null; true) && "
           "mkdir /workspace/flood && cd /workspace/flood && "
           "for i in $(seq 1 2000); do : > f$i; done && "
           "head -c 20000000 /dev/urandom > /workspace/big && echo ok")
LOOK = ("readlink /workspace/etc-link; readlink /workspace/root-link; ls /workspace/flood | wc -l; "
        "test -p /tmp/fifo && echo fifo; find /workspace -perm /6000 | wc -l; "
        "md5sum < /workspace/big | cut -d' ' -f1; md5sum < /etc/passwd | cut -d' ' -f1")


def fork(s, src, count):
    out = s.ok("snapshot_sandbox", action="fork", sandbox_id=src, count=count)
    copies = [x["sandbox_id"] for x in out["sandboxes"]]
    assert len(set(copies)) == count and src not in copies, out
    return copies


def layers_left(s):
    return glob.glob(os.path.join(s.state, "image-store", "blobs", "sha256", "*"))


def check_stream(s):
    src = s.ok("create_sandbox", memory="512MiB")["sandbox_id"]
    code, out, err = s.sh(src, HOSTILE)
    assert code == 0 and out.strip() == "ok", err
    _, want, _ = s.sh(src, LOOK)
    runner = s.ok("run_command", sandbox_id=src, background=True,
                  command="while :; do ln -sfn /etc /workspace/a; mv /workspace/a /workspace/b "
                          "2>/dev/null; done")
    copies = fork(s, src, 4)
    for c in copies:
        _, got, _ = s.sh(c, LOOK)
        # the same files; /etc is the copy's own image's, untouched through any link
        assert got.split()[:6] == ["/etc", "/proc/1/root", "2000", "fifo", "0",
                                   want.split()[5]], (c, got, want)
        assert got.split()[6] == want.split()[6], (c, got)
    st = s.ok("get_command", sandbox_id=src, command_id=runner["command_id"])
    assert st["status"] == "running", st
    assert layers_left(s) == [], layers_left(s)
    assert s.ok("snapshot_sandbox", action="list")["snapshots"] == []
    print("stream: four copies of a hostile source with the same bytes, no link followed, no "
          "setuid bit; the source ran on; no layer left")


def check_limits(s):
    src = s.ok("create_sandbox", disk="64MiB")["sandbox_id"]
    code, _, err = s.sh(src, "truncate -s 2G /workspace/sparse && echo x > /workspace/small")
    assert code == 0, err
    before = sandboxes(s)
    s.refused("snapshot_sandbox", ["sparse", "fork again"], action="fork", sandbox_id=src,
              count=3)
    assert sandboxes(s) == before, (sandboxes(s), before)
    _, out, _ = s.sh(src, "cat /workspace/small")  # thawed: it answers
    assert out == "x\n", out
    # A copy has the source's disk: a source whose files nearly fill it is copied whole.
    s.sh(src, "rm /workspace/sparse && head -c 40000000 /dev/urandom > /workspace/fill")
    copies = fork(s, src, 2)
    for c in copies:
        _, out, _ = s.sh(c, "stat -c %s /workspace/fill")
        assert out.strip() == "40000000", out
    assert layers_left(s) == []
    print("limits: a sparse file past twice the disk refused with no copy left and the source "
          "thawed; a full disk copied whole")


def check_race(s):
    src = s.ok("create_sandbox")["sandbox_id"]
    s.sh(src, "head -c 10000000 /dev/urandom > /workspace/r")
    _, want, _ = s.sh(src, "md5sum < /workspace/r")
    fork_args = {"action": "fork", "sandbox_id": src, "count": 2}
    ra, rb = at_once(s, [("snapshot_sandbox", fork_args), ("snapshot_sandbox", fork_args)])
    assert not ra.get("isError") and not rb.get("isError"), (ra, rb)
    for r in (ra, rb):
        for x in r["structuredContent"]["sandboxes"]:
            _, got, _ = s.sh(x["sandbox_id"], "md5sum < /workspace/r")
            assert got == want, (x, got)
    for _ in range(3):
        victim = s.ok("create_sandbox")["sandbox_id"]
        s.sh(victim, "head -c 10000000 /dev/urandom > /workspace/r")
        before = set(sandboxes(s)) - {victim}
        rf, _ = at_once(s, [("snapshot_sandbox", {"action": "fork", "sandbox_id": victim,
                                                  "count": 3}),
                            ("destroy_sandbox", {"sandbox_id": victim})])
        after = set(sandboxes(s))
        if rf.get("isError"):
            assert after == before, (after - before, rf)
        else:
            made = {x["sandbox_id"] for x in rf["structuredContent"]["sandboxes"]}
            assert after == before | made, (after, before, made)
    assert layers_left(s) == []
    print("race: two forks at once whole; a fork racing a destroy whole or refused, nothing "
          "left behind")


def spares(pid, want=None):
    """The waiting spare helpers of the server pid (snapshot_helper_spare.c); polled a while
    for want of them (one is exec'd while the job that took the last one runs)."""
    for _ in range(500):  # 10 s: an ASan build starts slowly on a loaded machine
        out = spares_now(pid)
        if want is None or len(out) == want:
            break
        time.sleep(0.02)
    return out


def spares_now(pid):
    out = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(d + "/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and argv[1:3] == [b"__snapshot-helper", b"wait"]:
            out.append(int(d[6:]))
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check_spare(s):
    src = s.ok("create_sandbox")["sandbox_id"]
    # past the small-layer size: a restore of it takes the helper (a smaller one is written by
    # the new sandbox's setup itself and leaves the spare alone: test_snapinit.py)
    s.sh(src, "echo spare > /workspace/f && head -c 400000 /dev/urandom > /workspace/pad")
    snap_id = s.ok("snapshot_sandbox", action="create", sandbox_id=src)["snapshot_id"]
    waiting = spares(s.proc.pid, 1)
    assert len(waiting) == 1, waiting  # made while the snapshot's helper worked
    links = {}
    for f in os.listdir(f"/proc/{waiting[0]}/fd"):
        try:
            links[f] = os.readlink(f"/proc/{waiting[0]}/fd/{f}")
        except OSError:
            pass  # closed while listed
    # A sanitizer's runtime reads /proc/PID/maps now and then (ASan builds): not the helper's.
    fds = sorted((f for f, t in links.items() if not re.fullmatch(r"/proc/\d+/maps", t)), key=int)
    # its socket, /dev/null, its error pipe: no copy of another fd (a helper once kept them)
    assert fds == ["0", "1", "2", "3", "4"], sorted(links.items())
    for _ in range(2):  # the spare taken, and one killed: a cold helper does the job
        new = s.ok("create_sandbox", snapshot_id=snap_id)["sandbox_id"]
        _, out, _ = s.sh(new, "cat /workspace/f")
        assert out == "spare\n", out
        killed = spares(s.proc.pid, 1)
        assert len(killed) == 1, killed
        os.kill(killed[0], signal.SIGKILL)
        for _ in range(100):  # dead (its socket closed) before the next restore sends to it
            if not alive(killed[0]):
                break
            time.sleep(0.01)
    copies = fork(s, src, 3)
    for c in copies:
        _, out, _ = s.sh(c, "cat /workspace/f")
        assert out == "spare\n", out
    waiting = spares(s.proc.pid, 1)
    assert len(waiting) == 1, waiting
    s.close()
    for _ in range(100):  # PR_SET_PDEATHSIG: gone (or a zombie for its new parent) with the server
        if not any(alive(p) for p in waiting):
            break
        time.sleep(0.02)
    assert not any(alive(p) for p in waiting), waiting
    print("spare: one helper waiting with nothing but its own fds; a killed one replaced by a "
          "cold start; none left after the server")


def main():
    return run_check("snapfast", ["stream", "limits", "race", "spare"], globals())


if __name__ == "__main__":
    sys.exit(main())
