#!/usr/bin/env python3
"""Secrets on the opensandbox backend (issue 37): the person's secrets bound to an osb- sandbox
go into the remote's Credential Vault, whose egress proxy injects them. The remote is mcpbox's
own OpenSandbox API (serve --http --opensandbox-api) over real local sandboxes; the front is a
second mcpbox on stdio with the opensandbox backend pointing at it, both inside the egress
tests' network namespace with test hosts (vault.test and vault2.test on 11.0.0.9, HTTP on 80 and
HTTPS on 443 with a test CA the remote is told of; decoy.test on 11.0.0.10:80) that log every
request's headers. As root, or as an ordinary user (--user).

Checked: the header arrives at the bound host (bearer over HTTP and HTTPS, apiKey, a custom
template), never at an
unbound one nor from a sandbox that did not bind it; the sandbox never sees the value (echo,
env, files); update_sandbox adds (with egress to a new host), replaces and removes mcpbox's
entries and leaves the person's own vault entry alone; a placeholder secret and a sandbox made
without secrets are refused before anything is made or changed; destroy leaves no sandbox,
vault or record; no value in the front's or the remote's log, results, diagnose or the front's
state directory (but its secrets.json, where --from-env keeps it).

usage: test_vaultmap_osb.py --mcpbox PATH [--user NAME]
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "local", "egress"))
sys.path.insert(0, os.path.join(HERE, "..", "local", "lib"))
from egress_env import World, check, staged_mcpbox  # noqa: E402
from mcp_stdio import Client, result_text  # noqa: E402
from test_secrets import Hosts, secret_cli, serve_pid  # noqa: E402
from test_secrets_tls import upstream_pki  # noqa: E402

CURL = "curl -sS --max-time 10 "


class Pair(World):
    """The egress World, with a remote (OpenSandbox API) and a front (opensandbox backend)."""

    def start(self):
        if not hasattr(self, "key"):
            return  # World.__init__'s own start: the pair starts once the hosts are set up
        self.rlog = os.path.join(self.dir, "remote.log")
        self.flog = os.path.join(self.dir, "front.log")
        self.rstate = os.path.join(self.dir, "remote")
        os.mkdir(self.rstate, 0o700)
        if self.user:
            import shutil
            shutil.chown(self.rstate, self.user, self.user)
        prefix = self.argv[:self.argv.index(self.mcpbox)]
        env = ["MCPBOX_OPENSANDBOX_API_KEY=" + self.key]
        if getattr(self, "up_ca", None):  # the test hosts' CA, for the remote's proxy
            env.append("MCPBOX_EGRESS_UPSTREAM_CA=" + self.up_ca)
        self.remote = subprocess.Popen(
            prefix + env + [self.mcpbox, "serve", "--http", "127.0.0.1:0", "--opensandbox-api",
                            "--state-dir", self.rstate, "--local-pool", "0", "--approve",
                            "egress=allow"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(self.rlog, "w"))
        self.port = self.wait_port()
        env = ["OPEN_SANDBOX_DOMAIN=127.0.0.1:%d" % self.port, "OPEN_SANDBOX_API_KEY=" + self.key,
               "OPEN_SANDBOX_REQUEST_TIMEOUT=30"]
        self.rpc = Client(prefix + env + self.argv[len(prefix):], cwd=self.dir,
                          stderr=open(self.flog, "w"))
        self.serve = self.rpc.proc
        self.rpc.initialize("vaultmap-test")

    def wait_port(self):
        end = time.time() + 30
        while time.time() < end:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", open(self.rlog).read())
            if m:
                return int(m.group(1))
            if self.remote.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError("the remote did not start:\n" + open(self.rlog).read()[-2000:])

    def api(self, method, path, body=None, headers=None):
        """The remote's API from inside the namespace (curl there: its loopback is not ours)."""
        argv = self.nsenter + ["curl", "-sS", "-X", method, "-w", "\n%{http_code}",
                               "-H", "OPEN-SANDBOX-API-KEY: " + self.key]
        for k, v in (headers or {}).items():
            argv += ["-H", "%s: %s" % (k, v)]
        if body is not None:
            argv += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
        out = subprocess.run(argv + ["http://127.0.0.1:%d%s" % (self.port, path)],
                             capture_output=True, text=True, timeout=60).stdout
        text, _, code = out.rpartition("\n")
        return int(code or 0), text

    def close(self):
        World.close(self)
        if getattr(self, "remote", None) is not None:
            self.remote.terminate()
            self.remote.wait(timeout=60)


