#!/usr/bin/env python3
"""The project stands on its own: the facts its code relies on are in docs/internals/, and
nothing else points outside the project for them.

    internals_cited.py SOURCE_DIR

Fails when
  - a tracked file outside docs/internals/ mentions ../shared or one of the documents that exist
    only there (the measurement notes, the wire-protocol report, the MCP notes, the design brief,
    the style survey): a fresh clone has none of them;
  - a citation `docs/internals/NAME.md §N` (or a Markdown link into docs/internals/) names a file
    that does not exist, or a section N that has no numbered heading `N.` in that file;
  - a page of docs/internals/ is not linked from docs/internals/README.md or
    docs/architecture.md, or the README is not linked from docs/architecture.md.
"""
import os
import re
import subprocess
import sys

SELF = "tests/docs/internals_cited.py"
INTERNALS = "docs/internals/"
# Documents that exist only beside the project, at ../shared (spelled in pieces so that this
# file does not match itself when someone greps the tree for them).
SHARED_ONLY = ["LOCAL" + "-ISOLATION", "ROOTLESS" + "-NOTES", "MCP" + "-NOTES",
               "PROTOCOL" + ".md", "DESIGN" + ".md", "STYLE" + ".md"]
OUTSIDE = re.compile(r"\.\./" + "shared\\b|\\bshared/(?:opensandbox|mcp|hooks)\\b|"
                     + "|".join(re.escape(n) for n in SHARED_ONLY))
CITE = re.compile(r"docs/internals/([\w.-]+\.md)(?:\s*§(\d+))?")
MDLINK = re.compile(r"\]\(([^)\s#]*internals/[\w.-]+\.md|[\w.-]+\.md)(?:#[^)]*)?\)")
SKIP_DIRS = {".git", "node_modules", "build"}


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout.decode()
        return [f for f in out.split("\0") if f and "node_modules/" not in f]
    except (OSError, subprocess.CalledProcessError):
        files = []  # not a git checkout (a source tarball): every file but build output
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None  # binary or unreadable: nothing to cite


def numbered_sections(path):
    with open(path, encoding="utf-8") as f:
        return {m.group(1) for m in re.finditer(r"^#{1,6}\s+(\d+)\.", f.read(), re.M)}


def main():
    root = os.path.abspath(sys.argv[1])
    problems = []
    files = tracked_files(root)
    cites = 0
    for rel in files:
        if rel == SELF:
            continue
        text = read_text(os.path.join(root, rel))
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if not rel.startswith(INTERNALS):
                m = OUTSIDE.search(line)
                if m:
                    problems.append(f"{rel}:{n}: cites '{m.group(0)}', which a fresh clone does "
                                    f"not have; put the fact into {INTERNALS} and cite that")
            for m in CITE.finditer(line):
                cites += 1
                page = os.path.join(root, INTERNALS, m.group(1))
                if not os.path.isfile(page):
                    problems.append(f"{rel}:{n}: cites {INTERNALS}{m.group(1)}, which does not "
                                    "exist")
                elif m.group(2) and m.group(2) not in numbered_sections(page):
                    problems.append(f"{rel}:{n}: cites {INTERNALS}{m.group(1)} §{m.group(2)}, "
                                    f"but that page has no heading '{m.group(2)}.'")

    pages = sorted(f for f in os.listdir(os.path.join(root, INTERNALS)) if f.endswith(".md"))
    if "README.md" not in pages or len(pages) < 2:
        problems.append(f"{INTERNALS} needs a README.md index and at least one page")
    index = read_text(os.path.join(root, INTERNALS, "README.md")) or ""
    arch = read_text(os.path.join(root, "docs/architecture.md")) or ""
    linked = {os.path.basename(t) for t in MDLINK.findall(index)}
    linked |= {os.path.basename(t) for t in MDLINK.findall(arch) if "internals/" in t}
    if not re.search(r"\]\(internals/(?:README\.md)?\)", arch):
        problems.append("docs/architecture.md does not link docs/internals/README.md")
    for p in pages:
        if p != "README.md" and p not in linked:
            problems.append(f"{INTERNALS}{p} is linked from neither {INTERNALS}README.md nor "
                            "docs/architecture.md")

    for p in problems:
        print("FAIL:", p)
    print(f"checked {len(files)} files, {cites} citations of {INTERNALS}, {len(pages)} pages")
    if cites == 0:
        print(f"FAIL: no citation of {INTERNALS} found at all: the scan is broken")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
