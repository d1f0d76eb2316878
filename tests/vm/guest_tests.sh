#!/bin/bash
# Runs inside the test guest (see initramfs_init.sh), on the host's own files, as root, in a
# cgroup layout that is pure v2 or pure v1. Prints TAP. Environment (from the plan file that
# vm_run.sh writes): MCPBOX_VM_LAYOUT (v2|v1), MCPBOX_BIN, and MCPBOX_VM_BINARIES: lines of
# "name timeout_s path [args...]", the project's own local-backend test programs to run here.
set -u
layout=$MCPBOX_VM_LAYOUT
mcpbox=$MCPBOX_BIN
state=/tmp/vm-state
cg=/sys/fs/cgroup
n=0
failed=0

comment() { sed 's/^/#   /'; }
# check NAME FUNCTION: one TAP line per check; the function's output becomes TAP comments.
check() {
    n=$((n + 1))
    local rc t0=$SECONDS
    check_failed=0
    "$2" > /tmp/check.out 2>&1 # not in a subshell: a check may set ID for the next ones
    rc=$?
    comment < /tmp/check.out
    if [ $rc -eq 0 ] && [ $check_failed -eq 0 ]; then
        echo "ok $n - $layout: $1 # $((SECONDS - t0)) s"
    else
        echo "not ok $n - $layout: $1 # $((SECONDS - t0)) s"
        failed=$((failed + 1))
    fi
}
# Any fail marks the check failed, whatever the function returns after it.
fail() { echo "FAIL: $*"; check_failed=1; return 1; }
sbx() { "$mcpbox" sandbox --state-dir "$state" "$@"; }
# The sandbox's cgroup directories, one per hierarchy (v2: one), found by its id.
cg_dirs() { find $cg -mindepth 2 -maxdepth 7 -type d -name "$1" 2>/dev/null; }
cg_dir() { cg_dirs "$1" | grep -E "$2" | head -1; }
value() { cat "$1" 2>/dev/null || echo "(unreadable $1)"; }
expect_eq() { [ "$(value "$1")" = "$2" ] || fail "$1 is '$(value "$1")', expected '$2'"; }
counter() { awk -v k="$2" '$1 == k { print $2 }' "$1" 2>/dev/null; }

check_layout() {
    local m
    m=$(awk '$9 ~ /^cgroup2?$/ { print $9, $5 }' /proc/self/mountinfo)
    printf '%s\n' "$m"
    if [ "$layout" = v2 ]; then
        [ "$(printf '%s\n' "$m")" = "cgroup2 $cg" ] || fail "not a pure v2 mount table"
    else
        ! grep -q '^cgroup2' <<< "$m" || fail "a cgroup2 mount exists"
        grep -q "^cgroup $cg/memory" <<< "$m" || fail "no v1 memory mount"
    fi
    grep -E '^[0-9]+:' /proc/self/cgroup | head -3
}

check_doctor() {
    local out rc
    out=$("$mcpbox" doctor 2>&1)
    rc=$?
    printf '%s\n' "$out"
    [ $rc -eq 0 ] || fail "mcpbox doctor exited $rc"
    grep -E "^cgroup_layout +ok +$layout:" <<< "$out" >/dev/null ||
        fail "cgroup_layout does not report '$layout' as ok"
    grep -E "^cgroup_delegation +ok" <<< "$out" >/dev/null || fail "cgroup_delegation not ok"
    grep -E "^local_backend +ok" <<< "$out" >/dev/null || fail "the backend's own probe failed"
    if [ "$layout" = v1 ] &&
        grep -A1 '^ *cgroup_attach_speed (optional):' <<< "$out" | grep -q 'remount,favordynmods'; then
        fail "doctor proposes favordynmods, which a v1 cgroup remount refuses"
    fi
}

ID=
create_limited() {
    ID=$(sbx create -q --memory 64M --pids 24 --cpu 0.5) || fail "create failed"
    echo "sandbox $ID"
    cg_dirs "$ID"
}

