#!/usr/bin/env python3
"""Two mcpbox-conformance binaries side by side over Streamable HTTP (an A/B of a change to the
HTTP path), with the C load client: tools/call test_simple_text, the binaries alternating run by
run, medians of calls/s, p99 and the server's CPU time per call (from /proc, warm-up included).

  tests/bench/mcp/ab_http.py A_BINARY B_BINARY --loadgen PATH [--reps 5] [-n 30000]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

LOADS = [("c=1", ["-c", "1"]), ("c=8", ["-c", "8"]), ("c=4 pipelined 8", ["-c", "4", "-p", "8"])]


def start(binary, state_dir):
    p = subprocess.Popen([binary, "serve", "--conformance-fixtures", "--http", "127.0.0.1:0",
                          "--state-dir", state_dir], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return p, m.group(1)
    sys.exit(f"{binary} did not start")


def cpu_ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def run(binary, args, loadgen, n):
    with tempfile.TemporaryDirectory() as state:
        p, url = start(binary, state)
        try:
            before = cpu_ticks(p.pid)
            out = subprocess.run([loadgen, url, "-n", str(n), "-w", "1000", "-t", "test_simple_text",
                                  "--json", *args], capture_output=True, text=True, check=True)
            ticks = cpu_ticks(p.pid) - before
        finally:
            p.terminate()
            p.wait()

    r = json.loads(out.stdout)
    return r["callsPerSec"], r["p99"], ticks / os.sysconf("SC_CLK_TCK") * 1e6 / (n + 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("-n", type=int, default=30000)
    o = ap.parse_args()
    print("| load | A calls/s | B calls/s | A p99 ms | B p99 ms | A CPU µs/call | B CPU µs/call |")
    print("|---|---|---|---|---|---|---|")
    for name, args in LOADS:
        res = {"a": [], "b": []}
        for _ in range(o.reps):
            for k in ("a", "b"):
                res[k].append(run(getattr(o, k), args, o.loadgen, o.n))
        med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in res.items()}
        print(f"| {name} | {med['a'][0]:.0f} | {med['b'][0]:.0f} | {med['a'][1]:.3f} | "
              f"{med['b'][1]:.3f} | {med['a'][2]:.1f} | {med['b'][2]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
