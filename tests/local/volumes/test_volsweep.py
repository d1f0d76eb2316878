#!/usr/bin/env python3
"""What a crash leaves of named volumes (volquota): at the server's start, a volume directory no
record names (older than 10 minutes: a create in another process takes milliseconds) is removed,
a younger one is left, a record whose directory is gone is reported and kept, and a directory a
record names is never touched. Runs as root and, through tests/local/rootless, as a user.

usage: test_volsweep.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_volumes import MIB, Serve, vol, volume_dirs  # noqa: E402

SKIP = 77


def orphan(state, vid, age_s):
    """A volume directory as a crash between its files and its record leaves it."""
    vdir = os.path.join(state, "volumes", vid)
    os.makedirs(os.path.join(vdir, "mnt", "data"))
    with open(os.path.join(vdir, "mnt", "data", "left"), "w") as f:
        f.write("left behind\n")
    then = time.time() - age_s
    os.utime(vdir, (then, then))
    return vdir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="mcpbox-volsweep-")
    state = os.path.join(base, "state")
    try:
        s = Serve(args.mcpbox, state)
        err, out, text = s.tool("create_sandbox")
        if err:
            print(f"SKIP: local sandboxes cannot run here: {text}")
            s.close()
            return SKIP
        s.ok("destroy_sandbox", sandbox_id=out["sandbox_id"])
        s.volume("create", name="kept", size_bytes=32 * MIB)
        a = s.create(vol("kept", "/data/v", "rw"))
        s.sh(a, "echo mine > /data/v/f")
        s.ok("destroy_sandbox", sandbox_id=a)
        s.volume("create", name="lost", size_bytes=32 * MIB)
        s.close()
        kept = {d for d in volume_dirs(state)}
        # the newest directory is "lost": remove its files, as a disk failure or a hand would
        lost_id = max(kept, key=lambda d: os.stat(os.path.join(state, "volumes", d)).st_ctime)
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", os.path.join(state, "volumes", lost_id, "mnt")])
        shutil.rmtree(os.path.join(state, "volumes", lost_id))
        old = orphan(state, "vol-0rphan01", 3600)
        young = orphan(state, "vol-0rphan02", 5)
        log = os.path.join(base, "serve.log")
        with open(log, "w") as errf:
            p = subprocess.run([args.mcpbox, "volume", "--state-dir", state, "ls"],
                               stderr=errf, stdout=subprocess.PIPE, text=True, timeout=60)
        text = open(log).read()
        assert not os.path.exists(old), "an old directory without a record was left"
        assert os.path.exists(young), "a young directory (a create under way?) was removed"
        assert "lost" in text and "no directory" in text, text
        assert "kept" in p.stdout and "lost" in p.stdout, p.stdout  # records kept
        s2 = Serve(args.mcpbox, state)
        b = s2.create(vol("kept", "/data/v", "ro"))
        assert s2.sh(b, "cat /data/v/f")[1] == "mine\n", "the recorded volume was touched"
        s2.ok("destroy_sandbox", sandbox_id=b)
        s2.volume("delete", name="kept")
        s2.volume("delete", name="lost")
        s2.close()
        print("sweep: old orphan removed, young one left, lost record reported and kept, "
              "recorded volume intact")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
