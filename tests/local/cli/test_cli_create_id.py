#!/usr/bin/env python3
"""`mcpbox sandbox create` prints the new sandbox's id and nothing else, as its help says and as
scripts expect (`id=$(mcpbox sandbox create)`, like docker or podman); `-o json` prints the
sandbox as JSON, `-o table` the table that `get` prints. Exits 77 where local sandboxes cannot
run (issue 39 item 6)."""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcpbox_cli import EXIT_UNAVAILABLE, Cli, skip  # noqa: E402

ID = re.compile(r"sbx-[0-9A-Za-z_-]+")


def create(cli, *args):
    p = cli.run("create", "--label", f"test=create-id-{os.getpid()}", *args)
    if p.returncode == EXIT_UNAVAILABLE:
        skip("local sandboxes unavailable here: " + p.stderr.decode(errors="replace").strip())
    assert p.returncode == 0, (p.returncode, p.stderr)
    return p.stdout.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    args = ap.parse_args()
    with Cli(args.mcpbox) as cli:
        out = create(cli)
        assert out.endswith("\n") and ID.fullmatch(out[:-1]), f"create printed {out!r}, not an id"
        sid = out.strip()
        cli.created.append(sid)
        info = cli.get_json(sid)
        assert info["sandbox_id"] == sid and info["state"] == "running", info
        table = cli.run("get", sid, check=True).stdout.decode()
        assert sid in table and "\n" in table.strip(), f"get lost its table: {table!r}"

        quiet = create(cli, "-q").strip()  # -q still works and means the same
        cli.created.append(quiet)
        assert ID.fullmatch(quiet), quiet

        as_json = json.loads(create(cli, "-o", "json"))
        cli.created.append(as_json["sandbox_id"])
        assert as_json["state"] == "running", as_json

        as_table = create(cli, "-o", "table")
        tsid = ID.search(as_table).group(0)
        cli.created.append(tsid)
        assert as_table.strip() != tsid and as_table == cli.run("get", tsid).stdout.decode(), \
            as_table
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
