#!/usr/bin/env python3
"""run_code on local sandboxes through the real `mcpbox serve` (issue 34), over stdio or HTTP:

- state kept between runs, the last expression's MIME bundle (text/plain, text/html and
  application/json from _repr_*_), display() in order, execution_count, errors with traceback;
- matplotlib: plt.show() and a figure left last come back as image content (image/png);
- contexts: create, list by language, get through a run, delete; bash and node contexts;
- control: a timeout interrupts (KeyboardInterrupt) and the state stays; action interrupt stops a
  run at once; os._exit says so on the next run, which can start afresh;
- an image without the interpreter (PATH without python3) gets an error naming it;
- hostile code: forged frames on the driver's channel, an oversized result, a flood of output;
  the server and a second sandbox's context stay fine;
- progress notifications on a long run (stdio).

usage: test_code_mcp.py --mcpbox PATH --transport stdio|http   (exit 77 where local sandboxes
cannot run)
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_http import HttpClient, start_server  # noqa: E402
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SKIP = 77


class Stdio:
    def __init__(self, mcpbox, state):
        self.progress = []
        self.log = tempfile.TemporaryFile()
        self.c = Client(serve_argv(mcpbox, state, "--local-pool", 0), stderr=self.log,
                        cwd="/", on_notification=self.progress.append)
        self.c.initialize("code-test")
        self.lock = threading.Lock()

    def tool(self, name, args, progress_token=None):
        return self.c.call_tool(name, args, progress_token)

    def close(self):
        rc = self.c.close(60)
        self.log.seek(0)
        log = self.log.read().decode(errors="replace")
        assert rc == 0 and "Sanitizer" not in log, f"the server exited {rc}:\n{log[-4000:]}"


class Http:
    def __init__(self, mcpbox, state):
        self.state = state
        self.proc, self.port = start_server(mcpbox, state, [], os.path.join(state, "serve.log"))
        self.c = HttpClient(self.port)
        self.c.initialize("code-test")

    def tool(self, name, args, progress_token=None):
        return self.c.call("tools/call", {"name": name, "arguments": args})

    def close(self):
        self.proc.terminate()
        rc = self.proc.wait(30)
        log = open(os.path.join(self.state, "serve.log")).read()
        assert rc == 0 and "Sanitizer" not in log, f"the server exited {rc}:\n{log[-4000:]}"


def sc(res, what):
    assert not res.get("isError"), f"{what}: {result_text(res)}"
    return res["structuredContent"]


def plain(out, i=0):
    return out["results"][i].get("text")


def check_state_and_results(t, sid):
    run = lambda code: sc(t.tool("run_code", {"sandbox_id": sid, "code": code}), code)
    assert run("x = 41")["results"] == []
    out = run("x + 1")
    assert plain(out) == "42" and out["status"] == "ok", out
    count = out["execution_count"]
    out = run("print('a'); display(1); print('b', file=__import__('sys').stderr); 'last'")
    assert out["stdout"] == "a\n" and out["stderr"] == "b\n", out
    assert [r["text"] for r in out["results"]] == ["1", "'last'"], out
    assert out["execution_count"] == count + 1, out
    out = run("class R:\n    def _repr_html_(self): return '<b>r</b>'\n"
              "    def _repr_json_(self): return {'r': 1}\nR()")
    r = out["results"][0]
    assert r["text/html"] == "<b>r</b>" and r["application/json"] == {"r": 1}, r
    out = run("def f():\n    return 1 / 0\nf()")
    assert out["status"] == "error" and out["error"]["name"] == "ZeroDivisionError", out
    assert any("return 1 / 0" in line for line in out["error"]["traceback"]), out
    assert not any("<string>" in line for line in out["error"]["traceback"]), out
    print("state, results, display, errors: ok")


def check_plots(t, sid):
    res = t.tool("run_code", {"sandbox_id": sid, "code": "import matplotlib.pyplot as plt\n"
                              "plt.plot([1, 4, 9]); plt.show()"})
    out = sc(res, "plt.show()")
    images = [c for c in res["content"] if c["type"] == "image"]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png", res["content"]
    assert base64.b64decode(images[0]["data"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "image/png" in out["results"][0], out
    res = t.tool("run_code", {"sandbox_id": sid, "code": "fig = plt.figure()\n"
                              "plt.bar([1, 2], [3, 4])\nfig"})
    images = [c for c in res["content"] if c["type"] == "image"]
    assert len(images) == 1, f"a figure left last is one image, not {len(images)}"
    print("matplotlib: image content: ok")


def check_contexts(t, sid):
    call = lambda args: sc(t.tool("run_code", dict(args, sandbox_id=sid)), json.dumps(args))
    ctx = call({"action": "create", "language": "python"})["context_id"]
    ids = [c["context_id"] for c in call({"action": "list", "language": "python"})["contexts"]]
    assert ctx in ids, ids
    assert call({"action": "list", "language": "bash"})["contexts"] == [] or all(
        c["language"] == "bash" for c in call({"action": "list", "language": "bash"})["contexts"])
    call({"code": "y = 'own'", "context_id": ctx})
    out = t.tool("run_code", {"sandbox_id": sid, "code": "y"})  # the default context has no y
    assert sc(out, "y")["error"]["name"] == "NameError", out
    assert plain(call({"code": "y", "context_id": ctx})) == "'own'"
    assert call({"action": "delete", "context_id": ctx})["deleted"] is True
    gone = t.tool("run_code", {"sandbox_id": sid, "code": "y", "context_id": ctx})
    assert gone.get("isError") and "no code context" in result_text(gone), gone
    b = call({"action": "create", "language": "bash"})["context_id"]
    call({"code": "X=5; f() { echo \"hi $1\"; }; cd /tmp", "context_id": b})
    out = call({"code": "f $X; pwd", "context_id": b})
    assert out["stdout"] == "hi 5\n/tmp\n", out
    out = call({"code": "false", "context_id": b})
    assert out["status"] == "error", out
    js = call({"code": "let a = 2", "language": "javascript"})
    assert plain(call({"code": "a * 21", "language": "javascript"})) == "42", js
    out = call({"code": "console.log('j'.repeat(20000))", "language": "javascript",
                "max_output_bytes": 4096})
    assert out["truncated"] and "output_file" in out, out
    whole = sc(t.tool("read_file", {"sandbox_id": sid, "path": out["output_file"]}), "js out")
    assert whole["size"] == 20001, whole
    print("contexts: create, list, delete, bash, javascript: ok")


def check_control(t, sid):
    call = lambda args: sc(t.tool("run_code", dict(args, sandbox_id=sid)), json.dumps(args))
    call({"code": "kept = 7"})
    t0 = time.time()
    out = call({"code": "import time\nwhile True: time.sleep(0.01)", "timeout_seconds": 1})
    assert out["status"] == "timed_out", out
    assert out["error"]["name"] == "KeyboardInterrupt", out
    assert time.time() - t0 < 5, "the timeout did not interrupt at once"
    assert plain(call({"code": "kept"})) == "7", "the state went with the interrupt"
    t0 = time.time()
    out = call({"code": "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                        "time.sleep(30)", "timeout_seconds": 1})
    assert out["status"] == "lost" and "did not stop within 2 s" in out["error"]["value"], out
    assert time.time() - t0 < 8, "a run deaf to SIGINT was not killed after the grace"
    died = t.tool("run_code", {"sandbox_id": sid, "code": "1"})
    assert died.get("isError") and "did not stop" in result_text(died), died
    out = t.tool("run_code", {"sandbox_id": sid, "code": "import os; os._exit(3)"})
    assert sc(out, "_exit")["status"] == "lost", out
    assert "exited with code 3" in out["structuredContent"]["error"]["value"], out
    died = t.tool("run_code", {"sandbox_id": sid, "code": "1"})
    assert died.get("isError") and "died" in result_text(died), died
    assert plain(call({"code": "'fresh'"})) == "'fresh'"
    print("timeout, _exit and a fresh default: ok")


def check_interrupt_action(mcpbox, state, sid):
    """A second client interrupts what the first runs (a stdio server each: any process may)."""
    t = Stdio(mcpbox, state)
    ctx = sc(t.tool("run_code", {"sandbox_id": sid, "action": "create"}), "create")["context_id"]
    rid = t.c.request("tools/call", t.c.tool_params(
        "run_code", {"sandbox_id": sid, "context_id": ctx, "code": "z = 1\nimport time\n"
                     "time.sleep(60)"}))
    time.sleep(1)
    t2 = t.c.request("tools/call", t.c.tool_params(
        "run_code", {"sandbox_id": sid, "context_id": ctx, "action": "interrupt"}))
    t0 = time.time()
    res = t.c.replies([rid, t2], "interrupt")
    out = res[rid]["structuredContent"]
    assert out["status"] == "interrupted", out
    assert time.time() - t0 < 3, "the interrupted run did not answer at once"
    assert plain(sc(t.tool("run_code", {"sandbox_id": sid, "context_id": ctx, "code": "z"}),
                    "z")) == "1"
    # notifications/cancelled interrupts the run behind the request; the state stays
    rid = t.c.request("tools/call", t.c.tool_params(
        "run_code", {"sandbox_id": sid, "context_id": ctx, "code": "z = 2\nimport time\n"
                     "time.sleep(60)"}))
    time.sleep(1)
    t.c.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": rid, "reason": "test"}})
    t0 = time.time()
    while True:
        out = t.tool("run_code", {"sandbox_id": sid, "context_id": ctx, "code": "z"})
        if not out.get("isError"):
            break
        assert "running other code" in result_text(out) and time.time() - t0 < 3, out
        time.sleep(0.05)
    assert plain(out["structuredContent"]) == "2", out
    t.close()
    print("action interrupt: ok")


def check_hostile(t, sid, sid2):
    call = lambda s, args: sc(t.tool("run_code", dict(args, sandbox_id=s)), json.dumps(args))
    out = call(sid, {"code": "import os, json\n"
                     "big = json.dumps({'mime': {'text/plain': 'x' * (3 << 20)}}).encode()\n"
                     "os.write(3, b'r %d\\n' % len(big) + big)\n'after'"})
    assert out["results_dropped"] >= 1 and plain(out) == "'after'", out
    out = call(sid, {"code": "print('y' * 10_000_000)", "max_output_bytes": 4096})
    assert out["truncated"] and len(out["stdout"]) < 10000, len(out["stdout"])
    assert "output_file" in out["note"], out["note"]
    whole = sc(t.tool("read_file", {"sandbox_id": sid, "path": out["output_file"],
                                    "offset": 9_999_990}), "read the rest")
    assert whole["size"] == 10_000_001, whole
    res = t.tool("run_code", {"sandbox_id": sid, "code": "import os\n"
                              "os.write(3, b'zz not a frame\\n' * 100)\nimport time\n"
                              "time.sleep(5)"})
    out = sc(res, "forged")
    assert out["status"] == "lost" and "frame protocol" in out["error"]["value"], out
    assert plain(call(sid2, {"code": "'other sandbox fine'"})) == "'other sandbox fine'"
    t.tool("run_code", {"sandbox_id": sid, "code": "1"})  # says it died
    assert plain(call(sid, {"code": "2"})) == "2"
    print("forged frames, a huge result, a flood: the context alone pays: ok")


def check_oom(t):
    """The OOM killer ends a context's interpreter: the run says so, and so does the next."""
    info = sc(t.tool("create_sandbox", {"memory": "256m"}), "create 256m")
    sid = info["sandbox_id"]
    if "memory" in info.get("isolation", {}).get("limits_not_enforced", []):
        t.tool("destroy_sandbox", {"sandbox_id": sid})
        print("an OOM-killed context: not checked, this user's sandboxes have no memory limit "
              "(isolation.limits_not_enforced)")
        return
    try:
        sc(t.tool("run_code", {"sandbox_id": sid, "code": "keep = 1"}), "keep")
        out = sc(t.tool("run_code", {"sandbox_id": sid, "code": "b = bytearray(1 << 30)\n"
                                     "for i in range(0, len(b), 4096): b[i] = 1"}), "oom")
        assert out["status"] == "lost" and "OOM" in out["error"]["value"], out
        again = t.tool("run_code", {"sandbox_id": sid, "code": "keep"})
        assert again.get("isError") and "OOM" in result_text(again), again
        out = sc(t.tool("run_code", {"sandbox_id": sid, "code": "'fresh'"}), "fresh")
        assert out["results"][0]["text"] == "'fresh'", out
    finally:
        t.tool("destroy_sandbox", {"sandbox_id": sid})
    print("an OOM-killed context says so, then a fresh one: ok")


