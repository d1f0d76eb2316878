#!/usr/bin/env python3
"""create_sandbox with a copy-on-write mount of a large tree against create_sandbox without one
(issue 13; goal: under 2x). Drives `mcpbox serve` over stdio with the pool off (both kinds of
create are cold), builds a tree of --files files (100 per directory) in a temporary allowed
directory, and times each tools/call round trip, the two kinds interleaved, destroying each
sandbox (untimed) and waiting 50 ms (its release runs after the destroy's answer) before the next. Prints the medians and their ratio (docs/benchmarks.md).

usage: bench_mount_create.py --mcpbox PATH [-n ROUNDS] [--files N] [--mode copy-on-write|ro|rw]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mcp_stdio import StdioServer  # noqa: E402 (tests/bench/mcp_stdio.py)


class Serve:
    def __init__(self, mcpbox, state, allow):
        self.mcp = StdioServer([mcpbox, "serve", "--state-dir", state, "--local-pool", "0",
                                "--allow-dir", allow], client="bench-mounts",
                               stderr=subprocess.DEVNULL, cwd="/")
        self.settle = 0.05

    def create(self, args):
        seconds, res = self.mcp.tool("create_sandbox", args)
        sid = res["structuredContent"]["sandbox_id"]
        self.mcp.tool("destroy_sandbox", {"sandbox_id": sid})
        time.sleep(self.settle)  # the destroy's release (after its answer) is not the next create's
        return seconds * 1000


def make_tree(root, files):
    line = "a line of text in a source file of the benchmark tree\n" * 20
    for d in range((files + 99) // 100):
        sub = os.path.join(root, f"d{d:04}")
        os.makedirs(sub)
        for f in range(min(100, files - d * 100)):
            with open(os.path.join(sub, f"f{f:03}.txt"), "w") as fh:
                fh.write(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--files", type=int, default=50000)
    ap.add_argument("--mode", default="copy-on-write")
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="mbx-bench-mount-", dir="/tmp")
    try:
        allow, state = os.path.join(base, "allow"), os.path.join(base, "state")
        tree = os.path.join(allow, "tree")
        os.makedirs(tree)
        make_tree(tree, a.files)
        s = Serve(a.mcpbox, state, allow)
        mount = {"mounts": [{"source": tree, "target": "/workspace/tree", "mode": a.mode}]}
        for _ in range(3):  # warm-up: first creates pay for the seccomp build, page cache, ...
            s.create({}), s.create(mount)
        plain, mounted = [], []
        for _ in range(a.n):
            plain.append(s.create({}))
            mounted.append(s.create(mount))
        s.mcp.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    mp, mm = statistics.median(plain), statistics.median(mounted)
    print(f"files={a.files} mode={a.mode} rounds={a.n} uid={os.geteuid()}")
    print(f"create without mount: median {mp:.2f} ms (min {min(plain):.2f}, max {max(plain):.2f})")
    print(f"create with {a.mode} mount: median {mm:.2f} ms (min {min(mounted):.2f}, "
          f"max {max(mounted):.2f})")
    print(f"ratio {mm / mp:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
