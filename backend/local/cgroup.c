/* cgroups for local sandboxes, one interface over two layouts:
 *  - hybrid (v1 memory/pids/cpu hold the limits; the v2 "unified" mount gives cgroup.kill,
 *    cgroup.freeze and cgroup.events), as on the project's machines;
 *  - pure v2 (memory.max, memory.swap.max, pids.max, cpu.max, memory.events, cgroup.kill,
 *    cgroup.freeze), as on most users' machines.
 * v1 parents are created under the cgroup mcpbox itself runs in (so any limit on mcpbox still
 * covers its sandboxes); the v2 parent is <v2 root>/mcpbox. */
#include <dirent.h>
#include <poll.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "backend/local/local_limits.h"
#include "backend/local/local_cgroup.h"
#include "lib/base/util.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CG_PARENT_NAME "mcpbox"
#define CG_CPU_PERIOD_US 100000
#define CG_RMDIR_TRIES 50
#define CG_KILL_ROUNDS 8
#define CG_V1_EMPTY_POLL_MS 5   /* v1 has no populated notification: re-read this often */

static bool is_fs(const char *path, long magic)
{
    struct statfs sf;
    return statfs(path, &sf) == 0 && (long)sf.f_type == magic;
}

static int write_file(const char *dir, const char *name, const char *value)
{
    char path[LOCAL_PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, value, strlen(value));
    int e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(value) ? 0 : -1;
}

static int read_file(const char *dir, const char *name, char *out, size_t size)
{
    char path[LOCAL_PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, out, size - 1);
    close(fd);
    if (n < 0)
        return -1;
    out[n] = '\0';
    return 0;
}

static bool has_ctrl(const char *list, const char *ctrl)
{
    size_t n = strlen(ctrl);
    if (n == 0)
        return list[0] == '\0';
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, ctrl, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* Our own path in hierarchy `ctrl` ("memory", or "" for v2) from /proc/self/cgroup. */
static void own_path(const char *ctrl, char *out, size_t size)
{
    snprintf(out, size, "/");
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = '\0';
        if (has_ctrl(c1 + 1, ctrl)) {
            snprintf(out, size, "%s", c2 + 1);
            break;
        }
    }
    fclose(f);
}

static void base_for(const char *mount, const char *ctrl, char *out)
{
    char own[LOCAL_PATH_MAX];
    own_path(ctrl, own, sizeof own);
    snprintf(out, LOCAL_PATH_MAX, "%s%s%s" CG_PARENT_NAME, mount, own,
             own[strlen(own) - 1] == '/' ? "" : "/");
}

const char *cg_layout_name(enum cg_layout l)
{
    return l == CG_HYBRID ? "hybrid" : l == CG_V2 ? "v2" : "none";
}

/* Ours to delegate from: the directory and the files a move writes belong to this euid. */
static bool owned(const char *dir, const char *file)
{
    char path[LOCAL_PATH_MAX + 32];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
           stat(path, &st) == 0 && st.st_uid == geteuid() && access(path, W_OK) == 0;
}

static void flags_from_subtree(struct cg_host *h, const char *dir)
{
    char text[256] = "";
    read_file(dir, "cgroup.subtree_control", text, sizeof text);
    h->lim_memory = strstr(text, "memory") != NULL;
    h->lim_pids = strstr(text, "pids") != NULL;
    h->lim_cpu = strstr(text, "cpu") != NULL;
    h->can_freeze = true;
}

/* Every process of dir moves into dir/LOCAL_CG_LEAF (no internal processes: a cgroup with
 * controllers enabled for its children may hold none itself). Within a delegated subtree the
 * user may move its own processes. */
static void move_into_leaf(const char *dir)
{
    char leaf[LOCAL_PATH_MAX], path[LOCAL_PATH_MAX + 32];
    snprintf(leaf, sizeof leaf, "%s/" LOCAL_CG_LEAF, dir);
    mkdir(leaf, 0755);
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    for (int round = 0; round < 4; round++) {
        FILE *f = fopen(path, "re");
        int pid, moved = 0;
        while (f && fscanf(f, "%d", &pid) == 1) {
            char v[32];
            snprintf(v, sizeof v, "%d", pid);
            moved += write_file(leaf, "cgroup.procs", v) == 0;
        }
        if (f)
            fclose(f);
        if (moved == 0)
            break;
    }
}

/* Rootless, pure v2: usable only from inside a delegated subtree (moving a process needs write
 * access to the common ancestor's cgroup.procs). The delegation point is this process's cgroup
 * (or its parent when that is our leaf): its processes move into a leaf, sandboxes go beside. */
