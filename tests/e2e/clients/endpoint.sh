#!/bin/bash
# Issue 17 point 4: an endpoint lives as long as its sandbox, not as long as the mcpbox process
# that made it. The MCP Inspector CLI starts a one-shot stdio server per call: get_endpoint in
# one, the URL fetched after that server has exited; a second get_endpoint (another server)
# returns the same URL; destroy_sandbox closes it.
. "$(dirname "$0")/lib.sh" "$1" "$2"
state="$WORK/state"
stdio() { inspector "$MCPBOX" serve --state-dir "$state" --local-pool 0 --method tools/call "$@"; }

out=$(stdio --tool-name create_sandbox) || fail "create_sandbox: $out"
id=$(json_get "$out" 'd["structuredContent"]["sandbox_id"]')
stdio --tool-name write_file --tool-arg "sandbox_id=$id" path=index.html content=served-from-the-sandbox >/dev/null ||
    fail "write_file"
stdio --tool-name run_command --tool-arg "sandbox_id=$id" \
    'command=python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1' background=true >/dev/null ||
    fail "run_command (server)"
out=$(stdio --tool-name run_command --tool-arg "sandbox_id=$id" \
    'command=for i in $(seq 1 100); do python3 -c "import socket; socket.create_connection((\"127.0.0.1\", 8000))" 2>/dev/null && exit 0; sleep 0.1; done; exit 1')
[ "$(json_get "$out" 'd["structuredContent"]["exit_code"]')" = 0 ] || fail "the server in the sandbox did not start: $out"

out=$(stdio --tool-name get_endpoint --tool-arg "sandbox_id=$id" port=8000) || fail "get_endpoint: $out"
url=$(json_get "$out" 'd["structuredContent"]["url"]')
echo "endpoint $url (its server process has exited)"
for pid in $(pgrep -f "serve --state-dir $state"); do # the forwarder shares the argv, not the name
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = mcpbox ] && fail "a stdio server is still running"
done
body=$(curl -s --max-time 10 "$url/index.html") || fail "the endpoint died with its one-shot server"
[ "$body" = served-from-the-sandbox ] || fail "the endpoint served: $body"
for i in 1 2 3; do # several connections, one after another
    curl -s --max-time 10 "$url/index.html" | grep -q served-from-the-sandbox || fail "connection $i"
done

out=$(stdio --tool-name get_endpoint --tool-arg "sandbox_id=$id" port=8000)
[ "$(json_get "$out" 'd["structuredContent"]["url"]')" = "$url" ] ||
    fail "a second get_endpoint made a new forwarder: $out"

stdio --tool-name destroy_sandbox --tool-arg "sandbox_id=$id" >/dev/null || fail "destroy_sandbox"
for _ in $(seq 1 50); do
    curl -s --max-time 2 "$url/index.html" >/dev/null || break
    sleep 0.1
done
curl -s --max-time 2 "$url/index.html" >/dev/null && fail "the endpoint outlived its sandbox"
echo "ok: the endpoint lives as long as the sandbox"
