#!/usr/bin/env python3
"""The volume watcher (volquota) as an agent pays for it, through `mcpbox serve` over stdio with
the pool off, as an ordinary user (as root the ext4 image holds the limit and there is no
watcher). Side by side in one run:
  - a command that writes 2,000 small files and 64 MiB with fsync into a rw volume that also
    holds ENTRIES other files (so each of the watcher's walks, every 0.5 s, costs what such a
    volume costs), against the same command into a rw host directory holding the same files
    (the floor: no watcher looks at it);
  - volume inspect of that volume (a walk on a worker thread) as the measure of one walk;
  - how long after a write crosses the limit the volume refuses writes (EROFS), and by how much
    it overshot: dd writing 1 MiB blocks with fsync into a 64 MiB volume until refused.
Time = the tools/call round trip. docs/benchmarks.md, "The volume watcher".

usage: bench_volquota.py --mcpbox PATH [-n ROUNDS] [--entries N]
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

WORK = ("mkdir -p {d}/w && i=0; while [ $i -lt 2000 ]; do echo $i > {d}/w/f$i; i=$((i+1)); done; "
        "dd if=/dev/zero of={d}/blob bs=1M count=64 conv=fsync 2>/dev/null; rm -r {d}/w {d}/blob")
FILL = ("mkdir -p {d}/many && i=0; while [ $i -lt {n} ]; do printf '' > {d}/many/f$i; "
        "i=$((i+1)); done")
CROSS = ("i=0; t=$(date +%s%N); while dd if=/dev/zero of=/data/v/f$i bs=1M count=1 "
         "conv=fsync 2>/dev/null; do i=$((i+1)); [ $i -eq 64 ] && t=$(date +%s%N); done; "
         "echo $i $(( ($(date +%s%N) - t) / 1000000 ))")


def run(s, sid, command, timeout_ms=600000):
    sec, res = s.tool("run_command", {"sandbox_id": sid, "command": command,
                                      "timeout_ms": timeout_ms})
    return sec * 1000, res["structuredContent"]


def stats(v):
    return f"median {statistics.median(v):8.2f} ms  min {min(v):8.2f}  max {max(v):8.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--entries", type=int, default=20000)
    a = ap.parse_args()
    if os.geteuid() == 0:
        print("run this as an ordinary user (tests/local/rootless/rootless.py run): as root the "
              "ext4 image holds a volume's limit and there is no watcher")
        return 2
    base = tempfile.mkdtemp(prefix="mbx-bench-vq-", dir="/tmp")
    os.chmod(base, 0o755)
    allow, state = os.path.join(base, "allow"), os.path.join(base, "state")
    os.makedirs(allow)
    s = StdioServer([a.mcpbox, "serve", "--state-dir", state, "--local-pool", "0",
                     "--allow-dir", allow], client="bench-volquota", stderr=subprocess.DEVNULL,
                    cwd="/")
    t = {"work_host": [], "work_volume": [], "inspect": [], "to_erofs": [], "overshoot_mib": []}
    try:
        s.tool("volume", {"action": "create", "name": "big", "size_bytes": 4 << 30})
        sid = s.tool("create_sandbox", {"mounts": [
            {"volume": "big", "target": "/data/v", "mode": "rw"},
            {"source": allow, "target": "/data/h", "mode": "rw"}]})[1]["structuredContent"][
                "sandbox_id"]
        for d in ("/data/v", "/data/h"):
            run(s, sid, FILL.format(d=d, n=a.entries))
        for i in range(a.n + 1):  # 1 warm-up round
            for kind, d in (("host", "/data/h"), ("volume", "/data/v")):
                ms, out = run(s, sid, WORK.format(d=d))
                assert out["exit_code"] == 0, out
                if i:
                    t["work_" + kind].append(ms)
            sec, _ = s.tool("volume", {"action": "inspect", "name": "big"})
            if i:
                t["inspect"].append(sec * 1000)
        s.tool("destroy_sandbox", {"sandbox_id": sid})
        for i in range(a.n):
            s.tool("volume", {"action": "create", "name": f"small{i}", "size_bytes": 64 << 20})
            sid = s.tool("create_sandbox", {"mounts": [
                {"volume": f"small{i}", "target": "/data/v", "mode": "rw"}]})[1][
                    "structuredContent"]["sandbox_id"]
            _, out = run(s, sid, CROSS)
            written, ms = (int(x) for x in out["stdout"].split())
            # from the write that reached 64 MiB to the refusal (from the start if refused before)
            t["to_erofs"].append(ms)
            t["overshoot_mib"].append(max(written - 64, 0))
            s.tool("destroy_sandbox", {"sandbox_id": sid})
            s.tool("volume", {"action": "delete", "name": f"small{i}"})
        s.close()
    finally:
        subprocess.run([a.mcpbox, "sandbox", "--state-dir", state, "rm", "--all"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    print(f"rounds={a.n} uid={os.geteuid()} entries={a.entries} load={os.getloadavg()[0]:.1f}")
    for k in ("work_host", "work_volume", "inspect", "to_erofs"):
        print(f"{k:13} {stats(t[k])}  (n={len(t[k])})")
    o = t["overshoot_mib"]
    print(f"overshoot     median {statistics.median(o):.0f} MiB  min {min(o)}  max {max(o)} "
          f"(1 MiB writes with fsync into a 64 MiB volume)")
    print(f"work into the watched volume / into the host directory: "
          f"{statistics.median(t['work_volume']) / statistics.median(t['work_host']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
