#!/usr/bin/env python3
"""Named volumes (issue 36) through the real server over stdio and the CLI: create, list,
inspect, delete; mounted rw and ro into several sandboxes at once; the size limit (enforced by
an ext4 image as root, refused at mount past it as a user: each named so); surviving a server
restart (and, as root, the image being unmounted meanwhile, as after a reboot); bad names; and a
hostile sandbox: symlinks planted in the volume (another sandbox, inspect's size walk and delete
must not follow them out), two sandboxes writing at once, filling past the limit; as root, a
disk that fills while a volume's image is made. Runs as root and, through tests/local/rootless,
as an ordinary user.

usage: test_volumes.py --mcpbox PATH [--check NAME]   (exit 77 where local sandboxes cannot run)
"""
import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_stdio import Client, result_text, serve_argv  # noqa: E402

SKIP = 77
ROOT = os.geteuid() == 0
MIB = 1 << 20


class Serve(Client):
    def __init__(self, mcpbox, state):
        super().__init__(serve_argv(mcpbox, state, "--local-pool", 0), stderr=subprocess.DEVNULL,
                         cwd="/")
        self.mcpbox, self.state = mcpbox, state
        self.initialize("volumes-test")

    def tool(self, name, /, **args):
        res = self.call_tool(name, args)
        return res.get("isError", False), res.get("structuredContent"), result_text(res)

    def ok(self, name, /, **args):
        err, out, text = self.tool(name, **args)
        assert not err, f"{name} {args}: {text}"
        return out

    def refused(self, name, words, /, **args):
        err, _, text = self.tool(name, **args)
        assert err, f"{name} {args} was accepted"
        for w in words:
            assert w in text, f"{name} {args}: {w!r} not in {text!r}"
        print(f"  refused {name} {json.dumps(args)[:90]}: {text[:150]}")
        return text

    def volume(self, action, /, **args):
        return self.ok("volume", action=action, **args)

    def create(self, *mounts):
        return self.ok("create_sandbox", mounts=list(mounts))["sandbox_id"]

    def sh(self, sid, command, timeout_ms=60000):
        out = self.ok("run_command", sandbox_id=sid, command=command, timeout_ms=timeout_ms)
        return out["exit_code"], out.get("stdout", ""), out.get("stderr", "")

    def cli(self, *args):
        return subprocess.run([self.mcpbox, "volume", "--state-dir", self.state, *args],
                              capture_output=True, text=True, timeout=120)

    def close(self):
        super().close(timeout=60)


def vol(name, target, mode=None):
    m = {"volume": name, "target": target}
    if mode:
        m["mode"] = mode
    return m


def volume_dirs(state):
    d = os.path.join(state, "volumes")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


# ---- checks ------------------------------------------------------------------------------------

def check_names(s, base):
    """Bad names are refused by the tool, the CLI and a create's mount; nothing is made."""
    for bad in ["a/b", "..", "../x", "", ".hidden", "-x", "x" * 64, "a b", "é"]:
        s.refused("volume", [], action="create", name=bad)
    for bad in ["a/b", "..", "../etc", "x/../../y", "a..b"]:
        r = s.cli("create", bad)
        assert r.returncode == 2 and "not a volume name" in r.stderr, (bad, r.returncode, r.stderr)
    s.refused("create_sandbox", ["not a volume name"], mounts=[vol("../x", "/data/x")])
    s.refused("volume", ["no volume called"], action="inspect", name="missing")
    s.refused("volume", ["no volume called"], action="delete", name="missing")
    assert s.volume("list")["volumes"] == [] and volume_dirs(s.state) == [], "something was made"
    print("names: '/', '..', empty, too long and odd ones refused everywhere; nothing made")


