#!/usr/bin/env python3
"""Secrets injected at the egress boundary (issue 37), plain HTTP, end to end through
`mcpbox secret` and `mcpbox serve` against test hosts in a network namespace, as root or as an
ordinary user (--user). The person defines two secrets with the CLI (a header one from an env
var, a placeholder one from a command); the agent finds their names in diagnose_sandbox without
an id, binds them at create and never sees a value. Each leak of the issue's list is tried:
a host echoing request headers, a redirect to another host, a bound name dialled at another
address, an unbound host, the proxy's /proc and environment from inside, core dumps, and the
value in results, logs, events or the state directory.

usage: test_secrets.py --mcpbox PATH [--user NAME]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from egress_env import World, check, staged_mcpbox  # noqa: E402

CURL = "curl -sS --max-time 10 "


class Hosts:
    """secrets_servers.py on 11.0.0.5 (bound), 11.0.0.6 (decoy) and 11.0.0.1 (other), :8081."""

    def __init__(self, w, cert="-", key="-", at=("11.0.0.5:8081", "11.0.0.6:8081",
                                                 "11.0.0.1:8081"), log="secrets-hits.log"):
        self.log = os.path.join(w.dir, log)
        open(self.log, "w").close()
        self.proc = subprocess.Popen(
            w.nsenter + [sys.executable, os.path.join(HERE, "secrets_servers.py"), self.log,
                         cert, key] + list(at),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout.readline().strip() == b"ready", "secrets servers did not start"

    def hits(self, at=None):
        with open(self.log) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return [r for r in rows if at is None or r["at"].startswith(at)]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def serve_pid(top):
    """mcpbox serve itself: top, or (as a user, under runuser) the mcpbox below it."""
    for _ in range(4):
        if os.readlink("/proc/%d/exe" % top).endswith("mcpbox"):
            return top
        kids = open("/proc/%d/task/%d/children" % (top, top)).read().split()
        top = int(kids[0])
    return top


def secret_cli(w, mcpbox, user, *args, env=None):
    argv = ["runuser", "-u", user, "--"] if user else []
    e = dict(os.environ, **(env or {}))
    return subprocess.run(argv + [mcpbox, "secret", "--state-dir", os.path.join(w.dir, "state")] +
                          list(args), capture_output=True, text=True, env=e, timeout=60)


def define(w, mcpbox, user, value, value2, bound):
    r = secret_cli(w, mcpbox, user, "add", "tok", "--from-env", "TEST_TOKEN", "--host", bound,
                   env={"TEST_TOKEN": value})
    check(r.returncode == 0 and value not in r.stdout + r.stderr,
          "secret add --from-env, the value never printed", r.stdout + r.stderr)
    r = secret_cli(w, mcpbox, user, "add", "ph", "--from-command", "echo %s" % value2,
                   "--host", bound, "--placeholder")
    check(r.returncode == 0, "secret add --from-command --placeholder", r.stdout + r.stderr)
    r = secret_cli(w, mcpbox, user, "add", "bad name", "--from-env", "TEST_TOKEN", "--host", bound,
                   env={"TEST_TOKEN": value})
    check(r.returncode != 0 and "letters" in r.stderr, "a bad name is refused, saying why",
          r.stderr)
    r = secret_cli(w, mcpbox, user, "add", "x", "--from-env", "NOPE_UNSET", "--host", bound)
    check(r.returncode == 2 and "not set" in r.stderr, "an unset env var is refused", r.stderr)
    path = os.path.join(w.dir, "state", "secrets.json")
    check(os.stat(path).st_mode & 0o777 == 0o600, "secrets.json is 0600")
    r = secret_cli(w, mcpbox, user, "-o", "json", "ls")
    listed = json.loads(r.stdout)
    check(sorted(x["name"] for x in listed) == ["ph", "tok"] and value not in r.stdout and
          value2 not in r.stdout, "secret ls lists names and hosts, never values", r.stdout)


def agent_side(w, value, value2):
    host = w.tool("diagnose_sandbox")["structuredContent"]
    names = sorted(x["name"] for x in host.get("secrets", []))
    check(names == ["ph", "tok"] and value not in json.dumps(host),
          "diagnose_sandbox without an id lists the secret names", json.dumps(host)[:600])
    r = w.tool("create_sandbox", ok=False, secrets=["nope"])
    text = json.dumps(r)
    check(r.get("isError") and "tok" in text and "ph" in text and value not in text,
          "binding an unknown name is refused, listing the names there are", text[:600])


def injection(w, sid, hosts, value, value2, bound):
    out = w.run(sid, CURL + "-H 'Authorization: Bearer fake' http://%s:8081/plain" % bound)
    seen = hosts.hits("11.0.0.5")
    auth = [v for r in seen for k, v in r["headers"] if k.lower() == "authorization"]
    check(auth == ["Bearer " + value], "the bound host gets the header, the sandbox's replaced",
          json.dumps(seen))
    env = w.run(sid, "echo $MCPBOX_SECRET_PH")["stdout"].strip()
    check(env == "MCPBOX_SECRET_PH", "the sandbox's env carries the placeholder, not the value",
          env)
    w.run(sid, CURL + "-H \"X-Key: k=$MCPBOX_SECRET_PH\" 'http://%s:8081/q?key=MCPBOX_SECRET_PH'"
          % bound)
    last = hosts.hits("11.0.0.5")[-1]
    check(["X-Key", "k=" + value2] in last["headers"] and last["path"] == "/q?key=" + value2,
          "the placeholder is replaced in a header and the request line", json.dumps(last))
    out = w.run(sid, CURL + "-i http://%s:8081/echo" % bound)
    check(value not in json.dumps(out) and value2 not in json.dumps(out) and "****" in out["stdout"],
          "a reply echoing the request headers reaches the sandbox masked", json.dumps(out)[:800])


def leaks(w, sid, hosts, value, value2, bound, decoy):
    w.run(sid, CURL + "-H 'X-Key: $MCPBOX_SECRET_PH' http://other.test:8081/unbound")
    other = hosts.hits("11.0.0.1")
    check(other and value not in json.dumps(other) and value2 not in json.dumps(other),
          "an unbound host never receives the secret", json.dumps(other))
    n = len(hosts.hits("11.0.0.1"))
    w.run(sid, CURL + "-L 'http://%s:8081/redirect?to=http://other.test:8081/after'" % bound)
    after = hosts.hits("11.0.0.1")[n:]
    check(after and after[0]["path"] == "/after" and value not in json.dumps(after),
          "a redirect to another host carries no secret", json.dumps(after))
    w.run(sid, CURL + "--resolve %s:8081:11.0.0.6 http://%s:8081/dialled" % (bound, bound))
    check(hosts.hits("11.0.0.6") == [] and hosts.hits("11.0.0.5")[-1]["path"] == "/dialled",
          "a bound name dialled at another address goes to the name's own host",
          json.dumps(hosts.hits("11.0.0.6")))
    w.run(sid, CURL + "http://%s:8081/decoy" % decoy)
    check(value not in json.dumps(hosts.hits("11.0.0.6")), "a decoy host gets nothing",
          json.dumps(hosts.hits("11.0.0.6")))
    r = w.run(sid, "cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'; "
                   "ls /proc | head -50; cat %s/state/secrets.json 2>&1" % w.dir)
    check(value not in json.dumps(r) and value2 not in json.dumps(r),
          "nothing in the sandbox's /proc or view of the state holds a value", json.dumps(r)[:600])
    limits = open("/proc/%d/limits" % serve_pid(w.serve.pid)).read()
    core = [line for line in limits.splitlines() if line.startswith("Max core file size")]
    check(core and core[0].split()[4:6] == ["0", "0"], "the server dumps no core once it injected",
          json.dumps(core))


def hostile(w, sid, hosts, value, value2, bound):
    """A second sandbox allowed the same host, unbound; a huge head; a pipelined request."""
    other = w.tool("create_sandbox", network_policy={
        "default_action": "deny", "egress": [{"action": "allow", "target": bound}]})[
        "structuredContent"]["sandbox_id"]
    n = len(hosts.hits("11.0.0.5"))
    both = "(%s 'http://%s:8081/a?k=MCPBOX_SECRET_PH') & " % (CURL, bound)
    w.run(other, both.replace("/a?", "/b?") + CURL + "http://%s:8081/b2; wait" % bound)
    w.run(sid, CURL + "http://%s:8081/a2" % bound)
    got = hosts.hits("11.0.0.5")[n:]
    mine = [r for r in got if r["path"].startswith("/a")]
    theirs = [r for r in got if r["path"].startswith("/b")]
    check(len(theirs) == 2 and value not in json.dumps(theirs) and value2 not in json.dumps(theirs)
          and mine and value in json.dumps(mine),
          "two sandboxes at once: the unbound one's requests to the same host carry nothing",
          json.dumps(got))
    n = len(hosts.hits("11.0.0.5"))
    w.run(sid, CURL + "-H \"X-Big: $(head -c 20000 /dev/zero | tr '\\0' a)\" "
          "http://%s:8081/huge" % bound)
    got = hosts.hits("11.0.0.5")[n:]
    check(all(value not in json.dumps(r) for r in got),
          "a request head over 16 KiB goes through without the secret", json.dumps(got)[:300])
    n = len(hosts.hits("11.0.0.5"))
    r = w.run(sid, "python3 -c \"import socket; s = socket.create_connection(('%s', 8081)); "
                   "s.sendall(b'GET /p1 HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n"
                   "GET /p2 HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n'); "
                   "import time; time.sleep(1); print(s.recv(65536))\"" % (bound, bound, bound))
    got = hosts.hits("11.0.0.5")[n:]
    check([x["path"] for x in got] == ["/p1"] and value not in r["stdout"],
          "a pipelined second request is never read by the host", json.dumps(got) + r["stdout"])
    w.tool("destroy_sandbox", sandbox_id=other)
    flood(w, sid, hosts, value, bound)


def flood(w, sid, hosts, value, bound):
    """One sandbox holding 300 stalled connections to a bound host cannot starve another's."""
    second = w.tool("create_sandbox", secrets=["tok"])["structuredContent"]["sandbox_id"]
    w.tool("write_file", sandbox_id=sid, path="/workspace/stall.py", content=(
        "import socket, time\n"
        "held = [socket.create_connection(('%s', 8081)) for _ in range(300)]\n"
        "print('held', len(held), flush=True)\n"
        "time.sleep(8)\n" % bound))
    w.tool("run_command", sandbox_id=sid, command="python3 /workspace/stall.py",
           background=True)
    w.run(sid, "sleep 2")
    n = len(hosts.hits("11.0.0.5"))
    r = w.run(second, CURL + "http://%s:8081/flooded" % bound)
    got = hosts.hits("11.0.0.5")[n:]
    check(r["exit_code"] == 0 and len(got) == 1 and value in json.dumps(got),
          "a flood of stalled connections from one sandbox leaves another's injection working",
          json.dumps(r) + json.dumps(got))
    w.tool("destroy_sandbox", sandbox_id=second)


