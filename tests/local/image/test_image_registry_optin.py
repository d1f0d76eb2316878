#!/usr/bin/env python3
"""Image references cannot scan the host's services (issue 32, "also seen"): an image reference
such as 127.0.0.1:PORT/x made mcpbox send a GET to any port on loopback and handed the reply's
words back to the agent. Against a plain HTTP server on loopback whose every answer holds a
random secret, through `mcpbox serve`:
- without the person's opt-in (MCPBOX_REGISTRIES) a create naming it by address, as localhost,
  or by a name that resolves to loopback fails with an error that says how to allow it, and the
  server sees no request at all;
- with the opt-in the pull reaches it, and answers that are not a registry's (an error page, a
  page served as a manifest, even a forged registry error from such a page) come back as "did
  not answer as an OCI registry" with no byte of the body.

usage: test_image_registry_optin.py --mcpbox PATH
"""
import argparse
import http.server
import json
import os
import secrets
import shutil
import socket
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SECRET = "s3cret-" + secrets.token_hex(8)
hits = []


def check(cond, what, detail=""):
    if not cond:
        raise AssertionError("%s\n%s" % (what, detail))
    print("ok - %s" % what, flush=True)


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        hits.append(self.path)
        if "/page/" in self.path:  # any web page, served with 200
            body, ctype, status = ("<html>%s</html>" % SECRET).encode(), "text/html", 200
        elif "/jsonish/" in self.path:  # a JSON API's 200 that is no manifest
            body, ctype, status = json.dumps({"secret": SECRET}).encode(), "application/json", 200
        elif "/broken/" in self.path:  # not JSON at all, sent as JSON
            body, ctype, status = SECRET.encode(), "application/json", 200
        else:  # an error page quoting the secret
            body, ctype, status = ("no such thing: %s" % SECRET).encode(), "text/plain", 404
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(mcpbox, state, registries):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MCPBOX_REGISTRIES", "MCPBOX_INSECURE_REGISTRIES")}
    if registries:
        env["MCPBOX_REGISTRIES"] = registries
    c = Client(serve_argv(mcpbox, state, "--local-pool", "0"), env=env,
               stderr=open(os.path.join(state, "..", "serve.log"), "a"))
    c.initialize("registry-optin-test")
    return c


def create_error(c, image):
    res = c.call_tool("create_sandbox", {"image": image})
    check(res.get("isError"), "create %s fails" % image, json.dumps(res)[:600])
    text = result_text(res) + json.dumps(res)
    check(SECRET not in text, "... and its error holds nothing of the server's answer", text)
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="mcpbox-regoptin-")
    state = os.path.join(work, "state")
    os.mkdir(state, 0o700)
    try:
        c = serve(a.mcpbox, state, None)
        try:
            refs = ["127.0.0.1:%d/x/page:1" % port, "localhost:%d/x/y:1" % port,
                    "127.1.2.3:%d/x/y:1" % port, "[::ffff:127.0.0.1]:%d/x/y:1" % port,
                    # forms the resolver reads as 127.0.0.1 but no address parser does: only
                    # the check on the connection itself stops them
                    "127.1:%d/x/page:1" % port, "2130706433:%d/x/page:1" % port]
            name = socket.gethostname()
            try:
                loop_name = socket.gethostbyname(name).startswith("127.")
            except OSError:
                loop_name = False
            if loop_name:  # a name, not an address: the connection itself is checked
                refs.append("%s:%d/x/page:1" % (name, port))
            else:
                print("# %s does not resolve to loopback here: the by-name case is not run" % name)
            for ref in refs:
                text = create_error(c, ref)
                check("MCPBOX_REGISTRIES" in text and "private network" in text,
                      "... and says the person can allow it", text)
            check(hits == [], "the server saw no request without the opt-in", repr(hits))
        finally:
            c.close(120)
        c = serve(a.mcpbox, state, "127.0.0.1")
        try:
            for repo in ("x/missing", "x/page", "x/jsonish", "x/broken"):
                before = len(hits)
                text = create_error(c, "127.0.0.1:%d/%s:1" % (port, repo))
                check(len(hits) > before, "with the opt-in the pull reaches it (%s)" % repo,
                      repr(hits))
                check("did not answer as an OCI registry" in text,
                      "... and the error says it is not a registry", text)
        finally:
            c.close(120)
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    print("image references cannot read host services")
    return 0


if __name__ == "__main__":
    sys.exit(main())
