# Sourced by the conformance runners: starts `mcpbox serve --http 127.0.0.1:0
# --conformance-fixtures` in a temporary directory and waits for its address.
#   . serve_fixtures.sh; serve_fixtures MCPBOX_BINARY
# Sets $tmp (removed at exit), $server_pid (killed at exit) and $url; the server's stderr is in
# $tmp/server.log. Exits 1 if the server does not report its address.
tmp=$(mktemp -d)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

serve_fixtures() {
    "$1" serve --http 127.0.0.1:0 --conformance-fixtures --state-dir "$tmp/state" \
        2>"$tmp/server.log" &
    server_pid=$!
    url=
    for _ in $(seq 1 100); do
        url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$tmp/server.log" | head -n1)
        [ -n "$url" ] && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "FAIL: mcpbox did not report its address"
    cat "$tmp/server.log"
    exit 1
}