def check_share(s, base):
    """Two rw and one ro sandbox share a volume; delete is refused naming them; the mount rules."""
    info = s.volume("create", name="shared", size_bytes=64 * MIB)
    assert info["size_limit_bytes"] == 64 * MIB and info["name"] == "shared", info
    s.refused("volume", ["already have a volume called shared"], action="create", name="shared")
    a = s.create(vol("shared", "/data/v", "rw"))
    b = s.create(vol("shared", "/mnt/v", "rw"))
    c = s.create(vol("shared", "/srv/v", "ro"))
    assert s.sh(a, "echo from-a > /data/v/a.txt")[0] == 0
    code, out, _ = s.sh(b, "cat /mnt/v/a.txt && echo from-b > /mnt/v/b.txt")
    assert code == 0 and out == "from-a\n", out
    code, out, err = s.sh(c, "cat /srv/v/b.txt; echo x > /srv/v/c.txt")
    assert out == "from-b\n" and code != 0 and "Read-only" in err, (code, out, err)
    d = s.create(vol("shared", "/opt/v"))  # no mode: read-only, as copy-on-write is for a dir
    code, out, err = s.sh(d, "cat /opt/v/a.txt; echo x > /opt/v/d.txt")
    assert out == "from-a\n" and code != 0 and "Read-only" in err, (code, out, err)
    assert s.ok("get_sandbox", sandbox_id=d)["mounts"][0]["mode"] == "ro"
    s.ok("destroy_sandbox", sandbox_id=d)
    got = s.ok("get_sandbox", sandbox_id=c)
    assert any(m.get("volume") == "shared" and m["mode"] == "ro" for m in got["mounts"]), got
    info = s.volume("inspect", name="shared")
    assert sorted(info["used_by"]) == sorted([a, b, c]), info
    assert info["used_bytes"] > 0, info
    text = s.refused("volume", ["in use by", a, b, c, "destroy_sandbox"], action="delete",
                     name="shared")
    r = s.cli("rm", "shared")
    assert r.returncode != 0 and a in r.stderr, r.stderr
    assert s.sh(a, "cat /data/v/b.txt")[1] == "from-b\n", "the refused delete lost data"
    s.refused("create_sandbox", ["copy-on-write"], mounts=[vol("shared", "/data/w",
                                                               "copy-on-write")])
    s.refused("create_sandbox", ["both source and volume"],
              mounts=[{"volume": "shared", "source": base, "target": "/data/w"}])
    s.refused("create_sandbox", ["target"], mounts=[vol("shared", "/etc/v")])
    s.refused("create_sandbox", ["target"], mounts=[vol("shared", "/data/../etc")])
    for sid in (a, b, c):
        s.ok("destroy_sandbox", sandbox_id=sid)
    assert s.volume("inspect", name="shared")["used_by"] == []
    assert s.cli("rm", "shared").returncode == 0
    assert s.volume("list")["volumes"] == [] and volume_dirs(s.state) == []
    print(f"share: rw, rw and ro at once (ro without a mode); delete refused naming the users ({text[:60]}...)")


def check_concurrent(s, base):
    """Two sandboxes append to one file and write their own at once: nothing is lost."""
    s.volume("create", name="busy", size_bytes=64 * MIB)
    a, b = s.create(vol("busy", "/data/v", "rw")), s.create(vol("busy", "/data/v", "rw"))
    loop = ("i=0; while [ $i -lt 3000 ]; do echo {w}$i >> /data/v/log; "
            "echo $i > /data/v/{w}.$((i % 50)); i=$((i+1)); done")
    ids = [s.request("tools/call", s.tool_params("run_command", {
        "sandbox_id": sid, "command": loop.format(w=w), "timeout_ms": 120000}))
        for sid, w in ((a, "a"), (b, "b"))]
    for res in s.replies(ids, "two writers").values():
        assert not res.get("isError") and res["structuredContent"]["exit_code"] == 0, res
    code, out, _ = s.sh(a, "grep -c '^a' /data/v/log; grep -c '^b' /data/v/log; "
                           "ls /data/v | wc -l")
    assert out.split() == ["3000", "3000", "101"], out
    for sid in (a, b):
        s.ok("destroy_sandbox", sandbox_id=sid)
    s.volume("delete", name="busy")
    print("concurrent: two sandboxes wrote 6000 appends and 100 files at once; none lost")


