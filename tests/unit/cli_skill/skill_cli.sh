#!/bin/sh
# `mcpbox skill` through the real binary: show prints the embedded skill byte for byte, install
# writes it where --dir, --project and HOME say, -o json reports it, a second install changes
# nothing, uninstall removes it.
#   skill_cli.sh MCPBOX SKILL.md
set -u
bin=$1 src=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$bin" skill --help > /dev/null 2>&1 || { echo "SKIP: this mcpbox has no skill subcommand"; exit 77; }

"$bin" skill show | cmp -s - "$src" || fail "skill show differs from $src"
out=$("$bin" skill install --dir "$tmp/skills" -o json) || fail "install --dir"
[ "$out" = "{\"path\":\"$tmp/skills/troubleshoot-sandbox/SKILL.md\",\"status\":\"installed\"}" ] ||
    fail "unexpected json: $out"
cmp -s "$tmp/skills/troubleshoot-sandbox/SKILL.md" "$src" || fail "installed file differs"
cmp -s "$tmp/skills/troubleshoot-sandbox/reference.md" "$(dirname "$src")/reference.md" ||
    fail "installed reference.md differs"
out=$("$bin" skill install --dir "$tmp/skills" -o json) || fail "second install"
echo "$out" | grep -q '"status":"unchanged"' || fail "second install: $out"
(cd "$tmp" && "$bin" skill install --project > /dev/null) || fail "install --project"
cmp -s "$tmp/.claude/skills/troubleshoot-sandbox/SKILL.md" "$src" || fail "--project file"
HOME="$tmp/home" CLAUDE_CONFIG_DIR= "$bin" skill install > /dev/null || fail "install to HOME"
cmp -s "$tmp/home/.claude/skills/troubleshoot-sandbox/SKILL.md" "$src" || fail "HOME file"
[ "$(HOME=/h CLAUDE_CONFIG_DIR= "$bin" skill path)" = /h/.claude/skills/troubleshoot-sandbox/SKILL.md ] ||
    fail "skill path"
"$bin" skill uninstall --dir "$tmp/skills" > /dev/null || fail "uninstall"
[ ! -e "$tmp/skills/troubleshoot-sandbox" ] || fail "uninstall left the directory (or a file in it)"
"$bin" skill install --bogus > /dev/null 2>&1; [ $? = 2 ] || fail "bad option is not exit 2"
echo ok
