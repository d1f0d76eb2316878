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

/* The uid the probe maps the namespace's root to: the first sandbox slot's base. */
#define DOCTOR_PROBE_UID_BASE 100000
#define DOCTOR_PROBE_UID_COUNT 65536
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

static int write_map(pid_t pid, const char *which, char *why, size_t why_size)
{
    char path[64], line[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
    int len = snprintf(line, sizeof(line), "0 %d %d\n", DOCTOR_PROBE_UID_BASE,
                       DOCTOR_PROBE_UID_COUNT);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    int ok = fd >= 0 && write(fd, line, (size_t)len) == len;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (!ok)
        snprintf(why, why_size, "writing %s: %s", which, strerror(e));
    return ok ? 0 : -1;
}

/* Child: enter a user namespace, tell the parent, wait for its maps, exit. */
static void map_probe_child(int ready_w, int go_r)
{
    char b = 0;
    if (unshare(CLONE_NEWUSER) < 0)
        _exit(1);
    if (write(ready_w, &b, 1) != 1 || read(go_r, &b, 1) != 1)
        _exit(2);
    /* Still host uid 0 (unmapped) until it switches to the namespace's root = host 100000. */
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        _exit(3);
    _exit(getuid() == 0 && getgid() == 0 ? 0 : 4);
}

/* As root: map a namespace's root to host uid 100000 the way sandboxes are mapped. */
static int probe_uid_map(char *why, size_t why_size)
{
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)
        return snprintf(why, why_size, "pipe: %s", strerror(errno)), -1;
    pid_t pid = fork();
    if (pid == 0)
        map_probe_child(ready[1], go[0]);
    close(ready[1]);
    close(go[0]);
    char b = 0;
    int rc = -1;
    if (pid > 0 && read(ready[0], &b, 1) == 1)
        rc = write_map(pid, "uid_map", why, why_size) == 0 &&
                     write_map(pid, "gid_map", why, why_size) == 0
                 ? 0
                 : -1;
    else
        snprintf(why, why_size, "the probe child could not enter a user namespace");
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

/* Non-root: newuidmap/newgidmap and a /etc/subuid range. */
static bool subid_has_range(const char *file, const char *user, unsigned uid)
{
    FILE *f = fopen(file, "re");
    if (f == NULL)
        return false;
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        char name[128];
        unsigned long start, count;
        if (sscanf(line, "%127[^:]:%lu:%lu", name, &start, &count) != 3)
            continue;
        char num[32];
        snprintf(num, sizeof(num), "%u", uid);
        found = (strcmp(name, user) == 0 || strcmp(name, num) == 0) &&
                count >= DOCTOR_PROBE_UID_COUNT;
    }
    fclose(f);
    return found;
}

static void check_uid_mapping(struct doctor_report *r)
{
    struct doctor_check *c = doctor_add(r, "uid_mapping", true);
    if (geteuid() == 0) {
        char why[256] = "";
        if (probe_uid_map(why, sizeof(why)) == 0)
            doctor_pass(c, "sandbox root maps to host uid %d+ (never host root)",
                        DOCTOR_PROBE_UID_BASE);
        else
            doctor_fail(c, "fix namespaces_probe first", "mapping 0 -> %d failed: %s",
                        DOCTOR_PROBE_UID_BASE, why);
        return;
    }
    const char *user = getenv("USER") ? getenv("USER") : "";
    bool tools = access("/usr/bin/newuidmap", X_OK) == 0 && access("/usr/bin/newgidmap", X_OK) == 0;
    bool ranges = subid_has_range("/etc/subuid", user, geteuid()) &&
                  subid_has_range("/etc/subgid", user, geteuid());
    if (tools && ranges) {
        doctor_pass(c, "newuidmap/newgidmap present and %s has subordinate id ranges", user);
        return;
    }
    doctor_fail(c,
                "sudo apt-get install uidmap && sudo usermod --add-subuids 100000-1065535 "
                "--add-subgids 100000-1065535 \"$USER\"",
                "running as uid %u: sandboxes need %s", (unsigned)geteuid(),
                !tools ? "newuidmap/newgidmap (package uidmap)"
                       : "subordinate uid/gid ranges in /etc/subuid and /etc/subgid");
}

void doctor_check_userns(struct doctor_report *r)
{
    check_max_userns(r);
    check_userns_clone_knob(r);
    check_apparmor_userns(r);
    check_userns_probe(r);
    check_uid_mapping(r);
}
