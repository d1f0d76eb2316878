#!/usr/bin/env python3
"""MCP 2026-07-28 on stdio, raw JSON-RPC lines against `mcpbox serve --conformance-fixtures`:
the era is chosen per connection (initialize first: 2025-11-25 for good; _meta without
initialize: 2026-07-28), _meta checks, removed methods, MRTR with a sealed requestState, tasks
(create, poll, update, cancel) and notifications/cancelled of a stateless request.

    stdio_modern.py MCPBOX_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
TIMEOUT_S = 15


class Server:
    def __init__(self, binary, state_dir):
        self.proc = subprocess.Popen(
            [binary, "serve", "--conformance-fixtures", "--state-dir", state_dir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.msgs = []
        self.cond = threading.Condition()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.msgs.append(json.loads(line))
                self.cond.notify_all()

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params=None, meta=True, caps=None, wait=True):
        self.next_id += 1
        params = dict(params or {})
        if meta:
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                               "io.modelcontextprotocol/clientCapabilities": caps or {}}
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.reply(self.next_id) if wait else self.next_id

    def reply(self, rid, timeout=TIMEOUT_S):
        end = time.time() + timeout
        with self.cond:
            while True:
                for m in self.msgs:
                    if m.get("id") == rid and ("result" in m or "error" in m):
                        return m
                left = end - time.time()
                if left <= 0:
                    raise AssertionError(f"no reply to id {rid} within {timeout} s")
                self.cond.wait(left)

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def code(m):
    return m.get("error", {}).get("code")


def case_modern(srv):
    d = srv.request("server/discover")["result"]
    assert d["supportedVersions"] == [MODERN], d
    assert TASKS in d["capabilities"]["extensions"], d
    assert d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcpbox", d
    lst = srv.request("tools/list")["result"]
    assert lst["resultType"] == "complete" and lst["cacheScope"] == "public", list(lst)
    assert code(srv.request("tools/list", meta=False)) == -32600  # not initialized, no _meta
    bad = srv.request("server/discover", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "1999-01-01",
        "io.modelcontextprotocol/clientCapabilities": {}}}, meta=False)
    assert code(bad) == -32022 and bad["error"]["data"]["requested"] == "1999-01-01", bad
    for removed in ("ping", "initialize", "logging/setLevel", "resources/subscribe"):
        assert code(srv.request(removed)) == -32601, removed


def flip_last(s):
    return s[:-1] + ("0" if s[-1] != "0" else "1")


def case_mrtr(srv):
    name = "test_input_required_result_multi_round"
    caps = {"elicitation": {}}
    r1 = srv.request("tools/call", {"name": name, "arguments": {}}, caps=caps)["result"]
    assert r1["resultType"] == "input_required" and "step1" in r1["inputRequests"], r1
    answer = {"step1": {"action": "accept", "content": {"name": "Ada"}}}
    r2 = srv.request("tools/call", {"name": name, "arguments": {}, "inputResponses": answer,
                                    "requestState": r1["requestState"]}, caps=caps)["result"]
    assert "step2" in r2["inputRequests"] and r2["requestState"] != r1["requestState"], r2
    forged = srv.request("tools/call", {"name": name, "arguments": {},
                                        "inputResponses": answer,
                                        "requestState": flip_last(r1["requestState"])},
                         caps=caps)
    assert code(forged) == -32602, forged
    r3 = srv.request("tools/call", {"name": name, "arguments": {}, "inputResponses": {
        "step2": {"action": "accept", "content": {"color": "green"}}},
        "requestState": r2["requestState"]}, caps=caps)["result"]
    assert r3["content"][0]["text"] == "Ada likes green", r3
    nocap = srv.request("tools/call", {"name": name, "arguments": {}})
    assert code(nocap) == -32021 and "elicitation" in nocap["error"]["data"][
        "requiredCapabilities"], nocap


def poll(srv, task_id, caps, want):
    for _ in range(100):
        t = srv.request("tasks/get", {"taskId": task_id}, caps=caps)["result"]
        if t["status"] in want:
            return t
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} stuck in {t['status']}")


def case_tasks(srv):
    caps = {"elicitation": {}, "extensions": {TASKS: {}}}
    c = srv.request("tools/call", {"name": "slow_compute",
                                   "arguments": {"seconds": 0.3, "label": "stdio"}},
                    caps=caps)["result"]
    assert c["resultType"] == "task" and c["status"] == "working", c
    done = poll(srv, c["taskId"], caps, ("completed",))
    assert "Computed stdio" in done["result"]["content"][0]["text"], done
    ask = srv.request("tools/call", {"name": "confirm_delete",
                                     "arguments": {"filename": "x"}}, caps=caps)["result"]
    parked = poll(srv, ask["taskId"], caps, ("input_required",))
    key = next(iter(parked["inputRequests"]))
    ack = srv.request("tasks/update", {"taskId": ask["taskId"], "inputResponses": {
        key: {"action": "accept", "content": {"confirm": True}}}}, caps=caps)["result"]
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}, ack
    assert poll(srv, ask["taskId"], caps, ("completed",))["result"]["content"][0][
        "text"] == "Deleted x"
    long = srv.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}},
                       caps=caps)["result"]
    srv.request("tasks/cancel", {"taskId": long["taskId"]}, caps=caps)
    assert poll(srv, long["taskId"], caps, ("cancelled",))["status"] == "cancelled"
    assert code(srv.request("tasks/get", {"taskId": long["taskId"]})) == -32021
    assert code(srv.request("tasks/get", {"taskId": "0" * 32}, caps=caps)) == -32602


def case_cancel(srv):
    rid = srv.request("tools/call", {"name": "test_tool_with_progress", "arguments": {}},
                      wait=False)
    srv.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": rid}})
    time.sleep(0.5)
    with srv.cond:
        assert not any(m.get("id") == rid for m in srv.msgs), "a cancelled request was answered"


def case_listen(srv):
    lid = srv.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}},
                      wait=False)

    def tagged(method):
        with srv.cond:
            return [m for m in srv.msgs if m.get("method") == method and
                    m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == lid]

    time.sleep(0.3)
    ack = tagged("notifications/subscriptions/acknowledged")
    assert len(ack) == 1 and ack[0]["params"]["notifications"] == {"toolsListChanged": True}, ack
    srv.request("tools/call", {"name": "test_trigger_prompt_change", "arguments": {}})
    srv.request("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
    time.sleep(0.3)
    assert len(tagged("notifications/tools/list_changed")) == 1
    assert tagged("notifications/prompts/list_changed") == [], "filtered out"
    srv.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": lid}})
    srv.request("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
    time.sleep(0.3)
    assert len(tagged("notifications/tools/list_changed")) == 1, "nothing after the cancel"
    with srv.cond:
        assert not any(m.get("id") == lid for m in srv.msgs), "a listen stream was answered"


def case_legacy(binary, state_dir):
    srv = Server(binary, state_dir)
    try:
        srv.next_id += 1
        srv.send({"jsonrpc": "2.0", "id": srv.next_id, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "legacy", "version": "1"}}})
        init = srv.reply(srv.next_id)["result"]
        assert init["protocolVersion"] == "2025-11-25", init
        srv.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # After initialize the connection is 2025-11-25 for good, whatever _meta says.
        lst = srv.request("tools/list")["result"]
        assert "resultType" not in lst and "ttlMs" not in lst, list(lst)
        assert srv.request("ping")["result"] == {}
        assert code(srv.request("server/discover")) == -32601
    finally:
        srv.close()


def main():
    binary = sys.argv[1]
    failed = 0
    with tempfile.TemporaryDirectory() as state_dir:
        srv = Server(binary, state_dir)
        cases = [("2026-07-28 without initialize: discover, checks, removed methods",
                  lambda: case_modern(srv)),
                 ("MRTR over stdio: multi-round, sealed state, capability", lambda: case_mrtr(srv)),
                 ("tasks over stdio: create, poll, update, cancel, gating",
                  lambda: case_tasks(srv)),
                 ("notifications/cancelled of a stateless request", lambda: case_cancel(srv)),
                 ("subscriptions/listen: ack, filter, tagging, cancel", lambda: case_listen(srv)),
                 ("initialize first: legacy semantics for the connection",
                  lambda: case_legacy(binary, state_dir))]
        for n, (name, fn) in enumerate(cases, 1):
            try:
                fn()
                print(f"ok {n} - {name}")
            except Exception as e:  # a failed case is reported, the others still run
                failed += 1
                print(f"not ok {n} - {name}\n# {type(e).__name__}: {e}")
        srv.close()
        rc = srv.proc.returncode
        if rc != 0:
            failed += 1
            print(f"not ok {len(cases) + 1} - the server exited {rc}")
        print(f"1..{len(cases) + (1 if rc != 0 else 0)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
