#!/usr/bin/env python3
"""The local pool through the real server: `mcpbox serve` over stdio, create_sandbox three times
(the pool starts with the second create; the third, after a pause, comes from it), then the
client goes away (stdin closed) and the server exits: no pooled sandbox, record, directory,
cgroup or process may remain. Then the same with kill -9 instead of a clean exit, and a
`mcpbox sandbox ls` as the restart that reconciles (it must also remove the cgroup sets the
spawner threads had prepared). Then destroy_sandbox followed at once by kill -9: the next start
reaps the release the kill cut short. Last, a spawner's prepared cgroups swept
away under a live server (as another mcpbox's start-up sweep does) must not fail a create.

usage: test_pool_serve.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import glob
import os
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcpbox_cli import Cli, runtime_left, skip  # noqa: E402
from mcp_stdio import Client, serve_argv  # noqa: E402

TIMEOUT = 60
POOL = 2


class Serve(Client):
    def __init__(self, mcpbox, state, pool=POOL):
        super().__init__(serve_argv(mcpbox, state, "--local-pool", pool),
                         stderr=subprocess.DEVNULL)
        self.initialize("pool-test")

    def create(self):
        res = self.call("tools/call", {"name": "create_sandbox", "arguments": {}})
        assert not res.get("isError"), f"create_sandbox: {res}"
        return res["structuredContent"]["sandbox_id"]


def db_rows(state, sql):
    con = sqlite3.connect(os.path.join(state, "mcpbox.db"))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def wait_pooled(state, n):
    end = time.time() + TIMEOUT
    while time.time() < end:
        if db_rows(state, "SELECT COUNT(*) FROM sandboxes s WHERE state = 'pooled' AND EXISTS "
                          "(SELECT 1 FROM events e WHERE e.sandbox_id = s.id AND "
                          "e.kind = 'pooled')")[0][0] == n:
            return
        time.sleep(0.02)
    raise AssertionError(f"the pool did not reach {n}")


def cgroups_of(sid):
    return (glob.glob(f"/sys/fs/cgroup/*/mcpbox/{sid}") +
            glob.glob(f"/sys/fs/cgroup/*/*/*/mcpbox/{sid}") +
            glob.glob(f"/sys/fs/cgroup/mcpbox/{sid}"))


def leftovers(state):
    """Everything of any sandbox this state directory has seen that still exists."""
    ids = [r[0] for r in db_rows(state, "SELECT DISTINCT sandbox_id FROM events")]
    left = [f"record {r[0]} ({r[1]})" for r in db_rows(state, "SELECT id, state FROM sandboxes")]
    left += [f"dir {d}" for d in os.listdir(os.path.join(state, "sandboxes"))]
    left += [f"runtime {d}" for d in runtime_left(state)]
    for sid in ids:
        left += [f"cgroup {c}" for c in cgroups_of(sid)]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                cg = f.read()
        except OSError:
            continue
        left += [f"process {pid} of {sid}" for sid in ids if sid in cg]
    return ids, left


def wait_nothing_left(state):
    end = time.time() + 10
    while True:
        ids, left = leftovers(state)
        if not left or time.time() > end:
            return ids, left
        time.sleep(0.1)


def session(mcpbox, state):
    """Three creates; the third must come from the pool. Returns the server and its ids."""
    srv = Serve(mcpbox, state)
    ids = [srv.create(), srv.create()]
    wait_pooled(state, POOL)
    ids.append(srv.create())
    end = time.time() + 10
    while True:  # the created event is written just after the reply
        pooled = db_rows(state, "SELECT json_extract(data, '$.pooled') FROM events WHERE "
                                f"kind = 'created' AND sandbox_id = '{ids[2]}'")
        if pooled or time.time() > end:
            break
        time.sleep(0.02)
    assert pooled == [(1,)], f"the third create was not pooled: {pooled}"
    wait_pooled(state, POOL)  # refilled after the pause
    for sid in ids:
        srv.call("tools/call", {"name": "destroy_sandbox", "arguments": {"sandbox_id": sid}})
    return srv


def run(mcpbox, state, servers):
    # 1. A clean exit: the client closes stdin.
    srv = session(mcpbox, state)
    servers.append(srv)
    srv.proc.stdin.close()
    assert srv.proc.wait(timeout=TIMEOUT) == 0, "serve did not exit cleanly"
    ids, left = wait_nothing_left(state)
    assert not left, "left after a clean exit:\n  " + "\n  ".join(left)
    print(f"clean exit: {len(ids)} sandboxes seen, nothing left")
    # 2. kill -9, then a restart (the CLI's ls reconciles).
    srv = session(mcpbox, state)
    servers.append(srv)
    prepared = prepared_sets(srv.proc.pid)  # hybrid hosts: the spawner threads' next sets
    srv.proc.kill()
    srv.proc.wait()
    p = subprocess.run([mcpbox, "sandbox", "--state-dir", state, "ls"], capture_output=True,
                       timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    ids, left = wait_nothing_left(state)
    assert not left, "left after kill -9 and a restart:\n  " + "\n  ".join(left)
    left = [c for sid in prepared for c in cgroups_of(sid)]
    assert not left, "prepared cgroup sets left after kill -9 and a restart:\n  " + \
        "\n  ".join(left)
    # (a destroyed sandbox whose release the kill cut short is reaped too: not counted here)
    reaped = db_rows(state, "SELECT COUNT(*) FROM events WHERE kind = 'reaped' AND "
                            "json_extract(data, '$.previous_state') = 'pooled'")[0][0]
    assert reaped == POOL, f"expected {POOL} reaped pooled sandboxes, got {reaped}"
    print(f"kill -9 + restart: {len(ids)} sandboxes seen, {reaped} pooled ones reaped, "
          f"{len(prepared)} prepared cgroup sets removed, nothing left")


def destroy_then_kill(mcpbox, state, servers):
    """destroy_sandbox answers before the sandbox is released (the record is marked destroyed,
    the init's exit and the release follow): kill -9 the server as soon as the answer arrives,
    and the next start must reap what the release had not done yet. Repeated until a kill
    caught a release unfinished at least twice (it nearly always does)."""
    caught, tries = 0, 0
    while caught < 2 and tries < 10:
        tries += 1
        srv = Serve(mcpbox, state, pool=0)
        servers.append(srv)
        sid = srv.create()
        res = srv.call("tools/call", {"name": "run_command", "arguments": {
            "sandbox_id": sid, "command": "sleep 600 >/dev/null 2>&1 &"}})
        assert not res.get("isError"), res
        res = srv.call("tools/call", {"name": "destroy_sandbox", "arguments": {"sandbox_id": sid}})
        srv.proc.kill()
        srv.proc.wait()
        assert res["structuredContent"]["destroyed"] is True, res
        rows = db_rows(state, f"SELECT state FROM sandboxes WHERE id = '{sid}'")
        assert rows in ([], [("destroyed",)]), f"after destroy and kill -9: {rows}"
        caught += rows == [("destroyed",)]
        p = subprocess.run([mcpbox, "sandbox", "--state-dir", state, "ls", "-o", "json"],
                           capture_output=True, timeout=TIMEOUT)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        assert sid not in p.stdout.decode(), f"{sid} listed after its destroy"
        ids, left = wait_nothing_left(state)
        assert not left, "left after destroy, kill -9 and a restart:\n  " + "\n  ".join(left)
    assert caught >= 2, f"only {caught} of {tries} kills came before the release finished"
    reaped = db_rows(state, "SELECT COUNT(*) FROM events WHERE kind = 'reaped' AND "
                            "json_extract(data, '$.previous_state') = 'destroyed'")[0][0]
    assert reaped >= caught, f"{caught} releases cut short, {reaped} reaped"
    print(f"destroy then kill -9 at once: {caught} of {tries} releases cut short, all reaped by "
          "the next start, nothing left")


def prepared_sets(pid):
    """Ids of the cgroup sets a server's spawner threads have prepared (hybrid hosts): each such
    thread sits in the v1 memory cgroup <parent>/mcpbox/sbx-... of the next sandbox."""
    ids = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/cgroup") as f:
                for line in f:
                    if ":memory:" in line and "/mcpbox/sbx-" in line:
                        ids.add(line.strip().rsplit("/", 1)[1])
        except OSError:
            continue
    return ids


def swept_prepared_sets(mcpbox, state, servers):
    """Another mcpbox's start-up sweep removes empty sandbox cgroups older than a minute. A
    prepared set's v2 cgroup is empty while it waits: with it removed (as that sweep would),
    the next creates must still work, and leave nothing behind."""
    srv = Serve(mcpbox, state, pool=0)
    servers.append(srv)
    ids = [srv.create(), srv.create()]  # spawner threads start with the second create
    end, prepared = time.time() + 10, set()
    while not prepared and time.time() < end:
        time.sleep(0.1)
        prepared = prepared_sets(srv.proc.pid) - set(ids)
    if not prepared:
        print("# no spawner-prepared cgroup sets here (not a hybrid host): sweep case skipped")
    removed = []
    for sid in prepared:
        for d in glob.glob(f"/sys/fs/cgroup/unified/mcpbox/{sid}"):
            os.rmdir(d)
            removed.append(d)
    ids += [srv.create() for _ in range(3)]
    for sid in ids:
        res = srv.call("tools/call", {"name": "run_command",
                                      "arguments": {"sandbox_id": sid, "command": "true"}})
        assert not res.get("isError") and res["structuredContent"]["exit_code"] == 0, res
        srv.call("tools/call", {"name": "destroy_sandbox", "arguments": {"sandbox_id": sid}})
    srv.proc.stdin.close()
    assert srv.proc.wait(timeout=TIMEOUT) == 0, "serve did not exit cleanly"
    seen, left = wait_nothing_left(state)
    assert not left, "left after the swept sets:\n  " + "\n  ".join(left)
    print(f"prepared sets swept under a live server ({len(removed)} v2 cgroups removed): "
          f"{len(ids)} creates worked, nothing left")


def bad_values_refused(mcpbox):
    """A bad --local-pool stops serve with status 2 and a message naming the option."""
    for bad in ("-1", "65", "abc", ""):
        p = subprocess.run([mcpbox, "serve", "--local-pool", bad], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=TIMEOUT)
        err = p.stderr.decode(errors="replace")
        assert p.returncode == 2 and "--local-pool" in err, \
            f"--local-pool {bad!r}: exit {p.returncode}, {err!r}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    args = ap.parse_args()
    servers = []
    with Cli(args.mcpbox) as cli:  # its close destroys whatever a failure leaves, then the dir
        try:
            bad_values_refused(args.mcpbox)
            cli.rm(cli.create())  # skips (77) where sandboxes cannot run
            run(args.mcpbox, cli.state_dir, servers)
            destroy_then_kill(args.mcpbox, cli.state_dir, servers)
            swept_prepared_sets(args.mcpbox, cli.state_dir, servers)
        finally:
            for srv in servers:  # a failed check may leave a server running
                if srv.proc.poll() is None:
                    srv.proc.kill()
                    srv.proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
