#!/usr/bin/env python3
"""A snapshot's push to an OCI registry as an agent pays for it (issue 36): each tools/call
timed on the client's clock through `mcpbox serve` over stdio (pool off), against Debian's
docker-registry on loopback, beside its floor in the same run.

  snapshot_sandbox push of a snapshot holding --mb MB of random bytes, to a new repository
      (every blob uploaded)
      floor: the same layer file uploaded straight to the registry from this script (POST, then
      one PUT with the digest: the registry's own cost of taking the bytes)
  the same push to a new tag of a repository that has it (HEAD finds every blob)
  create_sandbox {image: REF} of the pushed image (cached after the first: the restore)

Prints medians (min-max); the figures go to docs/benchmarks.md.
usage: bench_snapshot_push.py --mcpbox PATH [-n ROUNDS] [--mb MB]
"""
import argparse
import hashlib
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "local", "image"))
import ocitest  # noqa: E402 (the loopback registry; sets MCPBOX_REGISTRIES=127.0.0.1)

# tests/bench/mcp_stdio.py, by path: ocitest brought tests/local/lib's module of the same name
_spec = importlib.util.spec_from_file_location("bench_mcp_stdio",
                                               os.path.join(HERE, "..", "mcp_stdio.py"))
_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bench)
StdioServer = _bench.StdioServer


def line(name, xs):
    xs = sorted(xs)
    print(f"| {name} | {statistics.median(xs):.1f} ({xs[0]:.1f}-{xs[-1]:.1f}) |")


def call(mcp, name, **args):
    s, res = mcp.tool(name, args)
    assert not res.get("isError"), res
    return s * 1000, res["structuredContent"]


def floor_upload(reg, repo, path):
    data = open(path, "rb").read()
    dg = "sha256:" + hashlib.sha256(data).hexdigest()  # the push hashes nothing: digest known
    t0 = time.monotonic()
    r, _ = reg._req("POST", f"/v2/{repo}/blobs/uploads/")
    loc = r.getheader("Location")
    loc = loc.split(reg.host, 1)[-1] if loc.startswith("http") else loc
    r, _ = reg._req("PUT", f"{loc}{'&' if '?' in loc else '?'}digest={dg}", data,
                    {"Content-Type": "application/octet-stream"})
    assert r.status == 201, r.status
    return (time.monotonic() - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=7)
    ap.add_argument("--mb", type=int, default=100)
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="mbx-bench-push-", dir="/tmp")
    state = os.path.join(base, "state")
    reg = ocitest.Registry(base)
    r = {k: [] for k in ("push", "floor", "again", "create")}
    try:
        mcp = StdioServer([a.mcpbox, "serve", "--state-dir", state, "--local-pool", "0"],
                          client="bench-push", stderr=subprocess.DEVNULL, cwd="/")
        _, sb = call(mcp, "create_sandbox", memory="2g", disk="1g")
        call(mcp, "run_command", sandbox_id=sb["sandbox_id"],
             command=f"head -c {a.mb}M /dev/urandom > /workspace/big")
        _, snap = call(mcp, "snapshot_sandbox", action="create", sandbox_id=sb["sandbox_id"])
        layer = os.path.join(state, "image-store", "blobs", "sha256", snap["layer"][7:])
        for i in range(a.n):
            ref = f"{reg.host}/bench/p{i}:v1"
            t, out = call(mcp, "snapshot_sandbox", action="push",
                          snapshot_id=snap["snapshot_id"], reference=ref)
            assert out["blobs_uploaded"] == 2, out
            r["push"].append(t)
            r["floor"].append(floor_upload(reg, f"bench/f{i}", layer))
            t, out = call(mcp, "snapshot_sandbox", action="push",
                          snapshot_id=snap["snapshot_id"], reference=f"{reg.host}/bench/p{i}:v2")
            assert out["blobs_uploaded"] == 0, out
            r["again"].append(t)
            t, out = call(mcp, "create_sandbox", image=ref, memory="2g", disk="1g")
            r["create"].append(t)
            call(mcp, "destroy_sandbox", sandbox_id=out["sandbox_id"])
        print(f"| what ({a.mb} MB snapshot, {a.n} rounds) | ms |\n|---|---|")
        line("snapshot_sandbox push (every blob uploaded)", r["push"])
        line("floor: the layer POSTed and PUT straight to the registry", r["floor"])
        line("snapshot_sandbox push again (every blob there)", r["again"])
        line("create_sandbox {image} of the pushed image (cached: the restore)", r["create"])
        mcp.close()
    finally:
        subprocess.run([a.mcpbox, "sandbox", "--state-dir", state, "rm", "--all"],
                       capture_output=True)
        reg.close()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
