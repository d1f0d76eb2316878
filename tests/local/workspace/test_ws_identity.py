#!/usr/bin/env python3
"""A hostile sandbox against the identity of host mounts (issue 32, items 1 and 3), through the
real server over stdio. A mount's source is checked once, at create, and from then on only that
directory is used: neither the spawn, nor review_changes, nor apply_changes may follow a path
that a sandbox redirected meanwhile.

 1a. rw + copy-on-write: P is mounted rw at /workspace/p and P/sub copy-on-write at /workspace/s.
     The sandbox moves P/sub away and puts a symlink to a host directory outside the allowlist in
     its place. The review must not diff against that directory (its files would show as "-"
     lines), and the apply must not write into it.
 1b. two copy-on-write mounts, no rw: P at /workspace/p, P/sub2 at /workspace/s2. The first
     mount's layer replaces sub2 with a symlink to the outside directory; one apply of both
     mounts must not write the second mount's files through it.
 3.  the create race: sandbox A has P/proj rw and swaps a directory x with a symlink to
     ../state (mcpbox's own state directory, which lies below the allowed directory as it does
     for a stdio server started in $HOME) with renameat2(RENAME_EXCHANGE) in a loop, while the
     test creates sandboxes that mount P/proj/x. None of them may see the state directory.

Runs as root and, through tests/local/rootless, as an ordinary user (with subordinate ids, and
without). usage: test_ws_identity.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_mounts import own, run_served  # noqa: E402

SECRET = "HOST-SECRET-outside-the-allowlist"
CREATE_TRIES = 400  # at most; the race stops after MOUNTED_ENOUGH creates went through
MOUNTED_ENOUGH = 40


def make_outside(base):
    out = os.path.join(base, "outside")
    os.makedirs(out)
    with open(os.path.join(out, "secret.txt"), "w") as f:
        f.write(SECRET + "\n" * 3)
    os.chmod(out, 0o777)  # writable by anyone: only the path check can keep an apply out
    return out


def outside_untouched(out):
    names = sorted(os.listdir(out))
    assert names == ["secret.txt"], f"the apply wrote into the outside directory: {names}"
    with open(os.path.join(out, "secret.txt")) as f:
        assert f.read() == SECRET + "\n" * 3, "the outside file was changed"


def refused_as_moved(s, name, **args):
    err, out, text = s.tool(name, **args)
    assert SECRET not in text and SECRET not in str(out), f"{name} read the outside file: {text}"
    assert err, f"{name} went on after its source was replaced by a symlink: {text[:400]}"
    assert "moved or replaced" in text, f"{name}: unclear refusal: {text}"
    return text


def check_rw_and_cow(s, base, allowed, out):
    p = os.path.join(allowed, "p1")
    os.makedirs(os.path.join(p, "sub"))
    own(p)
    sid = s.create([{"source": p, "target": "/workspace/p", "mode": "rw"},
                    {"source": os.path.join(p, "sub"), "target": "/workspace/s"}])
    code, _, err = s.sh(sid, "printf 'mine\\n' > /workspace/s/secret.txt && "
                             "mv /workspace/p/sub /workspace/p/moved && "
                             f"ln -s {out} /workspace/p/sub")
    assert code == 0, err
    assert os.path.islink(os.path.join(p, "sub")), "the sandbox could not plant the symlink"
    text = refused_as_moved(s, "review_changes", sandbox_id=sid)
    print(f"  review refused: {text[:200]}")
    refused_as_moved(s, "apply_changes", sandbox_id=sid)
    outside_untouched(out)
    # The CLI reaches the same directory the same way (another process, the same record).
    r = subprocess.run([s.mcpbox, "sandbox", "--state-dir", s.state, "diff", sid],
                       capture_output=True, text=True, timeout=60)
    assert SECRET not in r.stdout + r.stderr, f"mcpbox sandbox diff read it: {r.stdout}"
    assert r.returncode != 0 and "moved or replaced" in r.stdout + r.stderr, (r.returncode,
                                                                             r.stdout, r.stderr)
    s.tool("destroy_sandbox", sandbox_id=sid)
    print("1a: rw + copy-on-write, source swapped for a symlink: review and apply refuse, "
          "nothing read or written outside")


def check_two_cow(s, base, allowed, out):
    p = os.path.join(allowed, "p2")
    os.makedirs(os.path.join(p, "sub2"))
    own(p)
    time.sleep(0.1)  # older than the sandbox: not a conflict
    sid = s.create([{"source": p, "target": "/workspace/p"},
                    {"source": os.path.join(p, "sub2"), "target": "/workspace/s2"}])
    code, _, err = s.sh(sid, "printf 'new\\n' > /workspace/s2/new.txt && "
                             "rm -rf /workspace/p/sub2 && "
                             f"ln -s {out} /workspace/p/sub2")
    assert code == 0, err
    err_, rev, text = s.tool("review_changes", sandbox_id=sid)
    assert not err_, text
    err_, res, text = s.tool("apply_changes", sandbox_id=sid, review=rev["review"])
    outside_untouched(out)
    assert os.path.islink(os.path.join(p, "sub2")), f"the first mount's apply did not run: {text}"
    print(f"  apply of both mounts: {'refused' if err_ else 'ran'}: {text[:200]}")
    # Whatever the first mount's apply did to the host's sub2, a later review of the second
    # mount never follows what is there now unless it is the directory that was mounted.
    err_, res, text = s.tool("review_changes", sandbox_id=sid, paths=["/workspace/s2"])
    assert SECRET not in text, f"review read the outside file: {text}"
    outside_untouched(out)
    s.tool("destroy_sandbox", sandbox_id=sid)
    print("1b: two copy-on-write mounts, the first replaces the second's source with a symlink: "
          "nothing written outside")


RACER = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
os.chdir("/workspace/proj")
open("/tmp/racing", "w").close()
while os.path.exists("/tmp/racing"):
    libc.syscall(316, -100, b"x", -100, b"y", 2)  # renameat2(RENAME_EXCHANGE)
"""


