#!/usr/bin/env python3
"""Terminals on the interactive-process primitive (issue 35, branch term): on local sandboxes a
terminal is one exec on a pty held by the sandbox's agent, driven through MCP over stdio.

- an OCI image with busybox's sh and nothing else (no util-linux script(1), no bash): a shell
  prompt, a `read -p` prompt and ^C work there;
- the server restarts between a send and the read: the read (another process) returns what came
  since the last read, and only that;
- a terminal flooding output while a Python REPL in another is driven: every answer right, the
  flood read back as its newest 16 KiB;
- a terminal that prints more than the agent keeps of a command (64 MiB): its newest output is
  still read;
- input to a program that has exited: a clear error, in this process and the next one;
- quiet_ms: 0 returns at a key's echo, a longer one waits through a pause in the output;
- the cap of 8 live terminals (a program that exited unread frees its place), two processes
  starting the same terminal_id at once (one wins), a start that died half-way, a program deaf to SIGHUP ended by close, one
  send of more than 1 MiB refused, NUL and broken UTF-8 in the output, another sandbox's
  terminal not reachable by its id.

usage: test_terminal_pty.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "image"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import ocitest as oci  # noqa: E402
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SKIP = 77


class Server:
    """One `mcpbox serve` over stdio on a state directory; restart() replaces the process."""

    def __init__(self, mcpbox, state, env=None):
        self.mcpbox, self.state, self.env = mcpbox, state, env
        self.start()

    def start(self):
        env = dict(os.environ)
        env.update(self.env or {})
        self.c = Client(serve_argv(self.mcpbox, self.state, "--local-pool", 0), cwd="/", env=env)
        self.c.initialize("terminal-pty-test")

    def restart(self):
        assert self.c.close(timeout=60) == 0, "mcpbox serve exited non-zero (a sanitizer report?)"
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

    def term(self, sid, **kw):
        return self.ok("terminal", dict(sandbox_id=sid, **kw))

    def term_err(self, sid, **kw):
        return self.err("terminal", dict(sandbox_id=sid, **kw))


def check_image_without_script(mcpbox, base):
    """busybox's sh and a few applets: no script(1), no bash."""
    reg = oci.Registry(base)
    state = os.path.join(base, "img-state")
    s = Server(mcpbox, state, oci.ENV)
    sid = None
    try:
        reg.push_image("test/bare", "1", [("gzip", oci.busybox_layer())])
        r = s.call("create_sandbox", {"image": f"{reg.host}/test/bare:1"})
        assert not r.get("isError"), result_text(r)
        sid = r["structuredContent"]["sandbox_id"]
        r = s.ok("run_command", {"sandbox_id": sid, "command": "for t in script bash; do "
                                 "command -v $t || echo no-$t; done"})
        assert r["stdout"] == "no-script\nno-bash\n", r
        r = s.term(sid, action="start", command="sh", terminal_id="bare")
        assert r["running"] and "#" in r["output"], r
        r = s.term(sid, action="send", terminal_id="bare", input="echo $((6*7))", keys=["Enter"])
        assert "42\n" in r["output"], r
        s.term(sid, action="send", terminal_id="bare", input="while :; do :; done", keys=["Enter"])
        r = s.term(sid, action="send", terminal_id="bare", keys=["^C"])
        r = s.term(sid, action="send", terminal_id="bare", input="echo after", keys=["Enter"])
        assert "after\n" in r["output"] and r["running"], r
        s.term(sid, action="close", terminal_id="bare")
        r = s.term(sid, action="start", command="read -p 'Name? ' n; echo \"hi $n\"")
        assert r["output"] == "Name? ", r
        r = s.term(sid, action="send", terminal_id=r["terminal_id"], input="ann", keys=["Enter"])
        assert r["output"] == "ann\nhi ann\n" and r["exit_code"] == 0, r
    finally:
        if sid:
            s.call("destroy_sandbox", {"sandbox_id": sid})
        s.c.close(timeout=60)
        reg.close()
    print("an image without script(1) or bash: sh, ^C and a read -p prompt")


def check_restart_between_send_and_read(s, sid):
    s.term(sid, action="start", command="bash --norc -i", terminal_id="later")
    r = s.term(sid, action="send", terminal_id="later", input="sleep 1; echo late-$((2+3))",
               keys=["Enter"])
    assert "late-5" not in r["output"].replace("late-$((2+3))", ""), r
    s.restart()
    time.sleep(1.5)
    r = s.term(sid, action="read", terminal_id="later")
    assert "late-5\n" in r["output"] and "sleep 1" not in r["output"], r
    r2 = s.term(sid, action="read", terminal_id="later")
    assert r2["output"] == "" and r2["offset"] == r["next_offset"], r2
    s.term(sid, action="close", terminal_id="later")
    print("a restart between send and read: the read in the new process has what came since")


