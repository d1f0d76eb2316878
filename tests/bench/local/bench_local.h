/* Shared between the local benchmark's files. */
#ifndef MCPBOX_BENCH_LOCAL_H
#define MCPBOX_BENCH_LOCAL_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

#define SUSTAINED_BURST 4 /* creates back to back per round in the sustained mode */

struct bench;

/* The latency modes, in round-robin order. */
enum bench_mode_id {
    BM_FLOOR, BM_UNSHARE, BM_BWRAP, BM_POOLED, BM_COLD, BM_ALONE_POOLED, BM_ALONE_COLD,
    BM_SUSTAINED, BM_LIVE, BM_COUNT
};

struct bench_mode {
    const char *name;
    int (*fn)(struct bench *b);
    bool enabled;
    double *samples;
    int n, failures;
    bool self_timed; /* fn records its own samples (several per round) */
    /* create + first exec, split inside that mode (the mode before it differs from the one
     * before "create alone", so subtracting the two modes' medians misattributes time) */
    double *split_create, *split_exec;
    int n_split;
};

struct bench {
    struct harness h;    /* the default configuration: the pool on (MCPBOX_LOCAL_POOL or 2) */
    struct harness cold; /* the same with the pool off */
    int pool;            /* h's pool size */
    int iterations; /* per latency mode */
    int idle;       /* sandboxes for the memory measurement */
    int live;       /* sandboxes alive at once for the scale run */
    int bpf_fd;
    char *live_id;
    struct harness *pending_h; /* destroyed after the clock stops */
    char *pending[SUSTAINED_BURST];
    int n_pending;
    struct bench_mode *cur;
    bool warmup;
    bool refill_wait; /* after this sample: let the pool refill (untimed) */
    double *burst[SUSTAINED_BURST]; /* sustained mode: create + first exec by position */
    int n_burst;
};

int bench_parse_args(struct bench *b, int argc, char **argv);
double bench_percentile(double *v, int n, double p); /* sorts v */
void bench_print_latency(struct bench *b, struct bench_mode *modes, size_t n);
void bench_memory(struct bench *b);
void bench_scale(struct bench *b, struct harness *h, const char *label);

#endif
