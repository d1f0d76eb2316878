#!/bin/bash
# Issue 17 point 8, the parts a person meets first: `mcpbox help [COMMAND]`, `--version` naming
# every protocol revision and the license, a stdio server quiet on stderr by default (Claude
# Code shows each stderr line as [ERROR]; `claude mcp list` runs the server), info on HTTP.
. "$(dirname "$0")/lib.sh" "$1" "$2"
help=$("$MCPBOX" help) || fail "mcpbox help exits non-zero"
echo "$help" | grep -q "sandbox" || fail "mcpbox help lists no commands: $help"
"$MCPBOX" help sandbox | grep -q "Usage: mcpbox sandbox" || fail "mcpbox help sandbox"
ver=$("$MCPBOX" --version)
echo "$ver" | grep -q "2026-07-28" || fail "--version leaves out 2026-07-28: $ver"
echo "$ver" | grep -q "license: Apache-2.0" || fail "--version does not state the license: $ver"

# A stdio server driven by Claude Code's health check: nothing below warning on stderr.
state="$WORK/state"
wrapper="$WORK/serve.sh" # keeps the server's stderr where we can read it
printf '#!/bin/sh\nexec "%s" serve --state-dir "%s" --local-pool 0 2>>"%s"\n' "$MCPBOX" "$state" "$WORK/stdio.err" > "$wrapper"
chmod +x "$wrapper"
cd "$HOME"
claude mcp add mcpbox-stdio -- "$wrapper" >/dev/null || fail "claude mcp add (stdio)"
out=$(timeout 90 claude mcp list 2>&1)
echo "$out" | grep -q "mcpbox-stdio: .*Connected" || fail "the stdio server is not Connected: $out"
[ -s "$WORK/stdio.err" ] && fail "the stdio server wrote to stderr by default: $(head -5 "$WORK/stdio.err")"
# Asked for, info still comes.
MCPBOX_LOG_LEVEL=info "$MCPBOX" serve --state-dir "$state" --local-pool 0 </dev/null 2>"$WORK/info.err"
grep -q " info " "$WORK/info.err" || fail "MCPBOX_LOG_LEVEL=info logged no info: $(cat "$WORK/info.err")"
# HTTP keeps info by default.
start_http "$WORK/http"
grep -q " info " "$WORK/http.log" || fail "HTTP logged no info by default: $(cat "$WORK/http.log")"
echo "ok: help, version, log levels"
