#!/usr/bin/env python3
"""OCI images on the local backend, end to end through MCP against a real registry on loopback
(docs/images.md): `mcpbox serve` over stdio, create_sandbox {"image": "127.0.0.1:<port>/..."}.

Covers: two layers with a whiteout and an opaque directory; Env/WorkingDir/User; an index with
two platforms; gzip and zstd layers; a digest reference; get_sandbox's image_digest; progress
notifications; a cached create that fetches no blob; a token-auth registry with credentials
from $REGISTRY_AUTH_FILE; a connection cut mid-blob; a manifest whose digest does not match;
unknown tags, an unreachable registry; hostile layers (path escapes of every kind, a tar bomb
past the store's cap, a corrupt gzip stream), each refused with nothing written outside the
store; device nodes skipped.

usage: test_image_e2e.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import base64
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ocitest as oci  # noqa: E402
from ocitest import d, f, hl, ln  # noqa: E402
from mcpbox_cli import Cli, skip  # noqa: E402

CAP = 64 << 20  # the store's cap in this test: the tar bomb goes past it


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok - {what}")


def store_dir(state):
    return os.path.join(state, "image-store")


def store_clean(state):
    """No unpack left half-done in the store's tmp/."""
    return os.listdir(os.path.join(store_dir(state), "tmp")) == []


def has_layer(state, dg):
    return os.path.isdir(os.path.join(store_dir(state), "layers", dg.split(":", 1)[1]))


def test_layers_config_progress(s, reg, state):
    base = oci.busybox_layer() + [d("data"), f("data/a", b"A"), f("data/b", b"B"), d("opq"),
                                  f("opq/x", b"x"), f("opq/y", b"y"), d("app", 0o755, 1000, 1000)]
    top = [d("data"), f("data/.wh.a"), d("opq"), f("opq/.wh..wh..opq"), f("opq/z", b"z"),
           f("app/hello.txt", b"hi", 0o644, 1000, 1000)]
    config = {"Env": ["PATH=/bin:/usr/bin", "GREETING=from-image", "OVERRIDE=image"],
              "WorkingDir": "/app", "User": "app:staff"}
    mdigest, _ = reg.push_image("test/bb", "2", [("gzip", base), ("zstd", top)], config)
    ref = f"{reg.host}/test/bb:2"
    s.progress.clear()
    sid = s.create(ref, token="pull-1")
    check(any(p.get("total", 0) > 0 for p in s.progress) and
          all("progressToken" in p for p in s.progress),
          f"create_sandbox sent progress with bytes done of total ({len(s.progress)} notes)")
    rc, out, _ = s.run(sid, "ls /data; echo --; ls /opq")
    check(out.split() == ["b", "--", "z"],
          f"whiteout hides data/a, the opaque dir hides opq/x,y (got {out.split()})")
    rc, out, _ = s.run(sid, "echo $GREETING; pwd; id -u; id -g; cat hello.txt")
    check(out.split() == ["from-image", "/app", "1000", "50", "hi"],
          f"Env, WorkingDir and User (app:staff) apply to commands (got {out.split()})")
    info = s.get(sid)
    check(info.get("image_digest") == mdigest, "get_sandbox shows the image digest")
    rc, out, _ = s.run(sid, "touch /workspace/w && echo ok")
    check(out.strip() == "ok", "the image's user owns /workspace")
    s.destroy(sid)
    res = s.tool("create_sandbox", {"image": ref, "env": {"OVERRIDE": "caller"}})
    sid = res["structuredContent"]["sandbox_id"]
    rc, out, _ = s.run(sid, "echo $OVERRIDE")
    check(out.strip() == "caller", "the caller's env wins over the image's Env")
    s.destroy(sid)
    return ref, mdigest


def test_digest_ref_and_cache(s, reg, front_plain, ref, mdigest):
    by_digest = f"{front_plain.host}/test/bb@{mdigest}"
    before = front_plain.blob_gets
    sid = s.create(by_digest)
    check(s.get(sid)["image_digest"] == mdigest, "a digest reference pulls that manifest")
    s.destroy(sid)
    # layers are shared through the store: only the config blob came over the wire
    check(front_plain.blob_gets - before == 1,
          f"layers already in the store were not fetched again ({front_plain.blob_gets - before} "
          "blob GETs)")
    before = front_plain.blob_gets
    sid = s.create(by_digest)
    check(front_plain.blob_gets == before, "a cached create fetches nothing")
    s.destroy(sid)


