/* Doctor checks: cgroup layout (v1, hybrid, v2), whether mcpbox may create cgroups where it
 * runs (delegation), and whether moving a process into a cgroup is slow on this host. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/doctor.h"

#define CG_MOUNTS_MAX 32
#define CG_PATH_MAX 512
#define CG_DELEGATE_FIX                                                                           \
    "sudo mkdir -p /etc/systemd/system/user@.service.d && printf "                               \
    "'[Service]\\nDelegate=cpu cpuset io memory pids\\n' | sudo tee "                            \
    "/etc/systemd/system/user@.service.d/delegate.conf && sudo systemctl daemon-reload, then "    \
    "run mcpbox inside a delegated scope: systemd-run --user --scope -p Delegate=yes mcpbox ..."

struct cg_mount {
    char dir[CG_PATH_MAX];
    char opts[256]; /* super options: "rw,memory" for v1 */
    bool v2;
};

struct cg_layout {
    struct cg_mount m[CG_MOUNTS_MAX];
    size_t n;
    const struct cg_mount *v2;     /* the cgroup2 mount, if any */
    const struct cg_mount *memory; /* where the memory controller is (v1 mount or v2) */
    const struct cg_mount *pids;
    const struct cg_mount *cpu;
    bool v1_any;
};

static bool opts_have(const char *opts, const char *word)
{
    size_t len = strlen(word);
    for (const char *p = opts; (p = strstr(p, word)) != NULL; p += len) {
        bool start = p == opts || p[-1] == ',';
        bool end = p[len] == '\0' || p[len] == ',';
        if (start && end)
            return true;
    }
    return false;
}

/* One mountinfo line: "... mountpoint opts ... - fstype source superopts". */
static void cg_parse_line(struct cg_layout *l, const char *line)
{
    char dir[CG_PATH_MAX], fstype[32], super[256];
    const char *dash = strstr(line, " - ");
    if (dash == NULL || l->n == CG_MOUNTS_MAX ||
        sscanf(line, "%*s %*s %*s %*s %511s", dir) != 1 ||
        sscanf(dash + 3, "%31s %*s %255s", fstype, super) != 2)
        return;
    bool v2 = strcmp(fstype, "cgroup2") == 0;
    if (!v2 && strcmp(fstype, "cgroup") != 0)
        return;
    struct cg_mount *m = &l->m[l->n++];
    snprintf(m->dir, sizeof(m->dir), "%s", dir);
    snprintf(m->opts, sizeof(m->opts), "%s", super);
    m->v2 = v2;
}

static bool v2_has_controller(const struct cg_mount *m, const char *name)
{
    char path[CG_PATH_MAX + 32], line[512];
    snprintf(path, sizeof(path), "%s/cgroup.controllers", m->dir);
    if (doctor_read_line(path, line, sizeof(line)) < 0)
        return false;
    for (char *tok = strtok(line, " "); tok != NULL; tok = strtok(NULL, " "))
        if (strcmp(tok, name) == 0)
            return true;
    return false;
}

static const struct cg_mount *cg_find_controller(const struct cg_layout *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (!l->m[i].v2 && opts_have(l->m[i].opts, name))
            return &l->m[i];
    if (l->v2 != NULL && v2_has_controller(l->v2, name))
        return l->v2;
    return NULL;
}

static void cg_load(struct cg_layout *l, const char *mountinfo)
{
    memset(l, 0, sizeof(*l));
    FILE *f = fopen(mountinfo, "re");
    if (f == NULL)
        return;
    char line[1024];
    while (fgets(line, sizeof(line), f) != NULL)
        cg_parse_line(l, line);
    fclose(f);
    for (size_t i = 0; i < l->n; i++) {
        if (l->m[i].v2 && l->v2 == NULL)
            l->v2 = &l->m[i];
        if (!l->m[i].v2 && !opts_have(l->m[i].opts, "name=systemd"))
            l->v1_any = true;
    }
    l->memory = cg_find_controller(l, "memory");
    l->pids = cg_find_controller(l, "pids");
    l->cpu = cg_find_controller(l, "cpu");
}

