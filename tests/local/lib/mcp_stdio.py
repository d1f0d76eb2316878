"""A small MCP client over stdio for the local-backend tests: starts a server (`mcpbox serve`,
possibly behind nsenter, runuser or a wrapper such as prlimit) as a subprocess, writes one JSON-RPC
message a line to its stdin and reads its stdout until the reply with the id it waits for.

Only the standard library: tests/local/rootless runs the scripts as an ordinary user with the
system python3. What differs between tests stays theirs: the command line, the environment and
working directory, where stderr goes, how the server is stopped (stdin closed, or kill -9 through
.proc), and what is done with a request or notification the server sends on its own
(on_request, on_notification).
"""
import json
import subprocess

PROTOCOL_VERSION = "2025-11-25"


def serve_argv(mcpbox, state_dir, *args):
    """mcpbox serve on a state directory, with further options."""
    return [mcpbox, "serve", "--state-dir", state_dir] + [str(a) for a in args]


def result_text(result):
    """The text parts of a tools/call result, joined."""
    return "".join(c.get("text", "") for c in result.get("content", []))


class Client:
    """proc is the server's Popen; stderr, cwd and env are passed to it as they are (stderr None:
    the test's own stderr). on_request(msg) answers a request from the server (roots/list...);
    without it such requests are not answered. on_notification(msg) sees each notification.
    The server is started here; initialize() is the handshake (apart, so that a caller can hold
    on to proc before the server has to answer)."""

    def __init__(self, argv, stderr=None, cwd=None, env=None, on_request=None,
                 on_notification=None):
        self.on_request = on_request
        self.on_notification = on_notification
        self.next_id = 1
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, cwd=cwd, env=env)

    def initialize(self, client_name, capabilities=None):
        """initialize, then notifications/initialized; returns the server's initialize result."""
        result = self.call("initialize", {"protocolVersion": PROTOCOL_VERSION,
                                          "capabilities": capabilities or {},
                                          "clientInfo": {"name": client_name, "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params):
        """Sends a request without waiting; returns its id (for replies())."""
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def replies(self, ids, during):
        """Reads until every id in ids has its reply; returns {id: result}. A server that closes
        stdout first, or an error reply, fails with what was going on (during)."""
        results = {}
        while len(results) < len(ids):
            line = self.proc.stdout.readline()
            assert line, f"server closed stdout during {during}"
            msg = json.loads(line)
            if "method" in msg:  # the server's own request or notification
                if "id" in msg:
                    if self.on_request:
                        self.on_request(msg)
                elif self.on_notification:
                    self.on_notification(msg)
                continue
            if msg.get("id") in ids:
                assert "error" not in msg, f"{during}: {msg['error']}"
                results[msg["id"]] = msg["result"]
        return results

    def call(self, method, params):
        """One request and its result."""
        rid = self.request(method, params)
        return self.replies([rid], method)[rid]

    def tool_params(self, name, arguments, progress_token=None):
        params = {"name": name, "arguments": arguments}
        if progress_token:
            params["_meta"] = {"progressToken": progress_token}
        return params

    def call_tool(self, name, arguments, progress_token=None):
        """tools/call; the raw result (isError, content, structuredContent)."""
        return self.call("tools/call", self.tool_params(name, arguments, progress_token))

    def close(self, timeout):
        """Closes stdin (the client leaves) and waits for the server; returns its exit status.
        subprocess.TimeoutExpired if it does not exit in time."""
        self.proc.stdin.close()
        return self.proc.wait(timeout=timeout)
