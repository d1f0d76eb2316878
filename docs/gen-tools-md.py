#!/usr/bin/env python3
"""Generates docs/tools.md from schemas/tools/*.json (one MCP Tool object per file).

    python3 docs/gen-tools-md.py            # rewrite docs/tools.md
    python3 docs/gen-tools-md.py --check    # exit 1 if docs/tools.md is stale (a ctest runs this)

The schemas are the single source of truth: the server serves them verbatim in tools/list, so
this reference cannot drift from what clients see as long as the check passes. Longer prose,
which every client would pay for on every connection if it were in the schemas, comes from
docs/tools-notes.md: the text under its "## <tool>" heading follows that tool's description.
"""
import argparse
import difflib
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REGEN = "python3 docs/gen-tools-md.py"
ANNOTATION_NAMES = [
    ("readOnlyHint", "read-only"),
    ("destructiveHint", "destructive"),
    ("idempotentHint", "idempotent"),
    ("openWorldHint", "open-world"),
]
NOTES = os.path.join(HERE, "tools-notes.md")
# Nested object properties are listed as a.b.c down to this depth, then summarised.
MAX_DEPTH = 3


class SchemaError(Exception):
    pass


def load_tools(schema_dir):
    tools = []
    for path in sorted(glob.glob(os.path.join(schema_dir, "*.json"))):
        base = os.path.basename(path)[:-5]
        try:
            with open(path, encoding="utf-8") as f:
                tool = json.load(f)
        except (OSError, ValueError) as e:
            raise SchemaError(f"{path}: {e}")
        if not isinstance(tool, dict) or tool.get("name") != base:
            raise SchemaError(f"{path}: expected an object whose \"name\" is \"{base}\"")
        if not isinstance(tool.get("inputSchema"), dict):
            raise SchemaError(f"{path}: missing inputSchema")
        tools.append(tool)
    return sorted(tools, key=lambda t: t["name"])