static const char *cg_layout_name(const struct cg_layout *l)
{
    if (l->v1_any && l->v2 != NULL)
        return "hybrid";
    if (l->v1_any)
        return "v1";
    return l->v2 != NULL ? "v2" : "none";
}

const char *doctor_cgroup_layout(const char *mountinfo_path)
{
    struct cg_layout l;
    cg_load(&l, mountinfo_path);
    return cg_layout_name(&l);
}

static void check_layout(struct doctor_report *r, const struct cg_layout *l)
{
    struct doctor_check *c = doctor_add(r, "cgroup_layout", true);
    if (l->memory == NULL || l->pids == NULL) {
        doctor_fail(c,
                    "enable the controllers at boot: add cgroup_enable=memory "
                    "swapaccount=1 to the kernel command line (GRUB_CMDLINE_LINUX in "
                    "/etc/default/grub, then sudo update-grub && sudo reboot)",
                    "layout %s: the %s controller is not available", cg_layout_name(l),
                    l->memory == NULL ? "memory" : "pids");
        return;
    }
    doctor_pass(c, "%s: memory in %s (%s), pids in %s (%s), cpu %s%s%s", cg_layout_name(l),
                l->memory->dir, l->memory->v2 ? "v2" : "v1", l->pids->dir,
                l->pids->v2 ? "v2" : "v1", l->cpu ? l->cpu->dir : "unavailable",
                l->v2 ? "; cgroup2 at " : "", l->v2 ? l->v2->dir : "");
}

/* This process's cgroup path in a hierarchy, from /proc/self/cgroup. */
static int cg_own_path(const struct cg_mount *m, char *out, size_t size)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL)
        return -1;
    char line[1024];
    int rc = -1;
    while (rc < 0 && fgets(line, sizeof(line), f) != NULL) {
        char *ctl = strchr(line, ':');
        char *path = ctl ? strchr(ctl + 1, ':') : NULL;
        if (path == NULL)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        bool match = m->v2 ? strcmp(ctl + 1, "") == 0 && strncmp(line, "0", 1) == 0
                           : opts_have(m->opts, ctl + 1) || strstr(m->opts, ctl + 1) != NULL;
        if (match)
            rc = snprintf(out, size, "%s%s", m->dir, strcmp(path, "/") == 0 ? "" : path) > 0
                     ? 0
                     : -1;
    }
    fclose(f);
    return rc;
}

/* mkdir + rmdir of a scratch child cgroup: the real test of delegation. */
static int cg_probe_mkdir(const struct cg_mount *m, char *why, size_t why_size)
{
    char own[CG_PATH_MAX], probe[CG_PATH_MAX + 64];
    if (cg_own_path(m, own, sizeof(own)) < 0) {
        snprintf(why, why_size, "own cgroup in %s not found", m->dir);
        return -1;
    }
    snprintf(probe, sizeof(probe), "%s/mcpbox-doctor-%d", own, (int)getpid());
    if (mkdir(probe, 0755) < 0) {
        snprintf(why, why_size, "mkdir %s: %s", probe, strerror(errno));
        return -1;
    }
    if (rmdir(probe) < 0) {
        snprintf(why, why_size, "rmdir %s: %s", probe, strerror(errno));
        return -1;
    }
    snprintf(why, why_size, "%s", own);
    return 0;
}

static bool cg_seen(const struct cg_mount *const *list, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (list[j] == list[i])
            return true;
    return false;
}

static const char *setup_fix(char *buf, size_t size)
{
    char name[256];
    snprintf(buf, size, "as root, once: mcpbox setup --user %s (on a systemd host instead: "
                        "systemd-run --user --scope -p Delegate=yes mcpbox serve)",
             doctor_user_name(name, sizeof name));
    return buf;
}

static bool user_owns(const char *dir, const char *file)
{
    char path[CG_PATH_MAX + 64];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return stat(dir, &st) == 0 && st.st_uid == geteuid() && stat(path, &st) == 0 &&
           st.st_uid == geteuid() && access(path, W_OK) == 0;
}

/* Rootless: the subtrees mcpbox uses (cgroup.c detect_user): v1 ones made by `mcpbox setup`, or
 * a delegated v2 subtree this process runs in. Missing ones are a WARN: sandboxes still run,
 * and get_sandbox names the limits that do not hold. */
