/* One MCP session (see session.h): message routing, in-flight requests, cancellation,
 * server-to-client requests. The method handlers live in mcp/methods/. */
#define LOG_MODULE "session"
#include "mcp/session.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "mcp/dispatch.h"
#include "mcp/jsonrpc.h"
#include "mcp/limits.h"
#include "mcp/modern.h"
#include "mcp/request.h"
#include "mcp/server.h"
#include "mcp/session-internal.h"

/* JSON-RPC error code the SDKs use for "request cancelled / timed out" on the requester side. */
#define MCP_ERR_REQUEST_CANCELLED (-32001)

struct request {
    struct session *session;
    json_t *id;             /* owned reference */
    json_t *params;         /* owned reference */
    char *method;           /* owned */
    json_t *progress_token; /* owned reference or NULL */
    double last_progress;
    bool sent_progress;
    bool cancelled;
    bool answered;          /* a reply is being sent: no more cancel callbacks */
    tool_cancel_fn *cancel_fn;
    void *cancel_arg;
    json_t *modern_meta;    /* owned: params._meta of a 2026-07-28 request, else NULL */
    int holds;              /* > 0 while request_cancel runs callbacks: defer the free */
    bool finished;          /* unlinked and released while held: only the struct is left */
    struct request *prev, *next;
};

/* A server-to-client request awaiting the client's reply. */
struct pending {
    json_int_t id;
    struct request *req; /* the client request it belongs to */
    tool_client_reply_fn *cb;
    void *arg;
    struct pending *next;
};

struct session {
    struct mcp_server *srv;
    const struct session_transport_ops *ops; /* NULL once closed */
    void *transport_arg;
    char *owner;
    char *protocol_version;
    json_t *client_caps;
    json_t *client_info;
    json_t *subscriptions; /* object: uri -> true */
    int log_level;
    bool initialized;
    bool stateless; /* every request is 2026-07-28 (an HTTP POST without a session) */
    bool closed;
    int busy; /* > 0 while inside session_handle/session_close: defer freeing */
    struct request *inflight;
    size_t n_inflight;
    struct pending *pending;
    size_t n_pending;
    json_int_t next_client_id;
    uint64_t serial; /* approvals: "for this session" (session_serial) */
};

static const char *const log_level_names[] = {
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
};

int mcp_log_level_parse(const char *name)
{
    for (size_t i = 0; name && i < ARRAY_SIZE(log_level_names); i++) {
        if (strcmp(name, log_level_names[i]) == 0)
            return (int)i;
    }
    return -1;
}

const char *mcp_log_level_name(int level)
{
    if (level < 0 || (size_t)level >= ARRAY_SIZE(log_level_names))
        return "info";
    return log_level_names[level];
}

/* ---- lifetime ----------------------------------------------------------------------------- */

struct session *session_new(struct mcp_server *srv, const struct session_transport_ops *ops,
                            void *transport_arg, const char *owner)
{
    struct session *s = xcalloc(1, sizeof(*s));

    s->srv = srv;
    s->ops = ops;
    s->transport_arg = transport_arg;
    s->owner = xstrdup(owner ? owner : "anonymous");
    s->subscriptions = json_object();
    s->log_level = MCP_LOG_DEFAULT;
    s->next_client_id = 1;
    static uint64_t serials;
    s->serial = ++serials;
    if (srv)
        server_session_add(srv, s);
    return s;
}

static void session_free(struct session *s)
{
    free(s->owner);
    free(s->protocol_version);
    json_decref(s->client_caps);
    json_decref(s->client_info);
    json_decref(s->subscriptions);
    free(s);
}

static void maybe_free(struct session *s)
{
    if (s->closed && s->busy == 0 && s->n_inflight == 0)
        session_free(s);
}

static void send_msg(struct session *s, json_t *msg, const json_t *related, bool final)
{
    if (s->ops && !s->closed)
        s->ops->send(s->transport_arg, msg, related, final);
    json_decref(msg);
}

