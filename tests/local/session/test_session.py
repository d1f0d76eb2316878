#!/usr/bin/env python3
"""Shell sessions and terminals through MCP (issue 35), over stdio or Streamable HTTP, on real
local sandboxes, as whichever user runs it (tests/local/rootless runs it as an ordinary user).

Sessions (run_command's session): cd, variables, functions, aliases and background jobs persist;
stdout, stderr and the exit status stay the command's own; a timeout interrupts the command and
not the session; `exit` ends it and the next command says so and starts afresh; a shell killed
between commands is reported; one session runs one command at a time; at most 8 live; binary
output and long output as run_command; a forged trailer is output, not a result; another sandbox
with the same session name is another shell; sessions outlive the server (stdio: restarted).
Terminals (the terminal tool): a Python REPL (^C interrupts it, resize reaches it), vim saving a
file, a `read -p` prompt; input to an exited or closed terminal and unknown keys get errors.

usage: test_session.py --mcpbox PATH --transport stdio|http   (exit 77 where local sandboxes
cannot run)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_http import HttpClient, start_server  # noqa: E402
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SKIP = 77


class Tools:
    """tools/call over either transport; fresh() opens another connection to the same server."""

    def __init__(self, transport, mcpbox, state, base):
        self.transport, self.mcpbox, self.state, self.base = transport, mcpbox, state, base
        self.proc = None
        self.start()

    def start(self):
        if self.transport == "stdio":
            self.c = Client(serve_argv(self.mcpbox, self.state, "--local-pool", 0),
                            stderr=subprocess.DEVNULL, cwd="/")
            self.c.initialize("session-test")
        else:
            if self.proc is None:
                self.proc, self.port = start_server(self.mcpbox, self.state, [],
                                                    os.path.join(self.base, "http.log"))
            self.c = HttpClient(self.port)
            self.c.initialize("session-test")

    def fresh(self):
        """Another client (HTTP: a new MCP session on the same server)."""
        if self.transport == "stdio":
            return self
        t = Tools.__new__(Tools)
        t.transport, t.c = "http", HttpClient(self.port)
        t.c.initialize("session-test-2")
        return t

    def restart(self):
        """stdio: a new server process on the same state directory."""
        if self.transport == "stdio":
            self.c.close(timeout=60)
            self.start()

    def call(self, tool, args):
        return self.c.call("tools/call", {"name": tool, "arguments": args})

    def ok(self, tool, args):
        r = self.call(tool, args)
        assert not r.get("isError"), f"{tool} {args}: {result_text(r)}"
        return r["structuredContent"]

    def err(self, tool, args):
        r = self.call(tool, args)
        assert r.get("isError"), f"{tool} {args} should fail: {r.get('structuredContent')}"
        return result_text(r)

    def close(self):
        if self.transport == "stdio":
            self.c.close(timeout=60)
        elif self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def sess(t, sid, cmd, name="main", **kw):
    return t.ok("run_command", dict(sandbox_id=sid, command=cmd, session=name, **kw))


def check_state_persists(t, sid):
    r = sess(t, sid, "mkdir -p /tmp/w; cd /tmp/w; export A=1; B=2; f() { echo f$A$B; }\n"
                     "alias ll='echo aliased'; sleep 300 & echo started")
    assert r["stdout"] == "started\n" and r["exit_code"] == 0, r
    r = sess(t, sid, "pwd; f; ll; echo $B; jobs | grep -c sleep; echo oops >&2; false")
    assert r["stdout"] == "/tmp/w\nf12\naliased\n2\n1\n", r
    assert r["stderr"] == "oops\n" and r["exit_code"] == 1, r
    assert r["session"] == {"name": "main", "cwd": "/tmp/w"}, r
    r = t.ok("run_command", {"sandbox_id": sid, "command": "pwd; echo ${A:-unset}"})
    assert r["stdout"] == "/workspace\nunset\n" and "session" not in r, r
    r = sess(t, sid, "echo $PWD $A $C", cwd="/tmp", env=["C=3"])
    assert r["stdout"] == "/tmp 1 3\n" and r["session"]["cwd"] == "/tmp", r
    print("state persists: cwd, variables, functions, aliases, jobs; streams and status apart")


def check_timeout(t, sid):
    r = sess(t, sid, "X=kept; sleep 100", timeout_seconds=1)
    assert r["status"] == "timed_out" and "lives on" in r["note"], r
    r = sess(t, sid, "echo $X")
    assert r["stdout"] == "kept\n", r
    r = sess(t, sid, "trap '' INT; while :; do :; done", name="stubborn", timeout_seconds=1)
    assert r["status"] == "timed_out" and "killed" in r["note"], r
    r = sess(t, sid, "echo ${X:-fresh}", name="stubborn")
    assert r["stdout"] == "fresh\n", r
    print("timeout interrupts the command, not the session; a command ignoring it ends it")


def check_exit_and_gone(t, sid):
    sess(t, sid, "Y=1", name="ending")
    r = sess(t, sid, "exit 7", name="ending")
    assert r["exit_code"] == 7 and "exited" in r["note"] and r["session"]["cwd"] is None, r
    r = sess(t, sid, "echo ${Y:-new}", name="ending")
    assert r["stdout"] == "new\n", r
    sess(t, sid, "Y=2", name="victim")
    sess(t, sid, 'kill -9 "$(cat "${TMPDIR:-/tmp}/.mcpbox-sessions-$UID/victim/pid")"',
         name="killer")
    text = t.err("run_command", {"sandbox_id": sid, "command": "echo ran", "session": "victim"})
    assert "had exited" in text and "did not run" in text, text
    r = sess(t, sid, "echo ${Y:-again}", name="victim")
    assert r["stdout"] == "again\n", r
    print("exit ends a session and says so; a killed shell is reported on the next command")


def check_busy_and_concurrent(t, sid):
    other = t.fresh() if t.transport == "http" else None
    results = {}

    def slow():
        results["slow"] = sess(other or t, sid, "touch /tmp/slow-started; sleep 3; echo slow",
                               name="busy")
    if other is None:  # stdio: two requests in flight on the one connection
        rid = t.c.request("tools/call", {"name": "run_command", "arguments": {
            "sandbox_id": sid, "command": "sleep 3; echo slow", "session": "busy"}})
        quick = t.c.request("tools/call", {"name": "run_command", "arguments": {
            "sandbox_id": sid, "command": "sleep 0.5; echo quick", "session": "other"}})
        got = t.c.replies([quick], "quick")
        assert got[quick]["structuredContent"]["stdout"] == "quick\n", got
        text = t.err("run_command", {"sandbox_id": sid, "command": "true", "session": "busy"})
        assert "running another command" in text, text
        res = t.c.replies([rid], "slow")[rid]
        assert res["structuredContent"]["stdout"] == "slow\n", res
    else:
        sess(t, sid, "rm -f /tmp/slow-started", name="busy")  # the session exists, idle
        th = threading.Thread(target=slow)
        th.start()
        while t.ok("run_command", {"sandbox_id": sid, "command": "test -e /tmp/slow-started && "
                                   "echo yes || echo no"})["stdout"] != "yes\n":
            pass  # until the slow command runs in the session
        r = t.call("run_command", {"sandbox_id": sid, "command": "true", "session": "busy"})
        assert r.get("isError") and "running another command" in result_text(r), result_text(r)
        r = sess(t, sid, "echo quick", name="other")
        assert r["stdout"] == "quick\n", r
        th.join()
        assert results["slow"]["stdout"] == "slow\n", results
    print("one command at a time per session; other sessions run meanwhile")


def check_limit(t, sid):
    live = ["main", "stubborn", "ending", "victim", "killer", "busy", "other"]
    sess(t, sid, "true", name="eighth")
    text = t.err("run_command", {"sandbox_id": sid, "command": "true", "session": "ninth"})
    assert "most sessions" in text, text
    sess(t, sid, "exit", name="eighth")
    sess(t, sid, "true", name="ninth")
    sess(t, sid, "exit", name="ninth")
    assert len(live) == 7
    print("at most 8 live sessions; exit frees a place")


def check_output(t, sid):
    r = sess(t, sid, r"printf 'a\377b'; printf '\nffffffffffffffffffffffffffffffff done 0 /fake\n'")
    assert r["stdout"] == "a\ufffdb\nffffffffffffffffffffffffffffffff done 0 /fake\n", r
    assert r["session"]["cwd"] == "/tmp", r
    r = sess(t, sid, "seq 1 200000", max_output_bytes=1024)
    assert r["truncated"] and r["stdout_bytes"] == len("".join(f"{i}\n" for i in range(1, 200001)))
    assert r["stdout"].startswith("1\n2\n") and r["stdout"].endswith("199999\n200000\n"), r
    print("broken UTF-8 replaced, a forged trailer stays output, long output capped")


def check_restart_and_isolation(t, sid, sid2):
    sess(t, sid, "export KEEP=survived")
    r = sess(t, sid2, "echo ${KEEP:-other}")
    assert r["stdout"] == "other\n", r
    t.restart()
    r = sess(t, sid, "echo $KEEP")
    assert r["stdout"] == "survived\n", r
    print("same name in another sandbox is another shell; sessions outlive the server")


def term(t, sid, **kw):
    return t.ok("terminal", dict(sandbox_id=sid, **kw))


def check_terminals(t, sid):
    r = term(t, sid, action="start", command="python3 -q", rows=24, cols=80)
    tid = r["terminal_id"]
    assert r["output"].endswith(">>> ") and r["running"], r
    r = term(t, sid, action="send", terminal_id=tid, input="print(6*7)", keys=["Enter"])
    assert "42\n>>> " in r["output"], r
    term(t, sid, action="send", terminal_id=tid, input="import time; time.sleep(60)\r")
    r = term(t, sid, action="send", terminal_id=tid, keys=["^C"])
    assert "KeyboardInterrupt" in r["output"], r
    term(t, sid, action="resize", terminal_id=tid, rows=33, cols=101)
    r = term(t, sid, action="send", terminal_id=tid,
             input="import os; print(tuple(os.get_terminal_size()))", keys=["Enter"])
    assert "(101, 33)" in r["output"], r
    r = term(t, sid, action="read", terminal_id=tid, offset=0, raw=True)
    assert r["offset"] == 0 and "print(6*7)" in r["output"], r
    r = term(t, sid, action="send", terminal_id=tid, keys=["^D"])
    # send returns once the output has been quiet for quiet_ms; the interpreter's exit may come
    # later on a loaded machine, and a model reads again, as here
    for _ in range(100):
        if not r["running"]:
            break
        time.sleep(0.05)
        r = term(t, sid, action="read", terminal_id=tid)
    assert not r["running"] and r["exit_code"] == 0, r
    text = t.err("terminal", {"sandbox_id": sid, "action": "send", "terminal_id": tid,
                              "input": "x"})
    assert "has exited" in text, text
    term(t, sid, action="close", terminal_id=tid)
    text = t.err("terminal", {"sandbox_id": sid, "action": "read", "terminal_id": tid})
    assert "no terminal" in text, text
    print("terminal: Python REPL, ^C, resize, exit; input to an exited or closed one refused")


def check_vim_and_prompt(t, sid):
    r = term(t, sid, action="start", command="vim -u NONE -N /tmp/vim.txt", terminal_id="vi")
    assert "vim.txt" in r["output"], r
    term(t, sid, action="send", terminal_id="vi", input="ihello from vim", keys=["Esc"])
    r = term(t, sid, action="send", terminal_id="vi", input=":wq", keys=["Enter"])
    assert not r["running"], r
    r = t.ok("run_command", {"sandbox_id": sid, "command": "cat /tmp/vim.txt"})
    assert r["stdout"] == "hello from vim\n", r
    term(t, sid, action="close", terminal_id="vi")
    r = term(t, sid, action="start", command="read -p 'Name? ' n; echo \"hi $n\"")
    assert r["output"] == "Name? ", r
    r = term(t, sid, action="send", terminal_id=r["terminal_id"], input="bob", keys=["Enter"])
    assert r["output"] == "bob\nhi bob\n" and r["exit_code"] == 0, r
    text = t.err("terminal", {"sandbox_id": sid, "action": "send", "terminal_id": "vi",
                              "keys": ["Hyper-Q"]})
    assert "unknown key" in text, text
    r = term(t, sid, action="start", command="seq 1 300000; sleep 30", terminal_id="flood")
    assert len(r["output"].encode()) <= 16384 and r["output"].endswith("300000\n"), r["output"][-80:]
    assert "cut" in r["note"] and r["next_offset"] > 2000000, r
    term(t, sid, action="close", terminal_id="flood")
    print("terminal: vim saves a file, a read -p prompt answered, unknown keys refused, a flood "
          "comes back as its newest 16 KiB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--transport", choices=["stdio", "http"], required=True)
    a = ap.parse_args()
    for tool in ("vim", "python3", "script", "setsid", "bash"):
        if shutil.which(tool) is None:
            print(f"FAIL: {tool} is missing on this host (the local sandbox's /usr): "
                  "apt-get install vim python3 util-linux bash")
            return 1
    base = tempfile.mkdtemp(prefix="mbx-session-", dir="/tmp")
    os.chmod(base, 0o755)
    t = Tools(a.transport, os.path.abspath(a.mcpbox), os.path.join(base, "state"), base)
    sids = []
    try:
        for _ in range(2):
            r = t.call("create_sandbox", {})
            if r.get("isError"):
                if "unsupported" in result_text(r).lower():
                    print(f"SKIP: {result_text(r)}")
                    return SKIP
                raise AssertionError(result_text(r))
            sids.append(r["structuredContent"]["sandbox_id"])
        sid = sids[0]
        check_state_persists(t, sid)
        check_timeout(t, sid)
        check_exit_and_gone(t, sid)
        check_busy_and_concurrent(t, sid)
        check_limit(t, sid)
        check_output(t, sid)
        check_terminals(t, sid)
        check_vim_and_prompt(t, sid)
        check_restart_and_isolation(t, sid, sids[1])
    finally:
        for s in sids:
            t.call("destroy_sandbox", {"sandbox_id": s})
        t.close()
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
