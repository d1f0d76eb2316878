#!/usr/bin/env python3
"""get_sandbox reports the identity a sandbox really has (issue 39 item 2): its uid_map and
gid_map are the maps the kernel holds (read inside the sandbox from /proc/self/uid_map), and
commands_run_as is who `id` says commands run as, inside and on the host. As a user with
subordinate ids a writable mount maps the user's own uid too (docs/security.md, "Who owns what
a sandbox writes on the host"): the report must show those three extents, not "0 S 65536".
Runs as root and, through tests/local/rootless, as an ordinary user (with subordinate ids, and
without). usage: test_identity_report.py --mcpbox PATH   (exit 77 where sandboxes cannot run)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_mounts import run_served  # noqa: E402


def kernel_map(s, sid, which):
    code, out, err = s.sh(sid, f"cat /proc/self/{which}")
    assert code == 0, err
    return " / ".join(" ".join(line.split()) for line in out.strip().splitlines())


def host_id(map_text, inside):
    """The host id an id inside maps to, by a reported map."""
    for extent in map_text.split(" / "):
        first, lower, count = (int(x) for x in extent.split())
        if first <= inside < first + count:
            return lower + inside - first
    raise AssertionError(f"{inside} is not mapped by {map_text!r}")


def check(s, label, mounts):
    sid = s.create(mounts)
    err, info, text = s.tool("get_sandbox", sandbox_id=sid)
    assert not err, text
    ident = info["isolation"]["identity"]
    for which in ("uid_map", "gid_map"):
        real = kernel_map(s, sid, which)
        assert ident[which] == real, f"{label}: get_sandbox {which} {ident[which]!r}, " \
                                     f"the kernel's {real!r}"
    return sid, ident


def check_run_as(s, label, sid, ident):
    code, out, _ = s.sh(sid, "id -u; id -g")
    uid, gid = (int(x) for x in out.split())
    ran = ident.get("commands_run_as")
    assert ran and (ran["uid"], ran["gid"]) == (uid, gid), \
        f"{label}: reported {ran}, id says {uid}:{gid}"
    assert ran["host_uid"] == host_id(ident["uid_map"], uid), (label, ran, ident["uid_map"])
    assert ran["host_gid"] == host_id(ident["gid_map"], gid), (label, ran, ident["gid_map"])
    print(f"  {label}: uid_map {ident['uid_map']!r}, commands run as {uid} "
          f"(host {ran['host_uid']}): {ident['note'][:60]}")
    s.tool("destroy_sandbox", sandbox_id=sid)


def check_identities(s, base, allowed, state):
    proj = os.path.join(allowed, f"proj-{os.getpid()}")
    os.makedirs(proj)
    cases = {"no mount": [],
             "ro mount": [{"source": proj, "target": "/workspace/p", "mode": "ro"}],
             "rw mount": [{"source": proj, "target": "/workspace/p", "mode": "rw"}],
             "copy-on-write mount": [{"source": proj, "target": "/workspace/p"}]}
    made = {label: check(s, label, mounts) for label, mounts in cases.items()}
    for label, (sid, ident) in made.items():
        check_run_as(s, label, sid, ident)
    rw = made["rw mount"][1]
    if rw["mode"] == "shared subordinate ids":  # the user's own id is mapped
        assert len(rw["uid_map"].split(" / ")) == 3, rw
        assert rw["commands_run_as"]["host_uid"] == os.geteuid(), rw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    return run_served(a.mcpbox, "mbx-idrep-", check_identities)


if __name__ == "__main__":
    sys.exit(main())
