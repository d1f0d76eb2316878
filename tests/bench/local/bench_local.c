/* Local sandbox benchmark: side by side, round-robin in one process (so background effects such
 * as netns teardown land on every mode alike):
 *
 *   floor        fork + execve /bin/true + waitpid
 *   unshare      unshare -U -r -p -f -m -n -u -i -C --mount-proc /bin/true
 *   bwrap        bwrap with equivalent options and mcpbox's own seccomp filter (if installed)
 *   create+exec  mcpbox: create a sandbox and run /bin/true in it (destroy untimed)
 *   create       mcpbox: create alone (how create + first exec splits)
 *   exec-live    mcpbox: run /bin/true in a sandbox that is already running
 *
 * then the host memory of K idle sandboxes (agent RSS, cgroup memory usage, MemAvailable drop)
 * and M live sandboxes at once with the create latency percentiles.
 *
 * Usage: bench_local [-n ITER] [-k IDLE] [-m LIVE] [--quick]
 * Prints a Markdown report on stdout. It asserts nothing about times. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/local/local_internal.h"
#include "bench_local.h"
#include "harness.h"
#include "mcp/base/cleanup.h"
#include "mcp/base/xalloc.h"
#include "mcp/store/store.h"

extern char **environ;

#define BWRAP_SECCOMP_FD 10
#define WARMUP_ROUNDS 5

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ---- the external modes ------------------------------------------------------------------- */

static const char *const unshare_argv[] = {"unshare", "--user", "--map-root-user", "--pid",
                                           "--fork", "--mount", "--net", "--uts", "--ipc",
                                           "--cgroup", "--mount-proc", "/bin/true", NULL};

static const char *const bwrap_argv[] = {
    "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
    "--ro-bind", "/etc", "/etc", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
    "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
    "--dev", "/dev", "--tmpfs", "/tmp", "--hostname", "sandbox", "--cap-drop", "ALL",
    "--seccomp", "10", "/bin/true", NULL};

static int spawn_wait(const char *const *argv, bool search)
{
    pid_t pid;
    char *const *av = (char *const *)argv;
    int rc = search ? posix_spawnp(&pid, argv[0], NULL, NULL, av, environ)
                    : posix_spawn(&pid, argv[0], NULL, NULL, av, environ);
    if (rc != 0)
        return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int mode_floor(struct bench *b)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    int status;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? 0 : -1;
}

static int mode_unshare(struct bench *b)
{
    return spawn_wait(unshare_argv, true);
}

/* bwrap reads the BPF from fd 10 each run: rewind the memfd first. */
static int mode_bwrap(struct bench *b)
{
    lseek(b->bpf_fd, 0, SEEK_SET);
    return spawn_wait(bwrap_argv, true);
}

static int bwrap_setup(struct bench *b)
{
    struct local_seccomp sc = {0};
    struct mcp_error err = {0};
    if (local_seccomp_build(&sc, &err) < 0) {
        fprintf(stderr, "seccomp: %s\n", err.msg);
        return -1;
    }
    int fd = memfd_create("bench-bpf", 0);
    size_t len = sc.len * sizeof(*sc.filter);
    int ok = fd >= 0 && write(fd, sc.filter, len) == (ssize_t)len;
    local_seccomp_free(&sc);
    if (!ok || dup2(fd, BWRAP_SECCOMP_FD) < 0)
        return -1;
    if (fd != BWRAP_SECCOMP_FD)
        close(fd);
    b->bpf_fd = BWRAP_SECCOMP_FD;
    return mode_bwrap(b); /* one trial run: is bwrap usable here? */
}

/* ---- the mcpbox modes -------------------------------------------------------------------- */

static int exec_true(struct bench *b, const char *id)
{
    struct harness_exec x;
    int rc = harness_exec(&b->h, id, "/bin/true", &x);
    rc = rc == 0 && x.exit_code == 0 ? 0 : -1;
    harness_exec_release(&x);
    return rc;
}

static int mode_create_exec(struct bench *b)
{
    double t0 = now_us();
    char *id = harness_create(&b->h, NULL);
    double t1 = now_us();
    int rc = id != NULL ? exec_true(b, id) : -1;
    b->pending_destroy = id; /* destroyed after the clock stops */
    if (rc == 0 && b->n_split < b->iterations) { /* warm-up rounds overwrite slot 0 */
        b->split_create[b->n_split] = t1 - t0;
        b->split_exec[b->n_split] = now_us() - t1;
    }
    return rc;
}