def vault_files(w, rid="", wait=15):
    """The remote's vault files (of rid), once those of destroyed sandboxes are gone (the local
    backend releases a sandbox's resources when its init has exited, after destroy answers)."""
    vaults = os.path.join(w.rstate, "vaults")
    end = time.time() + wait
    while True:
        left = [f for f in (os.listdir(vaults) if os.path.isdir(vaults) else []) if rid in f]
        if not left or time.time() > end:
            return left
        time.sleep(0.1)


def remote_ids(w):
    code, text = w.api("GET", "/v1/sandboxes")
    assert code == 200, "listing the remote's sandboxes: %d %s" % (code, text)
    return sorted(s["id"] for s in json.loads(text).get("items", []))


def header_of(row, name):
    return [v for k, v in row["headers"] if k.lower() == name.lower()]


def define(w, mcpbox, user, vals):
    w.gone = os.path.join(w.dir, "gone-token")
    with open(w.gone, "w") as f:
        f.write("gone-value\n")
    os.chmod(w.gone, 0o644)
    for args, env in (
            (["tok", "--from-env", "V", "--host", "vault.test"], {"V": vals[0]}),
            (["key2", "--from-command", "echo %s" % vals[1], "--host", "vault2.test",
              "--header", "X-Api-Key: {}"], {}),
            (["cust", "--from-env", "V", "--host", "vault.test", "--header",
              "X-Custom: tk-{}-x"], {"V": vals[2]}),
            (["ph", "--from-env", "V", "--host", "vault.test", "--placeholder"], {"V": vals[0]}),
            (["gone", "--from-file", w.gone, "--host", "vault.test"], {})):
        r = secret_cli(w, mcpbox, user, "add", *args, env=env)
        check(r.returncode == 0, "secret %s defined" % args[0], r.stderr)


def create(w, secrets, ok=True):
    return w.tool("create_sandbox", ok=ok, backend="opensandbox", image="host", secrets=secrets)


def fetch(w, sid, host):
    return w.run(sid, CURL + "http://%s/echo; echo; " % host + CURL + "http://%s/plain" % host)


def injected(w, hosts, sid, vals):
    before = remote_ids(w)
    res = create(w, ["ph"], ok=False)
    msg = result_text(res)
    check(res.get("isError") and "placeholder" in msg and "local" in msg,
          "a placeholder secret on an osb- sandbox is refused, saying why", msg)
    check(remote_ids(w) == before, "the refused create made nothing on the remote")
    out = fetch(w, sid, "vault.test")
    row = hosts.hits("11.0.0.9")[-1]
    check(header_of(row, "Authorization") == ["Bearer " + vals[0]],
          "the bound host receives Authorization: Bearer <value> from the remote's vault",
          json.dumps(row))
    check(vals[0] not in json.dumps(out) and "ok 11.0.0.9" in out["stdout"],
          "the sandbox sees the host's answer, never the value (echo masked)", json.dumps(out))
    n = len(hosts.hits())
    out = w.run(sid, CURL + "http://decoy.test/echo")
    check(len(hosts.hits()) == n and out["exit_code"] != 0,
          "a host the secret does not name is not reachable (policy) and got nothing",
          json.dumps(out))


def tls_injected(w, hosts, sid, vals):
    """HTTPS: the remote's proxy terminates TLS for the bound host with its CA, which the
    sandbox made with credentialProxy trusts, and injects there too."""
    out = w.run(sid, CURL + "https://vault.test/echo")
    rows = hosts.hits("11.0.0.9:443")
    check(out["exit_code"] == 0 and rows and
          header_of(rows[-1], "Authorization") == ["Bearer " + vals[0]],
          "HTTPS to the bound host: verified, and the header injected there",
          json.dumps(out)[:600] + json.dumps(rows[-1:]))
    check(vals[0] not in json.dumps(out), "the HTTPS echo reaches the sandbox masked")


def leaks_inside(w, sid, vals):
    out = w.run(sid, "env; cat /proc/self/environ | tr '\\0' '\\n'; "
                "grep -rasl -e '%s' /etc /tmp /workspace /root /run /var 2>/dev/null; "
                "ls %s && echo SEEN; echo done" % (vals[0], w.rstate), timeout=120)
    check(out["stdout"].rstrip().endswith("done") and "SEEN" not in out["stdout"] and
          all(v not in json.dumps(out) for v in vals),
          "no value in the sandbox's env or files; the remote's vault is out of its sight", json.dumps(out)[:800])


