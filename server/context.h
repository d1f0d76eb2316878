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
    /* Called after a tool call of `owner` that may have changed sandbox_id's files (NULL where
     * nobody listens, as in the CLI): the server sends notifications/resources/updated for the
     * files of that sandbox that the owner's sessions subscribed to. */
    void (*sandbox_changed)(struct mcp_context *ctx, const char *owner, const char *sandbox_id);
};

#endif
