#!/usr/bin/env bash
# Local sandboxes as root and as an ordinary user, side by side in one run (issue #11): builds
# bench_local (Release, no sanitizers) like run.sh, creates a user with useradd and prepares it
# with `mcpbox setup --user` (as the README asks root to do once), runs bench_local as root and
# as that user alternately (root, user, root, user: load from other work hits both alike), prints
# both reports and the user/root ratio of each p50, and writes them into the "Rootless" section of
# docs/benchmarks.md (between the rootless-bench markers). The user is removed and the setup
# undone at the end. Run as root.
#
#   tests/bench/local/rootless.sh [bench_local options]    e.g. -n 100 -k 20 -m 0
#   NO_DOC=1 tests/bench/local/rootless.sh --quick          print only
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
build=${MCPBOX_BENCH_LOCAL_BUILD:-$here/build-bench-local}
user=mcpbox-rootless-bench
[ "$(id -u)" = 0 ] || { echo "run it as root (it creates the user $user)" >&2; exit 2; }
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMCPBOX_SANITIZERS= -DMCPBOX_TESTS=ON >/dev/null
cmake --build "$build" -j2 --target bench_local mcpbox >/dev/null
work=$(mktemp -d /tmp/mcpbox-rootless-bench.XXXXXX)
chmod 755 "$work"
cleanup() {
    "$build/mcpbox" setup --user "$user" --undo >/dev/null 2>&1 || true
    userdel -r "$user" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
cleanup
mkdir -p "$work" && chmod 755 "$work"
useradd -m -s /bin/sh -K SUB_UID_COUNT=0 -K SUB_GID_COUNT=0 "$user"
"$build/mcpbox" setup --user "$user" >/dev/null
cp "$build/tests/bench/local/bench_local" "$work/"   # the build tree may be unreadable (/root)
chmod 755 "$work/bench_local"
run_root() { "$work/bench_local" "$@" >"$work/root.$round.md"; }
run_user() {
    (cd /tmp && runuser -u "$user" -- env -i HOME="/home/$user" USER="$user" \
        PATH=/usr/local/bin:/usr/bin:/bin "$work/bench_local" "$@") >"$work/user.$round.md"
}
for round in 1 2; do
    run_root "$@"
    run_user "$@"
done
python3 - "$work" <<'PY' >"$work/compare.md"
import re, statistics, sys, glob
work = sys.argv[1]
def table(path):
    rows = {}
    for line in open(path):
        m = re.match(r"\| (.+?) \| (\d+) \| (\d+) \| (\d+) \|", line)
        if m:
            rows[m.group(1)] = int(m.group(2))
    mem = re.search(r"agent \(PID 1\) RSS p50 (\d+) KiB.*?cgroup usage p50 (\d+) KiB",
                    open(path).read(), re.S)
    if mem:
        rows["idle sandbox: agent RSS (KiB)"] = int(mem.group(1))
        rows["idle sandbox: memory cgroup usage (KiB)"] = int(mem.group(2))
    return rows
def merged(who):
    runs = [table(p) for p in sorted(glob.glob(f"{work}/{who}.*.md"))]
    keys = [k for k in runs[0] if all(k in r for r in runs)]
    return {k: statistics.median(r[k] for r in runs) for k in keys}
root, user = merged("root"), merged("user")
print("| measure (p50, us unless said) | root | user | user / root |")
print("|---|---|---|---|")
for k in root:
    if k in user and root[k]:
        print(f"| {k} | {root[k]:.0f} | {user[k]:.0f} | {user[k] / root[k]:.2f}x |")
PY
cat "$work/compare.md"
[ -n "${NO_DOC:-}" ] && exit 0

doc=$here/docs/benchmarks.md
begin='<!-- rootless-bench:begin -->'
end='<!-- rootless-bench:end -->'
section=$(mktemp)
{
    echo "$begin"
    echo "## Local sandboxes as an ordinary user"
    echo
    echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) with \`tests/bench/local/rootless.sh${*:+ $*}\`: bench_local"
    echo "as root and as a user prepared with \`mcpbox setup --user\` (shared subordinate ids,"
    echo "delegated v1 cgroups on this hybrid host), alternately, two rounds each; the medians of the"
    echo "two rounds' p50s. The \`unshare\` and fork+exec rows are run by the same user as the sandboxes"
    echo "they are compared with. Goal: no slower than root mode by more than 10 %."
    echo
    cat "$work/compare.md"
    echo
    echo "The last user run in full:"
    echo
    sed 's/^/    /' "$work/user.2.md"
    echo "$end"
} >"$section"
if [ -f "$doc" ] && grep -qF "$begin" "$doc"; then
    python3 - "$doc" "$section" "$begin" "$end" <<'PY'
import sys
doc, section, begin, end = sys.argv[1:5]
text = open(doc).read()
new = open(section).read().rstrip("\n")
a = text.index(begin)
b = text.index(end, a) + len(end)
open(doc, "w").write(text[:a] + new + text[b:])
PY
else
    { echo; cat "$section"; } >>"$doc"
fi
rm -f "$section"
echo "wrote $doc"
