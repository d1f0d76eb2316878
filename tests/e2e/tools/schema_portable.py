#!/usr/bin/env python3
"""Every advertised input schema keeps to the JSON Schema subset that every model provider takes
(docs/clients.md): one "type" per property, properties, required, enum, items, description,
minimum/maximum, pattern, minLength/maxLength, and additionalProperties: false on objects (which
OpenAI's strict mode needs and the others drop); no type arrays, unions, exclusive bounds, open
maps or nested objects without properties. Every input property has a description.

    python3 schema_portable.py SCHEMA_DIR
"""
import glob
import json
import os
import sys

ALLOWED = {"type", "properties", "required", "enum", "items", "description", "minimum",
           "maximum", "pattern", "minLength", "maxLength", "additionalProperties"}
TYPES = {"string", "integer", "number", "boolean", "array", "object"}


def problems(schema, where, top):
    if not isinstance(schema, dict):
        yield f"{where}: not an object"
        return
    for key in sorted(set(schema) - ALLOWED):
        yield f"{where}: keyword {key!r} is outside the portable subset"
    t = schema.get("type")
    if t not in TYPES:
        yield f"{where}: needs exactly one type (got {t!r})"
    if not top and not schema.get("description") and not where.endswith("[]"):
        yield f"{where}: no description"
    if "additionalProperties" in schema and schema["additionalProperties"] is not False:
        yield f"{where}: additionalProperties must be false (no open maps)"
    if t == "object":
        props = schema.get("properties")
        if not isinstance(props, dict) or (not props and not top):
            yield f"{where}: an object needs its properties listed"
        for name, sub in (props or {}).items():
            yield from problems(sub, f"{where}.{name}", False)
        for name in schema.get("required", []):
            if name not in (props or {}):
                yield f"{where}: required {name!r} is not a property"
    if t == "array":
        if "items" not in schema:
            yield f"{where}: an array needs items"
        else:
            yield from problems(schema["items"], f"{where}[]", False)


def main():
    found = []
    paths = sorted(glob.glob(os.path.join(sys.argv[1], "*.json")))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            tool = json.load(f)
        found += problems(tool["inputSchema"], tool["name"], True)
    for p in found:
        print(f"# {p}")
    print(f"{'not ok' if found else 'ok'} 1 - {len(paths)} input schemas in the portable subset")
    print("1..1")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
