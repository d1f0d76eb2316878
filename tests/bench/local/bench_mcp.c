/* The local benchmark's MCP phase: what an agent pays, measured from outside through
 * `mcpbox serve` over stdio by a minimal raw JSON-RPC client (one write and one read per call, no
 * JSON library), beside floors measured in a small separate process:
 *
 *   fork+exec / posix_spawn of /bin/true, and the unshare CLI, run by bench_floor_helper
 *   ping                 an MCP round trip that does nothing: the client and transport's share
 *   run_command "true"   in a sandbox that is already running
 *   create + first run   create_sandbox then run_command "true", then destroy_sandbox (timed
 *                        too): a burst of BURST cycles 20 ms apart (an agent that makes sandboxes
 *                        quickly: more than the pool holds), one cycle 300 ms after the last
 *                        (the pool has refilled), and one on a server with the pool off (cold)
 *
 * Every mode runs once per round, round-robin, so load from elsewhere hits them alike. Prints
 * Markdown; asserts nothing about times. */
#include "bench_mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/rmtree.h"

#ifndef BENCH_MCPBOX
#error "BENCH_MCPBOX (the mcpbox binary) must be defined by the build"
#endif
#ifndef BENCH_FLOOR_HELPER
#error "BENCH_FLOOR_HELPER (bench_floor_helper) must be defined by the build"
#endif

extern char **environ;

#define MCP_WARMUP_ROUNDS 3
#define BURST 6             /* cycles 20 ms apart: three times the default pool */
#define BURST_GAP_US 20000
#define REFILLED_GAP_US 300000
#define COLD_GAP_US 100000 /* before the cold cycle: the pooled server is quiet again */
#define READ_CHUNK 65536

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void sleep_us(double us)
{
    struct timespec ts = {(time_t)(us / 1e6), (long)((us - (double)(time_t)(us / 1e6) * 1e6) * 1e3)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* Starts argv with its stdin and stdout on pipes: *to writes its stdin, *from reads its stdout. */
static pid_t spawn_piped(char *const *argv, int *to, int *from)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]), close(in[1]);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]), close(out[1]);
    if (rc != 0) {
        close(in[1]), close(out[0]);
        return -1;
    }
    *to = in[1], *from = out[0];
    return pid;
}

static void reap(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
}

/* ---- the small process: the floors ---------------------------------------------------------- */

int small_floor_start(struct small_floor *f)
{
    char *argv[] = {(char *)BENCH_FLOOR_HELPER, NULL};
    f->pid = spawn_piped(argv, &f->to, &f->from);
    return f->pid > 0 ? 0 : -1;
}

double small_floor_run(struct small_floor *f, char op)
{
    char line[64];
    size_t len = 0;
    if (write(f->to, &op, 1) != 1)
        return -1;
    while (len < sizeof line - 1 && (len == 0 || line[len - 1] != '\n')) {
        ssize_t n = read(f->from, line + len, sizeof line - 1 - len);
        if (n <= 0)
            return -1;
        len += (size_t)n;
    }
    line[len] = '\0';
    double us;
    int ok;
    return sscanf(line, "%lf %d", &us, &ok) == 2 && ok ? us : -1;
}

void small_floor_stop(struct small_floor *f)
{
    if (f->pid <= 0)
        return;
    close(f->to), close(f->from);
    reap(f->pid);
    f->pid = 0;
}

/* ---- a minimal MCP client over stdio ------------------------------------------------------ */

struct mcp_peer {
    pid_t pid;
    int to, from;
    char *buf; /* what was read and not yet consumed */
    size_t len, cap;
    long next_id;
    char dir[64];  /* its state directory */
    char *reply;   /* the last reply line */
};

