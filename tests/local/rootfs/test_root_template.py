#!/usr/bin/env python3
"""A sandbox's root made from a template (backend/local/root_template.c) looks exactly like one
the sandbox makes on a tmpfs of its own (MCPBOX_LOCAL_ROOT_TEMPLATES=0): the same entries with
the same types, modes, owners and link targets, the same generated files, read-only everywhere
but /workspace, /tmp, /root and /dev/shm. The template is made once and reused; a template
damaged from outside fails the create with an error that says what to remove, and is made anew
once removed. A templates directory that cannot be used makes creates fall back to the tmpfs
root, not fail. Through `mcpbox serve`, where a spawner thread makes the root ahead as one mount
tree (backend/local/root_tree.c, root mode), the root is the same again. Run as root
or as an ordinary user (tests/local/rootless); exits 77 where local sandboxes cannot run."""
import argparse
import difflib
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcp_stdio import Client, serve_argv  # noqa: E402
from mcpbox_cli import Cli, runtime_left, text  # noqa: E402

ENV = "MCPBOX_LOCAL_ROOT_TEMPLATES"
# Everything a host-mode root holds, as the sandbox sees it; then writes that must all fail.
VIEW = r"""
for p in / /bin /sbin /lib /lib64 /etc /etc/* /etc/ssl/* /dev /dev/* /var /var/tmp /run \
         /proc/acpi /workspace /tmp /root /usr; do
    [ -e "$p" ] || [ -L "$p" ] && stat -c '%n|%F|%a|%U|%G|%N' "$p"
done
cat /etc/passwd /etc/group /etc/hosts /etc/hostname /etc/resolv.conf /etc/nsswitch.conf
for f in /x /etc/x /etc/passwd /run/x /dev/x /var/x /proc/acpi/x; do
    (echo > "$f") 2>/dev/null && echo "WROTE $f"
done
awk '$5 == "/" { split($6, o, ","); print "root mount:", o[1] }' /proc/self/mountinfo
for d in /workspace /tmp /root /dev/shm; do echo ok > "$d/probe" && echo "writable $d"; done
"""


def view(cli, templates):
    """What a new sandbox sees, and its identity mode."""
    os.environ[ENV] = templates
    try:
        sid = cli.create()
    finally:
        del os.environ[ENV]
    mode = cli.get_json(sid)["isolation"]["identity"]["mode"]
    p = cli.exec(sid, VIEW)
    assert p.returncode == 0, text(p.stderr)
    cli.rm(sid)
    return text(p.stdout), mode


def served_views(mcpbox, state_dir, templates, creates=5):
    """Through one `mcpbox serve`: what each of several sandboxes made one after the other sees,
    with the root its created event names. From the second create on a spawner thread prepares
    the next one's set, and as root the root's tree with it."""
    env = dict(os.environ, **{ENV: templates})
    client = Client(serve_argv(mcpbox, state_dir, "--local-pool", "0"), env=env)
    client.initialize("test_root_template")
    seen = []
    for _ in range(creates):
        sid = client.call_tool("create_sandbox", {})["structuredContent"]["sandbox_id"]
        run = client.call_tool("run_command", {"sandbox_id": sid, "command": VIEW})
        out = run["structuredContent"]
        assert out["exit_code"] == 0, out
        events = client.call_tool("diagnose_sandbox", {"sandbox_id": sid, "what": "events"})
        created = [e for e in events["structuredContent"]["events"] if e["kind"] == "created"]
        seen.append((out["stdout"], created[0]["data"]["root"]))
        client.call_tool("destroy_sandbox", {"sandbox_id": sid})
    assert client.close(30) == 0
    return seen


def kernel_at_least(major, minor):
    release = os.uname().release.split("-")[0].split(".")
    return (int(release[0]), int(release[1])) >= (major, minor)


