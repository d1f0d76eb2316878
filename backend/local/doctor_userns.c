/* Doctor checks: user namespaces (the knobs distributions add, and a real probe) and mapping a
 * sandbox's root to a subordinate uid range. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/doctor.h"
#include "backend/local/identity.h"

#define DOCTOR_SYSCTL_PERSIST "/etc/sysctl.d/90-mcpbox.conf"

static void check_max_userns(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "user_namespaces", true);
    char v[64];
    if (doctor_read_line("/proc/sys/user/max_user_namespaces", v, sizeof(v)) < 0) {
        doctor_fail(c, "rebuild the kernel with CONFIG_USER_NS=y (no sysctl can enable it)",
                    "/proc/sys/user/max_user_namespaces is missing: this kernel has no user "
                    "namespaces");
        return;
    }
    if (atol(v) <= 0) {
        doctor_fail(c,
                    "sudo sysctl -w user.max_user_namespaces=15000 && echo "
                    "'user.max_user_namespaces=15000' | sudo tee -a " DOCTOR_SYSCTL_PERSIST,
                    "user.max_user_namespaces=%s: user namespaces are disabled", v);
        return;
    }
    doctor_pass(c, "user.max_user_namespaces=%s", v);
}

/* Debian/Ubuntu's kernel.unprivileged_userns_clone: only a restriction for non-root callers. */
static void check_userns_clone_knob(struct doctor_report *r)
{
    bool root = geteuid() == 0;
    struct doctor_check *c = doctor_add(r, "unprivileged_userns_clone", !root);
    char v[64];
    if (doctor_read_line("/proc/sys/kernel/unprivileged_userns_clone", v, sizeof(v)) < 0) {
        doctor_pass(c, "kernel.unprivileged_userns_clone does not exist on this kernel (no "
                       "such restriction)");
        return;
    }
    if (strcmp(v, "0") == 0 && !root) {
        doctor_fail(c,
                    "sudo sysctl -w kernel.unprivileged_userns_clone=1 && echo "
                    "'kernel.unprivileged_userns_clone=1' | sudo tee -a " DOCTOR_SYSCTL_PERSIST,
                    "kernel.unprivileged_userns_clone=0: unprivileged users may not create user "
                    "namespaces");
        return;
    }
    doctor_pass(c, "kernel.unprivileged_userns_clone=%s%s", v,
                strcmp(v, "0") == 0 ? " (no effect: running as root)" : "");
}

/* Ubuntu 23.10+ (24.04 by default): AppArmor denies unprivileged user namespaces to binaries
 * without a profile granting "userns". */
static void check_apparmor_userns(struct doctor_report *r)
{
    bool root = geteuid() == 0;
    struct doctor_check *c = doctor_add(r, "apparmor_userns", !root);
    char v[64];
    if (doctor_read_line("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", v,
                         sizeof(v)) < 0) {
        doctor_pass(c, "no AppArmor user-namespace restriction on this kernel");
        return;
    }
    if (strcmp(v, "1") == 0 && !root) {
        doctor_fail(c,
                    "either give mcpbox an AppArmor profile that allows user namespaces: "
                    "printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile mcpbox "
                    "/usr/local/bin/mcpbox flags=(unconfined) {\\n  userns,\\n}\\n' | sudo tee "
                    "/etc/apparmor.d/mcpbox && sudo apparmor_parser -r /etc/apparmor.d/mcpbox "
                    "(adjust the path to `command -v mcpbox`), or lift the restriction "
                    "host-wide: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
                    "kernel.apparmor_restrict_unprivileged_userns=1 (Ubuntu 24.04 default): "
                    "AppArmor denies user namespaces to unconfined programs");
        return;
    }
    doctor_pass(c, "kernel.apparmor_restrict_unprivileged_userns=%s%s", v,
                strcmp(v, "1") == 0 ? " (no effect: running as root)" : "");
}

static int probe_unshare_all(void *arg)
{
    int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS |
                CLONE_NEWIPC | CLONE_NEWCGROUP;
    return unshare(flags) == 0 ? 0 : errno;
}

