# A small web app for tests/opensandbox/osapi_proxy.mjs, run inside a sandbox: plain pages, a
# streamed reply, an echo of the request, a reply with hostile headers, an oversized head, and a
# WebSocket echo (RFC 6455 by hand: the standard library has no WebSocket server).
#   python3 proxy_app.py PORT MARKER
import base64, hashlib, json, socket, struct, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, MARKER = int(sys.argv[1]), sys.argv[2]
WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'


class App(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *a):
        pass

    def reply(self, status, body, ctype='text/plain', extra=()):
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith('/ws'):
            return self.websocket()
        if self.path.startswith('/page'):
            return self.reply(200, ('page ' + MARKER + ' ' + self.path).encode(), 'text/html')
        if self.path == '/slow':
            self.send_response(200)
            self.send_header('Content-Type', 'text/plain')
            self.end_headers()  # no length: the body ends with the connection
            self.wfile.write(b'first\n'); self.wfile.flush()
            time.sleep(0.8)
            self.wfile.write(b'second\n'); self.wfile.flush()
            self.close_connection = True
            return
        if self.path.startswith('/big/'):
            n = int(self.path.split('/')[2])
            self.send_response(200)
            self.send_header('Content-Type', 'application/octet-stream')
            self.send_header('Content-Length', str(n))
            self.end_headers()
            chunk = bytes(range(256)) * 256
            left = n
            while left:
                part = chunk[:min(left, len(chunk))]
                self.wfile.write(part)
                left -= len(part)
            return
        if self.path == '/hostile':
            return self.reply(200, b'hostile', extra=[
                ('Set-Cookie', 'session=stolen; Path=/'), ('Strict-Transport-Security', 'max-age=99999'),
                ('Clear-Site-Data', '"*"'), ('Alt-Svc', 'h2=":443"'), ('X-Request-ID', 'forged'),
                ('X-App', 'kept')])
        if self.path == '/bighead':
            self.send_response(200)
            for i in range(40):
                self.send_header('X-Filler-%d' % i, 'x' * 1000)
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        if self.path == '/headers':
            seen = {k.lower(): v for k, v in self.headers.items()}
            return self.reply(200, json.dumps(seen).encode(), 'application/json')
        self.reply(404, b'no such page')

    def do_HEAD(self):
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Content-Length', '1234')
        self.end_headers()

    def do_POST(self):
        if self.path == '/timed':
            return self.timed_lines()
        n = int(self.headers.get('Content-Length', '0'))
        body = self.rfile.read(n)
        digest = hashlib.sha256(body).hexdigest()
        self.reply(201, json.dumps({'len': len(body), 'sha256': digest, 'path': self.path}).encode(),
                   'application/json')

    def timed_lines(self):
        # The body's lines and when each came, in ms from the head: read as they arrive when
        # chunked, all at once when sent whole (Content-Length).
        t0, seen, pending = time.monotonic(), [], b''
        chunked = 'chunked' in self.headers.get('Transfer-Encoding', '')
        while True:
            if chunked:
                size = int(self.rfile.readline().strip() or b'0', 16)
                data = self.rfile.read(size)
                self.rfile.readline()
            else:
                size = 0
                data = self.rfile.read(int(self.headers.get('Content-Length', '0')))
            pending += data
            while b'\n' in pending:
                line, pending = pending.split(b'\n', 1)
                seen.append([line.decode(), int((time.monotonic() - t0) * 1000)])
            if size == 0:
                break
        self.reply(200, json.dumps({'chunked': self.headers.get('Transfer-Encoding'), 'lines': seen}).encode(),
                   'application/json')

    def websocket(self):
        key = self.headers.get('Sec-WebSocket-Key', '')
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header('Upgrade', 'websocket')
        self.send_header('Connection', 'Upgrade')
        self.send_header('Sec-WebSocket-Accept', accept)
        self.send_header('Set-Cookie', 'ws=stolen')
        self.end_headers()
        self.wfile.flush()
        rf, wf = self.rfile, self.wfile
        while True:
            head = rf.read(2)
            if len(head) < 2:
                break
            op, ln = head[0] & 0x0f, head[1] & 0x7f
            if ln == 126:
                ln = struct.unpack('!H', rf.read(2))[0]
            elif ln == 127:
                ln = struct.unpack('!Q', rf.read(8))[0]
            mask = rf.read(4) if head[1] & 0x80 else b'\0\0\0\0'
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(rf.read(ln)))
            if op == 8:  # close: answer it and stop
                wf.write(b'\x88\x00'); wf.flush()
                break
            if op == 9:  # ping -> pong
                op = 10
            n = len(data)
            hdr = bytes([0x80 | op]) + (bytes([n]) if n < 126 else
                                        b'\x7e' + struct.pack('!H', n) if n < 65536 else
                                        b'\x7f' + struct.pack('!Q', n))
            wf.write(hdr + data); wf.flush()
        self.close_connection = True


ThreadingHTTPServer.allow_reuse_address = True
ThreadingHTTPServer(('127.0.0.1', PORT), App).serve_forever()
