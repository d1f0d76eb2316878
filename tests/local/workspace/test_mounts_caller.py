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
       test_mounts_caller.py --client PORT CALLS_JSON   (internal: one user's MCP client)
"""
import argparse
import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
PROTOCOL_VERSION = "2025-11-25"


# ---- the client, run as another user -------------------------------------------------------

class HttpClient:
    """MCP over Streamable HTTP with the standard library: one POST per message; a reply comes
    as JSON or as an SSE stream holding it."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.session = None
        self.next_id = 1

    def post(self, msg):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": PROTOCOL_VERSION}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        self.conn.request("POST", "/mcp", json.dumps(msg), headers)
        resp = self.conn.getresponse()
        body = resp.read().decode()
        self.session = resp.getheader("Mcp-Session-Id") or self.session
        if "id" not in msg:
            return None
        if resp.getheader("Content-Type", "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith("data:"):
                    m = json.loads(line[5:])
                    if m.get("id") == msg["id"]:
                        return m
            raise RuntimeError(f"no reply in {body!r}")
        return json.loads(body)

    def call(self, method, params):
        rid = self.next_id
        self.next_id += 1
        reply = self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]


def client_main(port, calls):
    """Runs the tool calls in order; "$SID" in an argument is the last created sandbox. Prints
    one JSON list of [isError, structuredContent, text] and destroys what it created."""
    c = HttpClient(port)
    c.call("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                          "clientInfo": {"name": "caller-test", "version": "1"}})
    c.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    out, made, sid = [], [], None
    for name, args in calls:
        args = json.loads(json.dumps(args).replace("$SID", sid or ""))
        res = c.call("tools/call", {"name": name, "arguments": args})
        text = "".join(p.get("text", "") for p in res.get("content", []))
        sc = res.get("structuredContent")
        out.append([res.get("isError", False), sc, text])
        if name == "create_sandbox" and not res.get("isError"):
            sid = sc["sandbox_id"]
            made.append(sid)
    for s in made:
        c.call("tools/call", {"name": "destroy_sandbox", "arguments": {"sandbox_id": s}})
    print(json.dumps(out))
    return 0


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


def as_user(uid, gid, port, calls):
    """The client as uid:gid (no supplementary groups, no capabilities); its results."""
    argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", sys.executable, os.path.abspath(__file__),
            "--client", str(port), json.dumps(calls)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd="/")
    assert r.returncode == 0, f"client as {uid}: {r.stderr}"
    return json.loads(r.stdout)


def start_server(mcpbox, state, allow, log_path):
    args = [mcpbox, "serve", "--http", "127.0.0.1:0", "--state-dir", state, "--local-pool", "0",
            "--log-level", "info"]
    for d in allow:
        args += ["--allow-dir", d]
    log = open(log_path, "w+")
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=log, cwd="/")
    deadline = time.time() + 20
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", log.read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    raise RuntimeError("server did not start: " + log.read())


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

    # root: its own directory, as before.
    r = as_user(0, 0, port, [
        ["create_sandbox", {"mounts": [rw(root_dir)]}],
        ["run_command", {"sandbox_id": "$SID", "command": "cat /workspace/p/secret"}],
    ])
    assert not r[0][0] and r[1][1]["stdout"] == "root-only\n", r
    print("root: its own directory still mounts")


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
    ap.add_argument("--mcpbox")
    ap.add_argument("--client", nargs=2, metavar=("PORT", "CALLS"))
    a = ap.parse_args()
    if a.client:
        return client_main(int(a.client[0]), json.loads(a.client[1]))
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
        import pwd
        pw = pwd.getpwnam(user)
        make_dirs(base, pw.pw_uid, pw.pw_gid)
        state = os.path.join(base, "state")
        proc, port = start_server(a.mcpbox, state, [os.path.join(base, "root-proj")],
                                  os.path.join(base, "server.log"))
        probe = as_user(0, 0, port, [["create_sandbox", {}]])[0]
        if probe[0] and "unsupported" in probe[2].lower():
            print(f"SKIP: {probe[2]}")
            return SKIP
        check_issue(port, base)
        proc.terminate()
        proc.wait(timeout=30)
        proc, port = start_server(a.mcpbox, state,
                                  [os.path.join(base, "root-proj"),
                                   f"{user}={os.path.join(base, 'user-proj')}"],
                                  os.path.join(base, "server2.log"))
        check(port, base, user, pw.pw_uid, pw.pw_gid)
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
