"""The world the egress tests and benchmark run in: a network namespace of their own holding the
test hosts (11.0.0.1 on lo, plus 127.0.0.1 and 10.0.0.1 servers that must never be reached),
a hosts file that mcpbox resolves the test names from (MCPBOX_EGRESS_HOSTS, the test hook of
backend/local/egress_proxy.c), and `mcpbox serve` over stdio started inside that namespace, as
root or as an ordinary user. No traffic leaves the namespace: mcpbox itself runs in it."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from mcp_stdio import Client  # noqa: E402

HOSTS = """11.0.0.1 allowed.test www.wild.test deep.www.wild.test wild.test other.test port.test
127.0.0.1 loopy.test
10.0.0.1 private.test
"""
TIMEOUT = 120


def check(cond, what, detail=""):
    """A TAP line for what holds; what does not ends the test with the detail."""
    if not cond:
        raise AssertionError("%s\n%s" % (what, detail))
    print("ok - %s" % what, flush=True)


def sh(*cmd, **kw):
    return subprocess.run(list(cmd), check=True, **kw)


class World:
    def __init__(self, mcpbox, user=None, pool=0, uplink=False, wrap=(), stderr=None, extra=()):
        """extra: more (address, names) test hosts, each serving HTTP on :80."""
        self.dir = tempfile.mkdtemp(prefix="mcpbox-egressproxy-")
        self.stderr = stderr  # where serve's log goes (None: the test's own stderr)
        os.chmod(self.dir, 0o755)
        self.user = user
        self.servers = self.serve = self.holder = None
        self.made = []  # sandboxes to destroy at close
        # The namespace is held by a process rather than named with `ip netns add`: a name is a
        # bind mount under /run/netns, and tests running beside this one (local_leaks,
        # local_crash, the battery) check that the host's mount table does not change.
        self.holder = subprocess.Popen(["unshare", "--net", "sh", "-c", "echo; exec cat"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.holder.stdout.readline() == b"\n", "unshare --net did not start"
        self.nsenter = ["nsenter", "--net=/proc/%d/ns/net" % self.holder.pid]
        ip = self.nsenter + ["ip"]
        sh(*ip, "link", "set", "lo", "up")
        for addr in ["11.0.0.1/32", "10.0.0.1/32"] + [a + "/32" for a, _ in extra]:
            sh(*ip, "addr", "add", addr, "dev", "lo")
        if uplink:
            # pasta (network: true) needs an interface with a default route to copy into the
            # sandbox: a veth pair with both ends in this namespace, leading nowhere.
            sh(*ip, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
            sh(*ip, "addr", "add", "203.0.113.1/24", "dev", "eth0")
            for dev in ("eth0", "eth1"):
                sh(*ip, "link", "set", dev, "up")
            sh(*ip, "route", "add", "default", "via", "203.0.113.254")
        self.cert = os.path.join(self.dir, "cert.pem")
        key = os.path.join(self.dir, "key.pem")
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out",
           self.cert, "-days", "2", "-subj", "/CN=allowed.test", "-addext",
           "subjectAltName=DNS:allowed.test,DNS:www.wild.test,DNS:other.test",
           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.log = os.path.join(self.dir, "hits.log")
        open(self.log, "w").close()
        self.servers = subprocess.Popen(
            self.nsenter + [sys.executable, os.path.join(HERE, "egress_servers.py"), self.log,
                            self.cert, key, "11.0.0.1:80", "11.0.0.1:443", "11.0.0.1:8080",
                            "127.0.0.1:80", "10.0.0.1:80"] + [a + ":80" for a, _ in extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.servers.stdout.readline().strip() == b"ready", "test servers did not start"
        self.hosts = os.path.join(self.dir, "hosts")
        with open(self.hosts, "w") as f:
            f.write(HOSTS + "".join("%s %s\n" % (a, " ".join(n)) for a, n in extra))
        os.chmod(self.hosts, 0o644)
        state = os.path.join(self.dir, "state")
        os.mkdir(state, 0o700)
        argv = self.nsenter
        if user:
            shutil.chown(state, user, user)
            argv = argv + ["runuser", "-u", user, "--"]
        env = ["env", "MCPBOX_EGRESS_HOSTS=" + self.hosts, "MCPBOX_LOCAL_POOL=%d" % pool]
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                env.append("%s=%s" % (k, os.environ[k]))
        # egress enforcement, not approvals (issue 38, tests/e2e/approval): the person allows it
        self.argv = argv + env + list(wrap) + [mcpbox, "serve", "--state-dir", state,
                                               "--approve", "egress=allow",
                                               "--approve", "secret=allow"]
        self.start()

    def start(self):
        self.rpc = Client(self.argv, cwd=self.dir, stderr=self.stderr)
        self.serve = self.rpc.proc  # held before the handshake: close() stops it if that fails
        self.rpc.initialize("egress-test")

    def tool(self, name, ok=True, **args):
        if name == "create_sandbox":  # a backstop: sandboxes outlive a test that fails
            args.setdefault("timeout_seconds", 900)
        res = self.rpc.call_tool(name, args)
        if ok:
            assert not res.get("isError"), "%s: %s" % (name, json.dumps(res)[:800])
        if name == "create_sandbox" and not res.get("isError"):
            self.made.append(res["structuredContent"]["sandbox_id"])
        return res

    def run(self, sid, command, timeout=60):
        return self.tool("run_command", sandbox_id=sid, command=command,
                         timeout_seconds=timeout)["structuredContent"]

    def hits(self):
        with open(self.log) as f:
            return f.read()

    def restart(self):
        """A new server on the same state directory (sandboxes outlive mcpbox)."""
        assert self.rpc.close(TIMEOUT) == 0, "serve did not exit cleanly"
        self.start()

    def close(self):
        for sid in self.made:  # destroy is idempotent: those a test destroyed already are fine
            try:
                self.tool("destroy_sandbox", ok=False, sandbox_id=sid)
            except (AssertionError, OSError, ValueError) as e:
                print("closing: destroy %s: %s" % (sid, e), file=sys.stderr)
                break
        for proc, wait in ((self.serve, TIMEOUT), (self.servers, 10), (self.holder, 10)):
            if proc is None:
                continue
            try:
                proc.stdin.close()
                proc.wait(timeout=wait)
            except (subprocess.TimeoutExpired, OSError) as e:
                print("closing: %s; killed" % e, file=sys.stderr)
                proc.kill()
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def staged_mcpbox(user, mcpbox):
    """The copy of mcpbox an ordinary user made by tests/local/rootless can run."""
    with open("/tmp/%s.rootless.json" % user) as f:
        mapping = json.load(f)["map"]
    # longest first: the build tree usually sits inside the source tree, and each has its copy
    for src, dst in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
        if mcpbox.startswith(src + "/"):
            return dst + mcpbox[len(src):]
    return mcpbox
