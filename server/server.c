/* The server runtime: loop, context, signals, front-ends' state, start/stop order (see
 * server/server.h). */
#define LOG_MODULE "server"
#include "server/server.h"

#include <signal.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "server/config.h"
#include "server/context.h"
#include "lib/store/store.h"

#define SERVER_MAX_STOP_HOOKS 8
/* Front-ends with state kept here (server_frontend): MCP today, room for more. */
#define SERVER_MAX_FRONTENDS 4

struct stop_hook {
    server_stop_fn *fn;
    void *arg;
};

struct frontend_state {
    const struct server_frontend_kind *kind;
    void *state;
};

struct mcp_server {
    uv_loop_t loop;
    const struct mcp_config *cfg; /* borrowed */
    struct mcp_context ctx;
    struct stop_hook hooks[SERVER_MAX_STOP_HOOKS];
    size_t n_hooks;
    struct frontend_state frontends[SERVER_MAX_FRONTENDS];
    size_t n_frontends;
    uv_signal_t sigint, sigterm;
    bool stopping;
    bool sandboxes_started; /* the store is open and the backends made (server_sandbox_context) */
    server_backends_fn *start_backends; /* the composition root's; NULL: no backends */
};

static void release_frontends(struct mcp_server *srv)
{
    for (size_t i = 0; i < srv->n_frontends; i++)
        srv->frontends[i].kind->release(srv->frontends[i].state);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct mcp_server *srv = h->data;

    log_info("received signal %d, shutting down", signum);
    server_stop(srv);
}

static int open_store(struct mcp_server *srv, struct mcp_error *err)
{
    srv->ctx.store = store_open(srv->cfg->state_dir, err);
    if (!srv->ctx.store)
        return mcp_error_prefix(err, "opening the state store in %s", srv->cfg->state_dir);
    return 0;
}

/* At start only the state directory is checked (a bad --state-dir fails at once); the
 * database is opened with the backends, on first use. */
static int check_state_dir(struct mcp_server *srv, struct mcp_error *err)
{
    return store_check_state_dir(srv->cfg->state_dir, err); /* the message names the directory */
}

static void create_backends(struct mcp_server *srv)
{
    if (srv->start_backends != NULL)
        srv->start_backends(&srv->ctx.backends, &srv->loop, srv->ctx.store, srv->cfg);
    const struct backend_set *set = &srv->ctx.backends;
    char line[160] = "";
    size_t len = 0;
    for (size_t i = 0; i < set->n && len < sizeof line; i++) {
        int n = snprintf(line + len, sizeof line - len, "%s%s %s", i ? ", " : "",
                         set->slots[i].ops->name, set->slots[i].be ? "enabled" : "disabled");
        len += n > 0 ? (size_t)n : 0;
    }
    log_info("backends: %s", set->n ? line : "none");
}

void server_set_backends(struct mcp_server *srv, server_backends_fn *start)
{
    srv->start_backends = start;
}

static void start_signals(struct mcp_server *srv)
{
    signal(SIGPIPE, SIG_IGN); /* a closed stdout or socket is an EPIPE error, not death */
    uv_signal_init(&srv->loop, &srv->sigint);
    uv_signal_init(&srv->loop, &srv->sigterm);
    srv->sigint.data = srv;
    srv->sigterm.data = srv;
    uv_signal_start(&srv->sigint, on_signal, SIGINT);
    uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
}

struct mcp_server *server_new(const struct mcp_config *cfg, struct mcp_error *err)
{
    struct mcp_server *srv = xcalloc(1, sizeof(*srv));

    if (uv_loop_init(&srv->loop) != 0) {
        free(srv);
        mcp_error_set(err, MCP_ERR_INTERNAL, 0, "cannot initialise the event loop");
        return NULL;
    }
    srv->cfg = cfg;
    srv->ctx.loop = &srv->loop;
    srv->ctx.config = cfg;
    if (check_state_dir(srv, err) < 0)
        goto fail;
    start_signals(srv);
    return srv;
fail:
    server_free(srv);
    return NULL;
}

