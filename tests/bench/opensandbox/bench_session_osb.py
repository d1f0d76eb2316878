#!/usr/bin/env python3
"""A command in an MCP session on an osb- sandbox beside a run_command of the same command,
through MCP over stdio as an agent pays for them (issue 35), before and after sessions map onto
execd's sessions, in one sitting. The remote is a local-backend `mcpbox serve --http
--opensandbox-api`; each front is `mcpbox serve` (stdio) with the opensandbox backend pointed at
it, one sandbox each. Rows, N calls each, interleaved round-robin across both fronts so that the
machine's drift falls on every row alike:

  run_command CMD                 the floor: one POST /command
  run_command CMD, session        after: one POST /session/{id}/run (execd's session);
                                  before (--before PATH): the helper scripts over /command

CMD is `true` and `cd /tmp && echo hi`. Prints a Markdown table (p50/p90/p99 in ms, p50 against
the same front's floor). --smoke: a few calls each, only checks that every row completes.
usage: bench_session_osb.py --mcpbox PATH [--before PATH] [-n N] [--smoke]
"""
import argparse
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mcp_stdio import StdioServer  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def start_remote(mcpbox, state, key):
    log = open(os.path.join(state, "remote.log"), "w+")
    proc = subprocess.Popen([mcpbox, "serve", "--http", "127.0.0.1:0", "--opensandbox-api",
                             "--state-dir", os.path.join(state, "remote"), "--local-pool", "0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                            env={**os.environ, "MCPBOX_OPENSANDBOX_API_KEY": key})
    end = time.time() + 30
    while time.time() < end:
        log.seek(0)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", log.read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit("the remote mcpbox did not start; see " + log.name)


def front(mcpbox, state, name, port, key):
    env = {**os.environ, "OPEN_SANDBOX_DOMAIN": f"127.0.0.1:{port}", "OPEN_SANDBOX_API_KEY": key,
           "OPEN_SANDBOX_REQUEST_TIMEOUT": "30"}
    s = StdioServer([mcpbox, "serve", "--state-dir", os.path.join(state, name)], cwd="/", env=env)
    _, r = s.tool("create_sandbox", {"backend": "opensandbox", "image": "host"})
    return s, r["structuredContent"]["sandbox_id"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--before", help="an mcpbox built before the change (helper-script sessions)")
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    n = 5 if a.smoke else a.n
    key = "bench-" + secrets.token_hex(8)
    state = tempfile.mkdtemp(prefix="mbx-bsessosb-", dir="/tmp")
    remote, port = start_remote(os.path.abspath(a.mcpbox), state, key)
    fronts = [("after", os.path.abspath(a.mcpbox))]
    if a.before:
        fronts.append(("before", os.path.abspath(a.before)))
    servers, rows, calls = [], {}, []
    try:
        for name, binary in fronts:
            s, sid = front(binary, state, name, port, key)
            servers.append((s, sid))
            for cmd in ("true", "cd /tmp && echo hi"):
                calls.append((f"{name}: run_command `{cmd}` (floor)", s,
                              {"sandbox_id": sid, "command": cmd}))
                calls.append((f"{name}: run_command `{cmd}`, session", s,
                              {"sandbox_id": sid, "command": cmd, "session": "bench"}))
        for _, s, args in calls:  # warm: the sessions exist, the endpoints are cached
            s.tool("run_command", args)
        for _ in range(n):
            for label, s, args in calls:
                rows.setdefault(label, []).append(s.tool("run_command", args)[0] * 1000)
    finally:
        for s, sid in servers:
            s.tool("destroy_sandbox", {"sandbox_id": sid})
            s.close()
        remote.terminate()
        remote.wait()
        shutil.rmtree(state, ignore_errors=True)
    print(f"| front, mode ({n} calls each) | p50 ms | p90 ms | p99 ms | p50 / run_command |")
    print("| --- | --- | --- | --- | --- |")
    for label, v in rows.items():
        floor = rows[label.replace(", session", " (floor)")]
        ratio = "" if "(floor)" in label else f"{statistics.median(v) / statistics.median(floor):.2f}x"
        print(f"| {label} | {pct(v, 50):.2f} | {pct(v, 90):.2f} | {pct(v, 99):.2f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
