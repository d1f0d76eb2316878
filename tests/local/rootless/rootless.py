#!/usr/bin/env python3
"""Runs local-backend tests as an ordinary user (issue #11), for ctest (tests/local/rootless).

  rootless.py setup   --user NAME --mcpbox BIN --src DIR --build DIR [--bare]
  rootless.py run     --user NAME [--delegate-cgroups] -- COMMAND ARGS...
  rootless.py cleanup --user NAME --mcpbox BIN

setup (as root) creates NAME with useradd and no subordinate ids, then, unless --bare, prepares
it with `mcpbox setup --user NAME` (subordinate ids, delegated cgroups, /dev/net/tun), as the
README asks root to do once. If NAME cannot reach the source and build trees (a clone under
/root, mode 0700), they are copied to a staging directory it can read, and `run` rewrites the
paths in COMMAND. run executes COMMAND as NAME through runuser with a clean environment (HOME,
USER, PATH, the sanitizer and MCPBOX_* variables), from NAME's home. cleanup kills what is left
in NAME's delegated cgroups (its sandboxes, nothing else), undoes `mcpbox setup`, and removes
NAME (userdel -r), its runtime directory and the staging copy.

The cgroup tree is host-wide: a cgroup delegated to NAME's uid by an earlier `mcpbox setup`
(of a user since removed, or seen from a container with its own /etc/passwd) outlives the
user. setup --bare removes any, so the bare user starts with none, as its tests assume; run
--delegate-cgroups gives NAME such a delegation for the command's run only (and removes it
after), for the tests of that configuration.
"""
import argparse
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time

SKIP = 77


def info_path(user):
    return f"/tmp/{user}.rootless.json"


def sh(cmd, check=True, **kw):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=check, **kw)


def user_can_read(user, paths):
    r = subprocess.run(["runuser", "-u", user, "--", "sh", "-c",
                        " && ".join(f"test -r '{p}'" for p in paths)])
    return r.returncode == 0


def stage(user, src, build):
    """Copies what the tests need where user can read it; returns the path map."""
    root = f"/tmp/{user}-stage"
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    os.chmod(root, 0o755)
    s_src, s_build = os.path.join(root, "src"), os.path.join(root, "build")
    # Source: the test scripts (and the Node tooling the e2e tests run with).
    shutil.copytree(os.path.join(src, "tests"), os.path.join(s_src, "tests"), symlinks=True)
    # Build: the whole tree (binaries, test executables), without object files.
    shutil.copytree(build, s_build, symlinks=True,
                    ignore=shutil.ignore_patterns("*.o", "*.a", "CMakeFiles", "Testing"))
    sh(["chmod", "-R", "a+rX", root])
    return {src: s_src, build: s_build}


def cmd_setup(a):
    if os.geteuid() != 0:
        print("SKIP: the rootless runs are prepared by root (useradd, mcpbox setup)")
        return SKIP
    cmd_cleanup(a, quiet=True)
    sh(["useradd", "-m", "-s", "/bin/sh", "-K", "SUB_UID_COUNT=0", "-K", "SUB_GID_COUNT=0",
        a.user])
    if a.bare:  # no cgroup delegated to this uid, whatever an earlier user of it left
        n = undelegate(pwd.getpwnam(a.user).pw_uid)
        if n:
            print(f"removed {n} cgroup(s) an earlier setup had delegated to this uid")
    else:
        sh([a.mcpbox, "setup", "--user", a.user])
        # Idempotent: a second run changes nothing.
        again = sh([a.mcpbox, "setup", "--user", a.user], capture_output=True, text=True)
        assert "nothing to change" in again.stdout, again.stdout
    paths = [a.mcpbox, os.path.join(a.src, "tests/local/lib/mcpbox_cli.py")]
    # MCPBOX_ROOTLESS_STAGE=1: stage even if the trees are readable (to test the copy).
    readable = user_can_read(a.user, paths) and os.environ.get("MCPBOX_ROOTLESS_STAGE") != "1"
    mapping = {} if readable else stage(a.user, a.src, a.build)
    with open(info_path(a.user), "w") as f:
        json.dump({"map": mapping, "bare": a.bare}, f)
    print(f"rootless user {a.user} ready ({'no setup' if a.bare else 'mcpbox setup done'}"
          f"{', staged copy' if mapping else ''})")
    return 0


def remap(arg, mapping):
    # Longest prefix first: the build tree often sits inside the source tree.
    for old, new in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
        if arg == old or arg.startswith(old + "/"):
            return new + arg[len(old):]
        arg = arg.replace("=" + old + "/", "=" + new + "/")
    return arg


