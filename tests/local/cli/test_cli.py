#!/usr/bin/env python3
"""`mcpbox doctor` and `mcpbox sandbox ...` end to end through the real binary: exit codes,
tables and JSON, streamed exec output, stdin, env, cwd, signals, timeouts, file copies in and
out (across the chunk size), pause/resume, logs, rm. Exits 77 where local sandboxes cannot run."""
import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcpbox_cli import Cli, skip, text  # noqa: E402

EXIT_USAGE, EXIT_NOT_FOUND = 2, 3
CHUNK = 4 * 1024 * 1024  # the CLI's copy chunk: test a file that spans two


def check_doctor(mcpbox):
    p = subprocess.run([mcpbox, "doctor", "-o", "json"], capture_output=True)
    report = json.loads(p.stdout)
    assert p.returncode == (0 if report["ok"] else 1), (p.returncode, report["ok"])
    names = {c["name"] for c in report["checks"]}
    for n in ("user_namespaces", "apparmor_userns", "cgroup_layout", "cgroup_delegation",
              "seccomp", "overlayfs", "openat2", "user_mode_network", "state_dir"):
        assert n in names, f"doctor lacks {n}"
    for c in report["checks"]:
        assert (c["fix"] is None) == c["ok"], c
    t = subprocess.run([mcpbox, "doctor"], capture_output=True)
    assert t.returncode == p.returncode and b"CHECK" in t.stdout and b"STATUS" in t.stdout
    bad = subprocess.run([mcpbox, "doctor", "-o", "xml"], capture_output=True)
    assert bad.returncode == EXIT_USAGE and b"xml" in bad.stderr
    assert subprocess.run([mcpbox, "doctor", "--help"], capture_output=True).returncode == 0
    return report


def check_usage(cli):
    assert cli.run("--help").returncode == 0
    p = cli.run("frobnicate")
    assert p.returncode == EXIT_USAGE and b"unknown command" in p.stderr
    assert cli.run("exec").returncode == EXIT_USAGE
    assert cli.run("cp", "a", "b").returncode == EXIT_USAGE  # neither side is ID:PATH
    assert cli.run("create", "--memory", "lots").returncode == EXIT_USAGE
    assert cli.run("create", "--timeout", "soon").returncode == EXIT_USAGE
    for sub in ("create", "ls", "get", "exec", "cp", "logs", "rm", "pause", "resume"):
        assert cli.run(sub, "--help").returncode == 0, sub


def check_corrupt_store(mcpbox):
    """A damaged state database gives a clear error naming the file and the way out."""
    with tempfile.TemporaryDirectory(prefix="mbx-bad-", dir="/tmp") as d:
        os.chmod(d, 0o700)
        db = os.path.join(d, "mcpbox.db")
        with open(db, "wb") as f:
            f.write(b"definitely not SQLite " * 50)
        p = subprocess.run([mcpbox, "sandbox", "--state-dir", d, "ls"], capture_output=True)
        assert p.returncode == 1, p.returncode
        assert b"corrupt or not a SQLite database" in p.stderr and db.encode() in p.stderr, p.stderr
        assert b"mv " in p.stderr  # says how to move it aside
        with open(db, "rb") as f:
            assert f.read().startswith(b"definitely not SQLite")  # left untouched


def check_create_get_ls(cli):
    sid = cli.create("--memory", "256M", "--pids", "64", "-l", "team=a", "--timeout", "600")
    info = cli.get_json(sid)
    assert info["sandbox_id"] == sid and info["state"] == "running", info
    assert info["limits"]["memory_bytes"] == 256 * 1024 * 1024, info["limits"]
    assert info["limits"]["pids"] == 64, info["limits"]
    assert info["metadata"].get("team") == "a", info["metadata"]
    assert info["expires_at"] is not None
    ls = json.loads(cli.run("ls", "-o", "json", check=True).stdout)
    assert sid in [s["sandbox_id"] for s in ls["sandboxes"]]
    table = text(cli.run("ls", check=True).stdout)
    assert table.splitlines()[0].split()[:2] == ["ID", "STATE"] and sid in table
    assert cli.run("get", "sbx-00000000deadbeef").returncode == EXIT_NOT_FOUND
    return sid


def check_huge_timeout(cli):
    """Issue #18.2: --timeout 2^62 wrapped into a deadline in the past (gone 1.5 s later); it
    saturates to the longest duration, ten years."""
    sid = cli.create("--timeout", "4611686018427387904", "--idle-timeout", "4611686018427387904")
    time.sleep(2.5)
    info = cli.get_json(sid)
    assert info["state"] == "running", info
    assert info["expires_at"] > time.strftime("%Y-%m-%d", time.gmtime(time.time() + 9 * 365 * 86400))
    p = cli.exec(sid, "echo ok", "-t", "1e30")
    assert p.returncode == 0 and p.stdout == b"ok\n", p
    cli.rm(sid)


