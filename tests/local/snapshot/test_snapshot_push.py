#!/usr/bin/env python3
"""A local snapshot pushed to an OCI registry (issue 36, "across backends"), through the real
server over stdio and the CLI, against Debian's docker-registry on loopback.

 push     snapshot_sandbox {action: push}: the registry then holds a real OCI image (manifest,
          config with the snapshot's env, workdir and labels, the layer byte for byte with the
          file in it); a second push uploads nothing (HEAD finds every blob); the CLI's
          `mcpbox sandbox snapshot push` does the same; two pushes at once into one repository.
 roundtrip  the cross-backend round trip, for a snapshot of a host-image sandbox and of a busybox
          image's (whose layer is mounted from its repository, and must be on the same
          registry): a snapshot pushed, then create_sandbox {image: REF}
          (a) on the local backend of the server that pushed, and (b) on the opensandbox backend
          against a second mcpbox serving OpenSandbox's API over its own local backend (which
          pulls the image and restores the snapshot's layer): the file is there, with the
          snapshot's env, in both.
 errors   a registry that refuses (401), one that answers 201 to the manifest but does not keep
          it (it lies), one that is not there, one the person did not name, a reference with a
          digest or that does not parse, an unknown snapshot: each a clear error, and nothing is
          reported as pushed (the tag is not there).
 hang     a registry that never answers: the push fails after the stall limit (60 s), saying so.

Runs as root and, through tests/local/rootless, as an ordinary user.
usage: test_snapshot_push.py --mcpbox PATH --check push|roundtrip|errors|hang   (77: cannot run here)
"""
import argparse
import http.client
import http.server
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "image"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import ocitest  # noqa: E402  (sets MCPBOX_REGISTRIES=127.0.0.1 for the servers started here)
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SKIP = 77


class Serve(Client):
    def __init__(self, mcpbox, state, env=None):
        super().__init__(serve_argv(mcpbox, state, "--local-pool", 0),
                         stderr=subprocess.DEVNULL, cwd="/", env=env)
        self.initialize("snapshot-push-test")

    def tool(self, tool_name, **args):
        res = self.call_tool(tool_name, args)
        return res.get("isError", False), res.get("structuredContent"), result_text(res)

    def ok(self, tool_name, **args):
        err, out, text = self.tool(tool_name, **args)
        assert not err, f"{tool_name} {args}: {text}"
        return out

    def refused(self, words, **args):
        err, _, text = self.tool("snapshot_sandbox", action="push", **args)
        assert err, f"push {args} was accepted"
        for w in words:
            assert w in text, f"push {args}: {w!r} not in {text!r}"
        print(f"  refused: {text[:160]}")
        return text

    def close(self):
        rc = super().close(timeout=60)
        assert rc == 0, f"mcpbox serve exited {rc} (a sanitizer report?)"


def registry_get(reg, path, accept=ocitest.OCI_MANIFEST):
    r, body = reg._req("GET", path, headers={"Accept": accept})
    return r.status, body


def snapshot_with_file(s, text, image=None):
    args = {"image": image} if image else {}
    sid = s.ok("create_sandbox", env={"PUSHVAR": "pv"}, **args)["sandbox_id"]
    s.ok("write_file", sandbox_id=sid, path="/workspace/pushed.txt", content=text)
    snap = s.ok("snapshot_sandbox", action="create", sandbox_id=sid)
    return sid, snap


def check_image(reg, repo, tag, snap, text):
    """The registry's image under repo:tag is the snapshot: manifest, config, layer."""
    st, body = registry_get(reg, f"/v2/{repo}/manifests/{tag}")
    assert st == 200, (st, body[:300])
    m = json.loads(body)
    assert m["mediaType"] == ocitest.OCI_MANIFEST and len(m["layers"]) == 1, m
    layer = m["layers"][0]
    assert layer["digest"] == snap["layer"], (layer, snap["layer"])
    assert layer["mediaType"] == ocitest.LAYER_TYPES["tar"], layer
    st, cfg = registry_get(reg, f"/v2/{repo}/blobs/{m['config']['digest']}", "*/*")
    assert st == 200 and ocitest.digest(cfg) == m["config"]["digest"]
    cfg = json.loads(cfg)
    assert cfg["os"] == "linux" and cfg["rootfs"]["diff_ids"] == [snap["layer"]], cfg
    assert "PUSHVAR=pv" in cfg["config"]["Env"] and cfg["config"]["WorkingDir"] == "/workspace"
    labels = cfg["config"]["Labels"]
    assert labels["org.mcpbox.snapshot.id"] == snap["snapshot_id"], labels
    assert labels["org.mcpbox.snapshot.image"] == "host", labels
    st, blob = registry_get(reg, f"/v2/{repo}/blobs/{layer['digest']}", "*/*")
    assert st == 200 and ocitest.digest(blob) == layer["digest"] and len(blob) == layer["size"]
    with tarfile.open(fileobj=io.BytesIO(blob)) as t:
        got = t.extractfile("workspace/pushed.txt").read().decode()
    assert got == text, got
    return ocitest.digest(body)


