#!/bin/bash
# Approvals (issue 38) through a real client offline: the MCP Inspector CLI declares no
# elicitation, so it gets the person's cannot-ask answer. Widening egress to a name the person
# never allowed is refused with a message naming the options that change it (the prompt-injection
# case: nobody to ask, so no); a name on the person's --approve-egress-allow list goes through;
# a server started with --approve-unasked egress=allow lets it through; --approve egress=refuse
# refuses it whatever the client. Each decision is in the audit log.
. "$(dirname "$0")/lib.sh" "$1" "$2"
tag=$RANDOM$RANDOM
evil="evil-$tag.example"
listed="pypi-$tag.example"
policy() { echo "network_policy={\"egress\":[{\"action\":\"allow\",\"target\":\"$1\"}]}"; }

start_http "$WORK/state" --approve-egress-allow "$listed"
out=$(inspector "$URL" --method tools/call --tool-name create_sandbox --tool-arg "$(policy "$evil")" 2>&1)
echo "$out" | grep -q "cannot ask them" || fail "an unasked widening was not refused: $out"
echo "$out" | grep -q -- "--approve-unasked egress=allow" || fail "the refusal names no option: $out"
out=$(inspector "$URL" --method tools/call --tool-name create_sandbox --tool-arg "$(policy "$listed")") ||
    fail "a listed name was refused: $out"
id=$(json_get "$out" 'd["structuredContent"]["sandbox_id"]')
out=$(inspector "$URL" --method tools/call --tool-name update_sandbox --tool-arg "sandbox_id=$id" \
      --tool-arg "$(policy "$evil")" 2>&1)
echo "$out" | grep -q "cannot ask them" || fail "update_sandbox widened egress unasked: $out"
out=$(inspector "$URL" --method tools/call --tool-name get_sandbox --tool-arg "sandbox_id=$id")
echo "$out" | grep -q "$evil" && fail "the policy changed after a refusal: $out"
sqlite3 "$WORK/state/mcpbox.db" "select outcome, detail from audit where tool='approval'" \
    > "$WORK/audit" 2>/dev/null || python3 - "$WORK/state/mcpbox.db" > "$WORK/audit" <<'PY'
import sqlite3, sys
for row in sqlite3.connect(sys.argv[1]).execute("select outcome, detail from audit where tool='approval'"):
    print("|".join(row))
PY
grep -q "^refused|kind=egress tool=update_sandbox by=unattended" "$WORK/audit" ||
    fail "no audit row for the refusal: $(cat "$WORK/audit")"

start_http "$WORK/state2" --approve-unasked egress=allow
out=$(inspector "$URL" --method tools/call --tool-name create_sandbox --tool-arg "$(policy "$evil")") ||
    fail "--approve-unasked egress=allow still refused: $out"

start_http "$WORK/state3" --approve egress=refuse --approve-unasked egress=allow
out=$(inspector "$URL" --method tools/call --tool-name create_sandbox --tool-arg "$(policy "$evil")" 2>&1)
echo "$out" | grep -q -- "--approve egress=refuse" || fail "egress=refuse let it through: $out"
echo "approval through the Inspector CLI: ok"
