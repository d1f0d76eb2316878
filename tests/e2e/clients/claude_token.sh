#!/bin/bash
# Issue 17 point 5: token-protected HTTP with Claude Code's `claude mcp list` health check.
# With the token in a header it connects. Without one, Claude Code reads the 401 as "OAuth" and
# walks the discovery paths whatever the server says; they answer 404 (no OAuth here), and the
# message Claude Code shows must tell the person to send the bearer token (it showed "Dynamic
# Client Registration rejected (HTTP 401)" with nothing to act on).
. "$(dirname "$0")/lib.sh" "$1" "$2"
token=tok-clients-$$-$RANDOM
start_http "$WORK/state" --token "$token"

cd "$HOME"
claude mcp add --transport http mcpbox-token "$URL" --header "Authorization: Bearer $token" \
    >/dev/null || fail "claude mcp add (with header)"
claude mcp add --transport http mcpbox-none "$URL" >/dev/null || fail "claude mcp add (no header)"
out=$(timeout 90 claude mcp list 2>&1)
echo "$out"
echo "$out" | grep -q "mcpbox-token: .*Connected" || fail "the server with the bearer header is not Connected"
none=$(echo "$out" | grep "mcpbox-none:")
echo "$none" | grep -q "HTTP 404" || fail "without a token, the OAuth probe was not answered 404: $none"
echo "$none" | grep -q "does not use OAuth; send Authorization: Bearer" ||
    fail "without a token, Claude Code does not tell to send Authorization: Bearer: $none"

base=${URL%/mcp}
for path in /.well-known/oauth-protected-resource /.well-known/oauth-protected-resource/mcp \
            /.well-known/oauth-authorization-server /.well-known/openid-configuration /register; do
    code=$(curl -s -o "$WORK/body" -w '%{http_code}' -X GET "$base$path")
    [ "$code" = 404 ] || fail "$path answered $code, want 404 (no OAuth here)"
    grep -q "does not use OAuth" "$WORK/body" || fail "$path: body $(cat "$WORK/body")"
done
code=$(curl -s -o "$WORK/body" -w '%{http_code}' -X POST "$base/register" -H 'Content-Type: application/json' -d '{}')
[ "$code" = 404 ] || fail "POST /register answered $code, want 404"
code=$(curl -s -o "$WORK/body" -w '%{http_code}' "$base/mcp")
[ "$code" = 401 ] || fail "/mcp without a token answered $code, want 401"
grep -q "send Authorization: Bearer <token>" "$WORK/body" || fail "401 body: $(cat "$WORK/body")"
echo "ok: claude mcp list, OAuth discovery paths"
