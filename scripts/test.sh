#!/usr/bin/env bash
# One command from a fresh Debian 12 checkout (as root) to every test: installs what is missing,
# builds mcpbox with AddressSanitizer and UndefinedBehaviorSanitizer (warnings are errors), builds
# the fuzz targets with clang, and runs the whole suite with ctest.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
scripts/install-deps.sh --test
build=${MCPBOX_TEST_BUILD:-build-test}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DMCPBOX_WERROR=ON \
      -DMCPBOX_SANITIZERS="address;undefined" -DCMAKE_C_COMPILER=clang -DMCPBOX_FUZZ=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"

# A skipped test is not a passed one: the run fails when a test skips, unless its name is on
# MCPBOX_TEST_ALLOW_SKIP (space- or comma-separated), a list for local use only, e.g. on a
# machine that cannot run the VM tests:
#   MCPBOX_TEST_ALLOW_SKIP="local_cgroup_v2_vm local_cgroup_v1_vm" scripts/test.sh
# CI's list is empty: install-deps.sh installs every test's prerequisites on our machines.
allow=" $(echo "${MCPBOX_TEST_ALLOW_SKIP:-}" | tr ',' ' ') "
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
ctest --output-on-failure -j"$(nproc)" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# ctest lists them under "The following tests did not run:" as "<n> - <name> (Skipped)".
skipped=$(sed -n 's/^[[:space:]]*[0-9][0-9]* - \(.*\) (\(Skipped\|Not Run\|Disabled\))$/\1/p' "$log")
refused=""
for t in $skipped; do
    case "$allow" in *" $t "*) ;; *) refused="$refused $t" ;; esac
done
echo "test.sh: $(echo $skipped | wc -w) skipped$([ -n "$skipped" ] && echo ": "$skipped)"
if [ -n "$refused" ]; then
    echo "test.sh: FAIL: skipped and not on MCPBOX_TEST_ALLOW_SKIP:$refused" >&2
    echo "test.sh: install what they need (scripts/install-deps.sh --test) or fix them" >&2
    [ "$rc" -ne 0 ] || rc=1
fi
exit "$rc"