def late_binding(w, hosts, value, bound):
    """update_sandbox binds (and unbinds) secrets on a live sandbox."""
    sid = w.tool("create_sandbox", network_policy={
        "default_action": "deny", "egress": [{"action": "allow", "target": "other.test"}]})[
        "structuredContent"]["sandbox_id"]
    r = w.run(sid, CURL + "http://%s:8081/late0; echo rc=$?" % bound)
    check("rc=0" not in r["stdout"], "before binding, the bound host is not allowed", json.dumps(r))
    r = w.tool("update_sandbox", ok=False, sandbox_id=sid, secrets=["nope"])
    check(r.get("isError") and "tok" in json.dumps(r), "update_sandbox refuses an unknown name",
          json.dumps(r)[:400])
    w.tool("update_sandbox", sandbox_id=sid, secrets=["tok"])
    n = len(hosts.hits("11.0.0.5"))
    w.run(sid, CURL + "http://%s:8081/late1" % bound)
    got = hosts.hits("11.0.0.5")[n:]
    check(len(got) == 1 and ["Authorization", "Bearer " + value] in got[0]["headers"],
          "update_sandbox secrets: bound now, egress to its host allowed", json.dumps(got))
    w.tool("update_sandbox", sandbox_id=sid, secrets=[])
    n = len(hosts.hits("11.0.0.5"))
    w.run(sid, CURL + "http://%s:8081/late2" % bound)
    got = hosts.hits("11.0.0.5")[n:]
    check(len(got) == 1 and value not in json.dumps(got), "secrets [] unbinds them",
          json.dumps(got))
    plain = w.tool("create_sandbox")["structuredContent"]["sandbox_id"]
    r = w.tool("update_sandbox", ok=False, sandbox_id=plain, secrets=["tok"])
    check(r.get("isError") and "network_policy" in json.dumps(r),
          "a sandbox without a policy cannot bind (no proxy), saying what to do", json.dumps(r))
    for x in (sid, plain):
        w.tool("destroy_sandbox", sandbox_id=x)


