#!/usr/bin/env python3
"""Egress by policy on the local backend (issue 14), end to end through `mcpbox serve`: a sandbox
created with a network_policy reaches the allowed test hosts over HTTP and HTTPS and nothing else,
whatever the program does (curl, bash's /dev/tcp, a UDP send, an IP literal, a forged address),
and a policy changed on the live sandbox applies to the next connection. The test hosts live in
a network namespace the test makes (egress_env.py); mcpbox runs inside it, so no traffic can
leave it.

usage: test_egress.py --mcpbox PATH [--user NAME]   (NAME: run mcpbox as that ordinary user, one
       made by tests/local/rootless; as non-root the test cannot make namespaces: exit 77)
"""
import argparse
import json
import os
import sys
import time

T0 = time.monotonic()

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from egress_env import World, staged_mcpbox  # noqa: E402

POLICY = {"default_action": "deny", "egress": [
    {"action": "allow", "target": "allowed.test"},
    {"action": "allow", "target": "*.wild.test"},
    {"action": "allow", "target": "port.test", "ports": [8080]},
    {"action": "allow", "target": "loopy.test"},
    {"action": "allow", "target": "private.test"},
]}
CURL = "curl -sS --max-time 10 "
checks = 0


def check(cond, what, detail=""):
    global checks
    checks += 1
    if not cond:
        raise AssertionError("%s\n%s" % (what, detail))
    print("ok %d - %s (%.1f s)" % (checks, what, time.monotonic() - T0), flush=True)


def refusals(w, sid):
    res = w.tool("diagnose_sandbox", sandbox_id=sid, what="events")["structuredContent"]
    return [e.get("data") or {} for e in res.get("events", []) if e.get("kind") == "egress_refused"]


def refused(w, sid, **want):
    return [r for r in refusals(w, sid) if all(r.get(k) == v for k, v in want.items())]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--user")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    mcpbox = staged_mcpbox(a.user, a.mcpbox) if a.user else os.path.abspath(a.mcpbox)
    w = World(mcpbox, a.user, uplink=True)
    try:
        run_checks(w)
    finally:
        w.close()
    print("all %d checks passed%s" % (checks, " as " + a.user if a.user else ""))
    return 0