check_limits_written() {
    create_limited || return 1
    if [ "$layout" = v2 ]; then
        local d=$cg/mcpbox/$ID
        expect_eq $d/memory.max 67108864 && expect_eq $d/pids.max 24 &&
            expect_eq $d/cpu.max "50000 100000" && expect_eq $d/memory.swap.max 0 || return 1
        [ -n "$(cat $d/cgroup.procs)" ] || fail "no process in $d"
    else
        expect_eq "$(cg_dir "$ID" /memory/)/memory.limit_in_bytes" 67108864 &&
            expect_eq "$(cg_dir "$ID" /pids/)/pids.max" 24 &&
            expect_eq "$(cg_dir "$ID" /cpu,cpuacct/)/cpu.cfs_quota_us" 50000 || return 1
        [ -n "$(cat "$(cg_dir "$ID" /pids/)/cgroup.procs")" ] || fail "no process in the pids cgroup"
    fi
}

check_exec() {
    local out
    out=$(sbx exec "$ID" -- 'echo hello; id -u; cat /proc/self/cgroup') || fail "exec failed"
    printf '%s\n' "$out"
    [ "$(head -1 <<< "$out")" = hello ] || fail "no hello"
}

check_cpu_throttled() {
    local stat
    sbx exec "$ID" -- 'timeout 3 sh -c "while :; do :; done"; true' || fail "busy loop"
    if [ "$layout" = v2 ]; then stat=$cg/mcpbox/$ID/cpu.stat; else stat=$(cg_dir "$ID" /cpu,cpuacct/)/cpu.stat; fi
    cat "$stat"
    [ "$(counter "$stat" nr_throttled)" -gt 0 ] || fail "no throttled period at cpu 0.5"
}

# get's usage comes from the layout's own files (v2 memory.current/cpu.stat; v1 usage_in_bytes
# and cpuacct.usage, which a systemd v1 host co-mounts with cpu).
check_usage() {
    sbx get "$ID" -o json > /tmp/get.json || fail "get failed" || return 1
    python3 - /tmp/get.json <<'PY' || fail "usage is incomplete"
import json, sys
u = json.load(open(sys.argv[1]))["usage"]
print(u)
ok = u["memory_bytes"] > 0 and u["pids"] >= 1 and u["cpu_throttled_periods"] > 0
ok = ok and isinstance(u["cpu_seconds"], float) and u["cpu_seconds"] > 0.5
sys.exit(0 if ok else 1)
PY
}

check_oom_reported() {
    local rc events
    sbx exec "$ID" -- 'dd if=/dev/zero of=/dev/null bs=300M count=1'
    rc=$?
    [ $rc -eq 137 ] || fail "memory hog exited $rc, expected 137 (OOM-killed)" || return 1
    if [ "$layout" = v2 ]; then events=$cg/mcpbox/$ID/memory.events; else
        events=$(cg_dir "$ID" /memory/)/memory.oom_control; fi
    cat "$events"
    [ "$(counter "$events" oom_kill)" -ge 1 ] || fail "no oom_kill counted in $events"
    sbx logs "$ID" 2>&1 | tail -5
    sbx logs "$ID" 2>&1 | grep -qi oom || fail "the sandbox's logs do not report the OOM kill"
}

check_pids_limit() {
    local out events
    out=$(sbx exec "$ID" -- 'for i in $(seq 1 32); do sleep 1 & done 2>&1 | grep -ci "fork\|resource"; wait')
    echo "failed forks: $out"
    [ "${out:-0}" -gt 0 ] || fail "32 forks under pids.max=24 all succeeded"
    if [ "$layout" = v2 ]; then events=$cg/mcpbox/$ID/pids.events; else
        events=$(cg_dir "$ID" /pids/)/pids.events; fi
    cat "$events"
    [ "$(counter "$events" max)" -ge 1 ] || fail "pids.events counted no refusal"
}

check_pause_resume() {
    sbx pause "$ID" || fail "pause failed" || return 1
    if [ "$layout" = v2 ]; then
        grep -q '^frozen 1' $cg/mcpbox/$ID/cgroup.events || fail "cgroup.events not frozen" || return 1
    else
        expect_eq "$(cg_dir "$ID" /freezer/)/freezer.state" FROZEN || return 1
    fi
    ! sbx exec "$ID" -- true 2>/dev/null || fail "exec ran in a paused sandbox" || return 1
    sbx resume "$ID" || fail "resume failed" || return 1
    [ "$(sbx exec "$ID" -- echo back)" = back ] || fail "no exec after resume"
}

