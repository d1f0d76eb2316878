/* Interactive commands (issues 34 and 35): one byte's round trip (command_input, then its echo
 * through the exec observer) to `cat` in a local sandbox, with stdin a pipe and on a pty,
 * against honest floors on the host in the same run (the same byte through a pipe to a host
 * `cat`, and through a host pty's line discipline); and a command through a live shell against
 * run_command. All rounds run round-robin, so load from other work hits every mode alike.
 *
 * Usage: bench_proc [-n ITER] [--quick]   (prints a markdown table; asserts nothing)
 * ITER is at most 3000: the ptys' line buffers (4096 bytes) hold every byte sent, unread. */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

#include "harness.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "proc_driver.h"

#define WAIT_MS 10000

enum { M_PIPE_FLOOR, M_PTY_FLOOR, M_PIPE, M_PTY, M_RUN_TRUE, M_SESSION, M_COUNT };
static const char *const mode_names[M_COUNT] = {
    "floor: 1 byte to a host `cat` through a pipe, and back",
    "floor: 1 byte to a host pty, its echo",
    "sandbox `cat`, stdin \"pipe\": command_input of 1 byte to its echo",
    "sandbox `cat` on a pty: command_input of 1 byte (a keystroke) to its echo",
    "run_command `/bin/true` (exec to on_done)",
    "`/bin/true` through a live `sh` (stdin \"pipe\"): input to its marker's echo",
};

struct bench {
    struct harness h;
    char *sbx;
    int host_in, host_out, host_pty; /* floors */
    pid_t host_cat;
    struct proc pipe_cat, pty_cat, shell;
    int round;
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return n ? v[i] : 0;
}

/* One byte there and back on fds (write to w, read from r). */
static double fd_round_trip(int w, int r)
{
    char c = 'a', back;
    struct pollfd p = {.fd = r, .events = POLLIN};
    double t0 = now_us();
    if (write(w, &c, 1) != 1 || poll(&p, 1, WAIT_MS) != 1 || read(r, &back, 1) != 1)
        return -1;
    return now_us() - t0;
}

static int open_host_floors(struct bench *b)
{
    int in[2], out[2];
    if (pipe(in) < 0 || pipe(out) < 0)
        return -1;
    b->host_cat = fork();
    if (b->host_cat == 0) {
        dup2(in[0], 0), dup2(out[1], 1);
        execl("/bin/cat", "cat", (char *)NULL);
        _exit(127);
    }
    close(in[0]), close(out[1]);
    b->host_in = in[1], b->host_out = out[0];
    b->host_pty = posix_openpt(O_RDWR | O_NOCTTY);
    if (b->host_pty < 0 || grantpt(b->host_pty) < 0 || unlockpt(b->host_pty) < 0)
        return -1;
    return open(ptsname(b->host_pty), O_RDWR | O_NOCTTY) < 0 ? -1 : 0; /* kept open */
}

/* command_input of one byte to p, timed to the moment its echo reaches the observer. */
static double input_round_trip(struct bench *b, struct proc *p)
{
    size_t before = p->out.len;
    harness_reset(&b->h);
    double t0 = now_us();
    if (b->h.be->ops->command_input(b->h.be, b->sbx, p->id, "a", 1, false, harness_cb, &b->h,
                                    &b->h.err) < 0)
        return -1;
    double t = -1;
    while (t < 0 || !b->h.done) {
        if (uv_run(&b->h.loop, UV_RUN_ONCE) == 0 && !b->h.done)
            return -1;
        if (t < 0 && p->out.len > before)
            t = now_us() - t0;
    }
    return b->h.failed ? -1 : t;
}

static double run_true(struct bench *b)
{
    struct harness_exec x;
    double t0 = now_us();
    int rc = harness_exec(&b->h, b->sbx, "/bin/true", &x);
    double t = now_us() - t0;
    harness_exec_release(&x);
    return rc == 0 ? t : -1;
}

static double session_true(struct bench *b)
{
    char line[64], marker[32];
    snprintf(marker, sizeof marker, "M%d.", ++b->round);
    snprintf(line, sizeof line, "/bin/true; echo %s\n", marker);
    double t0 = now_us();
    if (proc_input(&b->h, b->sbx, b->shell.id, line, strlen(line), false) < 0 ||
        !proc_wait_output(&b->shell, marker, WAIT_MS))
        return -1;
    return now_us() - t0;
}

static double sample(struct bench *b, int mode)
{
    switch (mode) {
    case M_PIPE_FLOOR:
        return fd_round_trip(b->host_in, b->host_out);
    case M_PTY_FLOOR:
        return fd_round_trip(b->host_pty, b->host_pty);
    case M_PIPE:
        return input_round_trip(b, &b->pipe_cat);
    case M_PTY:
        return input_round_trip(b, &b->pty_cat);
    case M_RUN_TRUE:
        return run_true(b);
    default:
        return session_true(b);
    }
}

static int setup(struct bench *b)
{
    int rc = harness_open(&b->h);
    if (rc != 0)
        return rc;
    b->sbx = harness_create(&b->h, NULL);
    if (b->sbx == NULL || open_host_floors(b) < 0 ||
        proc_start(&b->pipe_cat, &b->h, b->sbx, "cat", 0, 0) < 0 ||
        proc_start(&b->pty_cat, &b->h, b->sbx, "cat", 24, 80) < 0 ||
        proc_start(&b->shell, &b->h, b->sbx, "/bin/sh", 0, 0) < 0) {
        fprintf(stderr, "bench_proc: setup failed: %s\n", b->h.err.msg);
        return 1;
    }
    return 0;
}

static void print_table(double *s[M_COUNT], int n[M_COUNT])
{
    printf("| mode | n | p50 (us) | p90 (us) | p99 (us) |\n|---|---|---|---|---|\n");
    for (int m = 0; m < M_COUNT; m++)
        printf("| %s | %d | %.0f | %.0f | %.0f |\n", mode_names[m], n[m], pct(s[m], n[m], 0.5),
               pct(s[m], n[m], 0.9), pct(s[m], n[m], 0.99));
}

int main(int argc, char **argv)
{
    static struct bench b;
    int iterations = 500;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            iterations = 20;
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            iterations = atoi(argv[++i]);
    }
    if (iterations < 1 || iterations > 3000)
        iterations = 3000;
    int rc = setup(&b);
    if (rc != 0)
        return rc;
    double *s[M_COUNT];
    int n[M_COUNT] = {0}, failures = 0;
    for (int m = 0; m < M_COUNT; m++)
        s[m] = xcalloc((size_t)iterations, sizeof(double));
    for (int i = 0; i < iterations + 5; i++) /* the first 5 rounds warm up */
        for (int m = 0; m < M_COUNT; m++) {
            double t = sample(&b, m);
            if (t < 0)
                failures++;
            else if (i >= 5)
                s[m][n[m]++] = t;
        }
    print_table(s, n);
    proc_input(&b.h, b.sbx, b.pipe_cat.id, NULL, 0, true);
    proc_input(&b.h, b.sbx, b.shell.id, NULL, 0, true);
    proc_kill(&b.h, b.sbx, b.pty_cat.id, 9);
    harness_destroy(&b.h, b.sbx);
    proc_release(&b.pipe_cat), proc_release(&b.pty_cat), proc_release(&b.shell);
    kill(b.host_cat, 9);
    waitpid(b.host_cat, NULL, 0);
    for (int m = 0; m < M_COUNT; m++)
        free(s[m]);
    free(b.sbx);
    harness_close(&b.h);
    if (failures)
        fprintf(stderr, "bench_proc: %d samples failed\n", failures);
    return failures ? 1 : 0;
}
