"""The benchmark scripts' MCP client: one `mcpbox serve` over stdio, one JSON-RPC request at a
time, raw JSON lines and no SDK, so that the client's own cost per call stays small (about 0.1
ms in Python). Imported by tests/bench/local/ab_cold.py and the tests/bench/workspace/ scripts.
"""
import json
import subprocess
import time

PROTOCOL_VERSION = "2025-06-18"


class StdioServer:
    """`argv` starts the server (`mcpbox serve ...`); extra keyword arguments go to Popen."""

    def __init__(self, argv, client="mcpbox-bench", **popen):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, **popen)
        self.next_id = 0
        self.rpc("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                "clientInfo": {"name": client, "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def rpc(self, method, params):
        """The whole response to one request (notifications and other ids are skipped)."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"{self.argv[0]}: the server closed stdout during {method}")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply

    def tool(self, name, args):
        """(seconds on the client's clock, the result); a failed call ends the benchmark."""
        t0 = time.perf_counter()
        reply = self.rpc("tools/call", {"name": name, "arguments": args})
        seconds = time.perf_counter() - t0
        if "result" not in reply or reply["result"].get("isError"):
            raise SystemExit(f"{self.argv[0]}: {name} failed: {reply}")
        return seconds, reply["result"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()
