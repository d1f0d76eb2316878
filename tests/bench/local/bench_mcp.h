/* The local benchmark's MCP phase: the latency an agent pays through `mcpbox serve` over stdio,
 * against floors measured in a small separate process (bench_floor_helper). Independent of the
 * C-API modes of bench_local.c. */
#ifndef MCPBOX_BENCH_MCP_H
#define MCPBOX_BENCH_MCP_H

#include <stdbool.h>
#include <sys/types.h>

/* A small process that runs /bin/true (or the unshare CLI) on request and times it itself. */
struct small_floor {
    pid_t pid;
    int to, from; /* its stdin, its stdout */
};

int small_floor_start(struct small_floor *f);
/* op: 'f' fork+exec /bin/true, 's' posix_spawn /bin/true, 'u' the unshare CLI; returns the
 * microseconds the helper measured, or -1 when the program failed. */
double small_floor_run(struct small_floor *f, char op);
void small_floor_stop(struct small_floor *f);

struct bench_mcp_opts {
    int iterations; /* rounds of the round-robin */
    bool quick;
};

/* Runs the MCP phase and prints its Markdown report; 0, or 77 when mcpbox cannot make sandboxes
 * here, or 1. */
int bench_mcp_phase(const struct bench_mcp_opts *o);

#endif
