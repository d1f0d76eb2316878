#!/usr/bin/env python3
"""Review and apply of a copy-on-write mount as an agent pays for them (issue 32): time and the
server's peak memory through MCP, on trees of different sizes with the same few changes.

  bench_review_apply.py --mcpbox BIN [--files N ...] [--changed K] [--runs R]

For each tree size: builds the tree (directories of 100 files of 20 lines) in a temporary
directory, starts `mcpbox serve` over stdio with it allowed (pool off), creates a sandbox with it
mounted copy-on-write, then R times: changes K files spread over the tree inside the sandbox
(untimed, one run_command), times review_changes (the default page) and apply_changes of what
that review covered (its token), beside the floor: `run_command "true"` on the same sandbox,
the cheapest call an agent makes. The server's peak resident memory (VmHWM) is read before the
first review and after the last apply. Prints one line per tree size; the figures go to
docs/benchmarks.md. Whether the review's cost grows with the changes and not the tree is read
off the lines of the different sizes.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mcp_stdio import StdioServer  # noqa: E402 (tests/bench/mcp_stdio.py)


def make_tree(root, files):
    for i in range(files):
        d = os.path.join(root, f"d{i // 100:04d}")
        if i % 100 == 0:
            os.makedirs(d)
        with open(os.path.join(d, f"f{i % 100:03d}.txt"), "w") as f:
            f.write("".join(f"line {n} of file {i}\n" for n in range(20)))


def hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("VmHWM")).split()[1])


def change_script(files, changed, run):
    step = max(files // changed, 1)
    return ("cd /workspace/tree && for i in $(seq 0 %d); do n=$((i*%d)); "
            "f=$(printf 'd%%04d/f%%03d.txt' $((n/100)) $((n%%100))); "
            "echo 'run %d' >> $f; done" % (changed - 1, step, run))


def one_size(mcpbox, files, changed, runs):
    base = tempfile.mkdtemp(prefix="mcpbox-review-apply-bench-")
    tree, state = os.path.join(base, "tree"), os.path.join(base, "state")
    os.makedirs(state, mode=0o700)
    make_tree(tree, files)
    server = StdioServer([mcpbox, "serve", "--state-dir", state, "--allow-dir", tree,
                          "--local-pool", "0"], client="bench-review-apply")
    review_ms, apply_ms, floor_ms = [], [], []
    try:
        _, res = server.tool("create_sandbox", {"mounts": [{"source": tree,
                                                            "target": "/workspace/tree"}]})
        sid = res["structuredContent"]["sandbox_id"]
        before = hwm_kib(server.proc.pid)
        for run in range(runs):
            server.tool("run_command", {"sandbox_id": sid,
                                        "command": change_script(files, changed, run)})
            # the floor: the cheapest call an agent makes on the same sandbox and server
            seconds, _ = server.tool("run_command", {"sandbox_id": sid, "command": "true"})
            floor_ms.append(seconds * 1000)
            seconds, res = server.tool("review_changes", {"sandbox_id": sid})
            review_ms.append(seconds * 1000)
            out = res.get("structuredContent", {})
            listed = out.get("changes_total")
            if listed != changed:
                raise SystemExit(f"FAIL: review_changes counted {listed} changes, {changed} made")
            args = {"sandbox_id": sid}
            if out.get("review"):
                args["review"] = out["review"]
            seconds, res = server.tool("apply_changes", args)
            apply_ms.append(seconds * 1000)
            applied = res.get("structuredContent", {}).get("applied")
            if applied != changed:
                raise SystemExit(f"FAIL: apply_changes applied {applied} of {changed}: {res}")
        after = hwm_kib(server.proc.pid)
        server.tool("destroy_sandbox", {"sandbox_id": sid})
    finally:
        server.close()
        shutil.rmtree(base, ignore_errors=True)
    floor = statistics.median(floor_ms)
    print(f"{files:>7} files, {changed} changed, {runs} runs: run_command true median "
          f"{floor:.2f} ms; review_changes median {statistics.median(review_ms):.2f} ms "
          f"({statistics.median(review_ms) / floor:.2f}x, min {min(review_ms):.2f}), apply_changes "
          f"median {statistics.median(apply_ms):.2f} ms (min {min(apply_ms):.2f}); server peak "
          f"RSS {before / 1024:.1f} MiB before the first review, {after / 1024:.1f} MiB after "
          f"the last apply")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--files", type=int, nargs="+", default=[5000, 50000])
    ap.add_argument("--changed", type=int, default=10)
    ap.add_argument("--runs", type=int, default=21)
    a = ap.parse_args()
    for files in a.files:
        one_size(a.mcpbox, files, a.changed, a.runs)


if __name__ == "__main__":
    main()
