#!/usr/bin/env python3
"""Host directories mounted at create (issue #13), through the real server over stdio: ro, rw
and copy-on-write mounts, who owns what the sandbox writes on the host, the allowlist
(--allow-dir) against paths outside it, ".." and a symlink leading out, the state directory,
bad modes and targets, and a sandbox trying to undo its mounts. Runs as root and, through
tests/local/rootless, as an ordinary user (with subordinate ids, and without).

usage: test_mounts.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SKIP = 77
ROOT = os.geteuid() == 0
PERSON = (4242, 4243) if ROOT else (os.getuid(), os.getgid())  # whose project it is


class Serve(Client):
    def __init__(self, mcpbox, state, allow, pool=0, roots=None, extra=()):
        args = ["--local-pool", pool, *extra]
        for d in allow:
            args += ["--allow-dir", d]
        self.roots = roots  # a list of file:// URIs to answer roots/list with, or None
        self.roots_asked = 0
        super().__init__(serve_argv(mcpbox, state, *args), stderr=subprocess.DEVNULL, cwd="/",
                         on_request=self.answer)
        self.initialize("mounts-test", None if roots is None else {"roots": {}})

    def answer(self, msg):
        if msg.get("method") == "roots/list":
            self.roots_asked += 1
            self.send({"jsonrpc": "2.0", "id": msg["id"],
                       "result": {"roots": [{"uri": u} for u in self.roots or []]}})

    def tool(self, name, **args):
        res = self.call_tool(name, args)
        return res.get("isError", False), res.get("structuredContent"), result_text(res)

    def create(self, mounts):
        err, out, text = self.tool("create_sandbox", mounts=mounts)
        assert not err, f"create_sandbox {mounts}: {text}"
        return out["sandbox_id"]

    def refused(self, mounts, *words):
        err, _, text = self.tool("create_sandbox", mounts=mounts)
        assert err, f"create_sandbox {mounts} was accepted"
        for w in words:
            assert w in text, f"create_sandbox {mounts}: {w!r} not in {text!r}"
        print(f"  refused {mounts}: {text[:160]}")
        return text

    def sh(self, sid, command):
        err, out, text = self.tool("run_command", sandbox_id=sid, command=command)
        assert not err, f"run_command {command}: {text}"
        return out["exit_code"], out.get("stdout", ""), out.get("stderr", "")

    def close(self):
        super().close(timeout=60)


def own(path):
    """As root, the tree at path belongs to someone other than the server's user (PERSON)."""
    if not ROOT:
        return
    for dirpath, dirs, files in os.walk(path):
        for n in [dirpath] + [os.path.join(dirpath, x) for x in dirs + files]:
            os.lchown(n, *PERSON)


