/* Benchmark of the review of a copy-on-write mount (issue 13): the diff of K changed files in an
 * N-file tree (default 100 in 50,000; goal under 100 ms). It builds the tree, mounts an overlay
 * over it in a mount namespace of its own (a user namespace too when not root, with userxattr,
 * as a rootless sandbox does), changes K files through it as a sandbox would (one line in the
 * middle of each), then times ws_review (the list of changes and the first 16 KiB page of the
 * diff, what review_changes returns by default) and the whole diff in one page, R times each.
 *
 *   bench_review [--files N] [--changed K] [--runs R] [--quick]
 *
 * Prints the median, min and max in ms. --quick (ctest bench_workspace_smoke) is a small tree
 * and asserts only that the review finds exactly the K changes. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/local/workspace_review.h"
#include "lib/base/util.h"
#include "lib/base/rmtree.h"

#define PER_DIR 100

static char root[64], lower[128], upper[128], work[128], merged[128];

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void file_text(char *buf, size_t size, int i, bool changed)
{
    size_t n = 0;
    for (int l = 0; l < 20 && n < size; l++)
        n += (size_t)snprintf(buf + n, size - n, "line %d of file %d%s\n", l, i,
                              changed && l == 10 ? " (changed in the sandbox)" : "");
}

static int make_tree(int files)
{
    char p[256], text[2048];
    for (int i = 0; i < files; i++) {
        if (i % PER_DIR == 0) {
            snprintf(p, sizeof p, "%s/d%04d", lower, i / PER_DIR);
            if (mkdir(p, 0755) < 0)
                return -1;
        }
        snprintf(p, sizeof p, "%s/d%04d/f%03d.txt", lower, i / PER_DIR, i % PER_DIR);
        file_text(text, sizeof text, i, false);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, text, strlen(text)) < 0)
            return -1;
        close(fd);
    }
    return 0;
}

static void write_map(const char *file, const char *map)
{
    int fd = open(file, O_WRONLY);
    if (fd < 0 || write(fd, map, strlen(map)) < 0)
        _exit(90);
    close(fd);
}

/* The sandbox's side: K files spread over the tree, changed through the overlay. */
static int change_files(int files, int changed)
{
    pid_t pid = fork();
    if (pid == 0) {
        bool user = getuid() != 0;
        if (user) {
            char map[64];
            unsigned uid = getuid(), gid = getgid();
            if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                _exit(91);
            snprintf(map, sizeof map, "0 %u 1", uid);
            write_map("/proc/self/uid_map", map);
            write_map("/proc/self/setgroups", "deny");
            snprintf(map, sizeof map, "0 %u 1", gid);
            write_map("/proc/self/gid_map", map);
        } else if (unshare(CLONE_NEWNS) < 0) {
            _exit(91);
        }
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
        char opts[512], p[256], text[2048];
        snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s,userxattr", lower, upper,
                 work);
        if (mount("overlay", merged, "overlay", 0, opts) < 0) {
            fprintf(stderr, "overlay: %s\n", strerror(errno));
            _exit(92);
        }
        for (int k = 0; k < changed; k++) {
            int i = (int)((long)k * files / changed);
            snprintf(p, sizeof p, "%s/d%04d/f%03d.txt", merged, i / PER_DIR, i % PER_DIR);
            file_text(text, sizeof text, i, true);
            int fd = open(p, O_WRONLY | O_TRUNC);
            if (fd < 0 || write(fd, text, strlen(text)) < 0)
                _exit(93);
            close(fd);
        }
        _exit(0);
    }
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int time_review(int runs, uint64_t max_bytes, int expect, const char *what)
{
    struct ws_mount m = {.source_fd = open(lower, O_PATH | O_DIRECTORY | O_CLOEXEC),
                         .source = lower,
                         .target = "/workspace",
                         .upper = upper,
                         .owner_uid = -1,
                         .owner_gid = -1};
    struct ws_options o = {.since_ns = now_wall_ms() * 1000000ll, .xattr_prefix = "user.overlay."};
    double *t = calloc((size_t)runs, sizeof *t);
    size_t found = 0, bytes = 0;
    for (int r = 0; r < runs; r++) {
        struct mcp_error err;
        double t0 = now_ms();
        json_t *res = ws_review(&m, 1, &o, NULL, 0, max_bytes, &err);
        t[r] = now_ms() - t0;
        if (res == NULL) {
            fprintf(stderr, "review: %s\n", err.msg);
            return -1;
        }
        found = json_array_size(json_object_get(res, "changes"));
        bytes = (size_t)json_integer_value(json_object_get(res, "diff_bytes"));
        json_decref(res);
    }
    close(m.source_fd);
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    printf("%-34s median %.2f ms (min %.2f, max %.2f, %d runs): %zu changes, %zu diff bytes\n",
           what, t[runs / 2], t[0], t[runs - 1], runs, found, bytes);
    free(t);
    if ((int)found != expect) {
        fprintf(stderr, "FAIL: %zu changes found, %d made\n", found, expect);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int files = 50000, changed = 100, runs = 21;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            files = 2000, changed = 20, runs = 3;
        else if (i + 1 < argc && strcmp(argv[i], "--files") == 0)
            files = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--changed") == 0)
            changed = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0)
            runs = atoi(argv[++i]);
    }
    snprintf(root, sizeof root, "/tmp/wsbench-XXXXXX");
    if (mkdtemp(root) == NULL)
        return 1;
    snprintf(lower, sizeof lower, "%s/lower", root);
    snprintf(upper, sizeof upper, "%s/upper", root);
    snprintf(work, sizeof work, "%s/work", root);
    snprintf(merged, sizeof merged, "%s/merged", root);
    int rc = 1;
    if (mkdir(lower, 0755) == 0 && mkdir(upper, 0755) == 0 && mkdir(work, 0755) == 0 &&
        mkdir(merged, 0755) == 0 && make_tree(files) == 0 && change_files(files, changed) == 0) {
        printf("tree: %d files in %d directories, %d changed through the overlay\n", files,
               (files + PER_DIR - 1) / PER_DIR, changed);
        rc = time_review(runs, 0, changed, "review (list + first 16 KiB page)") < 0 ||
             time_review(runs, 1u << 20, changed, "review (list + whole diff)") < 0;
    } else {
        fprintf(stderr, "FAIL: could not set up the tree or the overlay: %s\n", strerror(errno));
    }
    if (rmtree(root) < 0)
        fprintf(stderr, "could not remove %s\n", root);
    return rc;
}
