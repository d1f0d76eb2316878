#!/usr/bin/env python3
"""Lookups with AI_ADDRCONFIG work in a policy sandbox (issue 39 item 1): glibc returns no IPv4
address for that flag unless the namespace has one other than 127.0.0.1, so `getent ahostsv4`
exited 2 and Python's getaddrinfo(..., AI_ADDRCONFIG) found nothing, for an allowed name and for
localhost alike. The sandbox now has its own address on lo; this checks the lookups, that the
address reaches only the sandbox itself, and that the policy still decides every way out.

usage: test_egress_addrconfig.py --mcpbox PATH [--user NAME]
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from egress_env import World, check, staged_mcpbox  # noqa: E402

CURL = "curl -sS --max-time 10 "
GAI = ("python3 -c 'import socket, sys; print(sorted({a[4][0] for a in socket.getaddrinfo("
       "sys.argv[1], 80, socket.AF_INET, socket.SOCK_STREAM, 0, socket.AI_ADDRCONFIG)}))' ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--user")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    mcpbox = staged_mcpbox(a.user, a.mcpbox) if a.user else os.path.abspath(a.mcpbox)
    w = World(mcpbox, a.user)
    try:
        sid = w.tool("create_sandbox", network_policy={"default_action": "deny", "egress": [
            {"action": "allow", "target": "allowed.test"}]})["structuredContent"]["sandbox_id"]
        for name in ("allowed.test", "localhost"):
            r = w.run(sid, "getent ahostsv4 " + name)
            check(r["exit_code"] == 0 and "STREAM" in r["stdout"],
                  "getent ahostsv4 %s finds an address" % name, json.dumps(r))
            r = w.run(sid, GAI + name)
            check(r["exit_code"] == 0 and r["stdout"].strip() not in ("", "[]"),
                  "getaddrinfo(%s, AI_ADDRCONFIG) finds an address" % name, json.dumps(r))
        r = w.run(sid, "getent ahostsv4 not-allowed.test")
        check(r["exit_code"] == 2, "a name the policy refuses still does not resolve",
              json.dumps(r))
        r = w.run(sid, CURL + "http://allowed.test/")
        check(r["exit_code"] == 0 and "host=allowed.test" in r["stdout"],
              "the allowed name is still reached", json.dumps(r))
        # the sandbox's own address: what it has, and a connection to it stays inside
        r = w.run(sid, "ip -4 -o addr show 2>/dev/null || cat /proc/net/fib_trie")
        own = [x for x in r["stdout"].split() if x.count(".") == 3 and
               not x.startswith("127.") and "/" in x]
        check(len(own) == 1, "the sandbox has one address besides loopback", json.dumps(r))
        addr = own[0].split("/")[0]
        port = random.randint(20000, 60000)
        r = w.run(sid, "python3 -c 'import socket; l = socket.socket(); l.bind((\"0.0.0.0\", %d)); "
                       "l.listen(); c = socket.create_connection((\"%s\", %d), timeout=5); "
                       "s, p = l.accept(); print(\"local\", p[0])'" % (port, addr, port))
        check(r["exit_code"] == 0 and "local" in r["stdout"],
              "a connection to %s stays in the sandbox" % addr, json.dumps(r))
        r = w.run(sid, CURL + "http://11.0.0.1/")
        check(r["exit_code"] != 0 and "hello" not in r["stdout"],
              "a nameless connection is still refused by the allowlist", json.dumps(r))
        r = w.run(sid, "python3 -c 'import socket; s = socket.socket(socket.AF_INET, "
                       "socket.SOCK_DGRAM); s.bind((\"%s\", 0)); "
                       "s.sendto(b\"leak\", (\"11.0.0.1\", 9999))'" % addr)
        check(r["exit_code"] != 0, "UDP from the sandbox's own address does not leave",
              json.dumps(r))
        check("udp" not in w.hits() and "host=11.0.0.1" not in w.hits(),
              "... and the test hosts saw neither", w.hits())
        w.tool("destroy_sandbox", sandbox_id=sid)
    finally:
        w.close()
    print("AI_ADDRCONFIG lookups work%s" % (" as " + a.user if a.user else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