def check_flood_beside_repl(s, sid):
    s.term(sid, action="start", terminal_id="flood",
           command="while :; do echo flood-0123456789abcdefghijklmnopqrstuvwxyz; done")
    r = s.term(sid, action="start", command="python3 -q", terminal_id="py")
    assert r["output"].endswith(">>> "), r
    for i in range(20):
        r = s.term(sid, action="send", terminal_id="py", input=f"print({i}*{i}+1)",
                   keys=["Enter"], quiet_ms=200)  # the flood loads the machine: wait longer
        assert f"\n{i * i + 1}\n>>> " in r["output"], (i, r)
    r = s.term(sid, action="read", terminal_id="flood")
    assert len(r["output"].encode()) <= 16384 and "cut" in r.get("note", ""), r.get("note")
    assert r["next_offset"] > 100000 and r["output"].count("flood-0123") > 100, r["next_offset"]
    t0 = time.monotonic()
    r = s.term(sid, action="close", terminal_id="flood")
    assert r["closed"] and not r["running"] and time.monotonic() - t0 < 5, r
    s.term(sid, action="close", terminal_id="py")
    print("a flood in one terminal while a REPL in another answers every line")


def check_more_than_64_mib(s, sid):
    """The agent keeps a terminal's newest 64 MiB (a ring): what it prints after that is still
    read, and a read from long ago starts at the oldest byte kept."""
    t0 = time.monotonic()
    r = s.term(sid, action="start", terminal_id="long",
               command="head -c 70000000 /dev/zero | tr '\\0' x; echo; echo END-OF-FLOOD; sleep 60")
    while "END-OF-FLOOD" not in r["output"]:
        assert time.monotonic() - t0 < 200, f"no end after 200 s: {r['next_offset']} bytes"
        time.sleep(1)
        r = s.term(sid, action="read", terminal_id="long")
    assert r["next_offset"] > 70000000 and r["running"], r["next_offset"]
    r = s.term(sid, action="read", terminal_id="long", offset=r["next_offset"] - 100)
    assert r["output"].endswith("END-OF-FLOOD\n"), r
    s.term(sid, action="close", terminal_id="long")
    print("a terminal that printed 70 MB still shows its newest output")


def check_exited_program(s, sid):
    r = s.term(sid, action="start", command="echo bye; exit 3", terminal_id="done")
    assert not r["running"] and r["exit_code"] == 3 and "bye" in r["output"], r
    text = s.term_err(sid, action="send", terminal_id="done", input="x")
    assert "has exited" in text, text
    s.restart()
    text = s.term_err(sid, action="send", terminal_id="done", keys=["Enter"])
    assert "has exited" in text, text
    r = s.term(sid, action="read", terminal_id="done", offset=0)
    assert r["output"] == "bye\n" and r["exit_code"] == 3, r
    s.term(sid, action="close", terminal_id="done")
    text = s.term_err(sid, action="send", terminal_id="done", input="x")
    assert "no terminal" in text, text
    print("input to an exited program refused, in this process and the next; closed: gone")


def check_cap_and_race(s, sid, mcpbox, state):
    ids = [s.term(sid, action="start", command="cat")["terminal_id"] for _ in range(7)]
    s.term(sid, action="start", command="sleep 0.5", terminal_id="short", quiet_ms=0)
    text = s.term_err(sid, action="start", command="cat")
    assert "most terminals" in text, text
    time.sleep(1)  # "short" exits unread: its place is free again
    ids.append(s.term(sid, action="start", command="cat")["terminal_id"])
    text = s.term_err(sid, action="start", command="cat")
    assert "most terminals" in text, text
    for tid in ids:
        s.term(sid, action="close", terminal_id=tid)
    s.term(sid, action="close", terminal_id="short")
    other = Client(serve_argv(mcpbox, state, "--local-pool", 0), cwd="/")
    other.initialize("terminal-pty-race")
    args = {"name": "terminal", "arguments": {"sandbox_id": sid, "action": "start",
                                              "command": "cat", "terminal_id": "twin"}}
    ids = [s.c.request("tools/call", args), other.request("tools/call", args)]
    results = [s.c.replies([ids[0]], "race")[ids[0]], other.replies([ids[1]], "race")[ids[1]]]
    errors = [result_text(r) for r in results if r.get("isError")]
    assert len(errors) == 1 and "exists already" in errors[0], results
    assert other.close(timeout=60) == 0
    s.term(sid, action="close", terminal_id="twin")
    print("8 live terminals at most (an exited one frees its place); a name taken twice at once")


