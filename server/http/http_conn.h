/* The HTTP listener's connections, as the files of server/http/ and a front-end built into the
 * listener (mcp/http/, Streamable HTTP) see them. A front-end that only answers some paths on
 * the same listener (osapi/) uses the narrower http_ext.h instead.
 *
 *   http_server.c   listener, limits on connections, the sweep timer (timeouts)
 *   http_conn.c     one TCP connection: read, parse, write, keep-alive, close
 *   http_admit.c    a complete request: Host and Origin, then the extension, then the front-end
 *   http_ext.c      what an extension (http_ext.h) answers with
 *
 * Everything runs on the server's loop thread. A connection holds at most one exchange at a
 * time (HTTP/1.1 answers requests in order): a request waiting for its reply, an event stream
 * answering a request, or a standalone event stream (no request to answer). What the exchange
 * means (sessions, request ids) is the front-end's: it registers the hooks of struct
 * http_frontend and keeps its own record per connection (http_conn.frontend). */
#ifndef MCPBOX_HTTP_CONN_H
#define MCPBOX_HTTP_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "lib/base/buf.h"
#include "server/http/http_ext.h"
#include "server/http/http_policy.h"
#include "server/http/http_request.h"

struct mcp_server;

/* The limits and timeouts. The timeouts and the connection cap may be overridden at compile time
 * only so that tests/unit/http/test_http_transport.c can exercise them in milliseconds. */

/* Open TCP connections. At the limit a new one first closes the oldest connection that has not
 * sent a complete request (idle, or still sending its head or body: what a local process that
 * holds connections open to lock others out holds); with none, the new one is closed at once. */
#ifndef HTTP_MAX_CONNECTIONS
#define HTTP_MAX_CONNECTIONS 512
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
enum http_conn_phase {
    CONN_READING,    /* reading (or waiting for) a request */
    CONN_RESPONDING, /* a request is being answered; later bytes are buffered */
    CONN_DRAINING,   /* reply sent, write side shut; discarding input until EOF or linger */
    CONN_TUNNEL,     /* raw bytes both ways for an extension (http_ext_tunnel), until close */
};

enum http_exchange_mode {
    EX_NONE,
    EX_PENDING, /* a request, no reply bytes sent yet */
    EX_SSE,     /* a request answered with an SSE stream */
    EX_GET,     /* a standalone SSE stream (MCP: the session's GET stream) */
};

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
    void *frontend; /* the front-end's record of the exchange (http_frontend.conn_size bytes) */
    unsigned stream_no, event_seq;
    bool event_ids; /* message events carry ids (http_frontend.stream_start) */
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

/* What a front-end built into the listener (mcp/http/) registers: it answers what no extension
 * took and gives the exchanges their meaning. Every hook but route may be NULL. */
struct http_frontend {
    void *arg;
    /* Bytes of the front-end's record per connection (zeroed at accept; c->frontend). */
    size_t conn_size;
    /* The path printed in "listening on http://HOST:PORT<path>". */
    const char *endpoint;
    /* A complete request that passed Host and Origin and that no extension took. path: its
     * path (before '?'), or NULL when the target is not one (not "/...", or too long). */
    void (*route)(void *arg, struct http_conn *c, const char *path);
    /* c's exchange ends: answered (aborted false) or its connection closes; aborted: dropped
     * because the client stopped reading (what it asked for may be cancelled). */
    void (*exchange_end)(void *arg, struct http_conn *c, bool aborted);
    /* Deferred work, from the loop (http_schedule_idle). */
    void (*idle)(void *arg);
    /* Every HTTP_SWEEP_INTERVAL_MS, after the connections' timeouts. */
    void (*sweep)(void *arg, uint64_t now);
    /* The server stops: first, while the connections are still open to answer what is in
     * progress. Afterwards only exchange_end is called (as the connections close). */
    void (*stop)(void *arg);
    /* More header lines ("Name: value\r\n") for every response head on c. */
    void (*head)(void *arg, struct http_conn *c, struct buf *h);
    /* An SSE stream starts on c: its number (event ids are "N-SEQ"), and in *event_ids
     * whether its message events carry ids. Without it: 0, with ids. */
    unsigned (*stream_start)(void *arg, struct http_conn *c, bool *event_ids);
    /* A refusal by the listener itself (malformed request, timeout, Host, Origin, a repeated
     * header) in the front-end's error format; msg is printable ASCII. Without it: text. */
    void (*error)(void *arg, struct http_conn *c, int status, const char *extra,
                  const char *msg);
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
    struct http_conn *conns;
    size_t nconns;
    char *read_buf; /* shared by every connection's reads; NULL while no connection is open */
    struct http_frontend fe;
    const struct http_extension *ext; /* another API on this listener (http_ext.h), or NULL */
};

/* http_conn.c */
void http_conn_accept(struct http_server *hs);
void http_conn_close(struct http_conn *c);
/* Feed buffered input to the parser and route a complete request (not re-entrant: from the
 * loop or via http_conn_schedule_resume). */
void http_conn_resume(struct http_conn *c);
void http_conn_schedule_resume(struct http_conn *c);
/* Run deferred work (resumed connections, the front-end's idle hook) from the loop, soon. */
void http_schedule_idle(struct http_server *hs);
/* Drops a connection whose client stopped reading (the front-end's exchange_end hears
 * aborted: its request may be cancelled). */
void http_conn_abort(struct http_conn *c, const char *why);
void http_conn_sweep(struct http_conn *c, uint64_t now);
/* A complete response with Content-Length. extra: more header lines ("Name: v\r\n"), or NULL. */
void http_conn_respond(struct http_conn *c, int status, const char *content_type,
                       const char *extra, const char *body, size_t len);
/* Replaces every byte outside printable ASCII with '?': error messages may quote header
 * values. */
void http_printable(char *s);
/* A refusal in the front-end's error format (http_frontend.error). */
void http_conn_fail(struct http_conn *c, int status, const char *extra, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* SSE: response head (+ priming event when prime), one message event, the end of the stream. */
void http_conn_sse_start(struct http_conn *c, bool prime);
void http_conn_sse_message(struct http_conn *c, const char *json, size_t len);
void http_conn_sse_comment(struct http_conn *c, const char *text);
void http_conn_sse_end(struct http_conn *c);
/* Stops (true) or restarts reading from the socket. */
void http_conn_read_pause(struct http_conn *c, bool pause);
/* A piece of a streamed body (chunk-framed when the response is chunked). */
void http_conn_write_body(struct http_conn *c, const char *data, size_t len);
/* The exchange is over: the front-end hears it (exchange_end), the next request may come. */
void http_conn_exchange_done(struct http_conn *c);

/* http_admit.c */
void http_route_request(struct http_conn *c);
/* A request whose head is in and whose body follows: offered to the extension (Host and Origin
 * must pass first); true when it took it, with c->body_streaming set. */
bool http_route_head(struct http_conn *c);
/* A header that must not repeat: if it does, *bad is set and a 400 sent (once). */
const char *http_conn_single_header(struct http_conn *c, const char *name, bool *bad);

/* http_peer.c: the uid owning the socket at the other end of a loopback TCP connection (one
 * sock_diag lookup); 0 or -errno. The per-connection form caches the answer. */
int http_peer_uid(const struct sockaddr_storage *peer, const struct sockaddr_storage *self,
                  uid_t *uid);
int http_conn_peer_uid(struct http_conn *c, uid_t *uid);

#endif