/* Calls every pending server-to-client request's callback with an error (req NULL: all). */
static void fail_pending(struct session *s, struct request *req, const char *why)
{
    struct pending **pp = &s->pending;

    while (*pp) {
        struct pending *p = *pp;
        if (req && p->req != req) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        s->n_pending--;
        json_auto_t *error = json_pack("{s:i, s:s}", "code", MCP_ERR_REQUEST_CANCELLED,
                                       "message", why);
        p->cb(p->arg, NULL, error);
        free(p);
        pp = &s->pending; /* the callback may have changed the list */
    }
}

/* Drops pending entries of a finished request without calling them (the handler is done). */
static void drop_pending(struct session *s, struct request *req)
{
    struct pending **pp = &s->pending;

    while (*pp) {
        struct pending *p = *pp;
        if (p->req == req) {
            *pp = p->next;
            s->n_pending--;
            free(p);
        } else {
            pp = &p->next;
        }
    }
}

static void request_cancel(struct request *req, const char *why)
{
    if (req->cancelled || req->answered)
        return;
    req->cancelled = true;
    struct session *s = req->session;
    /* Tell the transport now, while req (and its id) certainly exist: the calls below may
     * finish and free it. */
    if (s->ops && !s->closed && s->ops->request_dropped) {
        s->busy++;
        s->ops->request_dropped(s->transport_arg, req->id);
        s->busy--;
    }
    /* A failed server-to-client request's callback may finish (and so free) req: hold it. */
    req->holds++;
    fail_pending(s, req, why);
    req->holds--;
    if (req->finished) {
        free(req);
        return;
    }
    if (req->cancel_fn) {
        tool_cancel_fn *fn = req->cancel_fn;
        req->cancel_fn = NULL;
        fn(req->cancel_arg);
    }
}

void session_close(struct session *s)
{
    if (!s || s->closed)
        return;
    s->busy++;
    s->closed = true;
    s->ops = NULL;
    if (s->srv)
        server_session_remove(s->srv, s);
    fail_pending(s, NULL, "session closed");
    /* A cancel callback may finish (and unlink) any request, so restart after each one. */
    for (bool again = true; again;) {
        again = false;
        for (struct request *r = s->inflight; r; r = r->next) {
            if (!r->cancelled && !r->answered) {
                request_cancel(r, "session closed");
                again = true;
                break;
            }
        }
    }
    s->busy--;
    maybe_free(s);
}

void session_input_closed(struct session *s)
{
    if (s->closed)
        return;
    s->busy++;
    fail_pending(s, NULL, "the client closed its input; no reply can arrive");
    s->busy--;
}

bool session_is_initialized(const struct session *s)
{
    return s->initialized;
}

uint64_t session_serial(const struct session *s)
{
    return s->stateless ? 0 : s->serial;
}

const char *session_protocol_version(const struct session *s)
{
    return s->protocol_version;
}

size_t session_inflight(const struct session *s)
{
    return s->n_inflight;
}

struct mcp_server *session_server(struct session *s)
{
    return s->srv;
}

const char *session_owner(const struct session *s)
{
    return s->owner;
}

/* ---- state set by methods ----------------------------------------------------------------- */

void session_set_initialized(struct session *s, const char *version, json_t *client_caps,
                             json_t *client_info)
{
    free(s->protocol_version);
    s->protocol_version = xstrdup(version);
    json_decref(s->client_caps);
    s->client_caps = client_caps ? json_deep_copy(client_caps) : json_object();
    json_decref(s->client_info);
    s->client_info = client_info ? json_deep_copy(client_info) : NULL;
    s->initialized = true;
}

bool session_client_has(const struct session *s, const char *capability)
{
    return s->client_caps && json_object_get(s->client_caps, capability) != NULL;
}

void session_set_log_level(struct session *s, int level)
{
    s->log_level = level;
}

int session_log_level(const struct session *s)
{
    return s->log_level;
}