def test_index(s, reg):
    amd = oci.busybox_layer() + [f("platform", b"amd64\n")]
    arm = oci.busybox_layer() + [f("platform", b"arm64\n")]
    repo = "test/multi"
    da, sa = reg.push_image(repo, "amd-only", [("gzip", amd)])
    dr, sr = reg.push_image(repo, "arm-only", [("gzip", arm)], platform=("arm64", "v8"))
    index = {"schemaVersion": 2, "mediaType": oci.OCI_INDEX, "manifests": [
        {"mediaType": oci.OCI_MANIFEST, "digest": dr, "size": sr,
         "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
        {"mediaType": oci.OCI_MANIFEST, "digest": da, "size": sa,
         "platform": {"os": "linux", "architecture": "amd64"}}]}
    idx_digest, _ = reg.push_manifest(repo, "multi", index, oci.OCI_INDEX)
    sid = s.create(f"{reg.host}/{repo}:multi")
    rc, out, _ = s.run(sid, "cat /platform")
    check(out.strip() == "amd64", "an index resolves to the host's platform (amd64)")
    check(s.get(sid)["image_digest"] == idx_digest, "the digest shown is the index's")
    s.destroy(sid)
    only = {"schemaVersion": 2, "mediaType": oci.OCI_INDEX, "manifests": [index["manifests"][0]]}
    reg.push_manifest(repo, "armonly-index", only, oci.OCI_INDEX)
    s.create(f"{reg.host}/{repo}:armonly-index",
             expect_error=["no variant for this host's platform", "linux/arm64/v8"])
    check(True, "an index without the host's platform is refused, naming what it offers")


def test_token_auth(s, front, state):
    ref = f"{front.host}/test/bb:2"
    msg = s.create(ref, expect_error=["refused access", "docker login"])
    check("No credentials found" in msg, "a token registry without credentials says to log in")
    auth = os.path.join(state, "auth.json")
    token = base64.b64encode(f"{front.user}:{front.password}".encode()).decode()
    with open(auth, "w") as fh:
        json.dump({"auths": {front.host: {"auth": token}}}, fh)
    return auth


def test_errors(s, reg, state, cut, tamper, mdigest):
    s.create(f"{reg.host}/test/bb:nope", expect_error=["not found", "tag"])
    check(True, "an unknown tag is not_found and says to check the tag")
    s.create(f"{reg.host}/test/nothere:1", expect_error="not found")
    check(True, "an unknown repository is not found")
    s.create("127.0.0.1:1/test/bb:2", expect_error=["unreachable", "no route"])
    check(True, "an unreachable registry says so and what to use instead")
    s.create("Bad::ref", expect_error="neither an image reference")
    check(True, "a malformed name says what a reference looks like")
    # a fresh image through the cutting front: nothing half-used may stay
    fresh = oci.busybox_layer() + [f("big", os.urandom(200000))]
    reg.push_image("test/cut", "1", [("gzip", fresh)])
    s.create(f"{cut.host}/test/cut:1", expect_error=["connection", "retry"])
    check(store_clean(state), "a connection cut mid-blob leaves nothing in the store's tmp/")
    s.create(f"{tamper.host}/test/bb@{mdigest}", expect_error=["tampered", "refused"])
    check(True, "a manifest whose digest does not match the reference is refused")


def hostile_cases(tmp_marker):
    """(name, tar entries or raw blob, media type, what the error must say)."""
    outside = f"/tmp/{tmp_marker}"
    gz = oci.LAYER_TYPES["gzip"]
    cases = [
        ("dotdot", [f(f"../../../..{outside}-dotdot", b"x")], "outside the layer"),
        ("absolute", [f(f"{outside}-abs", b"x")], "outside the layer"),
        ("inner-dotdot", [d("a"), f(f"a/../../..{outside}-inner", b"x")], "outside the layer"),
        ("symlink-then-file", [ln("esc", "/tmp"), f(f"esc/{tmp_marker}-sym", b"x")], "refused"),
        ("symlink-dir-chain", [ln("up", ".."), f(f"up/{tmp_marker}-chain", b"x")], "refused"),
        ("hardlink-out", [hl("h", "../../../../etc/passwd")], "hard link"),
        ("hardlink-abs", [hl("h", "/etc/passwd")], "hard link"),
    ]
    out = [(n, oci.compress(oci.tar_bytes(e), "gzip"), gz, w) for n, e, w in cases]
    bomb = oci.tar_bytes([f("zeros", b"\0" * (CAP + (8 << 20)))])
    out.append(("tar-bomb", oci.compress(bomb, "gzip"), gz, ["image store", "MCPBOX_IMAGE"]))
    good = oci.compress(oci.tar_bytes([f("a", os.urandom(5000))]), "gzip")
    corrupt = good[:40] + bytes(b ^ 0x5a for b in good[40:200]) + good[200:]
    out.append(("corrupt-gzip", corrupt, gz, "corrupt"))
    out.append(("not-zstd", good, oci.LAYER_TYPES["zstd"], ["corrupt", "layer"]))
    return out


def test_hostile(s, reg, state):
    marker = "oci-escape-" + os.urandom(4).hex()
    for name, blob, mt, want in hostile_cases(marker):
        (mdg, _), ldg = reg.push_raw_layer_image("test/hostile", name, blob, mt)
        s.create(f"{reg.host}/test/hostile:{name}",
                 expect_error=want if isinstance(want, list) else [want])
        escaped = glob.glob(f"/tmp/{marker}*") + glob.glob(f"/{marker}*") + \
            glob.glob(f"{state}/**/{marker}*", recursive=True)
        check(not escaped and not has_layer(state, ldg) and store_clean(state),
              f"hostile layer '{name}' refused, nothing written outside the store, no layer kept")
    dev = [f("ok", b"1"), ("null2", "chr", None, 0o666, 0, 0)]
    oci_blob = oci.compress(oci.tar_bytes(dev), "gzip")
    reg.push_raw_layer_image("test/hostile", "devnode", oci_blob, oci.LAYER_TYPES["gzip"])
    sid = s.create(f"{reg.host}/test/hostile:devnode")
    rc, out, _ = s.run(sid, "cat /ok; echo; test -e /null2 && echo present || echo absent")
    check(out.split() == ["1", "absent"], f"device nodes in a layer are skipped (got {out!r})")
    s.destroy(sid)


def test_symlinked_root_dirs(mcpbox, work):
    """An image whose /etc or a mount target's parent is a symlink to a host path: the sandbox's
    root is built before pivot_root, while the child still sees the host's tree, so following
    it wrote the generated hosts/hostname/resolv.conf and made the mount's directory on the host
    (docs/security.md, "Images"). The create fails instead, and nothing appears on the host."""
    state = tempfile.mkdtemp(prefix="ocit-sym-", dir="/tmp")
    proj = tempfile.mkdtemp(prefix="ocit-proj-", dir="/tmp")
    outs = {}
    for name, link in (("etc", "etc"), ("srv", "srv")):
        outs[name] = tempfile.mkdtemp(prefix=f"ocit-out-{name}-", dir="/tmp")
        os.chmod(outs[name], 0o1777)  # writable by the sandbox's ids, as /tmp is
        root = os.path.join(state, "images", f"sym-{name}")
        busybox_rootfs(root)
        if link == "etc":
            shutil.rmtree(os.path.join(root, "etc"))
        os.symlink(outs[name], os.path.join(root, link))
    s = oci.Serve(mcpbox, state, {"MCPBOX_ALLOW_DIRS": proj})
    try:
        for name, mounts in (("etc", None), ("srv", [{"source": proj, "target": "/srv/x",
                                                      "mode": "ro"}])):
            args = {"image": f"sym-{name}"}
            if mounts:
                args["mounts"] = mounts
            res = s.call("tools/call", {"name": "create_sandbox", "arguments": args})
            text = json.dumps(res)
            check(res.get("isError") and "symlink" in text and os.listdir(outs[name]) == [],
                  f"an image with /{name} a symlink to a host directory: the create is refused "
                  f"and nothing is written there ({os.listdir(outs[name])}, {text[:300]})")
    finally:
        s.close()
        with Cli(mcpbox, state) as c:
            c.close()
        for d in [state, proj] + list(outs.values()):
            shutil.rmtree(d, ignore_errors=True)


def test_user_lookup_stays_in_the_image(s, reg):
    """The image's User is looked up in its /etc/passwd by mcpbox itself, on the host: an image
    whose /etc/passwd is a symlink to a host file had mcpbox read that file (as root: any file,
    /etc/shadow's third field became the uid; a fifo or /dev/zero there hung the create). The
    lookup now stays inside the layer; a name it cannot find runs as root, as documented."""
    host = f"/tmp/ocit-hostpw-{os.urandom(4).hex()}"
    with open(host, "w") as fh:
        fh.write("app:x:4242:4242:app:/app:/bin/sh\n")
    try:
        base = [e for e in oci.busybox_layer() if e[0] != "etc/passwd"] + [ln("etc/passwd", host)]
        reg.push_image("test/pwlink", "1", [("gzip", base)], {"User": "app"})
        sid = s.create(f"{reg.host}/test/pwlink:1")
        rc, out, _ = s.run(sid, "id -u")
        s.destroy(sid)
        check(out.strip() == "0", f"an image's /etc/passwd linked to a host file is not read "
                                  f"through the link (uid {out.strip()}, 4242 = the host file's)")
    finally:
        os.unlink(host)


def image_cli(mcpbox, state, *args):
    p = subprocess.run([mcpbox, "image", "--state-dir", state] + list(args), capture_output=True,
                       env=dict(os.environ, MCPBOX_IMAGE_STORE_MAX_BYTES=str(CAP)), timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_cli(mcpbox, reg, state):
    only = oci.busybox_layer() + [f("cli-only", os.urandom(3000))]
    mdigest, _ = reg.push_image("test/clionly", "1", [("gzip", only)])
    layer = json.loads(image_cli(mcpbox, state, "-o", "json", "pull",
                                 f"{reg.host}/test/clionly:1")[1])["layers"][-1]
    rc, out, err = image_cli(mcpbox, state, "pull", f"{reg.host}/test/clionly:1")
    check(rc == 0 and out.split() == [f"{reg.host}/test/clionly:1", mdigest],
          f"mcpbox image pull prints the reference and its digest ({out!r} {err!r})")
    rc, out, _ = image_cli(mcpbox, state, "-o", "json", "ls")
    refs = [i["reference"] for i in json.loads(out)["images"]]
    check(f"{reg.host}/test/clionly:1" in refs and f"{reg.host}/test/bb:2" in refs,
          "mcpbox image ls lists pulled images")
    rc, out, _ = image_cli(mcpbox, state, "rm", f"{reg.host}/test/clionly:1")
    check(rc == 0, "mcpbox image rm forgets an image")
    rc, out, _ = image_cli(mcpbox, state, "rm", f"{reg.host}/test/clionly:1")
    check(rc == 3, "removing it again is not_found (exit 3)")
    check(has_layer(state, layer), "its layer stays until a prune")
    rc, out, _ = image_cli(mcpbox, state, "-o", "json", "prune")
    check(rc == 0 and json.loads(out)["freed_bytes"] > 0 and not has_layer(state, layer),
          "mcpbox image prune removes layers no image uses")
    rc, out, _ = image_cli(mcpbox, state, "pull", "127.0.0.1:1/x:1")
    check(rc == 1 and "unreachable" in _, "a failed pull says why and exits 1")


ROOTLESS_USER = "mcpbox-oci-test"
SUBID_BASE = 2000000000  # far from root mode's per-sandbox slices


def ensure_rootless_user():
    """An ordinary user with one subordinate range, made for this test (kept between runs)."""
    import pwd
    try:
        pw = pwd.getpwnam(ROOTLESS_USER)
    except KeyError:
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", "-K", "SUB_UID_COUNT=0",
                        "-K", "SUB_GID_COUNT=0", ROOTLESS_USER], check=True)
        pw = pwd.getpwnam(ROOTLESS_USER)
    rng = f"{SUBID_BASE}-{SUBID_BASE + 65535}"
    for f_, opt in (("/etc/subuid", "--add-subuids"), ("/etc/subgid", "--add-subgids")):
        with open(f_) as fh:
            if not any(line.startswith(f"{ROOTLESS_USER}:") for line in fh):
                subprocess.run(["usermod", opt, rng, ROOTLESS_USER], check=True)
    return pw