def check_exec(cli, sid):
    p = cli.exec(sid, "echo out; echo err >&2; exit 7")
    assert (p.returncode, p.stdout, p.stderr) == (7, b"out\n", b"err\n"), p
    data = os.urandom(100000)
    p = cli.exec(sid, "wc -c", input=data)
    assert p.returncode == 0 and p.stdout.strip() == b"100000", p
    p = cli.exec(sid, 'echo "$FOO"', "-e", "FOO=bar baz")
    assert p.stdout == b"bar baz\n", p
    p = cli.exec(sid, "pwd", "-w", "/tmp")
    assert p.stdout == b"/tmp\n", p
    p = cli.exec(sid, "kill -TERM $$")
    assert p.returncode == 128 + 15, p.returncode
    t0 = time.monotonic()
    p = cli.exec(sid, "sleep 30", "-t", "1")
    assert p.returncode == 124 and time.monotonic() - t0 < 20, (p.returncode, p.stderr)
    assert b"timed out" in p.stderr


def check_exec_words(cli, sid):
    """Several words after `--` reach the command as those words (quoted for /bin/sh -c), a
    lone one is a shell command line. Joined as they were, `sh -c 'echo a b'` ran
    `sh -c echo a b` (an empty line) and printf saw `%s\\n x y z`."""
    def words(*argv):
        return cli.run("exec", sid, "--", *argv)
    p = words("sh", "-c", "echo a b")
    assert (p.returncode, p.stdout) == (0, b"a b\n"), p
    p = words("printf", "%s\\n", "x y", "z")
    assert (p.returncode, p.stdout) == (0, b"x y\nz\n"), p
    odd = ["it's", "", "$HOME", "a;b", "*", "~", "FOO=bar", "\"q\"", "back\\slash", "tab\tnl\n"]
    p = words("printf", "[%s]", *odd)
    assert (p.returncode, p.stdout) == (0, "".join(f"[{w}]" for w in odd).encode()), p
    p = words("FOO=bar")  # a lone word is a command line: an assignment, exit 0
    assert p.returncode == 0, p
    p = words("FOO=bar", "true")  # a word: no such command
    assert p.returncode == 127, p
    p = words("echo a b | tr ab xy")
    assert (p.returncode, p.stdout) == (0, b"x y\n"), p


def check_streaming(cli, sid):
    """The first line must arrive while the command is still running."""
    cmd = [cli.mcpbox, "sandbox", "--state-dir", cli.state_dir, "exec", sid, "--",
           "echo first; sleep 3; echo second"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    t_first = time.monotonic() - t0
    rest, _ = proc.communicate(timeout=60)
    assert first == b"first\n" and rest == b"second\n", (first, rest)
    assert t_first < 2.5, f"first line took {t_first:.2f}s: output is not streamed"
    assert proc.returncode == 0


def check_sigint_forwarded(cli, sid, rounds=3):
    """Ctrl-C on `mcpbox sandbox exec` reaches the command; exit status 128+SIGINT. The first
    one must work, also when it comes just as the shell starts `sleep` (dash's vfork child used
    to swallow it): the agent resends it to the program that missed it."""
    cmd = [cli.mcpbox, "sandbox", "--state-dir", cli.state_dir, "exec", sid, "--",
           "echo started; sleep 30"]
    for _ in range(rounds):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout.readline() == b"started\n"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError("the first SIGINT did not end `sandbox exec` within 10 s: "
                                 + err.decode(errors="replace"))
        assert proc.returncode == 128 + signal.SIGINT, (proc.returncode, err)
        assert err == b"", err
        assert time.monotonic() - t0 < 10


def sandbox_runs(cli, sid, marker):
    """Whether a process whose command line contains marker runs in the sandbox."""
    p = cli.exec(sid, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    return marker.encode() in p.stdout


def check_early_sigint(cli, sid):
    """A Ctrl-C that comes while the CLI is still starting the command (here: sending 8 MiB of
    stdin, before the agent has named the command) ends the command as soon as it is named, or
    the CLI before it sends anything: never a command left running behind an exited CLI, nor a
    CLI waiting on it. The command is exec'd directly (an absolute path): with `sleep 31`,
    dash may take a SIGINT that lands just before it forks sleep and wait for sleep first, a
    shell race the agent does not cover yet (docs/local-backend.md); this check is about the
    CLI."""
    cmd = [cli.mcpbox, "sandbox", "--state-dir", cli.state_dir, "exec", "--stdin", sid, "--",
           "/bin/sleep 31"]
    data = b"x" * (8 << 20)
    for delay in (0.0, 0.15, 0.3, 0.45, 0.6, 0.8):
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        proc.stdin.write(data)
        proc.stdin.close()
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        proc.stdin = None  # closed above
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"SIGINT {delay} s after the stdin was sent did not end "
                                 "`sandbox exec` within 10 s: " + err.decode(errors="replace"))
        assert proc.returncode in (-signal.SIGINT, 128 + signal.SIGINT), (delay, proc.returncode,
                                                                         err)
        assert not sandbox_runs(cli, sid, "sleep 31"), f"left running (SIGINT after {delay} s)"


def check_cp(cli, sid):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "in.bin")
        blob = os.urandom(CHUNK + 12345)
        with open(src, "wb") as f:
            f.write(blob)
        os.chmod(src, 0o640)
        assert cli.run("cp", src, f"{sid}:data/in.bin").returncode == 0
        p = cli.exec(sid, "sha256sum data/in.bin; stat -c %a data/in.bin")
        want = hashlib.sha256(blob).hexdigest()
        assert p.stdout.split()[0].decode() == want and p.stdout.split()[2] == b"640", p.stdout
        out = os.path.join(d, "out.bin")
        assert cli.run("cp", f"{sid}:data/in.bin", out).returncode == 0
        with open(out, "rb") as f:
            assert f.read() == blob
        p = cli.run("cp", f"{sid}:data/in.bin", "-")
        assert p.returncode == 0 and p.stdout == blob
        empty = os.path.join(d, "empty")
        open(empty, "w").close()
        assert cli.run("cp", empty, f"{sid}:empty").returncode == 0
        assert cli.exec(sid, "test -f empty && test ! -s empty").returncode == 0
        p = cli.run("cp", f"{sid}:/no/such/file", out)
        assert p.returncode == EXIT_NOT_FOUND, (p.returncode, p.stderr)
        check_cp_mode_refused(cli, sid, d)


