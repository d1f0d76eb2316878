/* A scripted stand-in for the protocol core (session.h, server.h), so that the transport's
 * connection handling can be tested on its own, with a real socket and a real loop.
 *
 * Methods: initialize -> {protocolVersion}; echo -> params; later -> params after 100 ms;
 * flood {count,size} -> count related notifications of size bytes, never a reply;
 * broadcast -> an unrelated notification, then {}; hold {notify?} -> (one related notification,
 * then) no reply until notifications/cancelled names it, which reports it dropped to the
 * transport (request_dropped). notifications/cancelled is counted. */
#include "fake_core.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/xalloc.h"
#include "mcp/jsonrpc.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/session-internal.h"
#include "mcp/modern.h"

int fake_cancelled;
int fake_sessions_open;

struct session {
    const struct session_transport_ops *ops;
    void *arg;
    bool closed, initialized;
    int pending_timers;
    json_t *held; /* ids of "hold" requests awaiting their cancellation */
};

struct later {
    uv_timer_t timer;
    struct session *s;
    json_t *id, *params;
};

static struct fake_server {
    uv_loop_t *loop;
    server_stop_fn *stop_fn;
    void *stop_arg;
} the_server;

struct mcp_server *fake_server_new(uv_loop_t *loop)
{
    the_server.loop = loop;
    return (struct mcp_server *)&the_server;
}

void fake_server_stop(struct mcp_server *srv)
{
    struct fake_server *fs = (struct fake_server *)srv;
    if (fs->stop_fn)
        fs->stop_fn(fs->stop_arg);
}

uv_loop_t *server_loop(struct mcp_server *srv)
{
    return ((struct fake_server *)srv)->loop;
}

void server_on_stop(struct mcp_server *srv, server_stop_fn *fn, void *arg)
{
    struct fake_server *fs = (struct fake_server *)srv;
    fs->stop_fn = fn;
    fs->stop_arg = arg;
}

struct session *session_new(struct mcp_server *srv, const struct session_transport_ops *ops,
                            void *transport_arg, const char *owner)
{
    struct session *s = xcalloc(1, sizeof(*s));
    s->ops = ops;
    s->arg = transport_arg;
    s->held = json_array();
    __atomic_add_fetch(&fake_sessions_open, 1, __ATOMIC_SEQ_CST);
    return s;
}

static void maybe_free(struct session *s)
{
    if (s->closed && s->pending_timers == 0) {
        json_decref(s->held);
        free(s);
    }
}

static void send_msg(struct session *s, json_t *msg, const json_t *related, bool final)
{
    if (!s->closed)
        s->ops->send(s->arg, msg, related, final);
    json_decref(msg);
}

static void later_closed(uv_handle_t *h)
{
    struct later *l = h->data;
    l->s->pending_timers--;
    maybe_free(l->s);
    json_decref(l->id);
    json_decref(l->params);
    free(l);
}

static void later_fire(uv_timer_t *t)
{
    struct later *l = t->data;
    send_msg(l->s, jsonrpc_result(l->id, json_incref(l->params)), l->id, true);
    uv_close((uv_handle_t *)t, later_closed);
}

static void start_later(struct session *s, json_t *id, json_t *params)
{
    struct later *l = xcalloc(1, sizeof(*l));
    l->s = s;
    l->id = json_incref(id);
    l->params = params ? json_incref(params) : json_object();
    l->timer.data = l;
    s->pending_timers++;
    uv_timer_init(the_server.loop, &l->timer);
    uv_timer_start(&l->timer, later_fire, 100, 0);
}

static void flood(struct session *s, json_t *id, json_t *params)
{
    int count = (int)json_integer_value(json_object_get(params, "count"));
    size_t size = (size_t)json_integer_value(json_object_get(params, "size"));
    char *blob = xmalloc(size + 1);
    memset(blob, 'x', size);
    blob[size] = '\0';
    for (int i = 0; i < count && !s->closed; i++)
        send_msg(s, jsonrpc_notification("notifications/message",
                                         json_pack("{s:s, s:s}", "level", "info", "data", blob)),
                 id, false);
    free(blob);
}

