#!/usr/bin/env python3
"""Shell sessions and terminals beside their floors, in one run, through MCP over stdio as an agent
pays for them (issue 35). Rows, each N calls on one live local sandbox, interleaved round-robin so
that the machine's drift falls on every row alike:

  run_command CMD                 the floor: a fresh /bin/sh per call, what an agent pays today
  run_command CMD, session        the same command in a live session (bash keeps its state)
  terminal read                   one read of a terminal's new output (nothing new)
  terminal send 1 key             a key and its echo: the call returns once the output settles
  terminal send, quiet_ms 0       a key until its echo is back through MCP (the call returns at
                                  the first unread output)
  terminal send + read            a key, then a read: what an agent pays for a keystroke and a look
  exec -it keystroke echo         mcpbox sandbox exec -it on a pty: a byte typed until its echo
                                  is back on the person's terminal (the proc primitive's path)

CMD is `true` and `cd /tmp && echo hi`. Prints a Markdown table (p50/p90/p99 in ms and p50 against
the floor). --smoke: a few calls each, only checks that every row completes.
usage: bench_session.py --mcpbox PATH [-n N] [--smoke]
"""
import argparse
import os
import pty
import select
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mcp_stdio import StdioServer  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def echo_times(mcpbox, state, sid, n):
    """Seconds from a byte written to the CLI's terminal until its echo comes back."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(mcpbox, [mcpbox, "sandbox", "--state-dir", state, "exec", "-it", sid, "--",
                          "cat"])
    seen, times = b"", []

    def until(needle, deadline):
        nonlocal seen
        while needle not in seen:
            r, _, _ = select.select([fd], [], [], max(0, deadline - time.time()))
            assert r, f"no echo of {needle!r}: {seen[-200:]!r}"
            seen += os.read(fd, 4096)
        seen = seen[seen.index(needle) + len(needle):]
    os.write(fd, b"ready\r")
    time.sleep(1)  # the CLI's raw mode, the local echo and cat's copy are in; drop them
    while select.select([fd], [], [], 0.2)[0]:
        os.read(fd, 4096)
    for i in range(n):
        key = b"abcdefghij"[i % 10:i % 10 + 1]
        t0 = time.perf_counter()
        os.write(fd, key)
        until(key, time.time() + 10)
        times.append(time.perf_counter() - t0)
    os.write(fd, b"\r")
    until(b"\r\n", time.time() + 10)
    os.write(fd, b"\x04")  # end of input at a line's start: cat ends, and the CLI with it
    os.waitpid(pid, 0)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    n = 5 if a.smoke else a.n
    mcpbox = os.path.abspath(a.mcpbox)
    state = tempfile.mkdtemp(prefix="mbx-bsess-", dir="/tmp")
    s = StdioServer([mcpbox, "serve", "--state-dir", state, "--local-pool", "0"], cwd="/")
    _, r = s.tool("create_sandbox", {})
    sid = r["structuredContent"]["sandbox_id"]
    try:
        _, t = s.tool("terminal", {"sandbox_id": sid, "action": "start", "command": "cat"})
        tid = t["structuredContent"]["terminal_id"]
        rows = {}
        calls = []
        for cmd in ("true", "cd /tmp && echo hi"):
            calls.append((f"run_command `{cmd}` (floor)", "run_command",
                          {"sandbox_id": sid, "command": cmd}))
            calls.append((f"run_command `{cmd}`, session", "run_command",
                          {"sandbox_id": sid, "command": cmd, "session": "bench"}))
        calls.append(("terminal read (nothing new)", "terminal",
                      {"sandbox_id": sid, "action": "read", "terminal_id": tid}))
        calls.append(("terminal send 1 key (returns when the output settles)", "terminal",
                      {"sandbox_id": sid, "action": "send", "terminal_id": tid, "input": "k"}))
        echo = {"sandbox_id": sid, "action": "send", "terminal_id": tid, "input": "e",
                "quiet_ms": 0}
        _, r = s.tool("terminal", echo)
        if not r.get("isError"):  # a build without quiet_ms refuses the argument
            calls.append(("terminal send 1 key, quiet_ms 0 (until its echo is back)", "terminal",
                          echo))
        calls.append(("terminal send 1 key + read (two calls)", "pair",
                      [("terminal", {"sandbox_id": sid, "action": "send", "terminal_id": tid,
                                     "input": "p"}),
                       ("terminal", {"sandbox_id": sid, "action": "read", "terminal_id": tid})]))
        for _, tool, args in calls[:3]:  # warm the session and the cache
            s.tool(tool, args)
        for _ in range(n):
            for label, tool, args in calls:
                secs = sum(s.tool(t, a)[0] for t, a in (args if tool == "pair" else [(tool, args)]))
                rows.setdefault(label, []).append(secs * 1000)
        rows["exec -it keystroke echo (CLI on a pty, `cat`)"] = [
            x * 1000 for x in echo_times(mcpbox, state, sid, n)]
        s.tool("terminal", {"sandbox_id": sid, "action": "close", "terminal_id": tid})
    finally:
        s.tool("destroy_sandbox", {"sandbox_id": sid})
        s.close()
        shutil.rmtree(state, ignore_errors=True)
    floor = {"true": statistics.median(rows["run_command `true` (floor)"]),
             "cd": statistics.median(rows["run_command `cd /tmp && echo hi` (floor)"])}
    print(f"| mode ({n} calls each) | p50 ms | p90 ms | p99 ms | p50 / run_command |")
    print("| --- | --- | --- | --- | --- |")
    for label, v in rows.items():
        base = floor["cd"] if "cd /tmp" in label else floor["true"]
        ratio = f"{statistics.median(v) / base:.2f}x" if label.startswith("run_command") else ""
        print(f"| {label} | {pct(v, 50):.2f} | {pct(v, 90):.2f} | {pct(v, 99):.2f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
