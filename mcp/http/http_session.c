/* The HTTP session table and the routing of what the protocol core sends: a message tied to a
 * client request goes to that request's POST (as its JSON reply, or as an event on the SSE
 * stream the POST turns into); a message tied to no request goes to the session's GET stream,
 * and is dropped when there is none (the spec allows the server to send only on open streams). */
#define LOG_MODULE "http"
#include "mcp/http/http-internal.h"

#include <stdio.h>
#include <string.h>

#include "lib/base/cleanup.h"
#include "lib/base/json_out.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "mcp/http/http_version.h"
#include "mcp/jsonrpc.h"
#include "mcp/modern.h"
#include "mcp/session.h"

static struct http_conn *find_exchange(struct http_sess *s, const char *key)
{
    for (struct http_conn *c = s->exchanges; c; c = ex_of(c)->sess_next)
        if (ex_of(c)->key && strcmp(ex_of(c)->key, key) == 0)
            return c;
    return NULL;
}

bool http_sess_has_key(const struct http_sess *s, const char *key)
{
    return find_exchange((struct http_sess *)s, key) != NULL;
}

static bool has_error(json_t *msg)
{
    return json_object_get(msg, "error") != NULL;
}

/* The first message for a pending POST decides the reply's form: a final response alone is
 * plain JSON (unless the client ranks SSE first in Accept); anything before it turns the reply
 * into an SSE stream. */
static void deliver(struct http_sess *s, struct http_conn *c, json_t *msg, bool final)
{
    size_t len;
    cleanup_free char *text = json_out_dump(msg, &len);
    if (!text)
        return;
    if (final && ex_of(c)->is_initialize && has_error(msg))
        s->init_failed = true;
    if (c->mode == EX_PENDING && final && !ex_of(c)->prefer_sse) {
        http_conn_respond(c, s->stateless ? modern_http_status(msg) : 200, "application/json",
                          NULL, text, len);
        return;
    }
    if (c->mode == EX_PENDING) {
        c->mode = EX_SSE;
        http_conn_sse_start(c, http_protocol_has_priming(session_protocol_version(s->core)));
    }
    http_conn_sse_message(c, text, len);
    if (final && !c->closing)
        http_conn_sse_end(c);
}

static void sess_send(void *arg, json_t *msg, const json_t *related, bool final)
{
    struct http_sess *s = arg;
    if (!related) {
        if (s->get_stream) {
            cleanup_free char *text = json_dumps(msg, JSON_COMPACT);
            if (text)
                http_conn_sse_message(s->get_stream, text, strlen(text));
        } else {
            log_debug("session %.8s: no GET stream; dropping an unrelated message", s->id);
        }
        return;
    }
    cleanup_free char *key = json_out_dump(related, NULL);
    struct http_conn *c = key ? find_exchange(s, key) : NULL;
    if (!c) {
        log_debug("session %.8s: request %s has no open stream; dropping a message", s->id,
                  key ? key : "?");
        return;
    }
    deliver(s, c, msg, final);
}

/* The core dropped a cancelled request's reply: end its exchange now rather than leave the
 * stream (and the connection) open until the session goes. A stream already started simply
 * ends, as it would after a response; a reply not yet started becomes an empty event stream,
 * without a priming event so that the client has nothing to resume. */
static void sess_request_dropped(void *arg, const json_t *id)
{
    struct http_sess *s = arg;
    cleanup_free char *key = json_out_dump(id, NULL); /* keyed as in sess_send */
    struct http_conn *c = key ? find_exchange(s, key) : NULL;
    if (!c || c->closing)
        return;
    if (c->mode == EX_PENDING) {
        c->mode = EX_SSE;
        http_conn_sse_start(c, false);
    }
    http_conn_sse_end(c);
}

static const struct session_transport_ops sess_ops = {
    .send = sess_send,
    .request_dropped = sess_request_dropped,
};

