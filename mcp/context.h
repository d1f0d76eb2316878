/* What the whole server shares: the loop, the configuration, the store, the backends.
 * One per process, created by server.c (or by a CLI command) and passed to everything. */
#ifndef MCPBOX_CONTEXT_H
#define MCPBOX_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "backend/backend.h"

struct store;
struct mcp_config;

struct mcp_context {
    uv_loop_t *loop;                 /* borrowed */
    const struct mcp_config *config; /* borrowed */
    struct store *store;             /* owned by whoever made the context */
    struct backend_set backends;     /* owned likewise */
};

#endif
