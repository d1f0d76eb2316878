#!/usr/bin/env python3
"""A hostile or careless sandbox against review_changes and apply_changes (issue 32, items 4, 5
and 6), through the real server over stdio.

 race    (item 6) two sandboxes reviewed at once, one of them unchanged (its files copied up but
         equal): the unchanged one must never show a "modified" file, in any round.
 memory  (item 5) one 8 MB file of empty lines plus 48 hard links to it in a sandbox: a review
         page must come back quickly and the server's peak memory (VmHWM) must grow by a
         bounded amount; each link after the first is said to be the same as the first.
 bounds  (item 5, and beyond it) thousands of new files give a review and an apply result of a
         bounded size, the rest counted; a tree too deep to walk gives a short, clear error.
 digest  (item 4) code in the sandbox watches its file's atime and swaps the contents once the
         review has read it: an apply with the review's token refuses that file and leaves the
         host file as it was; an apply with no token is refused; a server started with
         --apply-unreviewed applies without one.

Runs as root and, through tests/local/rootless, as an ordinary user.
usage: test_ws_review.py --mcpbox PATH --check race|memory|digest|bounds   (exit 77: cannot run here)
"""
import argparse
import base64
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_mounts import Serve, own, run_served  # noqa: E402

RACE_FILES = 64
RACE_FILE_BYTES = 96 * 1024  # more than the 64 KiB a compare reads at once
RACE_ROUNDS = 8


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


WIDE_FILES = 3000
RESULT_BYTES_MAX = 40 * 1024  # a 16 KiB list, a 16 KiB diff page, and the rest
DEPTH = 300  # more than the 256 directories a review walks


def check_bounds(s, base, allowed):
    """A wide change (thousands of new files) gives a result an agent can take in, with the rest
    counted; a tree deeper than a review walks gives a short error that says what to do."""
    proj = os.path.join(allowed, "w")
    os.makedirs(proj)
    own(proj)
    time.sleep(0.1)
    sid = s.create([{"source": proj, "target": "/workspace/w"}])
    code, _, err = s.sh(sid, "mkdir /workspace/w/many && cd /workspace/w/many && "
                             f"for i in $(seq {WIDE_FILES}); do echo $i > f$i; done")
    assert code == 0, err
    err_, out, text = s.tool("review_changes", sandbox_id=sid)
    assert not err_, text[:400]
    print(f"bounds: review of {WIDE_FILES + 1} changes: {len(text)} bytes, "
          f"{len(out['changes'])} listed")
    assert len(text) < RESULT_BYTES_MAX, f"a review result of {len(text)} bytes"
    assert out["changes_total"] == WIDE_FILES + 1, out["changes_total"]
    assert "listed" in out.get("changes_note", ""), out.get("changes_note")
    err_, res, text = s.tool("apply_changes", sandbox_id=sid, review=out["review"])
    assert not err_, text[:400]
    print(f"bounds: apply of them: {len(text)} bytes, {len(res['results'])} listed")
    assert len(text) < RESULT_BYTES_MAX, f"an apply result of {len(text)} bytes"
    assert res["applied"] == WIDE_FILES + 1, {k: v for k, v in res.items() if k != "results"}
    assert len(os.listdir(os.path.join(proj, "many"))) == WIDE_FILES
    code, _, err = s.sh(sid, "cd /workspace/w && python3 -c \"import os\n"
                             f"for i in range({DEPTH}): os.mkdir('d'); os.chdir('d')\"")
    assert code == 0, err
    err_, _, text = s.tool("review_changes", sandbox_id=sid)
    print(f"bounds: a tree {DEPTH} deep: {text}")
    assert err_ and "directories deep" in text and len(text) < 600, text
    s.tool("destroy_sandbox", sandbox_id=sid)


SHOWN = 'print("hello world")\n'
EVIL = 'import os; os.system("touch /tmp/pwned-by-the-sandbox")\n'
# In the sandbox: once something reads hello.py (its atime moves), swap its contents.
SWAPPER = r"""
import os, time
p = "/workspace/d/hello.py"
seen = os.stat(p).st_atime_ns
open("/tmp/watching", "w").close()
for _ in range(6000):
    if os.stat(p).st_atime_ns != seen:
        with open(p, "w") as f:
            f.write(%r)
        open("/tmp/swapped", "w").close()
        break
    time.sleep(0.005)
""" % EVIL


def read(path):
    with open(path) as f:
        return f.read()


def wait_for(s, sid, flag):
    code, _, _ = s.sh(sid, f"for i in $(seq 200); do [ -e {flag} ] && exit 0; sleep 0.05; done; "
                           "exit 1")
    return code == 0


def statuses(out):
    return {r["path"]: (r["status"], r.get("reason", "")) for r in out["results"]}