/* The owner of the sandboxes made in a session (see http_sess_create in http-internal.h). */
static void sess_owner(struct mcp_http *hs, struct http_conn *c, const char *sid, char *out,
                       size_t size, uid_t *peer)
{
    uid_t uid;
    if (hs->token_owner[0])
        snprintf(out, size, "%s", hs->token_owner);
    else if (c && http_conn_peer_uid(c, &uid) == 0)
        snprintf(out, size, "local:uid:%u", (unsigned)(*peer = uid));
    else
        snprintf(out, size, "session:%s", sid);
}

/* At the session limit: the least recently active idle session of this owner (the sweep's
 * notion of idle), which the owner's new session replaces rather than being refused. */
static struct http_sess *oldest_idle_of(struct mcp_http *hs, const char *owner)
{
    struct http_sess *victim = NULL;
    for (struct http_sess *s = hs->sessions; s; s = s->next)
        if (!s->exchanges && s->ncancels == 0 && !s->stateless && strcmp(s->owner, owner) == 0 &&
            (victim == NULL || s->last_active <= victim->last_active))
            victim = s;
    return victim;
}

struct http_sess *http_sess_create(struct mcp_http *hs, struct http_conn *c)
{
    struct http_sess *s = xcalloc(1, sizeof(*s));
    s->hs = hs;
    random_id(s->id, sizeof(s->id), "", HTTP_SESSION_ID_BYTES);
    s->peer_uid = (uid_t)-1;
    sess_owner(hs, c, s->id, s->owner, sizeof s->owner, &s->peer_uid);
    struct http_sess *victim = hs->nsessions >= HTTP_MAX_SESSIONS ? oldest_idle_of(hs, s->owner)
                                                                  : NULL;
    if (victim != NULL) {
        log_warn("session limit (%d) reached; ending %s's least recently used idle session "
                 "%.8s", HTTP_MAX_SESSIONS, s->owner, victim->id);
        http_sess_destroy(victim);
    }
    if (hs->nsessions >= HTTP_MAX_SESSIONS) {
        log_warn("session limit (%d) reached; refusing initialize", HTTP_MAX_SESSIONS);
        free(s);
        return NULL;
    }
    s->last_active = now_mono_ms();
    s->core = session_new(hs->srv, &sess_ops, s, s->owner);
    s->next = hs->sessions;
    if (hs->sessions)
        hs->sessions->prev = s;
    hs->sessions = s;
    hs->nsessions++;
    log_debug("session %.8s opened (%zu live)", s->id, hs->nsessions);
    return s;
}

