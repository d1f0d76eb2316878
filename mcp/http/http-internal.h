/* Internals of the Streamable HTTP transport, shared by the files of mcp/http/ only.
 *
 *   http_server.c   listener, limits on connections, the sweep timer (timeouts, expiry)
 *   http_conn.c     one TCP connection: read, parse, write, keep-alive, close
 *   http_route.c    what a complete request means for MCP: POST / GET / DELETE on /mcp
 *   http_session.c  the session table and the routing of the core's messages to streams
 *
 * Everything runs on the server's loop thread. A connection holds at most one exchange at a
 * time (HTTP/1.1 answers requests in order): a POSTed request waiting for the core's first
 * message, an SSE stream of a POSTed request, or the session's standalone GET stream. */
#ifndef MCPBOX_HTTP_INTERNAL_H
#define MCPBOX_HTTP_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "lib/base/buf.h"
#include "mcp/http/http_ext.h"
#include "mcp/http/http_policy.h"
#include "mcp/http/http_request.h"

struct mcp_server;
struct session;

/* The limits and timeouts. The timeouts and the session cap may be overridden at compile time
 * only so that tests/unit/http/test_http_transport.c can exercise them in milliseconds. */

/* Open TCP connections. At the limit a new one first closes the oldest connection that has not
 * sent a complete request (idle, or still sending its head or body: what a local process that
 * holds connections open to lock others out holds); with none, the new one is closed at once. */
#ifndef HTTP_MAX_CONNECTIONS
#define HTTP_MAX_CONNECTIONS 512
#endif
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
/* From the first byte of a request to the end of its headers (slowloris defence). */
#ifndef HTTP_HEADER_TIMEOUT_MS
#define HTTP_HEADER_TIMEOUT_MS 10000u
#endif
/* From the end of the headers to the end of the body. */
#ifndef HTTP_BODY_TIMEOUT_MS
#define HTTP_BODY_TIMEOUT_MS 30000u
#endif
/* An idle keep-alive connection (no request in progress) is closed after this. */
#ifndef HTTP_KEEPALIVE_TIMEOUT_MS
#define HTTP_KEEPALIVE_TIMEOUT_MS 30000u
#endif
/* Comment lines on open SSE streams at this interval. */
#ifndef HTTP_SSE_PING_MS
#define HTTP_SSE_PING_MS 15000u
#endif
/* Output queued to one connection (beyond a single message); past it the client is not
 * reading and the connection is dropped. */
#define HTTP_MAX_QUEUED_OUTPUT (8u * 1024u * 1024u)
/* A connection whose queued output has not moved for this long is dropped. */
#ifndef HTTP_WRITE_STALL_MS
#define HTTP_WRITE_STALL_MS 30000u
#endif
/* After an error reply that ends a connection: how long we keep reading (and discarding) so
 * the client sees the reply instead of a reset. */
#ifndef HTTP_LINGER_MS
#define HTTP_LINGER_MS 2000u
#endif
/* Pipelined bytes buffered while a response is in progress; past it we stop reading. */
#define HTTP_MAX_PENDING_INPUT (64u * 1024u)
/* Granularity of every timeout above. */
#ifndef HTTP_SWEEP_INTERVAL_MS
#define HTTP_SWEEP_INTERVAL_MS 500u
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

enum http_conn_phase {
    CONN_READING,    /* reading (or waiting for) a request */
    CONN_RESPONDING, /* a request is being answered; later bytes are buffered */
    CONN_DRAINING,   /* reply sent, write side shut; discarding input until EOF or linger */
    CONN_TUNNEL,     /* raw bytes both ways for an extension (http_ext_tunnel), until close */
};

enum http_exchange_mode {
    EX_NONE,
    EX_PENDING, /* POSTed request, no reply bytes sent yet */
    EX_SSE,     /* POSTed request answered with an SSE stream */
    EX_GET,     /* the session's standalone stream */
};

struct http_sess;

struct http_conn {
    uv_tcp_t tcp;
    struct http_server *hs;
    struct http_conn *prev, *next; /* server's list */
    struct http_reader reader;
    struct buf input; /* received bytes not yet parsed */
    enum http_conn_phase phase;
    uint64_t deadline;   /* monotonic ms, 0 = none */
    size_t queued;       /* bytes handed to uv_write and not yet written */
    uint64_t last_write_ms;
    bool closing, read_stopped, resume_pending, keep_alive, chunked;
    bool output_backlog; /* replies queued past HTTP_MAX_QUEUED_OUTPUT: not reading (see on_write) */