def run_served(mcpbox, prefix, checks, state_in_allowed=False, extra=()):
    """The frame of the workspace tests: a fresh allowed directory (base/allowed) and state
    directory (base/state, or below the allowed one, as for a stdio server started in $HOME),
    one `mcpbox serve` over stdio with extra arguments, then checks(s, base, allowed, state)
    with s.mcpbox and s.state set. Returns the exit status: SKIP where local sandboxes cannot
    run, else 0 (a failed check raises). Every sandbox and file is removed after."""
    base = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(base, 0o755)
    allowed = os.path.join(base, "allowed")
    state = os.path.join(allowed if state_in_allowed else base, "state")
    os.makedirs(allowed)
    try:
        s = Serve(mcpbox, state, [allowed], extra=extra)
        s.mcpbox, s.state = mcpbox, state
        try:
            err, _, text = s.tool("create_sandbox")
            if err and "unsupported" in text.lower():
                print(f"SKIP: {text}")
                return SKIP
            checks(s, base, allowed, state)
        finally:
            if s.proc.stdin and not s.proc.stdin.closed:
                s.close()
    finally:
        subprocess.run([mcpbox, "sandbox", "--state-dir", state, "rm", "--all"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


def tree_digest(root):
    """Names, modes, owners and contents of everything under root (symlinks not followed)."""
    h = hashlib.sha256()
    for dirpath, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, root)} {st.st_mode:o} {st.st_uid} {st.st_gid}".encode())
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def make_project(base):
    proj = os.path.join(base, "allowed", "proj")
    os.makedirs(os.path.join(proj, "sub"))
    with open(os.path.join(proj, "a.txt"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(proj, "secret600"), "w") as f:
        f.write("only the owner\n")
    os.chmod(os.path.join(proj, "secret600"), 0o600)
    with open(os.path.join(proj, "run.sh"), "w") as f:
        f.write("#!/bin/sh\necho ran\n")
    os.chmod(os.path.join(proj, "run.sh"), 0o755)
    os.makedirs(os.path.join(base, "outside"))
    with open(os.path.join(base, "outside", "secret"), "w") as f:
        f.write("outside\n")
    os.symlink("../outside", os.path.join(base, "allowed", "link"))
    os.symlink("/etc", os.path.join(proj, "etc-link"))
    if ROOT:  # the project belongs to someone other than the server's user
        for dirpath, dirs, files in os.walk(proj):
            for n in [dirpath] + [os.path.join(dirpath, x) for x in files]:
                os.lchown(n, *PERSON)
        os.lchown(os.path.join(proj, "etc-link"), *PERSON)
    return proj


def check_ro(s, proj):
    sid = s.create([{"source": proj, "target": "/mnt/src", "mode": "ro"}])
    code, out, _ = s.sh(sid, "cat /mnt/src/a.txt && /mnt/src/run.sh")
    assert code == 0 and out == "hello\nran\n", (code, out)
    code, _, err = s.sh(sid, "echo x > /mnt/src/new; echo x >> /mnt/src/a.txt")
    assert code != 0 and "Read-only" in err, (code, err)
    code, _, _ = s.sh(sid, "mount -o remount,rw /mnt/src || mount -o remount,rw,bind /mnt/src")
    assert code != 0, "the sandbox remounted its ro mount rw"
    code, _, _ = s.sh(sid, "umount /mnt/src || umount -l /mnt/src")
    assert code != 0, "the sandbox unmounted its mount"
    code, out, _ = s.sh(sid, "cat /mnt/src/a.txt")
    assert out == "hello\n", out
    assert not os.path.exists(os.path.join(proj, "new"))
    s.tool("destroy_sandbox", sandbox_id=sid)
    print("ro: readable, read-only, cannot be remounted or unmounted")


def check_rw(s, proj):
    sid = s.create([{"source": proj, "target": "/workspace/app", "mode": "rw"}])
    code, out, err = s.sh(sid, "cd /workspace/app && cat secret600 && echo new > made.txt && "
                               "chmod 640 made.txt && mkdir -p d/e && chmod 750 d && "
                               "printf 'x\\n' >> a.txt && ln -s a.txt sl && id -u")
    assert code == 0, (code, out, err)
    made = os.lstat(os.path.join(proj, "made.txt"))
    assert (made.st_uid, made.st_gid) == PERSON, f"made.txt owned by {made.st_uid}:{made.st_gid}"
    assert made.st_mode & 0o7777 == 0o640, oct(made.st_mode)
    d = os.lstat(os.path.join(proj, "d"))
    assert (d.st_uid, d.st_gid) == PERSON and d.st_mode & 0o7777 == 0o750, (d, oct(d.st_mode))
    e = os.lstat(os.path.join(proj, "d", "e"))
    assert (e.st_uid, e.st_gid) == PERSON, e
    sl = os.lstat(os.path.join(proj, "sl"))
    assert (sl.st_uid, sl.st_gid) == PERSON, sl
    a = os.lstat(os.path.join(proj, "a.txt"))
    assert (a.st_uid, a.st_gid) == PERSON, a
    with open(os.path.join(proj, "a.txt")) as f:
        assert f.read() == "hello\nx\n"
    # No setuid/setgid file can be left on the host for others to run as the person.
    code, _, err = s.sh(sid, "chmod 4755 /workspace/app/made.txt")
    assert code != 0, "chmod 4755 was allowed"
    code, _, err = s.sh(sid, "chmod g+s /workspace/app/d")
    assert code != 0, "chmod g+s was allowed"
    assert os.lstat(os.path.join(proj, "made.txt")).st_mode & 0o6000 == 0
    s.tool("destroy_sandbox", sandbox_id=sid)
    for n in ("made.txt", "sl"):
        os.unlink(os.path.join(proj, n))
    shutil.rmtree(os.path.join(proj, "d"))
    with open(os.path.join(proj, "a.txt"), "w") as f:
        f.write("hello\n")
    if ROOT:
        os.lchown(os.path.join(proj, "a.txt"), *PERSON)
    print(f"rw: writes land on the host owned by {PERSON[0]}:{PERSON[1]} with the sandbox's modes")


def check_cow(s, proj, state):
    before = tree_digest(proj)
    sid = s.create([{"source": proj, "target": "/workspace/app"}])  # default: copy-on-write
    code, out, err = s.sh(sid, "cd /workspace/app && cat secret600 >/dev/null && "
                               "echo changed > a.txt && echo new > b.txt && rm run.sh && "
                               "mkdir -p sub/deep && echo x > sub/deep/f && cat a.txt b.txt && "
                               "test ! -e run.sh && ls")
    assert code == 0 and out.startswith("changed\nnew\n"), (code, out, err)
    assert tree_digest(proj) == before, "a copy-on-write mount changed the host"
    meta = os.path.join(state, "workspaces", sid, "mounts.json")
    with open(meta) as f:
        mounts = json.load(f)["mounts"]
    assert mounts[0]["mode"] == "copy-on-write" and mounts[0]["target"] == "/workspace/app", mounts
    assert mounts[0]["source"] == os.path.realpath(proj), mounts
    assert [mounts[0]["owner_uid"], mounts[0]["owner_gid"]] == list(PERSON), mounts
    upper = mounts[0]["upper"]
    with open(os.path.join(upper, "a.txt")) as f:
        assert f.read() == "changed\n"
    wh = os.lstat(os.path.join(upper, "run.sh"))  # a whiteout: character device 0:0
    assert (wh.st_mode & 0o170000) == 0o020000 and wh.st_rdev == 0, oct(wh.st_mode)
    # Nothing of the overlay's staging is left in the sandbox's view.
    code, out, _ = s.sh(sid, "ls -a / /workspace /tmp; awk '{print $5}' /proc/self/mountinfo")
    assert code == 0 and ".ws" not in out and "upper" not in out, out
    # The sandbox sees neither the state directory nor its own layers.
    code, _, _ = s.sh(sid, f"ls {state} || ls {upper}")
    assert code != 0, "the state directory is visible inside"
    err, info, text = s.tool("get_sandbox", sandbox_id=sid)
    assert not err and "copy-on-write" in json.dumps(info), text
    s.tool("destroy_sandbox", sandbox_id=sid)
    s.tool("list_sandboxes")  # the release runs once the init is gone
    for _ in range(100):
        if not os.path.exists(os.path.join(state, "workspaces", sid)):
            break
        subprocess.run(["sleep", "0.05"])
    assert not os.path.exists(os.path.join(state, "workspaces", sid)), "layers left after destroy"
    assert tree_digest(proj) == before
    print("copy-on-write: the sandbox sees its changes, the host is untouched, layers as "
          "workspace.h says, removed with the sandbox")


def check_refusals(s, base, proj, state):
    allowed = os.path.join(base, "allowed")
    s.refused([{"source": os.path.join(base, "outside"), "target": "/mnt/x"}],
              "outside", "--allow-dir")
    s.refused([{"source": "/etc", "target": "/mnt/x", "mode": "ro"}], "--allow-dir")
    s.refused([{"source": proj + "/../../outside", "target": "/mnt/x"}], "leaves", "--allow-dir")
    s.refused([{"source": "../outside", "target": "/mnt/x"}], "leaves")
    s.refused([{"source": os.path.join(allowed, "link"), "target": "/mnt/x"}], "leaves")
    s.refused([{"source": os.path.join(allowed, "link", "."), "target": "/mnt/x"}], "leaves")
    s.refused([{"source": os.path.join(proj, "etc-link"), "target": "/mnt/x"}], "leaves")
    s.refused([{"source": allowed, "target": "/mnt/x"}], "state", "--state-dir")
    s.refused([{"source": state, "target": "/mnt/x"}], "state")
    s.refused([{"source": os.path.join(state, "sandboxes"), "target": "/mnt/x", "mode": "ro"}],
              "state")
    s.refused([{"source": proj, "target": "/mnt/x", "mode": "rwx"}], "ro", "rw", "copy-on-write")
    for t in ("/etc/x", "mnt/x", "/workspace/../etc", "/usr", "/", "/workspace/a/", "/mnt/a:b",
              "/proc/x"):
        s.refused([{"source": proj, "target": t}], "target", "/workspace")
    s.refused([{"source": proj, "target": "/mnt/x"}, {"source": proj, "target": "/mnt/x"}],
              "own target")
    s.refused([{"source": os.path.join(allowed, "nope"), "target": "/mnt/x"}], "nope")
    s.refused([{"target": "/mnt/x"}], "source")
    print("refusals: outside the allowlist, '..', symlinks out, the state directory, bad modes "
          "and targets")


def check_nested_and_relative(s, proj):
    sid = s.create([{"source": "proj/sub", "target": "/workspace/app/sub", "mode": "ro"},
                    {"source": "proj", "target": "/workspace/app"}])
    code, out, err = s.sh(sid, "ls /workspace/app && touch /workspace/app/sub/x")
    assert code != 0 and "a.txt" in out and "Read-only" in err, (code, out, err)
    s.tool("destroy_sandbox", sandbox_id=sid)
    print("nested targets (any order) and a source relative to the allowed directory")


def check_escapes(s, proj):
    """What a sandbox might try against its mounts: none of it reaches the host."""
    sid = s.create([{"source": proj, "target": "/workspace/app", "mode": "rw"}])
    code, out, err = s.sh(sid, "cd /workspace/app; "
                               "ln /etc/passwd hl 2>/dev/null && echo LINKED; "
                               "mount --bind /etc /workspace/app/sub 2>/dev/null && echo BOUND; "
                               "mount -t tmpfs x /workspace/app/sub 2>/dev/null && echo TMPFS; "
                               "ls ../../../../tmp/ >/dev/null; cd /workspace/app/../..; pwd; "
                               "readlink /proc/1/root; ls /proc/1/root/ | grep -c workspace")
    assert "LINKED" not in out and "BOUND" not in out and "TMPFS" not in out, out
    assert not os.path.exists(os.path.join(proj, "hl"))
    assert os.listdir(os.path.join(proj, "sub")) == [], "something was mounted over the host dir"
    s.tool("destroy_sandbox", sandbox_id=sid)
    print("escapes: no hard link out, no mount over the host tree, '..' stays in the sandbox")


def check_image(s, proj, state):
    """A registered image directory (make_image_root's path) with the same mounts."""
    img = os.path.join(state, "images", "bb")
    os.makedirs(os.path.join(img, "bin"))
    for d in ("etc", "tmp", "workspace", "root", "proc", "dev"):
        os.makedirs(os.path.join(img, d))
    shutil.copy("/bin/busybox", os.path.join(img, "bin", "busybox"))
    for x in ("sh", "cat", "ls", "rm", "touch", "id"):
        os.symlink("busybox", os.path.join(img, "bin", x))
    before = tree_digest(proj)
    err, out, text = s.tool("create_sandbox", image="bb", mounts=[
        {"source": proj, "target": "/workspace/app"},
        {"source": proj + "/sub", "target": "/mnt/sub", "mode": "rw"}])
    assert not err, text
    sid = out["sandbox_id"]
    code, out, err = s.sh(sid, "/bin/cat /workspace/app/a.txt && /bin/touch /workspace/app/new && "
                               "/bin/rm /workspace/app/run.sh && /bin/touch /mnt/sub/made")
    assert code == 0 and out == "hello\n", (code, out, err)
    made = os.lstat(os.path.join(proj, "sub", "made"))
    assert (made.st_uid, made.st_gid) == PERSON, made
    os.unlink(os.path.join(proj, "sub", "made"))
    assert tree_digest(proj) == before, "the image sandbox's copy-on-write mount changed the host"
    s.tool("destroy_sandbox", sandbox_id=sid)
    shutil.rmtree(img)
    print("image: a registered image's sandbox gets the same mounts and ownership")


def check_roots(mcpbox, base, proj, state, allowed):
    """A client that declares roots narrows the allowlist to them, never extends it."""
    sub = os.path.join(proj, "sub")
    s = Serve(mcpbox, state, [allowed], roots=["file://" + sub.replace(" ", "%20")])
    try:
        sid = s.create([{"source": sub, "target": "/mnt/sub", "mode": "ro"}])
        assert s.roots_asked == 1, "roots/list was not asked"
        s.tool("destroy_sandbox", sandbox_id=sid)
        s.refused([{"source": proj, "target": "/mnt/p", "mode": "ro"}], "roots", "narrow")
        s.roots = ["file://" + os.path.join(base, "outside"), "https://example.com/x"]
        s.refused([{"source": os.path.join(base, "outside"), "target": "/mnt/o"}], "--allow-dir")
        # an empty list narrows nothing (the MCP Inspector CLI declares roots and lists none;
        # the reference filesystem server keeps its own directories then too)
        s.roots = []
        sid = s.create([{"source": proj, "target": "/mnt/p", "mode": "ro"}])
        s.tool("destroy_sandbox", sandbox_id=sid)
        err, out, _ = s.tool("create_sandbox")  # no mounts: roots are not asked
        asked = s.roots_asked
        assert not err and asked == 4, asked
        s.tool("destroy_sandbox", sandbox_id=out["sandbox_id"])
    finally:
        s.close()
    print("roots: a client's roots narrow the allowlist (a root outside it adds nothing)")


def check_cli(mcpbox, proj, base):
    """mcpbox sandbox create --mount SRC:DST[:MODE]: SRC is allowed because the person named it."""
    state = os.path.join(base, "cli-state")
    run = lambda *a: subprocess.run([mcpbox, "sandbox", "--state-dir", state] + list(a),
                                    capture_output=True, text=True, timeout=120, cwd="/")
    r = run("create", "-q", "--mount", f"{proj}:/workspace/app", "--mount",
            f"{proj}/sub:/mnt/sub:ro")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    # exec joins its words into one command line for /bin/sh -c (like ssh): one word here
    r = run("exec", sid, "--", "cat /workspace/app/a.txt; echo x > /workspace/app/a.txt;"
            " touch /mnt/sub/x 2>/dev/null || echo RO")
    assert r.stdout == "hello\nRO\n", (r.stdout, r.stderr)
    with open(os.path.join(proj, "a.txt")) as f:
        assert f.read() == "hello\n"
    run("rm", sid)
    r = run("create", "--mount", f"{proj}:/workspace/app:bogus")
    assert r.returncode != 0 and "copy-on-write" in r.stderr, r.stderr
    r = run("create", "--mount", f"{proj}")
    assert r.returncode == 2 and "SRC:DST" in r.stderr, r.stderr
    r = run("create", "--mount", f"{os.path.join(base, 'nope')}:/mnt/x")
    assert r.returncode == 2 and "not an existing directory" in r.stderr, r.stderr
    r = run("create", "--mount", f"{state}:/mnt/x")
    assert r.returncode != 0 and "state" in r.stderr, r.stderr
    shutil.rmtree(state, ignore_errors=True)
    print("cli: --mount SRC:DST[:MODE], and its errors")


def check_pool_and_restart(mcpbox, proj, state, allowed):
    """With the pool on, a create with mounts is never a pooled (mount-less) sandbox; and a
    sandbox outlives its server: the next server finds its layers and removes them on destroy."""
    s = Serve(mcpbox, state, [allowed], pool=2)
    for _ in range(3):
        s.tool("destroy_sandbox", sandbox_id=s.create([]))
    subprocess.run(["sleep", "0.3"])  # the pool refills
    sid = s.create([{"source": proj, "target": "/workspace/app"}])
    code, out, _ = s.sh(sid, "cat /workspace/app/a.txt && echo kept > /workspace/app/k")
    assert code == 0 and out == "hello\n", out
    s.close()
    s = Serve(mcpbox, state, [allowed])
    code, out, _ = s.sh(sid, "cat /workspace/app/k")
    assert code == 0 and out == "kept\n", out
    assert os.path.exists(os.path.join(state, "workspaces", sid, "mounts.json"))
    s.tool("destroy_sandbox", sandbox_id=sid)
    s.tool("list_sandboxes")
    for _ in range(100):
        if not os.path.exists(os.path.join(state, "workspaces", sid)):
            break
        subprocess.run(["sleep", "0.05"])
    assert not os.path.exists(os.path.join(state, "workspaces", sid)), "layers left"
    s.close()
    assert not os.path.exists(os.path.join(proj, "k"))
    print("pool and restart: a pooled sandbox is never handed out for mounts; a new server "
          "finds the mounts and removes the layers on destroy")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="mbx-ws-", dir="/tmp")
    os.chmod(base, 0o755)
    try:
        proj = make_project(base)
        allowed = os.path.join(base, "allowed")
        state = os.path.join(allowed, "state")  # inside the allowed directory on purpose
        os.makedirs(state)
        s = Serve(a.mcpbox, state, [allowed])
        try:
            err, _, text = s.tool("create_sandbox")
            if err and "unsupported" in text.lower():
                print(f"SKIP: {text}")
                return SKIP
            check_refusals(s, base, proj, state)
            check_ro(s, proj)
            check_rw(s, proj)
            check_cow(s, proj, state)
            check_nested_and_relative(s, proj)
            check_escapes(s, proj)
            check_image(s, proj, state)
        finally:
            s.close()
        check_pool_and_restart(a.mcpbox, proj, state, allowed)
        check_roots(a.mcpbox, base, proj, state, allowed)
        check_cli(a.mcpbox, proj, base)
    finally:
        subprocess.run([a.mcpbox, "sandbox", "--state-dir", os.path.join(base, "allowed", "state"),
                        "rm", "--all"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
