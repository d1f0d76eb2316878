"""Helpers for the local-backend tests that drive the real mcpbox binary.

Each test gets a private, short state directory (agent socket paths must fit in 108 bytes) and
removes its sandboxes and the directory at the end. A host that cannot run local sandboxes makes
the test exit 77 (skipped) with the reason mcpbox gave.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
EXIT_UNAVAILABLE = 4  # mcpbox sandbox: local sandboxes unavailable on this host


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def runtime_dirs(state_dir):
    """Where the backend may keep this state directory's runtime files (sockets, mount points,
    pid files; backend/local/runtime_dir.c): a tmpfs directory named by the state directory's
    real path, else <state>/run. Every candidate is returned; at most one is in use."""
    real = os.path.realpath(state_dir)
    h = hashlib.sha256(real.encode()).hexdigest()[:16]
    uid = os.geteuid()
    return [f"/run/mcpbox-{uid}/{h}", f"/run/user/{uid}/mcpbox/{h}", f"/dev/shm/mcpbox-{uid}/{h}",
            os.path.join(real, "run")]


def runtime_left(state_dir):
    """Entries left in any runtime directory of this state directory."""
    return [os.path.join(d, e) for d in runtime_dirs(state_dir) if os.path.isdir(d)
            for e in os.listdir(d)]


def sandbox_runtime_dir(state_dir, sid):
    """The runtime directory of a live sandbox (its agent socket is there), or None."""
    for d in runtime_dirs(state_dir):
        if os.path.isdir(os.path.join(d, sid)):
            return os.path.join(d, sid)
    return None


class Cli:
    def __init__(self, mcpbox, state_dir=None):
        self.mcpbox = mcpbox
        self.own_dir = state_dir is None
        self.state_dir = state_dir or tempfile.mkdtemp(prefix="mbx-", dir="/tmp")
        self.created = []
        self.closed = False

    def run(self, *args, input=None, timeout=120, check=False, env=None):
        cmd = [self.mcpbox, "sandbox", "--state-dir", self.state_dir] + [str(a) for a in args]
        full_env = dict(os.environ)
        full_env.update(env or {})
        p = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, env=full_env)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}: "
                                 f"{p.stderr.decode(errors='replace')}")
        return p

    def create(self, *args):
        """Creates a sandbox; skips the test (77) when the host cannot run one."""
        p = self.run("create", "-q", *args)
        if p.returncode == EXIT_UNAVAILABLE:
            skip("local sandboxes unavailable here: " + p.stderr.decode(errors="replace").strip())
        if p.returncode != 0:
            refused = self.host_refuses()
            if refused:
                skip("the kernel refuses what sandboxes need: " + refused)
            raise AssertionError(f"create failed ({p.returncode}): "
                                 f"{p.stderr.decode(errors='replace')}")
        sid = p.stdout.decode().strip()
        assert sid.startswith("sbx-"), f"unexpected id {sid!r}"
        self.created.append(sid)
        return sid

    def host_refuses(self):
        """The doctor's verdict on namespaces, the uid map and seccomp; '' if all pass."""
        p = subprocess.run([self.mcpbox, "doctor", "-o", "json", "--state-dir", self.state_dir],
                           capture_output=True)
        try:
            checks = json.loads(p.stdout)["checks"]
        except (ValueError, KeyError):
            return ""
        bad = [f"{c['name']}: {c['detail']}" for c in checks
               if c["name"] in ("namespaces_probe", "uid_mapping", "seccomp") and not c["ok"]]
        return "; ".join(bad)

    def exec(self, sid, command, *opts, input=None, timeout=120, env=None):
        args = ["exec"] + list(opts) + ([] if input is None else ["--stdin"]) + [sid, "--", command]
        return self.run(*args, input=input, timeout=timeout, env=env)

    def get_json(self, sid):
        p = self.run("get", sid, "-o", "json", check=True)
        return json.loads(p.stdout)

    def rm(self, sid):
        p = self.run("rm", sid)
        if sid in self.created and p.returncode in (0, 3):
            self.created.remove(sid)
        return p

    def close(self):
        """Destroys every sandbox of this state directory (also ones a failed test never got
        to record), then removes the directory. Idempotent."""
        if self.closed:
            return
        self.closed = True
        ids = set(self.created)
        p = self.run("ls", "-o", "json")
        if p.returncode == 0:
            try:
                ids |= {s["sandbox_id"] for s in json.loads(p.stdout)["sandboxes"]}
            except (ValueError, KeyError):
                pass
        for sid in sorted(ids):
            self.rm(sid)
        if self.own_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def text(b):
    return b.decode(errors="replace")