int session_subscribe(struct session *s, const char *uri, struct mcp_error *err)
{
    if (json_object_get(s->subscriptions, uri))
        return 0;
    if (json_object_size(s->subscriptions) >= MCP_MAX_SUBSCRIPTIONS_PER_SESSION)
        return mcp_error_set(err, MCP_ERR_SERVER, 0,
                             "too many subscriptions (limit %d per session); unsubscribe first",
                             MCP_MAX_SUBSCRIPTIONS_PER_SESSION);
    json_object_set_new(s->subscriptions, uri, json_true());
    return 0;
}

void session_unsubscribe(struct session *s, const char *uri)
{
    json_object_del(s->subscriptions, uri);
}

bool session_is_subscribed(const struct session *s, const char *uri)
{
    return json_object_get(s->subscriptions, uri) != NULL;
}

void session_notify_updated_under(struct session *s, const char *prefix)
{
    const char *uri;
    json_t *v;
    size_t n = strlen(prefix);
    json_object_foreach(s->subscriptions, uri, v)
    {
        if (strncmp(uri, prefix, n) == 0)
            session_notify(s, "notifications/resources/updated", json_pack("{s:s}", "uri", uri));
    }
}

void session_notify(struct session *s, const char *method, json_t *params)
{
    if (!s->initialized || s->closed) {
        json_decref(params);
        return;
    }
    send_msg(s, jsonrpc_notification(method, params), NULL, false);
}

/* ---- requests ----------------------------------------------------------------------------- */

static void request_unlink_free(struct request *req)
{
    struct session *s = req->session;

    drop_pending(s, req);
    if (req->prev)
        req->prev->next = req->next;
    else
        s->inflight = req->next;
    if (req->next)
        req->next->prev = req->prev;
    s->n_inflight--;
    json_decref(req->id);
    json_decref(req->params);
    json_decref(req->progress_token);
    json_decref(req->modern_meta);
    free(req->method);
    if (req->holds > 0)
        req->finished = true; /* request_cancel frees it once its callbacks return */
    else
        free(req);
    maybe_free(s);
}

/* Sends msg as the final reply to req (unless cancelled or closed), then frees req. */
static void request_complete(struct request *req, json_t *msg)
{
    struct session *s = req->session;

    req->answered = true;
    if (req->modern_meta)
        modern_decorate_reply(req->method, msg);
    if (req->cancelled) {
        log_debug("dropping the reply to cancelled request %s", req->method);
        json_decref(msg);
    } else {
        s->busy++;
        send_msg(s, msg, req->id, true);
        s->busy--;
    }
    request_unlink_free(req);
}

void request_reply(struct request *req, json_t *result)
{
    request_complete(req, jsonrpc_result(req->id, result));
}