check_rm_kills_and_cleans() {
    sbx exec "$ID" -- 'setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo started' || return 1
    local dirs pids
    dirs=$(cg_dirs "$ID")
    pids=$(cat $(sed 's|$|/cgroup.procs|' <<< "$dirs") | sort -u)
    echo "members before rm:" $pids
    [ "$(wc -w <<< "$pids")" -ge 2 ] || fail "expected the init and the sleeper"
    sbx rm "$ID" || fail "rm failed" || return 1
    for p in $pids; do
        [ ! -d /proc/$p ] || fail "process $p survived rm" || return 1
    done
    [ -z "$(cg_dirs "$ID")" ] || fail "cgroups left: $(cg_dirs "$ID")"
}

# v1 cannot kill frozen tasks (they stay in the kernel until thawed); v2's cgroup.kill can.
check_rm_paused() {
    local id dirs pids
    id=$(sbx create -q) || fail "create failed" || return 1
    sbx exec "$id" -- 'setsid sleep 600 > /dev/null 2>&1 < /dev/null &' || fail "exec failed"
    dirs=$(cg_dirs "$id")
    pids=$(cat $(sed 's|$|/cgroup.procs|' <<< "$dirs") | sort -u)
    echo "$id members:" $pids
    sbx pause "$id" || fail "pause failed"
    sbx rm "$id" || fail "rm of a paused sandbox failed"
    for p in $pids; do
        [ ! -d /proc/$p ] || fail "process $p survived rm ($(cat /proc/$p/status | grep State))"
    done
    [ -z "$(cg_dirs "$id")" ] || fail "cgroups left: $(cg_dirs "$id")"
}

check_binary() { # name timeout path args...
    local name=$1 t=$2
    shift 2
    timeout -k 5 "$t" "$@"
    local rc=$?
    [ $rc -eq 0 ] || fail "$name exited $rc (77 = skipped: the layout was not exercised)"
}

# Processes mcpbox or a sandbox may leave: an mcpbox or mcpbox-agent program (by its argv[0],
# not by a path that merely contains "mcpbox": this script's own shells run
# .../mcpbox/tests/vm/guest_tests.sh in a clone named mcpbox) and the sleepers the checks start.
leftover_processes() {
    ps -eo pid=,args= | awk '{ n = split($2, p, "/")
        if (p[n] ~ /^mcpbox/ || (p[n] == "sleep" && $3 == "600")) print }'
}

# The finder itself: it must see a stray sandbox program and sleeper, and not a shell running
# this script from a directory called mcpbox (issue #18.10: it counted those).
check_leftover_finder() {
    local dir=/tmp/leftover-finder/mcpbox/tests/vm
    mkdir -p $dir && echo 'sleep 300' > $dir/guest_tests.sh
    bash $dir/guest_tests.sh &
    local shell=$!
    (exec -a mcpbox-agent sleep 300) &
    local agent=$!
    sleep 600 < /dev/null > /dev/null 2>&1 &
    local sleeper=$!
    sleep 0.2
    local found
    found=$(leftover_processes)
    pkill -P $shell sleep
    kill $shell $agent $sleeper 2>/dev/null
    wait $shell $agent $sleeper 2>/dev/null
    rm -rf /tmp/leftover-finder
    grep -q "^ *$agent " <<< "$found" || fail "a stray mcpbox-agent was not found: $found"
    grep -q "^ *$sleeper " <<< "$found" || fail "a stray sleep 600 was not found: $found"
    ! grep -q "^ *$shell " <<< "$found" || fail "this script's own shell was counted: $found"
}

check_no_leftovers() {
    local left
    left=$(find $cg -mindepth 2 -maxdepth 7 -type d -name 'sbx-*' 2>/dev/null)
    [ -z "$left" ] || fail "sandbox cgroups left behind: $left"
    left=$(leftover_processes)
    [ -z "$left" ] || fail "processes left behind: $left"
}

