#!/usr/bin/env bash
# One command from a fresh Debian 12 checkout (as root) to a running mcpbox:
# installs what is missing, builds, and serves MCP over Streamable HTTP on 127.0.0.1:8765 with the
# local backend. Pass other `mcpbox serve` options to change that (e.g. --http 127.0.0.1:9000).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
scripts/install-deps.sh
# The server only: the tests need more (python3, Node tooling) and scripts/test.sh builds them.
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCPBOX_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
listen=127.0.0.1:8765
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--http "$listen")
# The address actually served, for the connection hints (only when serving HTTP).
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[$i]}" in
    --http) listen=${args[$((i + 1))]:-} ;;
    --http=*) listen=${args[$i]#--http=} ;;
    esac
done
if printf '%s\n' "${args[@]}" | grep -q -- '^--http'; then
    cat >&2 <<MSG

mcpbox is starting on http://$listen/mcp (local backend; state in ${XDG_STATE_HOME:-$HOME/.local/state}/mcpbox).
Connect a client:
  Claude Code:  claude mcp add --transport http sandbox http://$listen/mcp
  Cursor:       add to ~/.cursor/mcp.json: {"mcpServers": {"sandbox": {"url": "http://$listen/mcp"}}}
  Or over stdio, without this server:  claude mcp add sandbox -- $here/build/mcpbox serve
Check this host with: $here/build/mcpbox doctor          Stop with Ctrl-C.

MSG
fi
exec build/mcpbox serve "${args[@]}"
