#!/usr/bin/env python3
"""Whose host directories a caller may mount (issue 32 item 2), through the real server over
loopback HTTP, where the kernel names each connecting user.

Root serves `--http 127.0.0.1:0 --allow-dir D --allow-dir USER=A`: D is root's (0700, with a 0600
file), A is a fresh local user's. Then, each as themselves (setpriv):
- nobody mounts D rw: refused, and D is unchanged (before the fix the sandbox read root's file
  and wrote a root-owned one);
- nobody mounts A: refused (it is USER's); USER mounts D: refused (it is root's);
- USER mounts A rw: works, with USER's rights only: a root-only file in A stays unreadable, what
  the sandbox writes belongs to USER; a subdirectory USER cannot open is refused;
- root mounts D: works, as before.

usage: test_mounts_caller.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import hashlib
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_http import as_user, start_server  # noqa: E402

SKIP = 77


# ---- the test, as root -------------------------------------------------------------------------

def tree_digest(root):
    h = hashlib.sha256()
    for dirpath, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, root)} {st.st_mode:o} {st.st_uid} {st.st_gid}".encode())
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def refused(res, *words):
    err, _, text = res
    assert err, f"accepted: {res}"
    for w in words:
        assert w in text, f"{w!r} not in {text!r}"
    print(f"  refused: {text[:200]}")


def rw(src):
    return {"source": src, "target": "/workspace/p", "mode": "rw"}


def check_issue(port, base):
    """The issue's reproduction: `--allow-dir D` only, nobody mounts D rw."""
    root_dir = os.path.join(base, "root-proj")
    before = tree_digest(root_dir)
    r = as_user(65534, 65534, port, [
        ["create_sandbox", {"mounts": [rw(root_dir)]}],
        ["run_command", {"sandbox_id": "$SID", "command": "cat /workspace/p/secret; "
                         "echo pwned > /workspace/p/by-nobody"}],
    ])
    assert "root-only" not in json.dumps(r), f"nobody read root's file: {r}"
    assert not os.path.exists(os.path.join(root_dir, "by-nobody")), "nobody wrote in root's"
    refused(r[0], "root (uid 0)", "nobody", "--allow-dir")
    assert tree_digest(root_dir) == before, "root's directory changed"
    print("issue 32 item 2: nobody cannot mount root's allowed directory")


def check(port, base, user, uid, gid):
    root_dir, user_dir = os.path.join(base, "root-proj"), os.path.join(base, "user-proj")
    before = tree_digest(root_dir)

    # nobody: neither directory is theirs.
    r = as_user(65534, 65534, port, [
        ["create_sandbox", {"mounts": [rw(root_dir)]}],
        ["run_command", {"sandbox_id": "$SID", "command": "cat /workspace/p/secret; "
                         "echo pwned > /workspace/p/by-nobody"}],
        ["create_sandbox", {"mounts": [rw(user_dir)]}],
        ["create_sandbox", {"mounts": [{"source": root_dir, "target": "/mnt/d", "mode": "ro"}]}],
    ])
    refused(r[0], "root (uid 0)", "nobody", "--allow-dir")
    assert "root-only" not in json.dumps(r), f"nobody read root's file: {r}"
    refused(r[2], user)
    refused(r[3], "root (uid 0)")
    assert tree_digest(root_dir) == before, "root's directory changed"
    assert not os.path.exists(os.path.join(root_dir, "by-nobody"))
    print("nobody: root's and the user's directories are refused; nothing read or written")

    # the user: their own directory, with their own rights only; not root's.
    r = as_user(uid, gid, port, [
        ["create_sandbox", {"mounts": [rw(root_dir)]}],
        ["create_sandbox", {"mounts": [rw(user_dir)]}],
        ["run_command", {"sandbox_id": "$SID", "command":
                         "cat /workspace/p/mine; cat /workspace/p/rootfile || echo DENIED; "
                         "echo new > /workspace/p/made; "
                         "echo x >> /workspace/p/rootfile || echo NOWRITE"}],
        ["create_sandbox", {"mounts": [rw(os.path.join(user_dir, "closed", "inner"))]}],
        ["create_sandbox", {"mounts": [rw(os.path.join(user_dir, "rootsub"))]}],
        ["run_command", {"sandbox_id": "$SID", "command": "cat /workspace/p/secret || echo "
                         "DENIED; echo x > /workspace/p/new || echo NOWRITE"}],
    ])
    refused(r[0], "root (uid 0)", user)
    assert not r[1][0], f"the user's own mount: {r[1]}"
    out = r[2][1]
    assert out["stdout"].startswith("user file\n") and "DENIED" in out["stdout"], out
    assert "NOWRITE" in out["stdout"], out
    assert "root-only" not in out["stdout"], f"the user read a root-only file: {out}"
    made = os.path.join(user_dir, "made")
    st = os.stat(made)
    assert (st.st_uid, st.st_gid) == (uid, gid), f"made belongs to {st.st_uid}:{st.st_gid}"
    with open(os.path.join(user_dir, "rootfile")) as f:
        assert f.read() == "root-only\n", "root's file in the user's directory was written"
    refused(r[3], "cannot open it yourself")
    # A root-owned directory inside theirs mounts with their rights, not its owner's.
    assert not r[4][0], f"the user's mount of rootsub: {r[4]}"
    out = r[5][1]
    assert "root-only" not in out["stdout"] and "DENIED" in out["stdout"], out
    assert "NOWRITE" in out["stdout"], out
    assert sorted(os.listdir(os.path.join(user_dir, "rootsub"))) == ["secret"]
    print("the user: their directory works with their rights only (root's file in it stays "
          "root's); root's directory and a subdirectory they cannot open are refused")

    # the user's copy-on-write mount: review and apply land as the user
    r = as_user(uid, gid, port, [
        ["create_sandbox", {"mounts": [{"source": user_dir, "target": "/workspace/p"}]}],
        ["run_command", {"sandbox_id": "$SID", "command": "echo cow > /workspace/p/cow.txt"}],
        ["review_changes", {"sandbox_id": "$SID"}],
        ["apply_changes", {"sandbox_id": "$SID", "review": "$REVIEW"}],
    ])
    assert all(not x[0] for x in r), r
    assert "cow.txt" in r[2][2], r[2]
    st = os.stat(os.path.join(user_dir, "cow.txt"))
    assert (st.st_uid, st.st_gid) == (uid, gid), f"cow.txt belongs to {st.st_uid}:{st.st_gid}"
    print("the user: a copy-on-write mount's apply lands as the user")

    # root: its own directory, as before.
    r = as_user(0, 0, port, [
        ["create_sandbox", {"mounts": [rw(root_dir)]}],
        ["run_command", {"sandbox_id": "$SID", "command": "cat /workspace/p/secret"}],
    ])
    assert not r[0][0] and r[1][1]["stdout"] == "root-only\n", r
    print("root: its own directory still mounts")


