#!/usr/bin/env python3
"""Secrets on the opensandbox backend (issue 37): what binding costs an agent, through MCP, on an
osb- sandbox whose remote is mcpbox's own OpenSandbox API over local sandboxes (the test set-up
of tests/opensandbox/test_vaultmap_osb.py: both servers in a network namespace, nothing leaves
the machine). Side by side in one run, rounds alternating:

  create:  create_sandbox + destroy_sandbox with secrets ["tok"] (credentialProxy, then the
           values read and the vault POSTed through the sidecar's endpoint), against the same
           create with the same network_policy and no secrets (the floor);
  rebind:  update_sandbox secrets toggling between ["tok"] and ["tok", "key2"] (endpoint, GET and
           PATCH of the vault, then the policy for key2's host), against update_sandbox
           network_policy toggling between two policies with the same default (endpoint, GET,
           PATCH and DELETE of the sidecar's /policy: the same kind of round trips).
Per round the median of --k calls of each; the figures are medians over rounds.

usage: bench_vaultmap.py --mcpbox PATH [-n ROUNDS] [--k N]   (root)
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "opensandbox"))
from test_vaultmap_osb import Pair, define  # noqa: E402
from test_secrets import Hosts  # noqa: E402

POLICY = {"default_action": "deny", "egress": [{"action": "allow", "target": "vault.test"}]}
POLICY2 = {"default_action": "deny", "egress": [{"action": "allow", "target": "vault.test"},
                                                {"action": "allow", "target": "vault2.test"}]}


def timed(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def create_destroy(w, secrets):
    args = dict(backend="opensandbox", image="host", network_policy=POLICY)
    if secrets:
        args["secrets"] = secrets
    sid = w.tool("create_sandbox", **args)["structuredContent"]["sandbox_id"]
    w.tool("destroy_sandbox", sandbox_id=sid)
    w.made.remove(sid)


def one_round(w, k, sid_s, sid_p):
    f = {"create_plain": [], "create_secrets": [], "policy": [], "rebind": []}
    for i in range(k):
        f["create_plain"].append(timed(lambda: create_destroy(w, None)))
        f["create_secrets"].append(timed(lambda: create_destroy(w, ["tok"])))
        pol = POLICY2 if i % 2 == 0 else POLICY
        f["policy"].append(timed(lambda: w.tool("update_sandbox", sandbox_id=sid_p,
                                                network_policy=pol)))
        names = ["tok", "key2"] if i % 2 == 0 else ["tok"]
        f["rebind"].append(timed(lambda: w.tool("update_sandbox", sandbox_id=sid_s,
                                                secrets=names)))
    return {key: statistics.median(v) for key, v in f.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--k", type=int, default=20)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (a network namespace)")
    mcpbox = os.path.abspath(a.mcpbox)
    vals = ["b%d-%016x" % (i, random.getrandbits(64)) for i in range(3)]
    w = Pair(mcpbox)
    w.mcpbox, w.key = mcpbox, "bench-%016x" % random.getrandbits(64)
    hosts = None
    try:
        subprocess.run(w.nsenter + ["ip", "addr", "add", "11.0.0.9/32", "dev", "lo"], check=True)
        subprocess.run(w.nsenter + ["ip", "addr", "add", "11.0.0.10/32", "dev", "lo"], check=True)
        with open(w.hosts, "a") as f:
            f.write("11.0.0.9 vault.test vault2.test\n11.0.0.10 decoy.test\n")
        hosts = Hosts(w, at=["11.0.0.9:80"])
        define(w, mcpbox, None, vals)
        w.start()
        sid_s = w.tool("create_sandbox", backend="opensandbox", image="host",
                       network_policy=POLICY, secrets=["tok"])["structuredContent"]["sandbox_id"]
        sid_p = w.tool("create_sandbox", backend="opensandbox", image="host",
                       network_policy=POLICY)["structuredContent"]["sandbox_id"]
        rounds = [one_round(w, a.k, sid_s, sid_p) for _ in range(a.n)]
    finally:
        if hosts is not None:
            hosts.close()
        w.close()
    med = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    print("rounds %d x %d calls, medians (ms) through MCP:" % (a.n, a.k))
    print("  create+destroy, no secrets (floor)   %7.2f" % med["create_plain"])
    print("  create+destroy, secrets [tok]        %7.2f  (+%.2f, %.2fx)" % (
        med["create_secrets"], med["create_secrets"] - med["create_plain"],
        med["create_secrets"] / med["create_plain"]))
    print("  update_sandbox network_policy (floor) %6.2f" % med["policy"])
    print("  update_sandbox secrets (rebind)      %7.2f  (%.2fx)" % (
        med["rebind"], med["rebind"] / med["policy"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