def run_checks(w):
    sid = w.tool("create_sandbox", network_policy=POLICY)["structuredContent"]["sandbox_id"]
    info = w.tool("get_sandbox", sandbox_id=sid)["structuredContent"]
    check(info.get("network_policy", {}).get("egress", [{}])[0].get("target") == "allowed.test",
          "get_sandbox shows the policy", json.dumps(info))

    r = w.run(sid, CURL + "http://allowed.test/")
    check(r["exit_code"] == 0 and "hello from 11.0.0.1:80 host=allowed.test" in r["stdout"],
          "an allowed name over HTTP", json.dumps(r))
    with open(w.cert) as f:
        w.tool("write_file", sandbox_id=sid, path="/workspace/ca.pem", content=f.read())
    r = w.run(sid, CURL + "--cacert /workspace/ca.pem https://allowed.test/")
    check(r["exit_code"] == 0 and "hello from 11.0.0.1:443" in r["stdout"],
          "an allowed name over HTTPS (the name from the ClientHello's SNI)", json.dumps(r))
    r = w.run(sid, "getent hosts allowed.test")
    check(r["exit_code"] == 0 and r["stdout"].startswith("198.18."),
          "the sandbox's DNS answers a synthetic address (never a host-side one)", json.dumps(r))

    r = w.run(sid, CURL + "http://other.test/")
    check(r["exit_code"] != 0 and "resolve" in r["stderr"].lower(),
          "a name not on the list does not resolve", json.dumps(r))
    check(refused(w, sid, name="other.test", protocol="dns", reason="policy"),
          "... and its lookup is an egress_refused event", json.dumps(refusals(w, sid)))
    r = w.run(sid, CURL + "--resolve other.test:80:11.0.0.1 http://other.test/")
    check(r["exit_code"] != 0, "a name not on the list, dialled by address, is refused",
          json.dumps(r))
    ev = refused(w, sid, name="other.test", port=80, reason="policy")
    check(ev and ev[0].get("decided_by") == "default deny",
          "... recorded with the port and what decided", json.dumps(refusals(w, sid)))
    r = w.run(sid, CURL + "https://other.test/ --cacert /workspace/ca.pem "
              "--resolve other.test:443:11.0.0.1")
    check(r["exit_code"] != 0 and refused(w, sid, name="other.test", port=443),
          "... over HTTPS too (SNI other.test)", json.dumps(r))

    r = w.run(sid, CURL + "http://www.wild.test/ && " + CURL + "http://deep.www.wild.test/")
    check(r["exit_code"] == 0 and r["stdout"].count("hello from 11.0.0.1:80") == 2,
          "a wildcard allows the names below it", json.dumps(r))
    r = w.run(sid, CURL + "http://wild.test/")
    check(r["exit_code"] != 0, "... but not the name itself", json.dumps(r))

    r = w.run(sid, CURL + "http://port.test:8080/")
    check(r["exit_code"] == 0 and "hello from 11.0.0.1:8080" in r["stdout"],
          "a port rule allows its port", json.dumps(r))
    r = w.run(sid, CURL + "http://port.test/")
    check(r["exit_code"] != 0 and refused(w, sid, name="port.test", port=80, reason="policy"),
          "... and refuses another port of the same name", json.dumps(r))

    for name, addr in (("loopy.test", "127.0.0.1"), ("private.test", "10.0.0.1")):
        r = w.run(sid, CURL + "http://%s/" % name)
        check(r["exit_code"] != 0 and
              refused(w, sid, name=name, reason="private_address", address=addr),
              "an allowed name resolving to %s is refused" % addr, json.dumps(refusals(w, sid)))

    r = w.run(sid, CURL + "http://11.0.0.1/")
    check(r["exit_code"] != 0, "an IP literal with no name is refused under an allowlist",
          json.dumps(r))
    check(any(x.get("name") is None and x.get("address") == "11.0.0.1"
              for x in refusals(w, sid)), "... recorded without a name", json.dumps(refusals(w, sid)))

    # bash's /dev/tcp: a plain connect() that knows nothing of proxy variables
    w.tool("write_file", sandbox_id=sid, path="/workspace/raw.sh", content=(
        "export http_proxy=http://10.9.9.9:3128 https_proxy=http://10.9.9.9:3128\n"
        "exec 3<>/dev/tcp/$1/80 || exit 7\n"
        "printf 'GET / HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n' \"$2\" >&3\n"
        "cat <&3\n"))
    raw = "bash /workspace/raw.sh %s %s"
    r = w.run(sid, raw % ("allowed.test", "allowed.test"))
    check(r["exit_code"] == 0 and "host=allowed.test" in r["stdout"],
          "a raw connect (bash /dev/tcp, proxy variables ignored) to an allowed name",
          json.dumps(r))
    r = w.run(sid, raw % ("11.0.0.1", "other.test"))
    check("hello" not in r["stdout"], "a raw connect naming another host in Host is refused",
          json.dumps(r))
    r = w.run(sid, raw % ("203.0.113.77", "allowed.test"))
    check(r["exit_code"] == 0 and "hello from 11.0.0.1:80 host=allowed.test" in r["stdout"],
          "the sandbox's address is not trusted: mcpbox resolves the name itself", json.dumps(r))

    r = w.run(sid, "python3 -c 'import socket; socket.socket(socket.AF_INET, "
                   "socket.SOCK_DGRAM).sendto(b\"leak\", (\"11.0.0.1\", 9999))'")
    check(r["exit_code"] != 0 and "not permitted" in r["stderr"], "a UDP send is refused",
          json.dumps(r))

    hits = w.hits()
    for bad in ("host=other.test", "127.0.0.1:80", "10.0.0.1:80", "host=11.0.0.1",
                "port.test path", "udp "):
        check(bad not in hits.replace("port.test:8080", ""),
              "no test host saw %r" % bad, hits)

    new = {"egress": [{"action": "allow", "target": "other.test"}]}
    w.tool("update_sandbox", sandbox_id=sid, network_policy=new)
    r = w.run(sid, CURL + "http://other.test/")
    check(r["exit_code"] == 0 and "host=other.test" in r["stdout"],
          "a policy changed on the live sandbox applies at once (now allowed)", json.dumps(r))
    r = w.run(sid, CURL + "http://allowed.test/")
    check(r["exit_code"] != 0, "... and what it no longer allows is refused", json.dumps(r))

    # a download in progress must not keep a leaving server alive (its connections go with it)
    w.run(sid, "curl -s -o /dev/null --limit-rate 100k http://other.test/big?bytes=100000000 "
               "> /dev/null 2>&1 &")
    time.sleep(0.5)
    t = time.monotonic()
    w.restart()
    check(time.monotonic() - t < 10, "a server leaving with a download in flight exits at once",
          "%.1f s" % (time.monotonic() - t))
    r = w.run(sid, CURL + "http://other.test/ && " + CURL + "http://allowed.test/")
    check("host=other.test" in r["stdout"] and r["exit_code"] != 0,
          "after a restart the new server enforces the stored policy", json.dumps(r))

    paused = w.tool("update_sandbox", ok=False, sandbox_id=sid, paused=True)
    if paused.get("isError") and w.user and "freezer" in json.dumps(paused):
        print("# no pause for this user (no cgroup freezer): the paused case is root's")
    else:
        assert not paused.get("isError"), paused
        w.restart()
        w.tool("update_sandbox", sandbox_id=sid, paused=False)
        r = w.run(sid, CURL + "http://other.test/")
        check(r["exit_code"] == 0 and "host=other.test" in r["stdout"],
              "a sandbox paused across a restart gets its egress back when resumed", json.dumps(r))

    summary = w.tool("diagnose_sandbox", sandbox_id=sid, what="summary")["structuredContent"]
    check(any(x.get("name") == "allowed.test" for x in summary.get("egress_refused", [])),
          "diagnose_sandbox lists the refusals", json.dumps(summary.get("egress_refused")))
    w.tool("destroy_sandbox", sandbox_id=sid)

    # A denylist: the default allows, so connections without a name go to the address dialled,
    # but never to a blocked one, and a denied name is refused whatever address is dialled.
    deny = w.tool("create_sandbox", network_policy={"default_action": "allow", "egress": [
        {"action": "deny", "target": "other.test"}]})["structuredContent"]["sandbox_id"]
    r = w.run(deny, CURL + "http://allowed.test/ && " + CURL + "http://11.0.0.1/")
    check(r["exit_code"] == 0 and "host=allowed.test" in r["stdout"] and
          "host=11.0.0.1" in r["stdout"],
          "a denylist lets other names and nameless connections through", json.dumps(r))
    r = w.run(deny, CURL + "--resolve other.test:80:11.0.0.1 http://other.test/")
    check(r["exit_code"] != 0 and refused(w, deny, name="other.test", port=80, reason="policy"),
          "... and refuses the denied name dialled by address", json.dumps(r))
    r = w.run(deny, CURL + "http://10.0.0.1/")
    check(r["exit_code"] != 0 and refused(w, deny, address="10.0.0.1", reason="private_address"),
          "... and a private address dialled directly", json.dumps(refusals(w, deny)))
    # a client that waits for the server to speak first: decided without a name after the wait
    # (2 s); it speaks at 5 s, so a loaded machine still decides before its bytes arrive (at
    # 2.5 s the bytes sometimes came first under load, and 'Host: x' does not resolve)
    r = w.run(deny, "python3 -c 'import socket, time; s = socket.create_connection("
                    "(\"11.0.0.1\", 80)); time.sleep(5); "
                    "s.sendall(b\"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n\"); "
                    "print(b\"\".join(iter(lambda: s.recv(4096), b\"\")).decode())'")
    check(r["exit_code"] == 0 and "hello from 11.0.0.1:80" in r["stdout"],
          "a client silent for the first 2 s is decided without a name", json.dumps(r))
    check("10.0.0.1:80" not in w.hits(), "... which never reached it", w.hits())
    w.tool("destroy_sandbox", sandbox_id=deny)

    # network: true beside it (pasta, not the policy path): through `mcpbox serve`, whose loop
    # blocks signals, pasta used to inherit the mask and fail at start. As root only: a user
    # needs /dev/net/tun opened up by `mcpbox setup`, host-wide state other runs may reset.
    if w.user:
        return
    full = w.tool("create_sandbox", network=True)["structuredContent"]["sandbox_id"]
    r = w.run(full, CURL + "http://11.0.0.1/")
    check(r["exit_code"] == 0 and "hello from 11.0.0.1:80" in r["stdout"],
          "network: true through mcpbox serve reaches a public address (pasta starts)",
          json.dumps(r))
    w.tool("destroy_sandbox", sandbox_id=full)


if __name__ == "__main__":
    sys.exit(main())