def check_create_race(s, base, allowed, state):
    proj = os.path.join(allowed, "proj")
    os.makedirs(os.path.join(proj, "x"))
    with open(os.path.join(proj, "x", "inside.txt"), "w") as f:
        f.write("x\n")
    os.symlink("../state", os.path.join(proj, "y"))
    own(proj)
    racer = s.create([{"source": proj, "target": "/workspace/proj", "mode": "rw"}])
    err, _, text = s.tool("run_command", sandbox_id=racer, command=f"python3 -c '{RACER}'",
                          background=True)
    assert not err, text
    code, _, _ = s.sh(racer, "for i in $(seq 100); do [ -e /tmp/racing ] && break; "
                             "sleep 0.05; done; test -e /tmp/racing")
    assert code == 0, "the racer did not start"
    made = refused = 0
    try:
        for _ in range(CREATE_TRIES):
            if made >= MOUNTED_ENOUGH:
                break
            err, out, text = s.tool("create_sandbox",
                                    mounts=[{"source": os.path.join(proj, "x"),
                                             "target": "/workspace/m", "mode": "ro"}])
            if err:
                refused += 1
                assert "own state" in text or "moved or replaced" in text or \
                    "kept changing" in text, text
                continue
            made += 1
            sid = out["sandbox_id"]
            code, ls, _ = s.sh(sid, "ls -a /workspace/m")
            s.tool("destroy_sandbox", sandbox_id=sid)
            assert "inside.txt" in ls and "mcpbox.db" not in ls and "sandboxes" not in ls, \
                f"a sandbox mounted mcpbox's state directory:\n{ls}"
    finally:
        s.sh(racer, "rm -f /tmp/racing")
    # On a loaded machine every create may be refused while the racer runs (each walk through
    # the symlink's ".." meets a rename): that proves nothing either way, so the counts are
    # printed. With the racer stopped, x is one of the two names and a create goes through.
    code, _, _ = s.sh(racer, "cd /workspace/proj && test -d x -a ! -L x || "
                             "python3 -c 'import ctypes; ctypes.CDLL(None).syscall(316, -100, "
                             "b\"x\", -100, b\"y\", 2)'; test -d x -a ! -L x")
    assert code == 0, "x is not the directory after the race"
    sid = s.create([{"source": os.path.join(proj, "x"), "target": "/workspace/m", "mode": "ro"}])
    code, ls, _ = s.sh(sid, "ls -a /workspace/m")
    assert "inside.txt" in ls, ls
    s.tool("destroy_sandbox", sandbox_id=sid)
    s.tool("destroy_sandbox", sandbox_id=racer)
    print(f"3: {made + refused} creates against a renameat2 racer: {made} mounted the checked "
          f"directory, {refused} refused, none saw the state directory")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()

    def checks(s, base, allowed, state):
        out = make_outside(base)
        check_rw_and_cow(s, base, allowed, out)
        check_two_cow(s, base, allowed, out)
        check_create_race(s, base, allowed, state)
    # the state directory below the allowed one, as for a stdio server started in $HOME
    return run_served(a.mcpbox, "mbx-wsid-", checks, state_in_allowed=True)

if __name__ == "__main__":
    sys.exit(main())