static void detect_user_v2(struct cg_host *h)
{
    char own[LOCAL_PATH_MAX], dir[LOCAL_PATH_MAX];
    own_path("", own, sizeof own);
    snprintf(dir, sizeof dir, CG_ROOT "%s", strcmp(own, "/") == 0 ? "" : own);
    char *slash = strrchr(dir, '/');
    if (slash && strcmp(slash + 1, LOCAL_CG_LEAF) == 0)
        *slash = '\0';
    if (!owned(dir, "cgroup.procs") || !owned(dir, "cgroup.subtree_control")) {
        snprintf(h->note, sizeof h->note,
                 "this process's cgroup %s is not delegated to uid %u (start mcpbox in a "
                 "delegated scope: systemd-run --user --scope -p Delegate=yes mcpbox ...)", dir,
                 (unsigned)geteuid());
        return;
    }
    move_into_leaf(dir);
    write_file(dir, "cgroup.subtree_control", "+memory +pids +cpu");
    write_file(dir, "cgroup.subtree_control", "+memory +pids"); /* cpu may not be delegated */
    h->layout = CG_V2;
    snprintf(h->v2_base, sizeof h->v2_base, "%s", dir);
    flags_from_subtree(h, dir);
    snprintf(h->note, sizeof h->note, "delegated v2 subtree %s (mcpbox in %s/" LOCAL_CG_LEAF ")",
             dir, dir);
}

/* Rootless, hybrid or v1: the subtrees `mcpbox setup --user` delegated, one per hierarchy. v2
 * is not used (the process is not inside a delegated v2 subtree: it could not move anything
 * there): kill goes through the init and the v1 pids cgroup, pause through the v1 freezer. */
static void detect_user_v1(struct cg_host *h)
{
    static const char *const ctrls[] = {"memory", "pids", "cpu", "freezer"};
    char *bases[] = {h->mem_base, h->pids_base, h->cpu_base, h->freezer_base};
    char missing[128] = "";
    for (size_t i = 0; i < 4; i++) {
        char dir[LOCAL_PATH_MAX];
        int n = snprintf(dir, sizeof dir, CG_ROOT "/%s/" LOCAL_CG_USER_DIR, ctrls[i],
                         (unsigned)geteuid());
        if (n > 0 && owned(dir, "cgroup.procs") && owned(dir, "tasks"))
            snprintf(bases[i], LOCAL_PATH_MAX, "%s", dir);
        else
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                     missing[0] ? ", " : "", ctrls[i]);
    }
    h->lim_memory = h->mem_base[0], h->lim_pids = h->pids_base[0], h->lim_cpu = h->cpu_base[0];
    h->can_freeze = h->freezer_base[0];
    h->layout = h->mem_base[0] || h->pids_base[0] || h->cpu_base[0] ? CG_HYBRID : CG_NONE;
    if (missing[0])
        snprintf(h->note, sizeof h->note,
                 "no cgroup delegated to uid %u in: %s (as root, once: mcpbox setup --user "
                 "NAME)", (unsigned)geteuid(), missing);
    else
        snprintf(h->note, sizeof h->note, "v1 subtrees " CG_ROOT "/*/" LOCAL_CG_USER_DIR
                 " delegated by mcpbox setup", (unsigned)geteuid());
}

/* Rootless: find what was delegated; without any delegation sandboxes still run (limits that
 * need cgroups are then reported as not enforced). Never fails. */
static int detect_user(struct cg_host *h)
{
    if (is_fs(CG_ROOT, CGROUP2_SUPER_MAGIC))
        detect_user_v2(h);
    else if (is_fs(CG_ROOT "/memory", CGROUP_SUPER_MAGIC) ||
             is_fs(CG_ROOT "/pids", CGROUP_SUPER_MAGIC))
        detect_user_v1(h);
    else
        snprintf(h->note, sizeof h->note, "no cgroup hierarchy at " CG_ROOT);
    return 0;
}

