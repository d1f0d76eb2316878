/* The identity of local sandboxes: which host uids/gids they run as (identity.h). */
#include "backend/local/identity.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOCAL_SLICE_BASE 100000u /* == LOCAL_UID_BASE (local_limits.h) */

int local_subid_range(const char *file, const char *user, uint32_t uid, uint32_t *start,
                      uint32_t *count)
{
    FILE *f = fopen(file, "re");
    if (f == NULL)
        return -1;
    char line[512], num[16];
    snprintf(num, sizeof num, "%u", (unsigned)uid);
    int rc = -1;
    while (rc < 0 && fgets(line, sizeof line, f) != NULL) {
        char name[256];
        unsigned long s, n;
        if (sscanf(line, "%255[^:]:%lu:%lu", name, &s, &n) != 3 || n == 0 ||
            s + n > 0xffffffffUL)
            continue;
        if ((user && strcmp(name, user) == 0) || strcmp(name, num) == 0) {
            *start = (uint32_t)s;
            *count = (uint32_t)n;
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

static void detect_single(struct local_identity *id, const char *why)
{
    id->mode = LOCAL_ID_SINGLE;
    id->uid_base = (uint32_t)geteuid(), id->uid_count = 1;
    id->gid_base = (uint32_t)getegid(), id->gid_count = 1;
    snprintf(id->why, sizeof id->why, "%s", why);
}

void local_identity_detect(struct local_identity *id)
{
    memset(id, 0, sizeof *id);
    if (geteuid() == 0) {
        id->mode = LOCAL_ID_SLICES;
        id->uid_base = id->gid_base = LOCAL_SLICE_BASE;
        id->uid_count = id->gid_count = LOCAL_ID_RANGE_MAX;
        return;
    }
    char buf[4096], why[256];
    struct passwd pw, *found = NULL;
    getpwuid_r(geteuid(), &pw, buf, sizeof buf, &found);
    const char *user = found ? found->pw_name : NULL;
    uint32_t us, un, gs, gn;
    bool uids = local_subid_range("/etc/subuid", user, (uint32_t)geteuid(), &us, &un) == 0;
    bool gids = local_subid_range("/etc/subgid", user, (uint32_t)geteuid(), &gs, &gn) == 0;
    bool tools = access(LOCAL_NEWUIDMAP, X_OK) == 0 && access(LOCAL_NEWGIDMAP, X_OK) == 0;
    if (!uids || !gids) {
        snprintf(why, sizeof why, "%s has no subordinate %s (/etc/subuid, /etc/subgid): as root "
                 "run `mcpbox setup --user %s`", user ? user : "this user",
                 !uids ? "uids" : "gids", user ? user : "NAME");
        detect_single(id, why);
        return;
    }
    if (!tools) {
        detect_single(id, "newuidmap/newgidmap are not installed (as root: apt-get install "
                          "uidmap)");
        return;
    }
    id->mode = LOCAL_ID_SUBID;
    id->uid_base = us, id->uid_count = un < LOCAL_ID_RANGE_MAX ? un : LOCAL_ID_RANGE_MAX;
    id->gid_base = gs, id->gid_count = gn < LOCAL_ID_RANGE_MAX ? gn : LOCAL_ID_RANGE_MAX;
}

uint32_t local_identity_root_uid(const struct local_identity *id, uint32_t slot)
{
    return id->mode == LOCAL_ID_SLICES ? id->uid_base + id->uid_count * slot : id->uid_base;
}

uint32_t local_identity_root_gid(const struct local_identity *id, uint32_t slot)
{
    return id->mode == LOCAL_ID_SLICES ? id->gid_base + id->gid_count * slot : id->gid_base;
}

const char *local_identity_name(enum local_id_mode m)
{
    return m == LOCAL_ID_SLICES ? "per-sandbox uid range"
           : m == LOCAL_ID_SUBID ? "shared subordinate ids"
                                 : "single uid";
}

/* "0 S C", or with the person's own id P mapped (person_id): "0 S P / P own 1 / P+1 S+P+1 C-P-1",
 * the extents write_maps_subid gives the kernel. */
static void map_text(char *buf, size_t size, uint32_t base, uint32_t count, uint32_t person,
                     uint32_t own)
{
    if (person == 0)
        snprintf(buf, size, "0 %u %u", (unsigned)base, (unsigned)count);
    else
        snprintf(buf, size, "0 %u %u / %u %u 1 / %u %u %u", (unsigned)base, (unsigned)person,
                 (unsigned)person, (unsigned)own, (unsigned)(person + 1),
                 (unsigned)(base + person + 1), (unsigned)(count - person - 1));
}

json_t *local_identity_json(const struct local_identity *id, uint32_t slot, uint32_t person,
                            uint32_t run_uid, uint32_t run_gid)
{
    if (id->mode != LOCAL_ID_SUBID)
        person = 0; /* only SUBID maps the person's own ids (local_identity_write_maps_person) */
    char umap[128], gmap[128];
    uint32_t ubase = local_identity_root_uid(id, slot), gbase = local_identity_root_gid(id, slot);
    map_text(umap, sizeof umap, ubase, id->uid_count, person, (uint32_t)geteuid());
    map_text(gmap, sizeof gmap, gbase, id->gid_count, person, (uint32_t)getegid());
    const char *note =
        person != 0
            ? "commands run as your own uid (a writable host mount needs the files it writes to be "
              "yours); sandbox root is still a subordinate uid with no capabilities"
        : id->mode == LOCAL_ID_SLICES ? "sandbox root is an unprivileged host uid of its own range"
        : id->mode == LOCAL_ID_SUBID
            ? "sandbox root is a subordinate uid of the user running mcpbox, shared by that "
              "user's sandboxes (namespaces keep them apart)"
            : "single uid: sandbox root is your own uid (weaker: as root run `mcpbox setup "
              "--user NAME` to give this user subordinate ids)";
    /* Who commands run as, inside and on the host (the image's User, or the person). */
    uint32_t host_uid = person != 0 ? (uint32_t)geteuid() : ubase + run_uid;
    uint32_t host_gid = person != 0 ? (uint32_t)getegid() : gbase + run_gid;
    return json_pack("{s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}, s:s}", "mode",
                     local_identity_name(id->mode), "uid_map", umap, "gid_map", gmap,
                     "commands_run_as", "uid", (json_int_t)run_uid, "gid", (json_int_t)run_gid,
                     "host_uid", (json_int_t)host_uid, "host_gid", (json_int_t)host_gid, "note",
                     note);
}

int local_proc_write(int pid, const char *file, const char *text, struct mcp_error *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? write(fd, text, strlen(text)) : -1;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (n == (ssize_t)strlen(text))
        return 0;
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, e, "cannot write %s", path);
}

/* person: 0, or the sandbox id (< count - 1) at which `own` (the caller's uid or gid) is mapped
 * instead of base + person. */
static int spawn_map_tool(const char *tool, int pid, uint32_t base, uint32_t count,
                          uint32_t person, uint32_t own, pid_t *child)
{
    char p[16], n[9][16];
    snprintf(p, sizeof p, "%d", pid);
    uint32_t v[9] = {0, base, count};
    int nv = 3;
    if (person > 0) {
        uint32_t w[9] = {0, base, person, person, own, 1, person + 1, base + person + 1,
                         count - person - 1};
        memcpy(v, w, sizeof v);
        nv = 9;
    }
    char *argv[12] = {(char *)tool, p};
    for (int i = 0; i < nv; i++) {
        snprintf(n[i], sizeof n[i], "%u", (unsigned)v[i]);
        argv[2 + i] = n[i];
    }
    argv[2 + nv] = NULL;
    char *envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    int rc = posix_spawn(child, tool, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

static int wait_tool(pid_t child)
{
    int status = 0;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* newuidmap and newgidmap (setuid root, from Debian's uidmap) check the ranges against
 * /etc/subuid and /etc/subgid; both run at once (each is a fork and exec). */
static int write_maps_subid(const struct local_identity *id, int pid, uint32_t person,
                            struct mcp_error *err)
{
    pid_t u = -1, g = -1;
    int urc = spawn_map_tool(LOCAL_NEWUIDMAP, pid, id->uid_base, id->uid_count, person,
                             (uint32_t)geteuid(), &u);
    int grc = spawn_map_tool(LOCAL_NEWGIDMAP, pid, id->gid_base, id->gid_count, person,
                             (uint32_t)getegid(), &g);
    int ust = urc == 0 ? wait_tool(u) : -1;
    int gst = grc == 0 ? wait_tool(g) : -1;
    if (ust == 0 && gst == 0)
        return 0;
    return mcp_error_set(err, MCP_ERR_UNSUPPORTED, urc ? urc : grc,
                         "%s %d 0 %u %u failed (exit %d): check that /etc/%s gives this user "
                         "that range (mcpbox doctor)",
                         ust != 0 ? LOCAL_NEWUIDMAP : LOCAL_NEWGIDMAP, pid,
                         (unsigned)(ust != 0 ? id->uid_base : id->gid_base),
                         (unsigned)(ust != 0 ? id->uid_count : id->gid_count),
                         ust != 0 ? ust : gst, ust != 0 ? "subuid" : "subgid");
}

int local_identity_write_maps(const struct local_identity *id, uint32_t slot, int pid,
                              struct mcp_error *err)
{
    char map[64];
    if (id->mode == LOCAL_ID_SUBID)
        return write_maps_subid(id, pid, 0, err);
    /* An unprivileged writer may map only its own ids, and gid_map only once setgroups is
     * denied (the sandbox then keeps the user's supplementary groups: see docs/security.md). */
    if (id->mode == LOCAL_ID_SINGLE && local_proc_write(pid, "setgroups", "deny", err) < 0)
        return -1;
    snprintf(map, sizeof map, "0 %u %u\n", (unsigned)local_identity_root_uid(id, slot),
             (unsigned)id->uid_count);
    if (local_proc_write(pid, "uid_map", map, err) < 0)
        return -1;
    snprintf(map, sizeof map, "0 %u %u\n", (unsigned)local_identity_root_gid(id, slot),
             (unsigned)id->gid_count);
    return local_proc_write(pid, "gid_map", map, err);
}

uint32_t local_identity_person_id(const struct local_identity *id)
{
    uint32_t n = id->uid_count < id->gid_count ? id->uid_count : id->gid_count;
    uint32_t uid = (uint32_t)geteuid(), gid = (uint32_t)getegid();
    /* The user's own number where it fits (ls -n shows the same owner inside and out), else
     * 1000; never root, never nobody (65534). */
    if (uid == gid && uid > 0 && uid + 1 < n && uid != 65534)
        return uid;
    return n > 1001 ? 1000 : n - 1;
}

int local_identity_write_maps_person(const struct local_identity *id, int pid,
                                     struct mcp_error *err)
{
    if (id->mode != LOCAL_ID_SUBID)
        return local_identity_write_maps(id, 0, pid, err);
    return write_maps_subid(id, pid, local_identity_person_id(id), err);
}
