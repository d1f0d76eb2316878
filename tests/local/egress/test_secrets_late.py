#!/usr/bin/env python3
"""Secrets bound later with update_sandbox (issue 37, gaps): a sandbox made with a
network_policy and no secret trusts mcpbox's egress CA from creation, so a secret bound later
works over HTTPS like one bound at create; its placeholder reaches the commands run after the
binding (the env of each command, not of the processes already running); unbinding stops both.

usage: test_secrets_late.py --mcpbox PATH [--user NAME]
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from egress_env import World, check, staged_mcpbox  # noqa: E402
from test_secrets import Hosts, secret_cli  # noqa: E402
from test_secrets_tls import upstream_pki  # noqa: E402

CURL = "curl -sS --max-time 15 "


def header(hit, name):
    return [v for k, v in hit["headers"] if k.lower() == name.lower()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--user")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    mcpbox = staged_mcpbox(a.user, a.mcpbox) if a.user else os.path.abspath(a.mcpbox)
    value, value2 = ("late-%016x" % random.getrandbits(64) for _ in range(2))
    pki = tempfile.mkdtemp(prefix="mcpbox-secrets-late-pki-")
    os.chmod(pki, 0o755)
    up_ca, up_cert, up_key = upstream_pki(pki)
    stderr = tempfile.NamedTemporaryFile(prefix="mcpbox-secrets-late-log-", delete=False)
    w = World(mcpbox, a.user, stderr=stderr, extra=[("11.0.0.5", ["bound.test"])],
              wrap=("env", "MCPBOX_EGRESS_UPSTREAM_CA=" + up_ca))
    hosts = Hosts(w, up_cert, up_key, ["11.0.0.5:8443:tls"])
    try:
        r = secret_cli(w, mcpbox, a.user, "add", "tok", "--from-env", "V", "--host", "bound.test",
                       env={"V": value})
        check(r.returncode == 0, "secret tok (a header)", r.stderr)
        r = secret_cli(w, mcpbox, a.user, "add", "ph", "--from-env", "V", "--host", "bound.test",
                       "--header", "X-Other: {}", "--placeholder", env={"V": value2})
        check(r.returncode == 0, "secret ph (a placeholder)", r.stderr)
        sid = w.tool("create_sandbox", network_policy={
            "default_action": "deny", "egress": [{"action": "allow", "target": "other.test"}]})[
            "structuredContent"]["sandbox_id"]
        out = w.run(sid, "echo ${MCPBOX_SECRET_PH:-unset}")
        check(out["stdout"].strip() == "unset", "nothing bound yet: no placeholder", json.dumps(out))
        w.tool("update_sandbox", sandbox_id=sid, secrets=["tok", "ph"])
        out = w.run(sid, "echo $MCPBOX_SECRET_PH")
        check(out["stdout"].strip() == "MCPBOX_SECRET_PH",
              "a placeholder bound later is in the env of the next command", json.dumps(out))
        out = w.run(sid, CURL + "-H \"X-Key: $MCPBOX_SECRET_PH\" https://bound.test:8443/late")
        got = hosts.hits("11.0.0.5:8443")
        check(out["exit_code"] == 0 and got and header(got[-1], "Authorization") ==
              ["Bearer " + value] and header(got[-1], "X-Key") == [value2],
              "HTTPS to a secret bound later verifies (CA trusted from create); header and "
              "placeholder injected", json.dumps(out) + json.dumps(got)[:600])
        out = w.run(sid, "python3 -c \"import urllib.request as u; "
                         "print(u.urlopen('https://bound.test:8443/echo').read().decode())\"")
        check(out["exit_code"] == 0 and value not in json.dumps(out) and "***" in out["stdout"],
              "Python over HTTPS after a late binding; the echoed header is masked",
              json.dumps(out)[:800])
        out = w.tool("run_command", sandbox_id=sid, command="echo $MCPBOX_SECRET_PH",
                     env={"MCPBOX_SECRET_PH": "given"})["structuredContent"]
        check(out["stdout"].strip() == "given", "run_command's env wins over the placeholder",
              json.dumps(out))
        w.tool("update_sandbox", sandbox_id=sid, secrets=[])
        out = w.run(sid, "echo ${MCPBOX_SECRET_PH:-unset}")
        check(out["stdout"].strip() == "unset", "unbound: no placeholder in the next command",
              json.dumps(out))
        n = len(hosts.hits("11.0.0.5:8443"))
        out = w.run(sid, CURL + "-H 'X-Key: MCPBOX_SECRET_PH' https://bound.test:8443/after")
        got = hosts.hits("11.0.0.5:8443")[n:]
        check(out["exit_code"] != 0 and got == [],
              "unbound: the host is no longer intercepted (its certificate is not trusted here) "
              "and gets nothing", json.dumps(out) + json.dumps(got))
        w.tool("destroy_sandbox", sandbox_id=sid)
        log = open(stderr.name, errors="replace").read()
        check(value not in log and value2 not in log, "no value in the server's log")
    except Exception:
        print("# serve's log:\n" + open(stderr.name, errors="replace").read()[-3000:])
        raise
    finally:
        hosts.close()
        w.close()
        os.unlink(stderr.name)
        shutil.rmtree(pki, ignore_errors=True)
    print("secrets bound later%s" % (" as " + a.user if a.user else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
