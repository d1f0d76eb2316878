#!/bin/sh
# One source of truth for the Claude Code plugin (see CMakeLists.txt).
#   plugin_files.sh MCPBOX SOURCE_DIR BUILD_DIR VERSION
set -u
bin=$1 src=$2 build=$3 version=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpbox-plugin-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
skill=skills/troubleshoot-sandbox
files="SKILL.md reference.md"

# The version in the source manifest is the project's.
grep -q "^  \"version\": \"$version\",\$" "$src/.claude-plugin/plugin.json" ||
    fail ".claude-plugin/plugin.json does not say version $version (the project's)"

# The binary's embedded skill is the source's.
"$bin" skill install --dir "$tmp/embedded" > /dev/null || fail "mcpbox skill install"
for f in $files; do
    cmp -s "$tmp/embedded/troubleshoot-sandbox/$f" "$src/$skill/$f" ||
        fail "the skill's $f embedded in mcpbox differs from $skill/$f"
done
"$bin" skill show | cmp -s - "$src/$skill/SKILL.md" || fail "mcpbox skill show differs"

# An install carries a ready marketplace whose server is the installed binary.
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" 2>&1 ||
    { tail -20 "$tmp/install.log"; fail "cmake --install"; }
plugin="$tmp/prefix/share/mcpbox/claude-plugin"
cmp -s "$plugin/.claude-plugin/marketplace.json" "$src/.claude-plugin/marketplace.json" ||
    fail "the installed marketplace.json differs from the source's"
for f in $files; do
    cmp -s "$plugin/$skill/$f" "$src/$skill/$f" || fail "the installed $skill/$f differs"
done
grep -q "\"version\" *: *\"$version\"" "$plugin/.claude-plugin/plugin.json" ||
    fail "the installed plugin.json lost the version"
grep -q "\"command\" *: *\"$tmp/prefix/bin/mcpbox\"" "$plugin/.claude-plugin/plugin.json" ||
    fail "the installed plugin.json does not run $tmp/prefix/bin/mcpbox: $(cat "$plugin/.claude-plugin/plugin.json")"
[ -x "$tmp/prefix/bin/mcpbox" ] || fail "no installed binary"
echo "ok: plugin $version, skill files identical in source, binary and install"
