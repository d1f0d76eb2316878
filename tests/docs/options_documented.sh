#!/bin/sh
# The documents and the binary agree on options:
#  - every long option of `mcpbox --help` and of each `mcpbox COMMAND --help` is in the man page;
#  - every option of `mcpbox serve --help` is in docs/configuration.md;
#  - neither document names an option that no --help of the binary mentions.
# usage: options_documented.sh <mcpbox binary> <docs dir>
set -u
bin=$1 docs=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! "$bin" --help > "$tmp/top" 2>&1 || ! "$bin" serve --help > "$tmp/serve" 2>&1; then
    echo "SKIP: '$bin --help' or '$bin serve --help' does not work yet:"; head -5 "$tmp/top"
    exit 77
fi
# Subcommands: the indented words of the "Commands:" section of the top-level help.
cmds=$(sed -n '/^Commands:/,/^$/p' "$tmp/top" | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
[ -n "$cmds" ] || { echo "FAIL: no Commands: section in mcpbox --help"; exit 1; }
cp "$tmp/top" "$tmp/all"
subcommands() { sed -n '/^Commands:/,/^$/p' "$1" | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p'; }
for c in $cmds; do
    "$bin" "$c" --help > "$tmp/cmd" 2>&1 || { echo "FAIL: mcpbox $c --help fails"; exit 1; }
    cat "$tmp/cmd" >> "$tmp/all"
    # A command with commands of its own (mcpbox sandbox): their help too.
    for s in $(subcommands "$tmp/cmd"); do
        "$bin" "$c" "$s" --help >> "$tmp/all" 2>&1 || { echo "FAIL: mcpbox $c $s --help fails"; exit 1; }
    done
done
opts() { grep -v 'claude mcp add' "$1" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u; }
opts "$tmp/all" > "$tmp/real"
opts "$tmp/serve" > "$tmp/serve_opts"
sed 's/\\-/-/g' "$docs/mcpbox.1" | grep -v 'claude mcp add' | grep -o -- '--[a-z][a-z0-9-]*' | sort -u > "$tmp/man"
grep -o -- '`--[a-z][a-z0-9-]*' "$docs/configuration.md" | tr -d '`' | sort -u > "$tmp/conf"
rc=0
for opt in $(comm -23 "$tmp/real" "$tmp/man"); do
    echo "FAIL: $opt (from mcpbox --help) is not in docs/mcpbox.1"; rc=1
done
for opt in $(comm -23 "$tmp/serve_opts" "$tmp/conf"); do
    echo "FAIL: $opt (from mcpbox serve --help) is not in docs/configuration.md"; rc=1
done
for f in man conf; do
    for opt in $(comm -23 "$tmp/$f" "$tmp/real"); do
        echo "FAIL: $f documents $opt, which no --help of the binary mentions"; rc=1
    done
done
echo "# commands: $(echo $cmds); options: $(wc -l < "$tmp/real")"
[ $rc = 0 ] && echo ok
exit $rc
