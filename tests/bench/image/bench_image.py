#!/usr/bin/env python3
"""OCI image benchmark (docs/benchmarks.md, "OCI images"): one ~30 MB image on a docker-registry
on loopback, side by side in one run, interleaved, page cache dropped before each cold run:

  first create   create_sandbox {"image": ...} through `mcpbox serve` (stdio) on an empty store:
                 pull + verify + unpack + start, until the reply
  skopeo+umoci   `skopeo copy docker://... oci:DIR:tag` then `umoci unpack --image DIR:tag B`
  cached create  the same create_sandbox again (layers in the store)
  host create    create_sandbox {} (image host, pool off)
(the cached and host creates come after one untimed host create: a server's second create
starts its spawner, a one-time cost that fell on the first cached create before)

usage: bench_image.py --mcpbox PATH [-n RUNS]     (run as root)
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "local",
                                "image"))
import ocitest as oci  # noqa: E402
from ocitest import d, f  # noqa: E402


def drop_caches():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as fh:
        fh.write("3\n")


def bench_layers():
    """busybox, 16 MiB of random bytes, 16 MiB of text, 2000 small files: about 35 MB unpacked,
    ~21 MB compressed (the mix of the 2026-11-26 skopeo+umoci baseline)."""
    rnd = [f(f"data/random{i}", os.urandom(1 << 20)) for i in range(16)]
    words = b" ".join(b"word%d" % (i % 5000) for i in range(200000)) + b"\n"
    text = [f(f"data/text{i}", words[:2 << 20]) for i in range(8)]
    small = [d("small")] + [f(f"small/f{i:04d}", b"x" * (100 + i % 900)) for i in range(2000)]
    return [("gzip", oci.busybox_layer()), ("gzip", [d("data")] + rnd + text + small)]


def timed(fn):
    t = time.monotonic()
    fn()
    return (time.monotonic() - t) * 1000


def create_ms(s, image):
    t = time.monotonic()
    sid = s.create(image)
    ms = (time.monotonic() - t) * 1000
    s.destroy(sid)
    return ms


def skopeo_umoci(host, ref, work):
    oci_dir = os.path.join(work, "oci")
    bundle = os.path.join(work, "bundle")
    shutil.rmtree(oci_dir, ignore_errors=True)
    shutil.rmtree(bundle, ignore_errors=True)
    subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                    f"docker://{host}/{ref}", f"oci:{oci_dir}:bench"], check=True)
    p = subprocess.run(["umoci", "unpack", "--image", f"{oci_dir}:bench", bundle],
                       capture_output=True)
    if p.returncode != 0:
        raise AssertionError(f"umoci unpack: {p.stderr.decode()[-500:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=5)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ocib-", dir="/var/tmp")
    reg = oci.Registry(work)
    try:
        reg.push_image("bench/img", "1", bench_layers())
        ref = f"{reg.host}/bench/img:1"
        size = sum(os.path.getsize(os.path.join(dp, fn))
                   for dp, _, fns in os.walk(os.path.join(reg.dir, "data")) for fn in fns)
        cold, base, cached, host = [], [], [], []
        for i in range(args.n):
            state = tempfile.mkdtemp(prefix="ocis-", dir="/var/tmp")
            s = oci.Serve(args.mcpbox, state)
            try:
                drop_caches()
                cold.append(create_ms(s, ref))
                drop_caches()
                base.append(timed(lambda: skopeo_umoci(reg.host, "bench/img:1", work)))
                # Not timed: a server's second create starts its spawner (a one-time cost of
                # the server, not of images), which otherwise fell on the first cached create.
                create_ms(s, "host")
                for _ in range(3):
                    cached.append(create_ms(s, ref))
                    host.append(create_ms(s, "host"))
            finally:
                s.close()
                shutil.rmtree(state, ignore_errors=True)
        med = statistics.median
        print(f"image: 2 layers, {size / 1e6:.1f} MB in the registry (blobs+manifests), "
              f"{args.n} rounds, medians (min-max); creates timed until the reply, destroys not timed")
        print("| what | ms |")
        print("|---|---|")
        for name, v in (("first create (pull+unpack+start), mcpbox", cold),
                        ("skopeo copy + umoci unpack", base),
                        ("cached create, mcpbox", cached), ("create from host, mcpbox", host)):
            print(f"| {name} | {med(v):.0f} ({min(v):.0f}-{max(v):.0f}) |")
        print(f"\nfirst create / skopeo+umoci: {med(cold) / med(base):.2f}x (goal: below 1)")
        print(f"cached create / host create: {med(cached) / med(host):.2f}x (goal: within 1.5x)")
    finally:
        reg.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