def test_rootless_cli(mcpbox, reg, ref):
    """An ordinary user pulls: layers are unpacked in a user namespace with the shared mapping
    (sandbox id N = subordinate id SUBID_BASE+N), and prune removes them again although the user
    cannot delete files owned by its subordinate ids."""
    pw = ensure_rootless_user()
    state = tempfile.mkdtemp(prefix="ocir-", dir="/tmp")
    os.chown(state, pw.pw_uid, pw.pw_gid)
    os.chmod(state, 0o700)
    env = {"PATH": os.environ["PATH"], "HOME": state, "MCPBOX_IMAGE_STORE_MAX_BYTES": str(CAP),
           **oci.ENV}
    # The user runs a copy of the binary: a build under /root (mode 0700, as in a fresh clone on a
    # fresh machine) is not reachable by another user.
    bindir = tempfile.mkdtemp(prefix="ocir-bin-", dir="/tmp")
    os.chmod(bindir, 0o755)
    user_mcpbox = os.path.join(bindir, "mcpbox")
    shutil.copy2(mcpbox, user_mcpbox)

    def as_user(*args, cmd="image"):
        def drop():
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
        p = subprocess.run([user_mcpbox, cmd, "--state-dir", state] + list(args), env=env,
                           cwd=state, capture_output=True, preexec_fn=drop, timeout=120)
        return p.returncode, p.stdout.decode(), p.stderr.decode()
    # the one-time root step of rootless mode (delegated cgroups); undone at the end
    subprocess.run([mcpbox, "setup", "--user", ROOTLESS_USER], check=True, capture_output=True)
    try:
        rc, out, err = as_user("-o", "json", "pull", ref)
        check(rc == 0, f"an ordinary user pulls {ref} ({err.strip()[:300]})")
        layers = json.loads(out)["layers"]
        top = os.path.join(state, "image-store", "layers", layers[-1][7:], "root")
        st = os.lstat(os.path.join(top, "app", "hello.txt"))
        check((st.st_uid, st.st_gid) == (SUBID_BASE + 1000, SUBID_BASE + 1000),
              f"a file of image uid 1000 belongs to subordinate uid {SUBID_BASE}+1000 on the host")
        wh = os.lstat(os.path.join(top, "data", "a"))
        import stat as stat_
        check(stat_.S_ISCHR(wh.st_mode) and wh.st_rdev == 0 and wh.st_uid == SUBID_BASE,
              "a whiteout is a 0/0 device owned by the namespace's root")
        check(os.getxattr(os.path.join(top, "opq"), "user.overlay.opaque") == b"y",
              "an opaque directory is marked in the user namespace")
        rc, out, err = as_user("create", "-q", "--image", ref, cmd="sandbox")
        check(rc == 0, f"the user creates a sandbox on the image ({err.strip()[:300]})")
        sid = out.strip()
        rc, out, err = as_user("exec", sid, "--", "id -u; pwd; ls /data; cat hello.txt; "
                               "stat -c %u /app/hello.txt", cmd="sandbox")
        as_user("rm", sid, cmd="sandbox")
        check(out.split() == ["1000", "/app", "b", "hi1000"] or
              out.split() == ["1000", "/app", "b", "hi", "1000"],
              f"rootless: User, WorkingDir, whiteout and owners as the image says ({out!r})")
        rc, _, err = as_user("rm", ref)
        rc2, out, err2 = as_user("-o", "json", "prune")
        left = os.listdir(os.path.join(state, "image-store", "layers"))
        check(rc == 0 and rc2 == 0 and left == [],
              f"the user's prune removes subordinate-owned layers ({err.strip()} {err2.strip()} "
              f"{left})")
    finally:
        subprocess.run([mcpbox, "setup", "--user", ROOTLESS_USER, "--undo"], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(bindir, ignore_errors=True)


SINGLE_USER = "mcpbox-oci-single"


def test_rootless_single_uid(mcpbox, reg, ref):
    """An ordinary user without subordinate ids (single-uid mode: the user is sandbox root and
    nobody else exists) pulls and creates from an image: files are the user's, whiteouts and
    opaque directories still hide, the image's User falls back to root, WorkingDir and Env
    hold; prune removes it all."""
    import pwd
    try:
        pw = pwd.getpwnam(SINGLE_USER)
    except KeyError:
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", "-K", "SUB_UID_COUNT=0",
                        "-K", "SUB_GID_COUNT=0", SINGLE_USER], check=True)
        pw = pwd.getpwnam(SINGLE_USER)
    for f_ in ("/etc/subuid", "/etc/subgid"):
        with open(f_) as fh:
            check(not any(line.startswith(f"{SINGLE_USER}:") for line in fh),
                  f"{SINGLE_USER} has no subordinate ids in {f_}")
    state = tempfile.mkdtemp(prefix="ocis-", dir="/tmp")
    os.chown(state, pw.pw_uid, pw.pw_gid)
    os.chmod(state, 0o700)
    env = {"PATH": os.environ["PATH"], "HOME": state, "MCPBOX_IMAGE_STORE_MAX_BYTES": str(CAP),
           **oci.ENV}
    bindir = tempfile.mkdtemp(prefix="ocis-bin-", dir="/tmp")
    os.chmod(bindir, 0o755)
    user_mcpbox = os.path.join(bindir, "mcpbox")
    shutil.copy2(mcpbox, user_mcpbox)

    def as_user(*args, cmd="image"):
        def drop():
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
        p = subprocess.run([user_mcpbox, cmd, "--state-dir", state] + list(args), env=env,
                           cwd=state, capture_output=True, preexec_fn=drop, timeout=120)
        return p.returncode, p.stdout.decode(), p.stderr.decode()
    # No `mcpbox setup` (it would give subordinate ids): a user as useradd leaves it, with
    # the fallbacks of rootless_bare (single uid, no delegated cgroups).
    try:
        rc, out, err = as_user("-o", "json", "pull", ref)
        check(rc == 0, f"single uid: an ordinary user without subordinate ids pulls {ref} "
              f"({err.strip()[:300]})")
        layers = json.loads(out)["layers"]
        top = os.path.join(state, "image-store", "layers", layers[-1][7:], "root")
        st = os.lstat(os.path.join(top, "app", "hello.txt"))
        check((st.st_uid, st.st_gid) == (pw.pw_uid, pw.pw_gid),
              f"single uid: the layer's files belong to the user (image owners are lost) "
              f"({st.st_uid}:{st.st_gid}, user {pw.pw_uid}:{pw.pw_gid})")
        rc, out, err = as_user("create", "-q", "--image", ref, cmd="sandbox")
        check(rc == 0, f"single uid: the user creates a sandbox on the image ({err.strip()[:300]})")
        sid = out.strip()
        rc, out, err = as_user("exec", sid, "--", "id -u; pwd; echo $GREETING; ls /data; "
                               "echo --; ls /opq; cat hello.txt; echo; touch /app/new && echo w",
                               cmd="sandbox")
        as_user("rm", sid, cmd="sandbox")
        check(out.split() == ["0", "/app", "from-image", "b", "--", "z", "hi", "w"],
              f"single uid: root instead of User, WorkingDir, Env, whiteout, opaque directory, "
              f"a writable root ({out!r} {err.strip()[:200]})")
        rc, _, err = as_user("rm", ref)
        rc2, out, err2 = as_user("-o", "json", "prune")
        left = os.listdir(os.path.join(state, "image-store", "layers"))
        check(rc == 0 and rc2 == 0 and left == [],
              f"single uid: prune removes the layers ({err.strip()} {err2.strip()} {left})")
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(bindir, ignore_errors=True)


