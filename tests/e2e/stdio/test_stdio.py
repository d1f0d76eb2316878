#!/usr/bin/env python3
"""Raw stdio end-to-end tests of the real mcpbox binary (python3 stdlib only).

usage: test_stdio.py --mcpbox PATH [unittest args]

Each test starts `mcpbox serve --conformance-fixtures` with a private state directory, writes
newline-delimited JSON-RPC to its stdin and reads its stdout, checking every reply, error code
and id, that stdout carries nothing but JSON-RPC messages, and that the server stays usable
after bad input.
"""
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

MCPBOX = None
TIMEOUT = 20.0
MAX_MESSAGE_BYTES = 32 * 1024 * 1024  # mcp/limits.h MCP_MAX_MESSAGE_BYTES


def init_params(version="2025-11-25", caps=None):
    return {"protocolVersion": version, "capabilities": caps or {},
            "clientInfo": {"name": "e2e-stdio", "version": "1"}}


class Server:
    """mcpbox serve over pipes; stdout lines are parsed on a reader thread."""

    def __init__(self, *args, stdin=subprocess.PIPE, db=None):
        self.state = tempfile.mkdtemp(prefix="mcpbox-e2e-")
        if db is not None:  # bytes to find in the state database file at start
            with open(os.path.join(self.state, "mcpbox.db"), "wb") as f:
                f.write(db)
        cmd = [MCPBOX, "serve", "--conformance-fixtures", "--no-local",
               "--state-dir", self.state] + list(args)
        self.proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.lines = queue.Queue()
        self.bad_lines = []
        self.stderr = b""
        self.threads = [threading.Thread(target=self._read_stdout, daemon=True),
                        threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self.threads:
            t.start()
        self.next_id = 1000

    def _read_stdout(self):
        for raw in self.proc.stdout:
            try:
                msg = json.loads(raw)
                if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
                    raise ValueError("not a JSON-RPC 2.0 message")
            except ValueError:
                self.bad_lines.append(raw)
                continue
            self.lines.put(msg)
        self.lines.put(None)

    def _read_stderr(self):
        self.stderr = self.proc.stderr.read()

    def write(self, data):
        if isinstance(data, (dict, list)):
            data = json.dumps(data)
        if isinstance(data, str):
            data = data.encode()
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj):
        self.write(json.dumps(obj) + "\n")

    def request(self, method, params=None, id=None):
        if id is None:
            self.next_id += 1
            id = self.next_id
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return id

    def read(self, timeout=TIMEOUT):
        try:
            msg = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no message from mcpbox within %.0f s" % timeout)
        if msg is None:
            raise AssertionError("mcpbox closed stdout; stderr: %s" % self.stderr[-2000:])
        return msg

    def reply(self, id, timeout=TIMEOUT, collect=None):
        """The response to id; other messages go to collect (a list) if given."""
        while True:
            msg = self.read(timeout)
            if "method" not in msg and msg.get("id") == id:
                return msg
            if collect is not None:
                collect.append(msg)

    def call(self, method, params=None, id=None):
        return self.reply(self.request(method, params, id))

    def initialize(self, version="2025-11-25", caps=None):
        r = self.call("initialize", init_params(version, caps))
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def close(self, expect_rc=0):
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            shutil.rmtree(self.state, ignore_errors=True)
        for t in self.threads:
            t.join(timeout=TIMEOUT)
        self.proc.stdout.close()
        self.proc.stderr.close()
        assert not self.bad_lines, "non-JSON-RPC output on stdout: %r" % self.bad_lines[:3]
        assert expect_rc is None or rc == expect_rc, \
            "exit status %s; stderr: %s" % (rc, self.stderr[-3000:].decode(errors="replace"))
        return rc