def cmd_run(a):
    try:
        with open(info_path(a.user)) as f:
            info = json.load(f)
    except OSError:
        print(f"rootless user {a.user} was not set up (the setup test failed?)")
        return 1
    argv = [remap(x, info["map"]) for x in a.command]
    if argv and os.path.basename(argv[0]).startswith("python"):
        # root's interpreter may live where the user cannot go (a pyenv under /root): the
        # system one runs the test scripts (they need only the standard library).
        argv[0] = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
    home = pwd.getpwnam(a.user).pw_dir
    env = {"HOME": home, "USER": a.user, "LOGNAME": a.user,
           "PATH": "/usr/local/bin:/usr/bin:/bin"}
    for k, v in os.environ.items():
        if k.startswith(("ASAN_", "UBSAN_", "LSAN_", "MCPBOX_")):
            env[k] = remap(v, info["map"])
    full = ["runuser", "-u", a.user, "--", "env", "-i"] + [f"{k}={v}" for k, v in env.items()]
    print(f"as {a.user}: " + " ".join(argv), flush=True)
    if not a.delegate_cgroups:
        return subprocess.run(full + argv, cwd=home).returncode
    pw = pwd.getpwnam(a.user)
    delegate(pw.pw_uid, pw.pw_gid)
    try:
        return subprocess.run(full + argv, cwd=home).returncode
    finally:
        undelegate(pw.pw_uid)


CG_ROOT = "/sys/fs/cgroup"
CG_V1 = ("memory", "pids", "cpu", "freezer")  # the hierarchies `mcpbox setup` delegates


def delegation_dirs(uid):
    """Where `mcpbox setup --user` delegates cgroups to uid (cli/cli_setup.c)."""
    if os.path.exists(f"{CG_ROOT}/cgroup.controllers"):  # cgroup v2
        return [f"{CG_ROOT}/mcpbox-u{uid}"]
    return [f"{CG_ROOT}/{c}/mcpbox-u{uid}" for c in CG_V1 if os.path.ismount(f"{CG_ROOT}/{c}")]


def delegate(uid, gid):
    """What `mcpbox setup --user` does to the cgroups, without its record (so no --undo)."""
    v2 = os.path.exists(f"{CG_ROOT}/cgroup.controllers")
    if v2:
        try:
            with open(f"{CG_ROOT}/cgroup.subtree_control", "w") as f:
                f.write("+memory +pids +cpu")
        except OSError:
            pass
    files = ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads") if v2 else \
        ("cgroup.procs", "tasks")
    for d in delegation_dirs(uid):
        os.makedirs(d, exist_ok=True)
        os.chown(d, uid, gid)
        for name in files:
            if os.path.exists(os.path.join(d, name)):
                os.chown(os.path.join(d, name), uid, gid)
    print(f"delegated cgroups to uid {uid}: {delegation_dirs(uid)}", flush=True)


def undelegate(uid):
    """Removes every cgroup delegated to uid, after killing what runs there; returns how many
    directories were removed."""
    kill_delegated(uid)
    removed = 0
    for base in delegation_dirs(uid):
        for _ in range(50):  # killed processes leave their cgroups a moment later
            for d, _, _ in sorted(os.walk(base), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(d)
                    removed += 1
                except OSError:
                    pass
            if not os.path.exists(base):
                break
            time.sleep(0.1)
        assert not os.path.exists(base), f"cannot remove the delegated cgroup {base}"
    return removed


def kill_delegated(uid):
    """SIGKILL whatever runs in the user's delegated cgroups (its sandboxes only)."""
    for base in delegation_dirs(uid):
        ctrl = os.path.basename(os.path.dirname(base))
        if ctrl == "freezer" and os.path.isdir(base):
            for d, _, _ in os.walk(base):
                try:
                    with open(os.path.join(d, "freezer.state"), "w") as f:
                        f.write("THAWED")
                except OSError:
                    pass
        for d, _, files in os.walk(base):
            try:
                pids = open(os.path.join(d, "cgroup.procs")).read().split()
            except OSError:
                continue
            for p in pids:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except OSError:
                    pass


def user_pids(uid):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            out.append(int(p))
                        break
        except OSError:
            pass
    return out


def cmd_cleanup(a, quiet=False):
    if os.geteuid() != 0:
        return SKIP
    try:
        pw = pwd.getpwnam(a.user)
    except KeyError:
        if not quiet:
            print(f"no user {a.user}: nothing to clean")
        return 0
    uid = pw.pw_uid
    for _ in range(3):  # the test user's own processes (a test that died mid-way), then sandboxes
        for p in user_pids(uid):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        kill_delegated(uid)
        time.sleep(0.2)
    rc = sh([a.mcpbox, "setup", "--user", a.user, "--undo"], check=False).returncode
    sh(["userdel", "-r", a.user], check=False, stderr=subprocess.DEVNULL)
    for d in (f"/dev/shm/mcpbox-{uid}", f"/run/user/{uid}/mcpbox", f"/tmp/{a.user}-stage",
              f"/tmp/mcpbox-{uid}"):
        shutil.rmtree(d, ignore_errors=True)
    try:
        os.unlink(info_path(a.user))
    except OSError:
        pass
    return 0 if rc == 0 else 1


def main():
    argv = sys.argv[1:]
    command = []
    if "--" in argv:  # run: everything after -- is the command, untouched
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=["setup", "run", "cleanup"])
    ap.add_argument("--user", required=True)
    ap.add_argument("--mcpbox")
    ap.add_argument("--src")
    ap.add_argument("--build")
    ap.add_argument("--bare", action="store_true")
    ap.add_argument("--delegate-cgroups", action="store_true")
    a = ap.parse_args(argv)
    a.command = command
    if a.action == "setup":
        return cmd_setup(a)
    if a.action == "run":
        return cmd_run(a)
    return cmd_cleanup(a)


if __name__ == "__main__":
    sys.exit(main())
