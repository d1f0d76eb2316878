#!/usr/bin/env python3
"""Secrets on the opensandbox backend (issue 37, gaps): mcpbox's secrets are injected by its own
egress proxy, which sandboxes on an OpenSandbox server do not pass through, and their mapping
onto the server's Credential Vault is not built. create_sandbox and update_sandbox with secrets
on that backend are refused with what to do instead (the local backend, or the server's own
vault), before anything is created or changed: the remote then has no sandbox from the refused
create, and a sandbox refused a binding keeps working. The remote is mcpbox's own OpenSandbox API
(serve --http --opensandbox-api) over real local sandboxes, as tests/opensandbox does.

usage: test_secrets_osb.py --mcpbox PATH   (77 where local sandboxes cannot run)
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "local", "lib"))
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402
from mcpbox_cli import Cli  # noqa: E402


def check(cond, what, detail=""):
    if not cond:
        raise AssertionError("%s\n%s" % (what, detail))
    print("ok - %s" % what)


def start_remote(mcpbox, state, key, log):
    p = subprocess.Popen([mcpbox, "serve", "--http", "127.0.0.1:0", "--opensandbox-api",
                          "--state-dir", state, "--local-pool", "0", "--approve", "egress=allow"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                         env=dict(os.environ, MCPBOX_OPENSANDBOX_API_KEY=key))
    end = time.time() + 30
    while time.time() < end:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", open(log.name).read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.1)
    p.kill()
    raise AssertionError("the remote did not start:\n" + open(log.name).read()[-2000:])


def remote_ids(port, key):
    import urllib.request
    req = urllib.request.Request("http://127.0.0.1:%d/v1/sandboxes" % port,
                                 headers={"OPEN-SANDBOX-API-KEY": key})
    with urllib.request.urlopen(req, timeout=30) as r:
        return [s["id"] for s in json.load(r).get("items", [])]


def refusals(c, port, key):
    before = remote_ids(port, key)
    res = c.call_tool("create_sandbox", {"backend": "opensandbox", "image": "host",
                                         "secrets": ["tok"]})
    msg = result_text(res)
    check(res.get("isError") and 'backend: \\"local\\"' in json.dumps(msg) and
          "credentialVault" in msg and "egress proxy" in msg,
          "create_sandbox with secrets on opensandbox: refused, saying what to do", msg)
    check(remote_ids(port, key) == before, "the refused create made nothing on the server")
    res = c.call_tool("create_sandbox", {"backend": "opensandbox", "image": "host"})
    check(not res.get("isError"), "a plain sandbox on the server", json.dumps(res)[:600])
    sid = res["structuredContent"]["sandbox_id"]
    check(len(remote_ids(port, key)) == len(before) + 1, "the server lists it (the count above "
          "is real)")
    res = c.call_tool("update_sandbox", {"sandbox_id": sid, "secrets": ["tok"]})
    msg = result_text(res)
    check(res.get("isError") and "local" in msg and "credentialVault" in msg,
          "update_sandbox secrets on opensandbox: refused, saying what to do", msg)
    res = c.call_tool("run_command", {"sandbox_id": sid, "command": "echo still"})
    check(not res.get("isError") and res["structuredContent"]["stdout"].strip() == "still",
          "the sandbox refused a binding keeps working", json.dumps(res)[:600])
    c.call_tool("destroy_sandbox", {"sandbox_id": sid})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    mcpbox = os.path.abspath(a.mcpbox)
    key = "secrets-osb-%016x" % random.getrandbits(64)
    with Cli(mcpbox) as cli:
        cli.create()  # skips (77) where local sandboxes cannot run
        work = tempfile.mkdtemp(prefix="mcpbox-secrets-osb-")
        remote_state, state = os.path.join(work, "remote"), os.path.join(work, "front")
        os.mkdir(remote_state, 0o700)
        os.mkdir(state, 0o700)
        rlog = tempfile.NamedTemporaryFile(prefix="mcpbox-secrets-osb-remote-", delete=False)
        flog = tempfile.NamedTemporaryFile(prefix="mcpbox-secrets-osb-front-", delete=False)
        remote, c = None, None
        try:
            r = subprocess.run([mcpbox, "secret", "--state-dir", state, "add", "tok", "--from-env",
                                "V", "--host", "api.example.test"], capture_output=True,
                               text=True, env=dict(os.environ, V="v-%x" % random.getrandbits(64)))
            check(r.returncode == 0, "secret tok defined", r.stderr)
            remote, port = start_remote(mcpbox, remote_state, key, rlog)
            env = dict(os.environ, OPEN_SANDBOX_DOMAIN="127.0.0.1:%d" % port,
                       OPEN_SANDBOX_API_KEY=key, OPEN_SANDBOX_REQUEST_TIMEOUT="30")
            c = Client(serve_argv(mcpbox, state, "--approve", "egress=allow", "--approve",
                                  "secret=allow"), stderr=flog, env=env)
            c.initialize("secrets-osb-test")
            refusals(c, port, key)
            check(c.close(30) == 0, "the front server exits cleanly")
            c = None
        except Exception:
            print("# front's log:\n" + open(flog.name, errors="replace").read()[-2000:])
            print("# remote's log:\n" + open(rlog.name, errors="replace").read()[-2000:])
            raise
        finally:
            if c is not None:
                c.proc.kill()
            if remote is not None:
                remote.terminate()
                remote.wait(timeout=30)
            for f in (rlog, flog):
                os.unlink(f.name)
            shutil.rmtree(work, ignore_errors=True)
    print("secrets on the opensandbox backend: refused, saying what to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
