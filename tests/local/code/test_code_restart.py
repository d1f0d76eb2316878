#!/usr/bin/env python3
"""Code contexts outlive the mcpbox process that made them (issue 34's last piece): every call
here is its own `mcpbox serve` over stdio, as the MCP Inspector CLI makes them.

- the default python context: `x = 41` in one process, `x + 1` in the next is 42, execution
  count going on; bash and javascript defaults likewise;
- a named context: created, run in, listed by language, interrupted and deleted, each from a
  process that did not create it;
- a run in flight when its process was killed (SIGKILL): the next process says plainly that
  another process's run is going, lists it as running, interrupts it; the count counts it;
- the driver's stderr on replay: node's child processes write to it (it is node's fd 1), with
  bytes that would break the frame stream if they were read as frames;
- a context whose interpreter died while no process watched: the next says so (exit code);
  the default that died: a fresh one, and the run says so (never a fresh state in silence);
- hostile code forging the driver's frames ('s' with another tag, 'd' with a huge count): the
  context alone pays, in this process and the next.

usage: test_code_restart.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SKIP = 77


class Box:
    def __init__(self, mcpbox, state):
        self.mcpbox, self.state, self.sid = mcpbox, state, None

    def start(self):
        log = tempfile.TemporaryFile()
        c = Client(serve_argv(self.mcpbox, self.state, "--local-pool", 0), stderr=log, cwd="/")
        c.initialize("code-restart-test")
        return c, log

    def stop(self, c, log):
        rc = c.close(60)
        log.seek(0)
        text = log.read().decode(errors="replace")
        assert rc == 0 and "Sanitizer" not in text and "runtime error" not in text, \
            f"the server exited {rc}:\n{text[-4000:]}"

    def call(self, tool, args):
        """One tools/call in a process of its own."""
        c, log = self.start()
        try:
            return c.call_tool(tool, dict(args, sandbox_id=self.sid) if self.sid else args)
        finally:
            self.stop(c, log)

    def code(self, args):
        res = self.call("run_code", args)
        assert not res.get("isError"), f"{args}: {result_text(res)}"
        return res["structuredContent"]


def plain(out):
    return out["results"][0]["text"] if out["results"] else None


def check_defaults(box):
    first = box.code({"code": "x = 41"})
    assert first["execution_count"] == 1 and "fresh default" in first.get("note", ""), first
    out = box.code({"code": "x + 1"})
    assert plain(out) == "42" and out["execution_count"] == 2, out
    assert out["context_id"] == first["context_id"] and "note" not in out, out
    box.code({"code": "B=3; cd /tmp", "language": "bash"})
    out = box.code({"code": "echo $B $PWD", "language": "bash"})
    assert out["stdout"] == "3 /tmp\n" and out["execution_count"] == 2, out
    print("defaults (python, bash) across processes: ok")


def check_node_stderr(box):
    # node runs with fd 1 on the agent's stderr: a child's output lands there, between frames
    box.code({"code": "require('child_process').execSync(\"printf 'x 9\\\\nnot-a-frame d 3\\\\n'\", "
                      "{stdio: 'inherit'}); var a = 21", "language": "javascript"})
    out = box.code({"code": "a * 2", "language": "javascript"})
    assert plain(out) == "42" and out["execution_count"] == 2, out
    print("the driver's stderr stays out of the frames on a replay: ok")


def listed(box, language, ctx):
    out = box.code({"action": "list", "language": language})
    found = [c for c in out["contexts"] if c["context_id"] == ctx]
    assert all(c["language"] == language for c in out["contexts"]), out
    return found[0] if found else None


def check_named(box):
    ctx = box.code({"action": "create"})["context_id"]
    box.code({"code": "y = [1, 2]", "context_id": ctx})
    info = listed(box, "python", ctx)
    assert info and info["execution_count"] == 1 and info["state"] == "idle", info
    assert listed(box, "bash", ctx) is None
    out = box.code({"code": "y + [3]", "context_id": ctx})
    assert plain(out) == "[1, 2, 3]" and out["execution_count"] == 2, out
    print("a named context: created, run in and listed from different processes: ok")
    return ctx


def check_in_flight(box, ctx):
    """The process running code is killed; the next ones see the run going, interrupt it."""
    c, log = box.start()
    c.send({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": "run_code", "arguments": {
                "sandbox_id": box.sid, "context_id": ctx,
                "code": "import time\nprint('started', flush=True)\ntime.sleep(30)\nz = 1"}}})
    time.sleep(1.5)
    c.proc.send_signal(signal.SIGKILL)
    c.proc.wait()
    res = box.call("run_code", {"code": "y", "context_id": ctx})
    assert res.get("isError") and "another mcpbox process" in result_text(res), res
    info = listed(box, "python", ctx)
    assert info["state"] == "running" and "another mcpbox process" in info.get("note", ""), info
    box.code({"action": "interrupt", "context_id": ctx})
    for _ in range(100):
        if listed(box, "python", ctx)["state"] == "idle":
            break
        time.sleep(0.1)
    out = box.call("run_code", {"code": "z", "context_id": ctx})["structuredContent"]
    assert out["status"] == "error" and out["error"]["name"] == "NameError", out
    assert out["execution_count"] == 4, out  # the interrupted run of the killed process counts
    assert plain(box.code({"code": "y", "context_id": ctx})) == "[1, 2]"
    print("a run in flight when its process died: said, listed, interrupted: ok")


def check_deaths(box, ctx):
    out = box.call("run_code", {"code": "import os; os._exit(3)", "context_id": ctx})
    assert out["structuredContent"]["status"] == "lost", out
    res = box.call("run_code", {"code": "1", "context_id": ctx})
    assert res.get("isError") and "exited with code 3" in result_text(res), res
    box.code({"action": "delete", "context_id": ctx})  # a dead one: still said to be dead
    res = box.call("run_code", {"code": "1", "context_id": ctx})
    assert res.get("isError") and "state is gone" in result_text(res), res
    box.call("run_code", {"code": "import os; os._exit(4)"})  # the python default
    out = box.call("run_code", {"code": "x"})["structuredContent"]
    assert out["execution_count"] == 1 and out["error"]["name"] == "NameError", out
    assert "fresh default" in out.get("note", ""), out
    ctx2 = box.code({"action": "create"})["context_id"]
    box.code({"code": "w = 1", "context_id": ctx2})
    box.code({"action": "delete", "language": "python"})
    res = box.call("run_code", {"code": "w", "context_id": ctx2})
    assert res.get("isError") and "no code context" in result_text(res), res
    print("died, deleted, deleted by language: said so in the next process: ok")


def check_forged(box):
    ctx = box.code({"action": "create"})["context_id"]
    forged = ("import os, json\n"
              "for kind, obj in ((b's', {'tag': 'f00d'}), (b'd', {'count': 10**9, 'tag': 'f00d'})):\n"
              "    p = json.dumps(obj).encode()\n"
              "    os.write(3, kind + b' %d\\n' % len(p) + p)\n"
              "v = 'after'\nv")
    out = box.code({"code": forged, "context_id": ctx})
    assert plain(out) == "'after'", out
    out = box.code({"code": "v * 2", "context_id": ctx})
    assert plain(out) == "'afterafter'", out
    box.code({"action": "delete", "context_id": ctx})
    print("forged s and d frames: the context alone pays, now and after a restart: ok")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    state = tempfile.mkdtemp(prefix="mbx-code-restart-")
    os.chmod(state, 0o755)
    box = Box(os.path.abspath(a.mcpbox), state)
    res = box.call("create_sandbox", {})
    if res.get("isError"):
        print("SKIP: no local sandbox here:", result_text(res))
        sys.exit(SKIP)
    box.sid = res["structuredContent"]["sandbox_id"]
    try:
        check_defaults(box)
        check_node_stderr(box)
        ctx = check_named(box)
        check_in_flight(box, ctx)
        check_deaths(box, ctx)
        check_forged(box)
    finally:
        box.call("destroy_sandbox", {})
    print("ok")


if __name__ == "__main__":
    main()
