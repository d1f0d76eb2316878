/* The MCP front-end's part of the server: the registry, the live sessions and the broadcasts to
 * them (see mcp/server.h). Kept with the runtime as a server_frontend. */
#include "mcp/server.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"
#include "mcp/modern.h"
#include "mcp/registry.h"
#include "mcp/session-internal.h"
#include "server/context.h"

struct mcp_frontend {
    struct mcp_server *srv;
    struct registry *reg;
    struct session **sessions; /* borrowed: sessions remove themselves on close */
    size_t n_sessions, cap_sessions;
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

static void sandbox_changed(struct mcp_context *ctx, const char *owner, const char *sandbox_id);

static void *frontend_make(struct mcp_server *srv)
{
    struct mcp_frontend *f = xcalloc(1, sizeof(*f));
    f->srv = srv;
    /* Changes before any session exists broadcast to nobody, so one listener serves both. */
    f->reg = registry_new(on_registry_change, srv);
    server_context(srv)->sandbox_changed = sandbox_changed;
    return f;
}

static void frontend_release(void *state)
{
    struct mcp_frontend *f = state;
    registry_free(f->reg);
    free(f->sessions);
    free(f);
}

static const struct server_frontend_kind mcp_frontend_kind = {frontend_make, frontend_release};

static struct mcp_frontend *frontend(struct mcp_server *srv)
{
    return server_frontend(srv, &mcp_frontend_kind);
}

struct registry *server_registry(struct mcp_server *srv)
{
    return frontend(srv)->reg;
}

void server_session_add(struct mcp_server *srv, struct session *s)
{
    struct mcp_frontend *f = frontend(srv);
    if (f->n_sessions == f->cap_sessions) {
        f->cap_sessions = f->cap_sessions ? f->cap_sessions * 2 : 8;
        f->sessions = xrealloc(f->sessions, f->cap_sessions * sizeof(*f->sessions));
    }
    f->sessions[f->n_sessions++] = s;
}

void server_session_remove(struct mcp_server *srv, struct session *s)
{
    struct mcp_frontend *f = frontend(srv);
    for (size_t i = 0; i < f->n_sessions; i++) {
        if (f->sessions[i] == s) {
            f->sessions[i] = f->sessions[--f->n_sessions];
            return;
        }
    }
}

/* Sending may make a transport close a session (and so edit the list): walk a snapshot, and
 * skip sessions that left meanwhile. */
static void for_each_session(struct mcp_server *srv, void (*fn)(struct session *, void *),
                             void *arg)
{
    struct mcp_frontend *f = frontend(srv);
    size_t n = f->n_sessions;
    cleanup_free struct session **snap = xmalloc((n ? n : 1) * sizeof(*snap));

    if (n)
        memcpy(snap, f->sessions, n * sizeof(*snap));
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < f->n_sessions; j++) {
            if (f->sessions[j] == snap[i]) {
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
    struct mcp_server *srv = server_of_context(ctx);
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
