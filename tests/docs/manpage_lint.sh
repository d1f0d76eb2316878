#!/bin/sh
# docs/mcpbox.1 must format without a single groff warning.
# usage: manpage_lint.sh <mcpbox.1> [VERSION]   (the .TH line must name this version)
set -u
command -v groff >/dev/null 2>&1 || { echo "SKIP: groff not installed"; exit 77; }
out=$(groff -man -ww -z -Tutf8 "$1" 2>&1)
if [ -n "$out" ]; then echo "FAIL: groff warnings:"; echo "$out"; exit 1; fi
grep -q '^\.TH MCPBOX 1 ' "$1" || { echo "FAIL: no .TH MCPBOX 1 header"; exit 1; }
if [ -n "${2:-}" ] && ! grep -q "^\.TH MCPBOX 1 .*\"mcpbox $2\"" "$1"; then
    echo "FAIL: the .TH line does not say mcpbox $2 (the project's version)"; exit 1
fi
for sec in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS ENVIRONMENT FILES "EXIT STATUS" EXAMPLES "SEE ALSO"; do
    grep -q "^\.SH \"*$sec\"*\$" "$1" || { echo "FAIL: section $sec missing"; exit 1; }
done
echo ok
