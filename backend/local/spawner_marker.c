/* Markers for the spawner threads' prepared cgroup sets, so that kill -9 leaks none of them.
 *
 * A prepared set (spawner.c) belongs to no sandbox record until a create takes it, so the
 * store-driven reconcile cannot see it. While it waits, a marker file in the runtime directory,
 * "prepared-<id>", names the process that made it (pid and start time) and the set's cgroups;
 * the set's directories (<run>/<id> and the logs directory) follow from the id.
 * The thread removes the marker once it has released the child of the create that took the
 * set (from then on the create's record covers it, or the create's undoing does) or the set was
 * given back; a clean stop removes those of unused sets; the next start on the same state
 * directory removes the sets whose process is gone (local_spawner_reap). The runtime directory
 * is ours (0700, checked by runtime_dir.c); still, only empty "sbx-*" directories under
 * /sys/fs/cgroup are ever removed, and rmdir refuses a cgroup that has a member. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOG_MODULE "local"
#include "lib/base/rmtree.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_spawn.h"
#include "backend/local/local_sandbox.h"
#include "lib/base/log.h"

#define MARKER_PREFIX "prepared-"
#define MARKER_CGROUP_ROOT "/sys/fs/cgroup/"

static void marker_path(const char *run_dir, const char *id, char out[LOCAL_PATH_MAX + 64])
{
    snprintf(out, LOCAL_PATH_MAX + 64, "%s/" MARKER_PREFIX "%s", run_dir, id);
}

/* Written under a temporary name, then renamed: a reader never sees half a marker. */
void spawner_marker_write(const char *run_dir, const char *id, const struct cg_sandbox *cg)
{
    char path[LOCAL_PATH_MAX + 64], tmp[LOCAL_PATH_MAX + 64];
    marker_path(run_dir, id, path);
    snprintf(tmp, sizeof tmp, "%s/.%s%s", run_dir, MARKER_PREFIX, id);
    FILE *f = fopen(tmp, "wxe");
    if (f == NULL) { /* best effort: the age-based cg_sweep is the fallback */
        log_warn("spawner: cannot write %s (a kill -9 would leave this prepared set to the "
                 "age-based sweep): %s", tmp, strerror(errno));
        return;
    }
    fprintf(f, "%d %llu\n", (int)getpid(), (unsigned long long)local_self_starttime());
    const char *dirs[] = {cg->v2, cg->mem, cg->pids, cg->cpu, cg->freezer};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (dirs[i][0])
            fprintf(f, "%s\n", dirs[i]);
    if (fclose(f) != 0 || rename(tmp, path) < 0) {
        log_warn("spawner: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}

void spawner_marker_remove(const char *run_dir, const char *id)
{
    char path[LOCAL_PATH_MAX + 64];
    marker_path(run_dir, id, path);
    unlink(path);
}

static bool is_sandbox_cgroup(const char *path)
{
    const char *base = strrchr(path, '/');
    return strncmp(path, MARKER_CGROUP_ROOT, strlen(MARKER_CGROUP_ROOT)) == 0 &&
           strstr(path, "/../") == NULL && base != NULL && strncmp(base + 1, "sbx-", 4) == 0;
}

/* Removes the set one marker names (its cgroups and directories), unless the process that
 * wrote it still runs. */
static void reap_marker(const char *run_dir, const char *logs_base, int dir_fd, const char *name)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (f == NULL) {
        if (fd >= 0)
            close(fd);
        return;
    }
    int pid = 0;
    unsigned long long start = 0;
    char line[LOCAL_PATH_MAX + 2];
    bool alive = fscanf(f, "%d %llu\n", &pid, &start) == 2 && pid > 0 &&
                 local_proc_starttime(pid) == start;
    while (!alive && fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (is_sandbox_cgroup(line))
            rmdir(line);
    }
    fclose(f);
    if (alive)
        return;
    const char *id = name + strlen(MARKER_PREFIX);
    char path[LOCAL_PATH_MAX + 64];
    if (strncmp(id, "sbx-", 4) == 0 && strchr(id, '/') == NULL) {
        snprintf(path, sizeof path, "%s/%s", run_dir, id);
        rmtree(path);
        snprintf(path, sizeof path, "%s/%s", logs_base, id);
        rmtree(path);
    }
    unlinkat(dir_fd, name, 0);
}

void local_spawner_reap(const char *run_dir, const char *logs_base)
{
    DIR *d = opendir(run_dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, MARKER_PREFIX, strlen(MARKER_PREFIX)) == 0)
            reap_marker(run_dir, logs_base, dirfd(d), e->d_name);
    closedir(d);
}