# ---- rootless on pure v2 (issue #11): an ordinary user with subordinate ids, in a cgroup subtree
# delegated the way systemd delegates a `systemd-run --user --scope -p Delegate=yes` scope: root
# makes the scope (controllers enabled in its parent), chowns it and the files delegation needs,
# and starts the user's process in it. The user then runs mcpbox as itself.
ruser=mcpbox-rootless-vm
ruid=1500
rscope=$cg/user.slice/mcpbox-rootless-vm.scope
rhome=/tmp/$ruser
# The host's /etc is read-only here (9p): tmpfs copies with the user added are bound over it.
rootless_user() {
    local f
    for f in passwd group subuid subgid; do
        { cat /etc/$f 2>/dev/null; } > /tmp/etc-$f
        [ -e /etc/$f ] || { fail "/etc/$f missing"; return 1; }
        mount --bind /tmp/etc-$f /etc/$f || { fail "bind /etc/$f"; return 1; }
    done
    echo "$ruser:x:$ruid:$ruid::$rhome:/bin/sh" >> /etc/passwd
    echo "$ruser:x:$ruid:" >> /etc/group
    echo "$ruser:300000:65536" >> /etc/subuid
    echo "$ruser:300000:65536" >> /etc/subgid
    # The build tree may be where the user cannot go (a clone under /root): copies in its home.
    mkdir -p $rhome/bin && cp "$mcpbox" $rhome/bin/mcpbox || { fail "copy mcpbox"; return 1; }
    [ -z "${MCPBOX_VM_LIMITS_REPORT:-}" ] || cp "$MCPBOX_VM_LIMITS_REPORT" $rhome/bin/
    chown -R $ruid:$ruid $rhome
    mkdir -p $cg/user.slice $rscope
    echo "+cpu +memory +pids" > $cg/user.slice/cgroup.subtree_control || fail "user.slice controllers"
    chown $ruid:$ruid $rscope $rscope/cgroup.procs $rscope/cgroup.subtree_control $rscope/cgroup.threads
    id $ruser
}
# as_user CMD...: CMD as the user, in the delegated scope (the first time: in the scope itself,
# so mcpbox must move into its leaf; afterwards in that leaf, as later processes of a session
# would be; root does the move, as systemd would).
as_user() {
    (
        if [ -d $rscope/mcpbox-leaf ]; then
            echo $BASHPID > $rscope/mcpbox-leaf/cgroup.procs
        else
            echo $BASHPID > $rscope/cgroup.procs
        fi
        exec setpriv --reuid=$ruid --regid=$ruid --clear-groups env -i HOME=$rhome USER=$ruser \
            PATH=/usr/local/bin:/usr/bin:/bin "$@"
    )
}
rmcpbox=$rhome/bin/mcpbox
rsbx() { as_user $rmcpbox sandbox "$@"; }

check_rootless_doctor() {
    local out rc
    out=$(as_user $rmcpbox doctor 2>&1)
    rc=$?
    printf '%s\n' "$out"
    [ $rc -eq 0 ] || fail "mcpbox doctor as $ruser exited $rc"
    grep -E "^uid_mapping +ok +sandbox root maps to subordinate uid 300000" <<< "$out" >/dev/null ||
        fail "uid_mapping does not report the subordinate range"
    grep -E "^cgroup_delegation +ok" <<< "$out" >/dev/null || fail "cgroup_delegation not ok"
    [ ! -d $rscope/mcpbox-leaf ] || fail "mcpbox doctor changed the cgroups (made a leaf)"
}

RID=
check_rootless_sandbox() {
    RID=$(rsbx create -q --memory 64M --pids 24 --cpu 0.5) || fail "create as $ruser failed" || return 1
    local d=$rscope/$RID
    echo "sandbox $RID in $d"
    [ -d $rscope/mcpbox-leaf ] || fail "mcpbox did not move into a leaf of its delegated scope"
    cat $rscope/cgroup.subtree_control
    grep -q memory $rscope/cgroup.subtree_control || fail "memory not enabled in the scope"
    expect_eq $d/memory.max 67108864 && expect_eq $d/pids.max 24 && expect_eq $d/cpu.max "50000 100000"
    [ "$(stat -c %u $d)" = $ruid ] || fail "$d is not owned by $ruser"
    local map
    map=$(rsbx exec "$RID" -- cat /proc/self/uid_map)
    echo "uid_map: $map"
    [ "$(echo $map)" = "0 300000 65536" ] || fail "sandbox root is not the subordinate range"
    rsbx exec "$RID" -- 'dd if=/dev/zero of=/dev/null bs=300M count=1'
    [ $? -eq 137 ] || fail "memory hog not OOM-killed as $ruser"
    [ "$(counter $d/memory.events oom_kill)" -ge 1 ] || fail "no oom_kill counted"
    rsbx pause "$RID" || fail "pause as $ruser failed" || return 1
    grep -q '^frozen 1' $d/cgroup.events || fail "not frozen"
    rsbx resume "$RID" || fail "resume as $ruser failed"
    [ "$(rsbx exec "$RID" -- echo back)" = back ] || fail "no exec after resume"
    rsbx rm "$RID" || fail "rm as $ruser failed"
    [ ! -d $d ] || fail "$d left behind"
}