static void check_user_delegation(struct doctor_report *r, const struct cg_layout *l)
{
    struct doctor_check *c = doctor_add(r, "cgroup_delegation", false);
    char fix[CG_PATH_MAX], have[160] = "", miss[160] = "", dir[CG_PATH_MAX + 64];
    if (!l->v1_any && l->v2 != NULL) {
        bool found = cg_own_path(l->v2, dir, sizeof dir) == 0;
        char *leaf = strrchr(dir, '/');
        if (found && leaf && strcmp(leaf, "/mcpbox-leaf") == 0)
            *leaf = '\0';
        if (found && user_owns(dir, "cgroup.procs"))
            doctor_pass(c, "this process runs in a cgroup v2 subtree delegated to uid %u (%s): "
                           "mcpbox moves into a leaf there and puts sandboxes beside it",
                        (unsigned)geteuid(), dir);
        else
            doctor_fail(c, setup_fix(fix, sizeof fix),
                        "this process's cgroup v2 (%s) is not delegated to uid %u: sandboxes run "
                        "without memory or cpu limits and cannot be paused (pids: RLIMIT_NPROC; "
                        "disk: tmpfs size)", dir, (unsigned)geteuid());
        return;
    }
    static const char *const ctrls[] = {"memory", "pids", "cpu", "freezer"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(dir, sizeof dir, "/sys/fs/cgroup/%s/mcpbox-u%u", ctrls[i], (unsigned)geteuid());
        bool ok = user_owns(dir, "cgroup.procs") && user_owns(dir, "tasks");
        char *list = ok ? have : miss;
        snprintf(list + strlen(list), 160 - strlen(list), "%s%s", list[0] ? ", " : "", ctrls[i]);
    }
    if (miss[0] == '\0')
        doctor_pass(c, "v1 subtrees /sys/fs/cgroup/{%s}/mcpbox-u%u are delegated to uid %u "
                       "(mcpbox setup): sandboxes get memory, pids and cpu limits and pause",
                    have, (unsigned)geteuid(), (unsigned)geteuid());
    else
        doctor_fail(c, setup_fix(fix, sizeof fix),
                    "no cgroup delegated to uid %u in: %s; until then those limits are NOT "
                    "enforced (%s%s%s; pids fall back to RLIMIT_NPROC, disk to the tmpfs size)",
                    (unsigned)geteuid(), miss, strstr(miss, "memory") ? "no memory cap" : "",
                    strstr(miss, "cpu") ? ", no cpu quota" : "",
                    strstr(miss, "freezer") ? ", no pause" : "");
}

static void check_delegation(struct doctor_report *r, const struct cg_layout *l)
{
    if (geteuid() != 0) {
        check_user_delegation(r, l);
        return;
    }
    struct doctor_check *c = doctor_add(r, "cgroup_delegation", true);
    const struct cg_mount *need[] = {l->memory, l->pids, l->cpu, l->v2};
    char done[1024] = "", why[CG_PATH_MAX + 128];
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        if (need[i] == NULL || cg_seen(need, i))
            continue;
        if (cg_probe_mkdir(need[i], why, sizeof(why)) < 0) {
            doctor_fail(c, geteuid() == 0 ? "mount the cgroup filesystems read-write (sudo "
                                            "mount -o remount,rw /sys/fs/cgroup)"
                                          : CG_DELEGATE_FIX,
                        "cannot create a cgroup: %s", why);
            return;
        }
        size_t len = strlen(done);
        snprintf(done + len, sizeof(done) - len, "%s%s", len ? ", " : "", why);
    }
    doctor_pass(c, "can create child cgroups under %s", done[0] ? done : "(nothing)");
}

