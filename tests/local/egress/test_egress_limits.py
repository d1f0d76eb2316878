#!/usr/bin/env python3
"""Egress by policy: a sandbox that opens connection after connection cannot exhaust mcpbox.

Each proxied connection costs mcpbox six descriptors (the sandbox's socket, the outside one, two
pipes). With a per-sandbox cap only, a few sandboxes holding their 1024 connections used up the
server's RLIMIT_NOFILE and every other request failed (EMFILE: no new sandbox, no command). The
server here runs with a low limit (prlimit 1100) so one sandbox is enough to show it: while it
tries to hold 1000 connections to an allowed test host, another sandbox is created and runs a command,
and the connections past the budget are refused as `too_many_connections` events; a second
sandbox with a policy still gets its even share.

usage: test_egress_limits.py --mcpbox PATH   (root: the test hosts' namespace; exit 77 if not)
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from egress_env import World, check  # noqa: E402

POLICY = {"default_action": "deny", "egress": [{"action": "allow", "target": "allowed.test"}]}
HOLD = r"""
import socket, sys, time
addr = socket.gethostbyname("allowed.test")
held = []
for i in range(int(sys.argv[1])):
    s = socket.socket()
    s.settimeout(5)
    try:  # a whole round trip, so the connection is through mcpbox and held open there
        s.connect((addr, 80))
        s.sendall(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        if s.recv(1):
            held.append(s)
    except OSError:
        pass
print("opened", len(held), flush=True)
time.sleep(int(sys.argv[2]))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    w = World(os.path.abspath(a.mcpbox), wrap=["prlimit", "--nofile=1100:1100", "--"])
    try:
        hog, peer = (w.tool("create_sandbox", network_policy=POLICY)["structuredContent"]
                     ["sandbox_id"] for _ in range(2))
        for sid in (hog, peer):
            w.tool("write_file", sandbox_id=sid, path="/workspace/hold.py", content=HOLD)
        w.run(hog, "python3 /workspace/hold.py 1000 120 > /workspace/out 2>&1 &")
        for _ in range(100):
            if "opened" in w.run(hog, "cat /workspace/out")["stdout"]:
                break
            time.sleep(0.2)
        time.sleep(8)  # the test host accepts them slowly: let them all reach mcpbox
        other = w.tool("create_sandbox", ok=False)
        check(not other.get("isError"), "another sandbox is created while one tries to hold "
              "1000 connections", json.dumps(other)[:600])
        sid = other["structuredContent"]["sandbox_id"]
        r = w.tool("run_command", ok=False, sandbox_id=sid, command="echo alive")
        check(not r.get("isError") and r["structuredContent"]["stdout"] == "alive\n",
              "... and runs a command", json.dumps(r)[:600])
        opened = w.run(hog, "cat /workspace/out")["stdout"].split()
        n = int(opened[1]) if len(opened) == 2 else -1
        check(64 <= n < 1000, "the sandbox itself still got its share of connections (%d)" % n,
              " ".join(opened))
        r = w.run(peer, "timeout 60 python3 /workspace/hold.py 20 0")
        check(r["stdout"].strip() == "opened 20", "a second sandbox with a policy still opens "
              "20 connections beside it (an even share is kept for it)", json.dumps(r))
        ev = w.tool("diagnose_sandbox", sandbox_id=hog, what="events")["structuredContent"]
        busy = [e for e in ev.get("events", []) if e.get("kind") == "egress_refused" and
                (e.get("data") or {}).get("reason") == "too_many_connections"]
        check(busy, "the connections past the server's budget are refused as "
              "too_many_connections", json.dumps(ev)[-800:])
    finally:
        w.close()
    print("all egress limit checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