def check_quiet_ms(s, sid):
    """quiet_ms: 0 returns at the first unread output (a key's echo); a longer one waits through
    a pause in the program's output."""
    s.term(sid, action="start", command="cat", terminal_id="echo")
    r = s.term(sid, action="send", terminal_id="echo", input="abc", quiet_ms=0)
    assert r["output"] == "abc" and r["running"], r
    s.term(sid, action="close", terminal_id="echo")
    for quiet, want_two in ((0, False), (1000, True)):
        s.term(sid, action="start", terminal_id="pause",
               command="read x; echo one; sleep 0.3; echo two; sleep 30")
        r = s.term(sid, action="send", terminal_id="pause", keys=["Enter"], quiet_ms=quiet)
        assert ("two\n" in r["output"]) == want_two, (quiet, r)
        s.term(sid, action="close", terminal_id="pause")
    print("quiet_ms 0 returns at a key's echo; a longer quiet_ms waits through a pause")


def check_stale_start(s, sid, state):
    """A start whose process died between taking the name and getting its command leaves a row
    without one: it holds the name for a minute, then the next start takes it over."""
    db = sqlite3.connect(os.path.join(state, "mcpbox.db"), timeout=10)
    with db:
        for name, age_ms in (("ghost", 120000), ("young", 1000)):
            db.execute("INSERT INTO terminals VALUES (?, ?, '', 0, 0, ?)",
                       (sid, name, int(time.time() * 1000) - age_ms))
    db.close()
    text = s.term_err(sid, action="read", terminal_id="ghost")
    assert "still starting" in text, text
    r = s.term(sid, action="start", command="cat", terminal_id="ghost")
    assert r["running"], r
    text = s.term_err(sid, action="start", command="cat", terminal_id="young")
    assert "exists already" in text, text
    s.term(sid, action="close", terminal_id="ghost")
    print("a start that died half-way holds its name a minute, then is taken over")


def check_attacks(s, sid, sid2):
    s.term(sid, action="start", terminal_id="deaf", quiet_ms=0,
           command="trap '' HUP; echo $$ > /tmp/deaf.pid; while :; do sleep 1; done")
    time.sleep(0.3)
    r = s.term(sid, action="close", terminal_id="deaf")
    assert r["closed"] and not r["running"], r
    r = s.ok("run_command", {"sandbox_id": sid, "command": "kill -0 $(cat /tmp/deaf.pid) "
                             "2>/dev/null && echo alive || echo gone"})
    assert r["stdout"] == "gone\n", r
    s.term(sid, action="start", command="cat", terminal_id="big")
    text = s.term_err(sid, action="send", terminal_id="big", input="x" * (1536 * 1024))
    assert "pieces" in text, text
    r = s.term(sid, action="send", terminal_id="big", input="still", keys=["Enter"], quiet_ms=200)
    assert "still\nstill\n" in r["output"], r
    s.term(sid, action="close", terminal_id="big")
    r = s.term(sid, action="start", command="printf 'a\\0b\\377c\\n'", raw=True)
    assert r["output"].startswith("a") and "\ufffd" in r["output"] and "c" in r["output"], r
    s.term(sid, action="close", terminal_id=r["terminal_id"])
    s.term(sid, action="start", command="cat", terminal_id="mine")
    text = s.term_err(sid2, action="send", terminal_id="mine", input="x")
    assert "no terminal" in text, text
    s.term(sid, action="close", terminal_id="mine")
    print("close ends a program deaf to SIGHUP; > 1 MiB refused; NUL and bad UTF-8 replaced; "
          "another sandbox's terminal out of reach")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    mcpbox = os.path.abspath(a.mcpbox)
    for tool in (oci.REGISTRY_BIN, oci.BUSYBOX, "/usr/bin/python3", "/bin/bash"):
        if not os.path.exists(tool):
            print(f"FAIL: {tool} is missing: run scripts/install-deps.sh --test")
            return 1
    base = tempfile.mkdtemp(prefix="mbx-term-", dir="/tmp")
    os.chmod(base, 0o755)
    state = os.path.join(base, "state")
    s = Server(mcpbox, state)
    sids = []
    try:
        for _ in range(2):
            r = s.call("create_sandbox", {})
            if r.get("isError"):
                if "unsupported" in result_text(r).lower():
                    print(f"SKIP: {result_text(r)}")
                    return SKIP
                raise AssertionError(result_text(r))
            sids.append(r["structuredContent"]["sandbox_id"])
        check_restart_between_send_and_read(s, sids[0])
        check_flood_beside_repl(s, sids[0])
        check_more_than_64_mib(s, sids[0])
        check_exited_program(s, sids[0])
        check_cap_and_race(s, sids[0], mcpbox, state)
        check_quiet_ms(s, sids[0])
        check_stale_start(s, sids[0], state)
        check_attacks(s, sids[0], sids[1])
        check_image_without_script(mcpbox, base)
    finally:
        for sid in sids:
            s.call("destroy_sandbox", {"sandbox_id": sid})
        s.c.close(timeout=60)
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
