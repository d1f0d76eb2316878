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
ctest --output-on-failure -j"$(nproc)" "$@"
