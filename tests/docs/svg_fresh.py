#!/usr/bin/env python3
"""docs/architecture.svg must be what Graphviz makes of docs/architecture.dot.

Compares the drawing's content (every node, edge and cluster title and every text label) with a
fresh `dot -Tsvg` rendering, not its coordinates: those move with the fonts installed and the
Graphviz version, the content does not. Exits 77 without Graphviz.
    svg_fresh.py DOCS_DIR
"""
import collections
import html
import os
import re
import shutil
import subprocess
import sys

REGEN = "dot -Tsvg docs/architecture.dot -o docs/architecture.svg"


def content(svg):
    titles = re.findall(r"<title>(.*?)</title>", svg, re.S)
    texts = re.findall(r"<text\b[^>]*>(.*?)</text>", svg, re.S)
    return collections.Counter("title: " + html.unescape(t) for t in titles) + \
        collections.Counter("text: " + html.unescape(t) for t in texts)


def main():
    docs = sys.argv[1]
    if not shutil.which("dot"):
        print("SKIP: Graphviz (dot) not installed")
        return 77
    with open(os.path.join(docs, "architecture.svg"), encoding="utf-8") as f:
        committed = f.read()
    fresh = subprocess.run(["dot", "-Tsvg", os.path.join(docs, "architecture.dot")],
                           capture_output=True, text=True)
    if fresh.returncode != 0:
        print(f"FAIL: dot rejects architecture.dot:\n{fresh.stderr}")
        return 1
    want, have = content(fresh.stdout), content(committed)
    if not want:
        print("FAIL: the fresh rendering has no content")
        return 1
    if want != have:
        for item in sorted((want - have).elements()):
            print(f"missing from architecture.svg: {item}")
        for item in sorted((have - want).elements()):
            print(f"only in architecture.svg: {item}")
        print(f"FAIL: docs/architecture.svg is stale; run: {REGEN}")
        return 1
    print(f"ok: {sum(want.values())} titles and labels match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
