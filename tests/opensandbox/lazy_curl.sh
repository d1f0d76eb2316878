#!/bin/sh
# libcurl is loaded only when the OpenSandbox backend is enabled: an idle `mcpbox serve` without
# it has no libcurl (nor its TLS stack) mapped, and with it has. See lib/httpc/curl_loader.h.
#   lazy_curl.sh path/to/mcpbox
set -eu
BIN=${1:?usage: lazy_curl.sh path/to/mcpbox}
TMP=$(mktemp -d)
pid=
cleanup() {
    exec 3>&- 2>/dev/null || true
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
SETTLE_TRIES=50 # x 0.1 s: until the server logs that its backends are up

# The backends start with the first request that needs them (not at server start): this asks.
FIRST_SANDBOX_REQUEST='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"lazy_curl","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_sandboxes","arguments":{}}}'

# maps_of LABEL [serve options...]: start a stdio server, make it start its backends, copy its
# /proc/PID/maps, stop it
maps_of() {
    label=$1
    shift
    rm -f "$TMP/in"
    mkfifo "$TMP/in"
    env -u OPEN_SANDBOX_DOMAIN "$BIN" serve --log-level info --state-dir "$TMP/state-$label" --no-local "$@" \
        <"$TMP/in" >/dev/null 2>"$TMP/$label.err" &
    pid=$!
    exec 3>"$TMP/in"
    printf '%s\n' "$FIRST_SANDBOX_REQUEST" >&3
    i=0
    until grep -q 'backends:' "$TMP/$label.err"; do
        i=$((i + 1))
        if [ "$i" -gt "$SETTLE_TRIES" ] || ! kill -0 "$pid" 2>/dev/null; then
            cat "$TMP/$label.err" >&2
            echo "FAIL: $label: the server did not start" >&2
            exit 1
        fi
        sleep 0.1
    done
    cp "/proc/$pid/maps" "$TMP/$label.maps"
    exec 3>&-
    wait "$pid" || true
    pid=
}

maps_of off
if grep -q 'libcurl' "$TMP/off.maps"; then
    echo "FAIL: libcurl is mapped though the OpenSandbox backend is off:" >&2
    grep libcurl "$TMP/off.maps" >&2
    exit 1
fi
echo "ok 1 - no libcurl mapped without the OpenSandbox backend"

maps_of on --opensandbox-domain 127.0.0.1:9
if ! grep -q 'opensandbox enabled' "$TMP/on.err"; then
    cat "$TMP/on.err" >&2
    echo "FAIL: the OpenSandbox backend did not start" >&2
    exit 1
fi
if ! grep -q 'libcurl' "$TMP/on.maps"; then
    echo "FAIL: the OpenSandbox backend is on but libcurl is not mapped" >&2
    exit 1
fi
echo "ok 2 - libcurl loaded when the OpenSandbox backend starts"
