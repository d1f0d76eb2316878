#!/usr/bin/env bash
# Local sandbox benchmark: builds bench_local without sanitizers (Release) into build-bench-local/,
# runs it, and writes the figures with this command into the "Local sandboxes" section of
# docs/benchmarks.md (between the local-bench markers; other sections are left alone).
#
#   tests/bench/local/run.sh [bench_local options]     e.g. -n 200 -k 50 -m 1000 (the defaults)
#   NO_DOC=1 tests/bench/local/run.sh --quick           print only
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
build=${MCPBOX_BENCH_LOCAL_BUILD:-$here/build-bench-local}
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMCPBOX_SANITIZERS= -DMCPBOX_TESTS=ON >/dev/null
cmake --build "$build" -j2 --target bench_local >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$build/tests/bench/local/bench_local" "$@" | tee "$out"
[ -n "${NO_DOC:-}" ] && exit 0

doc=$here/docs/benchmarks.md
begin='<!-- local-bench:begin -->'
end='<!-- local-bench:end -->'
section=$(mktemp)
{
    echo "$begin"
    echo "## Local sandboxes"
    echo
    echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) with \`tests/bench/local/run.sh${*:+ $*}\` (defaults:"
    echo "\`-n 200 -k 50 -m 1000\`; Release build, no sanitizers; \`bench_local\` runs every mode"
    echo "round-robin in one process, so load from other work on the machine hits every mode alike:"
    echo "compare the ratios more than the absolute times)."
    echo
    cat "$out"
    echo
    echo "Goals (issue 3): create + first exec p50 no slower than the \`unshare\` CLI; exec in a live"
    echo "sandbox within 2x of bare fork+exec; under 1 MiB of host memory per idle sandbox; 1,000 live"
    echo "sandboxes with create p99 under 20 ms."
    echo
    cat "$here/tests/bench/local/history.md"
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
    { [ -f "$doc" ] || printf '# Benchmarks\n\n'; cat "$section"; } >>"$doc"
fi
rm -f "$section"
echo "wrote $doc"