/* create alone, to split create + first exec into its two parts */
static int mode_create(struct bench *b)
{
    b->pending_destroy = harness_create(&b->h, NULL);
    return b->pending_destroy != NULL ? 0 : -1;
}

static int mode_exec_live(struct bench *b)
{
    return exec_true(b, b->live_id);
}

static void after_sample(struct bench *b)
{
    if (b->pending_destroy != NULL) {
        harness_destroy(&b->h, b->pending_destroy);
        free(b->pending_destroy);
        b->pending_destroy = NULL;
    }
}

/* ---- round-robin timing ------------------------------------------------------------------ */

static void run_modes(struct bench *b, struct bench_mode *modes, size_t nmodes)
{
    for (int round = -WARMUP_ROUNDS; round < b->iterations; round++) {
        for (size_t m = 0; m < nmodes; m++) {
            if (!modes[m].enabled)
                continue;
            double t0 = now_us();
            int rc = modes[m].fn(b);
            double dt = now_us() - t0;
            after_sample(b);
            if (rc < 0)
                modes[m].failures++;
            else if (round >= 0)
                modes[m].samples[modes[m].n++] = dt;
            if (round >= 0 && rc == 0 && modes[m].fn == mode_create_exec)
                b->n_split++;
        }
    }
}

static void print_header(const struct bench *b)
{
    struct utsname u;
    uname(&u);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char load[64] = "?";
    FILE *f = fopen("/proc/loadavg", "re");
    if (f != NULL && fgets(load, sizeof(load), f) != NULL)
        load[strcspn(load, " ")] = '\0'; /* the 1-minute figure */
    if (f != NULL)
        fclose(f);
    printf("Host: Linux %s, %ld CPUs, load average %s at the start (the machine is shared). %d "
           "iterations per mode after %d warm-up rounds, round-robin in one process; times are "
           "microseconds.\n\n",
           u.release, cpus, load, b->iterations, WARMUP_ROUNDS);
}

int main(int argc, char **argv)
{
    xalloc_install();
    struct bench b = {.iterations = 200, .idle = 50, .live = 1000};
    if (bench_parse_args(&b, argc, argv) < 0)
        return 2;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max; /* every live sandbox holds a few descriptors */
    setrlimit(RLIMIT_NOFILE, &rl);
    int rc = harness_open(&b.h);
    if (rc != 0) {
        harness_close(&b.h);
        return rc == 77 ? 77 : 1;
    }
    b.live_id = harness_create(&b.h, NULL);
    if (b.live_id == NULL) {
        fprintf(stderr, "create: %s\n", b.h.err.msg);
        harness_close(&b.h);
        return 1;
    }
    struct bench_mode modes[] = {
        {"fork+exec /bin/true (floor)", mode_floor, true, NULL, 0, 0},
        {"unshare -U -r -p -f -m -n -u -i -C --mount-proc", mode_unshare, true, NULL, 0, 0},
        {"bwrap, equivalent options + mcpbox's seccomp BPF", mode_bwrap, bwrap_setup(&b) == 0, NULL, 0, 0},
        {"mcpbox create + first exec", mode_create_exec, true, NULL, 0, 0},
        {"mcpbox create alone (part of the above)", mode_create, true, NULL, 0, 0},
        {"mcpbox exec in a live sandbox", mode_exec_live, true, NULL, 0, 0},
    };
    for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
        modes[m].samples = xcalloc((size_t)b.iterations, sizeof(double));
    b.split_create = xcalloc((size_t)b.iterations, sizeof(double));
    b.split_exec = xcalloc((size_t)b.iterations, sizeof(double));
    print_header(&b);
    run_modes(&b, modes, ARRAY_SIZE(modes));
    bench_print_latency(&b, modes, ARRAY_SIZE(modes));
    harness_destroy(&b.h, b.live_id);
    free(b.live_id);
    free(b.split_create);
    free(b.split_exec);
    bench_memory(&b);
    bench_scale(&b);
    for (size_t m = 0; m < ARRAY_SIZE(modes); m++)
        free(modes[m].samples);
    harness_close(&b.h);
    return 0;
}