def check_limit(s, base):
    """Filling past the limit: refused by the kernel as root; named as not enforced as a user,
    where a rw mount of a full volume is refused."""
    info = s.volume("create", name="small", size_bytes=32 * MIB)
    a, b = s.create(vol("small", "/data/v", "rw")), s.create(vol("small", "/mnt/v", "rw"))
    code, _, err = s.sh(a, "dd if=/dev/zero of=/data/v/big bs=1M count=48 2>&1; sync")
    info = s.volume("inspect", name="small")
    if ROOT:
        assert info["limit_enforced_by"] == "ext4 image (loop mount)", info
        assert info["used_bytes"] <= 32 * MIB, info
        code, _, err = s.sh(b, "dd if=/dev/zero of=/mnt/v/more bs=1M count=8")
        assert code != 0 and "No space left" in err, (code, err)
        s.sh(a, "rm /data/v/big")
        assert s.sh(b, "dd if=/dev/zero of=/mnt/v/more bs=1M count=8")[0] == 0, "space back"
        print(f"limit: the kernel refused writes past 32 MiB to both sandboxes ({info['used_bytes']}"
              " bytes used); freed space is usable again")
    else:
        assert info["limit_enforced_by"] == "usage watcher (read-only at the limit)", info
        assert "overshoot" in info["limit_note"], info
        assert info["used_bytes"] >= 32 * MIB, info
        s.refused("create_sandbox", ["at or over its limit"], mounts=[vol("small", "/data/v", "rw")])
        c = s.create(vol("small", "/data/v", "ro"))
        s.ok("destroy_sandbox", sandbox_id=c)
        print("limit: held by the watcher as a user (named so; test_volquota.py attacks it); a rw "
              "mount of the full volume refused, ro allowed")
    for sid in (a, b):
        s.ok("destroy_sandbox", sandbox_id=sid)
    s.volume("delete", name="small")


def check_links(s, base):
    """Symlinks a sandbox plants in a volume lead nowhere outside: not for another sandbox, not
    for inspect's size walk, not for delete."""
    victim = os.path.join(base, "victim")
    os.makedirs(victim)
    with open(os.path.join(victim, "secret"), "w") as f:
        f.write("host secret\n")
    with open(os.path.join(victim, "bulk"), "wb") as f:
        f.write(b"\1" * (8 * MIB))
    s.volume("create", name="linked", size_bytes=32 * MIB)
    a, b = s.create(vol("linked", "/data/v", "rw")), s.create(vol("linked", "/mnt/v"))
    code, _, err = s.sh(a, f"ln -s {victim} /data/v/out && ln -s {base} /data/v/up && "
                           f"ln -s /data/v/../../.. /data/v/dots && mkdir /data/v/d && "
                           f"ln -s {victim}/secret /data/v/d/file")
    assert code == 0, err
    code, out, err = s.sh(b, "cat /mnt/v/out/secret /mnt/v/d/file; ls /mnt/v/up/victim")
    assert "host secret" not in out and code != 0, (code, out, err)
    t0 = time.monotonic()
    info = s.volume("inspect", name="linked")
    assert info["used_bytes"] < 8 * MIB, f"the size walk followed a link: {info}"
    assert time.monotonic() - t0 < 20
    for sid in (a, b):
        s.ok("destroy_sandbox", sandbox_id=sid)
    s.volume("delete", name="linked")
    with open(os.path.join(victim, "secret")) as f:
        assert f.read() == "host secret\n", "delete followed a link"
    assert os.path.getsize(os.path.join(victim, "bulk")) == 8 * MIB
    assert volume_dirs(s.state) == []
    print("links: planted symlinks did not lead another sandbox, the size walk or delete out")


