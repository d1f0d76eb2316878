#!/usr/bin/env python3
"""Reserved ranges stay unreachable (issue 32 item 10): a sandbox whose policy allows by default,
and (as root) one with network: true, cannot reach test hosts in the documentation ranges
(198.51.100.7, 203.0.113.7), in 192.0.2.0/24 or in the 6to4 relay range, dialled by address or
by a name that resolves there, while a public test host stays reachable. The hosts live in the
test's own network namespace (egress_env.py); the host log proves no connection arrived.

usage: test_egress_reserved.py --mcpbox PATH [--user NAME]
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from egress_env import World, check, staged_mcpbox  # noqa: E402

CURL = "curl -sS --max-time 10 "
RESERVED = ["198.51.100.%d", "203.0.113.%d", "192.0.2.%d", "192.88.99.%d"]


def refusals(w, sid):
    res = w.tool("diagnose_sandbox", sandbox_id=sid, what="events")["structuredContent"]
    return [e.get("data") or {} for e in res.get("events", []) if e.get("kind") == "egress_refused"]


def unreachable(w, sid, hosts, by_name):
    for addr, names in hosts:
        target = names[0] if by_name else addr
        r = w.run(sid, CURL + "http://%s/" % target)
        check(r["exit_code"] != 0 and "hello from" not in r["stdout"],
              "%s (%s) is not reached" % (target, addr), json.dumps(r))
        check(addr not in w.hits(), "... and saw no connection", w.hits())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--user")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    mcpbox = staged_mcpbox(a.user, a.mcpbox) if a.user else os.path.abspath(a.mcpbox)
    last = random.randint(2, 250)  # not the uplink's .1 or its gateway's .254
    hosts = [(r % last, ["reserved%d.test" % i]) for i, r in enumerate(RESERVED)]
    w = World(mcpbox, a.user, uplink=True, extra=hosts)
    try:
        sid = w.tool("create_sandbox", network_policy={"default_action": "allow", "egress": []})[
            "structuredContent"]["sandbox_id"]
        r = w.run(sid, CURL + "http://11.0.0.1/")
        check(r["exit_code"] == 0 and "hello from 11.0.0.1:80" in r["stdout"],
              "policy allowing by default: a public address is reached", json.dumps(r))
        unreachable(w, sid, hosts, by_name=False)
        unreachable(w, sid, hosts, by_name=True)
        got = refusals(w, sid)
        for addr, _ in hosts:
            check(any(x.get("address") == addr and x.get("reason") == "private_address"
                      for x in got), "diagnose_sandbox shows %s refused as reserved" % addr,
                  json.dumps(got))
        w.tool("destroy_sandbox", sandbox_id=sid)
        if a.user:  # network: true rootless needs /dev/net/tun from `mcpbox setup`
            return 0
        full = w.tool("create_sandbox", network=True)["structuredContent"]["sandbox_id"]
        r = w.run(full, CURL + "http://11.0.0.1/")
        check(r["exit_code"] == 0 and "hello from 11.0.0.1:80" in r["stdout"],
              "network: true: a public address is reached", json.dumps(r))
        unreachable(w, full, hosts, by_name=False)
        w.tool("destroy_sandbox", sandbox_id=full)
    finally:
        w.close()
    print("reserved ranges held%s" % (" as " + a.user if a.user else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
