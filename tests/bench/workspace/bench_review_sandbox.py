#!/usr/bin/env python3
"""The review of 100 changed files in a 50,000-file tree through a real local sandbox (issue 13).

  bench_review_sandbox.py --mcpbox BIN [--files N] [--changed K] [--runs R]

Builds the tree in a temporary directory, creates a sandbox with it mounted copy-on-write
(`mcpbox sandbox create --mount`), changes K files inside (one line each, through `sandbox exec`),
then times `mcpbox sandbox diff ID --stat` as a whole process (R runs) and `review_changes` over
one `mcpbox serve` on stdio (R calls after a first one that opens the store), then one
`apply_changes` with the last review's token, and the server's peak memory (VmHWM). Prints the
medians; removes the sandbox and the tree. Figures: docs/benchmarks.md.
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


def make_tree(root, files):
    for i in range(files):
        d = os.path.join(root, f"d{i // 100:04d}")
        if i % 100 == 0:
            os.makedirs(d)
        with open(os.path.join(d, f"f{i % 100:03d}.txt"), "w") as f:
            f.write("".join(f"line {n} of file {i}\n" for n in range(20)))


def vm_kib(pid, field):
    """VmRSS or VmHWM (peak) of a process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def time_mcp(mcpbox, state, sid, runs, changed):
    """review_changes timed runs+1 times (the first opens the store), then one apply_changes
    with the last review's token; the server's peak memory (VmHWM) after each part."""
    server = StdioServer([mcpbox, "serve", "--state-dir", state], client="bench-review")
    times = []
    hwm_start = 0
    for i in range(runs + 1):
        seconds, result = server.tool("review_changes", {"sandbox_id": sid})
        if i == 0:
            hwm_start = vm_kib(server.proc.pid, "VmHWM")
        times.append(seconds * 1000)
        n = result.get("structuredContent", {}).get("changes_total")
        if n != changed:
            raise SystemExit(f"FAIL: review_changes listed {n} changes, {changed} were made")
    hwm_review = vm_kib(server.proc.pid, "VmHWM")
    token = result["structuredContent"]["review"]
    seconds, result = server.tool("apply_changes", {"sandbox_id": sid, "review": token})
    applied = result["structuredContent"]["applied"]
    if applied != changed:
        raise SystemExit(f"FAIL: apply_changes applied {applied} of {changed}: {result}")
    hwm_apply = vm_kib(server.proc.pid, "VmHWM")
    server.close()
    print(f"server peak memory (VmHWM): {hwm_start / 1024:.1f} MiB after the first review, "
          f"{hwm_review / 1024:.1f} MiB after {runs} more, {hwm_apply / 1024:.1f} MiB after "
          f"the apply")
    print(f"apply_changes through MCP (stdio, with the review token): {seconds * 1000:.2f} ms "
          f"for {applied} files")
    return times[1:]


def time_cli(mcpbox, state, sid, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([mcpbox, "sandbox", "--state-dir", state, "diff", sid, "--stat"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def report(what, t):
    print(f"{what}: median {statistics.median(t):.2f} ms (min {min(t):.2f}, max {max(t):.2f}, "
          f"{len(t)} runs)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--files", type=int, default=50000)
    ap.add_argument("--changed", type=int, default=100)
    ap.add_argument("--runs", type=int, default=21)
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="mcpbox-review-bench-")
    tree, state = os.path.join(base, "tree"), os.path.join(base, "state")
    os.makedirs(state, mode=0o700)
    make_tree(tree, a.files)
    env = dict(os.environ, MCPBOX_ALLOW_DIRS=tree)
    cli = [a.mcpbox, "sandbox", "--state-dir", state]
    sid = subprocess.run(cli + ["create", "-q", "--mount", f"{tree}:/workspace/tree"], env=env,
                         check=True, capture_output=True, text=True).stdout.strip()
    try:
        step = a.files // a.changed
        script = ("cd /workspace/tree && for i in $(seq 0 %d); do n=$((i*%d)); "
                  "f=$(printf 'd%%04d/f%%03d.txt' $((n/100)) $((n%%100))); "
                  "sed -i '11s/$/ (changed)/' $f; done" % (a.changed - 1, step))
        subprocess.run(cli + ["exec", sid, script], check=True)
        print(f"tree: {a.files} files, {a.changed} changed in sandbox {sid}")
        # the CLI first: the MCP part ends with the apply
        report("mcpbox sandbox diff --stat (whole process)", time_cli(a.mcpbox, state, sid, a.runs))
        report("review_changes through MCP (stdio)", time_mcp(a.mcpbox, state, sid, a.runs,
                                                              a.changed))
    finally:
        subprocess.run(cli + ["rm", sid], stdout=subprocess.DEVNULL)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
