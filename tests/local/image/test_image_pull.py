#!/usr/bin/env python3
"""How a pull behaves on the wire, end to end through MCP against Debian's docker-registry on
loopback (docs/images.md, Pulling): per-layer progress notifications of a slow pull; layers
checked against the config's rootfs.diff_ids; a download cut mid-blob resumed with a Range
request, or given up after 5 attempts; credential helpers (credsStore, credHelpers) run with a
time limit.

usage: test_image_pull.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ocitest as oci  # noqa: E402
from ocitest import f  # noqa: E402
from mcpbox_cli import Cli  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok - {what}")


def blob_size(entries, how="gzip"):
    return len(oci.compress(oci.tar_bytes(entries), how))


def test_progress(s, reg, slow):
    """Two layers through a front that trickles blobs: the notes name each layer (i of n), its
    bytes move while it downloads, progress only grows, and it ends at the total."""
    base = oci.busybox_layer() + [f("one", os.urandom(600000))]
    top = [f("two", os.urandom(600000))]
    reg.push_image("test/progress", "1", [("gzip", base), ("gzip", top)])
    sizes = [blob_size(base), blob_size(top)]
    s.progress.clear()
    sid = s.create(f"{slow.host}/test/progress:1", token="pull-progress")
    notes = [p for p in s.progress if p.get("progressToken") == "pull-progress"]
    check(len(notes) == len(s.progress), "every note carries the request's progress token")
    values = [p["progress"] for p in notes]
    check(all(b > a for a, b in zip(values, values[1:])),
          f"progress only grows ({len(values)} notes)")
    layered = [p for p in notes if p.get("total")]
    totals = {p["total"] for p in layered}
    check(len(totals) == 1, f"one total for the whole pull ({totals})")
    total = totals.pop()
    check(total == 2 * sum(sizes),
          f"the total counts each layer's bytes downloaded and unpacked ({total} vs "
          f"2 x {sum(sizes)})")
    check(layered[-1]["progress"] == total, "the last note is the whole work done")
    by_layer = {1: [], 2: []}
    for p in layered:
        m = re.search(r"layer (\d) of 2 \(sha256:[0-9a-f]{12}, [\d.]+ MB\): ([\d.]+) MB downloaded",
                      p.get("message", ""))
        if m:
            by_layer[int(m.group(1))].append(float(m.group(2)))
    check(all(len(v) >= 2 and v == sorted(v) and v[0] < v[-1] for v in by_layer.values()),
          f"each layer's downloaded bytes are reported as they move ({by_layer})")
    for i in (1, 2):
        check(any(f"layer {i} of 2" in p.get("message", "") and "unpacked" in p["message"]
                  for p in layered), f"layer {i} of 2 reports that it is unpacked")
    check(any("all: " in p.get("message", "") and "of 2 unpacked" in p["message"]
              for p in layered), "the notes also give the whole pull's figures")
    s.destroy(sid)


def test_progress_shared(s, reg, slow):
    """Two creates at once of images that share a big new layer: one fetches it, and the other,
    which waits for it, reports that layer's bytes moving too (its client's timeout resets)."""
    shared = oci.busybox_layer() + [f("shared", os.urandom(600000))]
    reg.push_image("test/pshare", "a", [("gzip", shared), ("gzip", [f("only-a", b"a")])])
    reg.push_image("test/pshare", "b", [("gzip", shared), ("gzip", [f("only-b", b"b")])])
    digest = oci.digest(oci.compress(oci.tar_bytes(shared), "gzip"))
    s.progress.clear()
    ids = {}
    for tag in ("a", "b"):  # both sent before any reply is read
        ids[s.request("tools/call", s.tool_params(
            "create_sandbox", {"image": f"{slow.host}/test/pshare:{tag}"}, f"share-{tag}"))] = tag
    results = {ids[i]: r for i, r in s.replies(list(ids), "two creates at once").items()}
    notes = {"share-a": [], "share-b": []}
    for p in s.progress:
        notes[p["progressToken"]].append(p)
    for r in results.values():
        assert not r.get("isError"), json.dumps(r)[:400]
        s.destroy(r["structuredContent"]["sandbox_id"])
    moving = {}
    for tok, ns in notes.items():
        vals = [n["progress"] for n in ns]
        check(all(b > a for a, b in zip(vals, vals[1:])) and ns and ns[-1]["progress"] ==
              ns[-1].get("total"), f"{tok}: progress grows and ends at its total")
        moving[tok] = [n["message"] for n in ns if digest[:19] in n.get("message", "") and
                       "MB downloaded" in n["message"]]
    check(all(len(v) >= 2 for v in moving.values()) and
          any("by another create" in m for v in moving.values() for m in v),
          f"both creates see the shared layer's bytes move, the waiting one marked 'by another "
          f"create' ({[len(v) for v in moving.values()]})")


def store_layers(state):
    return set(os.listdir(os.path.join(state, "image-store", "layers")))


def store_clean(state):
    return os.listdir(os.path.join(state, "image-store", "tmp")) == []


def test_diff_ids(s, reg, state):
    """rootfs.diff_ids: a layer whose uncompressed digest is not the config's is refused with
    both digests named, and the store keeps nothing of it; a config with the wrong count is
    refused before anything is fetched; a stored layer claimed with another diff_id too."""
    base = oci.busybox_layer()
    top = [f("payload", os.urandom(100000))]
    other = oci.digest(oci.tar_bytes([f("something-else", b"x")]))
    right = oci.digest(oci.tar_bytes(top))
    reg.push_image("test/diffid", "bad", [("gzip", base), ("zstd", top)],
                   diff_ids=[oci.digest(oci.tar_bytes(base)), other])
    before = store_layers(state)
    msg = s.create(f"{reg.host}/test/diffid:bad",
                   expect_error=["rootfs.diff_ids", other, right, "nothing of this layer"])
    added = store_layers(state) - before
    top_hex = oci.digest(oci.compress(oci.tar_bytes(top), "zstd"))[7:]
    check(top_hex not in added and store_clean(state),
          f"a layer whose content is not its diff_id is refused, nothing of it kept ({msg[:160]})")
    reg.push_image("test/diffid", "count", [("gzip", base), ("zstd", top)],
                   diff_ids=[oci.digest(oci.tar_bytes(base))])
    s.create(f"{reg.host}/test/diffid:count", expect_error=["lists 1 rootfs.diff_ids",
                                                            "2 layers"])
    check(True, "a config with fewer diff_ids than layers is refused")
    reg.push_image("test/diffid", "good", [("gzip", base), ("zstd", top)])
    sid = s.create(f"{reg.host}/test/diffid:good")
    s.destroy(sid)
    check(top_hex in store_layers(state), "the same layer with its true diff_id is stored")
    reg.push_image("test/diffid", "claim", [("gzip", base), ("zstd", top)],
                   diff_ids=[oci.digest(oci.tar_bytes(base)), other])
    s.create(f"{reg.host}/test/diffid:claim", expect_error=["verified when it was stored", other])
    check(True, "an image claiming another diff_id for a stored layer is refused")


def blob_path(repo, entries, how="gzip"):
    return f"/v2/{repo}/blobs/" + oci.digest(oci.compress(oci.tar_bytes(entries), how))


def test_resume(s, reg, state, cut_once, no_range, cut_always):
    """A blob download that breaks halfway is resumed with a Range request from the bytes
    received (or restarted when the registry ignores the range), and the layer is whole; one
    that breaks every time is given up after 5 attempts, saying so, with nothing kept."""
    big = [f("big", os.urandom(300000))]
    reg.push_image("test/resume", "1", [("gzip", oci.busybox_layer()), ("gzip", big)])
    path = blob_path("test/resume", big)
    size = blob_size(big)
    sid = s.create(f"{cut_once.host}/test/resume:1")
    rc, out, _ = s.run(sid, "stat -c %s /big")
    s.destroy(sid)
    ranges = [r for p, r in cut_once.ranges if p == path]
    check(out.strip() == "300000" and cut_once.gets_by_path.get(path) == 2 and
          ranges == [f"bytes={size // 2}-"],
          f"a download cut halfway resumes from byte {size // 2} of {size} and the layer is "
          f"whole ({ranges}, {cut_once.gets_by_path.get(path)} GETs)")
    big2 = [f("big2", os.urandom(300000))]
    reg.push_image("test/resume", "2", [("gzip", oci.busybox_layer()), ("gzip", big2)])
    path2 = blob_path("test/resume", big2)
    sid = s.create(f"{no_range.host}/test/resume:2")
    rc, out, _ = s.run(sid, "stat -c %s /big2")
    s.destroy(sid)
    check(out.strip() == "300000" and no_range.gets_by_path.get(path2) == 2,
          "a registry that ignores the Range sends the blob again, and it is taken from the "
          "start")
    big3 = [f("big3", os.urandom(300000))]
    reg.push_image("test/resume", "3", [("gzip", oci.busybox_layer()), ("gzip", big3)])
    path3 = blob_path("test/resume", big3)
    before = store_layers(state)
    msg = s.create(f"{cut_always.host}/test/resume:3",
                   expect_error=["broke 5 times", "gave up", "nothing of that layer was kept",
                                 "retry"])
    resumed = [r for p, r in cut_always.ranges if p == path3]
    starts = [int(r[6:-1]) for r in resumed]
    check(cut_always.gets_by_path.get(path3) == 5 and len(starts) == 4 and
          starts == sorted(starts) and starts[0] == blob_size(big3) // 2,
          f"a download cut every time is tried 5 times, each resuming further ({starts})")
    check(path3.rsplit(":", 1)[1] not in store_layers(state) - before and store_clean(state),
          f"and nothing of it is kept ({msg[:200]})")


HELPER = """#!/bin/sh
# docker-credential-{name}: answers for {host} only, as a keychain would
host=$(cat)
echo "{name} $host" >> {log}
{extra}
if [ "$host" = "{host}" ]; then
    printf '{{"ServerURL":"%s","Username":"{user}","Secret":"{password}"}}' "$host"