def test_overlay_state_dir(mcpbox, ref, mdigest):
    """Root mode with the state directory on overlayfs (as inside a container), which cannot be
    mounted idmapped: the image sandboxes share one fixed mapping, and get_sandbox says so."""
    base = tempfile.mkdtemp(prefix="ocio-", dir="/tmp")
    dirs = {n: os.path.join(base, n) for n in ("lower", "upper", "work", "merged")}
    for dd in dirs.values():
        os.mkdir(dd)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={dirs['lower']},upperdir={dirs['upper']},workdir={dirs['work']}",
                    dirs["merged"]], check=True)
    state = os.path.join(dirs["merged"], "state")
    os.mkdir(state, 0o700)
    s = None
    try:
        s = oci.Serve(mcpbox, state)
        sid = s.create(ref)
        rc, out, _ = s.run(sid, "id -u; ls /data; echo --; ls /opq; stat -c %u /app/hello.txt")
        check(out.split() == ["1000", "b", "--", "z", "1000"],
              f"on overlayfs: User, whiteout, opaque dir and owners hold ({out.split()})")
        info = s.get(sid)
        check("shared" in info.get("image_mapping", "") and info["image_digest"] == mdigest,
              "get_sandbox reports the shared mapping of the no-idmap fallback")
        s.destroy(sid)
        test_registered_dir_on_overlay(s, state, base)
        s.close()
        s = None
    finally:
        if s:
            s.close(show_log=True)
        with Cli(mcpbox, state) as c:
            c.close()
        subprocess.run(["umount", "-l", dirs["merged"]])
        subprocess.run(["umount", "-l", os.path.join(base, "tmpfs")], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def busybox_rootfs(root):
    for sub in ("bin", "etc", "tmp"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    shutil.copy2(oci.BUSYBOX, os.path.join(root, "bin", "busybox"))
    for tool in ("sh", "echo", "id"):
        os.symlink("busybox", os.path.join(root, "bin", tool))


def test_registered_dir_on_overlay(s, state, base):
    """A registered root filesystem directory on overlayfs cannot be idmapped: it is copied into
    the image store once, owners shifted into the shared mapping, and the sandbox sees the
    directory's own owners; a change in the directory makes a new copy. Moved to a tmpfs behind
    a symlink it is mounted idmapped again, as on any filesystem that can."""
    reg_dir = os.path.join(state, "images", "bbdir")
    busybox_rootfs(reg_dir)
    os.makedirs(os.path.join(reg_dir, "data"))
    with open(os.path.join(reg_dir, "data", "owned"), "w") as fh:
        fh.write("mine")
    os.chown(os.path.join(reg_dir, "data", "owned"), 1000, 1000)
    os.link(os.path.join(reg_dir, "data", "owned"), os.path.join(reg_dir, "data", "link"))
    with open(os.path.join(reg_dir, "secret"), "w") as fh:
        fh.write("s3cret")
    os.chmod(os.path.join(reg_dir, "secret"), 0o600)
    layers = os.path.join(state, "image-store", "layers")
    before = set(os.listdir(layers))
    sid = s.create("bbdir")
    rc, out, _ = s.run(sid, "id -u; stat -c %u:%g /data/owned; cat /secret; echo; "
                            "echo x > /secret && echo w; stat -c %h /data/link; "
                            "[ /data/link -ef /data/owned ] && echo same")
    info = s.get(sid)
    s.destroy(sid)
    check(out.split() == ["0", "1000:1000", "s3cret", "w", "2", "same"],
          f"a registered directory on overlayfs works: root, the directory's owners, a root-only "
          f"file readable and writable, a hard link still one ({out.split()})")
    check("shared" in info.get("image_mapping", "") and
          info.get("image_copied_from", "").endswith("images/bbdir"),
          "get_sandbox says it runs on a copy with the shared mapping")
    copies = set(os.listdir(layers)) - before
    check(len(copies) == 1, f"the directory was copied into the store once ({copies})")
    with open(os.path.join(reg_dir, "secret")) as fh:
        check(fh.read() == "s3cret", "the registered directory itself is untouched")
    sid = s.create("bbdir")
    s.destroy(sid)
    check(set(os.listdir(layers)) - before == copies, "a second create uses the same copy")
    with open(os.path.join(reg_dir, "data", "added"), "w") as fh:
        fh.write("new")
    sid = s.create("bbdir")
    rc, out, _ = s.run(sid, "cat /data/added")
    s.destroy(sid)
    check(out.strip() == "new" and len(set(os.listdir(layers)) - before) == 2,
          "a change in the directory makes a new copy at the next create")
    tmpfs = os.path.join(base, "tmpfs")
    os.mkdir(tmpfs)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", tmpfs], check=True)
    shutil.move(reg_dir, os.path.join(tmpfs, "bbdir"))
    os.symlink(os.path.join(tmpfs, "bbdir"), reg_dir)
    sid = s.create("bbdir")
    rc, out, _ = s.run(sid, "echo from-tmpfs; id -u")
    info = s.get(sid)
    s.destroy(sid)
    check(out.split() == ["from-tmpfs", "0"] and "image_mapping" not in info,
          f"moved to a tmpfs behind a symlink it is mounted idmapped ({out.split()})")


def test_concurrent_pulls(s, reg, front):
    """Two creates at once of two images that share a new layer: that layer is fetched once."""
    shared = oci.busybox_layer() + [f("shared", os.urandom(400000))]
    reg.push_image("test/conc", "a", [("gzip", shared), ("gzip", [f("only-a", b"a")])])
    reg.push_image("test/conc", "b", [("gzip", shared), ("gzip", [f("only-b", b"b")])])
    blob = oci.digest(oci.compress(oci.tar_bytes(shared), "gzip"))
    path = f"/v2/test/conc/blobs/{blob}"
    res = s.create_together([f"{front.host}/test/conc:a", f"{front.host}/test/conc:b"])
    ok = [not r.get("isError") for r in res]
    for r in res:
        if not r.get("isError"):
            s.destroy(r["structuredContent"]["sandbox_id"])
    check(all(ok) and front.gets_by_path.get(path) == 1,
          f"two concurrent pulls sharing a layer fetch it once ({front.gets_by_path.get(path)} "
          f"GETs, {ok})")


def test_lru_cap(mcpbox, reg):
    """A small cap: an unused layer is evicted (least recently used first) to make room; layers
    of a live sandbox are not, and then the create fails saying what to do."""
    def data(tag):
        return [("gzip", oci.busybox_layer()), ("gzip", [f(f"{tag}-data", os.urandom(3 << 20))])]
    reg.push_image("test/lru", "a", data("a"))
    reg.push_image("test/lru", "b", data("b"))
    state = tempfile.mkdtemp(prefix="ocil-", dir="/tmp")
    s = oci.Serve(mcpbox, state, {"MCPBOX_IMAGE_STORE_MAX_BYTES": str(7 << 20)})
    try:
        sid = s.create(f"{reg.host}/test/lru:a")
        s.destroy(sid)
        sid = s.create(f"{reg.host}/test/lru:b")
        layers = os.listdir(os.path.join(state, "image-store", "layers"))
        check(len(layers) == 2, f"pulling b under the cap evicted a's unused layer ({layers})")
        msg = s.create(f"{reg.host}/test/lru:a", expect_error=["image store is full",
                                                               "destroy sandboxes"])
        check("live sandboxes" in msg, "layers of a live sandbox are never evicted: the "
              "create fails with what to do")
        s.destroy(sid)
        sid = s.create(f"{reg.host}/test/lru:a")
        s.destroy(sid)
        check(True, "once that sandbox is gone, its layers make room")
        s.close()
        s = None
    finally:
        if s:
            s.close(show_log=True)
        with Cli(mcpbox, state) as c:
            c.close()
        shutil.rmtree(state, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    args = ap.parse_args()
    for tool in (oci.REGISTRY_BIN, oci.BUSYBOX, shutil.which("zstd") or "/nonexistent"):
        if not os.path.exists(tool):
            raise AssertionError(f"{tool} is missing: run scripts/install-deps.sh --test")
    with Cli(args.mcpbox) as cli:
        cli.create()  # skips (77) where local sandboxes cannot run
        state = cli.state_dir
        work = tempfile.mkdtemp(prefix="ocit-", dir="/tmp")
        reg = oci.Registry(work)
        fronts = []
        s = None
        ok = False
        try:
            plain, cut, tamper, token = (oci.Front(reg, m) for m in
                                         ("plain", "cut", "tamper", "token"))
            fronts = [plain, cut, tamper, token]
            s = oci.Serve(args.mcpbox, state, {"MCPBOX_IMAGE_STORE_MAX_BYTES": str(CAP),
                                               "HOME": work})
            ref, mdigest = test_layers_config_progress(s, reg, state)
            test_digest_ref_and_cache(s, reg, plain, ref, mdigest)
            test_index(s, reg)
            test_errors(s, reg, state, cut, tamper, mdigest)
            test_hostile(s, reg, state)
            test_symlinked_root_dirs(args.mcpbox, work)
            test_user_lookup_stays_in_the_image(s, reg)
            test_cli(args.mcpbox, reg, state)
            test_concurrent_pulls(s, reg, plain)
            test_lru_cap(args.mcpbox, reg)
            test_rootless_cli(args.mcpbox, reg, ref)
            test_rootless_single_uid(args.mcpbox, reg, ref)
            test_overlay_state_dir(args.mcpbox, ref, mdigest)
            auth = test_token_auth(s, token, state)
            s.close()
            s = oci.Serve(args.mcpbox, state, {"MCPBOX_IMAGE_STORE_MAX_BYTES": str(CAP),
                                               "HOME": work, "REGISTRY_AUTH_FILE": auth})
            sid = s.create(f"{token.host}/test/bb:2")
            rc, out, _ = s.run(sid, "echo $GREETING")
            check(out.strip() == "from-image",
                  "a token registry works with credentials from $REGISTRY_AUTH_FILE")
            s.destroy(sid)
            ok = True
        finally:
            if s:
                s.close(show_log=not ok)
            for fr in fronts:
                fr.close()
            reg.close()
            shutil.rmtree(work, ignore_errors=True)
    print("all OCI image checks passed")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}")
        sys.exit(1)
