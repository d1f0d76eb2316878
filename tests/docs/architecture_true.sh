#!/bin/sh
# docs/architecture.md and its diagram stay true where a machine can check them: the tool count
# (schemas/tools/*.json) in the text and in architecture.dot, and the "Source folders" table,
# which must list exactly the folders that hold C sources under cli/, mcp/ and backend/.
#   architecture_true.sh SOURCE_DIR
set -u
src=$1
doc="$src/docs/architecture.md" dot="$src/docs/architecture.dot"
fail() { echo "FAIL: $*"; exit 1; }
n=$(ls "$src"/schemas/tools/*.json | wc -l)
grep -q "^The $n tools " "$doc" || fail "architecture.md does not say 'The $n tools' (schemas/tools has $n)"
grep -q "label=\"$n sandbox tools" "$dot" || fail "architecture.dot does not say '$n sandbox tools'"

listed=$(sed -n '/^## Source folders/,/^## /s/^| `\([a-z_/]*\)\/` |.*/\1/p' "$doc" | sort)
actual=$(cd "$src" && find cli mcp backend -name '*.[ch]' -exec dirname {} \; | sort -u)
[ -n "$listed" ] || fail "architecture.md has no 'Source folders' table"
if [ "$listed" != "$actual" ]; then
    echo "listed in architecture.md:"; echo "$listed" | sed 's/^/  /'
    echo "folders with C sources:"; echo "$actual" | sed 's/^/  /'
    fail "the Source folders table of docs/architecture.md is out of date"
fi
echo "ok: $n tools, $(echo "$listed" | wc -l) source folders"
