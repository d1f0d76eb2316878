#!/usr/bin/env python3
"""Shell sessions on the proc primitive (issue 35's speed target), through MCP over stdio or
Streamable HTTP, on real local sandboxes, as whichever user runs it (tests/local/rootless runs it
as an ordinary user). What test_session.py checks holds; this covers what changed:

- output without a trailing newline comes back byte-exact, stdin too (control bytes, quotes);
- a command that breaks the parser (an open quote), `exec >/dev/null`, a user's `__mcpbox_end`
  or `printf` function do not break the session;
- kill_command KILL on a command deaf to the interrupt ends the shell 3 s later (status killed);
  a command over 64 KiB and a stdin over 256 KiB are refused, the session untouched;
- forged markers (the marker's shape with another nonce, on both streams, from the command and
  from a job printing after it) stay output;
- a flood on both streams is capped, the rest read back with get_command on the result's
  command_id; kill_command on a running session command interrupts it, the session lives on;
- two sessions run at once, each its own cwd and output; two sandboxes with one session name at
  once are two shells;
- the server killed (SIGKILL) mid-command: a new server finds the shell by its label, follows the
  orphaned command to its end before running the next one and says so, and the state persists;
  a session whose shell was killed while no server ran is reported gone.

usage: test_session_proc.py --mcpbox PATH --transport stdio|http   (exit 77 where local
sandboxes cannot run)
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


class Server:
    """One mcpbox serve on a state directory; kill() ends it with SIGKILL, start() starts the
    next on the same directory. client() is a new MCP connection (stdio: the one)."""

    def __init__(self, transport, mcpbox, state, base):
        self.transport, self.mcpbox, self.state, self.base = transport, mcpbox, state, base
        self.start()

    def start(self):
        if self.transport == "stdio":
            self.c = Client(serve_argv(self.mcpbox, self.state, "--local-pool", 0),
                            stderr=subprocess.DEVNULL, cwd="/")
            self.proc = self.c.proc
            self.c.initialize("session-proc-test")
        else:
            self.proc, self.port = start_server(self.mcpbox, self.state, [],
                                                os.path.join(self.base, "http.log"))
            self.c = self.client()

    def client(self):
        if self.transport == "stdio":
            return self.c
        c = HttpClient(self.port)
        c.initialize("session-proc-test")
        return c

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=30)

    def close(self):
        if self.transport == "stdio":
            self.c.close(timeout=60)
        else:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def call(c, tool, args):
    return c.call("tools/call", {"name": tool, "arguments": args})


def ok(c, tool, args):
    r = call(c, tool, args)
    assert not r.get("isError"), f"{tool} {args}: {result_text(r)}"
    return r["structuredContent"]


def sess(c, sid, cmd, name="p", **kw):
    return ok(c, "run_command", dict(sandbox_id=sid, command=cmd, session=name, **kw))


def check_exact_bytes(c, sid):
    r = sess(c, sid, "printf 'no newline'; printf 'err no newline' >&2")
    assert r["stdout"] == "no newline" and r["stderr"] == "err no newline", r
    r = sess(c, sid, "printf '\\n\\n'")
    assert r["stdout"] == "\n\n", r
    r = sess(c, sid, "od -An -c | tr -s ' '", stdin="a\u0001b'%\\\nlast")
    assert r["stdout"] == " a 001 b ' % \\ \\n l a s t\n", r
    r = sess(c, sid, "cat", stdin="")
    assert r["stdout"] == "" and r["exit_code"] == 0, r
    print("output and stdin byte-exact: no newline added or lost, NUL and quotes kept")


def check_hostile_commands(c, sid):
    r = sess(c, sid, "echo 'unterminated", name="hostile")
    assert r["exit_code"] == 2 and "unexpected EOF" in r["stderr"], r
    r = sess(c, sid, "}; echo after-brace", name="hostile")
    assert r["exit_code"] == 2 and r["stdout"] == "", r
    r = sess(c, sid, "__mcpbox_end() { :; }; printf() { :; }; cd() { :; }; echo defined",
             name="hostile")
    assert r["stdout"] == "defined\n", r
    r = sess(c, sid, "exec >/dev/null; echo hidden; echo shown >&2", name="hostile")
    assert r["stdout"] == "" and r["stderr"] == "shown\n", r
    r = sess(c, sid, "echo still >&2; return 3", name="hostile")
    assert r["stderr"].startswith("still\n") and r["session"]["cwd"] == "/workspace", r
    print("an open quote, a stray brace, functions named like ours, exec >/dev/null, return: "
          "the session lives on")


def check_forged_markers(c, sid):
    fake = "f" * 32
    cmd = (f"printf '\\n{fake} 0 /fake {fake}\\n'; printf '\\n{fake} 0 /fake {fake}\\n' >&2; "
           f"(sleep 0.3; printf '\\n{fake} 9 /late {fake}\\n') & echo spawned")
    r = sess(c, sid, cmd, name="forge")
    assert r["stdout"] == f"\n{fake} 0 /fake {fake}\nspawned\n", r
    assert r["stderr"] == f"\n{fake} 0 /fake {fake}\n" and r["exit_code"] == 0, r
    time.sleep(0.5)  # the job printed between commands: in the shell's log, nobody's output
    r = sess(c, sid, "echo next; pwd", name="forge")
    assert r["stdout"] == "next\n/workspace\n" and r["session"]["cwd"] == "/workspace", r
    r = sess(c, sid, "env | grep -ci mcpbox; set | grep -c '[0-9a-f]\\{32\\}'", name="forge")
    assert r["stdout"] == "0\n0\n", r  # no nonce in the environment or the shell's variables
    print("forged markers (both streams, a job after the command) stay output; no nonce in "
          "the command's reach")


def check_flood_and_get(c, sid):
    r = sess(c, sid, "head -c 20000000 /dev/zero | tr '\\0' a; seq 1 100000 >&2; echo; echo end",
             name="flood", max_output_bytes=4096)
    assert r["truncated"] and r["stdout_bytes"] == 20000000 + 1 + 4, r["stdout_bytes"]
    assert r["stdout"].endswith("a\nend\n") and r["stderr"].endswith("99999\n100000\n"), r
    cid = r["command_id"]
    g = ok(c, "get_command", {"sandbox_id": sid, "command_id": cid, "offset": 19999990,
                              "limit": 100})
    assert g["status"] == "exited" and g["exit_code"] == 0, g
    assert g["output"].startswith("aaaaaaaaaa"), g
    whole = ok(c, "get_command", {"sandbox_id": sid, "command_id": cid, "offset": 0, "limit": 10})
    assert whole["output"] == "aaaaaaaaaa" and whole["total_bytes"] >= 20000000, whole
    r = sess(c, sid, "echo after-flood", name="flood")
    assert r["stdout"] == "after-flood\n", r
    r = sess(c, sid, "X=5; sleep 60; echo not-reached", name="flood", wait_seconds=1)
    assert r["status"] == "running", r
    k = ok(c, "kill_command", {"sandbox_id": sid, "command_id": r["command_id"],
                               "signal": "INT"})
    assert k["status"] == "exited", k
    r = sess(c, sid, "echo $X", name="flood")
    assert r["stdout"] == "5\n", r
    r = sess(c, sid, "trap '' INT; while :; do sleep 0.1; done", name="deaf", wait_seconds=1)
    assert r["status"] == "running", r
    ok(c, "kill_command", {"sandbox_id": sid, "command_id": r["command_id"], "signal": "KILL"})
    g = ok(c, "get_command", {"sandbox_id": sid, "command_id": r["command_id"],
                              "wait_seconds": 10})
    assert g["status"] == "killed", g  # deaf to the interrupt: the shell went 3 s later
    r = sess(c, sid, "echo ${X:-fresh}", name="deaf")
    assert r["stdout"] == "fresh\n", r
    sess(c, sid, "exit", name="deaf")  # at most 8 live: leave room for the later checks
    for bad_args, says in (({"command": "x" * 70000}, "64 KiB"),
                           ({"command": "cat", "stdin": "a" * 300000}, "256 KiB")):
        bad = call(c, "run_command", dict(sandbox_id=sid, session="flood", **bad_args))
        assert bad.get("isError") and says in result_text(bad), result_text(bad)[:300]
    r = sess(c, sid, "echo $X", name="flood")
    assert r["stdout"] == "5\n", r
    bad = call(c, "get_command", {"sandbox_id": sid, "command_id": "cmd-00000000.77"})
    assert bad.get("isError") and "does not know" in result_text(bad), result_text(bad)
    print("a 20 MB flood capped, the rest read back by command_id; kill_command interrupts a "
          "session command and the session lives on")


def check_two_at_once(srv, sid, sid2):
    out = {}

    def run(key, s, name, d):
        c = srv.client()
        out[key] = sess(c, s, f"mkdir -p {d} && cd {d} && sleep 1 && echo {key} && pwd",
                        name=name)
    th = [threading.Thread(target=run, args=("a", sid, "one", "/tmp/one")),
          threading.Thread(target=run, args=("b", sid, "two", "/tmp/two")),
          threading.Thread(target=run, args=("c", sid2, "one", "/tmp/other"))]
    t0 = time.time()
    if srv.transport == "stdio":  # one connection: requests in flight together
        ids = [srv.c.request("tools/call", {"name": "run_command", "arguments": {
            "sandbox_id": s, "session": n, "command":
                f"mkdir -p {d} && cd {d} && sleep 1 && echo {k} && pwd"}})
            for k, s, n, d in (("a", sid, "one", "/tmp/one"), ("b", sid, "two", "/tmp/two"),
                               ("c", sid2, "one", "/tmp/other"))]
        got = srv.c.replies(ids, "three sessions")
        for k, i in zip("abc", ids):
            out[k] = got[i]["structuredContent"]
    else:
        for t in th:
            t.start()
        for t in th:
            t.join()
    assert time.time() - t0 < 2.5, "the sessions ran one after another"
    assert out["a"]["stdout"] == "a\n/tmp/one\n" and out["a"]["session"]["cwd"] == "/tmp/one"
    assert out["b"]["stdout"] == "b\n/tmp/two\n" and out["c"]["stdout"] == "c\n/tmp/other\n", out
    c = srv.client()
    other = call(c, "get_command", {"sandbox_id": sid2, "command_id": out["a"]["command_id"]})
    assert other.get("isError"), other  # a session command of one sandbox is not another's
    other = call(c, "kill_command", {"sandbox_id": sid2, "command_id": out["a"]["command_id"]})
    assert other.get("isError"), other
    print("two sessions at once, and one name in two sandboxes at once: separate shells")


def check_restart(srv, sid):
    c = srv.client()
    sess(c, sid, "export KEEP=kept; cd /tmp", name="r")
    r = sess(c, sid, "sleep 2; echo orphan-done; X=set-by-orphan", name="r", wait_seconds=1)
    assert r["status"] == "running", r
    srv.kill()  # mid-command, no shutdown
    srv.start()
    c = srv.client()
    r = sess(c, sid, "echo $KEEP $X; pwd", name="r")
    assert r["stdout"] == "kept set-by-orphan\n/tmp\n", r
    assert "earlier" in r.get("note", ""), r
    # a command of the dead server's, interrupted by its id through the new one
    r = sess(c, sid, "Z=before; sleep 60", name="r", wait_seconds=1)
    srv.kill()
    srv.start()
    c = srv.client()
    call(c, "kill_command", {"sandbox_id": sid, "command_id": r["command_id"], "signal": "INT"})
    t0 = time.time()
    r = sess(c, sid, "echo $Z", name="r", timeout_seconds=20)
    assert r["stdout"] == "before\n" and time.time() - t0 < 10, r
    r = sess(c, sid, "echo again", name="r")
    assert r["stdout"] == "again\n" and "note" not in r, r
    # a shell killed while no server runs: the next server says so, then starts afresh
    sess(c, sid, "Y=1", name="victim")
    srv.kill()
    srv.start()
    c = srv.client()
    ok(c, "run_command", {"sandbox_id": sid, "command": "bash -c 'kill -9 \"$(cat \"${TMPDIR:-/tmp}"
                          "/.mcpbox-sessions-$UID/victim/pid\")\"'"})
    srv.kill()
    srv.start()
    c = srv.client()
    text = result_text(call(c, "run_command", {"sandbox_id": sid, "command": "echo ran",
                                               "session": "victim"}))
    assert "had exited" in text and "did not run" in text, text
    r = sess(c, sid, "echo ${Y:-fresh}", name="victim")
    assert r["stdout"] == "fresh\n", r
    print("server killed mid-command: the next server follows the command to its end and says "
          "so; state kept; a shell killed meanwhile is reported")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--transport", choices=["stdio", "http"], required=True)
    a = ap.parse_args()
    if shutil.which("bash") is None:
        print("FAIL: bash is missing on this host (the local sandbox's /usr)")
        return 1
    base = tempfile.mkdtemp(prefix="mbx-sessproc-", dir="/tmp")
    os.chmod(base, 0o755)
    srv = Server(a.transport, os.path.abspath(a.mcpbox), os.path.join(base, "state"), base)
    sids = []
    try:
        for _ in range(2):
            r = call(srv.c, "create_sandbox", {})
            if r.get("isError"):
                if "unsupported" in result_text(r).lower():
                    print(f"SKIP: {result_text(r)}")
                    return SKIP
                raise AssertionError(result_text(r))
            sids.append(r["structuredContent"]["sandbox_id"])
        sid = sids[0]
        check_exact_bytes(srv.c, sid)
        check_hostile_commands(srv.c, sid)
        check_forged_markers(srv.c, sid)
        check_flood_and_get(srv.c, sid)
        check_two_at_once(srv, sid, sids[1])
        check_restart(srv, sid)
    finally:
        for s in sids:
            call(srv.c, "destroy_sandbox", {"sandbox_id": s})
        srv.close()
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
