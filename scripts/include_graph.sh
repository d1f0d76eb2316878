#!/bin/sh
# The include graph between source folders: how many #include "..." lines of the files in one
# folder name a header of another (tests excluded; a folder's includes of itself are left out).
#   scripts/include_graph.sh [SOURCE_DIR]     prints "  COUNT FROM -> TO", sorted by FROM
# docs/architecture.md ("Include graph") shows its output.
cd "${1:-.}" || exit 2
git ls-files '*.c' '*.h' | grep -v '^tests/' | while read -r f; do
    from=$(dirname "$f")
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
        case "$inc" in */*) to=$(dirname "$inc");; *) to=$from;; esac
        [ "$from" = "$to" ] || echo "$from -> $to"
    done
done | sort | uniq -c | sort -k2
