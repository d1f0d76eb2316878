#!/bin/bash
# Issue 17 point 8, `mcpbox sandbox` for people: `logs ID` lists the commands, `logs ID CMD`
# shows one's output and `-f` follows it to the end; errors name the command to run, not a tool
# ("run `mcpbox sandbox resume ID` first"); cp copies directories both ways and into ID:dir/.
. "$(dirname "$0")/lib.sh" "$1" "$2"
sb() { "$MCPBOX" sandbox --state-dir "$WORK/state" "$@"; }
id=$(sb create -q) || fail "create"
trap 'sb rm "$id" >/dev/null 2>&1; cleanup' EXIT

sb exec "$id" 'echo first-output; exit 3' >/dev/null
sb exec "$id" 'for i in 1 2 3; do echo tick $i; sleep 0.5; done' >/dev/null &
sleep 0.5
logs=$(sb logs "$id") || fail "logs"
echo "$logs"
echo "$logs" | grep -q "COMMAND_ID" || fail "logs lists no commands"
echo "$logs" | grep "echo first-output" | grep -q " 3 " || fail "logs: the failed command and its exit code"
running=$(sb logs "$id" -o json | python3 -c 'import json,sys; print([c["command_id"] for c in json.load(sys.stdin)["commands"] if c["status"] == "running"][0])') ||
    fail "no running command in logs -o json"
followed=$(timeout 20 "$MCPBOX" sandbox --state-dir "$WORK/state" logs "$id" "$running" -f) || fail "logs -f"
[ "$followed" = "$(printf 'tick 1\ntick 2\ntick 3')" ] || fail "logs -f printed: $followed"
wait
failed=$(sb logs "$id" -o json | python3 -c 'import json,sys; print([c["command_id"] for c in json.load(sys.stdin)["commands"] if c.get("exit_code") == 3][0])')
[ "$(sb logs "$id" "$failed")" = first-output ] || fail "logs ID CMD: the command's output"

# Errors speak to people.
sb pause "$id" >/dev/null || fail "pause"
err=$(sb exec "$id" true 2>&1) && fail "exec in a paused sandbox succeeded"
echo "$err" | grep -q "mcpbox sandbox resume $id" || fail "the paused error does not say what to run: $err"
echo "$err" | grep -q "update_sandbox" && fail "the error names a tool: $err"
sb resume "$id" >/dev/null || fail "resume"
err=$(sb get sbx-00000000deadbeef 2>&1)
echo "$err" | grep -q "mcpbox sandbox ls" || fail "the missing-sandbox error: $err"
echo "$err" | grep -q "list_sandboxes" && fail "the error names a tool: $err"

# cp: a directory in, a file into ID:dir/, the directory back out.
mkdir -p "$WORK/proj/sub" "$WORK/out"
echo alpha > "$WORK/proj/a.txt"
echo beta > "$WORK/proj/sub/b.txt"
echo single > "$WORK/one.txt"
sb cp "$WORK/proj" "$id:copied" || fail "cp DIR ID:PATH"
sb cp "$WORK/one.txt" "$id:copied/sub/" || fail "cp FILE ID:dir/"
inside=$(sb exec "$id" 'cd copied && find . -type f | sort && cat sub/b.txt sub/one.txt')
[ "$inside" = "$(printf './a.txt\n./sub/b.txt\n./sub/one.txt\nbeta\nsingle')" ] || fail "inside: $inside"
sb cp "$id:copied" "$WORK/out" || fail "cp ID:DIR HOSTDIR"
[ "$(cat "$WORK/out/copied/sub/one.txt")" = single ] && [ "$(cat "$WORK/out/copied/a.txt")" = alpha ] ||
    fail "cp out: $(find "$WORK/out")"

# Network policies (issue 14): a bad policy is refused with the field and the reason, in a file
# too; a sandbox made without one shows none and has none to replace.
err=$(sb create --network-policy '{"egress":[{"action":"allow","target":"10.0.0.1"}]}' 2>&1) &&
    fail "create with an IP-literal rule succeeded"
echo "$err" | grep -q 'egress\[0\].target "10.0.0.1" is an IP address' || fail "policy error: $err"
echo '{"egress":[{"action":"allow","target":"*"}]}' > "$WORK/policy.json"
err=$(sb create --network-policy "$WORK/policy.json" 2>&1) && fail "create with target * succeeded"
echo "$err" | grep -q 'set default_action to "allow" instead' || fail "policy file error: $err"
[ "$(sb network-policy "$id")" = "$id has no network policy (network: loopback only)" ] ||
    fail "network-policy ID: $(sb network-policy "$id")"
[ "$(sb network-policy "$id" -o json)" = null ] || fail "network-policy -o json"
err=$(echo '{"egress":[]}' | sb network-policy "$id" - 2>&1) && fail "replacing a policy it has not"
echo "$err" | grep -q "no network_policy, so its egress has no policy to change" || fail "$err"
# With a policy: lookups inside follow it, network-policy replaces it (stdin), the next lookup
# follows the new one, and the refused lookups are events (DNS answered from the policy: no
# traffic leaves).
np=$(sb create -q --network-policy '{"egress":[{"action":"allow","target":"pypi.org"}]}') ||
    fail "create --network-policy"
[ "$(sb exec "$np" 'getent hosts pypi.org >/dev/null && echo y; getent hosts files.pythonhosted.org >/dev/null || echo n')" = "$(printf 'y\nn')" ] ||
    fail "lookups under the first policy"
echo '{"egress":[{"action":"allow","target":"*.pythonhosted.org"}]}' | sb network-policy "$np" - >/dev/null ||
    fail "network-policy ID -"
sb network-policy "$np" -o json | grep -q '"\*.pythonhosted.org"' || fail "the new policy is not shown"
[ "$(sb exec "$np" 'getent hosts pypi.org >/dev/null || echo n; getent hosts files.pythonhosted.org >/dev/null && echo y')" = "$(printf 'n\ny')" ] ||
    fail "lookups under the replaced policy"
events=$(sb logs "$np" --events)
echo "$events" | grep egress_refused | grep -q '"name":"files.pythonhosted.org"' || fail "no refusal event: $events"
echo "$events" | grep -q 'network_policy' || fail "no network_policy event: $events"
sb rm "$np" >/dev/null
echo "ok: logs, errors, cp, network policy"
