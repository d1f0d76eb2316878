/* The local benchmark's arguments, statistics, memory and scale runs, and report. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_local.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "lib/store/store.h"

#define IDLE_SETTLE_US 1000000 /* let idle sandboxes settle before measuring memory */

int bench_parse_args(struct bench *b, int argc, char **argv)
{
    static const struct option longopts[] = {{"quick", no_argument, NULL, 'q'},
                                             {NULL, 0, NULL, 0}};
    int opt;
    while ((opt = getopt_long(argc, argv, "n:k:m:q", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n': b->iterations = atoi(optarg); break;
        case 'k': b->idle = atoi(optarg); break;
        case 'm': b->live = atoi(optarg); break;
        case 'q': b->iterations = 5, b->idle = 3, b->live = 10; break;
        default:
            fprintf(stderr, "usage: %s [-n ITER] [-k IDLE] [-m LIVE] [--quick]\n", argv[0]);
            return -1;
        }
    }
    return b->iterations > 0 && b->idle > 0 && b->live > 0 ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_percentile(double *v, int n, double p)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    int i = (int)(p / 100.0 * (n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static double ratio(struct bench_mode *modes, enum bench_mode_id m, double base)
{
    return base > 0 ? bench_percentile(modes[m].samples, modes[m].n, 50) / base : 0;
}

void bench_print_latency(struct bench *b, struct bench_mode *modes, size_t n)
{
    double floor50 = bench_percentile(modes[0].samples, modes[0].n, 50);
    printf("| mode | p50 | p90 | p99 | mean | p50 / floor | failures |\n"
           "|---|---|---|---|---|---|---|\n");
    for (size_t m = 0; m < n; m++) {
        struct bench_mode *md = &modes[m];
        if (!md->enabled) {
            printf("| %s | skipped (not installed or not usable here) | | | | | |\n", md->name);
            continue;
        }
        double sum = 0;
        for (int i = 0; i < md->n; i++)
            sum += md->samples[i];
        double p50 = bench_percentile(md->samples, md->n, 50);
        printf("| %s | %.0f | %.0f | %.0f | %.0f | %.2fx | %d |\n", md->name, p50,
               bench_percentile(md->samples, md->n, 90), bench_percentile(md->samples, md->n, 99),
               md->n ? sum / md->n : 0, floor50 > 0 ? p50 / floor50 : 0, md->failures);
    }
    double unshare50 = bench_percentile(modes[BM_UNSHARE].samples, modes[BM_UNSHARE].n, 50);
    double live50 = bench_percentile(modes[BM_LIVE].samples, modes[BM_LIVE].n, 50);
    printf("\nRatios (p50) to the `unshare` CLI: create + first exec pooled %.2f, cold %.2f, "
           "sustained %.2f; exec in a live sandbox / floor = %.2f.\n",
           ratio(modes, BM_POOLED, unshare50), ratio(modes, BM_COLD, unshare50),
           ratio(modes, BM_SUSTAINED, unshare50), floor50 > 0 ? live50 / floor50 : 0);
    static const enum bench_mode_id split_modes[] = {BM_POOLED, BM_COLD, BM_SUSTAINED};
    printf("Split of create + first exec, timed inside each mode (p50 create / first exec, us):");
    for (size_t i = 0; i < ARRAY_SIZE(split_modes); i++) {
        struct bench_mode *md = &modes[split_modes[i]];
        printf("%s %s %.0f / %.0f", i ? ";" : "", i == 0 ? "pooled" : i == 1 ? "cold" : "sustained",
               bench_percentile(md->split_create, md->n_split, 50),
               bench_percentile(md->split_exec, md->n_split, 50));
    }
    printf(". Sustained create alone p50 / p99: %.0f / %.0f us; create + first exec by "
           "position in the burst (p50, us):",
           bench_percentile(modes[BM_SUSTAINED].split_create, modes[BM_SUSTAINED].n_split, 50),
           bench_percentile(modes[BM_SUSTAINED].split_create, modes[BM_SUSTAINED].n_split, 99));
    for (int i = 0; i < SUSTAINED_BURST; i++)
        printf(" %s%.0f", i ? "/ " : "", bench_percentile(b->burst[i], b->n_burst, 50));
    printf(".\n\n");
    fflush(stdout);
}

/* ---- memory ------------------------------------------------------------------------------ */

static long meminfo_kb(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    long v = -1;
    size_t klen = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':')
            v = atol(line + klen + 1);
    if (f)
        fclose(f);
    return v;
}

static long proc_rss_kb(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "re");
    long v = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            v = atol(line + 6);
    if (f)
        fclose(f);
    return v;
}

/* The sandbox's memory cgroup usage (v1 memory.usage_in_bytes or v2 memory.current). */
static long cgroup_usage_kb(int pid)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
    FILE *f = fopen(path, "re");
    long v = -1;
    while (f && v < 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *p = strrchr(line, ':'), file[700];
        if (strstr(line, ":memory:") != NULL)
            snprintf(file, sizeof(file), "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", p + 1);
        else if (strncmp(line, "0::", 3) == 0)
            snprintf(file, sizeof(file), "/sys/fs/cgroup%s/memory.current", p + 1);
        else
            continue;
        FILE *g = fopen(file, "re");
        if (g && fgets(line, sizeof(line), g))
            v = atol(line) / 1024;
        if (g)
            fclose(g);
    }
    if (f)
        fclose(f);
    return v;
}

static int init_pid_of(struct harness *h, const char *id)
{
    struct store_sandbox rec;
    struct mcp_error err;
    if (store_sandbox_get(h->store, id, &rec, &err) < 0)
        return -1;
    int pid = (int)json_integer_value(json_object_get(rec.record, "init_pid"));
    store_sandbox_release(&rec);
    return pid;
}

static void memory_report(double *rss, double *cg, int n, long avail_drop_kb)
{
    printf("Memory of %d idle sandboxes (host side, per sandbox): agent (PID 1) RSS p50 %.0f KiB, "
           "max %.0f KiB; sandbox memory cgroup usage p50 %.0f KiB, max %.0f KiB (agent plus "
           "kernel memory charged to it: page tables, tmpfs, sockets); host MemAvailable drop "
           "%.0f KiB per sandbox (noisy on a shared host).\n\n",
           n, bench_percentile(rss, n, 50), bench_percentile(rss, n, 100),
           bench_percentile(cg, n, 50), bench_percentile(cg, n, 100),
           n ? (double)avail_drop_kb / n : 0);
}

/* On the pool-off backend, so that refills do not blur the MemAvailable figure (an idle pooled
 * sandbox is the same sandbox). */
void bench_memory(struct bench *b)
{
    char **ids = xcalloc((size_t)b->idle, sizeof(char *));
    double *rss = xcalloc((size_t)b->idle, sizeof(double));
    double *cg = xcalloc((size_t)b->idle, sizeof(double));
    long avail0 = meminfo_kb("MemAvailable");
    int n = 0;
    for (; n < b->idle; n++)
        if ((ids[n] = harness_create(&b->cold, NULL)) == NULL)
            break;
    usleep(IDLE_SETTLE_US);
    long avail1 = meminfo_kb("MemAvailable");
    for (int i = 0; i < n; i++) {
        int pid = init_pid_of(&b->cold, ids[i]);
        rss[i] = (double)proc_rss_kb(pid);
        cg[i] = (double)cgroup_usage_kb(pid);
    }
    memory_report(rss, cg, n, avail0 - avail1);
    for (int i = 0; i < n; i++) {
        harness_destroy(&b->cold, ids[i]);
        free(ids[i]);
    }
    free(ids);
    free(rss);
    free(cg);
}

/* ---- scale ------------------------------------------------------------------------------- */

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void bench_scale(struct bench *b, struct harness *h, const char *label)
{
    char **ids = xcalloc((size_t)b->live, sizeof(char *));
    double *lat = xcalloc((size_t)b->live, sizeof(double));
    long avail0 = meminfo_kb("MemAvailable");
    int n = 0;
    double t0 = mono_ms();
    for (; n < b->live; n++) {
        double t = mono_ms();
        if ((ids[n] = harness_create(h, NULL)) == NULL) {
            fprintf(stderr, "create #%d failed: %s\n", n + 1, h->err.msg);
            break;
        }
        lat[n] = mono_ms() - t;
    }
    double total = mono_ms() - t0;
    long avail1 = meminfo_kb("MemAvailable");
    struct harness_exec x;
    bool alive = n > 0 && harness_exec(h, ids[0], "echo alive", &x) == 0 && x.exit_code == 0;
    if (n > 0)
        harness_exec_release(&x);
    double td = mono_ms();
    for (int i = 0; i < n; i++) {
        harness_destroy(h, ids[i]);
        free(ids[i]);
    }
    double destroy = mono_ms() - td;
    printf("%s: %d of %d sandboxes alive at once: create p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max "
           "%.1f ms (all %d in %.1f s); the first still ran a command at the end: %s; host "
           "MemAvailable dropped %.0f MiB (%.0f KiB each); destroying all took %.1f s.\n",
           label, n, b->live, bench_percentile(lat, n, 50), bench_percentile(lat, n, 90),
           bench_percentile(lat, n, 99), bench_percentile(lat, n, 100), n, total / 1000,
           alive ? "yes" : "NO", (double)(avail0 - avail1) / 1024,
           n ? (double)(avail0 - avail1) / n : 0, destroy / 1000);
    free(ids);
    free(lat);
}
