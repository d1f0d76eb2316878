#!/usr/bin/env bash
# One command from a fresh Debian 12 checkout (as root) to a running mcpbox:
# installs what is missing, builds, and serves MCP over Streamable HTTP on 127.0.0.1:8765 with the
# local backend. Pass other `mcpbox serve` options to change that (e.g. --http 127.0.0.1:9000).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
listen=127.0.0.1:8765
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--http "$listen")
exec build/mcpbox serve "${args[@]}"
