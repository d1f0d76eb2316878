#!/usr/bin/env python3
"""Secrets over HTTPS (issue 37): what injection adds to an HTTPS request through mcpbox's egress
proxy, against the same request through the pass-through path in the same run, from inside one
local sandbox, through `mcpbox serve`. The test hosts are in a network namespace the benchmark
makes (tests/local/egress/egress_env.py); mcpbox runs in it, nothing leaves the machine.

  bound:  https://bound.test:8443/plain, a host the sandbox's secret goes to: the proxy
          terminates TLS with its CA's certificate, injects the header, and opens its own
          verified TLS connection to the host;
  pass:   https://pass.test:8443/plain, the same server software and certificate authority, a
          host no secret names: spliced, TLS end to end.
Each request is a new connection (injection closes every connection after one request, so
that is what a client pays), a TLS 1.3 handshake, GET, the reply until close. Rounds alternate
between the two; per round the median of REQS requests; the figures are medians over rounds.
The first request to the bound host after the server starts (the leaf certificate is issued
then; the CA is made earlier, at create) is reported apart. Also, as an agent pays: one
run_command of `curl` per request through MCP, median of the rounds.

usage: bench_secrets.py --mcpbox PATH [-n ROUNDS] [--reqs N]   (root)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "local", "egress"))
from egress_env import World  # noqa: E402
from test_secrets import Hosts, secret_cli  # noqa: E402
from test_secrets_tls import upstream_pki  # noqa: E402

PROBE = r"""
import json, socket, ssl, sys, time
host, n = sys.argv[1], int(sys.argv[2])
ctx = ssl.create_default_context(cafile="/workspace/trust.pem")
req = ("GET /plain HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode()
times = []
for _ in range(n):
    t = time.perf_counter()
    s = ctx.wrap_socket(socket.create_connection((host, 8443)), server_hostname=host)
    s.sendall(req)
    while s.recv(65536):
        pass
    s.close()
    times.append(time.perf_counter() - t)
print(json.dumps([int(x * 1e6) for x in times]))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--reqs", type=int, default=100)
    a = ap.parse_args()
    pki = tempfile.mkdtemp(prefix="mcpbox-bench-pki-")
    os.chmod(pki, 0o755)
    up_ca, cert, key = upstream_pki(pki, names=("bound.test", "pass.test"))
    w = World(os.path.abspath(a.mcpbox), extra=[("11.0.0.5", ["bound.test"]),
                                               ("11.0.0.8", ["pass.test"])],
              wrap=("env", "MCPBOX_EGRESS_UPSTREAM_CA=" + up_ca), stderr=subprocess.DEVNULL)
    hosts = Hosts(w, cert, key, ["11.0.0.5:8443:tls", "11.0.0.8:8443:tls"])
    try:
        secret_cli(w, a.mcpbox, None, "add", "tok", "--from-env", "V", "--host", "bound.test",
                   env={"V": "bench-token"})
        sid = w.tool("create_sandbox", secrets=["tok"], network_policy={
            "egress": [{"action": "allow", "target": "pass.test"}]})["structuredContent"][
            "sandbox_id"]
        w.tool("write_file", sandbox_id=sid, path="/workspace/probe.py", content=PROBE)
        # the sandbox's CA bundle plus the upstream test CA, so pass.test verifies too
        w.run(sid, "cat $SSL_CERT_FILE > /workspace/trust.pem")
        w.tool("write_file", sandbox_id=sid, path="/workspace/trust.pem",
               content=open(up_ca).read(), append=True)
        first = json.loads(w.run(sid, "python3 /workspace/probe.py bound.test 1")["stdout"])[0]
        p50 = {"bound": [], "pass": []}
        mcp = {"bound": [], "pass": []}
        for _ in range(a.n):
            for mode, host in (("bound", "bound.test"), ("pass", "pass.test")):
                t = json.loads(w.run(sid, "python3 /workspace/probe.py %s %d" % (host, a.reqs),
                                     timeout=300)["stdout"])
                p50[mode].append(statistics.median(t))
                t0 = time.perf_counter()
                r = w.run(sid, "curl -sS --cacert /workspace/trust.pem https://%s:8443/plain"
                          % host)
                mcp[mode].append((time.perf_counter() - t0) * 1e6)
                assert r["exit_code"] == 0, r
        res = {m: int(statistics.median(v)) for m, v in p50.items()}
        via = {m: int(statistics.median(v)) for m, v in mcp.items()}
        print(json.dumps({"first_bound_us": first, "p50_us": res,
                          "added_p50_us": res["bound"] - res["pass"], "run_command_curl_us": via,
                          "rounds": a.n, "reqs": a.reqs}))
    finally:
        hosts.close()
        w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
