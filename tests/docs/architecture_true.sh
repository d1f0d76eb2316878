#!/bin/sh
# docs/architecture.md and its diagram stay true where a machine can check them: the tool count
# (schemas/tools/*.json) in the text and in architecture.dot, and the "Source folders" table,
# which must list exactly the folders that hold C sources under lib/, backend/, server/, mcp/,
# osapi/ and cli/, and in its "builds" column exactly the libraries and executables their
# CMakeLists.txt files define.
#   architecture_true.sh SOURCE_DIR
set -u
src=$1
doc="$src/docs/architecture.md" dot="$src/docs/architecture.dot"
fail() { echo "FAIL: $*"; exit 1; }
n=$(ls "$src"/schemas/tools/*.json | wc -l)
grep -q "^The $n tools " "$doc" || fail "architecture.md does not say 'The $n tools' (schemas/tools has $n)"
grep -q "label=\"$n sandbox tools" "$dot" || fail "architecture.dot does not say '$n sandbox tools'"

listed=$(sed -n '/^## Source folders/,/^## /s/^| `\([a-z_/]*\)\/` |.*/\1/p' "$doc" | sort)
actual=$(cd "$src" && find lib backend server mcp osapi cli -name '*.[ch]' -exec dirname {} \; | sort -u)
[ -n "$listed" ] || fail "architecture.md has no 'Source folders' table"
if [ "$listed" != "$actual" ]; then
    echo "listed in architecture.md:"; echo "$listed" | sed 's/^/  /'
    echo "folders with C sources:"; echo "$actual" | sed 's/^/  /'
    fail "the Source folders table of docs/architecture.md is out of date"
fi
# The "builds" column: every library it names is defined, every library defined is named.
named=$(sed -n '/^## Source folders/,/^## /p' "$doc" | grep '^| `' | cut -d'|' -f3 |
        grep -o '`[a-z_-]*`' | tr -d '`' | sort -u)
defined=$(cd "$src" && grep -rhoE --include=CMakeLists.txt 'add_(library|executable)\( *[A-Za-z_-]+' \
          lib backend server mcp osapi cli | sed 's/.*( *//' | sort -u)
if [ "$named" != "$defined" ]; then
    echo "named in architecture.md:"; echo "$named" | sed 's/^/  /'
    echo "defined by lib/, backend/, server/, mcp/, osapi/, cli/:"; echo "$defined" | sed 's/^/  /'
    fail "the builds column of docs/architecture.md's Source folders table is out of date"
fi
echo "ok: $n tools, $(echo "$listed" | wc -l) source folders, $(echo "$named" | wc -l) libraries and executables"