int server_run(struct mcp_server *srv)
{
    uv_run(&srv->loop, UV_RUN_DEFAULT);
    return 0;
}

void server_stop(struct mcp_server *srv)
{
    if (srv->stopping)
        return;
    srv->stopping = true;
    for (size_t i = 0; i < srv->n_hooks; i++)
        srv->hooks[i].fn(srv->hooks[i].arg);
    backend_set_shutdown(&srv->ctx.backends);
    if (!uv_is_closing((uv_handle_t *)&srv->sigint)) {
        uv_close((uv_handle_t *)&srv->sigint, NULL);
        uv_close((uv_handle_t *)&srv->sigterm, NULL);
    }
}

static void close_leftover(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void server_free(struct mcp_server *srv)
{
    if (!srv)
        return;
    if (srv->sigint.loop && !uv_is_closing((uv_handle_t *)&srv->sigint)) {
        uv_close((uv_handle_t *)&srv->sigint, NULL);
        uv_close((uv_handle_t *)&srv->sigterm, NULL);
    }
    backend_set_free(&srv->ctx.backends);
    /* Whatever is still open (a backend's watcher, a late timer) is closed so the loop can go. */
    uv_walk(&srv->loop, close_leftover, NULL);
    uv_run(&srv->loop, UV_RUN_DEFAULT);
    uv_loop_close(&srv->loop);
    store_close(srv->ctx.store);
    release_frontends(srv);
    free(srv);
}

uv_loop_t *server_loop(struct mcp_server *srv)
{
    return &srv->loop;
}

struct mcp_context *server_context(struct mcp_server *srv)
{
    return &srv->ctx;
}

/* The state store (SQLite: ~1 MiB of library pages and heap once open) and the backends are
 * started on the first request that needs them, not at start, so that an idle server stays
 * small. A store that cannot be opened fails that request and is tried again on the next. */
struct mcp_context *server_sandbox_context(struct mcp_server *srv, struct mcp_error *err)
{
    if (srv->sandboxes_started)
        return &srv->ctx;
    if (srv->stopping) {
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "the server is shutting down");
        return NULL;
    }
    if (open_store(srv, err) < 0)
        return NULL;
    create_backends(srv);
    srv->sandboxes_started = true;
#ifdef __GLIBC__
    /* The local backend's start builds its seccomp filter in about 300 KiB of heap and frees it;
     * later allocations keep the heap's top in place, so those pages stayed resident for the
     * server's life. Give them back once. */
    malloc_trim(0);
#endif
    return &srv->ctx;
}

const struct mcp_config *server_config(const struct mcp_server *srv)
{
    return srv->cfg;
}

bool server_is_stopping(const struct mcp_server *srv)
{
    return srv->stopping;
}

void server_on_stop(struct mcp_server *srv, server_stop_fn *fn, void *arg)
{
    if (srv->n_hooks == SERVER_MAX_STOP_HOOKS) {
        log_error("too many stop hooks (limit %d); ignoring one", SERVER_MAX_STOP_HOOKS);
        return;
    }
    srv->hooks[srv->n_hooks].fn = fn;
    srv->hooks[srv->n_hooks].arg = arg;
    srv->n_hooks++;
}

void *server_frontend(struct mcp_server *srv, const struct server_frontend_kind *kind)
{
    for (size_t i = 0; i < srv->n_frontends; i++)
        if (srv->frontends[i].kind == kind)
            return srv->frontends[i].state;
    if (srv->n_frontends == SERVER_MAX_FRONTENDS) { /* a build with a new front-end: raise it */
        log_error("more than %d front-ends keep state with the server", SERVER_MAX_FRONTENDS);
        abort();
    }
    struct frontend_state *f = &srv->frontends[srv->n_frontends++];
    f->kind = kind;
    f->state = kind->make(srv);
    return f->state;
}

struct mcp_server *server_of_context(struct mcp_context *ctx)
{
    return container_of(ctx, struct mcp_server, ctx);
}
