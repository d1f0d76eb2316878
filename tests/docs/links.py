#!/usr/bin/env python3
"""Every relative link in the project's Markdown (docs/ with its subfolders such as docs/internals/,
examples/, skills/) points at a file or directory that exists, and every #anchor into a Markdown
file names one of its headings.
    links.py SOURCE_DIR
"""
import glob
import os
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def anchors(md_path):
    """GitHub-style heading anchors of a Markdown file."""
    out = set()
    with open(md_path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
            if m:
                slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
                out.add(slug)
    return out


def main():
    root = sys.argv[1]
    files = []
    for pattern in ("docs/**/*.md", "examples/**/*.md", "skills/**/*.md"):
        files += glob.glob(os.path.join(root, pattern), recursive=True)
    files = [f for f in files if "node_modules" not in f]
    if not any(os.sep + "internals" + os.sep in f for f in files):
        print("FAIL: no Markdown under docs/internals/ was found to check")
        return 1
    bad = checked = 0
    for path in sorted(files):
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        for m in LINK.finditer(text):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            checked += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                print(f"FAIL: {os.path.relpath(path, root)}: link to missing {target}")
                bad += 1
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                print(f"FAIL: {os.path.relpath(path, root)}: no heading for #{anchor} in {file_part or 'itself'}")
                bad += 1
    print(f"checked {checked} links in {len(files)} files")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
