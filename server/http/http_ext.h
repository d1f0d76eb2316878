/* Extensions of the HTTP listener: another API served on the same listener and loop as MCP
 * (osapi/, OpenSandbox's lifecycle and execd APIs). The extension sees every request that
 * passed the Host/Origin checks, before the front-end (MCP and its bearer-token check), and
 * takes the ones whose path it owns; it then answers them, at once or later, through the
 * functions below. Everything else about the connection (parsing, limits, keep-alive, timeouts,
 * write stalls) stays with the listener (server/http/). Everything runs on the loop thread. */
#ifndef MCPBOX_HTTP_EXT_H
#define MCPBOX_HTTP_EXT_H

#include <stdbool.h>
#include <stddef.h>

#include "server/http/http_request.h"

struct http_conn;

struct http_extension {
    /* path: the request's path (before '?'). Returns true when it took the request. */
    bool (*route)(void *arg, struct http_conn *c, const char *path);
    void *arg;
    /* Called once when the server stops (after its connections are closed), or NULL. */
    void (*stop)(void *arg);
    /* Optional: a request whose head is in and whose body is still coming (Host and Origin
     * passed). Returning true takes it before its body: the extension answers as with route
     * and takes the body with http_ext_body_stream; false: the body is read whole and the
     * request goes to route as usual. */
    bool (*route_head)(void *arg, struct http_conn *c, const char *path);
};

const struct http_request *http_ext_request(struct http_conn *c);
/* The connection's peer is on loopback: the listener is bound there. */
bool http_ext_loopback(struct http_conn *c);
/* The uid owning the client's socket (loopback peers; cached per connection): 0 or -errno. */
int http_ext_peer_uid(struct http_conn *c, unsigned *uid);

/* Called once if the connection goes away before the exchange is over (client closed, write
 * stall, server stop); the extension must not touch c afterwards. Cleared when the exchange
 * ends (respond, stream_end). */
typedef void http_ext_abort_fn(void *arg);
void http_ext_on_abort(struct http_conn *c, http_ext_abort_fn *fn, void *arg);

/* A complete response. extra: more header lines ("Name: value\r\n"), or NULL. Ends the
 * exchange. */
void http_ext_respond(struct http_conn *c, int status, const char *content_type,
                      const char *extra, const char *body, size_t len);
/* A streamed response (chunked on HTTP/1.1, until close on HTTP/1.0): the head, then pieces of
 * body, then the end (which ends the exchange). */
void http_ext_stream_start(struct http_conn *c, int status, const char *content_type,
                           const char *extra);
void http_ext_stream_write(struct http_conn *c, const char *data, size_t len);
void http_ext_stream_end(struct http_conn *c);
/* Bytes queued to the client and not yet written (to stop producing for a slow reader). */
size_t http_ext_queued(struct http_conn *c);
/* Called (once per registration) when everything queued to the client has been written: to
 * produce again after stopping for a slow reader. NULL clears it; the exchange's end does too. */
void http_ext_on_drain(struct http_conn *c, http_ext_abort_fn *fn, void *arg);

/* A streamed response whose head lines are all the caller's (a proxied reply): only the
 * status line, the framing and Connection are added. extra: header lines ("Name: value\r\n").
 * length >= 0: a body of exactly that many bytes (Content-Length); -1: chunked on HTTP/1.1,
 * until close on HTTP/1.0. Continue with http_ext_stream_write and http_ext_stream_end. */
void http_ext_stream_start_head(struct http_conn *c, int status, const char *extra,
                                long long length);

/* The connection becomes a raw byte pipe (after a 101 Switching Protocols the caller wrote with
 * http_ext_raw_write): no more HTTP, no timeouts but the write stall. Every byte the client
 * sends, including any it sent after the request, goes to on_data; the abort function (above)
 * is called when the client closes or the connection is dropped. End it with http_ext_close. */
typedef void http_ext_data_fn(void *arg, const char *data, size_t len);
void http_ext_tunnel(struct http_conn *c, http_ext_data_fn *on_data, void *arg);
/* A request taken by route_head: its body's bytes go to on_data as they arrive (decoded from
 * chunked), then on_end is called. Answering before the end closes the connection after the
 * answer (Connection: close). Reading pauses with http_ext_read_pause. */
void http_ext_body_stream(struct http_conn *c, http_ext_data_fn *on_data, http_ext_abort_fn *on_end,
                          void *arg);
/* Bytes to the client as they are (no chunk framing). */
void http_ext_raw_write(struct http_conn *c, const char *data, size_t len);
/* Stops (true) or restarts reading from a tunnelled client or a streamed request body (its
 * bytes wait in the kernel). */
void http_ext_read_pause(struct http_conn *c, bool pause);
/* Closes the connection without calling the abort function (the caller is done with it). */
void http_ext_close(struct http_conn *c);

#endif