def load_notes(path, names):
    """{tool: markdown} from the "## tool" sections of path (missing file: none)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    notes, current = {}, None
    for line in text.splitlines():
        m = re.match(r"## (\S+)\s*$", line)
        if m:
            current = m.group(1)
            if current not in names:
                raise SchemaError(f"{path}: a section for {current}, which has no schema")
            notes[current] = []
        elif current:
            notes[current].append(line)
    return {k: "\n".join(v).strip() for k, v in notes.items()}


def one_line(text):
    return " ".join((text or "").split())


def first_sentence(text):
    """Up to the first full stop that is followed by a capital letter (so "e.g. x" stays)."""
    m = re.search(r"\.\s+(?=[A-Z])", one_line(text))
    return one_line(text)[: m.start() + 1] if m else one_line(text)


def cell(text):
    return one_line(text).replace("|", "\\|")


def type_of(schema):
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return " \\| ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(type_of(s) for s in schema[key])
    t = schema.get("type", "any")
    if isinstance(t, list):
        t = " or ".join(t)
    if t == "array":
        return f"array of {type_of(schema.get('items', {}))}"
    return t


def constraints(schema):
    notes = []
    for key, label in (("default", "default"), ("minimum", "min"), ("maximum", "max"),
                       ("minLength", "min length"), ("maxLength", "max length"),
                       ("maxItems", "max items"), ("pattern", "pattern"), ("format", "format")):
        if isinstance(schema, dict) and key in schema:
            notes.append(f"{label} `{json.dumps(schema[key])}`")
    return "; ".join(notes)


def rows(schema, prefix="", depth=1):
    """Yields (name, type, required, description) for each property, nested ones dotted."""
    if not isinstance(schema, dict):
        return
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    # an output schema may list required fields only (kept small for tools/list)
    items = list(props.items()) + [(n, {}) for n in schema.get("required") or [] if n not in props]
    for name, sub in items:
        full = prefix + name
        desc = one_line(sub.get("description", "") if isinstance(sub, dict) else "")
        extra = constraints(sub)
        if extra:
            desc = f"{desc} ({extra})" if desc else extra
        yield full, type_of(sub) if sub else "", name in required, desc
        if depth < MAX_DEPTH and isinstance(sub, dict):
            inner = sub.get("items") if sub.get("type") == "array" else sub
            if isinstance(inner, dict) and inner.get("properties"):
                mark = "[]." if sub.get("type") == "array" else "."
                yield from rows(inner, full + mark, depth + 1)


def field_table(schema, empty_text):
    lines = list(rows(schema))
    if not lines:
        return [empty_text, ""]
    out = ["| field | type | required | description |", "|---|---|---|---|"]
    for name, typ, req, desc in lines:
        out.append(f"| `{name}` | {typ} | {'yes' if req else ''} | {cell(desc)} |")
    return out + [""]


def hints(tool):
    ann = tool.get("annotations") or {}
    return ", ".join(label for key, label in ANNOTATION_NAMES if ann.get(key) is True)


def render_tool(tool, notes):
    out = [f"## {tool['name']}", ""]
    if tool.get("title"):
        out += [f"**{tool['title']}**", ""]
    out += [one_line(tool.get("description", "")), ""]
    if notes.get(tool["name"]):
        out += [notes[tool["name"]], ""]
    if hints(tool):
        out += [f"Annotations: {hints(tool)}.", ""]
    out += ["Arguments:", ""]
    out += field_table(tool["inputSchema"], "No arguments.")
    if isinstance(tool.get("outputSchema"), dict):
        out += ["Result (`structuredContent`):", ""]
        out += field_table(tool["outputSchema"], "An empty object.")
    return out


def render(tools, notes):
    out = ["# Tools reference", "",
           f"<!-- Generated from schemas/tools/*.json by `{REGEN}`. Do not edit by hand. -->", "",
           "Every tool of mcpbox, as served in `tools/list`. The same tools work on local",
           "(`sbx-...`) and OpenSandbox (`osb-...`) sandboxes. Errors an agent can act on come",
           "back as tool results with `isError: true`; malformed requests are JSON-RPC errors.", ""]
    if not tools:
        return "\n".join(out + ["No tool schemas found in schemas/tools/.", ""])
    out += ["| tool | what it does | hints |", "|---|---|---|"]
    for t in tools:
        out.append(f"| [`{t['name']}`](#{t['name']}) | {cell(first_sentence(t.get('description')))}"
                   f" | {hints(t)} |")
    out.append("")
    for t in tools:
        out += render_tool(t, notes)
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", default=os.path.join(ROOT, "schemas", "tools"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "tools.md"))
    ap.add_argument("--notes", help="longer prose per tool in \"## name\" sections (default: "
                    "docs/tools-notes.md for the project's own schemas, none for others)")
    ap.add_argument("--check", action="store_true", help="fail if --out is not up to date")
    args = ap.parse_args()
    try:
        tools = load_tools(args.schemas)
        own = os.path.realpath(args.schemas) == os.path.realpath(os.path.join(ROOT, "schemas",
                                                                              "tools"))
        notes = args.notes or (NOTES if own else "")
        text = render(tools, load_notes(notes, {t["name"] for t in tools}) if notes else {})
    except SchemaError as e:
        print(f"gen-tools-md: {e}", file=sys.stderr)
        return 1
    if args.check:
        try:
            with open(args.out, encoding="utf-8") as f:
                current = f.read()
        except OSError as e:
            print(f"gen-tools-md: {e}; run `{REGEN}`", file=sys.stderr)
            return 1
        if current != text:
            sys.stderr.writelines(difflib.unified_diff(
                current.splitlines(True), text.splitlines(True), args.out, "generated", n=1))
            print(f"gen-tools-md: {args.out} is stale; run `{REGEN}` and commit it",
                  file=sys.stderr)
            return 1
        return 0
    with open(args.out + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
