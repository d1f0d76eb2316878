#!/usr/bin/env python3
"""`mcpbox doctor` run by a user with no setup at all (no subordinate ids, no delegated
cgroups): no FAIL (sandboxes run), but the weaker identity and each missing delegation are WARNs
that name the one root command that fixes them (`mcpbox setup --user NAME`)."""
import argparse
import getpass
import json
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--mcpbox", required=True)
a = ap.parse_args()
p = subprocess.run([a.mcpbox, "doctor", "-o", "json"], capture_output=True, text=True)
print(p.stdout)
assert p.returncode == 0, f"doctor exit {p.returncode}: a required check failed"
checks = {c["name"]: c for c in json.loads(p.stdout)["checks"]}
user = getpass.getuser()
for name in ("uid_mapping", "cgroup_delegation"):
    c = checks[name]
    assert not c["ok"] and not c["required"], f"{name} should be a WARN here: {c}"
    assert f"mcpbox setup --user {user}" in c["fix"], f"{name} fix: {c['fix']}"
assert "single uid" in checks["uid_mapping"]["detail"], checks["uid_mapping"]
assert "NOT enforced" in checks["cgroup_delegation"]["detail"], checks["cgroup_delegation"]
assert checks["local_backend"]["ok"], checks["local_backend"]
print("ok: doctor as a user without setup: no FAIL; single uid and missing delegation are WARNs "
      "naming mcpbox setup")
