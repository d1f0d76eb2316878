#!/usr/bin/env python3
"""Named volumes (issue 36) as an agent pays for them, through `mcpbox serve` over stdio with
the pool off, side by side in one run against their floors:
  - create_sandbox with a rw volume mount, against create_sandbox with no mount and with a rw
    mount of a host directory (the same mount path, without the volume's lookup and its image);
  - volume create + delete (as root an ext4 image made and mounted, then unmounted);
  - writing 64 MiB with fsync into the volume, against the same into a rw host directory on the
    host's own filesystem (as root the volume's is ext4 on a loop device over a file on it).
Creates are interleaved; each sandbox is destroyed untimed and the script waits 50 ms (its release
runs after the destroy's answer). Time = the tools/call round trip. docs/benchmarks.md.

usage: bench_volumes.py --mcpbox PATH [-n ROUNDS]
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

WRITE = "dd if=/dev/zero of={dir}/blob bs=1M count=64 conv=fsync 2>/dev/null; rm {dir}/blob"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=30)
    a = ap.parse_args()
    a.mcpbox = os.path.abspath(a.mcpbox)
    base = tempfile.mkdtemp(prefix="mbx-bench-vol-", dir="/tmp")
    os.chmod(base, 0o755)
    allow, state = os.path.join(base, "allow"), os.path.join(base, "state")
    os.makedirs(allow)
    s = StdioServer([a.mcpbox, "serve", "--state-dir", state, "--local-pool", "0",
                     "--allow-dir", allow], client="bench-volumes", stderr=subprocess.DEVNULL,
                    cwd="/")
    t = {"plain": [], "host": [], "volume": [], "vcreate": [], "vdelete": [],
         "write_host": [], "write_volume": []}
    try:
        s.tool("volume", {"action": "create", "name": "bench", "size_bytes": 1 << 30})
        kinds = {"plain": {}, "host": {"mounts": [{"source": allow, "target": "/data/v",
                                                   "mode": "rw"}]},
                 "volume": {"mounts": [{"volume": "bench", "target": "/data/v",
                                        "mode": "rw"}]}}

        def create(kind):
            sec, res = s.tool("create_sandbox", kinds[kind])
            return sec * 1000, res["structuredContent"]["sandbox_id"]

        def destroy(sid):
            s.tool("destroy_sandbox", {"sandbox_id": sid})
            time.sleep(0.05)

        for i in range(a.n + 3):  # 3 warm-up rounds, not counted
            for kind in kinds:
                ms, sid = create(kind)
                if kind != "plain" and i % 5 == 0:
                    sec, _ = s.tool("run_command", {"sandbox_id": sid,
                                                    "command": WRITE.format(dir="/data/v")})
                    if i >= 3:
                        t["write_" + kind].append(sec * 1000)
                destroy(sid)
                if i >= 3:
                    t[kind].append(ms)
            sec, _ = s.tool("volume", {"action": "create", "name": f"tmp{i}"})
            sec2, _ = s.tool("volume", {"action": "delete", "name": f"tmp{i}"})
            if i >= 3:
                t["vcreate"].append(sec * 1000)
                t["vdelete"].append(sec2 * 1000)
        s.tool("volume", {"action": "delete", "name": "bench"})
        s.close()
    finally:
        subprocess.run([a.mcpbox, "sandbox", "--state-dir", state, "rm", "--all"],
                       capture_output=True)
        with open("/proc/self/mounts") as f:  # volumes left mounted by a failed run (root)
            for p in [line.split()[1] for line in f if line.split()[1].startswith(base + "/")]:
                subprocess.run(["umount", "-l", p], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    print(f"rounds={a.n} uid={os.geteuid()}")
    for k, v in t.items():
        print(f"{k:13} median {statistics.median(v):8.2f} ms  min {min(v):8.2f}  "
              f"max {max(v):8.2f}  (n={len(v)})")
    print(f"create with a volume / without a mount: "
          f"{statistics.median(t['volume']) / statistics.median(t['plain']):.2f}x; "
          f"/ with a rw host mount: "
          f"{statistics.median(t['volume']) / statistics.median(t['host']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
