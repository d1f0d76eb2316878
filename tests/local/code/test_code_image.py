#!/usr/bin/env python3
"""Code contexts in a sandbox from an OCI image that carries python and nothing else (issue 34):
an image built here (busybox as /bin/sh, the host's python3 with its standard library and the
libraries it links), pushed to Debian's docker-registry on loopback and pulled through MCP.

- python runs there, keeps state, reports errors; no Jupyter, no /usr from the host;
- bash and javascript contexts fail at once with an error naming what the image lacks.

usage: test_code_image.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "image"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import ocitest as oci  # noqa: E402
from ocitest import d, f, ln  # noqa: E402

PY = "python3.11"
STDLIB = f"/usr/lib/{PY}"
SKIP_DIRS = {"test", "dist-packages", "site-packages", "lib2to3", "idlelib", "tkinter",
             "ensurepip", "pydoc_data", "unittest", "distutils", "turtledemo"}


def libraries(binary):
    """The shared libraries binary links, as (path, real file) from ldd."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    paths = []
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if path.startswith("/"):
            paths.append(path)
    return paths


def add_file(entries, dirs, path, mode=None):
    """path (absolute) from the host into the layer, with its parent directories."""
    rel = path.lstrip("/")
    parent = os.path.dirname(rel)
    chain = []
    while parent and parent not in dirs:
        chain.append(parent)
        parent = os.path.dirname(parent)
    for p in reversed(chain):
        dirs.add(p)
        entries.append(d(p))
    with open(os.path.realpath(path), "rb") as fh:
        data = fh.read()
    st = os.stat(path)
    entries.append(f(rel, data, mode if mode is not None else st.st_mode & 0o777))


def python_layer():
    entries, dirs = [], {"bin", "etc", "tmp", "usr", "usr/bin"}
    add_file(entries, dirs, f"/usr/bin/{PY}", 0o755)
    entries.append(ln("usr/bin/python3", PY))
    for lib in libraries(f"/usr/bin/{PY}"):
        add_file(entries, dirs, lib, 0o755)
    for root, subdirs, files in os.walk(STDLIB):
        rel = os.path.relpath(root, STDLIB)
        subdirs[:] = [s for s in subdirs if not (rel == "." and (s in SKIP_DIRS or
                                                                   s.startswith("config-")))]
        for name in files:
            if name.endswith((".py", ".pyc", ".so")):
                add_file(entries, dirs, os.path.join(root, name))
    return entries


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok - {what}")


def run_checks(s, sid):
    def run(args):
        res = s.tool("run_code", dict(args, sandbox_id=sid))
        return res
    res = run({"code": "import sys, os\nn = 6\nsys.version_info[0]"})
    check(not res.get("isError"), f"python runs in the image: {res['content'][0]['text'][:300]}")
    out = res["structuredContent"]
    check(out["results"][0]["text"] == "3", f"a result: {out['results']}")
    out = run({"code": "n * 7"})["structuredContent"]
    check(out["results"][0]["text"] == "42", "state kept between runs")
    out = run({"code": "import os\nos.path.exists('/usr/lib/x86_64-linux-gnu/libpython3.11.so.1') "
                       "or os.path.exists('/usr/bin/node')"})["structuredContent"]
    check(out["results"][0]["text"] == "False", "the image's own root, not the host's /usr")
    out = run({"code": "undefined_name"})["structuredContent"]
    check(out["error"]["name"] == "NameError", "errors come back")
    for lang, prog in (("bash", "bash"), ("javascript", "node")):
        res = run({"code": "1", "language": lang})
        text = res["content"][0]["text"]
        check(res.get("isError") and f"no {prog} on PATH" in text,
              f"{lang}: an error naming what the image lacks ({text[:160]})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    mcpbox = os.path.abspath(a.mcpbox)
    for tool in (oci.REGISTRY_BIN, oci.BUSYBOX, f"/usr/bin/{PY}"):
        if not os.path.exists(tool):
            raise AssertionError(f"{tool} is missing: run scripts/install-deps.sh --test")
    work = tempfile.mkdtemp(prefix="code-img-", dir="/tmp")
    os.chmod(work, 0o755)
    reg = oci.Registry(work)
    state = tempfile.mkdtemp(prefix="code-img-state-", dir="/tmp")
    os.chmod(state, 0o755)
    s = oci.Serve(mcpbox, state)
    sid = None
    try:
        res = s.tool("create_sandbox", {})
        if res.get("isError"):
            print("SKIP: no local sandbox here:", res["content"][0]["text"])
            sys.exit(77)
        s.destroy(res["structuredContent"]["sandbox_id"])
        reg.push_image("test/python", "1", [("gzip", oci.busybox_layer()),
                                            ("gzip", python_layer())])
        sid = s.create(f"{reg.host}/test/python:1")
        run_checks(s, sid)
    finally:
        if sid:
            s.destroy(sid)
        s.close()
        reg.close()
    print("ok")


if __name__ == "__main__":
    main()
