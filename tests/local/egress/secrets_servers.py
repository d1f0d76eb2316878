#!/usr/bin/env python3
"""Test hosts for the secrets tests (issue 37), run inside the egress tests' network namespace:
HTTP on each ADDR:PORT given, HTTPS on each ADDR:PORT:tls (with CERT and KEY). Every request is logged to LOG as one JSON line {"at", "path",
"headers"}, so a test can tell which host saw which header. GET /echo answers with the request's
headers (a host that echoes them); GET /redirect?to=URL answers 302 to URL; anything else "ok".

usage: secrets_servers.py LOG CERT KEY ADDR:PORT[:tls]...
"""
import http.server
import json
import socketserver
import ssl
import sys
import threading

LOG = open(sys.argv[1], "a", buffering=1)
LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        here = "%s:%d" % self.connection.getsockname()[:2]
        headers = [[k, v] for k, v in self.headers.items()]
        with LOCK:
            LOG.write(json.dumps({"at": here, "path": self.path, "headers": headers}) + "\n")
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", self.path.split("=", 1)[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = (json.dumps(headers) if self.path.startswith("/echo") else "ok " + here) + "\n"
        body = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Echo-Auth", str(self.headers.get("Authorization")))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def main():
    cert, key = sys.argv[2], sys.argv[3]
    for spec in sys.argv[4:]:
        addr, port, tls = (spec + ":").split(":")[:3]
        srv = Server((addr, int(port)), Handler)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