int cg_host_detect(struct cg_host *h, struct mcp_error *err)
{
    memset(h, 0, sizeof *h);
    if (geteuid() != 0)
        return detect_user(h);
    h->lim_memory = h->lim_pids = h->lim_cpu = h->can_freeze = true;
    if (is_fs(CG_ROOT, CGROUP2_SUPER_MAGIC)) {
        h->layout = CG_V2;
        snprintf(h->v2_base, sizeof h->v2_base, CG_ROOT "/" CG_PARENT_NAME);
        if (mkdir(h->v2_base, 0755) < 0 && errno != EEXIST)
            return mcp_error_set(err, MCP_ERR_UNSUPPORTED, errno,
                                 "cannot create %s (mcpbox needs root or a delegated cgroup)",
                                 h->v2_base);
        /* Controllers must be enabled down to our parent (the root is exempt from the
         * no-internal-processes rule, so enabling them there is always possible as root). */
        write_file(CG_ROOT, "cgroup.subtree_control", "+memory +pids +cpu");
        if (write_file(h->v2_base, "cgroup.subtree_control", "+memory +pids +cpu") < 0)
            return mcp_error_set(err, MCP_ERR_UNSUPPORTED, errno,
                                 "cannot enable memory, pids and cpu controllers in %s",
                                 h->v2_base);
        return 0;
    }
    if (!is_fs(CG_ROOT "/memory", CGROUP_SUPER_MAGIC) || !is_fs(CG_ROOT "/pids", CGROUP_SUPER_MAGIC))
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "no usable cgroup hierarchy at " CG_ROOT
                             " (need cgroup v2, or v1 memory and pids controllers)");
    h->layout = CG_HYBRID;
    base_for(CG_ROOT "/memory", "memory", h->mem_base);
    base_for(CG_ROOT "/pids", "pids", h->pids_base);
    if (is_fs(CG_ROOT "/cpu", CGROUP_SUPER_MAGIC))
        base_for(CG_ROOT "/cpu", "cpu", h->cpu_base);
    if (is_fs(CG_ROOT "/unified", CGROUP2_SUPER_MAGIC))
        base_for(CG_ROOT "/unified", "", h->v2_base);
    else if (is_fs(CG_ROOT "/freezer", CGROUP_SUPER_MAGIC)) /* pure v1: freezer for pause */
        base_for(CG_ROOT "/freezer", "freezer", h->freezer_base);
    h->lim_cpu = h->cpu_base[0];
    h->can_freeze = h->v2_base[0] || h->freezer_base[0];
    const char *bases[] = {h->mem_base, h->pids_base, h->cpu_base, h->v2_base, h->freezer_base};
    for (size_t i = 0; i < 5; i++)
        if (bases[i][0] && mkdir(bases[i], 0755) < 0 && errno != EEXIST)
            return mcp_error_set(err, MCP_ERR_UNSUPPORTED, errno, "cannot create %s",
                                 bases[i]);
    return 0;
}

