#!/usr/bin/env python3
"""Egress by policy against network: true (issue 14): one large download and connection setup
time, from inside a sandbox, through mcpbox's policy proxy and through pasta. The test host is in
a network namespace the benchmark makes (tests/local/egress/egress_env.py); mcpbox runs in it.

Rounds alternate between the two sandboxes; the figures are medians over the rounds.
  download: curl of GET /big (BYTES zero bytes) to /dev/null, MB/s from curl's speed_download;
  setup:    SETUPS sequential connect + one small HTTP/1.0 request + reply until close, per
            connection, median in microseconds (policy: to the DNS-given address, the name known
            at accept; and to the address with the name in Host, read from the first bytes).

usage: bench_egress.py --mcpbox PATH [-n ROUNDS] [--bytes N] [--setups N]   (root)
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "local",
                                "egress"))
from egress_env import World  # noqa: E402

PROBE = r"""
import socket, sys, time
host, addr, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ip = socket.gethostbyname(addr)
req = ("GET / HTTP/1.0\r\nHost: %s\r\n\r\n" % host).encode()
times = []
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection((ip, 80))
    s.sendall(req)
    while s.recv(65536):
        pass
    s.close()
    times.append(time.perf_counter() - t)
times.sort()
print(int(times[len(times) // 2] * 1e6))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--setups", type=int, default=200)
    a = ap.parse_args()
    w = World(os.path.abspath(a.mcpbox), uplink=True)
    try:
        policy = w.tool("create_sandbox", network_policy={
            "egress": [{"action": "allow", "target": "allowed.test"}]})["structuredContent"]
        full = w.tool("create_sandbox", network=True)["structuredContent"]
        for sb in (policy, full):
            w.tool("write_file", sandbox_id=sb["sandbox_id"], path="/workspace/probe.py",
                   content=PROBE)
        modes = {"policy": (policy["sandbox_id"], "allowed.test"),
                 "network_true": (full["sandbox_id"], "11.0.0.1")}
        mbps = {m: [] for m in modes}
        setup = {m: [] for m in list(modes) + ["policy_host_header"]}
        for _ in range(a.n):
            for m, (sid, host) in modes.items():
                r = w.run(sid, "curl -sS -o /dev/null -w '%%{speed_download}' "
                          "http://%s/big?bytes=%d" % (host, a.bytes), timeout=600)
                assert r["exit_code"] == 0, r
                mbps[m].append(float(r["stdout"]) / 1e6)
                r = w.run(sid, "python3 /workspace/probe.py %s %s %d" % (host, host, a.setups))
                assert r["exit_code"] == 0, r
                setup[m].append(int(r["stdout"]))
            r = w.run(policy["sandbox_id"], "python3 /workspace/probe.py allowed.test "
                      "11.0.0.1 %d" % a.setups)
            assert r["exit_code"] == 0, r
            setup["policy_host_header"].append(int(r["stdout"]))
        out = {"rounds": a.n, "bytes": a.bytes, "setups_per_round": a.setups,
               "download_MBps_median": {m: round(statistics.median(v), 1) for m, v in mbps.items()},
               "setup_us_median": {m: statistics.median(v) for m, v in setup.items()},
               "loadavg": open("/proc/loadavg").read().split()[:3]}
        d, s = out["download_MBps_median"], out["setup_us_median"]
        out["throughput_ratio_network_true_over_policy"] = round(d["network_true"] / d["policy"], 2)
        out["setup_added_us"] = {"dns_name": s["policy"] - s["network_true"],
                                 "host_header": s["policy_host_header"] - s["network_true"]}
        print(json.dumps(out, indent=1))
    finally:
        w.close()


if __name__ == "__main__":
    main()