def check_user_server(mcpbox, base, user, uid, gid):
    """A server the user runs shares the user's directory with the user only, and cannot be told
    to share someone else's."""
    user_dir = os.path.join(base, "user-proj")
    state = os.path.join(base, "user-state")
    os.mkdir(state, 0o700)
    os.chown(state, uid, gid)
    log = os.path.join(base, "user-bad.log")
    proc, port = start_server(mcpbox, state, ["--allow-dir", f"nobody={user_dir}"], log,
                              user=(uid, gid))
    try:  # backends start with the first client; this one then runs without the local backend
        r = as_user(uid, gid, port, [["create_sandbox", {"mounts": [rw(user_dir)]}]])
        assert r[0][0], r
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    with open(log) as f:
        text = f.read()
    assert "only a server running as root" in text, text
    proc, port = start_server(mcpbox, state, ["--allow-dir", user_dir],
                              os.path.join(base, "user-server.log"), user=(uid, gid))
    try:
        before = tree_digest(user_dir)
        r = as_user(65534, 65534, port, [["create_sandbox", {"mounts": [rw(user_dir)]}]])
        refused(r[0], "shares only with its own user", "nobody", "an mcpbox of your own")
        assert tree_digest(user_dir) == before, "the user's directory changed"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"a server run by {user}: nobody cannot mount its directory; USER=DIR is refused")


def make_dirs(base, uid, gid):
    root_dir = os.path.join(base, "root-proj")
    os.mkdir(root_dir, 0o700)
    with open(os.path.join(root_dir, "secret"), "w") as f:
        f.write("root-only\n")
    os.chmod(os.path.join(root_dir, "secret"), 0o600)
    user_dir = os.path.join(base, "user-proj")
    os.mkdir(user_dir, 0o700)
    with open(os.path.join(user_dir, "mine"), "w") as f:
        f.write("user file\n")
    os.chown(os.path.join(user_dir, "mine"), uid, gid)
    with open(os.path.join(user_dir, "rootfile"), "w") as f:  # root's, in the user's directory
        f.write("root-only\n")
    os.chmod(os.path.join(user_dir, "rootfile"), 0o600)
    rootsub = os.path.join(user_dir, "rootsub")  # root's, 0755, with a root-only file
    os.mkdir(rootsub, 0o755)
    with open(os.path.join(rootsub, "secret"), "w") as f:
        f.write("root-only\n")
    os.chmod(os.path.join(rootsub, "secret"), 0o600)
    closed = os.path.join(user_dir, "closed")  # root's, 0700: the user cannot pass it
    os.makedirs(os.path.join(closed, "inner"))
    os.chmod(closed, 0o700)
    os.chown(os.path.join(closed, "inner"), uid, gid)
    os.chown(user_dir, uid, gid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("FAIL: this test serves other users' directories, which needs root")
        return 1
    user = "mbxc" + secrets.token_hex(4)
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", user],
                   check=True)
    base = tempfile.mkdtemp(prefix="mbx-wscaller-", dir="/tmp")
    os.chmod(base, 0o755)
    proc = None
    try:
        pw = pwd.getpwnam(user)
        make_dirs(base, pw.pw_uid, pw.pw_gid)
        state = os.path.join(base, "state")
        proc, port = start_server(a.mcpbox, state, ["--allow-dir", os.path.join(base, "root-proj")],
                                  os.path.join(base, "server.log"))
        probe = as_user(0, 0, port, [["create_sandbox", {}]])[0]
        if probe[0] and "unsupported" in probe[2].lower():
            print(f"SKIP: {probe[2]}")
            return SKIP
        check_issue(port, base)
        proc.terminate()
        proc.wait(timeout=30)
        proc, port = start_server(a.mcpbox, state,
                                  ["--allow-dir", os.path.join(base, "root-proj"), "--allow-dir",
                                   f"{user}={os.path.join(base, 'user-proj')}"],
                                  os.path.join(base, "server2.log"))
        check(port, base, user, pw.pw_uid, pw.pw_gid)
        proc.terminate()
        proc.wait(timeout=30)
        proc = None
        check_user_server(a.mcpbox, base, user, pw.pw_uid, pw.pw_gid)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
        subprocess.run(["userdel", user], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