def updated(w, hosts, sid, other, vals):
    # the person's own vault entry, through the remote's API as the official SDK would
    code, text = w.api("GET", "/v1/sandboxes/%s/endpoints/18080" % sid[4:])
    ep = json.loads(text)
    base = "/" + ep["endpoint"].split("/", 1)[1]
    code, text = w.api("PATCH", base + "/credential-vault", headers=ep.get("headers"), body={
        "credentials": {"add": [{"name": "own", "source": {"type": "inline", "value": "own-v"}}]},
        "bindings": {"add": [{"name": "own", "match": {"hosts": ["vault.test"],
                                                        "schemes": ["http"]},
                              "auth": {"type": "apiKey", "name": "X-Own",
                                       "credential": "own"}}]}})
    check(code == 200, "the person adds an entry of their own to the vault", text)
    res = w.tool("update_sandbox", sandbox_id=sid, secrets=["tok", "key2", "cust"])
    check(all(v not in json.dumps(res) for v in vals), "update_sandbox answers without values")
    diag = w.tool("diagnose_sandbox", sandbox_id=sid)["structuredContent"]
    bound = {b["name"]: b["hosts"] for b in diag.get("secrets", {}).get("bound", [])}
    check(bound == {"tok": ["vault.test"], "key2": ["vault2.test"], "cust": ["vault.test"]},
          "diagnose_sandbox shows the names bound and their hosts", json.dumps(diag)[:800])
    fetch(w, sid, "vault2.test")
    row = hosts.hits("11.0.0.9")[-1]
    check(header_of(row, "X-Api-Key") == [vals[1]] and not header_of(row, "Authorization"),
          "update_sandbox adds key2 (apiKey) with egress to its new host, vault2.test",
          json.dumps(row))
    fetch(w, sid, "vault.test")
    row = hosts.hits("11.0.0.9")[-1]
    check(header_of(row, "X-Custom") == ["tk-%s-x" % vals[2]] and
          header_of(row, "Authorization") == ["Bearer " + vals[0]] and
          header_of(row, "X-Own") == ["own-v"],
          "a custom template arrives whole, tok is kept, the person's entry too", json.dumps(row))
    n = len(hosts.hits())
    fetch(w, other, "vault.test")
    row = hosts.hits("11.0.0.9")[-1]
    check(len(hosts.hits()) > n and not header_of(row, "Authorization") and
          not header_of(row, "X-Custom") and not header_of(row, "X-Own"),
          "another sandbox on the same remote, allowed to the host, gets none of them",
          json.dumps(row))
    w.tool("update_sandbox", sandbox_id=sid, secrets=[])
    fetch(w, sid, "vault.test")
    row = hosts.hits("11.0.0.9")[-1]
    check(not header_of(row, "Authorization") and not header_of(row, "X-Custom") and
          header_of(row, "X-Own") == ["own-v"],
          "secrets: [] removes mcpbox's entries and leaves the person's", json.dumps(row))


def half_made(w):
    """A value that cannot be read once the sandbox exists: it is destroyed, and said so."""
    os.unlink(w.gone)
    before = remote_ids(w)
    res = create(w, ["tok", "gone"], ok=False)
    msg = result_text(res)
    check(res.get("isError") and "secret gone" in msg and "was destroyed" in msg,
          "a secret whose value cannot be read: the create fails, the sandbox destroyed, said so",
          msg)
    check(remote_ids(w) == before, "nothing is left on the remote")


def open_network(w, hosts, vals):
    """network: true with secrets: credentialProxy needs a policy, so one allowing all."""
    sid = w.tool("create_sandbox", backend="opensandbox", image="host", network=True,
                 secrets=["tok"])["structuredContent"]["sandbox_id"]
    fetch(w, sid, "vault.test")
    row = hosts.hits("11.0.0.9")[-1]
    check(header_of(row, "Authorization") == ["Bearer " + vals[0]],
          "network: true with secrets: the header arrives", json.dumps(row))
    n = len(hosts.hits())
    w.run(sid, CURL + "http://decoy.test/echo")
    row = hosts.hits()[-1]
    check(len(hosts.hits()) == n + 1 and row["at"].startswith("11.0.0.10") and
          not header_of(row, "Authorization"), "and other hosts are reached without it",
          json.dumps(row))
    w.tool("destroy_sandbox", sandbox_id=sid)


def refused_without_proxy(w):
    res = w.tool("create_sandbox", backend="opensandbox", image="host")
    plain = res["structuredContent"]["sandbox_id"]
    res = w.tool("update_sandbox", ok=False, sandbox_id=plain, secrets=["tok"])
    msg = result_text(res)
    check(res.get("isError") and "without secrets" in msg,
          "binding to an osb- sandbox made without secrets is refused, saying what to do", msg)
    out = w.run(plain, "echo still")
    check(out["stdout"].strip() == "still", "that sandbox keeps working")
    w.tool("destroy_sandbox", sandbox_id=plain)


