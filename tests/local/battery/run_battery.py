#!/usr/bin/env python3
"""Runs the escape and hardening battery (docs/internals/isolation-facts.md §8) inside a real local
sandbox made with `mcpbox sandbox`, and again unconfined inside `unshare --mount --uts`.

In the sandbox every check must PASS. Unconfined, most must FAIL: that shows each check is able
to fail (a check that passes everywhere proves nothing). A listener on a host abstract unix
socket and the list of host paths (state directory, database, agent sockets) are given to the
battery so those two checks discriminate too. The host mount table must be the same before and
after both runs.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcpbox_cli import Cli, runtime_dirs, sandbox_runtime_dir, skip, text  # noqa: E402

LINE = re.compile(r"^(PASS|FAIL|SKIP)\s+(\d+)\s+(\S+)\s+(\S+)\s+(.*)$")
# Unconfined (host root in private mount+uts namespaces) these must fail: the battery's core.
MUST_FAIL_UNCONFINED = {
    "caps_empty", "no_new_privs", "seccomp_filter", "uid_not_host_root", "mount_denied",
    "umount_denied", "unshare_userns", "clone3_denied", "bpf_denied", "module_load",
    "clock_settime", "sethostname", "chroot_denied", "personality", "i386_abi_killed",
    "pidns_hidden", "netns_only_lo", "abstract_unix", "usr_readonly", "shadow_unreadable",
    "proc_masked",
    "mknod_denied", "core_pattern", "proc_sys_readonly", "host_paths_hidden",
}
MIN_UNCONFINED_FAILS = 35
# Checks whose expectation depends on the sandbox's root filesystem mode
# (docs/internals/isolation-facts.md §8): an image's rootfs is the sandbox's own writable
# overlay, so these may fail there by design.
IMAGE_MODE_EXCEPTIONS = {"usr_readonly", "etc_readonly", "shadow_unreadable"}


def parse(output):
    results = {}
    for line in output.splitlines():
        m = LINE.match(line)
        if m:
            results[m.group(3)] = (m.group(1), m.group(2), m.group(4), m.group(5))
    return results


def mountinfo():
    with open("/proc/self/mountinfo") as f:
        return sorted(" ".join(l.split()[3:5]) for l in f)


def abstract_listener(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + name)
    s.listen(8)
    return s


def run_in_sandbox(cli, battery, env):
    sid = cli.create()
    staged = os.path.join(cli.state_dir, "battery.staged")
    shutil.copyfile(battery, staged)
    os.chmod(staged, 0o555)  # not writable by the sandbox: /proc/self/exe must stay closed
    p = cli.run("cp", staged, f"{sid}:battery")
    os.unlink(staged)
    assert p.returncode == 0, f"cp battery in: {text(p.stderr)}"
    env_opts = []
    for k, v in env.items():
        env_opts += ["-e", f"{k}={v}"]
    p = cli.exec(sid, "./battery", *env_opts, timeout=180)
    out = text(p.stdout)
    print("---- battery inside sandbox", sid)
    print(out + text(p.stderr))
    results = parse(out)
    return sid, p.returncode, results


def check_sandbox_results(results, image):
    assert len(results) >= 51, f"only {len(results)} checks ran"
    bad = []
    for cid, (status, num, err, detail) in sorted(results.items(), key=lambda r: int(r[1][1])):
        if status == "PASS":
            continue
        if image != "host" and cid in IMAGE_MODE_EXCEPTIONS:
            continue
        bad.append(f"{status} {num} {cid} {err} {detail}")
    assert not bad, "checks not passing inside the sandbox:\n  " + "\n  ".join(bad)


def run_unconfined(battery, env):
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "unshare(1) not installed"
    full = dict(os.environ, BATTERY_ALLOW_UNCONFINED="1", **env)
    scratch = tempfile.mkdtemp(prefix="battery-host-")
    full["TMPDIR"] = scratch
    try:
        p = subprocess.run([unshare, "--mount", "--uts", battery], capture_output=True,
                           timeout=180, env=full)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if p.returncode == 2 or (p.returncode != 0 and not p.stdout):
        return None, "unconfined run refused: " + text(p.stderr).strip()
    print("---- battery unconfined (unshare --mount --uts)")
    print(text(p.stdout))
    return parse(text(p.stdout)), None


def check_unconfined_results(results):
    fails = {cid for cid, r in results.items() if r[0] == "FAIL"}
    missing = sorted(MUST_FAIL_UNCONFINED - fails)
    assert not missing, f"these checks did not fail unconfined (they cannot discriminate): {missing}"
    assert len(fails) >= MIN_UNCONFINED_FAILS, \
        f"only {len(fails)} checks failed unconfined, expected >= {MIN_UNCONFINED_FAILS}"
    print(f"unconfined: {len(fails)} of {len(results)} checks failed, as they should")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--battery", required=True)
    ap.add_argument("--image", default="host")
    args = ap.parse_args()
    before = mountinfo()
    name = f"sbx-battery-host-{os.getpid()}"
    listener = abstract_listener(name)
    with Cli(args.mcpbox) as cli:
        logs = os.path.join(cli.state_dir, "sandboxes")
        env = {"BATTERY_ABSTRACT_NAME": name,
               "BATTERY_HOST_PATHS": ":".join([cli.state_dir, os.path.join(cli.state_dir, "mcpbox.db"),
                                               logs, args.mcpbox] + runtime_dirs(cli.state_dir))}
        sid, rc, inside = run_in_sandbox(cli, args.battery, env)
        run_dir = sandbox_runtime_dir(cli.state_dir, sid)
        assert run_dir, f"no runtime directory for {sid} in {runtime_dirs(cli.state_dir)}"
        sock = os.path.join(run_dir, "agent.sock")
        assert os.path.exists(sock), f"expected the agent socket at {sock} on the host"
        check_sandbox_results(inside, args.image)
        assert rc == 0, f"battery exited {rc} inside the sandbox"
        unconfined, why = run_unconfined(args.battery, dict(env, BATTERY_HOST_PATHS=env[
            "BATTERY_HOST_PATHS"] + ":" + sock))
    listener.close()
    after = mountinfo()
    assert before == after, "the host mount table changed:\n" + "\n".join(
        sorted(set(before) ^ set(after)))
    if unconfined is None:
        print(f"note: unconfined baseline not run ({why})")
        return 0
    check_unconfined_results(unconfined)
    print(f"sandbox: {sum(1 for r in inside.values() if r[0] == 'PASS')} of {len(inside)} checks PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