check_rootless_limits_report() {
    [ -n "${MCPBOX_VM_LIMITS_REPORT:-}" ] || { echo "no test_limits_report given"; return 0; }
    as_user timeout -k 5 120 $rhome/bin/$(basename "$MCPBOX_VM_LIMITS_REPORT") ||
        fail "test_limits_report as $ruser failed"
}

# A user server started outside any delegated cgroup (here: the test service's cgroup, root's)
# re-executes itself through systemd-run --user --scope -p Delegate=yes (a stand-in that records
# its arguments and runs the command, since this guest has no systemd).
check_rootless_scope_reexec() {
    local fake=$rhome/bin/systemd-run rec=$rhome/systemd-run.args
    printf '#!/bin/sh\necho "$*" >> %s\nwhile [ "$1" != -- ]; do shift; done; shift\nexec "$@"\n' \
        "$rec" > $fake
    chmod 755 $fake && chown $ruid:$ruid $fake
    rm -f $rec
    setpriv --reuid=$ruid --regid=$ruid --clear-groups env -i HOME=$rhome USER=$ruser \
        PATH=/usr/bin:/bin MCPBOX_SYSTEMD_RUN=$fake $rmcpbox serve < /dev/null
    cat $rec 2>/dev/null
    grep -q -- "--user --scope -p Delegate=yes --quiet -- /bin/true" $rec 2>/dev/null ||
        fail "no probe of the user's systemd"
    grep -q -- "--user --scope -p Delegate=yes --quiet -- $rmcpbox serve" $rec 2>/dev/null ||
        fail "mcpbox serve did not re-execute itself in a delegated scope"
    [ "$(grep -c . $rec 2>/dev/null)" = 2 ] || fail "re-executed more than once"
}

rootless_checks() {
    check "rootless: a user with subordinate ids and a delegated scope" rootless_user
    check "rootless: mcpbox doctor as the user has no FAIL and changes nothing" check_rootless_doctor
    check "rootless: create moves mcpbox into a leaf; limits, identity, OOM, pause, rm" check_rootless_sandbox
    check "rootless: get_sandbox reports what holds (test_limits_report)" check_rootless_limits_report
    check "rootless: serve outside a delegated cgroup re-execs in a systemd scope" check_rootless_scope_reexec
}

mkdir -p "$state"
echo "# guest kernel $(uname -r), layout $layout, cgroup $(grep -E '^0::|memory' /proc/self/cgroup | head -1)"
check "cgroup mounts are pure $layout" check_layout
check "mcpbox doctor passes and names the layout" check_doctor
check "create writes memory, pids and cpu limits" check_limits_written
[ -n "$ID" ] || { echo "Bail out! no sandbox"; exit 1; }
check "exec in the sandbox" check_exec
check "cpu limit throttles a busy loop" check_cpu_throttled
check "get reports usage from the cgroup files" check_usage
check "memory hog is OOM-killed, counted and reported" check_oom_reported
check "pids limit refuses forks and counts them" check_pids_limit
check "pause freezes, resume thaws" check_pause_resume
check "rm kills every member and removes the cgroups" check_rm_kills_and_cleans
check "rm of a paused sandbox kills and removes it" check_rm_paused
while read -r name t path args; do
    [ -n "$name" ] || continue
    check_one() { check_binary "$name" "$t" "$path" $args; }
    check "$name (the project's test program, unchanged)" check_one
done <<< "${MCPBOX_VM_BINARIES:-}"
[ "$layout" = v2 ] && rootless_checks
check "the leftover finder sees strays, not this script" check_leftover_finder
check "no cgroup or process left behind" check_no_leftovers
echo "1..$n"
exit $((failed > 0))