def destroyed(w, sid, vals):
    diag = w.tool("diagnose_sandbox", sandbox_id=sid)
    got = w.tool("get_sandbox", sandbox_id=sid)
    check(all(v not in json.dumps(diag) + json.dumps(got) for v in vals),
          "diagnose_sandbox and get_sandbox show no value")
    bound = diag["structuredContent"].get("secrets", {}).get("bound")
    check(bound == [] or bound is None, "diagnose_sandbox after secrets: [] lists none bound",
          json.dumps(diag["structuredContent"].get("secrets")))
    w.tool("destroy_sandbox", sandbox_id=sid)
    check(sid[4:] not in remote_ids(w), "destroy removes the remote sandbox")
    left = vault_files(w, sid[4:])
    check(not left, "and its vault on the remote (the remote releases it once the sandbox's "
          "processes are gone)", repr(left))
    res = w.tool("get_sandbox", ok=False, sandbox_id=sid)
    check(res.get("isError"), "and the front's record", json.dumps(res)[:300])


def no_value_anywhere(w, vals):
    files = []
    for root, _, names in os.walk(os.path.join(w.dir, "state")):
        files += [os.path.join(root, n) for n in names if n != "secrets.json"]
    files += [w.rlog, w.flog]
    bad = [f for f in files for v in vals if v.encode() in open(f, "rb").read()]
    check(not bad, "no value in the front's state, its log or the remote's log", repr(bad))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--user")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    mcpbox = staged_mcpbox(a.user, a.mcpbox) if a.user else os.path.abspath(a.mcpbox)
    vals = ["v%d-%016x" % (i, random.getrandbits(64)) for i in range(3)]
    w = Pair(mcpbox, a.user)
    w.mcpbox, w.key = mcpbox, "vaultmap-%016x" % random.getrandbits(64)
    hosts = None
    try:
        for addr in ("11.0.0.9/32", "11.0.0.10/32"):
            subprocess.run(w.nsenter + ["ip", "addr", "add", addr, "dev", "lo"], check=True)
        with open(w.hosts, "a") as f:
            f.write("11.0.0.9 vault.test vault2.test\n11.0.0.10 decoy.test\n")
        pki = os.path.join(w.dir, "pki")
        os.mkdir(pki, 0o755)
        w.up_ca, cert, key = upstream_pki(pki, names=("vault.test", "vault2.test"))
        hosts = Hosts(w, cert=cert, key=key,
                      at=["11.0.0.9:80", "11.0.0.10:80", "11.0.0.9:443:tls"])
        define(w, mcpbox, a.user, vals)
        w.start()
        sid = create(w, ["tok"])["structuredContent"]["sandbox_id"]
        check(sid.startswith("osb-"), "create_sandbox with secrets on the opensandbox backend")
        other = w.tool("create_sandbox", backend="opensandbox", image="host", secrets=["key2"],
                       network_policy={"default_action": "deny", "egress": [
                           {"action": "allow", "target": "vault.test"}]})
        other = other["structuredContent"]["sandbox_id"]
        injected(w, hosts, sid, vals)
        tls_injected(w, hosts, sid, vals)
        leaks_inside(w, sid, vals)
        updated(w, hosts, sid, other, vals)
        refused_without_proxy(w)
        half_made(w)
        open_network(w, hosts, vals)
        destroyed(w, sid, vals)
        w.tool("destroy_sandbox", sandbox_id=other)
        w.made = []
        check(w.rpc.close(120) == 0, "the front exits cleanly (ASan: nothing leaked)")
        os.kill(serve_pid(w.remote.pid), signal.SIGTERM)  # mcpbox itself, not runuser
        check(w.remote.wait(timeout=60) == 0, "the remote exits cleanly")
        w.remote = None
        check(not vault_files(w), "no vault is left on the remote", repr(vault_files(w)))
        no_value_anywhere(w, vals)
    except Exception:
        for name in ("flog", "rlog"):
            if hasattr(w, name):
                print("# %s:\n%s" % (name, open(getattr(w, name), errors="replace").read()[-3000:]))
        raise
    finally:
        if hosts is not None:
            hosts.close()
        w.close()
    print("secrets on the opensandbox backend: through the remote's Credential Vault")
    return 0


if __name__ == "__main__":
    sys.exit(main())
