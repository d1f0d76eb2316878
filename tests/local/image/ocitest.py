"""Helpers for the OCI image tests: a real registry on loopback (Debian's docker-registry, the
CNCF distribution project), images written as OCI blobs by hand (tar layers, gzip or zstd, with
whiteouts, opaque directories or hostile entries), pushed with the distribution API, a small
front for the registry (bearer-token auth, a connection cut mid-blob, a tampered manifest), and
`mcpbox serve` driven over stdio with progress notifications collected.
"""
import gzip
import hashlib
import http.client
import http.server
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_stdio import Client, serve_argv  # noqa: E402

REGISTRY_BIN = "/usr/bin/docker-registry"
BUSYBOX = "/bin/busybox"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TYPES = {"gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
               "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
               "tar": "application/vnd.oci.image.layer.v1.tar"}
# The test registries are on loopback, which pulls reach only for registries the person names
# (docs/images.md): every mcpbox these tests start inherits this (ENV for those given an
# environment of their own).
ENV = {"MCPBOX_REGISTRIES": "127.0.0.1"}
os.environ.update(ENV)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---- layers -------------------------------------------------------------------------------------

def tar_bytes(entries):
    """entries: (name, kind, payload, mode, uid, gid) with kind file|dir|symlink|hardlink|chr;
    payload: bytes for files, the target for links."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, payload, mode, uid, gid in entries:
            ti = tarfile.TarInfo(name)
            ti.mode, ti.uid, ti.gid, ti.mtime = mode, uid, gid, 1700000000
            data = None
            if kind == "file":
                ti.type, ti.size, data = tarfile.REGTYPE, len(payload), io.BytesIO(payload)
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, payload
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, payload
            elif kind == "chr":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            t.addfile(ti, data)
    return out.getvalue()


def f(name, payload=b"", mode=0o644, uid=0, gid=0):
    return (name, "file", payload, mode, uid, gid)


def d(name, mode=0o755, uid=0, gid=0):
    return (name, "dir", None, mode, uid, gid)


def ln(name, target):
    return (name, "symlink", target, 0o777, 0, 0)


def hl(name, target):
    return (name, "hardlink", target, 0o644, 0, 0)


def compress(raw, how):
    if how == "gzip":
        return gzip.compress(raw, mtime=0)
    if how == "zstd":
        return subprocess.run(["zstd", "-q", "-c", "-3"], input=raw, capture_output=True,
                              check=True).stdout
    return raw


def uncompressed_digest(blob):
    """The diff_id of a blob: the digest of its uncompressed stream (of the blob itself when it
    does not decompress: a corrupt layer fails before its diff_id is compared)."""
    try:
        if blob[:2] == b"\x1f\x8b":
            return digest(gzip.decompress(blob))
        if blob[:4] == b"\x28\xb5\x2f\xfd":
            return digest(subprocess.run(["zstd", "-q", "-d", "-c"], input=blob,
                                         capture_output=True, check=True).stdout)
    except Exception:
        pass
    return digest(blob)


def busybox_layer():
    """A base layer with busybox as /bin/sh and friends, /etc/passwd and /etc/group."""
    with open(BUSYBOX, "rb") as fh:
        bb = fh.read()
    entries = [d("bin"), d("etc"), d("tmp", 0o1777), d("usr"), d("usr/bin"),
               f("bin/busybox", bb, 0o755)]
    for tool in ("sh", "ls", "cat", "id", "pwd", "echo", "test", "stat", "env", "touch", "rm"):
        entries.append(ln(f"bin/{tool}", "busybox"))
    entries.append(f("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"
                                   b"app:x:1000:1000:app:/app:/bin/sh\n"))
    entries.append(f("etc/group", b"root:x:0:\napp:x:1000:\nstaff:x:50:\n"))
    return entries


# ---- the registry -------------------------------------------------------------------------------

class Registry:
    """docker-registry on 127.0.0.1:<free port>, storage in a temporary directory."""

    def __init__(self, workdir):
        self.dir = tempfile.mkdtemp(prefix="reg-", dir=workdir)
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        cfg = os.path.join(self.dir, "config.yml")
        with open(cfg, "w") as fh:
            fh.write("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                     f"    rootdirectory: {self.dir}/data\n  delete:\n    enabled: true\n"
                     f"http:\n  addr: 127.0.0.1:{self.port}\n")
        self.proc = subprocess.Popen([REGISTRY_BIN, "serve", cfg], stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.dir, "log"), "w"))
        end = time.time() + 20
        while time.time() < end:
            try:
                urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1)
                return
            except Exception:
                time.sleep(0.05)
        raise AssertionError("docker-registry did not start")

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _req(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r, data

    def push_blob(self, repo, data):
        dg = digest(data)
        r, _ = self._req("POST", f"/v2/{repo}/blobs/uploads/")
        assert r.status == 202, f"upload start: {r.status}"
        loc = r.getheader("Location")
        path = loc.split(self.host, 1)[-1] if loc.startswith("http") else loc
        sep = "&" if "?" in path else "?"
        r, body = self._req("PUT", f"{path}{sep}digest={dg}", data,
                            {"Content-Type": "application/octet-stream"})
        assert r.status == 201, f"blob put {r.status}: {body[:200]}"
        return {"digest": dg, "size": len(data)}

    def push_manifest(self, repo, ref, manifest, media_type):
        body = json.dumps(manifest).encode()
        r, resp = self._req("PUT", f"/v2/{repo}/manifests/{ref}", body,
                            {"Content-Type": media_type})
        assert r.status == 201, f"manifest put {r.status}: {resp[:300]}"
        return digest(body), len(body)

    def push_image(self, repo, tag, layers, config=None, platform=("amd64", ""), diff_ids=None):
        """layers: [(compression, tar entries)]; returns the manifest's digest and size.
        diff_ids: given, the config's rootfs.diff_ids (else the layers' true ones)."""
        descs, true_ids = [], []
        for how, entries in layers:
            raw = tar_bytes(entries)
            b = self.push_blob(repo, compress(raw, how))
            descs.append({"mediaType": LAYER_TYPES[how], "digest": b["digest"], "size": b["size"]})
            true_ids.append(digest(raw))
        cfg = {"architecture": platform[0], "os": "linux", "config": config or {},
               "rootfs": {"type": "layers",
                          "diff_ids": true_ids if diff_ids is None else diff_ids}}
        c = self.push_blob(repo, json.dumps(cfg).encode())
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                    "config": {"mediaType": OCI_CONFIG, **c}, "layers": descs}
        return self.push_manifest(repo, tag, manifest, OCI_MANIFEST)

    def push_raw_layer_image(self, repo, tag, blob, media_type):
        """An image of a base layer plus one given (possibly hostile) blob."""
        base = compress(tar_bytes(busybox_layer()), "gzip")
        b0 = self.push_blob(repo, base)
        b1 = self.push_blob(repo, blob)
        descs = [{"mediaType": LAYER_TYPES["gzip"], **b0}, {"mediaType": media_type, **b1}]
        cfg = {"architecture": "amd64", "os": "linux", "config": {},
               "rootfs": {"type": "layers", "diff_ids": [digest(tar_bytes(busybox_layer())),
                                                         uncompressed_digest(blob)]}}
        c = self.push_blob(repo, json.dumps(cfg).encode())
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                    "config": {"mediaType": OCI_CONFIG, **c}, "layers": descs}
        return self.push_manifest(repo, tag, manifest, OCI_MANIFEST), b1["digest"]


# ---- a front for the registry ---------------------------------------------------------------------

class Front:
    """A proxy to the registry on its own port. mode: "token" (bearer auth; the token endpoint
    wants Basic user:pass), "cut" (blob bodies stop halfway and the connection closes),
    "cut-once" (the first GET of each blob stops halfway; later ones, Range requests included,
    go through), "cut-once-norange" (the same, but Range headers are dropped, so the registry
    sends whole blobs again), "slow" (blob bodies trickle, 32 KiB every 50 ms), "tamper" (manifest bodies
    get a trailing space). Range headers are passed on to the registry. blob_gets counts GETs
    of blobs; ranges lists (path, Range) of the GETs that had one."""

    def __init__(self, registry, mode, user="ociuser", password="ocipass"):
        self.registry, self.mode = registry, mode
        self.user, self.password = user, password
        self.token = "tok-" + os.urandom(8).hex()
        self.refresh = "refresh-" + os.urandom(8).hex()  # an identity token it accepts
        self.posts = []
        self.blob_gets = 0
        self.gets_by_path = {}
        self.ranges = []
        self.lock = threading.Lock()
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                front.handle(self)

            def do_POST(self):
                front.handle_post(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def send(self, h, status, body=b"", headers=None):
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def handle_post(self, h):
        """OAuth2 at the token realm: grant_type=refresh_token with the identity token."""
        import urllib.parse
        body = h.rfile.read(int(h.headers.get("Content-Length", "0"))).decode()
        form = dict(urllib.parse.parse_qsl(body))
        self.posts.append(form)
        if self.mode != "token" or not h.path.startswith("/token"):
            return self.send(h, 404, b"")
        if form.get("grant_type") != "refresh_token" or form.get("refresh_token") != self.refresh:
            return self.send(h, 401, b'{"errors":[{"message":"bad refresh token"}]}')
        return self.send(h, 200, json.dumps({"access_token": self.token}).encode(),
                         {"Content-Type": "application/json"})

    def handle(self, h):
        import base64
        if self.mode == "token" and h.path.startswith("/token"):
            want = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            if h.headers.get("Authorization") != want:
                return self.send(h, 401, b'{"errors":[{"message":"bad credentials"}]}')
            return self.send(h, 200, json.dumps({"token": self.token}).encode(),
                             {"Content-Type": "application/json"})
        if self.mode == "token" and h.headers.get("Authorization") != f"Bearer {self.token}":
            realm = f'Bearer realm="http://{self.host}/token",service="oci-test"'
            return self.send(h, 401, b'{"errors":[{"code":"UNAUTHORIZED"}]}',
                             {"WWW-Authenticate": realm})
        fwd = {"Accept": h.headers.get("Accept", "*/*")}
        if h.headers.get("Range"):
            self.ranges.append((h.path, h.headers["Range"]))
            if self.mode != "cut-once-norange":
                fwd["Range"] = h.headers["Range"]
        c = http.client.HTTPConnection("127.0.0.1", self.registry.port, timeout=30)
        c.request("GET", h.path, headers=fwd)
        r = c.getresponse()
        body = r.read()
        c.close()
        headers = {k: v for k, v in r.getheaders()
                   if k.lower() in ("content-type", "docker-content-digest", "content-range")}
        with self.lock:
            if "/blobs/" in h.path:
                self.blob_gets += 1
                self.gets_by_path[h.path] = self.gets_by_path.get(h.path, 0) + 1
            nth = self.gets_by_path.get(h.path, 0)
        cut = self.mode == "cut" or (self.mode.startswith("cut-once") and nth == 1)
        if cut and "/blobs/" in h.path and len(body) > 1000 and r.status in (200, 206):
            h.send_response(r.status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body[:len(body) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if self.mode == "tamper" and "/manifests/" in h.path and r.status == 200:
            body = body + b" "
        if self.mode == "slow" and "/blobs/" in h.path and r.status == 200:
            h.send_response(200)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            for off in range(0, len(body), 32 << 10):
                h.wfile.write(body[off:off + (32 << 10)])
                h.wfile.flush()
                time.sleep(0.05)
            return
        self.send(h, r.status, body, headers)


# ---- mcpbox serve over stdio ----------------------------------------------------------------------

class Serve(Client):
    def __init__(self, mcpbox, state, env=None):
        full = dict(os.environ)
        full.update(env or {})
        self.log_path = tempfile.mktemp(prefix="ocit-serve-", suffix=".log", dir="/tmp")
        self.stderr = open(self.log_path, "w")
        self.progress = []
        wrap = os.environ.get("OCITEST_WRAP", "").split()  # a command to run the server under
        super().__init__(wrap + serve_argv(mcpbox, state, "--local-pool", "0"),
                         stderr=self.stderr, env=full, on_notification=self.note)
        self.initialize("oci-test")

    def note(self, msg):
        if msg.get("method") == "notifications/progress":
            self.progress.append(msg["params"])

    def create_together(self, images):
        """create_sandbox for each image, all sent before any reply is read."""
        ids = [self.request("tools/call", self.tool_params("create_sandbox", {"image": image}))
               for image in images]
        results = self.replies(ids, "concurrent creates")
        return [results[i] for i in ids]

    def tool(self, name, args, token=None):
        return self.call_tool(name, args, token)

    def create(self, image, token=None, expect_error=None):
        res = self.tool("create_sandbox", {"image": image}, token)
        text = json.dumps(res)
        if expect_error is not None:
            assert res.get("isError"), f"create {image} should fail: {text[:400]}"
            msg = res["content"][0]["text"]
            for want in ([expect_error] if isinstance(expect_error, str) else expect_error):
                assert want in msg, f"create {image}: {want!r} not in {msg!r}"
            return msg
        assert not res.get("isError"), f"create_sandbox {image}: {text[:600]}"
        return res["structuredContent"]["sandbox_id"]

    def run(self, sid, command):
        res = self.tool("run_command", {"sandbox_id": sid, "command": command})
        assert not res.get("isError"), f"run_command {command}: {json.dumps(res)[:600]}"
        sc = res["structuredContent"]
        return sc.get("exit_code"), sc.get("stdout", ""), sc.get("stderr", "")

    def get(self, sid):
        res = self.tool("get_sandbox", {"sandbox_id": sid})
        assert not res.get("isError"), json.dumps(res)
        return res["structuredContent"]

    def destroy(self, sid):
        self.tool("destroy_sandbox", {"sandbox_id": sid})

    def close(self, show_log=False):
        try:
            super().close(timeout=30)
        except Exception:
            self.proc.kill()
        self.stderr.close()
        if show_log or self.proc.returncode not in (0, None):
            with open(self.log_path) as fh:
                print("# mcpbox serve's log (tail):\n" + "".join(fh.readlines()[-30:]))
        os.unlink(self.log_path)
        if not show_log:
            assert self.proc.returncode == 0, \
                f"mcpbox serve exited {self.proc.returncode} (a sanitizer report?)"

