/* Shared between the local benchmark's files. */
#ifndef MCPBOX_BENCH_LOCAL_H
#define MCPBOX_BENCH_LOCAL_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

struct bench {
    struct harness h;
    int iterations; /* per latency mode */
    int idle;       /* sandboxes for the memory measurement */
    int live;       /* sandboxes alive at once for the scale run */
    int bpf_fd;
    char *live_id;
    char *pending_destroy;
    /* create + first exec, split inside that mode (the mode before it differs from the one
     * before "create alone", so subtracting the two modes' medians misattributes time) */
    double *split_create, *split_exec;
    int n_split;
};

struct bench_mode {
    const char *name;
    int (*fn)(struct bench *b);
    bool enabled;
    double *samples;
    int n, failures;
};

int bench_parse_args(struct bench *b, int argc, char **argv);
double bench_percentile(double *v, int n, double p); /* sorts v */
void bench_print_latency(struct bench *b, struct bench_mode *modes, size_t n);
void bench_memory(struct bench *b);
void bench_scale(struct bench *b);

#endif