static int make(const char *base, const char *id, char *out, struct mcp_error *err)
{
    if (base[0] == '\0')
        return 0;
    snprintf(out, LOCAL_PATH_MAX, "%s/%s", base, id);
    if (mkdir(out, 0755) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot create cgroup %s", out);
    return 0;
}

static int limit(const char *dir, const char *file, const char *value, struct mcp_error *err)
{
    if (dir[0] == '\0' || write_file(dir, file, value) == 0)
        return 0;
    return mcp_error_set(err, MCP_ERR_IO, errno, "cannot set %s/%s to %s", dir, file, value);
}

static uint64_t number(const char *dir, const char *file);

/* The kernel refuses a memory.limit_in_bytes above memory.memsw.limit_in_bytes (EINVAL) and a
 * memsw limit below the memory limit, so the order of the two writes follows the direction of
 * the change: a spawner's prepared set already holds the defaults, and a larger limit must
 * raise memsw first. memsw is absent without swap accounting. */
static int memory_v1(const char *dir, uint64_t bytes, struct mcp_error *err)
{
    char v[64];
    snprintf(v, sizeof v, "%llu", (unsigned long long)bytes);
    bool raising = dir[0] != '\0' && bytes > number(dir, "memory.limit_in_bytes");
    if (raising)
        write_file(dir, "memory.memsw.limit_in_bytes", v);
    if (limit(dir, "memory.limit_in_bytes", v, err) < 0)
        return -1;
    if (!raising)
        write_file(dir, "memory.memsw.limit_in_bytes", v);
    return 0;
}

static int limits_v1(const struct cg_sandbox *cg, const struct cg_limits *lim, struct mcp_error *err)
{
    char v[64];
    if (memory_v1(cg->mem, lim->memory_bytes, err) < 0)
        return -1;
    snprintf(v, sizeof v, "%u", lim->pids);
    if (limit(cg->pids, "pids.max", v, err) < 0)
        return -1;
    snprintf(v, sizeof v, "%d", CG_CPU_PERIOD_US);
    if (limit(cg->cpu, "cpu.cfs_period_us", v, err) < 0)
        return -1;
    snprintf(v, sizeof v, "%lld", (long long)(lim->cpu * CG_CPU_PERIOD_US));
    return limit(cg->cpu, "cpu.cfs_quota_us", v, err);
}

/* A controller a delegated subtree does not enable has no files: its limit is not enforced,
 * and the host's lim_* flags (reported by get_sandbox and doctor) say so. */
static int limit_v2(const char *dir, const char *file, const char *value, struct mcp_error *err)
{
    if (write_file(dir, file, value) == 0 || errno == ENOENT)
        return 0;
    return mcp_error_set(err, MCP_ERR_IO, errno, "cannot set %s/%s to %s", dir, file, value);
}

static int limits_v2(const struct cg_sandbox *cg, const struct cg_limits *lim, struct mcp_error *err)
{
    char v[64];
    snprintf(v, sizeof v, "%llu", (unsigned long long)lim->memory_bytes);
    if (limit_v2(cg->v2, "memory.max", v, err) < 0)
        return -1;
    write_file(cg->v2, "memory.swap.max", "0");
    snprintf(v, sizeof v, "%u", lim->pids);
    if (limit_v2(cg->v2, "pids.max", v, err) < 0)
        return -1;
    snprintf(v, sizeof v, "%lld %d", (long long)(lim->cpu * CG_CPU_PERIOD_US), CG_CPU_PERIOD_US);
    return limit_v2(cg->v2, "cpu.max", v, err);
}

/* Removes empty sandbox cgroups ("sbx-*") older than min_age_s under our parents: leftovers of
 * a crash or of a cgroup that stayed busy. A live sandbox's cgroups are never empty (its init is
 * in all of them), and rmdir refuses non-empty ones. */
void cg_sweep(const struct cg_host *h, long min_age_s)
{
    const char *bases[] = {h->v2_base, h->mem_base, h->pids_base, h->cpu_base, h->freezer_base};
    time_t now = time(NULL);
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        DIR *d = bases[i][0] ? opendir(bases[i]) : NULL;
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            struct stat st;
            if (strncmp(e->d_name, "sbx-", 4) != 0 ||
                fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                !S_ISDIR(st.st_mode) || now - st.st_mtime < min_age_s)
                continue;
            unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
        }
        if (d)
            closedir(d);
    }
}

int cg_create(const struct cg_host *h, const char *id, const struct cg_limits *lim,
              struct cg_sandbox *out, struct mcp_error *err)
{
    memset(out, 0, sizeof *out);
    if (h->layout == CG_NONE)
        return 0;
    if (make(h->v2_base, id, out->v2, err) < 0)
        return -1;
    if (h->layout == CG_V2)
        return limits_v2(out, lim, err);
    if (make(h->mem_base, id, out->mem, err) < 0 || make(h->pids_base, id, out->pids, err) < 0 ||
        make(h->cpu_base, id, out->cpu, err) < 0 || make(h->freezer_base, id, out->freezer, err) < 0)
        return -1;
    return limits_v1(out, lim, err);
}

int cg_attach_v1(const struct cg_sandbox *cg, pid_t pid, struct mcp_error *err)
{
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    const char *dirs[] = {cg->mem, cg->pids, cg->cpu, cg->freezer};
    for (size_t i = 0; i < 4; i++)
        if (limit(dirs[i], "cgroup.procs", v, err) < 0)
            return -1;
    return 0;
}

/* Re-applies limits to a spawner's prepared set (made with the defaults). The set's v2 cgroup
 * stays empty while it waits, so the start-up sweep of another mcpbox process (cg_sweep) may
 * have removed it: it is made again (on hybrid hosts it holds no limits). */
/* A prepared set's v2 cgroup is empty while it waits: another mcpbox's start-up sweep
 * (cg_sweep) may have removed it. */
int cg_ensure_v2(const struct cg_sandbox *cg, struct mcp_error *err)
{
    if (cg->v2[0] && mkdir(cg->v2, 0755) < 0 && errno != EEXIST)
        return mcp_error_set(err, MCP_ERR_IO, errno, "cannot create cgroup %s", cg->v2);
    return 0;
}

int cg_set_limits(const struct cg_sandbox *cg, const struct cg_limits *lim, struct mcp_error *err)
{
    if (cg_ensure_v2(cg, err) < 0)
        return -1;
    if (cg->mem[0] || cg->pids[0] || cg->cpu[0])
        return limits_v1(cg, lim, err);
    return cg->v2[0] ? limits_v2(cg, lim, err) : 0;
}