def check_push(s, reg):
    text = "pushed " + secrets.token_hex(8)
    sid, snap = snapshot_with_file(s, text)
    repo = f"mcpbox/push-{secrets.token_hex(4)}"
    ref = f"{reg.host}/{repo}:v1"
    out = s.ok("snapshot_sandbox", action="push", snapshot_id=snap["snapshot_id"], reference=ref)
    assert out["reference"] == ref and out["snapshot_id"] == snap["snapshot_id"], out
    assert out["blobs_uploaded"] == 2 and out["blobs_present"] == 0, out
    assert out["digest"] == check_image(reg, repo, "v1", snap, text), out
    print(f"push over MCP: {ref} {out['digest']} ({out['bytes_uploaded']} bytes)")
    again = s.ok("snapshot_sandbox", action="push", snapshot_id=snap["snapshot_id"],
                 reference=f"{reg.host}/{repo}:v2")
    assert again["blobs_uploaded"] == 0 and again["blobs_present"] == 2, again
    assert again["digest"] == out["digest"], again
    print("a second push: every blob already there, nothing uploaded")
    r = subprocess.run([s.mcpbox, "sandbox", "--state-dir", s.state, "snapshot", "push",
                        snap["snapshot_id"], f"{reg.host}/{repo}-cli:latest"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{reg.host}/{repo}-cli:latest@{out['digest']}", r.stdout
    check_image(reg, f"{repo}-cli", "latest", snap, text)
    print("push with the CLI: the same image")
    # two snapshots pushed at once, to two tags of one new repository: each tag its own image
    text2 = "second " + secrets.token_hex(8)
    sid2, snap2 = snapshot_with_file(s, text2)
    both = f"mcpbox/both-{secrets.token_hex(4)}"
    ids = [s.request("tools/call", s.tool_params("snapshot_sandbox", {
        "action": "push", "snapshot_id": sn["snapshot_id"], "reference": f"{reg.host}/{both}:{tag}"}))
        for sn, tag in ((snap, "a"), (snap2, "b"))]
    res = s.replies(ids, "two pushes at once")
    assert not any(res[i].get("isError") for i in ids), res
    check_image(reg, both, "a", snap, text)
    check_image(reg, both, "b", snap2, text2)
    print("two pushes at once into one repository: each tag its own image")
    s.ok("destroy_sandbox", sandbox_id=sid2)
    s.ok("destroy_sandbox", sandbox_id=sid)


class Remote:
    """A second mcpbox serving OpenSandbox's API over its own local backend and state."""

    def __init__(self, mcpbox, state):
        self.key = secrets.token_hex(16)
        env = dict(os.environ, MCPBOX_OPENSANDBOX_API_KEY=self.key)
        self.proc = subprocess.Popen([mcpbox, "serve", "--http", "127.0.0.1:0", "--opensandbox-api",
                                      "--state-dir", state, "--local-pool", "0"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd="/")
        self.port = None
        for line in self.proc.stderr:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", line)
            if m:
                self.port = int(m.group(1))
                break
        assert self.port, "the OpenSandbox API server did not start"
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def close(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=60) == 0, "the OpenSandbox API server did not stop cleanly"


def read_back(s, sid):
    out = s.ok("run_command", sandbox_id=sid,
               command="cat /workspace/pushed.txt; echo; echo $PUSHVAR; echo ${BASEVAR:-}; "
                       "test -e /usr/bin/env && echo host-root || echo image-root")
    return out["exit_code"], out.get("stdout", "")


def base_image(reg):
    """A busybox image in the registry, with an Env of its own."""
    repo = f"mcpbox/base-{secrets.token_hex(4)}"
    reg.push_image(repo, "1", [("gzip", ocitest.busybox_layer())],
                   config={"Env": ["BASEVAR=bv", "PATH=/bin"], "WorkingDir": "/workspace"})
    return f"{reg.host}/{repo}:1"


def check_roundtrip(s, reg):
    roundtrip(s, reg, None)
    roundtrip(s, reg, base_image(reg))


def roundtrip(s, reg, base):
    """base: an OCI image the source sandbox runs on (its layers go with the push), or None for
    the host image."""
    text = "round trip " + secrets.token_hex(8)
    src, snap = snapshot_with_file(s, text, base)
    s.ok("destroy_sandbox", sandbox_id=src)
    ref = f"{reg.host}/mcpbox/rt-{secrets.token_hex(4)}:v1"
    out = s.ok("snapshot_sandbox", action="push", snapshot_id=snap["snapshot_id"], reference=ref)
    if base:  # the base's layer is mounted from its repository, not sent
        assert out["blobs_present"] == 1 and out["blobs_uploaded"] == 2, out
        st, body = registry_get(reg, f"/v2/{ref.split('/', 1)[1].replace(':v1', '')}/manifests/v1")
        assert st == 200 and len(json.loads(body)["layers"]) == 2, (st, body[:300])
        other = f"127.0.0.2:{reg.port}/mcpbox/x:1"
        s.refused(["push it to registry"], snapshot_id=snap["snapshot_id"], reference=other)
    s.ok("snapshot_sandbox", action="delete", snapshot_id=snap["snapshot_id"])
    local = s.ok("create_sandbox", image=ref)["sandbox_id"]
    want = (0, f"{text}\npv\n{'bv' if base else ''}\n{'image-root' if base else 'host-root'}\n")
    assert read_back(s, local) == want, read_back(s, local)
    print(f"(a) local backend: create_sandbox {{image: {ref}}} has the file (base {base})")
    remote = Remote(s.mcpbox, os.path.join(s.base, "remote"))
    try:
        env = dict(os.environ, OPEN_SANDBOX_DOMAIN=f"127.0.0.1:{remote.port}",
                   OPEN_SANDBOX_API_KEY=remote.key, OPEN_SANDBOX_REQUEST_TIMEOUT="60")
        c = Serve(s.mcpbox, os.path.join(s.base, "client"), env=env)
        try:
            # with two backends keeping snapshots, a push is still the local one's to answer
            c.refused(["no snapshot snap-00000000"], snapshot_id="snap-00000000", reference=ref)
            osb = c.ok("create_sandbox", backend="opensandbox", image=ref)["sandbox_id"]
            assert osb.startswith("osb-"), osb
            got = read_back(c, osb)
            assert got == want, got
            print(f"(b) opensandbox backend through mcpbox's OpenSandbox API: {osb} has the file")
            c.ok("destroy_sandbox", sandbox_id=osb)
        finally:
            c.close()
    finally:
        remote.close()
    s.ok("destroy_sandbox", sandbox_id=local)


class Front:
    """A server in front of the registry: 'refuse' answers 401 with a Basic challenge to every
    request; 'lie' passes everything on but answers 201 to a manifest PUT without passing it."""

    def __init__(self, reg, mode):
        front = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def relay(self):
                front.handle(self)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = relay

        self.reg, self.mode = reg, mode
        self.hung = threading.Event()
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.host = f"127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def handle(self, h):
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else b""
        if self.mode == "refuse":
            return self.send(h, 401, b'{"errors":[{"code":"UNAUTHORIZED","message":"no"}]}',
                             {"WWW-Authenticate": 'Basic realm="x"'})
        if self.mode == "hang":  # takes the request, never answers
            self.hung.wait(timeout=600)
            return
        if self.mode == "lie" and h.command == "PUT" and "/manifests/" in h.path:
            return self.send(h, 201, b"", {})
        c = http.client.HTTPConnection("127.0.0.1", self.reg.port, timeout=30)
        hdrs = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "content-length")}
        c.request(h.command, h.path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        keep = {k: v.replace(self.reg.host, self.host) for k, v in r.getheaders()
                if k.lower() in ("location", "docker-content-digest", "content-type")}
        self.send(h, r.status, b"" if h.command == "HEAD" else data, keep)

    def send(self, h, status, body, headers):
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def close(self):
        self.hung.set()
        self.srv.shutdown()


def labelled(reg, repo, entries, base="host"):
    """An image with a pushed snapshot's labels, made by hand (as a hostile registry could)."""
    raw = ocitest.tar_bytes(entries)
    labels = {"org.mcpbox.snapshot.id": "snap-1234", "org.mcpbox.snapshot.image": base,
              "org.mcpbox.snapshot.layer": ocitest.digest(raw)}
    reg.push_image(repo, "v1", [("tar", entries)], config={"Labels": labels})
    return f"{reg.host}/{repo}:v1"


def hostile_images(s, reg):
    """Images that say they are pushed snapshots: only the writable space is restored, onto the
    host image or the image's own lower layers (none here: refused), and a sandbox whose restore
    fails is gone."""
    before = len(s.ok("list_sandboxes")["sandboxes"])
    repo = f"mcpbox/hostile-{secrets.token_hex(4)}"
    ref = labelled(reg, repo + "-base", [ocitest.f("workspace/a", b"a")], base=f"{reg.host}/x:1")
    err, _, text = s.tool("create_sandbox", image=ref)
    assert err and "carries none of its layers" in text, text
    print(f"  refused: {text[:160]}")
    ref = labelled(reg, repo + "-etc", [ocitest.d("workspace"), ocitest.f("etc/evil", b"x")])
    err, _, text = s.tool("create_sandbox", image=ref)
    assert err and "etc/evil" in text, f"a layer writing /etc was restored: {text}"
    print(f"  refused: {text[:160]}")
    ref = labelled(reg, repo + "-dots", [ocitest.f("workspace/../../../tmp/x", b"x")])
    err, _, text = s.tool("create_sandbox", image=ref)
    assert err and ".." in text, f"a layer with .. was restored: {text}"
    print(f"  refused: {text[:160]}")
    after = len(s.ok("list_sandboxes")["sandboxes"])
    assert after == before, f"{after - before} sandboxes left by failed restores"
    print("hostile images: a base without its layers, /etc, .. refused; nothing left behind")


def check_errors(s, reg):
    _, snap = snapshot_with_file(s, "x")
    sn = snap["snapshot_id"]
    repo = f"mcpbox/err-{secrets.token_hex(4)}"
    for mode, words in (("refuse", ["refused a push", "docker login", "never an agent's"]),
                        ("lie", ["does not have it when asked", "not done"])):
        f = Front(reg, mode)
        try:
            s.refused(words, snapshot_id=sn, reference=f"{f.host}/{repo}:{mode}")
        finally:
            f.close()
        st, _ = registry_get(reg, f"/v2/{repo}/manifests/{mode}")
        assert st == 404, f"{mode}: the tag is there ({st})"
    s.refused(["did not answer the push", "push again"], snapshot_id=sn,
              reference=f"127.0.0.1:{ocitest.free_port()}/a:b")
    s.refused(["MCPBOX_REGISTRIES"], snapshot_id=sn, reference="127.0.0.2:5000/a:b")
    s.refused(["not to a digest"], snapshot_id=sn,
              reference=f"{reg.host}/a@sha256:{'0' * 64}")
    s.refused(["not a valid image reference"], snapshot_id=sn, reference="Bad Ref!")
    s.refused(["no snapshot"], snapshot_id="snap-00000000", reference=f"{reg.host}/a:b")
    s.refused(["no snapshot"], snapshot_id="../x", reference=f"{reg.host}/a:b")
    s.refused(["needs snapshot_id and reference"], snapshot_id=sn)
    hostile_images(s, reg)
    print("errors: refused, lied to, unreachable, not named, bad references, unknown snapshot")


def check_hang(s, reg):
    """A registry that takes the connection and never answers: the push fails once no byte has
    moved for 60 s (registry.c's stall limit), saying so; the tag is not there."""
    _, snap = snapshot_with_file(s, "x")
    repo = f"mcpbox/hang-{secrets.token_hex(4)}"
    f = Front(reg, "hang")
    try:
        t0 = time.monotonic()
        s.refused(["did not answer the push", "the tag was not written"],
                  snapshot_id=snap["snapshot_id"], reference=f"{f.host}/{repo}:v1")
        took = time.monotonic() - t0
    finally:
        f.close()
    st, _ = registry_get(reg, f"/v2/{repo}/manifests/v1")
    assert st == 404, st
    print(f"hang: refused after {took:.0f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--check", required=True, choices=["push", "roundtrip", "errors", "hang"])
    a = ap.parse_args()
    if not os.path.exists(ocitest.REGISTRY_BIN):
        print("SKIP: no docker-registry (scripts/install-deps.sh --test)")
        return SKIP
    base = tempfile.mkdtemp(prefix="mcpbox-push-", dir="/tmp")
    os.chmod(base, 0o755)
    state = os.path.join(base, "state")
    reg = ocitest.Registry(base)
    try:
        s = Serve(a.mcpbox, state)
        s.mcpbox, s.state, s.base = a.mcpbox, state, base
        try:
            err, _, text = s.tool("create_sandbox")
            if err and "unsupported" in text.lower():
                print(f"SKIP: {text}")
                return SKIP
            globals()["check_" + a.check](s, reg)
        finally:
            if s.proc.stdin and not s.proc.stdin.closed:
                s.close()
    finally:
        for st in (state, os.path.join(base, "remote")):
            subprocess.run([a.mcpbox, "sandbox", "--state-dir", st, "rm", "--all"],
                           capture_output=True)
        reg.close()
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