def cli_create(w, mcpbox, user, hosts, value, bound):
    """A person binds with `mcpbox sandbox create --secret`; the server serves its egress."""
    argv = w.nsenter + (["runuser", "-u", user, "--"] if user else []) + [
        "env", "MCPBOX_EGRESS_HOSTS=" + w.hosts, mcpbox, "sandbox", "--state-dir",
        os.path.join(w.dir, "state"), "create", "--secret", "tok", "--timeout", "600"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    sid = r.stdout.strip()
    check(r.returncode == 0 and sid.startswith("sbx-"), "mcpbox sandbox create --secret",
          r.stdout + r.stderr)
    w.made.append(sid)
    r = subprocess.run(argv[:-5] + ["create", "--secret", "nope"], capture_output=True,
                       text=True, timeout=120)
    check(r.returncode != 0 and "tok" in r.stderr, "... an unknown name refused, listing them",
          r.stderr)
    n = len(hosts.hits("11.0.0.5"))
    w.run(sid, CURL + "http://%s:8081/cli" % bound)
    got = hosts.hits("11.0.0.5")[n:]
    check(len(got) == 1 and ["Authorization", "Bearer " + value] in got[0]["headers"],
          "... and its requests to the bound host carry the secret", json.dumps(got))
    w.tool("destroy_sandbox", sandbox_id=sid)


def usage_and_traces(w, sid, value, value2, bound, stderr_path):
    d = w.tool("diagnose_sandbox", sandbox_id=sid)["structuredContent"]
    used = d.get("secrets", {}).get("used", {})
    check(used.get("tok", {}).get(bound, {}).get("count", 0) >= 4 and "ph" in used,
          "diagnose_sandbox shows which secrets were used, where, how often", json.dumps(d)[:900])
    everything = json.dumps(d) + json.dumps(w.tool("get_sandbox", sandbox_id=sid)) + \
        json.dumps(w.tool("diagnose_sandbox", sandbox_id=sid, what="events"))
    check(value not in everything and value2 not in everything, "no value in diagnose or get")
    w.tool("destroy_sandbox", sandbox_id=sid)
    log = open(stderr_path, errors="replace").read()
    check(value not in log and value2 not in log, "no value in the server's log")
    found = subprocess.run(["grep", "-rl", "--exclude=secrets.json", "-e", value, "-e", value2,
                            os.path.join(w.dir, "state")], capture_output=True, text=True)
    check(found.stdout == "", "no value in the state directory but secrets.json (store, audit)",
          found.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--user")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    mcpbox = staged_mcpbox(a.user, a.mcpbox) if a.user else os.path.abspath(a.mcpbox)
    value = "tok-%016x" % random.getrandbits(64)
    value2 = "cmd-%016x" % random.getrandbits(64)
    bound, decoy = "bound.test", "decoy.test"
    stderr = tempfile.NamedTemporaryFile(prefix="mcpbox-secrets-log-", delete=False)
    w = World(mcpbox, a.user, stderr=stderr, extra=[("11.0.0.5", [bound]),
                                                    ("11.0.0.6", [decoy])])
    hosts = Hosts(w)
    try:
        define(w, mcpbox, a.user, value, value2, bound)
        agent_side(w, value, value2)
        sid = w.tool("create_sandbox", secrets=["tok", "ph"], network_policy={
            "default_action": "deny", "egress": [{"action": "allow", "target": "other.test"},
                                                 {"action": "allow", "target": decoy}]})[
            "structuredContent"]["sandbox_id"]
        injection(w, sid, hosts, value, value2, bound)
        leaks(w, sid, hosts, value, value2, bound, decoy)
        hostile(w, sid, hosts, value, value2, bound)
        late_binding(w, hosts, value, bound)
        cli_create(w, mcpbox, a.user, hosts, value, bound)
        usage_and_traces(w, sid, value, value2, bound, stderr.name)
    except Exception:
        print("# serve's log:\n" + open(stderr.name, errors="replace").read()[-3000:])
        raise
    finally:
        hosts.close()
        w.close()
        os.unlink(stderr.name)
    print("secrets injected, none leaked%s" % (" as " + a.user if a.user else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