void request_error(struct request *req, int code, json_t *data, const char *fmt, ...)
{
    char message[MCP_ERROR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    request_complete(req, jsonrpc_error(req->id, code, message, data));
}

void request_fail(struct request *req, const struct mcp_error *err)
{
    int code = err->code;

    if (code == MCP_ERR_INVALID || code == MCP_ERR_DENIED || code == MCP_ERR_NOT_FOUND)
        code = MCP_ERR_INVALID_PARAMS;
    else if (code > 0)
        code = MCP_ERR_INTERNAL;
    request_error(req, code, NULL, "%s", err->msg);
}

const json_t *request_id(const struct request *req)
{
    return req->id;
}

const char *request_method(const struct request *req)
{
    return req->method;
}

struct session *request_session(struct request *req)
{
    return req->session;
}

struct mcp_server *request_server(struct request *req)
{
    return req->session->srv;
}

const char *request_owner(const struct request *req)
{
    return req->session->owner;
}

bool request_is_cancelled(const struct request *req)
{
    return req->cancelled;
}

void request_on_cancel(struct request *req, tool_cancel_fn *fn, void *arg)
{
    req->cancel_fn = fn;
    req->cancel_arg = arg;
}

json_t *request_params(const struct request *req)
{
    return req->params;
}

const json_t *request_modern_meta(const struct request *req)
{
    return req->modern_meta;
}

void session_set_stateless(struct session *s)
{
    s->stateless = true;
}

static struct request *find_inflight(struct session *s, const json_t *id);

struct request *session_find_request(struct session *s, const json_t *id)
{
    struct request *req = find_inflight(s, id);
    return req && !req->answered && !req->cancelled ? req : NULL;
}

/* Unlinks req from its session's in-flight list (no free). */
static void request_unlink(struct request *req)
{
    struct session *s = req->session;

    if (req->prev)
        req->prev->next = req->next;
    else
        s->inflight = req->next;
    if (req->next)
        req->next->prev = req->prev;
    req->prev = req->next = NULL;
    s->n_inflight--;
}

void request_hand_over(struct request *req, json_t *result, struct session *to)
{
    struct session *s = req->session;
    json_t *msg = jsonrpc_result(req->id, result);

    if (req->modern_meta)
        modern_decorate_reply(req->method, msg);
    s->busy++;
    send_msg(s, msg, req->id, true);
    request_unlink(req);
    req->session = to;
    req->next = to->inflight;
    if (to->inflight)
        to->inflight->prev = req;
    to->inflight = req;
    to->n_inflight++;
    s->busy--;
    maybe_free(s);
}

void session_set_owner(struct session *s, const char *owner)
{
    free(s->owner);
    s->owner = xstrdup(owner);
}

const json_t *request_progress_token(const struct request *req)
{
    return req->progress_token;
}

bool request_client_has(const struct request *req, const char *capability)
{
    if (req->modern_meta)
        return modern_meta_has_capability(req->modern_meta, capability);
    return session_client_has(req->session, capability);
}

void request_notify(struct request *req, const char *method, json_t *params)
{
    if (req->cancelled || req->answered) {
        json_decref(params);
        return;
    }
    send_msg(req->session, jsonrpc_notification(method, params), req->id, false);
}

void request_progress(struct request *req, double progress, double total, const char *message)
{
    if (!req->progress_token || (req->sent_progress && progress <= req->last_progress))
        return;
    req->sent_progress = true;
    req->last_progress = progress;
    json_t *params = json_pack("{s:O, s:f}", "progressToken", req->progress_token, "progress",
                               progress);
    if (total > 0)
        json_object_set_new(params, "total", json_real(total));
    if (message)
        json_object_set_new(params, "message", json_string(message));
    request_notify(req, "notifications/progress", params);
}

void request_log(struct request *req, const char *level, const char *logger, json_t *data)
{
    int lvl = mcp_log_level_parse(level);

    if (lvl < 0)
        lvl = MCP_LOG_INFO;
    /* 2026-07-28: the level travels with each request; without one, no log messages. */
    int threshold = req->modern_meta ? modern_meta_log_level(req->modern_meta)
                                     : req->session->log_level;
    if (threshold < 0 || lvl < threshold) {
        json_decref(data);
        return;
    }
    json_t *params = json_pack("{s:s, s:o}", "level", mcp_log_level_name(lvl), "data",
                               data ? data : json_null());
    if (logger)
        json_object_set_new(params, "logger", json_string(logger));
    request_notify(req, "notifications/message", params);
}

/* The capability a server-to-client method needs the client to have declared, or NULL. */
static const char *capability_for(const char *method)
{
    if (strcmp(method, "sampling/createMessage") == 0)
        return "sampling";
    if (strcmp(method, "elicitation/create") == 0)
        return "elicitation";
    if (strcmp(method, "roots/list") == 0)
        return "roots";
    return NULL;
}

static int check_can_send_client(struct request *req, const char *method, struct mcp_error *err)
{
    struct session *s = req->session;
    const char *cap = capability_for(method);

    if (s->closed || req->cancelled || req->answered)
        return mcp_error_set(err, MCP_ERR_REQUEST_CANCELLED, 0,
                             "the request was cancelled or the session closed");
    if (req->modern_meta)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "%s cannot be sent to a %s client: ask with an InputRequiredResult "
                             "instead", method, MODERN_PROTOCOL_VERSION);
    if (cap && !session_client_has(s, cap))
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, 0,
                             "the client did not declare the \"%s\" capability, so it cannot "
                             "answer %s", cap, method);
    if (s->n_pending >= MCP_MAX_PENDING_CLIENT_REQUESTS)
        return mcp_error_set(err, MCP_ERR_LIMIT, 0,
                             "too many requests to the client awaiting replies (limit %d)",
                             MCP_MAX_PENDING_CLIENT_REQUESTS);
    return 0;
}