/* cgroup.kill (5.14+) exists only in non-root cgroups: look in a scratch child. */
static void check_kill_freeze(struct doctor_report *r, const struct cg_layout *l)
{
    struct doctor_check *c = doctor_add(r, "cgroup_kill", false);
    if (geteuid() != 0 && l->v1_any) { /* rootless hybrid uses no v2 (cgroup.c detect_user_v1) */
        char dir[CG_PATH_MAX], fix[CG_PATH_MAX];
        snprintf(dir, sizeof dir, "/sys/fs/cgroup/freezer/mcpbox-u%u", (unsigned)geteuid());
        if (user_owns(dir, "cgroup.procs"))
            doctor_pass(c, "destroy kills each sandbox's init (its pid namespace ends with it) "
                           "and its v1 pids cgroup; pause uses the delegated v1 freezer %s", dir);
        else
            doctor_fail(c, setup_fix(fix, sizeof fix),
                        "no v1 freezer delegated to uid %u: "
                        "pausing a sandbox is unavailable (destroy kills the sandbox's init)",
                        (unsigned)geteuid());
        return;
    }
    const char *fix = "upgrade to Linux 5.14 or later and mount cgroup2 (sudo mount -t cgroup2 "
                      "none /sys/fs/cgroup/unified on a v1 host)";
    char own[CG_PATH_MAX], probe[CG_PATH_MAX + 64], file[CG_PATH_MAX + 96];
    if (l->v2 == NULL || cg_own_path(l->v2, own, sizeof(own)) < 0) {
        doctor_fail(c, fix, "no cgroup2 hierarchy: teardown falls back to killing each "
                            "sandbox's init, pause to the v1 freezer");
        return;
    }
    snprintf(probe, sizeof(probe), "%s/mcpbox-doctor-kill-%d", own, (int)getpid());
    if (mkdir(probe, 0755) < 0) {
        doctor_fail(c, CG_DELEGATE_FIX, "mkdir %s: %s", probe, strerror(errno));
        return;
    }
    snprintf(file, sizeof(file), "%s/cgroup.kill", probe);
    bool kill_ok = access(file, W_OK) == 0;
    snprintf(file, sizeof(file), "%s/cgroup.freeze", probe);
    bool freeze_ok = access(file, W_OK) == 0;
    rmdir(probe);
    if (kill_ok && freeze_ok)
        doctor_pass(c, "cgroup2 at %s has cgroup.kill and cgroup.freeze", l->v2->dir);
    else
        doctor_fail(c, fix, "cgroup2 at %s lacks %s", l->v2->dir,
                    kill_ok ? "cgroup.freeze" : "cgroup.kill");
}

/* Moving a task between cgroups waits for an RCU grace period unless one of these is on
 * (docs/internals/isolation-facts.md §3: +10 ms per sandbox). Pure v2 uses CLONE_INTO_CGROUP. */
static void check_attach_speed(struct doctor_report *r, const struct cg_layout *l)
{
    struct doctor_check *c = doctor_add(r, "cgroup_attach_speed", false);
    char v[16] = "0";
    doctor_read_line("/sys/kernel/rcu_expedited", v, sizeof(v));
    bool fav = l->v2 != NULL && opts_have(l->v2->opts, "favordynmods");
    if (!l->v1_any) {
        doctor_pass(c, "pure cgroup v2: sandboxes start in their cgroup (CLONE_INTO_CGROUP)");
    } else if (strcmp(v, "1") == 0 || fav) {
        doctor_pass(c, "%s: attaching to v1 cgroups is fast",
                    fav ? "cgroup2 favordynmods" : "rcu_expedited=1");
    } else {
        /* favordynmods can be switched on by a remount of cgroup2 only (a v1 remount is
         * refused: "option or name mismatch"), so a pure v1 host gets rcu_expedited alone. */
        char fix[CG_PATH_MAX + 128] = "echo 1 | sudo tee /sys/kernel/rcu_expedited";
        if (l->v2 != NULL)
            snprintf(fix + strlen(fix), sizeof(fix) - strlen(fix),
                     " (or sudo mount -o remount,favordynmods %s)", l->v2->dir);
        doctor_fail(c, fix,
                    "v1 cgroups with rcu_expedited=0 and no favordynmods: each sandbox start "
                    "may wait ~10 ms for an RCU grace period");
    }
}

void doctor_check_cgroups(struct doctor_report *r)
{
    struct cg_layout l;
    cg_load(&l, "/proc/self/mountinfo");
    check_layout(r, &l);
    if (l.memory != NULL && l.pids != NULL)
        check_delegation(r, &l);
    check_kill_freeze(r, &l);
    check_attach_speed(r, &l);
}
