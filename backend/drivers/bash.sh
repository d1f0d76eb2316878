# mcpbox's bash code-interpreter driver (docs/local-backend.md, "Code contexts"). Started in the
# sandbox as `bash -c "$MCPBOX_CODE_DRIVER"`, as the sandbox's user. Requests come on stdin
# ("run <len> <tag>\n" then <len> bytes of code; the tag comes back in the run's s and d frames), each run is eval'd in this shell (its variables,
# functions and directory persist), and everything goes back on the original stdout, the protocol
# channel, in frames "<kind> <len>\n<payload>" (see python.py). The code's stdout and stderr are
# pipes read line by line by two pumps that frame them; an unguessable marker written after the
# code tells each pump the run's output is complete.
unset MCPBOX_CODE_DRIVER
exec {__mcpbox_proto}>&1 {__mcpbox_req}<&0 </dev/null
__mcpbox_dir=$(mktemp -d "${TMPDIR:-/tmp}/mcpbox-bash.XXXXXX") || exit 1
mkfifo -m 600 "$__mcpbox_dir/ack" || exit 1
exec {__mcpbox_ack}<>"$__mcpbox_dir/ack"
rm -rf "$__mcpbox_dir"
__mcpbox_count=0

__mcpbox_frame() {
    local LC_ALL=C
    printf '%s %d\n%s' "$1" "${#2}" "$2" >&"$__mcpbox_proto"
}

# The whole output of the last run, for read_file when the tool's cap cut it.
__mcpbox_out="${TMPDIR:-/tmp}/mcpbox-code-$$.out"
__mcpbox_output() {
    __mcpbox_frame "$1" "$2"
    printf '%s' "$2" >>"$__mcpbox_out"
}

# Frames one stream ($1: o or e) line by line, at most 3000 bytes a frame (so that a frame is
# one atomic pipe write and the two pumps never interleave inside one).
__mcpbox_pump() {
    trap '' INT
    local LC_ALL=C line
    while true; do
        if IFS= read -r -n 3000 line; then
            [[ ${#line} -lt 3000 ]] && line+=$'\n'
        elif [[ -z $line ]]; then
            return
        fi
        if [[ $line == *"$__mcpbox_sync"$'\n' ]]; then
            line=${line%"$__mcpbox_sync"$'\n'}
            [[ -n $line ]] && __mcpbox_output "$1" "$line"
            echo >&"$__mcpbox_ack"
        elif [[ -n $line ]]; then
            __mcpbox_output "$1" "$line"
        fi
    done
}

__mcpbox_json_str() {
    local s=$1 LC_ALL=C
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\t'/\\t}
    s=${s//$'\r'/\\r}
    printf '"%s"' "${s//[$'\001'-$'\037']/?}"
}

# The code runs in a function so that an interrupt can end it (return from the trap).
__mcpbox_eval() {
    trap '__mcpbox_interrupted=1; trap "__mcpbox_interrupted=1" INT; return 130' INT
    eval "$1"
    local rc=$?
    trap '__mcpbox_interrupted=1' INT
    return $rc
}

__mcpbox_run() {
    __mcpbox_count=$((__mcpbox_count + 1))
    __mcpbox_sync="mcpbox-sync-${SRANDOM:-$RANDOM}$RANDOM$RANDOM$RANDOM$$"
    local rc=0 status=ok
    : >"$__mcpbox_out"
    {
        __mcpbox_eval "$1"
        rc=$?
        printf '%s\n' "$__mcpbox_sync"
        printf '%s\n' "$__mcpbox_sync" >&2
    } > >(__mcpbox_pump o) 2> >(__mcpbox_pump e)
    local ack
    read -r -t 5 -u "$__mcpbox_ack" ack
    read -r -t 5 -u "$__mcpbox_ack" ack
    if [[ $rc -eq 130 && -n $__mcpbox_interrupted ]]; then
        status=interrupted
        __mcpbox_frame x '{"name":"KeyboardInterrupt","value":"interrupted","traceback":[]}'
    elif [[ $rc -ne 0 ]]; then
        status=error
        __mcpbox_frame x "{\"name\":\"ExitStatus\",\"value\":\"exit status $rc\",\"traceback\":[]}"
    fi
    __mcpbox_interrupted=
    __mcpbox_frame d "{\"count\":$__mcpbox_count,\"status\":\"$status\",\"output_file\":$__mcpbox_out_json,\"tag\":\"$__mcpbox_tag\"}"
}

trap '__mcpbox_interrupted=1' INT
(umask 077 && : >"$__mcpbox_out")
__mcpbox_out_json=$(__mcpbox_json_str "$__mcpbox_out")
__mcpbox_frame h "{\"language\":\"bash\",\"version\":$(__mcpbox_json_str "$BASH_VERSION"),\"pid\":$$}"
while true; do
    __mcpbox_interrupted=
    LC_ALL=C IFS=' ' read -r -u "$__mcpbox_req" __mcpbox_verb __mcpbox_len __mcpbox_tag || exit 0
    [[ $__mcpbox_verb == run && $__mcpbox_len =~ ^[0-9]+$ && $__mcpbox_tag =~ ^[0-9a-z]*$ ]] || exit 2
    __mcpbox_frame s "{\"tag\":\"$__mcpbox_tag\"}"
    __mcpbox_code=
    if [[ $__mcpbox_len -gt 0 ]]; then
        LC_ALL=C IFS= read -r -d '' -N "$__mcpbox_len" -u "$__mcpbox_req" __mcpbox_code || true
    fi
    __mcpbox_run "$__mcpbox_code"
done