else
    echo "credentials not found in native keychain"
    exit 1
fi
"""


def write_helper(bindir, name, host, user, password, log, extra=""):
    path = os.path.join(bindir, f"docker-credential-{name}")
    with open(path, "w") as fh:
        fh.write(HELPER.format(name=name, host=host, user=user, password=password, log=log,
                               extra=extra))
    os.chmod(path, 0o755)


def docker_config(home, cfg):
    os.makedirs(os.path.join(home, ".docker"), exist_ok=True)
    with open(os.path.join(home, ".docker", "config.json"), "w") as fh:
        json.dump(cfg, fh)


def helper_calls(log):
    if not os.path.exists(log):
        return []
    with open(log) as fh:
        return fh.read().split("\n")[:-1]


def test_credential_helpers(s, reg, token, home, bindir):
    """credsStore and credHelpers in ~/.docker/config.json run docker-credential-<name> get
    (registry on stdin, JSON on stdout) against a registry that wants a bearer token; a helper
    that is missing, slow (past the time limit) or fails says so, and the server stays up."""
    log = os.path.join(home, "helper.log")
    write_helper(bindir, "ocistore", token.host, token.user, token.password, log)
    write_helper(bindir, "ocihost", token.host, token.user, token.password, log)
    write_helper(bindir, "ociwrong", token.host, token.user, "not-the-password", log)
    write_helper(bindir, "ocislow", token.host, token.user, token.password, log,
                 f"sleep 30 & echo $! > {home}/slow.pid; wait")
    write_helper(bindir, "ocifail", "nowhere", "u", "p", log, "echo 'keychain locked' >&2; exit 3")
    for tag in ("store", "hosts", "missing", "slow", "fail", "none", "wrong", "idtoken", "idfile"):
        reg.push_image("test/cred", tag, [("gzip", oci.busybox_layer()),
                                          ("gzip", [f(f"cred-{tag}", tag.encode())])])

    def create(tag, **kw):
        return s.create(f"{token.host}/test/cred:{tag}", **kw)

    docker_config(home, {"auths": {token.host: {}}, "credsStore": "ocistore"})
    sid = create("store")
    s.destroy(sid)
    check(helper_calls(log) == [f"ocistore {token.host}"],
          f"credsStore: docker-credential-ocistore get is asked for {token.host} and its "
          f"answer opens a token registry ({helper_calls(log)})")
    docker_config(home, {"credsStore": "ocistore", "credHelpers": {token.host: "ocihost"}})
    sid = create("hosts")
    s.destroy(sid)
    check(helper_calls(log)[-1] == f"ocihost {token.host}",
          "credHelpers.<host> comes before credsStore")
    docker_config(home, {"credsStore": "ocinothere"})
    create("missing", expect_error=["docker-credential-ocinothere", "not installed",
                                    "credsStore", "config.json"])
    check(True, "a helper that is not installed is named, with what to do")
    docker_config(home, {"credsStore": "ocislow"})
    t0 = time.time()
    create("slow", expect_error=["docker-credential-ocislow", "did not answer within 2 s",
                                 "MCPBOX_CREDENTIAL_HELPER_TIMEOUT"])
    took = time.time() - t0
    with open(os.path.join(home, "slow.pid")) as fh:
        sleeper = int(fh.read())
    time.sleep(0.2)
    gone = not os.path.exists(f"/proc/{sleeper}") or \
        open(f"/proc/{sleeper}/stat").read().split()[2] == "Z"
    check(took < 10 and gone,
          f"a helper past the time limit is stopped, with what it started ({took:.1f} s)")
    docker_config(home, {"credsStore": "ocifail"})
    create("fail", expect_error=["docker-credential-ocifail", "exit 3", "keychain locked"])
    check(True, "a helper that fails is reported with its exit status and its words")
    write_helper(bindir, "ocifail", "nowhere", "u", "p", log)  # now only "not found"
    create("none", expect_error=["No credentials found", "docker login"])
    check(True, "a helper without credentials for the registry leaves the pull anonymous")
    docker_config(home, {"credsStore": "ociwrong"})
    create("wrong", expect_error=["stored credentials were refused"])
    check(True, "credentials from a helper that the registry refuses are reported as such")
    write_helper(bindir, "ocitoken", token.host, "<token>", token.refresh, log)
    docker_config(home, {"credsStore": "ocitoken"})
    sid = create("idtoken")
    s.destroy(sid)
    form = token.posts[-1] if token.posts else {}
    check(form.get("grant_type") == "refresh_token" and form.get("refresh_token") == token.refresh
          and form.get("scope") == "repository:test/cred:pull",
          f"an identity token from a helper (Username <token>) is exchanged at the realm "
          f"(OAuth2 refresh_token grant, POST) ({form})")
    docker_config(home, {"auths": {token.host: {"identitytoken": token.refresh}}})
    sid = create("idfile")
    s.destroy(sid)
    check(len(token.posts) == 2, "an identitytoken in the file works the same way")
    sid = s.create(f"{reg.host}/test/cred:store")
    s.destroy(sid)
    check(True, "the server still creates after the helper failures")
    os.unlink(os.path.join(home, ".docker", "config.json"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    args = ap.parse_args()
    for tool in (oci.REGISTRY_BIN, oci.BUSYBOX):
        if not os.path.exists(tool):
            raise AssertionError(f"{tool} is missing: run scripts/install-deps.sh --test")
    with Cli(args.mcpbox) as cli:
        cli.create()  # skips (77) where local sandboxes cannot run
        state = cli.state_dir
        work = tempfile.mkdtemp(prefix="ocip-", dir="/tmp")
        reg = oci.Registry(work)
        fronts = []
        s = None
        ok = False
        try:
            slow, cut_once, no_range, cut = (oci.Front(reg, m) for m in (
                "slow", "cut-once", "cut-once-norange", "cut"))
            fronts = [slow, cut_once, no_range, cut]
            token = oci.Front(reg, "token")
            fronts.append(token)
            bindir = os.path.join(work, "bin")
            os.mkdir(bindir)
            s = oci.Serve(args.mcpbox, state, {
                "HOME": work, "PATH": bindir + ":" + os.environ["PATH"],
                "MCPBOX_CREDENTIAL_HELPER_TIMEOUT": "2"})
            test_progress(s, reg, slow)
            test_progress_shared(s, reg, slow)
            test_diff_ids(s, reg, state)
            test_resume(s, reg, state, cut_once, no_range, cut)
            test_credential_helpers(s, reg, token, work, bindir)
            ok = True
        finally:
            if s:
                s.close(show_log=not ok)
            for fr in fronts:
                fr.close()
            reg.close()
            shutil.rmtree(work, ignore_errors=True)
    print("all pull checks passed")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}")
        sys.exit(1)
