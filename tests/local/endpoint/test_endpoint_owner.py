#!/usr/bin/env python3
"""get_endpoint's host port answers only the sandbox's owner and the server's own user (issue 32,
"Also seen": before, any local user could connect to 127.0.0.1:PORT and talk to the sandbox).

- A root stdio server (owner local:uid:0) makes a sandbox serving "hello" on its port 8000 and an
  endpoint for it: root reads "hello"; nobody and an unnamed uid are closed on unheard.
- A root HTTP server, the sandbox made by nobody over loopback (owner local:uid:65534): nobody
  and root (the server's user) read "hello"; another uid does not.

usage: test_endpoint_owner.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_http import as_user, start_server  # noqa: E402
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SKIP = 77
NOBODY = 65534
STRANGER = random.randint(40000, 60000)  # a uid without an account
PORT = 8000

LISTENER = ("import socket\n"
            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            f"s.bind(('127.0.0.1', {PORT})); s.listen(16)\n"
            "while True:\n"
            "    c, _ = s.accept(); c.sendall(b'hello\\n'); c.close()\n")
WAIT = (f"for i in $(seq 1 100); do python3 -c 'import socket; socket.create_connection("
        f"(\"127.0.0.1\", {PORT}))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1")


def serve_calls():
    return [["run_command", {"sandbox_id": "$SID", "background": True,
                             "command": "exec python3 -c " + shlex.quote(LISTENER)}],
            ["run_command", {"sandbox_id": "$SID", "command": WAIT}],
            ["get_endpoint", {"sandbox_id": "$SID", "port": PORT}]]


def read_as(uid, host_port):
    """What uid reads from the endpoint: the bytes, or "" when closed on unheard."""
    code = ("import socket\n"
            f"s = socket.create_connection(('127.0.0.1', {host_port}), timeout=10)\n"
            "data = b''\n"
            "try:\n"
            "    while True:\n"
            "        b = s.recv(100)\n"
            "        if not b: break\n"
            "        data += b\n"
            "except ConnectionResetError:\n"
            "    pass\n"
            "print(data.decode(), end='')\n")
    r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                        sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def expect(host_port, allowed, refused, what):
    for uid in allowed:
        got = read_as(uid, host_port)
        assert got == "hello\n", f"{what}: uid {uid} read {got!r}, not the sandbox's hello"
    for uid in refused:
        got = read_as(uid, host_port)
        assert got == "", f"{what}: uid {uid}, not the owner, read {got!r} from the sandbox"
    print(f"{what}: uids {allowed} reach the sandbox, {refused} are closed on unheard")


def check_stdio(mcpbox, state):
    c = Client(serve_argv(mcpbox, state, "--local-pool", 0), stderr=subprocess.DEVNULL, cwd="/")
    try:
        c.initialize("endpoint-owner")
        res = c.call_tool("create_sandbox", {})
        if res.get("isError"):
            text = result_text(res)
            if "unsupported" in text.lower():
                print(f"SKIP: {text}")
                return False
            raise AssertionError(text)
        sid = res["structuredContent"]["sandbox_id"]
        try:
            out = None
            for name, args in serve_calls():
                args = {k: (sid if v == "$SID" else v) for k, v in args.items()}
                res = c.call_tool(name, args)
                assert not res.get("isError"), f"{name}: {result_text(res)}"
                out = res["structuredContent"]
            expect(out["host_port"], [0], [NOBODY, STRANGER], "root's sandbox (stdio)")
        finally:  # its forwarder goes with it
            c.call_tool("destroy_sandbox", {"sandbox_id": sid})
    finally:
        c.close(timeout=60)
    return True


def check_http(mcpbox, state, base):
    proc, port = start_server(mcpbox, state, [], os.path.join(base, "http.log"))
    try:
        r = as_user(NOBODY, NOBODY, port, [["create_sandbox", {}]] + serve_calls(), keep=True)
        sid = r[0][1]["sandbox_id"] if not r[0][0] else None
        try:
            for err, _, text in r:
                assert not err, text
            expect(r[-1][1]["host_port"], [NOBODY, 0], [STRANGER], "nobody's sandbox (HTTP)")
        finally:
            if sid:
                as_user(NOBODY, NOBODY, port, [["destroy_sandbox", {"sandbox_id": sid}]])
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("FAIL: this test connects as other users, which needs root")
        return 1
    base = tempfile.mkdtemp(prefix="mbx-endpoint-", dir="/tmp")
    os.chmod(base, 0o755)
    try:
        state = os.path.join(base, "state")
        if not check_stdio(a.mcpbox, state):
            return SKIP
        check_http(a.mcpbox, state, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