def check_served(mcpbox, state_dir, tdir, on_tmpfs):
    """As root on Linux 6.15+ (mounts on a detached tree), the sandboxes after the first few
    get the tree made ahead; every root equals the tmpfs root."""
    seen = served_views(mcpbox, state_dir, tdir)
    roots = [root for _, root in seen]
    print(f"served roots: {roots}")
    for stdout, root in seen:
        if stdout != on_tmpfs:
            sys.stdout.writelines(difflib.unified_diff(on_tmpfs.splitlines(True),
                                                       stdout.splitlines(True),
                                                       "tmpfs root", root))
            raise AssertionError(f"the {root} root differs from the tmpfs root")
    if os.geteuid() == 0 and kernel_at_least(6, 15):
        assert "template tree made ahead" in roots, roots
    else:
        assert "template tree made ahead" not in roots, roots


def templates_in(d):
    return sorted(e for e in os.listdir(d)) if os.path.isdir(d) else []


def damage(tdir):
    for t in templates_in(tdir):
        shutil.rmtree(os.path.join(tdir, t, "usr"), ignore_errors=True)


def damaged_template(cli, tdir):
    """A template damaged from outside (a mount point removed): the create fails, says which
    directory to remove, and leaves nothing; once it is removed the next create makes it anew.
    As root each uid slot has its own template, and tests running beside this one hold slots:
    a create that got a slot of its own (a new, whole template) is undone and tried again."""
    os.environ[ENV] = tdir
    try:
        for attempt in range(10):
            damage(tdir)
            before = templates_in(tdir)
            p = cli.run("create", "-q")
            if p.returncode == 0:
                assert templates_in(tdir) != before, "a create on a damaged template succeeded"
                cli.created.append(text(p.stdout).strip())
                cli.rm(text(p.stdout).strip())
                continue
            err = text(p.stderr)
            assert "bind /usr" in err and tdir in err and "remove the directory" in err, err
            print(f"damaged template (attempt {attempt + 1}): {err.strip()}")
            break
        else:
            raise AssertionError("10 creates in a row got a uid slot of their own")
        assert not runtime_left(cli.state_dir), runtime_left(cli.state_dir)
        shutil.rmtree(tdir)
        sid = cli.create()
    finally:
        del os.environ[ENV]
    assert len(templates_in(tdir)) == 1, templates_in(tdir)
    assert cli.exec(sid, "ls /usr/bin/env").returncode == 0
    cli.rm(sid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="mbx-roottpl-")
    os.chmod(work, 0o755)
    tdir = os.path.join(work, "templates")
    with Cli(a.mcpbox) as cli:
        on_tmpfs, _ = view(cli, "0")
        from_template, mode = view(cli, tdir)
        made = templates_in(tdir)
        print(from_template)
        assert "WROTE" not in from_template and "WROTE" not in on_tmpfs, from_template
        assert "root mount: ro" in from_template and "root mount: ro" in on_tmpfs
        for d in ("/workspace", "/tmp", "/root", "/dev/shm"):
            assert f"writable {d}" in from_template, d
        if on_tmpfs != from_template:
            sys.stdout.writelines(difflib.unified_diff(on_tmpfs.splitlines(True),
                                                       from_template.splitlines(True),
                                                       "tmpfs root", "template root"))
            raise AssertionError("the template root differs from the tmpfs root")
        print(f"identity: {mode}; templates made: {made}")
        # A user cannot give files to shared subordinate ids: those roots stay on a tmpfs.
        if mode == "shared subordinate ids":
            assert made == [], made
        else:
            assert len(made) == 1 and not made[0].startswith(".new-"), made
            before = os.stat(os.path.join(tdir, made[0])).st_ino
            view(cli, tdir)  # another slot's sandbox (tests run in parallel) makes its own
            assert not [t for t in templates_in(tdir) if t.startswith(".new-")], templates_in(tdir)
            assert os.stat(os.path.join(tdir, made[0])).st_ino == before, "made again"
            check_served(a.mcpbox, cli.state_dir, tdir, on_tmpfs)
            damaged_template(cli, tdir)
        # A templates "directory" that is a file: creates still work, on a tmpfs root.
        blocker = os.path.join(work, "a-file")
        open(blocker, "w").close()
        fallback, _ = view(cli, os.path.join(blocker, "templates"))
        assert fallback == on_tmpfs, "the fallback root differs from the tmpfs root"
    shutil.rmtree(work)
    print("PASS: template root == tmpfs root; made once; unusable directory falls back")


if __name__ == "__main__":
    main()
