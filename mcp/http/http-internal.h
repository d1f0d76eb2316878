/* Internals of the Streamable HTTP transport (MCP over the listener of server/http/), shared by
 * the files of mcp/http/ only.
 *
 *   http_transport.c  the listener's hooks (struct http_frontend): MCP's record per exchange
 *   http_route.c      what a complete request means for MCP: POST / GET / DELETE on /mcp
 *   http_modern.c     the stateless 2026-07-28 POST
 *   http_session.c    the session table and the routing of the core's messages to streams
 *   http_version.c    the MCP-Protocol-Version values (pure)
 *
 * Everything runs on the server's loop thread. A connection holds at most one exchange at a
 * time: a POSTed request waiting for the core's first message, an SSE stream of a POSTed
 * request, or the session's standalone GET stream. */
#ifndef MCPBOX_MCP_HTTP_INTERNAL_H
#define MCPBOX_MCP_HTTP_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mcp/http/http_version.h"
#include "server/http/http_conn.h"

struct session;

/* The limits. The session cap and idle time may be overridden at compile time only so that
 * tests/unit/http/test_http_transport.c can exercise them in milliseconds. */

/* Live MCP sessions. At the limit an initialize first ends the least recently active idle
 * session (no request, stream or cancel open) of the same owner; with none it gets 503 with a
 * JSON-RPC error. */
#ifndef HTTP_MAX_SESSIONS
#define HTTP_MAX_SESSIONS 128
#endif
/* A session with no request and no open stream for this long is ended. */
#ifndef HTTP_SESSION_IDLE_MS
#define HTTP_SESSION_IDLE_MS (30u * 60u * 1000u)
#endif
/* Cancellations queued per session for requests whose stream was dropped (more are rare; the
 * request then runs to completion and its reply is dropped). */
#define HTTP_MAX_QUEUED_CANCELS 16
/* Retry-After (seconds) on the 503 that answers a request in progress when the server stops. */
#define HTTP_STOPPING_RETRY_S "5"
/* Random bytes in a session id (hex-encoded: 48 visible ASCII characters, 192 bits). */
#define HTTP_SESSION_ID_BYTES 24
#define HTTP_SESSION_ID_LEN (2 * HTTP_SESSION_ID_BYTES)
/* The owner of sandboxes made by 2026-07-28 (stateless) requests when no token is set. */
#define HTTP_STATELESS_OWNER "http:stateless"

/* The one endpoint. */
#define HTTP_ENDPOINT "/mcp"

/* The transport: the listener's front-end (http_frontend.arg). */
struct mcp_http {
    struct http_server *listener;
    struct mcp_server *srv;
    struct http_sess *sessions;
    size_t nsessions;
    char token_owner[32]; /* "token:<16 hex>" when a token is set */
    bool stopping;
};

/* MCP's record of a connection's exchange (http_conn.frontend; reset when it ends). */
struct mcp_exchange {
    struct http_sess *sess;
    struct http_conn *sess_prev, *sess_next; /* session's list of exchanges */
    char *key; /* owned: the request id as compact JSON */
    bool is_initialize;
    bool prefer_sse; /* the client's Accept ranks text/event-stream first: always stream */
};

static inline struct mcp_exchange *ex_of(struct http_conn *c)
{
    return c->frontend;
}

static inline struct mcp_http *mcp_http_of(struct http_conn *c)
{
    return c->hs->fe.arg;
}

struct http_sess {
    struct http_sess *prev, *next;
    struct mcp_http *hs;
    char id[HTTP_SESSION_ID_LEN + 1];
    struct session *core;
    struct http_conn *exchanges;
    struct http_conn *get_stream;
    uint64_t last_active;
    unsigned next_stream;
    bool init_failed; /* its initialize got an error: reaped by the sweep */
    bool stateless;   /* one 2026-07-28 request (http_modern.c): ends with its exchange */
    bool reap;        /* stateless and done: destroyed from the loop (http_sess_reap) */
    uid_t peer_uid;   /* the user owning it (owner local:uid:N), or (uid_t)-1 */
    char owner[64];   /* the core session's owner (sess_owner) */
    char *cancels[HTTP_MAX_QUEUED_CANCELS]; /* owned request-id keys to cancel, from the loop */
    size_t ncancels;
};

/* http_route.c: a request for MCP (the listener's route hook): the token, then POST / GET /
 * DELETE on /mcp. */
void http_route_mcp(void *arg, struct http_conn *c, const char *path);
/* A JSON-RPC error reply (id may be NULL) with HTTP status. */
void http_conn_error(struct http_conn *c, int status, int code, const json_t *id,
                     const char *extra, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* http_modern.c: a POST without Mcp-Session-Id naming 2026-07-28 is answered here (returns
 * true); GET/DELETE naming 2026-07-28 without a session get 405. */
bool http_modern_route(struct http_conn *c);
bool http_modern_refuse_stream(struct http_conn *c);

/* http_session.c */
/* A session opened by an initialize on connection c. Its owner: the token's identity with a
 * token, else the client's user (local:uid:N, the owner stdio and the CLI give that user, so a
 * reconnect and `mcpbox sandbox ls` see the same sandboxes), else (the kernel could not tell)
 * the session itself. */
struct http_sess *http_sess_create(struct mcp_http *hs, struct http_conn *c);
/* A session for one stateless request: no Mcp-Session-Id, gone when its exchange ends. */
struct http_sess *http_sess_create_stateless(struct mcp_http *hs, struct http_conn *c);
/* Whether a request on connection c may use session s: a session owned by a user is theirs
 * alone (a session id seen by another local user does not lend their sandboxes). */
bool http_sess_peer_ok(const struct http_sess *s, struct http_conn *c);

/* Destroys the stateless sessions whose exchange has ended (from the loop, never from inside
 * the core's send callback). */
void http_sess_reap(struct mcp_http *hs);
struct http_sess *http_sess_find(struct mcp_http *hs, const char *id);
void http_sess_destroy(struct http_sess *s);
void http_sess_attach(struct http_sess *s, struct http_conn *c, enum http_exchange_mode mode);
void http_sess_detach(struct http_conn *c);
bool http_sess_has_key(const struct http_sess *s, const char *key);
void http_sess_sweep(struct http_sess *s, uint64_t now);
/* Queue notifications/cancelled for request key; run_cancels hands them to the core (never
 * from inside the core's send callback, hence the queue). */
void http_sess_queue_cancel(struct http_sess *s, const char *key);
void http_sess_run_cancels(struct http_sess *s);

#endif
