#!/usr/bin/env python3
"""Every config example parses, and every mcpbox command in the examples names a real subcommand
and real options of the built binary (asked through `mcpbox SUB --help`).

    check_examples.py MCPBOX_BINARY EXAMPLES_DIR CONFIGURATION_MD [NODE [DOCS_DIR]]

Checks:
  - each *.json (including dotfiles) is valid JSON; each mcpServers entry runs `mcpbox ...` with
    real options, or is a URL of the form http(s)://host:port/mcp;
  - each variable set in an `env` block or a *.env file is documented in docs/configuration.md;
  - each `mcpbox ...` and `claude mcp add ...` line in the examples' Markdown does the same, and
    so does each such line in the shell blocks of DOCS_DIR/*.md;
  - each stdio server entry and each *.env file really starts a server: `mcpbox serve` with that
    entry's args and env answers initialize and tools/list, and an OpenSandbox configuration
    turns the OpenSandbox backend on (per the server's startup log);
  - agent.mjs is valid JavaScript (node --check), when NODE is given.
Exits 77 when the binary has no working `--help` yet.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.parse

SKIP = 77
OPT_RE = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)(?:[ =]([A-Z][A-Z0-9_:|.]*|[a-z]+\|[a-z|]+))?")
errors = []
help_cache = {}


def err(where, msg):
    errors.append(f"{where}: {msg}")


def run_help(binary, sub):
    """The help text of `mcpbox SUB --help` (None if that fails)."""
    if sub not in help_cache:
        args = [binary] + ([sub] if sub else []) + ["--help"]
        try:
            p = subprocess.run(args, capture_output=True, text=True, timeout=20)
            help_cache[sub] = p.stdout + p.stderr if p.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            help_cache[sub] = None
    return help_cache[sub]


def help_options(text):
    """{option: takes_argument} from a help text."""
    opts = {}
    for m in OPT_RE.finditer(text):
        opts[m.group(1)] = opts.get(m.group(1), False) or bool(m.group(2))
    return opts


def check_mcpbox_argv(binary, argv, where):
    if not argv:
        err(where, "mcpbox without a subcommand")
        return
    sub, rest = argv[0], argv[1:]
    if sub.startswith("-"):
        if sub not in help_options(run_help(binary, "") or ""):
            err(where, f"mcpbox has no option {sub}")
        return
    text = run_help(binary, sub)
    if text is None:
        err(where, f"`mcpbox {sub} --help` fails: {sub} is not a real subcommand")
        return
    opts = help_options(text)
    i = 0
    prev = None  # the last word that was neither an option nor its argument
    while i < len(rest):
        word = rest[i]
        name = word.split("=", 1)[0]
        if word.startswith("-"):
            if name not in opts:
                err(where, f"`mcpbox {sub}` has no option {name} (see mcpbox {sub} --help)")
            elif opts[name] and "=" not in word:
                i += 1
                if i >= len(rest):
                    err(where, f"{name} needs an argument")
        elif not re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) and not (
                prev and re.search(r"(?<![\w-])" + re.escape(prev) + r" [A-Z][A-Z0-9_]*\b", text)):
            # a word the help does not name is a value where the help shows a placeholder
            # after the word before it ("add NAME", "rm NAME...")
            err(where, f"`mcpbox {sub}` does not know the word {word!r}")
        if not word.startswith("-"):
            prev = word
        i += 1


INIT = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "check-examples", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    # A sandbox tool: the server starts its backends on the first request that needs them, and
    # logs which ones it enabled (diagnose_sandbox without a sandbox only inspects this host).
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
     "params": {"name": "diagnose_sandbox", "arguments": {}}},
]


def smoke_server(binary, args, env_add, where):
    """Starts mcpbox with args and env_add (placeholders like ${VAR} filled with dummies), sends
    initialize + tools/list on stdin, closes it; the server must answer both and exit 0."""
    env = dict(os.environ)
    for k, v in env_add.items():
        env[k] = re.sub(r"\$\{[^}]*\}", "dummy-value", v)
    with tempfile.TemporaryDirectory() as state:
        env["XDG_STATE_HOME"] = state
        env.pop("MCPBOX_STATE_DIR", None)
        # The backends line is logged at info; stdio servers log warnings only by default.
        env["MCPBOX_LOG_LEVEL"] = "info"
        stdin = "".join(json.dumps(m) + "\n" for m in INIT)
        try:
            p = subprocess.run([binary] + args, input=stdin, capture_output=True, text=True,
                               env=env, timeout=30)
        except subprocess.TimeoutExpired:
            err(where, f"`mcpbox {' '.join(args)}` did not exit after its input closed")
            return
    replies = {}
    for line in p.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            err(where, f"non-JSON line on stdout: {line[:80]!r}")
            continue
        if isinstance(msg, dict) and "id" in msg:
            replies[msg["id"]] = msg
    tools = replies.get(2, {}).get("result", {}).get("tools")
    if p.returncode != 0 or 1 not in replies or not tools or 3 not in replies:
        err(where, f"`mcpbox {' '.join(args)}` did not serve (exit {p.returncode}, "
                   f"replies {sorted(replies)}): {p.stderr.strip()[-300:]}")
        return
    wants_osb = "OPEN_SANDBOX_DOMAIN" in env_add or "--opensandbox-domain" in args
    m = re.search(r"opensandbox (enabled|disabled)", p.stderr)
    if wants_osb and not m:
        err(where, f"no 'opensandbox enabled|disabled' line in the server's log: {p.stderr.strip()[-300:]}")
    elif wants_osb and m.group(1) != "enabled":
        err(where, f"this configuration leaves the OpenSandbox backend off: {p.stderr.strip()[-300:]}")


def documented_env(configuration_md):
    with open(configuration_md, encoding="utf-8") as f:
        return set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", f.read(), re.M))


def check_url(url, where):
    u = urllib.parse.urlparse(url)
    if u.scheme not in ("http", "https") or not u.hostname or not u.port or u.path != "/mcp":
        err(where, f"{url!r} is not an mcpbox endpoint (http(s)://HOST:PORT/mcp)")


def check_server(binary, name, entry, env_ok, where):
    where = f"{where} server {name!r}"
    if "url" in entry:
        check_url(entry["url"], where)
        if entry.get("type", "http") not in ("http", "streamable-http"):
            err(where, f"type {entry.get('type')!r} with a url")
    elif "command" in entry:
        if os.path.basename(entry["command"]) != "mcpbox":
            err(where, f"command {entry['command']!r} is not mcpbox")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            err(where, "args must be a list of strings")
        else:
            check_mcpbox_argv(binary, args, where)
            if args[:1] == ["serve"] and not any(a.startswith("--http") for a in args):
                smoke_server(binary, args, entry.get("env") or {}, where)
    else:
        err(where, "neither command nor url")
    for var in (entry.get("env") or {}):
        if var not in env_ok:
            err(where, f"env {var} is not documented in docs/configuration.md")


def check_json(binary, path, env_ok):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        err(path, f"does not parse: {e}")
        return 0
    if os.path.basename(path) == "package.json":
        return 0
    servers = doc.get("mcpServers") if isinstance(doc, dict) else None
    if not isinstance(servers, dict) or not servers:
        err(path, "no mcpServers object")
        return 0
    for name, entry in servers.items():
        check_server(binary, name, entry, env_ok, path)
    return len(servers)


def check_env_file(binary, path, env_ok):
    values = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^([A-Z][A-Z0-9_]*)=", line)
            if not m:
                err(f"{path}:{n}", "not a VAR=value line")
            elif m.group(1) not in env_ok:
                err(f"{path}:{n}", f"{m.group(1)} is not documented in docs/configuration.md")
            else:
                values[m.group(1)] = line.split("=", 1)[1]
    if values:
        smoke_server(binary, ["serve"], values, path)


def command_lines(md_path, inline=True):
    """Shell lines inside ``` blocks (and, if inline, `inline code`) of a Markdown file, with
    backslash continuations joined and $(...) substitutions replaced by a placeholder word."""
    with open(md_path, encoding="utf-8") as f:
        text = f.read()
    lines = []
    for block in re.findall(r"```(?:sh|bash|shell)?\n(.*?)```", text, re.S):
        lines += block.replace("\\\n", " ").splitlines()
    if inline:
        lines += re.findall(r"(?<!`)`([^`\n]*mcpbox [^`\n]*)`(?!`)", text)
    for line in lines:
        yield re.sub(r"\$\([^()]*\)", "VALUE", line)


def split_commands(line):
    """Splits a shell line on ; && || | & and yields each simple command's words."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return
    cur = []
    for w in words + [";"]:
        if w in (";", "&&", "||", "|", "&"):
            if cur:
                yield cur
            cur = []
        elif w.endswith("&") and w not in ("&",):
            cur.append(w[:-1])
            yield cur
            cur = []
        else:
            cur.append(w)


def check_markdown(binary, path, inline=True):
    count = 0
    for n, line in enumerate(command_lines(path, inline), 1):
        where = f"{path}: `{line.strip()}`"
        for words in split_commands(line):
            while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] == "sudo"):
                words = words[1:]  # VAR=value prefixes, sudo
            if words and words[0] == "mcpbox":
                check_mcpbox_argv(binary, words[1:], where)
                count += 1
            elif words[:3] == ["claude", "mcp", "add"]:
                count += 1
                if "--" in words:
                    tail = words[words.index("--") + 1:]
                    if tail[:1] != ["mcpbox"]:
                        err(where, "the server command is not mcpbox")
                    else:
                        check_mcpbox_argv(binary, tail[1:], where)
                else:
                    urls = [w for w in words if re.match(r"^https?://", w)]
                    if not urls:
                        err(where, "neither `-- mcpbox ...` nor a URL")
                    for u in urls:
                        check_url(u, where)
    return count


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    binary, examples, configuration_md = sys.argv[1:4]
    node = sys.argv[4] if len(sys.argv) > 4 else None
    docs = sys.argv[5] if len(sys.argv) > 5 else None
    if run_help(binary, "") is None or run_help(binary, "serve") is None:
        print(f"SKIP: `{binary} --help` or `{binary} serve --help` does not work in this build yet")
        return SKIP
    env_ok = documented_env(configuration_md)
    if not env_ok:
        err(configuration_md, "no environment variable table found")
    servers = commands = 0
    for path in sorted(glob.glob(os.path.join(examples, "**", "*.json"), recursive=True) +
                       glob.glob(os.path.join(examples, "**", ".*.json"), recursive=True)):
        if "node_modules" not in path:
            servers += check_json(binary, path, env_ok)
    for path in sorted(glob.glob(os.path.join(examples, "**", "*.env"), recursive=True)):
        check_env_file(binary, path, env_ok)
    for path in sorted(glob.glob(os.path.join(examples, "**", "*.md"), recursive=True)):
        commands += check_markdown(binary, path)
    if docs:
        for path in sorted(glob.glob(os.path.join(docs, "*.md"))):
            commands += check_markdown(binary, path, inline=False)
    if node and os.access(node, os.X_OK):
        for path in glob.glob(os.path.join(examples, "**", "*.mjs"), recursive=True):
            p = subprocess.run([node, "--check", path], capture_output=True, text=True)
            if p.returncode != 0:
                err(path, p.stderr.strip())
    if servers == 0 or commands == 0:
        err(examples, f"found {servers} server entries and {commands} commands; expected some of each")
    for e in errors:
        print(f"FAIL: {e}")
    print(f"checked {servers} server entries and {commands} commands in {examples}"
          + (f" and {docs}" if docs else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