int request_send_client(struct request *req, const char *method, json_t *params,
                        tool_client_reply_fn *cb, void *arg, struct mcp_error *err)
{
    struct session *s = req->session;

    if (check_can_send_client(req, method, err) < 0) {
        json_decref(params);
        return -1;
    }
    struct pending *p = xcalloc(1, sizeof(*p));
    p->id = s->next_client_id++;
    p->req = req;
    p->cb = cb;
    p->arg = arg;
    p->next = s->pending;
    s->pending = p;
    s->n_pending++;
    json_auto_t *id = json_integer(p->id);
    send_msg(s, jsonrpc_request(id, method, params), req->id, false);
    return 0;
}

/* ---- incoming messages -------------------------------------------------------------------- */

static void reply_error(struct session *s, const json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void reply_error(struct session *s, const json_t *id, int code, const char *fmt, ...)
{
    char message[MCP_ERROR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    send_msg(s, jsonrpc_error(id, code, message, NULL), id, true);
}

static struct request *find_inflight(struct session *s, const json_t *id)
{
    for (struct request *r = s->inflight; r; r = r->next) {
        if (json_equal(r->id, id))
            return r;
    }
    return NULL;
}

/* Checks params and _meta.progressToken; returns the token (borrowed) via *token. */
static int check_params(json_t *params, json_t **token, struct mcp_error *err)
{
    json_t *meta;

    *token = NULL;
    if (params && !json_is_object(params))
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: \"params\" must be an object");
    meta = params ? json_object_get(params, "_meta") : NULL;
    if (meta && !json_is_object(meta))
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: \"_meta\" must be an object");
    *token = meta ? json_object_get(meta, "progressToken") : NULL;
    if (*token && !json_is_string(*token) && !json_is_integer(*token))
        return mcp_error_set(err, MCP_ERR_INVALID_PARAMS, 0,
                             "Invalid params: \"_meta.progressToken\" must be a string or an "
                             "integer");
    return 0;
}

/* Returns 0 if the request may be dispatched, else -1 with err (the error to answer). */
static int admit_request(struct session *s, const struct jsonrpc_msg *msg,
                         const struct method_def *def, struct mcp_error *err)
{
    if (!def)
        return mcp_error_set(err, MCP_ERR_METHOD_NOT_FOUND, 0, "Method not found: %s",
                             msg->method);
    if (!s->initialized && !(def->flags & METHOD_BEFORE_INIT))
        return mcp_error_set(err, MCP_ERR_INVALID_REQUEST, 0,
                             "Server not initialized: send \"initialize\" before \"%s\"",
                             msg->method);
    if (find_inflight(s, msg->id))
        return mcp_error_set(err, MCP_ERR_INVALID_REQUEST, 0,
                             "Invalid Request: id is already used by a request in progress");
    if (s->n_inflight >= MCP_MAX_INFLIGHT_PER_SESSION)
        return mcp_error_set(err, MCP_ERR_SERVER, 0,
                             "Too many requests in progress on this session (limit %d); wait "
                             "for replies before sending more",
                             MCP_MAX_INFLIGHT_PER_SESSION);
    return 0;
}

static struct request *request_new(struct session *s, const struct jsonrpc_msg *msg,
                                   json_t *token)
{
    struct request *req = xcalloc(1, sizeof(*req));

    req->session = s;
    req->id = json_incref(msg->id);
    req->params = msg->params ? json_incref(msg->params) : json_object();
    req->method = xstrdup(msg->method);
    req->progress_token = token ? json_incref(token) : NULL;
    req->next = s->inflight;
    if (s->inflight)
        s->inflight->prev = req;
    s->inflight = req;
    s->n_inflight++;
    return req;
}

