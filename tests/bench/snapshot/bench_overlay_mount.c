/* What an overlay mount costs, for the question of issue 36 (docs/benchmarks.md, "Snapshots,
 * restore and fork"): would a restore that mounts a snapshot's unpacked tree as the lower layer
 * of /workspace, /tmp and /root (three overlays) stay within 1.2x of a create? Times N overlay
 * mounts of one lower directory of 20 files on a tmpfs, each with its own upper and work
 * directories, in a new mount namespace (and, with --userns, a new user namespace mapping the
 * caller to root, as a sandbox's child mounts them). Nothing outlives the process: the tmpfs
 * and the overlays are in its own mount namespace. Prints the p50 and p90 in microseconds.
 * usage: bench_overlay_mount [--userns] [--quick]   (77: the host refuses the namespaces) */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SKIP 77

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void put(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, text, strlen(text)) < 0)
            perror(path);
        close(fd);
    }
}

/* A mount namespace of our own (and a user namespace mapping us to root), a tmpfs as cwd. */
static int enter(bool userns)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWNS | (userns ? CLONE_NEWUSER : 0)) < 0)
        return fprintf(stderr, "SKIP: unshare: %s\n", strerror(errno)), SKIP;
    if (userns) {
        char map[64];
        put("/proc/self/setgroups", "deny");
        snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
        put("/proc/self/uid_map", map);
        snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
        put("/proc/self/gid_map", map);
    }
    char dir[] = "/tmp/bench-overlay-XXXXXX";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || mkdtemp(dir) == NULL ||
        mount("tmpfs", dir, "tmpfs", 0, "size=64m") < 0 || chdir(dir) < 0)
        return fprintf(stderr, "SKIP: a tmpfs: %s\n", strerror(errno)), SKIP;
    rmdir(dir); /* busy while mounted; gone with the namespace otherwise */
    return 0;
}

/* One overlay on lower/, its own upper, work and mount point: its time in microseconds. */
static double one_mount(int i)
{
    char up[32], work[32], at[32], opts[128];
    snprintf(up, sizeof up, "u%d", i);
    snprintf(work, sizeof work, "w%d", i);
    snprintf(at, sizeof at, "m%d", i);
    if (mkdir(up, 0755) < 0 || mkdir(work, 0755) < 0 || mkdir(at, 0755) < 0)
        return -1;
    snprintf(opts, sizeof opts, "lowerdir=lower,upperdir=%s,workdir=%s,userxattr", up, work);
    double t0 = now_us();
    if (mount("overlay", at, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
        return -1;
    return now_us() - t0;
}

int main(int argc, char **argv)
{
    bool userns = false, quick = false;
    for (int i = 1; i < argc; i++)
        userns |= strcmp(argv[i], "--userns") == 0, quick |= strcmp(argv[i], "--quick") == 0;
    int rc = enter(userns), n = quick ? 5 : 300;
    if (rc != 0)
        return rc;
    if (mkdir("lower", 0755) < 0)
        return perror("mkdir lower"), 1;
    for (int i = 0; i < 20; i++) {
        char path[32];
        snprintf(path, sizeof path, "lower/f%d", i);
        close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    }
    double *t = calloc((size_t)n, sizeof *t);
    for (int i = 0; t && i < n; i++)
        if ((t[i] = one_mount(i)) < 0)
            return fprintf(stderr, "SKIP: overlay: %s\n", strerror(errno)), free(t), SKIP;
    if (t == NULL)
        return 1;
    qsort(t, (size_t)n, sizeof *t, by_value);
    printf("overlay mount%s: p50 %.1f us, p90 %.1f us (n = %d)\n",
           userns ? " in a user namespace" : "", t[n / 2], t[n * 9 / 10], n);
    free(t);
    return 0;
}
