/* Local sandbox benchmark: side by side, round-robin in one process (so background effects such
 * as netns teardown land on every mode alike):
 *
 *   floor        fork + execve /bin/true + waitpid, in a small separate process
 *   unshare      unshare -U -r -p -f -m -n -u -i -C --mount-proc /bin/true
 *   bwrap        bwrap with equivalent options and mcpbox's own seccomp filter (if installed)
 *   create+exec  mcpbox: create a sandbox and run /bin/true in it (destroy untimed), from the
 *                pool (the default configuration) and cold (pool off), and sustained: several
 *                back to back, faster than the pool refills
 *   create       mcpbox: create alone (how create + first exec splits)
 *   exec-live    mcpbox: run /bin/true in a sandbox that is already running
 *
 * then the host memory of K idle sandboxes (agent RSS, cgroup memory usage, MemAvailable drop)
 * and M live sandboxes at once with the create latency percentiles; then the same latencies
 * through `mcpbox serve` over stdio (bench_mcp.c).
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

#include "backend/local/local_seccomp.h"
#include "bench_local.h"
#include "bench_mcp.h"
#include "harness.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

extern char **environ;

#define BWRAP_SECCOMP_FD 10
#define WARMUP_ROUNDS 5
#define LOOP_TURNS 3 /* non-blocking loop turns between samples */
#define REFILL_WAIT_US 3e6

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

/* The floor runs in a small separate process (bench_floor_helper): this process maps a lot of
 * memory by now, and its own fork would copy those page tables (1.9 ms against 0.6 ms). */
static struct small_floor small_floor;

/* Self-timed: the helper's own clock, without the pipe round trip to it. */
static int mode_floor(struct bench *b)
{
    double us = small_floor_run(&small_floor, 'f');
    if (us >= 0 && !b->warmup)
        b->cur->samples[b->cur->n++] = us;
    return us < 0 ? -1 : 0;
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

static int exec_true(struct harness *h, const char *id)
{
    struct harness_exec x;
    int rc = harness_exec(h, id, "/bin/true", &x);
    rc = rc == 0 && x.exit_code == 0 ? 0 : -1;
    harness_exec_release(&x);
    return rc;
}

static void pend_destroy(struct bench *b, struct harness *h, char *id)
{
    b->pending_h = h;
    if (id != NULL && b->n_pending < SUSTAINED_BURST)
        b->pending[b->n_pending++] = id;
}

/* create + first exec on h; the split is recorded in the current mode. */
static int create_exec_on(struct bench *b, struct harness *h, double *out_us)
{
    double t0 = now_us();
    char *id = harness_create(h, NULL);
    double t1 = now_us();
    int rc = id != NULL ? exec_true(h, id) : -1;
    double t2 = now_us();
    pend_destroy(b, h, id); /* destroyed after the clock stops */
    struct bench_mode *m = b->cur;
    if (rc == 0 && !b->warmup && m->n_split < b->iterations * SUSTAINED_BURST) {
        m->split_create[m->n_split] = t1 - t0;
        m->split_exec[m->n_split++] = t2 - t1;
    }
    if (out_us)
        *out_us = t2 - t0;
    return rc;
}

static int mode_create_exec_pooled(struct bench *b)
{
    return create_exec_on(b, &b->h, NULL);
}

static int mode_create_exec_cold(struct bench *b)
{
    return create_exec_on(b, &b->cold, NULL);
}

/* A pooled record is ready once its "pooled" event is written (a refill under way has the
 * record already). */
static bool pool_ready(struct bench *b, const char *id)
{
    json_t *events = NULL;
    struct mcp_error err;
    bool ready = false;
    if (store_event_list(b->h.store, id, 16, &events, &err) < 0)
        return false;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        ready = ready || (kind != NULL && strcmp(kind, "pooled") == 0);
    }
    json_decref(events);
    return ready;
}

/* Untimed, after a burst: the pool refills (the server's loop runs, as it would while an agent
 * thinks), so that the next round's pooled rows measure a pool in its steady state. */
