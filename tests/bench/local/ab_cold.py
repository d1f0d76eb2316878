#!/usr/bin/env python3
"""Side-by-side cold create through MCP: two (or more) mcpbox binaries, each serving over stdio
with the pool off (`mcpbox serve --local-pool 0`), driven by a raw JSON-RPC client
(tests/bench/mcp_stdio.py) that alternates between them cycle by cycle (create_sandbox,
run_command "true", a second run_command, destroy_sandbox), so that load from other work on the
machine hits every binary alike. Prints the p50 of each part per binary (microseconds on the
client's clock).

    tests/bench/local/ab_cold.py OLD/mcpbox NEW/mcpbox [-n 100] [--gap 0.02]

Used for issue 19's before/after when the machine was too loaded for absolute figures
(docs/benchmarks.md, "Cold create, step by step")."""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mcp_stdio import StdioServer  # noqa: E402 (tests/bench/mcp_stdio.py)


class Server:
    def __init__(self, binary):
        self.binary = binary
        self.state = tempfile.mkdtemp(prefix="mcpbox-abcold-")
        self.mcp = StdioServer([binary, "serve", "--state-dir", self.state, "--local-pool", "0",
                                "--log-level", "error"], client="ab_cold")
        self.parts = {"create": [], "first run": [], "second run": [], "create + first run": []}

    def tool(self, name, args):
        seconds, result = self.mcp.tool(name, args)
        return seconds * 1e6, result

    def cycle(self, record):
        create, res = self.tool("create_sandbox", {})
        sid = res["structuredContent"]["sandbox_id"]
        first, _ = self.tool("run_command", {"sandbox_id": sid, "command": "true"})
        second, _ = self.tool("run_command", {"sandbox_id": sid, "command": "true"})
        self.tool("destroy_sandbox", {"sandbox_id": sid})
        if record:
            for k, v in (("create", create), ("first run", first), ("second run", second),
                         ("create + first run", create + first)):
                self.parts[k].append(v)

    def stop(self):
        self.mcp.close()
        shutil.rmtree(self.state, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("-n", type=int, default=100, help="cycles per binary (after 3 warm-up ones)")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds between cycles")
    args = ap.parse_args()
    servers = [Server(b) for b in args.binaries]
    try:
        for i in range(args.n + 3):
            for s in servers:
                s.cycle(i >= 3)
                time.sleep(args.gap)
    finally:
        for s in servers:
            s.stop()
    print("| binary | " + " | ".join(servers[0].parts) + " |")
    print("|---" * (len(servers[0].parts) + 1) + "|")
    for s in servers:
        print(f"| {s.binary} | " +
              " | ".join(f"{statistics.median(v):.0f}" for v in s.parts.values()) + " |")


if __name__ == "__main__":
    main()
