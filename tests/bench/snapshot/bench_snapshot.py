#!/usr/bin/env python3
"""Snapshots, restore and fork of local sandboxes as an agent pays for them (issue 36): each
tools/call timed on the client's clock through `mcpbox serve` over stdio (pool off), beside its
floor in the same run.

  snapshot_sandbox create of a sandbox with --mb MB written in /workspace
      floor: run_command "cat /workspace/big > /tmp/copy" (the same bytes copied once inside)
  create_sandbox {snapshot_id} of that snapshot, and of a snapshot of a few small files
      floor: create_sandbox from the host image (a cold create: its files come from no layer)
  snapshot_sandbox fork, count 1 and count 4 (per copy)
      floor: the restore above (a fork is a snapshot without a record plus count restores)

Every sandbox made is destroyed untimed, 50 ms before the next call. Prints medians (min-max);
the figures go to docs/benchmarks.md. --only names the measurements to make (more rounds of a
few, e.g. `--only restore_small,host -n 30`): snap, copy, restore_big, restore_small, host,
fork1, fork4.
usage: bench_snapshot.py --mcpbox PATH [-n ROUNDS] [--mb MB] [--only NAME,...]
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


def ms(s):
    return s * 1000


def line(name, xs):
    xs = sorted(xs)
    print(f"| {name} | {statistics.median(xs):.1f} ({xs[0]:.1f}-{xs[-1]:.1f}) |")


class Bench:
    def __init__(self, mcpbox, state):
        self.mcp = StdioServer([mcpbox, "serve", "--state-dir", state, "--local-pool", "0"],
                               client="bench-snapshot", stderr=subprocess.DEVNULL, cwd="/")

    def call(self, name, **args):
        s, res = self.mcp.tool(name, args)
        return ms(s), res["structuredContent"]

    def destroy(self, *ids):
        for sid in ids:
            self.mcp.tool("destroy_sandbox", {"sandbox_id": sid})
        time.sleep(0.05)

    def sandbox(self, command, memory="2g", disk="1g"):
        _, out = self.call("create_sandbox", memory=memory, disk=disk)
        self.call("run_command", sandbox_id=out["sandbox_id"], command=command)
        return out["sandbox_id"]

    def restore(self, snap):
        t, out = self.call("create_sandbox", snapshot_id=snap)
        self.destroy(out["sandbox_id"])
        return t

    def fork(self, src, count):
        t, out = self.call("snapshot_sandbox", action="fork", sandbox_id=src, count=count)
        self.destroy(*[x["sandbox_id"] for x in out["sandboxes"]])
        return t / count


def round_of(b, r, only, big, small):
    """One round of the measurements named in only, in the benchmark's order."""
    if only & {"snap", "restore_big"}:
        t, snap = b.call("snapshot_sandbox", action="create", sandbox_id=big)
        r["snap"].append(t)
    if "copy" in only:
        r["copy"].append(b.call("run_command", sandbox_id=big,
                                command="cat /workspace/big > /tmp/copy; rm /tmp/copy")[0])
    if only & {"snap", "restore_big"}:
        r["restore_big"].append(b.restore(snap["snapshot_id"]))
        b.call("snapshot_sandbox", action="delete", snapshot_id=snap["snapshot_id"])
    if "restore_small" in only:
        r["restore_small"].append(b.restore(small))
    if "host" in only:
        t, host = b.call("create_sandbox", memory="2g", disk="1g")
        r["host"].append(t)
        b.destroy(host["sandbox_id"])
    if "fork1" in only:
        r["fork1"].append(b.fork(big, 1))
    if "fork4" in only:
        r["fork4"].append(b.fork(big, 4))


def line_if(name, xs):
    if xs:
        line(name, xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="mbx-bench-snap-", dir="/tmp")
    r = {k: [] for k in ("snap", "copy", "restore_big", "restore_small", "host", "fork1",
                         "fork4")}
    only = set(a.only.split(",")) if a.only else set(r)
    unknown = only - set(r)
    if unknown:
        ap.error(f"--only: unknown {sorted(unknown)}; choose from {sorted(r)}")
    try:
        b = Bench(a.mcpbox, os.path.join(base, "state"))
        big = b.sandbox(f"head -c {a.mb}M /dev/urandom > /workspace/big")
        small = b.sandbox("mkdir -p /workspace/p && for i in $(seq 1 20); do "
                          "echo line $i > /workspace/p/f$i; done")
        _, s_small = b.call("snapshot_sandbox", action="create", sandbox_id=small)
        b.restore(s_small["snapshot_id"])  # warm-up: the spawner, the page cache
        for _ in range(a.n):
            round_of(b, r, only, big, s_small["snapshot_id"])
        b.mcp.close()
    finally:
        subprocess.run([a.mcpbox, "sandbox", "--state-dir", os.path.join(base, "state"), "rm",
                        "--all"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    who = "root" if os.geteuid() == 0 else "user"
    print(f"{a.mb} MB in /workspace, {a.n} rounds, as {who}; medians (min-max), ms")
    print("| what | ms |\n|---|---|")
    line_if(f"snapshot_sandbox create ({a.mb} MB)", r["snap"])
    line_if(f"floor: run_command copying the {a.mb} MB once inside", r["copy"])
    line_if(f"create_sandbox from the {a.mb} MB snapshot", r["restore_big"])
    line_if("create_sandbox from a snapshot of 20 small files", r["restore_small"])
    line_if("floor: create_sandbox from the host image", r["host"])
    line_if(f"fork of the {a.mb} MB sandbox, count 1", r["fork1"])
    line_if(f"fork of the {a.mb} MB sandbox, count 4 (per copy)", r["fork4"])
    if r["host"] and r["restore_small"]:
        h = statistics.median(r["host"])
        print(f"small restore / host create: {statistics.median(r['restore_small']) / h:.2f}x")
    if r["host"] and r["restore_big"]:
        h = statistics.median(r["host"])
        print(f"{a.mb} MB restore / host create: {statistics.median(r['restore_big']) / h:.2f}x")


if __name__ == "__main__":
    main()