static void wait_pool_refilled(struct bench *b)
{
    double end = now_us() + REFILL_WAIT_US;
    while (now_us() < end) {
        uv_run(&b->h.loop, UV_RUN_NOWAIT);
        struct store_sandbox *list = NULL;
        size_t n = 0, pooled = 0;
        struct mcp_error err;
        if (store_sandbox_list(b->h.store, "local", NULL, &list, &n, &err) == 0)
            for (size_t i = 0; i < n; i++)
                pooled += strcmp(list[i].state, "pooled") == 0 && pool_ready(b, list[i].id);
        store_sandbox_list_free(list, n);
        if ((int)pooled >= b->pool)
            return;
        usleep(1000);
    }
}

/* SUSTAINED_BURST creates + first execs back to back on the pooled backend, starting with a
 * full pool: more than it holds, with no pause for it to refill; each one is a sample. */
static int mode_sustained(struct bench *b)
{
    int rc = 0;
    wait_pool_refilled(b); /* untimed: the burst starts with a full pool */
    for (int i = 0; i < SUSTAINED_BURST; i++) {
        double us;
        if (create_exec_on(b, &b->h, &us) < 0)
            rc = -1;
        else if (!b->warmup) {
            b->cur->samples[b->cur->n++] = us;
            b->burst[i][b->n_burst] = us;
        }
    }
    if (!b->warmup && rc == 0)
        b->n_burst++;
    b->refill_wait = true; /* after the destroys, untimed */
    return rc;
}

/* create alone, to split create + first exec into its two parts */
static int mode_create_pooled(struct bench *b)
{
    char *id = harness_create(&b->h, NULL);
    pend_destroy(b, &b->h, id);
    return id != NULL ? 0 : -1;
}

static int mode_create_cold(struct bench *b)
{
    char *id = harness_create(&b->cold, NULL);
    pend_destroy(b, &b->cold, id);
    return id != NULL ? 0 : -1;
}

static int mode_exec_live(struct bench *b)
{
    return exec_true(&b->h, b->live_id);
}

/* Untimed: destroys what the sample made, then lets both backends' loops turn once, as a
 * server's loop would between requests (the pool's refill progresses there). */
static void after_sample(struct bench *b)
{
    for (int i = 0; i < b->n_pending; i++) {
        harness_destroy(b->pending_h, b->pending[i]);
        free(b->pending[i]);
    }
    b->n_pending = 0;
    if (b->refill_wait)
        wait_pool_refilled(b);
    b->refill_wait = false;
    for (int i = 0; i < LOOP_TURNS; i++) {
        uv_run(&b->h.loop, UV_RUN_NOWAIT);
        uv_run(&b->cold.loop, UV_RUN_NOWAIT);
    }
}

/* ---- round-robin timing ------------------------------------------------------------------ */

