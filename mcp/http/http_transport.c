/* MCP as the listener's front-end (struct http_frontend): each connection carries MCP's record
 * of its exchange (struct mcp_exchange), and the listener tells the transport when an exchange
 * ends, when deferred work may run, when to sweep sessions and when the server stops; MCP adds
 * Mcp-Session-Id to its responses and words the listener's refusals as JSON-RPC errors. */
#define LOG_MODULE "http"
#include "mcp/http/http_transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "mcp/http/http-internal.h"
#include "mcp/limits.h"
#include "server/config.h"
#include "server/http/http_server.h"

_Static_assert(HTTP_MAX_BODY_BYTES == MCP_MAX_MESSAGE_BYTES,
               "a POSTed body is one JSON-RPC message: the listener keeps bodies up to MCP's "
               "message limit whole");

/* An exchange ends; aborted: its client stopped reading, so the request it made is cancelled
 * (a POST merely closed is not: its output is dropped). */
static void transport_exchange_end(void *arg, struct http_conn *c, bool aborted)
{
    struct mcp_exchange *x = ex_of(c);
    (void)arg;
    if (aborted && x->sess && x->key && (c->mode == EX_PENDING || c->mode == EX_SSE))
        http_sess_queue_cancel(x->sess, x->key);
    if (x->sess)
        http_sess_detach(c);
    free(x->key);
    *x = (struct mcp_exchange){0};
}

static void transport_idle(void *arg)
{
    struct mcp_http *mh = arg;
    for (struct http_sess *s = mh->sessions; s; s = s->next)
        http_sess_run_cancels(s);
    http_sess_reap(mh);
}

static void transport_sweep(void *arg, uint64_t now)
{
    struct mcp_http *mh = arg;
    struct http_sess *next;
    for (struct http_sess *s = mh->sessions; s; s = next) {
        next = s->next;
        http_sess_sweep(s, now);
    }
}

/* Ends every session (answering what is in progress) and frees the transport: the listener
 * calls nothing of it afterwards but exchange_end, which needs no state. */
static void transport_stop(void *arg)
{
    struct mcp_http *mh = arg;
    mh->stopping = true;
    while (mh->sessions)
        http_sess_destroy(mh->sessions);
    free(mh);
}

static void transport_head(void *arg, struct http_conn *c, struct buf *h)
{
    const struct http_sess *s = ex_of(c)->sess;
    (void)arg;
    if (s && !s->stateless) {
        buf_append_str(h, "Mcp-Session-Id: ");
        buf_append_str(h, s->id);
        buf_append_str(h, "\r\n");
    }
}

/* Event ids are "STREAM-SEQ", STREAM counted per session; 2026-07-28 streams are not
 * resumable: their message events carry no id. */
static unsigned transport_stream_start(void *arg, struct http_conn *c, bool *event_ids)
{
    struct http_sess *s = ex_of(c)->sess;
    (void)arg;
    *event_ids = !(s && s->stateless);
    return s ? ++s->next_stream : 0;
}

static void transport_error(void *arg, struct http_conn *c, int status, const char *extra,
                            const char *msg)
{
    (void)arg;
    http_conn_error(c, status, status == 403 ? -32000 : -32600, NULL, extra, "%s", msg);
}

static void set_token_owner(struct mcp_http *mh, const char *token)
{
    char digest[65];
    if (!token || !*token)
        return;
    sha256_hex(token, strlen(token), digest);
    snprintf(mh->token_owner, sizeof(mh->token_owner), "token:%.16s", digest);
}

int http_transport_start(struct mcp_server *srv, const struct mcp_config *cfg,
                         const struct http_extension *ext, struct mcp_error *err)
{
    struct mcp_http *mh = xcalloc(1, sizeof(*mh));
    const struct http_frontend fe = {
        .arg = mh,
        .conn_size = sizeof(struct mcp_exchange),
        .endpoint = HTTP_ENDPOINT,
        .route = http_route_mcp,
        .exchange_end = transport_exchange_end,
        .idle = transport_idle,
        .sweep = transport_sweep,
        .stop = transport_stop,
        .head = transport_head,
        .stream_start = transport_stream_start,
        .error = transport_error,
    };
    mh->srv = srv;
    set_token_owner(mh, cfg->token);
    mh->listener = http_server_listen(srv, cfg, &fe, ext, err);
    if (!mh->listener) {
        free(mh);
        return -1;
    }
    return 0;
}