/* 2026-07-28 or not: a stateless session always; otherwise a request that names a protocol
 * version in _meta before any initialize (after initialize the legacy semantics hold). */
static bool request_is_modern(const struct session *s, const struct jsonrpc_msg *msg)
{
    return s->stateless || (!s->initialized && modern_params_have_version(msg->params));
}

/* Checks a modern request's _meta; answers and returns -1 if it is refused. */
static int admit_modern(struct session *s, const struct jsonrpc_msg *msg)
{
    struct mcp_error err;
    json_t *data;

    if (modern_check_request(msg, NULL, &data, &err) == 0)
        return 0;
    send_msg(s, jsonrpc_error(msg->id, err.code, err.msg, data), msg->id, true);
    return -1;
}

static void handle_request(struct session *s, struct jsonrpc_msg *msg)
{
    bool modern = request_is_modern(s, msg);
    const struct method_def *def = modern ? modern_dispatch_find(msg->method)
                                          : dispatch_find(msg->method);
    struct mcp_error err;
    json_t *token;

    if (modern && admit_modern(s, msg) < 0)
        return;
    if (admit_request(s, msg, def, &err) < 0 || check_params(msg->params, &token, &err) < 0) {
        reply_error(s, msg->id, err.code, "%s", err.msg);
        return;
    }
    struct request *req = request_new(s, msg, token);
    if (modern)
        req->modern_meta = json_incref(json_object_get(msg->params, "_meta"));
    log_debug("request %s", msg->method);
    def->fn(req, req->params);
}

static void handle_cancelled(struct session *s, json_t *params)
{
    json_t *id = params ? json_object_get(params, "requestId") : NULL;
    struct request *req = id ? find_inflight(s, id) : NULL;

    /* Unknown or finished ids are normal (the reply raced the cancellation): ignore them. */
    if (!req || strcmp(req->method, "initialize") == 0)
        return;
    log_debug("client cancelled %s", req->method);
    request_cancel(req, "request cancelled by the client");
}

static void handle_notification(struct session *s, struct jsonrpc_msg *msg)
{
    if (strcmp(msg->method, "notifications/cancelled") == 0)
        handle_cancelled(s, msg->params);
    else if (strcmp(msg->method, "notifications/initialized") == 0)
        log_debug("client initialized");
    else
        log_debug("ignoring notification %s", msg->method);
}

static void handle_response(struct session *s, struct jsonrpc_msg *msg)
{
    struct pending **pp = &s->pending;

    if (!json_is_integer(msg->id)) {
        log_debug("ignoring a response with an id we never sent");
        return;
    }
    for (; *pp; pp = &(*pp)->next) {
        struct pending *p = *pp;
        if (p->id != json_integer_value(msg->id))
            continue;
        *pp = p->next;
        s->n_pending--;
        p->cb(p->arg, msg->result, msg->result ? NULL : msg->error);
        free(p);
        return;
    }
    log_debug("ignoring a response to unknown request %" JSON_INTEGER_FORMAT,
              json_integer_value(msg->id));
}

void session_handle(struct session *s, struct jsonrpc_msg *msg)
{
    if (s->closed) {
        jsonrpc_msg_release(msg);
        return;
    }
    s->busy++;
    switch (msg->kind) {
    case JSONRPC_INVALID:
        reply_error(s, msg->id, msg->err.code, "%s", msg->err.msg);
        break;
    case JSONRPC_REQUEST:
        handle_request(s, msg);
        break;
    case JSONRPC_NOTIFICATION:
        handle_notification(s, msg);
        break;
    case JSONRPC_RESPONSE:
        handle_response(s, msg);
        break;
    }
    jsonrpc_msg_release(msg);
    s->busy--;
    maybe_free(s);
}