class StdioTest(unittest.TestCase):
    def setUp(self):
        self.srv = Server()

    def tearDown(self):
        if self.srv:
            self.srv.close()

    def assertError(self, reply, code, contains=None):
        self.assertIn("error", reply, reply)
        self.assertEqual(reply["error"]["code"], code, reply)
        if contains:
            self.assertIn(contains, reply["error"]["message"])

    def assertAlive(self):
        self.assertEqual(self.srv.call("ping")["result"], {})

    # ---- lifecycle -----------------------------------------------------------------------------

    def test_initialize_and_version_negotiation(self):
        r = self.srv.initialize()["result"]
        self.assertEqual(r["protocolVersion"], "2025-11-25")
        self.assertEqual(r["serverInfo"]["name"], "mcpbox")
        caps = r["capabilities"]
        self.assertEqual(caps["tools"], {"listChanged": True})
        self.assertEqual(caps["resources"], {"subscribe": True, "listChanged": True})
        self.assertEqual(caps["prompts"], {"listChanged": True})
        self.assertEqual(caps["logging"], {})
        self.assertEqual(caps["completions"], {})
        self.assertTrue(r["instructions"])
        for asked, got in [("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
                           ("2024-11-05", "2025-11-25"), ("9999-01-01", "2025-11-25")]:
            other = Server()
            try:
                self.assertEqual(other.initialize(asked)["result"]["protocolVersion"], got)
            finally:
                other.close()

    def test_requests_before_initialize(self):
        self.assertError(self.srv.call("tools/list"), -32600, "initialize")
        self.assertError(self.srv.call("tools/call", {"name": "test_simple_text"}), -32600)
        self.assertAlive()  # ping is allowed before initialize
        self.srv.initialize()
        self.assertIn("tools", self.srv.call("tools/list")["result"])

    def test_second_initialize_rejected(self):
        self.srv.initialize()
        self.assertError(self.srv.call("initialize", init_params()), -32600, "already")

    # ---- tools -----------------------------------------------------------------------------------

    def test_tools_list_with_fixtures(self):
        self.srv.initialize()
        tools = self.srv.call("tools/list")["result"]["tools"]
        names = [t["name"] for t in tools]
        self.assertEqual(names, sorted(names), "deterministic order")
        for name in ["test_simple_text", "test_image_content", "test_audio_content",
                     "test_embedded_resource", "test_multiple_content_types",
                     "test_tool_with_logging", "test_tool_with_progress", "test_error_handling",
                     "test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults",
                     "test_elicitation_sep1330_enums", "json_schema_2020_12_tool",
                     "test_reconnection"]:
            self.assertIn(name, names)
        for t in tools:
            self.assertTrue(t["description"])
            self.assertIsInstance(t["inputSchema"], dict)
        js = next(t for t in tools if t["name"] == "json_schema_2020_12_tool")["inputSchema"]
        self.assertEqual(js["$schema"], "https://json-schema.org/draft/2020-12/schema")
        self.assertEqual(js["$defs"]["address"]["type"], "object")
        self.assertIs(js["additionalProperties"], False)
        self.assertEqual(js["$defs"]["address"]["$anchor"], "addressDef")   # SEP-2106
        self.assertIn("anyOf", js["allOf"][0])
        self.assertTrue({"if", "then", "else"} <= set(js))

    def test_fixtures_absent_without_flag(self):
        state = tempfile.mkdtemp(prefix="mcpbox-e2e-")
        try:
            p = subprocess.run([MCPBOX, "serve", "--no-local", "--state-dir", state],
                               input=(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                  "params": init_params()}) + "\n" +
                                      json.dumps({"jsonrpc": "2.0", "id": 2,
                                                  "method": "tools/list"}) + "\n").encode(),
                               capture_output=True, timeout=TIMEOUT)
        finally:
            shutil.rmtree(state, ignore_errors=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        replies = [json.loads(l) for l in p.stdout.splitlines()]
        tools = next(r for r in replies if r.get("id") == 2)["result"]["tools"]
        self.assertFalse([t for t in tools if t["name"].startswith("test_")])

    def test_tool_call_contents_and_errors(self):
        self.srv.initialize()
        r = self.srv.call("tools/call", {"name": "test_simple_text"})["result"]
        self.assertEqual(r["content"][0]["text"], "This is a simple text response for testing.")
        r = self.srv.call("tools/call", {"name": "test_audio_content", "arguments": {}})["result"]
        self.assertEqual(r["content"][0]["mimeType"], "audio/wav")
        r = self.srv.call("tools/call", {"name": "test_error_handling", "arguments": {}})["result"]
        self.assertIs(r["isError"], True)
        # invalid arguments: a tool result with isError naming the field (SEP-1303)
        r = self.srv.call("tools/call", {"name": "test_sampling", "arguments": {"prompt": 3}})
        self.assertIs(r["result"]["isError"], True)
        self.assertIn("arguments.prompt: must be a string, got integer",
                      r["result"]["content"][0]["text"])
        r = self.srv.call("tools/call", {"name": "test_sampling", "arguments": {}})
        self.assertIn('missing required property "prompt"', r["result"]["content"][0]["text"])
        r = self.srv.call("tools/call", {"name": "json_schema_2020_12_tool",
                                         "arguments": {"name": "x", "extra": 1}})
        self.assertIn('unknown property "extra"', r["result"]["content"][0]["text"])
        r = self.srv.call("tools/call", {"name": "json_schema_2020_12_tool",
                                         "arguments": {"name": "x", "contactMethod": "phone",
                                                       "email": "x@example.com"}})
        self.assertIn('missing required property "phone"', r["result"]["content"][0]["text"])
        args = {"name": "x", "contactMethod": "phone", "phone": "+1 555 0100",
                "address": {"city": "c"}}
        r = self.srv.call("tools/call", {"name": "json_schema_2020_12_tool", "arguments": args})
        self.assertEqual(r["result"]["structuredContent"], args)
        # unknown tool: a JSON-RPC error
        self.assertError(self.srv.call("tools/call", {"name": "nope"}), -32602, "nope")

    def test_progress_and_logging_notifications(self):
        self.srv.initialize()
        self.assertEqual(self.srv.call("logging/setLevel", {"level": "debug"})["result"], {})
        seen = []
        id = self.srv.request("tools/call", {"name": "test_tool_with_progress", "arguments": {},
                                             "_meta": {"progressToken": 77}})
        self.srv.reply(id, collect=seen)
        prog = [m["params"] for m in seen if m.get("method") == "notifications/progress"]
        self.assertEqual([p["progress"] for p in prog], [0, 50, 100])
        self.assertTrue(all(p["progressToken"] == 77 for p in prog))
        seen = []
        self.srv.reply(self.srv.request("tools/call", {"name": "test_tool_with_logging"}),
                       collect=seen)
        logs = [m["params"] for m in seen if m.get("method") == "notifications/message"]
        self.assertEqual(len(logs), 3)
        self.assertEqual(logs[0]["data"], "Tool execution started")

    def test_cancellation_suppresses_reply(self):
        self.srv.initialize()
        self.srv.request("tools/call", {"name": "test_tool_with_progress",
                                        "_meta": {"progressToken": "t"}}, id="to-cancel")
        self.srv.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": "to-cancel", "reason": "test"}})
        seen = []
        time.sleep(0.3)  # longer than the fixture would have taken
        self.srv.reply(self.srv.request("ping"), collect=seen)
        self.assertFalse([m for m in seen if m.get("id") == "to-cancel"], seen)

    def test_sampling_round_trip(self):
        self.srv.initialize(caps={"sampling": {}})
        id = self.srv.request("tools/call", {"name": "test_sampling",
                                             "arguments": {"prompt": "hello"}})
        req = self.srv.read()
        self.assertEqual(req["method"], "sampling/createMessage")
        self.assertEqual(req["params"]["messages"][0]["content"]["text"], "hello")
        self.srv.send({"jsonrpc": "2.0", "id": req["id"],
                       "result": {"role": "assistant", "model": "m",
                                  "content": {"type": "text", "text": "world"}}})
        self.assertEqual(self.srv.reply(id)["result"]["content"][0]["text"], "LLM response: world")

    # ---- bad input -------------------------------------------------------------------------------

    def test_every_error_code(self):
        self.srv.initialize()
        self.srv.write(b"this is not json\n")
        self.assertError(self.srv.read(), -32700, "Parse error")
        self.srv.send({"jsonrpc": "1.0", "id": 5, "method": "ping"})
        r = self.srv.read()
        self.assertError(r, -32600, '"2.0"')
        self.assertEqual(r["id"], 5)
        self.assertError(self.srv.call("no/such/method", id="m-1"), -32601, "no/such/method")
        self.assertError(self.srv.call("tools/call", {"name": 42}), -32602,
                         '"name" must be a string, got integer')
        self.assertError(self.srv.call("resources/read", {"uri": "test://missing"}), -32002)
        self.assertError(self.srv.call("logging/setLevel", {"level": "verbose"}), -32602)
        self.assertAlive()

    def test_ids_echoed_exactly(self):
        self.srv.initialize()
        for id in ["abc", "", 0, -7, 2 ** 53 + 1, "\u00e9\u6f22"]:
            self.srv.send({"jsonrpc": "2.0", "id": id, "method": "ping"})
            r = self.srv.read()
            self.assertEqual(r["id"], id)
            self.assertEqual(type(r["id"]), type(id))
        for bad in [1.5, None, [1], {"a": 1}, True]:
            self.srv.send({"jsonrpc": "2.0", "id": bad, "method": "ping"})
            r = self.srv.read()
            self.assertError(r, -32600, "id")
            self.assertIsNone(r["id"])

    def test_garbage_bytes(self):
        self.srv.initialize()
        junk = bytes(range(256)).replace(b"\n", b"") * 40
        self.srv.write(junk + b"\n")
        self.assertError(self.srv.read(), -32700)
        self.srv.write(b"\x00\x00\x00\n")
        self.assertError(self.srv.read(), -32700)
        self.srv.write(b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff\xfe"}\n')
        self.assertError(self.srv.read(), -32700)
        self.srv.write(b"\n\n   \r\n")  # blank lines are ignored
        self.assertAlive()

    def test_truncated_message(self):
        self.srv.initialize()
        self.srv.write(b'{"jsonrpc":"2.0","id":9,"method":"pi\n')
        self.assertError(self.srv.read(), -32700)
        self.assertAlive()
        # A message cut off by EOF: no reply, clean exit.
        self.srv.write(b'{"jsonrpc":"2.0","id":10,"method":"ping"')
        self.srv.proc.stdin.close()
        self.assertIsNone(self.srv.lines.get(timeout=TIMEOUT))
        self.assertEqual(self.srv.close(), 0)
        self.srv = None

    def test_batch_rejected(self):
        self.srv.initialize()
        self.srv.write(json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                   {"jsonrpc": "2.0", "id": 2, "method": "ping"}]) + "\n")
        r = self.srv.read()
        self.assertError(r, -32600, "batch")
        self.srv.write("[]\n")
        self.assertError(self.srv.read(), -32600)
        self.assertAlive()

    def test_wrong_param_types(self):
        self.srv.initialize()
        cases = [("tools/call", [1, 2], -32602),
                 ("tools/call", {"name": "test_simple_text", "arguments": "x"}, -32602),
                 ("tools/call", {"name": "test_simple_text", "_meta": {"progressToken": 1.5}},
                  -32602),
                 ("prompts/get", {"name": ["x"]}, -32602),
                 ("resources/read", {}, -32602),
                 ("completion/complete", {"ref": {"type": "ref/nope"}}, -32602)]
        for method, params, code in cases:
            self.assertError(self.srv.call(method, params), code)
        self.srv.send({"jsonrpc": "2.0", "id": 77, "method": "ping", "params": "str"})
        self.assertError(self.srv.read(), -32600, "params")
        self.assertAlive()

    def test_over_limit_message(self):
        """100 MiB on one line: one error, no buffering of the whole line, still usable."""
        self.srv.initialize()
        chunk = b"x" * (1024 * 1024)
        self.srv.write(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"')
        for _ in range(100):
            self.srv.write(chunk)
        self.srv.write(b'"}}\n')
        r = self.srv.read(timeout=60)
        self.assertError(r, -32600, "larger than the limit")
        self.assertEqual(r["error"]["data"]["limit"], MAX_MESSAGE_BYTES)
        self.assertAlive()
        with open("/proc/%d/status" % self.srv.proc.pid) as f:
            hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) * 1024
        self.assertLess(hwm, 100 * 1024 * 1024, "peak RSS shows the 100 MiB line was buffered")
        # A message just under the limit is still accepted.
        pad = "y" * (MAX_MESSAGE_BYTES - 200)
        self.srv.send({"jsonrpc": "2.0", "id": "big", "method": "ping", "params": {"pad": pad}})
        self.assertEqual(self.srv.reply("big", timeout=60)["result"], {})

    # ---- transport -------------------------------------------------------------------------------

    def test_eof_waits_for_in_flight_requests(self):
        self.srv.initialize()
        id = self.srv.request("tools/call", {"name": "test_tool_with_logging"})
        self.srv.proc.stdin.close()
        self.assertIn("result", self.srv.reply(id))
        self.assertEqual(self.srv.close(), 0)
        self.srv = None

    def test_eof_during_sampling_exits_promptly(self):
        self.srv.initialize(caps={"sampling": {}})
        id = self.srv.request("tools/call", {"name": "test_sampling", "arguments": {"prompt": "x"}})
        self.assertEqual(self.srv.read()["method"], "sampling/createMessage")
        start = time.monotonic()
        self.srv.proc.stdin.close()
        r = self.srv.reply(id)
        self.assertIs(r["result"]["isError"], True)
        self.assertEqual(self.srv.close(), 0)
        self.srv = None
        self.assertLess(time.monotonic() - start, 5.0)

    def test_stdin_regular_file(self):
        self.srv.close()
        self.srv = None
        with tempfile.TemporaryFile() as f:
            f.write((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": init_params()}) + "\n" +
                     json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n").encode())
            f.seek(0)
            srv = Server(stdin=f)
            self.assertEqual(srv.reply(1)["result"]["protocolVersion"], "2025-11-25")
            self.assertIn("tools", srv.reply(2)["result"])
            self.assertEqual(srv.close(), 0)

    def test_stdout_closed_exits_cleanly(self):
        self.srv.close()
        self.srv = None
        state = tempfile.mkdtemp(prefix="mcpbox-e2e-")
        p = subprocess.Popen([MCPBOX, "serve", "--conformance-fixtures", "--no-local",
                              "--state-dir", state], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        p.stdout.close()  # the client stops reading: every write fails with EPIPE
        try:
            for i, (method, params) in enumerate([
                    ("initialize", init_params()),
                    ("tools/call", {"name": "test_tool_with_progress",
                                    "_meta": {"progressToken": 1}})]):
                try:
                    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                               "params": params}) + "\n").encode())
                    p.stdin.flush()
                except BrokenPipeError:
                    break  # it already stopped after the first failed write
            self.assertEqual(p.wait(timeout=TIMEOUT), 0)
        finally:
            if p.poll() is None:
                p.kill()
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass
            shutil.rmtree(state, ignore_errors=True)

    # ---- the state store opens on first use -------------------------------------------------

    def test_store_opened_by_the_first_sandbox_request(self):
        db = os.path.join(self.srv.state, "mcpbox.db")
        self.srv.initialize()
        self.assertIn("tools", self.srv.call("tools/list")["result"])
        self.assertIn("content", self.srv.call("tools/call", {"name": "test_simple_text"})["result"])
        self.assertIn("prompts", self.srv.call("prompts/list")["result"])
        self.assertTrue(os.path.isdir(self.srv.state))
        self.assertFalse(os.path.exists(db), "the store was opened before it was needed")
        r = self.srv.call("tools/call", {"name": "list_sandboxes", "arguments": {}})["result"]
        self.assertFalse(r.get("isError"), r)
        self.assertTrue(os.path.exists(db))

    def test_unopenable_store_fails_the_request_not_the_server(self):
        self.srv.close()
        junk = b"definitely not SQLite " * 50
        self.srv = Server(db=junk)
        self.srv.initialize()
        for _ in range(2):  # tried again on each request, and each fails the same way
            r = self.srv.call("tools/call", {"name": "list_sandboxes", "arguments": {}})["result"]
            self.assertIs(r["isError"], True)
            self.assertIn("corrupt or not a SQLite database", r["content"][0]["text"])
        self.assertIn("content", self.srv.call("tools/call", {"name": "test_simple_text"})["result"])
        self.assertAlive()
        with open(os.path.join(self.srv.state, "mcpbox.db"), "rb") as f:
            self.assertEqual(f.read(), junk)

    def test_bad_state_dir_fails_at_start(self):
        with tempfile.NamedTemporaryFile(prefix="mcpbox-e2e-file-") as f:
            p = subprocess.run([MCPBOX, "serve", "--no-local", "--state-dir", f.name],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(b"is not a directory", p.stderr)
        self.assertEqual(p.stdout, b"")

    def test_sigterm_exits_cleanly(self):
        self.srv.initialize()
        self.srv.request("tools/call", {"name": "test_tool_with_progress"})
        self.srv.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.srv.proc.wait(timeout=TIMEOUT), 0)
        self.assertEqual(self.srv.close(), 0)
        self.srv = None


def main():
    global MCPBOX
    argv = sys.argv[:]
    if "--mcpbox" in argv:
        i = argv.index("--mcpbox")
        MCPBOX = argv[i + 1]
        del argv[i:i + 2]
    if not MCPBOX or not os.access(MCPBOX, os.X_OK):
        print("SKIP: no mcpbox binary (--mcpbox PATH)")
        sys.exit(77)
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
