#!/usr/bin/env python3
"""Secrets over HTTPS (issue 37): the egress proxy terminates TLS for bound hosts only, with a
CA mcpbox makes and keeps (0600 in the state dir, never visible inside), trusted inside the
sandbox (the system bundle where it can be bound, and SSL_CERT_FILE and the like), and verifies
the real upstream against the host's trust store plus the person's MCPBOX_EGRESS_UPSTREAM_CA
(here the tests' upstream CA, which the sandbox never sees). Tried: curl and Python through the
proxy, a reply echoing the header, an upstream whose certificate is not trusted (no secret
sent), an unbound HTTPS host (passed through, its own certificate), the CA key from inside.

usage: test_secrets_tls.py --mcpbox PATH [--user NAME]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from egress_env import World, check, staged_mcpbox  # noqa: E402
from test_secrets import Hosts, secret_cli  # noqa: E402

CURL = "curl -sS --max-time 15 "


def ossl(*args):
    subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def upstream_pki(d, names=("bound.test", "untrusted.test")):
    """A test CA and a certificate it signs for the bound hosts; a self-signed one (untrusted)."""
    ca, ca_key = os.path.join(d, "up-ca.pem"), os.path.join(d, "up-ca.key")
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=upstream test CA")
    key, csr, cert = (os.path.join(d, n) for n in ("up.key", "up.csr", "up.pem"))
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
         "-out", csr, "-subj", "/CN=bound.test")
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % ",".join("DNS:" + n for n in names))
    ossl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
         "-days", "2", "-extfile", ext)
    for p in (ca, key, cert):
        os.chmod(p, 0o644)
    return ca, cert, key


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--user")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    mcpbox = staged_mcpbox(a.user, a.mcpbox) if a.user else os.path.abspath(a.mcpbox)
    value = "tls-%016x" % random.getrandbits(64)
    pki = tempfile.mkdtemp(prefix="mcpbox-secrets-pki-")
    os.chmod(pki, 0o755)
    up_ca, up_cert, up_key = upstream_pki(pki)
    stderr = tempfile.NamedTemporaryFile(prefix="mcpbox-secrets-tls-log-", delete=False)
    # the untrusted upstream: the same names, but a self-signed certificate (World's own)
    w = World(mcpbox, a.user, stderr=stderr, extra=[("11.0.0.5", ["bound.test"]),
                                                    ("11.0.0.7", ["untrusted.test"])],
              wrap=("env", "MCPBOX_EGRESS_UPSTREAM_CA=" + up_ca))
    hosts = Hosts(w, up_cert, up_key, ["11.0.0.5:8443:tls"])
    bad = Hosts(w, w.cert, os.path.join(w.dir, "key.pem"), ["11.0.0.7:8443:tls"], "bad.log")
    try:
        for name, host in (("tok", "bound.test"), ("bad", "untrusted.test")):
            r = secret_cli(w, mcpbox, a.user, "add", name, "--from-env", "V", "--host", host,
                           env={"V": value})
            check(r.returncode == 0, "secret %s for %s" % (name, host), r.stderr)
        sid = w.tool("create_sandbox", secrets=["tok", "bad"], network_policy={
            "default_action": "deny", "egress": [{"action": "allow", "target": "other.test"}]})[
            "structuredContent"]["sandbox_id"]
        out = w.run(sid, CURL + "https://bound.test:8443/plain")
        seen = [v for r in hosts.hits("11.0.0.5:8443") for k, v in r["headers"]
                if k.lower() == "authorization"]
        check(out["exit_code"] == 0 and seen == ["Bearer " + value],
              "curl over HTTPS: the sandbox trusts the proxy, the host gets the header",
              json.dumps(out) + json.dumps(seen))
        out = w.run(sid, "python3 -c \"import urllib.request as u; "
                         "print(u.urlopen('https://bound.test:8443/echo').read().decode())\"")
        check(out["exit_code"] == 0 and value not in json.dumps(out) and "***" in out["stdout"],
              "Python over HTTPS; the echoed header reaches the sandbox masked",
              json.dumps(out)[:800])
        n = len(hosts.hits("11.0.0.5:8443"))
        out = w.run(sid, "node -e \"fetch('https://bound.test:8443/node').then(r => r.text())"
                         ".then(t => console.log(t), e => { console.log(e.cause); "
                         "process.exit(1); })\"")
        got = hosts.hits("11.0.0.5:8443")[n:]
        check(out["exit_code"] == 0 and got and ["Authorization", "Bearer " + value] in
              got[0]["headers"], "Node (NODE_EXTRA_CA_CERTS) over HTTPS",
              json.dumps(out) + json.dumps(got))
        n = len(hosts.hits("11.0.0.5:8443"))
        out = w.run(sid, "git ls-remote https://bound.test:8443/repo.git 2>&1; exit 0")
        got = hosts.hits("11.0.0.5:8443")[n:]
        check(got and got[0]["path"].startswith("/repo.git/info/refs") and
              "certificate" not in out["stdout"],
              "git (GIT_SSL_CAINFO) reaches the host over HTTPS", json.dumps(out) + json.dumps(got))
        out = w.run(sid, CURL + "https://untrusted.test:8443/nope")
        check(out["exit_code"] != 0 and bad.hits() == [],
              "an upstream whose certificate is not trusted gets no request (no secret)",
              json.dumps(out) + json.dumps(bad.hits()))
        out = w.run(sid, CURL + "-kv https://other.test/ 2>&1 | grep -i 'issuer'")
        check("allowed.test" in out["stdout"] and "mcpbox" not in out["stdout"],
              "an unbound HTTPS host is passed through: its own certificate", json.dumps(out))
        ca = os.path.join(w.dir, "state", "secrets-ca.pem")
        check(os.stat(ca).st_mode & 0o777 == 0o600, "the CA (key and certificate) is 0600")
        key_line = [l for l in open(ca) if "PRIVATE KEY" not in l and len(l) > 40][0].strip()
        out = w.run(sid, "cat %s 2>/dev/null; grep -rl -e '%s' -e 'PRIVATE KEY' /tmp /etc "
                         "/workspace /root /run 2>/dev/null | head" % (ca, key_line))
        check(key_line not in out["stdout"] and out["stdout"].strip() == "",
              "the CA key is nowhere inside", json.dumps(out)[:600])
        ours = open(ca).read().split("-----BEGIN CERTIFICATE-----")[1].split("-----")[0].strip()
        ours_line = ours.splitlines()[1]
        r = w.run(sid, "grep -c '%s' /etc/ssl/certs/ca-certificates.crt; "
                       "grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt; "
                       "echo x >> /etc/ssl/certs/ca-certificates.crt && echo writable" % ours_line)
        counts = r["stdout"].split()
        check(counts[:1] == ["1"] and int(counts[1]) > 1 and "writable" not in r["stdout"],
              "the system bundle the sandbox sees holds the CA (read-only)", json.dumps(r))
        for var in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
                    "NODE_EXTRA_CA_CERTS"):
            r = w.run(sid, "grep -c 'BEGIN CERTIFICATE' $%s; grep -c '%s' $%s" % (var, ours_line,
                                                                                 var))
            counts = r["stdout"].split()
            check(r["exit_code"] == 0 and counts[1] == "1" and
                  (int(counts[0]) > 1) == (var != "NODE_EXTRA_CA_CERTS"),
                  "%s: the CA%s" % (var, "" if var == "NODE_EXTRA_CA_CERTS" else
                                    " with the system bundle"), json.dumps(r))
        w.tool("destroy_sandbox", sandbox_id=sid)
        log = open(stderr.name, errors="replace").read()
        check(value not in log, "no value in the server's log")
    except Exception:
        print("# serve's log:\n" + open(stderr.name, errors="replace").read()[-3000:])
        raise
    finally:
        hosts.close()
        bad.close()
        w.close()
        os.unlink(stderr.name)
        shutil.rmtree(pki, ignore_errors=True)
    print("secrets over TLS%s" % (" as " + a.user if a.user else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
