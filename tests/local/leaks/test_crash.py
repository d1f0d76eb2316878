#!/usr/bin/env python3
"""Crash safety: `kill -9` of `mcpbox sandbox create` at many points, then a new mcpbox process
reconciles. A sandbox that was already running before must survive untouched; every sandbox the
killed processes had started is either fully alive (listed, running, usable) or fully gone (no
record, slot, directory, cgroup or process). The host mount table is unchanged. Exits 77 where
local sandboxes cannot run."""
import argparse
import glob
import json
import os
import random
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcpbox_cli import Cli, runtime_left, sandbox_runtime_dir, text  # noqa: E402

KILL_DELAYS_MS = (0, 5, 10, 20, 40, 60, 90, 130, 180, 250)
EXIT_GRACE_S = 3.0


def db_ids(state_dir):
    con = sqlite3.connect(os.path.join(state_dir, "mcpbox.db"), timeout=10)
    try:
        ids = {r[0] for r in con.execute("SELECT id FROM sandboxes")}
        slots = {r[0] for r in con.execute("SELECT sandbox_id FROM slots")}
    finally:
        con.close()
    return ids, slots


def cgroup_dirs(sid):
    pats = ["/sys/fs/cgroup/*/mcpbox/" + sid, "/sys/fs/cgroup/*/*/*/mcpbox/" + sid,
            "/sys/fs/cgroup/mcpbox/" + sid]
    return [d for p in pats for d in glob.glob(p)]


def processes_of(sid):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                if sid in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def holders_of(state_dir):
    """Processes (other than this test) with a descriptor into the state directory: whatever a
    killed mcpbox left running, such as a half-set-up sandbox child."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(state_dir + "/"):
                    found.append(pid)
                    break
        except OSError:
            pass
    return found


def mountinfo():
    with open("/proc/self/mountinfo") as f:
        return sorted(" ".join(l.split()[3:5]) for l in f)


def kill_mid_create(cli, delay_ms):
    cmd = [cli.mcpbox, "sandbox", "--state-dir", cli.state_dir, "create", "-q"]
    # No pipes: a process the killed mcpbox left behind could hold them open forever.
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay_ms / 1000.0)
    p.kill()
    p.wait(timeout=30)


def wait_processes_gone(sid):
    """SIGKILLed processes of a sandbox that is no child of ours exit a moment later."""
    deadline = time.monotonic() + EXIT_GRACE_S
    while processes_of(sid) and time.monotonic() < deadline:
        time.sleep(0.05)


def check_gone(cli, sid, ids, slots):
    assert sid not in ids, f"{sid}: record kept but not listed"
    assert sid not in slots, f"{sid}: uid slot leaked"
    assert not os.path.exists(os.path.join(cli.state_dir, "sandboxes", sid)), f"{sid}: dir leaked"
    assert not sandbox_runtime_dir(cli.state_dir, sid), f"{sid}: runtime dir leaked"
    assert not cgroup_dirs(sid), f"{sid}: cgroups leaked: {cgroup_dirs(sid)}"
    wait_processes_gone(sid)
    assert not processes_of(sid), f"{sid}: processes leaked: {processes_of(sid)}"


def kill_holders(state_dir):
    """After a failure: end what the killed creates left behind (all descendants of this
    test), so a failing run does not leave sandboxes running."""
    for pid in holders_of(state_dir):
        try:
            os.kill(int(pid), 9)
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--rounds", type=int, default=len(KILL_DELAYS_MS))
    args = ap.parse_args()
    before_mounts = mountinfo()
    cli = Cli(args.mcpbox)
    try:
        return run(args, cli, before_mounts)
    finally:
        state_dir = cli.state_dir
        cli.close()
        kill_holders(state_dir)


def kill_and_reconcile(args, cli):
    """Kills creates at many points, then lets a new mcpbox process reconcile. Returns the ids
    the killed creates had recorded and what `ls` lists afterwards."""
    started = set()
    for i in range(args.rounds):
        kill_mid_create(cli, KILL_DELAYS_MS[i % len(KILL_DELAYS_MS)] + random.randint(0, 5))
        started |= db_ids(cli.state_dir)[0]
    print(f"{args.rounds} creates killed; {len(started)} had written a record")
    ls = cli.run("ls", "-o", "json", check=True)  # a new process: reconcile
    listed = {s["sandbox_id"]: s["state"] for s in json.loads(ls.stdout)["sandboxes"]}
    return started, listed


def check_reconciled(cli, started, listed):
    ids, slots = db_ids(cli.state_dir)
    alive = 0
    for sid in started:
        if sid in listed:
            assert listed[sid] == "running", f"{sid} kept in state {listed[sid]}"
            assert cli.exec(sid, "true").returncode == 0, f"{sid} listed but unusable"
            alive += 1
        else:
            check_gone(cli, sid, ids, slots)
    print(f"after reconcile: {alive} complete sandboxes kept, {len(started) - alive} cleaned")


def check_nothing_left(state_dir, all_ids, before_mounts):
    """After every sandbox was destroyed. A sandbox whose creator was killed is no child of the
    rm process, which can kill it but not reap it: its processes get a moment to exit."""
    deadline = time.monotonic() + EXIT_GRACE_S
    while holders_of(state_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = holders_of(state_dir)
    assert not left, "processes left holding the state directory open: " + ", ".join(
        f"{p} ({open(f'/proc/{p}/cmdline').read().replace(chr(0), ' ').strip()})" for p in left)
    for sid in all_ids:
        assert not cgroup_dirs(sid), f"{sid}: cgroups left after rm: {cgroup_dirs(sid)}"
        wait_processes_gone(sid)
        assert not processes_of(sid), f"{sid}: processes left after rm: {processes_of(sid)}"
    left = runtime_left(state_dir)
    assert not left, f"left in the runtime directory: {left}"
    assert mountinfo() == before_mounts, "host mount table changed"


def run(args, cli, before_mounts):
    survivor = cli.create()
    assert cli.exec(survivor, "echo 1 > /tmp/mark").returncode == 0
    started, listed = kill_and_reconcile(args, cli)
    started.discard(survivor)
    assert listed.get(survivor) == "running", listed
    p = cli.exec(survivor, "cat /tmp/mark")
    assert p.returncode == 0 and p.stdout == b"1\n", (p.returncode, text(p.stderr))
    check_reconciled(cli, started, listed)
    cli.close()  # destroys every listed sandbox
    check_nothing_left(cli.state_dir, set(listed) | started, before_mounts)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
