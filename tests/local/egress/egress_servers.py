#!/usr/bin/env python3
"""Test hosts for the egress tests, run inside the network namespace the test makes: HTTP on
each ADDR:PORT given, HTTPS (cert/key given) on 11.0.0.1:443, and a UDP sink on
11.0.0.1:9999. Every TCP connection and datagram is logged to LOG ("tcp ADDR:PORT host=...",
"udp ..."), so a test can tell that a refused connection never reached a host. GET /big?bytes=N
streams N zero bytes (the benchmark).

usage: egress_servers.py LOG CERT KEY ADDR:PORT...
"""
import http.server
import socket
import socketserver
import ssl
import sys
import threading

LOG = open(sys.argv[1], "a", buffering=1)
CHUNK = b"\0" * (1 << 20)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        here = "%s:%d" % self.connection.getsockname()[:2]
        LOG.write("tcp %s host=%s path=%s\n" % (here, self.headers.get("Host"), self.path))
        if self.path.startswith("/big?bytes="):
            n = int(self.path.split("=", 1)[1])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            while n > 0:
                k = min(n, len(CHUNK))
                self.wfile.write(CHUNK[:k])
                n -= k
            return
        body = ("hello from %s host=%s\n" % (here, self.headers.get("Host"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that goes away mid-download (a test does that on purpose)

    def server_bind(self):
        # HTTPServer's own looks its address up in DNS (getfqdn): no DNS server answers here
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def udp_sink():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("11.0.0.1", 9999))
    while True:
        data, peer = s.recvfrom(2048)
        LOG.write("udp %r from %s\n" % (data, peer))


def main():
    cert, key = sys.argv[2], sys.argv[3]
    servers = []
    for spec in sys.argv[4:]:
        addr, port = spec.rsplit(":", 1)
        srv = Server((addr, int(port)), Handler)
        if port == "443":
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        servers.append(srv)
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    threading.Thread(target=udp_sink, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes our stdin


if __name__ == "__main__":
    main()
