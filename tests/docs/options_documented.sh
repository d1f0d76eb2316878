#!/bin/sh
# Every long option that `mcpbox --help` and `mcpbox serve --help` print is documented in the
# man page and in docs/configuration.md, and every option those documents name exists.
# usage: options_documented.sh <mcpbox binary> <docs dir>
set -u
bin=$1 docs=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! "$bin" --help > "$tmp/help" 2>&1 || ! "$bin" serve --help >> "$tmp/help" 2>&1; then
    echo "SKIP: '$bin --help' or '$bin serve --help' does not work yet:"; head -5 "$tmp/help"
    exit 77
fi
grep -o -- '--[a-z][a-z0-9-]*' "$tmp/help" | sort -u > "$tmp/real"
[ -s "$tmp/real" ] || { echo "FAIL: no --options in the help output"; exit 1; }
rc=0
while read -r opt; do
    esc=$(printf '%s' "$opt" | sed 's/-/\\\\-/g')
    grep -q -- "$esc" "$docs/mcpbox.1" || { echo "FAIL: $opt is not in docs/mcpbox.1"; rc=1; }
    grep -q -- "\`$opt" "$docs/configuration.md" || { echo "FAIL: $opt is not in docs/configuration.md"; rc=1; }
done < "$tmp/real"
# And the reverse: the documents name no option the binary lacks.
sed 's/\\-/-/g' "$docs/mcpbox.1" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u > "$tmp/man"
grep -o -- '`--[a-z][a-z0-9-]*' "$docs/configuration.md" | tr -d '`' | sort -u > "$tmp/conf"
for f in man conf; do
    for opt in $(comm -23 "$tmp/$f" "$tmp/real"); do
        echo "FAIL: $f documents $opt, which no --help of the binary mentions"; rc=1
    done
done
[ $rc = 0 ] && echo ok
exit $rc
