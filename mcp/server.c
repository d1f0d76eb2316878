/* The server: loop, context, registry, sessions, start/stop order (see server.h). */
#define LOG_MODULE "server"
#include "mcp/server.h"

#include <signal.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "mcp/config.h"
#include "mcp/context.h"
#include "mcp/modern.h"
#include "mcp/registry.h"
#include "mcp/session-internal.h"
#include "lib/store/store.h"

#define SERVER_MAX_STOP_HOOKS 8

struct stop_hook {
    server_stop_fn *fn;
    void *arg;
};

struct mcp_server {
    uv_loop_t loop;
    const struct mcp_config *cfg; /* borrowed */
    struct mcp_context ctx;
    struct registry *reg;
    struct session **sessions; /* borrowed: sessions remove themselves on close */
    size_t n_sessions, cap_sessions;
    struct stop_hook hooks[SERVER_MAX_STOP_HOOKS];
    size_t n_hooks;
    uv_signal_t sigint, sigterm;
    bool stopping;
    bool sandboxes_started; /* the store is open and the backends made (server_sandbox_context) */
    server_backends_fn *start_backends; /* the composition root's; NULL: no backends */
};

static const char server_instructions_text[] =
    "mcpbox gives you sandboxes: isolated Linux environments where you can run commands, read "
    "and write files, and start services without touching the host. Typical flow: create_sandbox, "
    "then run_command / write_file / read_file with its sandbox_id, and destroy_sandbox when done. "
    "Sandboxes expire on their own after their timeout. If something goes wrong inside a sandbox, "
    "diagnose_sandbox explains why.";

const char *server_instructions(const struct mcp_server *srv)
{
    return server_instructions_text;
}

static void on_registry_change(void *arg, const char *what)
{
    server_notify_list_changed(arg, what);
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

static void sandbox_changed(struct mcp_context *ctx, const char *owner, const char *sandbox_id);

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
    srv->ctx.sandbox_changed = sandbox_changed;
    /* Changes before any session exists broadcast to nobody, so one listener serves both. */
    srv->reg = registry_new(on_registry_change, srv);
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
    registry_free(srv->reg);
    free(srv->sessions);
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

struct registry *server_registry(struct mcp_server *srv)
{
    return srv->reg;
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

void server_session_add(struct mcp_server *srv, struct session *s)
{
    if (srv->n_sessions == srv->cap_sessions) {
        srv->cap_sessions = srv->cap_sessions ? srv->cap_sessions * 2 : 8;
        srv->sessions = xrealloc(srv->sessions, srv->cap_sessions * sizeof(*srv->sessions));
    }
    srv->sessions[srv->n_sessions++] = s;
}

void server_session_remove(struct mcp_server *srv, struct session *s)
{
    for (size_t i = 0; i < srv->n_sessions; i++) {
        if (srv->sessions[i] == s) {
            srv->sessions[i] = srv->sessions[--srv->n_sessions];
            return;
        }
    }
}

size_t server_session_count(const struct mcp_server *srv)
{
    return srv->n_sessions;
}

/* Sending may make a transport close a session (and so edit the list): walk a snapshot, and
 * skip sessions that left meanwhile. */
static void for_each_session(struct mcp_server *srv, void (*fn)(struct session *, void *),
                             void *arg)
{
    size_t n = srv->n_sessions;
    cleanup_free struct session **snap = xmalloc((n ? n : 1) * sizeof(*snap));

    if (n)
        memcpy(snap, srv->sessions, n * sizeof(*snap));
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < srv->n_sessions; j++) {
            if (srv->sessions[j] == snap[i]) {
                fn(snap[i], arg);
                break;
            }
        }
    }
}

static void send_list_changed(struct session *s, void *arg)
{
    session_notify(s, arg, NULL);
}

void server_notify_list_changed(struct mcp_server *srv, const char *what)
{
    cleanup_free char *method = xasprintf("notifications/%s/list_changed", what);

    for_each_session(srv, send_list_changed, method);
    modern_listeners_list_changed(what); /* 2026-07-28 subscriptions/listen streams */
}

static void send_updated(struct session *s, void *arg)
{
    const char *uri = arg;

    if (session_is_subscribed(s, uri))
        session_notify(s, "notifications/resources/updated", json_pack("{s:s}", "uri", uri));
}

struct changed_files {
    const char *owner;
    char prefix[160];
};

static void send_updated_under(struct session *s, void *arg)
{
    const struct changed_files *c = arg;
    /* only the owner's sessions: another client's subscription learns nothing of the sandbox */
    if (strcmp(session_owner(s), c->owner) == 0)
        session_notify_updated_under(s, c->prefix);
}

/* A tool call may have changed a sandbox's files (mcp_context.sandbox_changed): every file of
 * it that a session of its owner subscribed to (sandbox://ID/...) is announced as updated. */
static void sandbox_changed(struct mcp_context *ctx, const char *owner, const char *sandbox_id)
{
    struct mcp_server *srv = container_of(ctx, struct mcp_server, ctx);
    struct changed_files c = {.owner = owner};
    snprintf(c.prefix, sizeof c.prefix, "sandbox://%s/", sandbox_id);
    for_each_session(srv, send_updated_under, &c);
    modern_listeners_resource_updated_under(owner, c.prefix);
}

void server_notify_resource_updated(struct mcp_server *srv, const char *uri)
{
    for_each_session(srv, send_updated, (void *)uri);
    modern_listeners_resource_updated(uri);
}