/* Sends one line; returns the reply line with this request's id (notifications are skipped). */
static const char *peer_rpc(struct mcp_peer *p, const char *method, const char *params)
{
    long id = ++p->next_id;
    char head[160];
    int hn = snprintf(head, sizeof head, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"%s\",\"params\":",
                      id, method);
    size_t plen = strlen(params);
    char *msg = malloc((size_t)hn + plen + 3);
    memcpy(msg, head, (size_t)hn);
    memcpy(msg + hn, params, plen);
    memcpy(msg + hn + plen, "}\n", 2);
    ssize_t want = hn + (ssize_t)plen + 2, w = write(p->to, msg, (size_t)want);
    free(msg);
    if (w != want)
        return NULL;
    char key[40];
    int kn = snprintf(key, sizeof key, "\"id\":%ld", id);
    for (;;) {
        char *nl = p->len ? memchr(p->buf, '\n', p->len) : NULL;
        if (nl != NULL) {
            size_t ll = (size_t)(nl - p->buf) + 1;
            *nl = '\0';
            char *hit = strstr(p->buf, key);
            bool mine = hit != NULL && (hit[kn] == ',' || hit[kn] == '}');
            if (mine) {
                free(p->reply);
                p->reply = strdup(p->buf);
            }
            memmove(p->buf, p->buf + ll, p->len - ll);
            p->len -= ll;
            if (mine)
                return p->reply;
            continue;
        }
        if (p->cap - p->len < READ_CHUNK) {
            p->cap = p->cap * 2 + READ_CHUNK;
            p->buf = realloc(p->buf, p->cap);
        }
        ssize_t n = read(p->from, p->buf + p->len, p->cap - p->len);
        if (n <= 0)
            return NULL;
        p->len += (size_t)n;
    }
}