struct http_sess *http_sess_find(struct mcp_http *hs, const char *id)
{
    for (struct http_sess *s = hs->sessions; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

void http_sess_attach(struct http_sess *s, struct http_conn *c, enum http_exchange_mode mode)
{
    struct mcp_exchange *x = ex_of(c);
    x->sess = s;
    c->mode = mode;
    x->sess_prev = NULL;
    x->sess_next = s->exchanges;
    if (s->exchanges)
        ex_of(s->exchanges)->sess_prev = c;
    s->exchanges = c;
    if (mode == EX_GET)
        s->get_stream = c;
}

void http_sess_detach(struct http_conn *c)
{
    struct mcp_exchange *x = ex_of(c);
    struct http_sess *s = x->sess;
    if (x->sess_prev)
        ex_of(x->sess_prev)->sess_next = x->sess_next;
    else
        s->exchanges = x->sess_next;
    if (x->sess_next)
        ex_of(x->sess_next)->sess_prev = x->sess_prev;
    if (s->get_stream == c)
        s->get_stream = NULL;
    x->sess = NULL;
    x->sess_prev = x->sess_next = NULL;
    s->last_active = now_mono_ms();
    if (s->stateless && !s->exchanges) {
        s->reap = true;
        http_schedule_idle(s->hs->listener);
    }
}

struct http_sess *http_sess_create_stateless(struct mcp_http *hs, struct http_conn *c)
{
    struct http_sess *s = http_sess_create(hs, c);
    if (!s)
        return NULL;
    s->stateless = true;
    session_set_stateless(s->core);
    /* No session to own sandboxes: without a token and without a known user, every stateless
     * client is one owner (docs/protocol-2026.md). */
    if (!hs->token_owner[0] && s->peer_uid == (uid_t)-1)
        session_set_owner(s->core, HTTP_STATELESS_OWNER);
    return s;
}

bool http_sess_peer_ok(const struct http_sess *s, struct http_conn *c)
{
    uid_t uid;
    if (s->peer_uid == (uid_t)-1)
        return true; /* owned by a token or by the session itself */
    return http_conn_peer_uid(c, &uid) == 0 && uid == s->peer_uid;
}

void http_sess_reap(struct mcp_http *hs)
{
    struct http_sess *next;
    for (struct http_sess *s = hs->sessions; s; s = next) {
        next = s->next;
        if (s->reap)
            http_sess_destroy(s); /* cancels the request if it is still running */
    }
}

/* Ends every open exchange: a request still waiting gets 404 (its session is gone, as the
 * client will learn on its next request anyway); streams end normally. */
#define HTTP_STOPPING_MSG                                                                          \
    "Service Unavailable: the server is shutting down; retry once it is back (its sessions end "  \
    "with it: initialize again if the retry gets 404)"

/* A request still in progress when the server stops (SIGTERM) is answered 503 with
 * Retry-After, or on its SSE stream with a JSON-RPC error, so that the client reads a stop it
 * can retry rather than an expired session (404, as after DELETE). */
static void answer_stopping(struct http_conn *c)
{
    json_t *id = ex_of(c)->key ? json_loads(ex_of(c)->key, JSON_DECODE_ANY, NULL) : NULL;
    if (c->mode == EX_PENDING) {
        http_conn_error(c, 503, -32000, id, "Retry-After: " HTTP_STOPPING_RETRY_S "\r\n", "%s",
                        HTTP_STOPPING_MSG);
    } else {
        if (c->mode == EX_SSE && id != NULL) {
            json_t *err = jsonrpc_error(id, -32000, HTTP_STOPPING_MSG, NULL);
            size_t len;
            char *text = json_out_dump(err, &len);
            http_conn_sse_message(c, text, len);
            free(text);
            json_decref(err);
        }
        http_conn_sse_end(c);
    }
    json_decref(id);
}

static void end_exchanges(struct http_sess *s)
{
    while (s->exchanges) {
        struct http_conn *c = s->exchanges;
        if (s->hs->stopping)
            answer_stopping(c);
        else if (c->mode == EX_PENDING)
            http_conn_error(c, 404, -32001, NULL, NULL, "Session terminated");
        else
            http_conn_sse_end(c);
        if (s->exchanges == c) /* closing connections detach themselves; be sure */
            http_sess_detach(c);
    }
}

void http_sess_destroy(struct http_sess *s)
{
    struct mcp_http *hs = s->hs;
    end_exchanges(s);
    if (s->prev)
        s->prev->next = s->next;
    else
        hs->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    hs->nsessions--;
    session_close(s->core); /* no send() after this returns */
    for (size_t i = 0; i < s->ncancels; i++)
        free(s->cancels[i]);
    log_debug("session %.8s ended (%zu live)", s->id, hs->nsessions);
    free(s);
}

void http_sess_sweep(struct http_sess *s, uint64_t now)
{
    if (s->exchanges || s->ncancels > 0)
        return; /* a request or a stream is open, or cancels wait for the loop: in use */
    /* last_active may be later than now (set during this sweep): no unsigned wrap-around. */
    if (s->init_failed || (now > s->last_active && now - s->last_active > HTTP_SESSION_IDLE_MS))
        http_sess_destroy(s);
}

void http_sess_queue_cancel(struct http_sess *s, const char *key)
{
    if (s->ncancels == HTTP_MAX_QUEUED_CANCELS)
        return;
    s->cancels[s->ncancels++] = xstrdup(key);
    http_schedule_idle(s->hs->listener);
}

void http_sess_run_cancels(struct http_sess *s)
{
    while (s->ncancels > 0) {
        cleanup_free char *key = s->cancels[--s->ncancels];
        cleanup_free char *text = xasprintf(
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
            "{\"requestId\":%s,\"reason\":\"the client stopped reading the response\"}}",
            key);
        struct jsonrpc_msg msg;
        jsonrpc_parse(text, strlen(text), &msg);
        session_handle(s->core, &msg);
        jsonrpc_msg_release(&msg);
    }
}
