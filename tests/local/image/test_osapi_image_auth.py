#!/usr/bin/env python3
"""OpenSandbox's image.auth on mcpbox's OpenSandbox API (issue 39 item 4): a create with
{"image": {"uri": <private image>, "auth": {"username", "password"}}} pulls it from a registry
that wants those credentials (Debian's docker-registry on loopback behind a bearer-token front,
no credential files in $HOME), and the sandbox runs it. Without auth the registry refuses, with
a wrong password too (the password never appears in the answer); a malformed auth is 400.

usage: test_osapi_image_auth.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ocitest as oci  # noqa: E402
from ocitest import f  # noqa: E402
from mcpbox_cli import Cli  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok - {what}")


class Api:
    """mcpbox serve --http 127.0.0.1:0 --opensandbox-api with a key."""

    def __init__(self, mcpbox, state, env):
        self.key = "auth-" + secrets.token_hex(8)
        self.log = tempfile.NamedTemporaryFile(prefix="osapi-auth-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [mcpbox, "serve", "--http", "127.0.0.1:0", "--opensandbox-api", "--state-dir", state,
             "--local-pool", "0", "--opensandbox-api-key", self.key, "--approve", "egress=allow"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        end = time.time() + 30
        while time.time() < end:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", open(self.log.name).read())
            if m:
                self.base = f"http://127.0.0.1:{m.group(1)}"
                return
            time.sleep(0.05)
        raise AssertionError("mcpbox serve did not start: " + open(self.log.name).read())

    def call(self, method, path, body=None, headers=None):
        h = {"OPEN-SANDBOX-API-KEY": self.key, **(headers or {})}
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            h["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=data, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def create(self, uri, auth=None):
        image = {"uri": uri}
        if auth is not None:
            image["auth"] = auth
        return self.call("POST", "/v1/sandboxes", {
            "image": image, "entrypoint": ["sleep", "infinity"], "timeout": 600,
            "resourceLimits": {}, "networkPolicy": {"defaultAction": "deny"}})

    def run(self, sid, command):
        st, body = self.call("GET", f"/v1/sandboxes/{sid}/endpoints/44772")
        token = json.loads(body)["headers"]["X-EXECD-ACCESS-TOKEN"]
        st, body = self.call("POST", f"/sandboxes/{sid}/proxy/44772/command",
                             {"command": command}, {"X-EXECD-ACCESS-TOKEN": token})
        events = [json.loads(x) for x in body.split("\n\n") if x.strip()]
        return "".join(e.get("text", "") for e in events if e.get("type") == "stdout")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        log = open(self.log.name).read()
        os.unlink(self.log.name)
        return self.proc.returncode, log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    args = ap.parse_args()
    for tool in (oci.REGISTRY_BIN, oci.BUSYBOX):
        if not os.path.exists(tool):
            raise AssertionError(f"{tool} is missing: run scripts/install-deps.sh --test")
    with Cli(args.mcpbox) as cli:
        cli.create()  # skips (77) where local sandboxes cannot run
        work = tempfile.mkdtemp(prefix="osapi-auth-", dir="/tmp")
        state = tempfile.mkdtemp(prefix="osapi-auth-state-", dir="/tmp")
        reg = oci.Registry(work)
        user, password = "u" + secrets.token_hex(4), "p" + secrets.token_hex(12)
        front = oci.Front(reg, "token", user=user, password=password)
        api = None
        ok = False
        try:
            marker = secrets.token_hex(8)
            for tag in ("good", "none", "wrong"):
                reg.push_image("private/app", tag,
                               [("gzip", oci.busybox_layer() + [f("marker", marker.encode())])])
            # No credential files: $HOME is an empty directory, no helper on PATH.
            env = dict(os.environ, HOME=work, XDG_RUNTIME_DIR=work)
            env.pop("REGISTRY_AUTH_FILE", None)
            api = Api(args.mcpbox, state, env)

            st, body = api.create(f"{front.host}/private/app:good",
                                  {"username": user, "password": password})
            check(st == 202, f"image.auth: a private image is pulled with the given credentials "
                             f"({st} {body[:300]})")
            sid = json.loads(body)["id"]
            check(api.run(sid, "cat /marker") == marker, "and the sandbox runs that image")
            api.call("DELETE", f"/v1/sandboxes/{sid}")

            st, body = api.create(f"{front.host}/private/app:none")
            check(st == 400 and "credentials" in body.lower(),
                  f"without image.auth (and no credential files) the registry refuses: "
                  f"{st} {body[:300]}")
            wrong = "not-" + secrets.token_hex(10)
            st, body = api.create(f"{front.host}/private/app:wrong",
                                  {"username": user, "password": wrong})
            check(st == 400 and "image.auth" in body and "refused" in body and wrong not in body,
                  f"a wrong password: refused, and the answer does not repeat it: {st} {body[:300]}")

            for bad, why in ((["x"], "not an object"), ({"username": user}, "no password"),
                             ({"username": "a:b", "password": "x"}, "':' in the username"),
                             ({"username": user, "password": "x", "token": "y"}, "an unknown key"),
                             ({"username": user, "password": "x\ny"}, "a newline")):
                st, body = api.create(f"{front.host}/private/app:good", bad)
                check(st == 400 and "SANDBOX::INVALID_PARAMETER" in body and "image.auth" in body,
                      f"image.auth with {why}: 400 naming image.auth ({body[:200]})")
            ok = True
        finally:
            if api:
                rc, log = api.close()
                if not ok or rc != 0 or "Sanitizer" in log or "runtime error:" in log:
                    print("# mcpbox serve's log (tail):\n" + "\n".join(log.splitlines()[-30:]))
                    if ok:
                        raise AssertionError(f"mcpbox serve stopped with {rc}")
            front.close()
            reg.close()
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(state, ignore_errors=True)
    print("all image.auth checks passed")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}")
        sys.exit(1)