static void check_userns_probe(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "namespaces_probe", true);
    int rc = doctor_in_child(probe_unshare_all, NULL);
    if (rc == 0) {
        doctor_pass(c, "unshare(user, mount, pid, net, uts, ipc, cgroup) works");
        return;
    }
    if (rc < 0) {
        doctor_fail(c, "", "the probe child could not run (fork failed or it crashed)");
        return;
    }
    doctor_fail(c,
                "fix the failing checks above (user_namespaces, unprivileged_userns_clone, "
                "apparmor_userns); inside a container, run it with --privileged or "
                "--security-opt seccomp=unconfined,apparmor=unconfined",
                "unshare(user, mount, pid, net, uts, ipc, cgroup) failed: %s", strerror(rc));
}

/* Child: enter a user namespace, tell the parent, wait for its maps, become root inside. */
static void map_probe_child(int ready_w, int go_r)
{
    char b = 0;
    if (unshare(CLONE_NEWUSER) < 0)
        _exit(1);
    if (write(ready_w, &b, 1) != 1 || read(go_r, &b, 1) != 1)
        _exit(2);
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        _exit(3);
    _exit(getuid() == 0 && getgid() == 0 ? 0 : 4);
}

/* Maps a namespace's root the way this server's sandboxes are mapped (local_identity: a slice as
 * root, newuidmap/newgidmap with subordinate ids, or the user's own uid). */
static int probe_uid_map(const struct local_identity *id, char *why, size_t why_size)
{
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) {
        snprintf(why, why_size, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0)
        map_probe_child(ready[1], go[0]);
    close(ready[1]);
    close(go[0]);
    char b = 0;
    int rc = -1;
    struct mcp_error err = {0};
    if (pid > 0 && read(ready[0], &b, 1) == 1) {
        rc = local_identity_write_maps(id, 0, pid, &err);
        if (rc < 0)
            snprintf(why, why_size, "%s", err.msg);
    } else {
        snprintf(why, why_size, "the probe child could not enter a user namespace");
    }
    if (write(go[1], &b, 1) < 0) { /* the child may be gone already */
    }
    close(go[1]);
    close(ready[0]);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        snprintf(why, why_size, "the mapped child could not become root inside (status %d)",
                 status);
        rc = -1;
    }
    return rc;
}

/* As root: a per-sandbox slice. As a user: subordinate ids through newuidmap (ok), or only the
 * user's own uid (a weaker mode that works: WARN, naming the one root command that fixes it). */
static void check_uid_mapping(struct doctor_report *r)
{
    bool root = geteuid() == 0;
    struct doctor_check *c = doctor_add(r, "uid_mapping", true);
    struct local_identity id;
    char why[512] = "", name[128], fix[256];
    local_identity_detect(&id);
    if (probe_uid_map(&id, why, sizeof(why)) < 0) {
        doctor_fail(c, root ? "fix namespaces_probe first" : "fix namespaces_probe first; "
                    "check /etc/subuid and /etc/subgid (as root: mcpbox setup --user NAME)",
                    "mapping sandbox root to host uid %u failed: %s",
                    (unsigned)local_identity_root_uid(&id, 0), why);
        return;
    }
    if (root) {
        doctor_pass(c, "sandbox root maps to host uid %u+, a 65536-id range per sandbox (never "
                       "host root)", (unsigned)id.uid_base);
        return;
    }
    if (id.mode == LOCAL_ID_SUBID) {
        doctor_pass(c,
                    "sandbox root maps to subordinate uid %u (%u ids, newuidmap), shared by "
                    "%s's sandboxes: never host root, never your own uid",
                    (unsigned)id.uid_base, (unsigned)id.uid_count,
                    doctor_user_name(name, sizeof name));
        return;
    }
    c->required = false; /* sandboxes work: WARN, never FAIL */
    snprintf(fix, sizeof fix, "as root, once: mcpbox setup --user %s (and apt-get install uidmap)",
             doctor_user_name(name, sizeof name));
    doctor_fail(c, fix, "single uid: sandbox root is your own uid %u (weaker: a sandbox escape "
                "acts as you) because %s", (unsigned)geteuid(), id.why);
}

void doctor_check_userns(struct doctor_report *r)
{
    check_max_userns(r);
    check_userns_clone_knob(r);
    check_apparmor_userns(r);
    check_userns_probe(r);
    check_uid_mapping(r);
}
