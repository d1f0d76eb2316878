"""A small MCP client over Streamable HTTP for the local-backend tests that need several local
users at one server (the kernel names each loopback client's user): `mcpbox serve --http` as a
subprocess, and this file run as another user (setpriv) to make that user's tool calls.

Only the standard library (it runs as users such as nobody, with the system python3).

As a program: mcp_http.py PORT CALLS_JSON [--keep]
  CALLS_JSON is a list of [tool, arguments]; "$SID" in an argument is the sandbox the last
  successful create_sandbox made, "$REVIEW" the token the last review_changes returned. Prints one JSON list of [isError, structuredContent, text], one
  per call, and destroys the sandboxes it made unless --keep.
"""
import atexit
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

PROTOCOL_VERSION = "2025-11-25"


class HttpClient:
    """One POST per message; a reply comes as JSON or as an SSE stream holding it."""

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
        try:
            self.conn.request("POST", "/mcp", json.dumps(msg), headers)
        except (BrokenPipeError, ConnectionResetError, http.client.CannotSendRequest):
            # The server closes a keep-alive connection idle for 30 s (HTTP_KEEPALIVE_TIMEOUT_MS)
            # and the request never reached it: send it again on a new connection, as
            # HTTP clients do with a reused connection found closed.
            self.conn.close()
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

    def initialize(self, name):
        self.call("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                 "clientInfo": {"name": name, "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})


def run_calls(port, calls, keep=False):
    c = HttpClient(port)
    c.initialize("local-test")
    out, made, sid, review = [], [], None, None
    for name, args in calls:
        args = json.loads(json.dumps(args).replace("$SID", sid or "")
                          .replace("$REVIEW", review or ""))
        res = c.call("tools/call", {"name": name, "arguments": args})
        text = "".join(p.get("text", "") for p in res.get("content", []))
        sc = res.get("structuredContent")
        out.append([res.get("isError", False), sc, text])
        if name == "create_sandbox" and not res.get("isError"):
            sid = sc["sandbox_id"]
            made.append(sid)
        if name == "review_changes" and not res.get("isError"):
            review = sc.get("review")
    for s in [] if keep else made:
        c.call("tools/call", {"name": "destroy_sandbox", "arguments": {"sandbox_id": s}})
    return out


_STAGED = {}


def staged(path):
    """A copy of path that any user can read and run: on a fresh machine the clone sits under
    /root, mode 0700, where another user reaches neither this script nor the mcpbox binary."""
    if path not in _STAGED:
        d = tempfile.mkdtemp(prefix="mbx-staged-")
        os.chmod(d, 0o755)
        copy = os.path.join(d, os.path.basename(path))
        shutil.copy2(path, copy)
        os.chmod(copy, 0o755)
        atexit.register(shutil.rmtree, d, True)
        _STAGED[path] = copy
    return _STAGED[path]


def as_user(uid, gid, port, calls, keep=False):
    """run_calls as uid:gid (no supplementary groups, no capabilities), in a child process."""
    argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", sys.executable,
            staged(os.path.abspath(__file__)),
            str(port), json.dumps(calls)] + (["--keep"] if keep else [])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd="/")
    assert r.returncode == 0, f"client as {uid}: {r.stderr}"
    return json.loads(r.stdout)


def start_server(mcpbox, state, args, log_path, user=None):
    """mcpbox serve --http 127.0.0.1:0 with args, as this user or as user (uid, gid); (Popen,
    port)."""
    argv = [mcpbox, "serve", "--http", "127.0.0.1:0", "--state-dir", state, "--local-pool", "0",
            "--log-level", "info"] + [str(a) for a in args]
    if user:
        argv[0] = staged(mcpbox)
        argv = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups"] + argv
    log = open(log_path, "w+")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
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


if __name__ == "__main__":
    print(json.dumps(run_calls(int(sys.argv[1]), json.loads(sys.argv[2]),
                               keep="--keep" in sys.argv[3:])))
