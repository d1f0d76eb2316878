#!/usr/bin/env python3
"""What trusting the egress CA from creation costs (issue 37, gaps): since every sandbox with a
network_policy trusts mcpbox's egress CA (so that a secret bound later works over HTTPS), its
create copies the system CA bundle with the CA appended and binds it over the bundle paths.
Measured through MCP as an agent pays, on one `mcpbox serve` over stdio: create_sandbox with a
network_policy (the bundle made) against create_sandbox with `network: false` (no proxy, no
bundle: the floor), rounds alternating, then `run_command` of `true` in each (the placeholder
lookup a policy sandbox now does per command). Each sandbox is destroyed after its round.
With --base, the same rounds on a second binary (e.g. main before the change) in the same run.

usage: bench_secrets_trust.py --mcpbox PATH [--base PATH] [-n ROUNDS] [--execs N]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "local", "lib"))
from mcp_stdio import Client, serve_argv  # noqa: E402

POLICY = {"default_action": "deny", "egress": [{"action": "allow", "target": "example.test"}]}


def timed(c, name, args):
    t = time.perf_counter()
    res = c.call_tool(name, args)
    ms = (time.perf_counter() - t) * 1000
    assert not res.get("isError"), "%s: %s" % (name, json.dumps(res)[:400])
    return ms, res.get("structuredContent", {})


def measure(mcpbox, rounds, execs):
    state = tempfile.mkdtemp(prefix="mcpbox-bench-trust-")
    c = Client(serve_argv(mcpbox, state, "--local-pool", "0", "--approve", "egress=allow"),
               stderr=open(os.devnull, "w"))
    c.initialize("bench-trust")
    got = {"policy": [], "floor": [], "exec_policy": [], "exec_floor": []}
    try:
        for _ in range(rounds):
            for kind, args in (("policy", {"network_policy": POLICY}),
                               ("floor", {"network": False})):
                ms, sc = timed(c, "create_sandbox", args)
                got[kind].append(ms)
                sid = sc["sandbox_id"]
                runs = [timed(c, "run_command", {"sandbox_id": sid, "command": "true"})[0]
                        for _ in range(execs)]
                got["exec_" + kind].append(statistics.median(runs))
                c.call_tool("destroy_sandbox", {"sandbox_id": sid})
    finally:
        c.close(60)
    return {k: round(statistics.median(v), 2) for k, v in got.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--base")
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--execs", type=int, default=20)
    a = ap.parse_args()
    out = {"rounds": a.n, "execs": a.execs, "mcpbox": measure(a.mcpbox, a.n, a.execs)}
    if a.base:
        out["base"] = measure(a.base, a.n, a.execs)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
