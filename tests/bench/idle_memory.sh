#!/bin/sh
# Idle memory of `mcpbox serve`: stdio (stdin held open, no request yet) and --http 127.0.0.1:0.
# Each run starts a fresh server on a fresh state directory, waits SETTLE seconds, reads VmRSS,
# RssAnon, RssFile (/proc/PID/status), Pss and Private (smaps_rollup); prints the median of RUNS
# runs in KiB. SMAPS=N also lists the N mappings with the most resident pages (last run).
#   tests/bench/idle_memory.sh build/mcpbox [serve options...]
set -eu
BIN=${1:?usage: idle_memory.sh path/to/mcpbox [serve options...]}
shift
RUNS=${RUNS:-5}
SETTLE=${SETTLE:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# one line "VmRSS RssAnon RssFile Pss Private" for process $1 (Private: pages no other process
# maps, Private_Clean + Private_Dirty; Pss depends on what else runs on the machine)
sample() {
    awk '$1 == "VmRSS:" || $1 == "RssAnon:" || $1 == "RssFile:" { v[$1] = $2 }
         END { printf "%s %s %s ", v["VmRSS:"], v["RssAnon:"], v["RssFile:"] }' "/proc/$1/status"
    awk '$1 == "Pss:" { pss = $2 } $1 == "Private_Clean:" || $1 == "Private_Dirty:" { priv += $2 }
         END { print pss, priv }' "/proc/$1/smaps_rollup"
}

top_mappings() {
    awk '/^[0-9a-f]+-[0-9a-f]+ / { name = ($6 == "") ? "[anon]" : $6 }
         $1 == "Rss:" { rss[name] += $2 }
         END { for (n in rss) if (rss[n]) print "    " rss[n] " KiB " n }' "/proc/$1/smaps" |
        sort -k1,1nr | head -n "$SMAPS"
}

# run_once MODE RUN [serve options...]: start a server, sample it, stop it
run_once() {
    mode=$1 run=$2
    shift 2
    dir="$TMP/state-$mode-$run"
    if [ "$mode" = stdio ]; then
        rm -f "$TMP/in"
        mkfifo "$TMP/in"
        "$BIN" serve --state-dir "$dir" "$@" <"$TMP/in" >/dev/null 2>"$TMP/err" &
        pid=$!
        exec 3>"$TMP/in" # stdin stays open: the server idles waiting for a request
    else
        "$BIN" serve --state-dir "$dir" --http 127.0.0.1:0 "$@" </dev/null >/dev/null 2>"$TMP/err" &
        pid=$!
    fi
    sleep "$SETTLE"
    kill -0 "$pid" 2>/dev/null || { cat "$TMP/err" >&2; echo "mcpbox serve exited" >&2; exit 1; }
    sample "$pid" >>"$TMP/$mode.samples"
    if [ "$run" = "$RUNS" ] && [ -n "${SMAPS:-}" ]; then top_mappings "$pid" >"$TMP/$mode.top"; fi
    if [ "$mode" = stdio ]; then exec 3>&-; else kill "$pid"; fi
    wait "$pid" 2>/dev/null || true
}

for m in stdio http; do
    i=1
    while [ "$i" -le "$RUNS" ]; do
        run_once "$m" "$i" "$@"
        i=$((i + 1))
    done
    for col in 1 2 3 4 5; do
        sort -n -k"$col","$col" "$TMP/$m.samples" | awk -v c="$col" '{ v[NR] = $c }
            END { printf "%s ", v[int((NR + 1) / 2)] }'
    done | awk -v m="$m" -v n="$RUNS" '{
        printf "%-5s VmRSS %5d KiB  RssAnon %5d KiB  RssFile %5d KiB", m, $1, $2, $3
        printf "  Pss %5d KiB  Private %5d KiB  (median of %d)\n", $4, $5, n }'
    if [ -f "$TMP/$m.top" ]; then cat "$TMP/$m.top"; fi
done
exit 0