def check_digest(s, base, allowed, mcpbox, state):
    proj = os.path.join(allowed, "d")
    os.makedirs(proj)
    with open(os.path.join(proj, "hello.py"), "w") as f:
        f.write('print("hi")\n')
    own(proj)
    time.sleep(0.1)
    sid = s.create([{"source": proj, "target": "/workspace/d"}])
    code, _, err = s.sh(sid, f"printf '%s' '{SHOWN}' > /workspace/d/hello.py && "
                             "echo other > /workspace/d/other.txt")
    assert code == 0, err
    # No review named: refused, and says what to do.
    err_, _, text = s.tool("apply_changes", sandbox_id=sid)
    assert err_ and "review_changes" in text, f"an apply without a review went on: {text}"
    assert read(os.path.join(proj, "hello.py")) == 'print("hi")\n'
    assert not os.path.exists(os.path.join(proj, "other.txt"))
    # The swap: the review reads hello.py, the sandbox notices and changes it.
    script = base64.b64encode(SWAPPER.encode()).decode()
    err_, _, text = s.tool("run_command", sandbox_id=sid, background=True,
                           command=f"python3 -c \"$(echo {script} | base64 -d)\"")
    assert not err_, text
    assert wait_for(s, sid, "/tmp/watching"), "the watcher did not start"
    err_, rev, text = s.tool("review_changes", sandbox_id=sid)
    assert not err_, text
    assert "hello world" in rev["diff"] and "os.system" not in rev["diff"], rev["diff"]
    token = rev.get("review")
    assert token, f"review_changes returned no review token: {text[:300]}"
    assert wait_for(s, sid, "/tmp/swapped"), "the sandbox did not swap the file after the review"
    err_, out, text = s.tool("apply_changes", sandbox_id=sid, review=token)
    assert not err_, text
    st = statuses(out)
    assert st["/workspace/d/hello.py"][0] == "refused", st
    assert "review" in st["/workspace/d/hello.py"][1], st
    assert st["/workspace/d/other.txt"][0] == "applied", st
    assert read(os.path.join(proj, "hello.py")) == 'print("hi")\n', "the host file was written"
    assert read(os.path.join(proj, "other.txt")) == "other\n"
    assert not [n for n in os.listdir(proj) if n.startswith(".mcpbox-apply")], os.listdir(proj)
    print("digest: the file swapped after the review read it was refused, the host file "
          "untouched; the file as reviewed was applied")
    # An unknown or malformed token is refused as a whole.
    for bad in ("rv-0000000000000000", "../../mounts.json"):
        err_, _, text = s.tool("apply_changes", sandbox_id=sid, review=bad)
        assert err_ and "review_changes" in text, text
    # Reviewed again, the new contents are shown, and that review's token applies them, also
    # through another server (the record lives in the state directory).
    err_, rev2, text = s.tool("review_changes", sandbox_id=sid)
    assert not err_ and "os.system" in rev2["diff"], text
    s.close()
    os.environ["MCPBOX_APPLY_UNREVIEWED"] = "1"  # the person opts in, for the second server
    try:
        s2 = Serve(mcpbox, state, [allowed])
    finally:
        del os.environ["MCPBOX_APPLY_UNREVIEWED"]
    try:
        err_, out, text = s2.tool("apply_changes", sandbox_id=sid, review=rev2["review"])
        assert not err_ and out["applied"] == 1 and out["refused"] == 0, text
        assert read(os.path.join(proj, "hello.py")) == EVIL
        code, _, err = s2.sh(sid, "echo later > /workspace/d/later.txt")
        assert code == 0, err
        err_, out, text = s2.tool("apply_changes", sandbox_id=sid)
        assert not err_ and out["applied"] == 1, f"the opted-in apply without a review: {text}"
        assert read(os.path.join(proj, "later.txt")) == "later\n"
        # Hard links: the second path is shown once ("same as") and applied with its own digest.
        code, _, err = s2.sh(sid, "cd /workspace/d && echo linked > l1 && ln l1 l2")
        assert code == 0, err
        err_, rev3, text = s2.tool("review_changes", sandbox_id=sid)
        assert not err_, text
        same = {c["path"]: c.get("same_as") for c in rev3["changes"]}
        assert same.get("/workspace/d/l2") == "/workspace/d/l1", same
        err_, out, text = s2.tool("apply_changes", sandbox_id=sid, review=rev3["review"])
        assert not err_ and out["applied"] == 2 and out["refused"] == 0, text
        assert read(os.path.join(proj, "l2")) == "linked\n"
        # The CLI: no review named is a usage error; --review with diff's token applies.
        code, _, err = s2.sh(sid, "echo cli > /workspace/d/cli.txt")
        r = subprocess.run([mcpbox, "sandbox", "--state-dir", state, "apply", sid],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "--review" in r.stderr, (r.returncode, r.stdout, r.stderr)
        assert not os.path.exists(os.path.join(proj, "cli.txt"))
        r = subprocess.run([mcpbox, "sandbox", "--state-dir", state, "diff", sid],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "cli" in r.stdout, (r.stdout, r.stderr)
        tok = r.stderr.split("--review ")[-1].split()[0]
        r = subprocess.run([mcpbox, "sandbox", "--state-dir", state, "apply", sid, "--review",
                            tok], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert read(os.path.join(proj, "cli.txt")) == "cli\n"
        s2.tool("destroy_sandbox", sandbox_id=sid)
    finally:
        s2.close()
    print("digest: no token refused; a later review's token applies after a restart; the "
          "opted-in server applies without one; the CLI needs --review or --yes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--check", required=True,
                    choices=["race", "memory", "digest", "bounds"])
    a = ap.parse_args()
    checks = {"race": lambda s, base, allowed, state: check_race(s, base, allowed),
              "memory": lambda s, base, allowed, state: check_memory(s, base, allowed),
              "bounds": lambda s, base, allowed, state: check_bounds(s, base, allowed),
              "digest": lambda s, base, allowed, state: check_digest(s, base, allowed,
                                                                     s.mcpbox, state)}
    return run_served(a.mcpbox, "mbx-wsrev-", checks[a.check])

if __name__ == "__main__":
    sys.exit(main())
