#!/bin/sh
# The layering docs/architecture.md describes, checked on the sources and on a linked test:
#  - mcp/ (protocol, tools, transports, OpenSandbox API) includes no concrete backend's header:
#    only the backend layer's own (backend/*.h); backends are named in cli/ alone;
#  - backend/ includes nothing of cli/ and, of mcp/, only the leaf libraries (lib/base, lib/store);
#  - a protocol unit test (test_session, linked with mcpbox_core) has neither backend in it;
#  - the build names what always exists without guards: no if(TARGET|EXISTS|DEFINED ...) in a
#    CMakeLists.txt and no MCPBOX_HAVE_* in the sources (option() is for real choices);
#  - backend_set_add checks every slot of struct backend_ops (ops_complete in backend/backend.c),
#    which is what lets callers call any operation without testing it for NULL.
#   layering.sh SOURCE_DIR PROTOCOL_TEST_BINARY
set -u
src=$1 bin=$2
bad=0
includes() { # folder -> "file: included path" for every #include "..." under it
    (cd "$src" && grep -rHo '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$1" \
        --include='*.c' --include='*.h' | sed 's/:.*"\(.*\)"$/: \1/')
}
check() { # what, lines
    if [ -n "$2" ]; then
        echo "FAIL: $1:"; echo "$2" | sed 's/^/  /'; bad=1
    fi
}
check "mcp/ includes a concrete backend's header (name backends in cli/backends.c only)" \
    "$(includes mcp | grep ': backend/[^/]*/')"
check "backend/ includes cli/ or mcp/ beyond lib/base and lib/store" \
    "$(includes backend | grep -E ': (cli/|mcp/)' | grep -vE ': mcp/(base|store)/')"
check "mcp/ includes cli/" "$(includes mcp | grep ': cli/')"
check "guards around parts that always exist (name the target or file directly)" \
    "$(cd "$src" && grep -rnE --include=CMakeLists.txt 'if *\( *(NOT +)?(TARGET|EXISTS|DEFINED) ' \
        cli mcp backend tests CMakeLists.txt)"
check "MCPBOX_HAVE_* switches (every part is always built)" \
    "$(cd "$src" && grep -rn --include='*.[ch]' --include=CMakeLists.txt 'MCPBOX_HAVE_' cli mcp backend tests)"
slots=$(sed -n '/^struct backend_ops {/,/^};/p' "$src/backend/backend.h" |
        sed -n -e 's/.*(\*\([a-z_]*\))(.*/\1/p' -e 's/^ *[a-z_]*_fn \*\([a-z_]*\);.*/\1/p')
checked=$(sed -n '/^static bool ops_complete/,/^}/p' "$src/backend/backend.c")
missing=$(for s in $slots; do echo "$checked" | grep -q "o->$s\b" || echo "$s"; done)
[ -n "$slots" ] || { echo "FAIL: no slots found in struct backend_ops"; exit 1; }
check "struct backend_ops slots that ops_complete (backend/backend.c) does not check" "$missing"
syms=$(nm "$bin" 2>/dev/null | grep -E ' T (local_backend_new|opensandbox_backend_new)$')
[ -n "$(nm "$bin" 2>/dev/null | head -1)" ] || { echo "FAIL: cannot read symbols of $bin"; exit 1; }
check "$(basename "$bin") (protocol core only) links a backend" "$syms"
[ $bad = 0 ] && echo "ok: mcp/ names no backend, backend/ stays below mcp/, the core links none, $(echo $slots | wc -w) slots checked"
exit $bad
