/* The connection operations an extension (http_ext.h) answers its requests with. */
#define LOG_MODULE "http"
#include "server/http/http_conn.h"

#include <stdio.h>
#include <string.h>

#include "lib/base/buf.h"
#include "lib/base/util.h"

const struct http_request *http_ext_request(struct http_conn *c)
{
    return &c->reader.req;
}

bool http_ext_loopback(struct http_conn *c)
{
    return c->hs->policy.loopback;
}

int http_ext_peer_uid(struct http_conn *c, unsigned *uid)
{
    uid_t u;
    int rc = http_conn_peer_uid(c, &u);
    if (rc == 0)
        *uid = (unsigned)u;
    return rc;
}

void http_ext_on_abort(struct http_conn *c, http_ext_abort_fn *fn, void *arg)
{
    c->ext_abort = fn;
    c->ext_arg = arg;
}

void http_ext_respond(struct http_conn *c, int status, const char *content_type,
                      const char *extra, const char *body, size_t len)
{
    http_conn_respond(c, status, content_type, extra, body, len);
}

/* The head of a streamed response: the status line, lines1 and lines2 (either may be ""), the
 * framing (Content-Length when length >= 0, else chunked or until close) and Connection. */
static void stream_head(struct http_conn *c, int status, const char *lines1, const char *lines2,
                        long long length)
{
    struct buf h;
    buf_init(&h, (size_t)-1); /* a proxied head is bounded by its reader (osapi) */
    char framing[64] = "";
    if (c->body_streaming)
        c->keep_alive = false; /* the rest of the request body is not read: the connection ends */
    if (length >= 0) {
        c->chunked = false; /* the body is written as it is */
        snprintf(framing, sizeof(framing), "Content-Length: %lld\r\n", length);
    } else if (c->chunked) {
        snprintf(framing, sizeof(framing), "Transfer-Encoding: chunked\r\n");
    } else {
        c->keep_alive = false; /* HTTP/1.0: the body ends when the connection does */
    }
    buf_printf(&h, "HTTP/1.1 %d %s\r\n%s%s%sConnection: %s\r\n\r\n", status,
               http_status_str((enum http_status)status), lines1, lines2, framing,
               c->keep_alive ? "keep-alive" : "close");
    bool chunked = c->chunked; /* the head itself is never chunk-framed */
    c->chunked = false;
    http_conn_write_body(c, h.data, h.len);
    c->chunked = chunked;
    buf_release(&h);
}

void http_ext_stream_start(struct http_conn *c, int status, const char *content_type,
                           const char *extra)
{
    char lines[256];
    snprintf(lines, sizeof(lines),
             "Content-Type: %s\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n",
             content_type);
    stream_head(c, status, lines, extra ? extra : "", -1);
}

void http_ext_stream_start_head(struct http_conn *c, int status, const char *extra,
                                long long length)
{
    stream_head(c, status, "", extra ? extra : "", length);
}

void http_ext_stream_write(struct http_conn *c, const char *data, size_t len)
{
    if (len > 0)
        http_conn_write_body(c, data, len);
}

void http_ext_stream_end(struct http_conn *c)
{
    http_conn_sse_end(c);
}

size_t http_ext_queued(struct http_conn *c)
{
    return c->queued;
}

void http_ext_body_stream(struct http_conn *c, http_ext_data_fn *on_data, http_ext_abort_fn *on_end,
                          void *arg)
{
    c->reader.body_sink = on_data;
    c->reader.body_sink_arg = arg;
    c->ext_body_end = on_end;
}

void http_ext_on_drain(struct http_conn *c, http_ext_abort_fn *fn, void *arg)
{
    c->ext_drain = fn;
    c->ext_drain_arg = arg;
}

void http_ext_tunnel(struct http_conn *c, http_ext_data_fn *on_data, void *arg)
{
    c->phase = CONN_TUNNEL;
    c->deadline = 0;
    c->keep_alive = false;
    c->ext_data = on_data;
    c->ext_data_arg = arg;
    http_ext_read_pause(c, false);
    if (c->input.len == 0 || c->closing)
        return;
    /* What the client sent after its request (it need not wait for the 101). */
    struct buf early = c->input;
    buf_init(&c->input, early.limit);
    on_data(arg, early.data, early.len);
    buf_release(&early);
}

void http_ext_raw_write(struct http_conn *c, const char *data, size_t len)
{
    bool chunked = c->chunked;
    c->chunked = false;
    http_conn_write_body(c, data, len);
    c->chunked = chunked;
}

void http_ext_read_pause(struct http_conn *c, bool pause)
{
    http_conn_read_pause(c, pause);
}

void http_ext_close(struct http_conn *c)
{
    c->ext_abort = NULL;
    c->ext_drain = NULL;
    c->ext_data = NULL;
    http_conn_close(c);
}