    /* The exchange (see enum http_exchange_mode). */
    enum http_exchange_mode mode;
    struct http_sess *sess;
    struct http_conn *sess_prev, *sess_next; /* session's list of exchanges */
    char *key;           /* owned: the request id as compact JSON */
    bool is_initialize;
    bool prefer_sse;     /* the client's Accept ranks text/event-stream first: always stream */
    unsigned stream_no, event_seq;
    uint64_t next_ping;
    /* An extension's exchange (http_ext.h): told if the connection goes before it ends. */
    void (*ext_abort)(void *arg);
    void *ext_arg;
    /* ... told when its queued output has all been written (http_ext_on_drain) */
    void (*ext_drain)(void *arg);
    void *ext_drain_arg;
    /* ... and, once tunnelled, given every byte the client sends */
    void (*ext_data)(void *arg, const char *data, size_t len);
    void *ext_data_arg;
    /* The request was routed once its head was in and its body is still coming: the bytes go
     * to the reader's body_sink as they arrive, then ext_body_end is called. */
    bool body_streaming;
    void (*ext_body_end)(void *arg);
    /* The uid owning the client's socket (loopback; http_peer.c): 0 not asked yet, 1 known,
     * -1 the kernel could not tell. */
    int peer_uid_state;
    uid_t peer_uid;
};

struct http_sess {
    struct http_sess *prev, *next;
    struct http_server *hs;
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

struct http_server {
    struct mcp_server *srv;
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t sweep;
    uv_idle_t resume;
    int open_handles; /* server-level handles not yet closed; freed at zero */
    bool stopping;
    struct http_policy policy;
    char token_owner[32]; /* "token:<16 hex>" when a token is set */
    struct http_conn *conns;
    size_t nconns;
    char *read_buf; /* shared by every connection's reads; NULL while no connection is open */
    struct http_sess *sessions;
    size_t nsessions;
    const struct http_extension *ext; /* another API on this listener (http_ext.h), or NULL */
};

/* http_conn.c */
void http_conn_accept(struct http_server *hs);
void http_conn_close(struct http_conn *c);
/* Feed buffered input to the parser and route a complete request (not re-entrant: from the
 * loop or via http_conn_schedule_resume). */
void http_conn_resume(struct http_conn *c);
void http_conn_schedule_resume(struct http_conn *c);
/* Run deferred work (resumed connections, queued cancellations) from the loop, soon. */
void http_schedule_idle(struct http_server *hs);
/* Drops a connection whose client stopped reading; its request (if any) is cancelled. */
void http_conn_abort(struct http_conn *c, const char *why);
void http_conn_sweep(struct http_conn *c, uint64_t now);
/* A complete response with Content-Length. extra: more header lines ("Name: v\r\n"), or NULL. */
void http_conn_respond(struct http_conn *c, int status, const char *content_type,
                       const char *extra, const char *body, size_t len);
/* A JSON-RPC error reply (id may be NULL) with HTTP status. */
void http_conn_error(struct http_conn *c, int status, int code, const json_t *id,
                     const char *extra, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* SSE: response head (+ priming event when prime), one message event, the end of the stream. */
void http_conn_sse_start(struct http_conn *c, bool prime);
void http_conn_sse_message(struct http_conn *c, const char *json, size_t len);
void http_conn_sse_comment(struct http_conn *c, const char *text);
void http_conn_sse_end(struct http_conn *c);
/* Stops (true) or restarts reading from the socket. */
void http_conn_read_pause(struct http_conn *c, bool pause);
/* A piece of a streamed body (chunk-framed when the response is chunked). */
void http_conn_write_body(struct http_conn *c, const char *data, size_t len);
/* The exchange is over: detach from the session and get ready for the next request. */
void http_conn_exchange_done(struct http_conn *c);

/* http_route.c */
void http_route_request(struct http_conn *c);
/* A request whose head is in and whose body follows: offered to the extension (Host and Origin
 * must pass first); true when it took it, with c->body_streaming set. */
bool http_route_head(struct http_conn *c);

/* http_modern.c: a POST without Mcp-Session-Id naming 2026-07-28 is answered here (returns
 * true); GET/DELETE naming 2026-07-28 without a session get 405. */
bool http_modern_route(struct http_conn *c);
bool http_modern_refuse_stream(struct http_conn *c);

/* http_session.c */
/* A session opened by an initialize on connection c. Its owner: the token's identity with a
 * token, else the client's user (local:uid:N, the owner stdio and the CLI give that user, so a
 * reconnect and `mcpbox sandbox ls` see the same sandboxes), else (the kernel could not tell)
 * the session itself. */
struct http_sess *http_sess_create(struct http_server *hs, struct http_conn *c);
/* A session for one stateless request: no Mcp-Session-Id, gone when its exchange ends. */
struct http_sess *http_sess_create_stateless(struct http_server *hs, struct http_conn *c);
/* Whether a request on connection c may use session s: a session owned by a user is theirs
 * alone (a session id seen by another local user does not lend their sandboxes). */
bool http_sess_peer_ok(const struct http_sess *s, struct http_conn *c);

/* http_peer.c: the uid owning the socket at the other end of a loopback TCP connection (one
 * sock_diag lookup); 0 or -errno. The per-connection form caches the answer. */
int http_peer_uid(const struct sockaddr_storage *peer, const struct sockaddr_storage *self,
                  uid_t *uid);
int http_conn_peer_uid(struct http_conn *c, uid_t *uid);
/* Destroys the stateless sessions whose exchange has ended (from the loop, never from inside
 * the core's send callback). */
void http_sess_reap(struct http_server *hs);
struct http_sess *http_sess_find(struct http_server *hs, const char *id);
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
