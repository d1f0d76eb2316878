#!/usr/bin/env python3
"""Whose named volumes are whose (issue 36), through the real server over loopback HTTP, where
the kernel names each connecting user: root serves, nobody and root each make a volume called
"data". Neither sees, inspects, mounts or deletes the other's (another owner's volume is
reported exactly like a missing one); what each sandbox writes stays in its owner's volume and,
on the host, belongs to that owner. As root only (it needs two users).

usage: test_volumes_owners.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_http import as_user, run_calls, start_server  # noqa: E402

SKIP = 77
NOBODY = (65534, 65534)


def ok(res):
    assert not res[0], f"refused: {res[2]}"
    return res[1]


def refused(res, *words):
    assert res[0], f"accepted: {res}"
    for w in words:
        assert w in res[2], f"{w!r} not in {res[2]!r}"


def check(port, state):
    mount = {"mounts": [{"volume": "data", "target": "/data/d", "mode": "rw"}]}
    r = as_user(*NOBODY, port, [
        ["volume", {"action": "create", "name": "data", "size_bytes": 32 << 20}],
        ["create_sandbox", mount],
        ["run_command", {"sandbox_id": "$SID", "command": "echo nobody > /data/d/who"}],
        ["volume", {"action": "list"}],
    ])
    ok(r[0]), ok(r[1])
    assert ok(r[2])["exit_code"] == 0, r[2]
    assert [v["name"] for v in ok(r[3])["volumes"]] == ["data"]

    r = run_calls(port, [
        ["volume", {"action": "list"}],
        ["volume", {"action": "inspect", "name": "data"}],
        ["create_sandbox", mount],
        ["volume", {"action": "delete", "name": "data"}],
        ["volume", {"action": "create", "name": "data", "size_bytes": 32 << 20}],
        ["create_sandbox", mount],
        ["run_command", {"sandbox_id": "$SID", "command": "cat /data/d/who; echo root > /data/d/who"}],
    ])
    assert ok(r[0])["volumes"] == [], f"root sees nobody's volume: {r[0]}"
    refused(r[1], "no volume called data")
    refused(r[2], "no volume called data")
    refused(r[3], "no volume called data")
    ok(r[4]), ok(r[5])
    assert ok(r[6])["stdout"] == "", f"root's volume held nobody's file: {r[6]}"

    r = as_user(*NOBODY, port, [
        ["create_sandbox", mount],
        ["run_command", {"sandbox_id": "$SID", "command": "cat /data/d/who"}],
        ["volume", {"action": "inspect", "name": "data"}],
        ["volume", {"action": "delete", "name": "data"}],
    ])
    assert ok(r[1])["stdout"] == "nobody\n", f"nobody's volume changed: {r[1]}"
    assert ok(r[2])["used_by"] != [], r[2]  # its sandbox is still there while it runs
    refused(r[3], "in use by")
    owners = sorted(os.stat(p).st_uid for p in glob.glob(f"{state}/volumes/*/mnt/data/who"))
    assert owners == [0, NOBODY[0]], f"owners on the host: {owners}"
    r = as_user(*NOBODY, port, [["volume", {"action": "delete", "name": "data"}]])
    ok(r[0])
    ok(run_calls(port, [["volume", {"action": "delete", "name": "data"}]])[0])
    assert glob.glob(f"{state}/volumes/*") == [], "a volume's files stayed"
    print("owners: nobody's and root's volumes of one name are invisible to each other; files "
          "belong to their owners on the host")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root (two local users over loopback HTTP)")
        return SKIP
    base = tempfile.mkdtemp(prefix="mbx-volown-", dir="/tmp")
    os.chmod(base, 0o755)
    state = os.path.join(base, "state")
    proc, port = start_server(os.path.abspath(a.mcpbox), state, [], os.path.join(base, "log"))
    try:
        r = run_calls(port, [["create_sandbox", {}]])
        if r[0][0] and "unsupported" in r[0][2].lower():
            print(f"SKIP: {r[0][2]}")
            return SKIP
        check(port, state)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        subprocess.run([a.mcpbox, "sandbox", "--state-dir", state, "rm", "--all"],
                       capture_output=True)
        with open("/proc/self/mounts") as f:
            for p in [line.split()[1] for line in f]:
                if p.startswith(base + "/"):
                    subprocess.run(["umount", "-l", p], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
