#!/usr/bin/env python3
"""Code contexts on a local sandbox through MCP (issue 34), each beside its floor in one run, over
one `mcpbox serve` on stdio with a raw JSON-lines client (tests/bench/mcp_stdio.py):

- a run: run_code "x + 1" in a live default context against run_command "true" in the same
  sandbox, alternated call by call (target: p50 at most 1.5x);
- context creation: run_code action create (python) against run_command "python3 -c pass" (the
  bare interpreter start through the same path), alternated (target: at most 2x);
- interrupt: `while True: pass` running, then action interrupt: how long until the run answers
  (target: 100 ms);
- memory: VmRSS of an idle python context's process against a bare `python3 -c` sleeping, both
  in the sandbox (the interpreter's own, and what the driver adds).

  bench_code.py --mcpbox BIN [--runs N] [--creates M] [--quick]
Prints medians and p90s; --quick (ctest's smoke pass) checks that each part answers, no figures.
Figures: docs/benchmarks.md.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mcp_stdio import StdioServer  # noqa: E402 (tests/bench/mcp_stdio.py)


def sc(result, what):
    if result.get("result", result).get("isError"):
        raise SystemExit(f"FAIL: {what}: {json.dumps(result)[:500]}")
    return result.get("result", result)["structuredContent"]


def p(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def show(name, values):
    print(f"  {name:44s} p50 {p(values, 0.5):7.2f} ms   p90 {p(values, 0.9):7.2f} ms   "
          f"(n={len(values)})")


def alternate(server, a, b, runs):
    """Times a and b (each (tool, args, check)) one after the other, runs times."""
    ta, tb = [], []
    for _ in range(runs):
        for (tool, args, check), out in ((a, ta), (b, tb)):
            seconds, result = server.tool(tool, args)
            check(sc(result, tool))
            out.append(seconds * 1000)
    return ta, tb


def bench_runs(server, sid, runs):
    sc(server.tool("run_code", {"sandbox_id": sid, "code": "x = 41"})[1], "x = 41")
    ok_code = lambda r: r["results"][0]["text"] == "42" or sys.exit(f"FAIL: x + 1 gave {r}")
    ok_cmd = lambda r: r["exit_code"] == 0 or sys.exit(f"FAIL: true gave {r}")
    code, cmd = alternate(server, ("run_code", {"sandbox_id": sid, "code": "x + 1"}, ok_code),
                          ("run_command", {"sandbox_id": sid, "command": "true"}, ok_cmd), runs)
    print("a run in a live context against run_command \"true\":")
    show('run_command "true"', cmd)
    show('run_code "x + 1" (live default context)', code)
    print(f"  ratio of p50s: {p(code, 0.5) / p(cmd, 0.5):.2f} (target <= 1.5)")


def bench_creates(server, sid, creates):
    def drop(r):  # at most 16 contexts a sandbox: each goes before the next (not timed)
        sc(server.tool("run_code", {"sandbox_id": sid, "action": "delete",
                                    "context_id": r["context_id"]})[1], "delete")

    ok_cmd = lambda r: r["exit_code"] == 0 or sys.exit(f"FAIL: python3 -c pass gave {r}")
    ctx, bare = alternate(server, ("run_code", {"sandbox_id": sid, "action": "create"}, drop),
                          ("run_command", {"sandbox_id": sid, "command": "python3 -c pass"},
                           ok_cmd), creates)
    print("context creation against the bare interpreter start:")
    show('run_command "python3 -c pass"', bare)
    show("run_code action create (python)", ctx)
    print(f"  ratio of p50s: {p(ctx, 0.5) / p(bare, 0.5):.2f} (target <= 2)")


def interrupt_once(server, sid, ctx):
    """Starts a busy loop, interrupts it after 300 ms; ms from the interrupt to the run's reply."""
    server.next_id += 1
    run_id = server.next_id
    server.send({"jsonrpc": "2.0", "id": run_id, "method": "tools/call", "params": {
        "name": "run_code", "arguments": {"sandbox_id": sid, "context_id": ctx,
                                          "code": "while True: pass"}}})
    time.sleep(0.3)
    server.next_id += 1
    t0 = time.perf_counter()
    server.send({"jsonrpc": "2.0", "id": server.next_id, "method": "tools/call", "params": {
        "name": "run_code", "arguments": {"sandbox_id": sid, "context_id": ctx,
                                          "action": "interrupt"}}})
    pending = {run_id, server.next_id}
    answered = None
    while pending:
        reply = json.loads(server.proc.stdout.readline())
        if reply.get("id") == run_id:
            answered = (time.perf_counter() - t0) * 1000
            status = reply["result"]["structuredContent"]["status"]
            if status != "interrupted":
                raise SystemExit(f"FAIL: the run ended {status}, not interrupted")
        pending.discard(reply.get("id"))
    return answered


def bench_interrupt(server, sid, runs):
    ctx = sc(server.tool("run_code", {"sandbox_id": sid, "action": "create"})[1],
             "create")["context_id"]
    times = [interrupt_once(server, sid, ctx) for _ in range(runs)]
    print("interrupt of a busy loop (action interrupt sent -> the run's reply):")
    show("interrupt -> answer", times)


# Run as "python3 -" with this on stdin, so that its own command line names neither pattern.
RSS = """import os, sys
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        continue
    if PATTERN in cmd:
        print(next(l.split()[1] for l in status.splitlines() if l.startswith("VmRSS")))
"""


def bench_memory(server, sid):
    sc(server.tool("run_command", {"sandbox_id": sid, "background": True,
                                   "command": "exec python3 -c 'import time; time.sleep(120)'"})[1],
       "sleeper")
    time.sleep(0.5)
    got = {}
    for name, pattern in (("bare python3 -c (sleeping)", "time.sleep(120)"),
                          ("idle python context (driver)", "code-interpreter driver")):
        script = f"PATTERN = {pattern!r}\n" + RSS
        out = sc(server.tool("run_command", {"sandbox_id": sid, "command": "python3 -",
                                             "stdin": script})[1], "rss")
        kib = [int(x) for x in out["stdout"].split() if x.isdigit()]
        got[name] = kib[0] if kib else 0
    print("memory (VmRSS inside the sandbox):")
    for name, kib in got.items():
        print(f"  {name:44s} {kib / 1024:6.1f} MiB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--creates", type=int, default=30)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    runs, creates, interrupts = (3, 2, 1) if a.quick else (a.runs, a.creates, 10)
    state = tempfile.mkdtemp(prefix="mbx-bench-code-")
    server = StdioServer([os.path.abspath(a.mcpbox), "serve", "--state-dir", state,
                          "--local-pool", "0"], client="bench-code", cwd="/")
    _, res = server.tool("create_sandbox", {})
    if res.get("result", res).get("isError"):
        print("SKIP: no local sandbox here")
        sys.exit(77)
    sid = sc(res, "create_sandbox")["sandbox_id"]
    try:
        bench_runs(server, sid, runs)
        bench_creates(server, sid, creates)
        bench_interrupt(server, sid, interrupts)
        bench_memory(server, sid)
    finally:
        server.tool("destroy_sandbox", {"sandbox_id": sid})
        server.close()
    print("ok")


if __name__ == "__main__":
    main()