static void run_modes(struct bench *b, struct bench_mode *modes, size_t nmodes)
{
    for (int round = -WARMUP_ROUNDS; round < b->iterations; round++) {
        b->warmup = round < 0;
        for (size_t m = 0; m < nmodes; m++) {
            if (!modes[m].enabled)
                continue;
            b->cur = &modes[m];
            double t0 = now_us();
            int rc = modes[m].fn(b);
            double dt = now_us() - t0;
            after_sample(b);
            if (rc < 0)
                modes[m].failures++;
            else if (round >= 0 && !modes[m].self_timed)
                modes[m].samples[modes[m].n++] = dt;
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

static int open_backends(struct bench *b)
{
    b->pool = harness_pool_size();
    int rc = harness_open_dir(&b->h, NULL, b->pool);
    if (rc == 0)
        rc = harness_open_dir(&b->cold, NULL, 0);
    if (rc != 0)
        return rc == 77 ? 77 : 1;
    b->live_id = harness_create(&b->h, NULL);
    if (b->live_id == NULL) {
        fprintf(stderr, "create: %s\n", b->h.err.msg);
        return 1;
    }
    return 0;
}

static char pooled_name[96], sustained_name[160];

static void setup_modes(struct bench *b, struct bench_mode *modes)
{
    snprintf(pooled_name, sizeof(pooled_name), "mcpbox create + first exec, pooled (pool of %d)",
             b->pool);
    snprintf(sustained_name, sizeof(sustained_name),
             "mcpbox create + first exec, sustained: %d back to back (pool of %d)",
             SUSTAINED_BURST, b->pool);
    bool bwrap_ok = bwrap_setup(b) == 0;
    struct bench_mode all[BM_COUNT] = {
        [BM_FLOOR] = {.name = "fork+exec /bin/true from a small process (floor)",
                      .fn = mode_floor, .self_timed = true},
        [BM_UNSHARE] = {.name = "unshare -U -r -p -f -m -n -u -i -C --mount-proc",
                        .fn = mode_unshare},
        [BM_BWRAP] = {.name = "bwrap, equivalent options + mcpbox's seccomp BPF",
                      .fn = mode_bwrap},
        [BM_POOLED] = {.name = pooled_name, .fn = mode_create_exec_pooled},
        [BM_COLD] = {.name = "mcpbox create + first exec, cold (pool off)",
                     .fn = mode_create_exec_cold},
        [BM_ALONE_POOLED] = {.name = "mcpbox create alone, pooled", .fn = mode_create_pooled},
        [BM_ALONE_COLD] = {.name = "mcpbox create alone, cold", .fn = mode_create_cold},
        [BM_SUSTAINED] = {.name = sustained_name, .fn = mode_sustained, .self_timed = true},
        [BM_LIVE] = {.name = "mcpbox exec in a live sandbox", .fn = mode_exec_live},
    };
    for (size_t m = 0; m < BM_COUNT; m++) {
        modes[m] = all[m];
        modes[m].enabled = m != BM_BWRAP || bwrap_ok;
    }
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
    int rc = small_floor_start(&small_floor) < 0 ? 1 : open_backends(&b);
    if (rc != 0) {
        harness_close(&b.h);
        if (b.cold.state_dir[0]) /* opened (or tried to) */
            harness_close(&b.cold);
        return rc;
    }
    struct bench_mode modes[BM_COUNT];
    setup_modes(&b, modes);
    size_t per_mode = (size_t)b.iterations * SUSTAINED_BURST;
    for (size_t m = 0; m < ARRAY_SIZE(modes); m++) {
        modes[m].samples = xcalloc(per_mode, sizeof(double));
        modes[m].split_create = xcalloc(per_mode, sizeof(double));
        modes[m].split_exec = xcalloc(per_mode, sizeof(double));
    }
    for (int i = 0; i < SUSTAINED_BURST; i++)
        b.burst[i] = xcalloc((size_t)b.iterations, sizeof(double));
    print_header(&b);
    run_modes(&b, modes, ARRAY_SIZE(modes));
    bench_print_latency(&b, modes, ARRAY_SIZE(modes));
    /* Before the memory and scale runs: the teardown of hundreds of sandboxes (their network
     * namespaces, cgroups) goes on in the kernel for seconds and doubled even the floor. */
    struct bench_mcp_opts mo = {.iterations = b.iterations};
    int mcp_rc = bench_mcp_phase(&mo);
    harness_destroy(&b.h, b.live_id);
    free(b.live_id);
    bench_memory(&b);
    bench_scale(&b, &b.h, pooled_name + strlen("mcpbox create + first exec, "));
    bench_scale(&b, &b.cold, "cold (pool off)");
    for (size_t m = 0; m < ARRAY_SIZE(modes); m++) {
        free(modes[m].samples);
        free(modes[m].split_create);
        free(modes[m].split_exec);
    }
    for (int i = 0; i < SUSTAINED_BURST; i++)
        free(b.burst[i]);
    harness_close(&b.h);
    harness_close(&b.cold);
    small_floor_stop(&small_floor);
    return mcp_rc == 1 ? 1 : 0;
}
