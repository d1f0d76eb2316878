#!/bin/bash
# Issue 34's last piece through the MCP Inspector CLI, which starts one `mcpbox serve` (stdio)
# per call: `x = 41` in one process, `x + 1` in the next answers 42 with the execution count
# going on; a named context is created, run in, listed by language and deleted, each by a
# process of its own. (Before, the second call answered NameError from a fresh context.)
#   code_restart_inspector.sh MCPBOX NODE_MODULES
. "$(dirname "$0")/../../e2e/clients/lib.sh" "$1" "$2"
state="$WORK/state"
mkdir -p "$state"
stdio() { inspector "$MCPBOX" serve --state-dir "$state" --local-pool 0 --method tools/call "$@"; }

out=$(stdio --tool-name create_sandbox) || fail "create_sandbox: $out"
if [ "$(json_get "$out" 'd.get("isError", False)')" = True ]; then
    echo "SKIP: no local sandbox here: $out"
    exit 77
fi
id=$(json_get "$out" 'd["structuredContent"]["sandbox_id"]')
run() { stdio --tool-name run_code --tool-arg "sandbox_id=$id" "$@"; }

out=$(run 'code=x = 41') || fail "x = 41: $out"
[ "$(json_get "$out" 'd["structuredContent"]["execution_count"]')" = 1 ] || fail "x = 41: $out"
out=$(run 'code=x + 1') || fail "x + 1: $out"
[ "$(json_get "$out" 'd["structuredContent"]["results"][0]["text"]')" = 42 ] ||
    fail "x + 1 in a second process did not see x: $out"
[ "$(json_get "$out" 'd["structuredContent"]["execution_count"]')" = 2 ] || fail "count: $out"

out=$(run action=create language=bash) || fail "create: $out"
ctx=$(json_get "$out" 'd["structuredContent"]["context_id"]')
run "context_id=$ctx" 'code=N=6' >/dev/null || fail "N=6"
out=$(run "context_id=$ctx" 'code=echo $((N * 7))') || fail "echo: $out"
[ "$(json_get "$out" 'd["structuredContent"]["stdout"]')" = 42 ] || fail "bash state: $out"
out=$(run action=list language=bash) || fail "list: $out"
[ "$(json_get "$out" '[c["context_id"] for c in d["structuredContent"]["contexts"]]')" = "['$ctx']" ] ||
    fail "list by language from another process: $out"
run action=delete "context_id=$ctx" >/dev/null || fail "delete"
out=$(run "context_id=$ctx" 'code=echo $N')
echo "$out" | grep -q "no code context" || fail "a deleted context answered: $out"
stdio --tool-name destroy_sandbox --tool-arg "sandbox_id=$id" >/dev/null || fail "destroy"
echo ok