/* Moves one thread (v1 "tasks", not the whole process) into the v1 cgroups: children it
 * clones start there, with no migration of their own. */
int cg_join_v1_thread(const struct cg_sandbox *cg, pid_t tid, struct mcp_error *err)
{
    char v[32];
    snprintf(v, sizeof v, "%d", (int)tid);
    const char *dirs[] = {cg->mem, cg->pids, cg->cpu, cg->freezer};
    for (size_t i = 0; i < 4; i++)
        if (dirs[i][0] && limit(dirs[i], "tasks", v, err) < 0)
            return -1;
    return 0;
}

int cg_attach_v2(const struct cg_sandbox *cg, pid_t pid, struct mcp_error *err)
{
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    return limit(cg->v2, "cgroup.procs", v, err);
}

int cg_open_v2(const struct cg_sandbox *cg)
{
    return cg->v2[0] ? open(cg->v2, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
}

/* Without cgroup.kill (pure v1): SIGKILL every member, a few rounds for members forked
 * meanwhile (the pids limit bounds how many there can be). */
static int kill_members(const char *dir)
{
    char path[LOCAL_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    for (int round = 0; round < CG_KILL_ROUNDS; round++) {
        FILE *f = fopen(path, "re");
        if (f == NULL)
            return -1;
        int pid, n = 0;
        /* cgroup.procs lists a process when any of its threads is in the cgroup: ours, while a
         * spawner thread still sits in a set it just used (v1 tasks). Never ourselves. */
        while (fscanf(f, "%d", &pid) == 1)
            n += pid != getpid() && kill(pid, SIGKILL) == 0;
        fclose(f);
        if (n == 0)
            return 0;
    }
    return 0;
}

int cg_kill(const struct cg_sandbox *cg)
{
    if (cg->v2[0])
        return write_file(cg->v2, "cgroup.kill", "1");
    if (cg->freezer[0])
        write_file(cg->freezer, "freezer.state", "THAWED");
    return cg->pids[0] ? kill_members(cg->pids) : -1;
}

static bool v2_populated(int fd)
{
    char text[256];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0)
        return false; /* the cgroup is gone */
    text[n] = '\0';
    return strstr(text, "populated 1") != NULL;
}

static bool v1_populated(const char *dir)
{
    char path[LOCAL_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    int pid;
    bool any = false;
    while (!any && fscanf(f, "%d", &pid) == 1)
        any = pid != getpid(); /* a spawner thread of ours (kill_members) */
    fclose(f);
    return any;
}

/* Waits until no process is left in the sandbox's cgroups (v2: cgroup.events says
 * "populated 0", notified through POLLPRI; v1: cgroup.procs is empty). Processes killed through
 * the cgroup that are not our children exit a moment after the kill, and until they have the
 * sandbox still runs code and holds its files. Returns -1 if some remain after timeout_ms. */
int cg_wait_empty(const struct cg_sandbox *cg, int timeout_ms)
{
    const char *v1 = cg->pids[0] ? cg->pids : cg->mem[0] ? cg->mem : cg->cpu;
    char path[LOCAL_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/cgroup.events", cg->v2);
    int fd = cg->v2[0] ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    uint64_t deadline = now_mono_ms() + (uint64_t)timeout_ms;
    int rc = -1;
    for (;;) {
        if (fd >= 0 ? !v2_populated(fd) : !v1[0] || !v1_populated(v1)) {
            rc = 0;
            break;
        }
        uint64_t now = now_mono_ms();
        if (now >= deadline)
            break;
        int wait = (int)(deadline - now);
        if (fd < 0 && wait > CG_V1_EMPTY_POLL_MS)
            wait = CG_V1_EMPTY_POLL_MS;
        struct pollfd p = {.fd = fd, .events = POLLPRI};
        poll(&p, fd >= 0 ? 1 : 0, wait);
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

int cg_freeze(const struct cg_sandbox *cg, bool frozen, struct mcp_error *err)
{
    if (cg->v2[0])
        return limit(cg->v2, "cgroup.freeze", frozen ? "1" : "0", err);
    if (cg->freezer[0]) /* v1 freezer */
        return limit(cg->freezer, "freezer.state", frozen ? "FROZEN" : "THAWED", err);
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                         "pause needs a cgroup freezer (v2, or the v1 freezer controller), which "
                         "this host lacks");
}

int cg_destroy(const struct cg_sandbox *cg)
{
    const char *dirs[] = {cg->v2, cg->mem, cg->pids, cg->cpu, cg->freezer};
    int rc = 0;
    for (size_t i = 0; i < 5; i++) {
        if (dirs[i][0] == '\0')
            continue;
        int tries = 0;
        while (rmdir(dirs[i]) < 0 && errno == EBUSY && ++tries < CG_RMDIR_TRIES)
            usleep(2000); /* the last tasks are still exiting */
        if (access(dirs[i], F_OK) == 0)
            rc = -1;
    }
    return rc;
}

static uint64_t counter(const char *dir, const char *file, const char *key)
{
    char text[4096];
    if (dir[0] == '\0' || read_file(dir, file, text, sizeof text) < 0)
        return 0;
    char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

uint64_t cg_oom_kills(const struct cg_sandbox *cg)
{
    if (cg->mem[0])
        return counter(cg->mem, "memory.oom_control", "oom_kill ");
    return counter(cg->v2, "memory.events", "oom_kill ");
}

uint64_t cg_memory_limit(const struct cg_sandbox *cg)
{
    return cg->mem[0] ? number(cg->mem, "memory.limit_in_bytes") : number(cg->v2, "memory.max");
}

int cg_oom_fd(const struct cg_sandbox *cg)
{
    char path[LOCAL_PATH_MAX + 32];
    if (cg->mem[0] == '\0') {
        if (cg->v2[0] == '\0')
            return -1;
        snprintf(path, sizeof path, "%s/memory.events", cg->v2);
        return open(path, O_RDONLY | O_CLOEXEC);
    }
    snprintf(path, sizeof path, "%s/memory.oom_control", cg->mem);
    int ctl = open(path, O_RDONLY | O_CLOEXEC);
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    char line[64];
    snprintf(line, sizeof line, "%d %d", efd, ctl);
    int rc = ctl >= 0 && efd >= 0 ? write_file(cg->mem, "cgroup.event_control", line) : -1;
    if (ctl >= 0)
        close(ctl); /* the registration holds its own reference */
    if (rc < 0 && efd >= 0) {
        close(efd);
        efd = -1;
    }
    return efd;
}

static uint64_t number(const char *dir, const char *file)
{
    char text[64];
    if (dir[0] == '\0' || read_file(dir, file, text, sizeof text) < 0)
        return 0;
    return strtoull(text, NULL, 10);
}

json_t *cg_usage(const struct cg_sandbox *cg)
{
    bool v1 = cg->mem[0] != '\0';
    uint64_t mem = v1 ? number(cg->mem, "memory.usage_in_bytes") : number(cg->v2, "memory.current");
    uint64_t pids = number(v1 ? cg->pids : cg->v2, "pids.current");
    const char *cpu_dir = v1 ? cg->cpu : cg->v2;
    json_t *u = json_pack("{s:I, s:I, s:I, s:I}", "memory_bytes", (json_int_t)mem, "pids",
                          (json_int_t)pids, "oom_kills", (json_int_t)cg_oom_kills(cg),
                          "cpu_throttled_periods",
                          (json_int_t)counter(cpu_dir, "cpu.stat", "nr_throttled "));
    char text[64];
    if (!v1)
        json_object_set_new(u, "cpu_seconds",
                            json_real((double)counter(cg->v2, "cpu.stat", "usage_usec ") / 1e6));
    else if (cg->cpu[0] && read_file(cg->cpu, "cpuacct.usage", text, sizeof text) == 0)
        json_object_set_new(u, "cpu_seconds", json_real((double)strtoull(text, NULL, 10) / 1e9));
    else /* cpuacct is a separate v1 hierarchy here, and the sandbox is not placed in it */
        json_object_set_new(u, "cpu_seconds", json_null());
    return u;
}

json_t *cg_to_json(const struct cg_sandbox *cg)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "v2", cg->v2, "memory", cg->mem, "pids",
                     cg->pids, "cpu", cg->cpu, "freezer", cg->freezer);
}

static void copy_str(json_t *j, const char *key, char *out)
{
    const char *s = json_string_value(json_object_get(j, key));
    snprintf(out, LOCAL_PATH_MAX, "%s", s ? s : "");
}

void cg_from_json(json_t *j, struct cg_sandbox *out)
{
    copy_str(j, "v2", out->v2);
    copy_str(j, "memory", out->mem);
    copy_str(j, "pids", out->pids);
    copy_str(j, "cpu", out->cpu);
    copy_str(j, "freezer", out->freezer);
}
