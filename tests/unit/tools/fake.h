/* Test doubles for the tool handlers: a tool_call that records what the handler answered and a
 * scripted in-memory backend. */
#ifndef MCPBOX_TEST_TOOLS_FAKE_H
#define MCPBOX_TEST_TOOLS_FAKE_H

#include <jansson.h>
#include <stdbool.h>
#include <uv.h>

#include "backend/backend.h"
#include "mcp/tool.h"

struct tool_call {
    struct mcp_context *ctx;
    const char *owner;
    const char *name;
    bool wants_progress;
    int progress_count;
    char last_progress[1024];
    tool_cancel_fn *cancel_fn;
    void *cancel_arg;
    bool cancelled;
    bool finished;
    bool is_error;
    json_t *structured; /* owned */
    char text[2048];
};

struct fake_backend {
    struct backend base;
    int detach_count;
    int kill_count;
    int last_kill_signal;
    json_t *files; /* path -> base64 of contents */
    /* the last create's network and network_policy (JSON, or NULL), and the last policy
     * set_network_policy got */
    bool last_network;
    json_t *last_create_policy;
    json_t *last_set_policy;
};

struct backend *fake_backend_new(uv_loop_t *loop, struct store *store);
void fake_backend_free(struct backend *be);
/* An "opensandbox" backend that keeps snapshots, for a slot that is not running. */
extern const struct backend_ops fake_remote_ops;

#endif
