#!/usr/bin/env python3
"""Repeated egress refusals are counted as they happen (issue 39 item 8): four identical refusals
within a second show count 4 in diagnose_sandbox at once, not count 1 until a later event after
the 60 s window; a different port stays a refusal of its own; and 200 in a burst, far past the
proxy's cap on events (50 per 10 s), still show count 200.

usage: test_egress_repeats.py --mcpbox PATH [--user NAME]
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from egress_env import World, check, staged_mcpbox  # noqa: E402

CURL = "curl -sS --max-time 10 "


def summary_of(w, sid, name, port):
    s = w.tool("diagnose_sandbox", sandbox_id=sid, what="summary")["structuredContent"]
    got = [x for x in s.get("egress_refused", []) if x.get("name") == name and
           x.get("port") == port]
    return got, s.get("egress_refused")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--user")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    mcpbox = staged_mcpbox(a.user, a.mcpbox) if a.user else os.path.abspath(a.mcpbox)
    name = "denied%d.test" % random.randint(0, 1 << 30)
    flood = "flood" + name
    w = World(mcpbox, a.user, extra=[("11.0.0.2", [name, flood])])
    try:
        sid = w.tool("create_sandbox", network_policy={
            "default_action": "allow", "egress": [{"action": "deny", "target": name},
                                                  {"action": "deny", "target": flood}]})[
                "structuredContent"]["sandbox_id"]
        times = 4
        # dialled by address (--resolve), so each is one connection the policy refuses by name
        r = w.run(sid, "for i in $(seq %d); do %s --resolve %s:80:11.0.0.2 http://%s/; done; "
                  "exit 0" % (times, CURL, name, name))
        check(r["stdout"].count("hello from") == 0, "%d refusals of %s" % (times, name),
              json.dumps(r))
        got, all_ = summary_of(w, sid, name, 80)
        check(len(got) == 1 and got[0].get("count") == times,
              "diagnose_sandbox counts all %d at once" % times, json.dumps(all_))
        check(isinstance(got[0].get("last_time"), str), "... with the time of the last one",
              json.dumps(got))
        w.run(sid, CURL + "--resolve %s:8080:11.0.0.2 http://%s:8080/; exit 0" % (name, name))
        got, all_ = summary_of(w, sid, name, 8080)
        check(len(got) == 1 and got[0].get("count") == 1, "another port is its own refusal",
              json.dumps(all_))
        got, all_ = summary_of(w, sid, name, 80)
        check(len(got) == 1 and got[0].get("count") == times, "... and the first still counts %d"
              % times, json.dumps(all_))
        burst = 200
        r = w.run(sid, "python3 -c 'import socket\nfor i in range(%d):\n"
                       " s = socket.create_connection((\"11.0.0.2\", 80))\n"
                       " s.sendall(b\"GET / HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n\")\n"
                       " try: s.recv(10)\n except OSError: pass\n s.close()'" % (burst, flood),
                  timeout=120)
        check(r["exit_code"] == 0, "%d refusals of %s in a burst" % (burst, flood), json.dumps(r))
        got, all_ = summary_of(w, sid, flood, 80)
        check(len(got) == 1 and got[0].get("count") == burst,
              "diagnose_sandbox counts all %d, past the cap on events" % burst, json.dumps(all_))
        w.tool("destroy_sandbox", sandbox_id=sid)
    finally:
        w.close()
    print("repeats counted%s" % (" as " + a.user if a.user else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
