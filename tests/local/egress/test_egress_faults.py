#!/usr/bin/env python3
"""Egress by policy: libuv calls of the proxy that do not fail in practice, made to fail.

The proxy ignored what uv_read_start (the first bytes of a connection), uv_poll_init and
uv_poll_start (the two sockets once connected) returned: a handle whose init had failed was
later closed as if it had been made (undefined behaviour in libuv: a crash here). mcpbox serve
runs with uv_fault.so preloaded, which fails chosen calls on TCP sockets (see there); each
failure must drop that one connection (the program sees it end, with no reply), say so in the
log, and leave the server serving: the next connection works, and the server exits cleanly.

usage: test_egress_faults.py --mcpbox PATH --fault-lib PATH   (root: the test hosts' namespace)
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from egress_env import World, check  # noqa: E402

POLICY = {"default_action": "deny", "egress": [{"action": "allow", "target": "allowed.test"}]}
# By address, so the proxy reads the Host header (uv_read_start) before it connects. The head
# ends only after a pause: the proxy connects on the Host line, and a server that could answer
# at once might finish the whole exchange in the proxy's first copy, before it watches the
# sockets (the call the 4th connection's fault is for).
CLIENT = r"""
import socket, time
s = socket.create_connection(("11.0.0.1", 80), timeout=20)
s.sendall(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n")
data = b""
try:
    time.sleep(0.2)
    s.sendall(b"Connection: close\r\n\r\n")
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except OSError as e:
    print("error", e)
print("reply", data.decode(errors="replace").splitlines()[-1:] if data else "none")
"""
# Which call fails, connection after connection (the numbers count calls on TCP sockets).
FAULTS = {"UVFAULT_READ_START": "1",      # 1st connection: reading its first bytes
          "UVFAULT_POLL_INIT": "1,3",     # 2nd: the sandbox's socket; 3rd: the outside one
          "UVFAULT_POLL_START": "1"}      # 4th: watching the sockets once copying starts
DROPPED = ["reading its first bytes", "polling its sockets", "polling its sockets",
           "watching its sockets"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--fault-lib", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    # A sanitizer runtime linked into mcpbox need not come first when another library is
    # preloaded (it is static with clang; gcc's is shared and checks the order).
    asan = os.environ.get("ASAN_OPTIONS", "")
    wrap = ["env", "LD_PRELOAD=" + os.path.abspath(a.fault_lib),
            "ASAN_OPTIONS=" + (asan + ":" if asan else "") + "verify_asan_link_order=0"]
    wrap += ["%s=%s" % kv for kv in FAULTS.items()]
    log = tempfile.TemporaryFile()
    w = World(os.path.abspath(a.mcpbox), wrap=wrap, stderr=log)
    try:
        sid = w.tool("create_sandbox", network_policy=POLICY)["structuredContent"]["sandbox_id"]
        w.tool("write_file", sandbox_id=sid, path="/workspace/client.py", content=CLIENT)
        for i, doing in enumerate(DROPPED, 1):
            r = w.run(sid, "python3 /workspace/client.py")
            check(r["exit_code"] == 0 and "hello from" not in r["stdout"],
                  "connection %d dropped when %s failed" % (i, doing), repr(r))
        r = w.run(sid, "python3 /workspace/client.py")
        check(r["exit_code"] == 0 and "hello from 11.0.0.1:80 host=allowed.test" in
              r["stdout"], "the next connection is served", repr(r))
    finally:
        w.close()
    check(w.serve.returncode == 0, "mcpbox serve exited cleanly", "exit %s" % w.serve.returncode)
    log.seek(0)
    text = log.read().decode(errors="replace")
    for doing in set(DROPPED):
        want = "egress connection (port 80) dropped: %s" % doing
        check(text.count(want) == DROPPED.count(doing), "logged: %s" % want, text[-3000:])
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
