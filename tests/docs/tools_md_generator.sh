#!/bin/sh
# The tools.md generator itself: renders a sample schema, notices a stale file, rejects a schema
# whose name does not match its file, and handles an empty directory.
# usage: tools_md_generator.sh <python3> <gen-tools-md.py>
set -u
py=$1 gen=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir "$tmp/s"
"$py" "$gen" --schemas "$tmp/s" --out "$tmp/empty.md" || fail "empty schema dir"
grep -q 'No tool schemas found' "$tmp/empty.md" || fail "empty dir not reported"

cat > "$tmp/s/echo_text.json" <<'J'
{"name":"echo_text","title":"Echo","description":"Echo text back. Second sentence.",
 "annotations":{"readOnlyHint":true},
 "inputSchema":{"type":"object","required":["text"],"properties":{
   "text":{"type":"string","description":"What to echo.","maxLength":10},
   "opts":{"type":"object","properties":{"upper":{"type":"boolean","default":false}}}}},
 "outputSchema":{"type":"object","properties":{"lines":{"type":"array",
   "items":{"type":"object","properties":{"n":{"type":"integer"}}}}}}}
J
"$py" "$gen" --schemas "$tmp/s" --out "$tmp/t.md" || fail "render"
for want in '## echo_text' '| `text` | string | yes | What to echo. (max length `10`) |' \
            '| `opts.upper` | boolean |  | default `false` |' '| `lines[].n` | integer |  |  |' \
            '| [`echo_text`](#echo_text) | Echo text back. | read-only |'; do
    grep -qF -- "$want" "$tmp/t.md" || fail "missing line: $want"
done
"$py" "$gen" --schemas "$tmp/s" --out "$tmp/t.md" --check || fail "fresh file reported stale"
printf '# notes\n\n## echo_text\n\nLonger prose, kept out of tools/list.\n' > "$tmp/notes.md"
"$py" "$gen" --schemas "$tmp/s" --out "$tmp/n.md" --notes "$tmp/notes.md" || fail "render notes"
grep -qF 'Longer prose, kept out of tools/list.' "$tmp/n.md" || fail "notes not rendered"
printf '## no_such_tool\n\nx\n' > "$tmp/bad-notes.md"
"$py" "$gen" --schemas "$tmp/s" --out "$tmp/n.md" --notes "$tmp/bad-notes.md" 2>/dev/null &&
    fail "notes for a tool without a schema accepted"

sed -i 's/What to echo/What to repeat/' "$tmp/s/echo_text.json"
if "$py" "$gen" --schemas "$tmp/s" --out "$tmp/t.md" --check 2>/dev/null; then
    fail "stale file not detected"
fi
rm -f "$tmp/missing.md"
if "$py" "$gen" --schemas "$tmp/s" --out "$tmp/missing.md" --check 2>/dev/null; then
    fail "missing file not detected"
fi
echo '{"name":"other"}' > "$tmp/s/bad.json"
if "$py" "$gen" --schemas "$tmp/s" --out "$tmp/t.md" 2>/dev/null; then
    fail "schema whose name differs from its file accepted"
fi
echo '{' > "$tmp/s/bad.json"
if "$py" "$gen" --schemas "$tmp/s" --out "$tmp/t.md" 2>/dev/null; then
    fail "invalid JSON accepted"
fi
echo "ok"