def check_cp_mode_refused(cli, sid, d):
    """A copy out whose mode cannot be set (a file this process may write but does not own,
    without CAP_FOWNER) says so and fails; it was silently left with its old mode."""
    assert cli.exec(sid, "printf hello > m.txt && chmod 640 m.txt").returncode == 0
    # A device named as the destination keeps its mode (as root, /dev/null went 0640 before).
    mode = os.stat("/dev/null").st_mode
    try:
        assert cli.run("cp", f"{sid}:m.txt", "/dev/null").returncode == 0
        assert os.stat("/dev/null").st_mode == mode, oct(os.stat("/dev/null").st_mode)
    finally:
        if os.stat("/dev/null").st_mode != mode and os.geteuid() == 0:
            os.chmod("/dev/null", mode & 0o7777)  # the host's other tests need it writable
    if os.geteuid() != 0:
        print("# cp into a file this user may write but does not own: needs root to make one "
              "(local_cli runs it)")
        return
    dest = os.path.join(d, "theirs.txt")
    with open(dest, "w") as f:
        f.write("old contents")
    os.chown(dest, 65534, 65534)
    os.chmod(dest, 0o666)
    cmd = ["setpriv", "--inh-caps=-fowner", "--bounding-set=-fowner", cli.mcpbox, "sandbox",
           "--state-dir", cli.state_dir, "cp", f"{sid}:m.txt", dest]
    p = subprocess.run(cmd, capture_output=True, timeout=120)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert (b"copied, but its mode could not be set to 640" in p.stderr and
            b"Operation not permitted" in p.stderr), p.stderr
    with open(dest, "rb") as f:
        assert f.read() == b"hello"
    assert os.stat(dest).st_mode & 0o777 == 0o666


def check_pause_logs_rm(cli, sid):
    p = cli.run("pause", sid, "-o", "json", check=True)
    assert json.loads(p.stdout)["state"] == "paused"
    p = cli.exec(sid, "true", timeout=30)
    assert p.returncode != 0 and b"paused" in p.stderr, p
    assert json.loads(cli.run("resume", sid, "-o", "json", check=True).stdout)["state"] == "running"
    assert cli.exec(sid, "true").returncode == 0
    logs = cli.run("logs", sid, check=True)
    assert sid.encode() in logs.stdout and b"TIME" in logs.stdout
    ev = json.loads(cli.run("logs", sid, "--events", "-o", "json", check=True).stdout)
    assert isinstance(ev.get("events"), list) and ev["events"], ev
    assert cli.rm(sid).returncode == 0
    assert cli.run("get", sid).returncode == EXIT_NOT_FOUND
    assert cli.run("rm", sid).returncode == EXIT_NOT_FOUND


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    args = ap.parse_args()
    report = check_doctor(args.mcpbox)
    with Cli(args.mcpbox) as cli:
        check_usage(cli)
        check_corrupt_store(args.mcpbox)
        if not report["ok"]:
            skip("doctor says this host cannot run local sandboxes")
        sid = check_create_get_ls(cli)
        check_huge_timeout(cli)
        check_exec(cli, sid)
        check_exec_words(cli, sid)
        check_streaming(cli, sid)
        check_sigint_forwarded(cli, sid)
        check_early_sigint(cli, sid)
        check_cp(cli, sid)
        check_pause_logs_rm(cli, sid)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