def check_restart(s, base):
    """A volume survives its sandboxes and the server (as root also its image's unmount)."""
    s.volume("create", name="kept", size_bytes=32 * MIB)
    a = s.create(vol("kept", "/data/v", "rw"))
    s.sh(a, "echo survived > /data/v/f")
    s.ok("destroy_sandbox", sandbox_id=a)
    s.close()
    if ROOT:  # as after a reboot: the image is mounted again when first used
        for (vid,) in [(d,) for d in volume_dirs(s.state)]:
            subprocess.run(["umount", "-l", os.path.join(s.state, "volumes", vid, "mnt")],
                           check=True)
    s2 = Serve(s.mcpbox, s.state)
    try:
        assert [v["name"] for v in s2.volume("list")["volumes"]] == ["kept"]
        r = s2.cli("ls")
        assert r.returncode == 0 and "kept" in r.stdout, r
        b = s2.create(vol("kept", "/srv/k", "ro"))
        assert s2.sh(b, "cat /srv/k/f")[1] == "survived\n"
        s2.ok("destroy_sandbox", sandbox_id=b)
        s2.volume("delete", name="kept")
    finally:
        s2.close()
    print("restart: the volume and its file outlived the sandbox and the server")


def check_full(s, base):
    """As root, a disk that fills while a volume's image is made: a clear error, and nothing
    listed or left behind. (The state directory on a 3 MiB tmpfs; a 1 TiB image's tables do not
    fit.)"""
    tiny = os.path.join(base, "tiny")
    os.makedirs(tiny)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", tiny], check=True)
    try:
        t = Serve(s.mcpbox, os.path.join(tiny, "state"))
        try:
            t.refused("volume", ["mkfs.ext4 failed", "disk full"], action="create", name="huge",
                      size_bytes=1 << 40)
            assert t.volume("list")["volumes"] == [], "a half-made volume is listed"
            assert volume_dirs(t.state) == [], f"left behind: {volume_dirs(t.state)}"
            t.volume("create", name="fits", size_bytes=16 * MIB)
            t.volume("delete", name="fits")
        finally:
            t.close()
    finally:
        subprocess.run(["umount", "-l", tiny], check=True)
    print("full: a disk full while the image was made is a clear error; nothing kept")


CHECKS = {"names": check_names, "share": check_share, "concurrent": check_concurrent,
          "limit": check_limit, "links": check_links, "restart": check_restart}
if ROOT:  # only root makes images (and mounts the small disk)
    CHECKS["full"] = check_full


def unmount_below(path):
    """As root, the volumes' images a failed check left mounted under the test's directory."""
    if not ROOT:
        return
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    for p in points:
        if p.startswith(path + "/"):
            subprocess.run(["umount", "-l", p], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--check", choices=sorted(CHECKS), action="append")
    a = ap.parse_args()
    a.mcpbox = os.path.abspath(a.mcpbox)
    base = tempfile.mkdtemp(prefix=f"mbx-vol-{secrets.token_hex(3)}-", dir="/tmp")
    os.chmod(base, 0o755)
    state = os.path.join(base, "state")
    try:
        for name in a.check or sorted(CHECKS):
            s = Serve(a.mcpbox, state)
            try:
                err, _, text = s.tool("create_sandbox")
                if err and "unsupported" in text.lower():
                    print(f"SKIP: {text}")
                    return SKIP
                s.ok("destroy_sandbox", sandbox_id=json.loads(text)["sandbox_id"])
                print(f"# {name}")
                CHECKS[name](s, base)
            finally:
                if s.proc.stdin and not s.proc.stdin.closed:
                    s.close()
    finally:
        subprocess.run([a.mcpbox, "sandbox", "--state-dir", state, "rm", "--all"],
                       capture_output=True)
        unmount_below(base)
        shutil.rmtree(base, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