def check_missing(t):
    res = t.tool("create_sandbox", {"env": {"PATH": "/nonexistent"}})
    sid = sc(res, "create")["sandbox_id"]
    out = t.tool("run_code", {"sandbox_id": sid, "code": "1"})
    assert out.get("isError") and "no python3 on PATH" in result_text(out), out
    t.tool("destroy_sandbox", {"sandbox_id": sid})
    print("no interpreter: a clear error naming it: ok")


def check_capped(t, sid):
    """A client that sends no progress token is never held past 50 s (its 60 s timeout), whatever
    timeout_seconds asks; the run is interrupted and the context keeps its state."""
    t0 = time.time()
    out = sc(t.tool("run_code", {"sandbox_id": sid, "code": "held = 1\nimport time\n"
                                 "time.sleep(90)", "timeout_seconds": 120}), "capped")
    took = time.time() - t0
    assert out["status"] == "timed_out" and "progressToken" in out["note"], out
    assert 45 < took < 58, f"held {took:.1f} s"
    assert plain(sc(t.tool("run_code", {"sandbox_id": sid, "code": "held"}), "held")) == "1"
    print(f"no progress token: held {took:.1f} s, not 120: ok")


def check_progress(t, sid):
    if not isinstance(t, Stdio):
        return
    t.progress.clear()
    out = sc(t.tool("run_code", {"sandbox_id": sid, "code": "import time; time.sleep(2.5)"},
                    progress_token="code-1"), "progress")
    got = [p for p in t.progress if p.get("method") == "notifications/progress"]
    assert out["status"] == "ok" and got, "no progress notification on a 2.5 s run"
    print("progress notifications: ok")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--transport", choices=["stdio", "http"], required=True)
    a = ap.parse_args()
    a.mcpbox = os.path.abspath(a.mcpbox)
    if subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"],
                      capture_output=True).returncode != 0:
        raise SystemExit("FAIL: python3-matplotlib is missing: run scripts/install-deps.sh --test")
    state = tempfile.mkdtemp(prefix="mbx-code-")
    os.chmod(state, 0o755)
    t = Stdio(a.mcpbox, state) if a.transport == "stdio" else Http(a.mcpbox, state)
    res = t.tool("create_sandbox", {})
    if res.get("isError"):
        print("SKIP: no local sandbox here:", result_text(res))
        sys.exit(SKIP)
    sid = res["structuredContent"]["sandbox_id"]
    sid2 = sc(t.tool("create_sandbox", {}), "second")["sandbox_id"]
    try:
        check_state_and_results(t, sid)
        check_plots(t, sid)
        check_contexts(t, sid)
        check_control(t, sid)
        if a.transport == "stdio":
            check_interrupt_action(a.mcpbox, state, sid2)
        check_hostile(t, sid, sid2)
        check_missing(t)
        check_oom(t)
        check_progress(t, sid)
        if a.transport == "http":  # this client sends no progress token
            check_capped(t, sid)
    finally:
        for s in (sid, sid2):
            t.tool("destroy_sandbox", {"sandbox_id": s})
        t.close()
    print("ok")


if __name__ == "__main__":
    main()