static void handle_request(struct session *s, struct jsonrpc_msg *msg)
{
    if (strcmp(msg->method, "initialize") == 0) {
        s->initialized = true;
        send_msg(s, jsonrpc_result(msg->id, json_pack("{s:s}", "protocolVersion", "2025-11-25")),
                 msg->id, true);
    } else if (strcmp(msg->method, "echo") == 0) {
        json_t *p = msg->params ? json_incref(msg->params) : json_object();
        send_msg(s, jsonrpc_result(msg->id, p), msg->id, true);
    } else if (strcmp(msg->method, "later") == 0) {
        start_later(s, msg->id, msg->params);
    } else if (strcmp(msg->method, "flood") == 0) {
        flood(s, msg->id, msg->params);
    } else if (strcmp(msg->method, "hold") == 0) {
        if (json_is_true(json_object_get(msg->params, "notify")))
            send_msg(s, jsonrpc_notification("notifications/message",
                                             json_pack("{s:s, s:s}", "level", "info", "data",
                                                       "held")),
                     msg->id, false);
        json_array_append(s->held, msg->id);
    } else if (strcmp(msg->method, "broadcast") == 0) {
        send_msg(s, jsonrpc_notification("notifications/tools/list_changed", NULL), NULL, false);
        send_msg(s, jsonrpc_result(msg->id, json_object()), msg->id, true);
    } else {
        send_msg(s, jsonrpc_error(msg->id, -32601, "Method not found", NULL), msg->id, true);
    }
}

/* A held request named by a cancellation is over: its reply will never come. */
static void drop_held(struct session *s, const json_t *params)
{
    const json_t *id = json_object_get(params, "requestId");
    size_t i;
    json_t *held;

    json_array_foreach(s->held, i, held) {
        if (id && json_equal(held, (json_t *)id)) {
            if (!s->closed && s->ops->request_dropped)
                s->ops->request_dropped(s->arg, held);
            json_array_remove(s->held, i);
            return;
        }
    }
}

void session_handle(struct session *s, struct jsonrpc_msg *msg)
{
    if (msg->kind == JSONRPC_REQUEST) {
        handle_request(s, msg);
    } else if (msg->kind == JSONRPC_NOTIFICATION &&
               strcmp(msg->method, "notifications/cancelled") == 0) {
        __atomic_add_fetch(&fake_cancelled, 1, __ATOMIC_SEQ_CST);
        drop_held(s, msg->params);
    }
    jsonrpc_msg_release(msg);
}

void session_close(struct session *s)
{
    s->closed = true;
    __atomic_sub_fetch(&fake_sessions_open, 1, __ATOMIC_SEQ_CST);
    maybe_free(s);
}

bool session_is_initialized(const struct session *s)
{
    return s->initialized;
}

const char *session_protocol_version(const struct session *s)
{
    return s->initialized ? "2025-11-25" : NULL;
}

size_t session_inflight(const struct session *s)
{
    return (size_t)s->pending_timers;
}

/* The hooks of the 2026-07-28 (stateless) path: the fake core serves every session alike. */
void session_set_stateless(struct session *s)
{
    s->initialized = true;
}

void session_set_owner(struct session *s, const char *owner)
{
    (void)s;
    (void)owner;
}

int mcp_log_level_parse(const char *name)
{
    static const char *const names[] = {"debug", "info", "notice", "warning",
                                        "error", "critical", "alert", "emergency"};
    for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(name, names[i]) == 0)
            return (int)i;
    return -1;
}

/* The fake core has no tools, so no x-mcp-header arguments to check. */
const json_t *modern_tool_input_schema(struct mcp_server *srv, const char *name)
{
    (void)srv;
    (void)name;
    return NULL;
}