static int peer_start(struct mcp_peer *p, int pool)
{
    memset(p, 0, sizeof *p);
    snprintf(p->dir, sizeof p->dir, "/tmp/mbxm-XXXXXX");
    if (mkdtemp(p->dir) == NULL)
        return -1;
    char pool_s[16];
    snprintf(pool_s, sizeof pool_s, "%d", pool);
    char *argv[] = {(char *)BENCH_MCPBOX, (char *)"serve", (char *)"--state-dir", p->dir,
                    (char *)"--local-pool", pool_s, (char *)"--log-level", (char *)"error", NULL};
    p->pid = spawn_piped(argv, &p->to, &p->from);
    if (p->pid <= 0)
        return -1;
    const char *r = peer_rpc(p, "initialize",
                             "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                             "\"clientInfo\":{\"name\":\"bench_mcp\",\"version\":\"1\"}}");
    static const char initialized[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    if (r == NULL || strstr(r, "\"result\"") == NULL ||
        write(p->to, initialized, sizeof initialized - 1) != (ssize_t)sizeof initialized - 1)
        return -1;
    return 0;
}

static void peer_stop(struct mcp_peer *p)
{
    if (p->pid > 0) {
        close(p->to), close(p->from); /* EOF on stdin: the server destroys its pool and exits */
        reap(p->pid);
        p->pid = 0;
    }
    free(p->buf);
    free(p->reply);
    if (p->dir[0]) {
        if (rmtree(p->dir) < 0)
            fprintf(stderr, "could not remove %s\n", p->dir);
    }
}

/* tools/call; returns the client-side microseconds, or -1 when the call failed (the reply is in
 * p->reply). */
static double peer_tool(struct mcp_peer *p, const char *tool, const char *args)
{
    char params[512];
    snprintf(params, sizeof params, "{\"name\":\"%s\",\"arguments\":%s}", tool, args);
    double t0 = now_us();
    const char *r = peer_rpc(p, "tools/call", params);
    double dt = now_us() - t0;
    if (r == NULL || strstr(r, "\"result\"") == NULL || strstr(r, "\"isError\":true") != NULL) {
        fprintf(stderr, "bench_mcp: %s failed: %.300s\n", tool, r ? r : "(no reply)");
        return -1;
    }
    return dt;
}

/* The sandbox_id of structuredContent (the text block's copy is escaped, so it does not match). */
static int reply_sandbox_id(const char *reply, char *id, size_t size)
{
    const char *k = reply ? strstr(reply, "\"sandbox_id\":\"") : NULL;
    if (k == NULL)
        return -1;
    k += strlen("\"sandbox_id\":\"");
    size_t n = strcspn(k, "\"");
    if (n == 0 || n >= size)
        return -1;
    memcpy(id, k, n);
    id[n] = '\0';
    return 0;
}

/* ---- samples -------------------------------------------------------------------------------- */

struct series {
    const char *name;
    double *v;
    int n, failures;
};

static void series_add(struct series *s, double us, bool record)
{
    if (us < 0)
        s->failures++;
    else if (record)
        s->v[s->n++] = us;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(struct series *s, double p)
{
    if (s->n <= 0)
        return 0;
    qsort(s->v, (size_t)s->n, sizeof(double), cmp_double);
    int i = (int)(p / 100.0 * (s->n - 1) + 0.5);
    return s->v[i < s->n ? i : s->n - 1];
}

/* create + first exec, split into its parts, and the destroy after it */
struct cycle_stats {
    struct series total, create, exec, destroy;
};

enum { S_FORK, S_SPAWN, S_UNSHARE, S_PING, S_EXEC, S_COUNT };
enum { C_BURST, C_REFILLED, C_COLD, C_COUNT };

struct mcp_bench {
    int rounds;
    bool record;
    struct small_floor floor;
    struct mcp_peer pooled, cold;
    char live_id[64];
    struct series s[S_COUNT];
    struct cycle_stats c[C_COUNT];
    struct series burst_pos[BURST]; /* create + first exec by position in the burst */
};

static void series_init(struct series *s, const char *name, int cap)
{
    s->name = name;
    s->v = calloc((size_t)cap, sizeof(double));
}

static void cycle_init(struct cycle_stats *c, const char *name, int cap)
{
    series_init(&c->total, name, cap);
    series_init(&c->create, "create", cap);
    series_init(&c->exec, "first exec", cap);
    series_init(&c->destroy, "destroy", cap);
}

static void cycle_free(struct cycle_stats *c)
{
    free(c->total.v), free(c->create.v), free(c->exec.v), free(c->destroy.v);
}

/* create_sandbox, run_command "true" in it, destroy_sandbox; false on a failure. */
static bool cycle(struct mcp_bench *b, struct mcp_peer *p, struct cycle_stats *c, struct series *pos)
{
    char id[64], args[160];
    double tc = peer_tool(p, "create_sandbox", "{}");
    if (tc < 0 || reply_sandbox_id(p->reply, id, sizeof id) < 0) {
        c->total.failures++;
        return false;
    }
    snprintf(args, sizeof args, "{\"sandbox_id\":\"%s\",\"command\":\"true\"}", id);
    double te = peer_tool(p, "run_command", args);
    snprintf(args, sizeof args, "{\"sandbox_id\":\"%s\"}", id);
    double td = peer_tool(p, "destroy_sandbox", args);
    series_add(&c->create, tc, b->record);
    series_add(&c->exec, te, b->record);
    series_add(&c->destroy, td, b->record);
    series_add(&c->total, te < 0 ? -1 : tc + te, b->record);
    if (pos != NULL)
        series_add(pos, te < 0 ? -1 : tc + te, b->record);
    return te >= 0 && td >= 0;
}

static void one_round(struct mcp_bench *b)
{
    char args[160];
    series_add(&b->s[S_FORK], small_floor_run(&b->floor, 'f'), b->record);
    series_add(&b->s[S_SPAWN], small_floor_run(&b->floor, 's'), b->record);
    series_add(&b->s[S_UNSHARE], small_floor_run(&b->floor, 'u'), b->record);
    double t0 = now_us();
    const char *r = peer_rpc(&b->pooled, "ping", "{}");
    series_add(&b->s[S_PING], r != NULL && strstr(r, "\"result\"") ? now_us() - t0 : -1, b->record);
    snprintf(args, sizeof args, "{\"sandbox_id\":\"%s\",\"command\":\"true\"}", b->live_id);
    series_add(&b->s[S_EXEC], peer_tool(&b->pooled, "run_command", args), b->record);
    for (int i = 0; i < BURST; i++) {
        cycle(b, &b->pooled, &b->c[C_BURST], &b->burst_pos[i]);
        sleep_us(BURST_GAP_US);
    }
    sleep_us(REFILLED_GAP_US);
    cycle(b, &b->pooled, &b->c[C_REFILLED], NULL);
    /* The pooled server refills after that cycle's answers, and its spawner threads then make
     * their next sets (v1 cgroup joins, whose grace periods hold up every fork on the host):
     * the cold server, which stands for one with no other server beside it, is measured once
     * that is over, as the floors are. */
    sleep_us(COLD_GAP_US);
    cycle(b, &b->cold, &b->c[C_COLD], NULL);
    /* Like the burst's gaps: a destroy's release and a refill run after the answers, and the
     * next round's floors and run_command should not be measured inside them. */
    sleep_us(BURST_GAP_US);
}

/* ---- report --------------------------------------------------------------------------------- */

static void print_row(struct series *s, double floor50, double unshare50)
{
    double p50 = pct(s, 50);
    printf("| %s | %.0f | %.0f | %.0f | %.2fx | %.2fx | %d |\n", s->name, p50, pct(s, 90),
           pct(s, 99), floor50 > 0 ? p50 / floor50 : 0, unshare50 > 0 ? p50 / unshare50 : 0,
           s->failures);
}

static const char *met(bool ok)
{
    return ok ? "met" : "not met";
}

static void print_report(struct mcp_bench *b)
{
    printf("\n### Through MCP: `mcpbox serve` over stdio, against floors in a small process\n\n");
    printf("%d rounds after %d warm-up rounds, round-robin; microseconds on the client's clock. "
           "The floors are timed inside `bench_floor_helper`, a small separate process; the MCP "
           "rows by a raw JSON-RPC client (one write and one read per call). A burst is %d "
           "create + first run + destroy cycles with 20 ms between them (default pool of 2); "
           "\"300 ms apart\" is one cycle after a 300 ms pause (the pool has refilled); \"cold\" "
           "is a second server with `--local-pool 0`, measured 100 ms after the first server's "
           "last cycle (its refill and its spawners' next sets are done by then).\n\n",
           b->rounds, MCP_WARMUP_ROUNDS, BURST);
    double fork50 = pct(&b->s[S_FORK], 50), unshare50 = pct(&b->s[S_UNSHARE], 50);
    printf("| mode | p50 | p90 | p99 | p50 / fork+exec | p50 / unshare | failures |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < S_COUNT; i++)
        print_row(&b->s[i], fork50, unshare50);
    for (int i = 0; i < C_COUNT; i++)
        print_row(&b->c[i].total, fork50, unshare50);
    printf("\n| create + first run_command | create p50 / p99 | first run_command p50 / p99 | "
           "destroy p50 / p99 |\n|---|---|---|---|\n");
    for (int i = 0; i < C_COUNT; i++) {
        struct cycle_stats *c = &b->c[i];
        printf("| %s | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f |\n", c->total.name,
               pct(&c->create, 50), pct(&c->create, 99), pct(&c->exec, 50), pct(&c->exec, 99),
               pct(&c->destroy, 50), pct(&c->destroy, 99));
    }
    printf("\nBurst, create + first run_command by position (p50, us):");
    for (int i = 0; i < BURST; i++)
        printf("%s %.0f", i ? " /" : "", pct(&b->burst_pos[i], 50));
    double exec50 = pct(&b->s[S_EXEC], 50), burst50 = pct(&b->c[C_BURST].total, 50);
    double cold50 = pct(&b->c[C_COLD].total, 50);
    double destroy50 = 0;
    for (int i = 0; i < C_COUNT; i++)
        destroy50 = pct(&b->c[i].destroy, 50) > destroy50 ? pct(&b->c[i].destroy, 50) : destroy50;
    printf(".\n\nGoals (issue 19), p50:\n\n");
    printf("- run_command \"true\" in a live sandbox at most 1.5x fork+exec from a small process: "
           "%.0f / %.0f us = %.2fx: %s\n", exec50, fork50, fork50 > 0 ? exec50 / fork50 : 0,
           met(exec50 <= 1.5 * fork50));
    printf("- create + first run_command, 20 ms apart, at most 1.0x the unshare CLI: "
           "%.0f / %.0f us = %.2fx: %s\n", burst50, unshare50,
           unshare50 > 0 ? burst50 / unshare50 : 0, met(burst50 <= unshare50));
    printf("- the same cold (pool off) at most 1.2x: %.0f / %.0f us = %.2fx: %s\n", cold50,
           unshare50, unshare50 > 0 ? cold50 / unshare50 : 0, met(cold50 <= 1.2 * unshare50));
    printf("- destroy_sandbox under 500 us (the slowest row's p50): %.0f us: %s\n", destroy50,
           met(destroy50 < 500));
}

/* ---- the phase ------------------------------------------------------------------------------ */

static const char *const series_names[S_COUNT] = {
    [S_FORK] = "fork+exec /bin/true from a small process (floor)",
    [S_SPAWN] = "posix_spawn /bin/true from a small process",
    [S_UNSHARE] = "unshare -U -r -p -f -m -n -u -i -C --mount-proc true (from the small process)",
    [S_PING] = "MCP ping (client + stdio + JSON-RPC round trip)",
    [S_EXEC] = "MCP run_command \"true\" in a live sandbox",
};
static const char *const cycle_names[C_COUNT] = {
    [C_BURST] = "MCP create_sandbox + first run_command, 20 ms apart (burst)",
    [C_REFILLED] = "MCP create_sandbox + first run_command, 300 ms apart",
    [C_COLD] = "MCP create_sandbox + first run_command, cold (pool off)",
};

static int open_peers(struct mcp_bench *b)
{
    if (small_floor_start(&b->floor) < 0 || small_floor_run(&b->floor, 'f') < 0) {
        fprintf(stderr, "bench_mcp: cannot run %s\n", BENCH_FLOOR_HELPER);
        return 1;
    }
    if (peer_start(&b->pooled, 2) < 0 || peer_start(&b->cold, 0) < 0) {
        fprintf(stderr, "bench_mcp: cannot start %s serve\n", BENCH_MCPBOX);
        return 1;
    }
    if (peer_tool(&b->pooled, "create_sandbox", "{}") < 0 ||
        reply_sandbox_id(b->pooled.reply, b->live_id, sizeof b->live_id) < 0)
        return 77; /* this host cannot make sandboxes */
    return 0;
}

int bench_mcp_phase(const struct bench_mcp_opts *o)
{
    struct mcp_bench b = {.rounds = o->iterations};
    int cap = b.rounds * BURST;
    for (int i = 0; i < S_COUNT; i++)
        series_init(&b.s[i], series_names[i], cap);
    for (int i = 0; i < C_COUNT; i++)
        cycle_init(&b.c[i], cycle_names[i], cap);
    for (int i = 0; i < BURST; i++)
        series_init(&b.burst_pos[i], "", cap);
    int rc = open_peers(&b);
    if (rc == 0) {
        for (int r = -MCP_WARMUP_ROUNDS; r < b.rounds; r++) {
            b.record = r >= 0;
            one_round(&b);
        }
        print_report(&b);
        char args[160];
        snprintf(args, sizeof args, "{\"sandbox_id\":\"%s\"}", b.live_id);
        peer_tool(&b.pooled, "destroy_sandbox", args);
    }
    peer_stop(&b.pooled);
    peer_stop(&b.cold);
    small_floor_stop(&b.floor);
    for (int i = 0; i < S_COUNT; i++)
        free(b.s[i].v);
    for (int i = 0; i < C_COUNT; i++)
        cycle_free(&b.c[i]);
    for (int i = 0; i < BURST; i++)
        free(b.burst_pos[i].v);
    return rc;
}
