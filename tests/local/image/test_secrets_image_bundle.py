#!/usr/bin/env python3
"""Secrets over TLS on OCI images (issue 37, gaps): a sandbox whose egress passes mcpbox's proxy
(here a network_policy) sees the image's own system CA bundle with mcpbox's egress CA appended,
at the usual paths (Debian/Ubuntu's /etc/ssl/certs/ca-certificates.crt, Alpine's
/etc/ssl/cert.pem link, Fedora's /etc/pki/tls/certs/ca-bundle.crt), so tools that read only the
system bundle verify the proxy; the stored image is not changed (a sandbox without a policy sees
the image's bundle as it is). A hostile image's bundle links to /proc/self/environ and to an
absolute /etc/shadow: neither the server's environment nor a host file reaches the sandbox.

usage: test_secrets_image_bundle.py --mcpbox PATH   (as root or as an ordinary user; 77 where
local sandboxes cannot run)
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ocitest as oci  # noqa: E402
from ocitest import d, f, ln  # noqa: E402
from mcp_stdio import Client, serve_argv  # noqa: E402
from mcpbox_cli import Cli  # noqa: E402

POLICY = {"default_action": "deny", "egress": [{"action": "allow", "target": "example.test"}]}


def check(cond, what, detail=""):
    if not cond:
        raise AssertionError("%s\n%s" % (what, detail))
    print("ok - %s" % what)


def pem(tag):
    return ("-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----" % tag).encode()


class Serve(Client):
    def __init__(self, mcpbox, state, env):
        self.log = tempfile.NamedTemporaryFile(prefix="mcpbox-bundle-serve-", delete=False)
        super().__init__(serve_argv(mcpbox, state, "--local-pool", "0", "--approve",
                                    "egress=allow"), stderr=self.log, env=env)
        self.initialize("bundle-test")

    def tool(self, name, **args):
        res = self.call_tool(name, args)
        assert not res.get("isError"), "%s: %s" % (name, json.dumps(res)[:800])
        return res["structuredContent"]

    def cat(self, sid, path):
        return self.tool("run_command", sandbox_id=sid, command="cat " + path)["stdout"]


def our_ca_line(state):
    """A line of the egress CA's certificate (its body, never the key's)."""
    text = open(os.path.join(state, "secrets-ca.pem")).read()
    return text.split("-----BEGIN CERTIFICATE-----")[1].split("-----")[0].strip().splitlines()[1]


def test_distributions(s, reg, state):
    debian = oci.busybox_layer() + [d("etc/ssl"), d("etc/ssl/certs"),
                                    f("etc/ssl/certs/ca-certificates.crt", pem("IMAGECA")),
                                    ln("etc/ssl/cert.pem", "certs/ca-certificates.crt")]
    reg.push_image("test/debianish", "1", [("gzip", debian)])
    fedora = oci.busybox_layer() + [d("etc/pki"), d("etc/pki/tls"), d("etc/pki/tls/certs"),
                                    f("etc/pki/tls/certs/ca-bundle.crt", pem("FEDORACA"))]
    reg.push_image("test/fedoraish", "1", [("gzip", fedora)])
    sid = s.tool("create_sandbox", image=reg.host + "/test/debianish:1",
                 network_policy=POLICY)["sandbox_id"]
    line = our_ca_line(state)
    for path in ("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/cert.pem", "$SSL_CERT_FILE"):
        got = s.cat(sid, path)
        check("IMAGECA" in got and line in got,
              "%s: the image's bundle with mcpbox's CA appended" % path, got[:300])
    out = s.tool("run_command", sandbox_id=sid,
                 command="echo x >> /etc/ssl/certs/ca-certificates.crt && echo writable")
    check("writable" not in out["stdout"], "the bundle is read-only", json.dumps(out))
    plain = s.tool("create_sandbox", image=reg.host + "/test/debianish:1")["sandbox_id"]
    got = s.cat(plain, "/etc/ssl/certs/ca-certificates.crt")
    check(got.strip() == pem("IMAGECA").decode(),
          "the stored image is unchanged: a sandbox without a policy sees its bundle as it is",
          got[:300])
    sid2 = s.tool("create_sandbox", image=reg.host + "/test/fedoraish:1",
                  network_policy=POLICY)["sandbox_id"]
    got = s.cat(sid2, "/etc/pki/tls/certs/ca-bundle.crt")
    check("FEDORACA" in got and line in got, "Fedora's bundle path too", got[:300])
    for x in (sid, plain, sid2):
        s.tool("destroy_sandbox", sandbox_id=x)


def test_hostile(s, reg, state, canary):
    """Links out of the image's bundle: to this process's environment, to a host file."""
    bad = oci.busybox_layer() + [d("etc/ssl"), d("etc/ssl/certs"), d("etc/pki"),
                                 d("etc/pki/tls"), d("etc/pki/tls/certs"),
                                 ln("etc/ssl/certs/ca-certificates.crt", "/proc/self/environ"),
                                 ln("etc/ssl/cert.pem", "/etc/shadow"),
                                 f("etc/pki/tls/certs/ca-bundle.crt", pem("OWNCA"))]
    reg.push_image("test/hostile", "1", [("gzip", bad)])
    sid = s.tool("create_sandbox", image=reg.host + "/test/hostile:1",
                 network_policy=POLICY)["sandbox_id"]
    got = s.cat(sid, "$SSL_CERT_FILE /etc/pki/tls/certs/ca-bundle.crt")
    check("OWNCA" in got and our_ca_line(state) in got,
          "the image's one real bundle is the one used", got[:300])
    check(canary not in got and "root:" not in got,
          "no environment of the server's and no host file in the bundle", got[:600])
    out = s.tool("run_command", sandbox_id=sid, command="cat /etc/ssl/cert.pem; echo rc=$?")
    check("root:" not in out["stdout"], "the absolute link resolves inside the image",
          json.dumps(out)[:400])
    s.tool("destroy_sandbox", sandbox_id=sid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    for tool in (oci.REGISTRY_BIN, oci.BUSYBOX):
        if not os.path.exists(tool):
            raise AssertionError(f"{tool} is missing: run scripts/install-deps.sh --test")
    canary = "CANARY_%016x" % random.getrandbits(64)
    with Cli(a.mcpbox) as cli:
        cli.create()  # skips (77) where local sandboxes cannot run
        state = cli.state_dir
        work = tempfile.mkdtemp(prefix="ocib-", dir="/tmp")
        reg = oci.Registry(work)
        s = None
        try:
            s = Serve(a.mcpbox, state, dict(os.environ, HOME=work, MCPBOX_TEST_CANARY=canary))
            test_distributions(s, reg, state)
            test_hostile(s, reg, state, canary)
            assert s.close(30) == 0, "serve did not exit cleanly (a sanitizer report?)"
            s = None
        except Exception:
            if s is not None:
                print("# serve's log:\n" + open(s.log.name, errors="replace").read()[-3000:])
            raise
        finally:
            if s is not None:
                s.proc.kill()
            reg.close()
            shutil.rmtree(work, ignore_errors=True)
    print("image bundles trust the egress CA")
    return 0


if __name__ == "__main__":
    sys.exit(main())
