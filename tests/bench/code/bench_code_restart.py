#!/usr/bin/env python3
"""What a context taken up by a new mcpbox process costs (issue 34's last piece), as a client
that starts one `mcpbox serve` per call (the MCP Inspector CLI) pays it: a new process, its
initialize, then one call, timed from the spawn to the answer. Alternated call by call:

- run_code "x + 1" in the default python context another process made (the new process finds
  it by label, attaches and replays its log, then runs);
- run_command "true" (the floor: the same new process and one call, no lookup).

  bench_code_restart.py --mcpbox BIN [--runs N] [--log-mib M] [--quick]
Figures: docs/benchmarks.md.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mcp_stdio import StdioServer  # noqa: E402 (tests/bench/mcp_stdio.py)


def one_call(argv, tool, args):
    t0 = time.perf_counter()
    server = StdioServer(argv)
    _, result = server.tool(tool, args)
    ms = (time.perf_counter() - t0) * 1000
    server.proc.stdin.close()
    server.proc.wait(60)
    res = result.get("result", result)
    if res.get("isError"):
        raise SystemExit(f"FAIL: {tool}: {res}")
    return ms, res["structuredContent"]


def p(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--log-mib", type=int, default=0,
                    help="the context prints this many MiB first: a longer log to replay")
    a = ap.parse_args()
    runs = 2 if a.quick else a.runs
    state = tempfile.mkdtemp(prefix="mbx-bench-restart-")
    argv = [os.path.abspath(a.mcpbox), "serve", "--state-dir", state, "--local-pool", "0"]
    _, info = one_call(argv, "create_sandbox", {})
    sid = info["sandbox_id"]
    try:
        one_call(argv, "run_code", {"sandbox_id": sid, "code": "x = 41"})
        if a.log_mib:
            one_call(argv, "run_code", {"sandbox_id": sid, "max_output_bytes": 4096,
                                        "code": f"print('y' * ({a.log_mib} << 20))"})
        code, cmd = [], []
        for _ in range(runs):
            ms, out = one_call(argv, "run_code", {"sandbox_id": sid, "code": "x + 1"})
            if out["results"][0]["text"] != "42":
                raise SystemExit(f"FAIL: x + 1 in a new process gave {out}")
            code.append(ms)
            ms, out = one_call(argv, "run_command", {"sandbox_id": sid, "command": "true"})
            cmd.append(ms)
        if a.quick:
            print("ok")
            return
        print("one mcpbox serve per call (spawn -> initialize -> one call -> answer):")
        print(f"  run_command \"true\"                        p50 {p(cmd, .5):7.2f} ms  "
              f"p90 {p(cmd, .9):7.2f} ms (n={runs})")
        print(f"  run_code \"x + 1\" (context taken up)       p50 {p(code, .5):7.2f} ms  "
              f"p90 {p(code, .9):7.2f} ms (n={runs}, execution_count {out_count(argv, sid)})")
        print(f"  difference of p50s: {statistics.median(code) - statistics.median(cmd):.2f} ms")
    finally:
        one_call(argv, "destroy_sandbox", {"sandbox_id": sid})


def out_count(argv, sid):
    _, out = one_call(argv, "run_code", {"sandbox_id": sid, "code": "1"})
    return out["execution_count"]


if __name__ == "__main__":
    main()
