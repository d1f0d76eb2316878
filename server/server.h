/* The server runtime both front-ends (mcp/, osapi/) run on: one libuv loop, the shared context
 * (config, store, backends), signals and an orderly stop. One per process. What the MCP front-end
 * keeps with it (the registry, the live sessions) is mcp/server.h's.
 *
 * Typical use (cli/main.c):
 *     srv = server_new(cfg, &err);
 *     stdio_transport_start(srv, ...)    or   http_transport_start(srv, cfg, ext, &err);
 *     server_run(srv);                   runs until server_stop() (EOF, SIGINT, SIGTERM)
 *     server_free(srv);
 *
 * Everything here runs on the loop thread. */
#ifndef MCPBOX_SERVER_SERVER_H
#define MCPBOX_SERVER_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <uv.h>

#include "lib/base/error.h"

struct backend_set;
struct mcp_config;
struct mcp_context;
struct store;
struct mcp_server;

/* Creates the loop and checks the state directory (the store and the backends start later: see
 * server_sandbox_context). cfg is borrowed and must outlive the server. */
struct mcp_server *server_new(const struct mcp_config *cfg, struct mcp_error *err);
/* Fills set with the backends this executable has, one slot each (a slot's backend NULL when
 * cfg leaves it off or it cannot start on this host, with a warning logged). The composition
 * root (cli/backends.c) provides it; a server without one serves no backends. */
typedef void server_backends_fn(struct backend_set *set, uv_loop_t *loop, struct store *store,
                                const struct mcp_config *cfg);
/* Before the first request: the backends are started by start on first use. */
void server_set_backends(struct mcp_server *srv, server_backends_fn *start);
/* Runs the loop until server_stop() and every handle has closed. Returns 0. */
int server_run(struct mcp_server *srv);
/* Starts a clean shutdown: calls every stop hook (transports close their listeners and
 * sessions), shuts the backends down, closes the signal handlers. Idempotent. */
void server_stop(struct mcp_server *srv);
/* Frees everything (after server_run returned). NULL-safe. */
void server_free(struct mcp_server *srv);

uv_loop_t *server_loop(struct mcp_server *srv);
/* The context as it is: its store and backends are NULL until server_sandbox_context. */
struct mcp_context *server_context(struct mcp_server *srv);
/* The context with the state store open and the enabled backends made: done on the first call
 * (the first request that touches sandboxes), so an idle server never loads SQLite. NULL with
 * err when the store cannot be opened (tried again on the next call) or the server stops. */
struct mcp_context *server_sandbox_context(struct mcp_server *srv, struct mcp_error *err);
const struct mcp_config *server_config(const struct mcp_server *srv);
/* The server whose context ctx is (ctx from server_context or server_sandbox_context). */
struct mcp_server *server_of_context(struct mcp_context *ctx);
bool server_is_stopping(const struct mcp_server *srv);

/* A transport registers fn to be called once when the server stops (e.g. to close its listener
 * and its sessions). Hooks run in registration order. */
typedef void server_stop_fn(void *arg);
void server_on_stop(struct mcp_server *srv, server_stop_fn *fn, void *arg);

/* What a front-end keeps with the server (the MCP front-end: its registry and sessions), so
 * that the runtime needs to know nothing of it: made by make on the first server_frontend call
 * for that kind (a static const struct), released by release in server_free. */
struct server_frontend_kind {
    void *(*make)(struct mcp_server *srv);
    void (*release)(void *state);
};
void *server_frontend(struct mcp_server *srv, const struct server_frontend_kind *kind);

#endif
