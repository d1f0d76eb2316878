/* The connection operations an extension (http_ext.h) answers its requests with. */
#define LOG_MODULE "http"
#include "mcp/http/http-internal.h"

#include <string.h>

#include "mcp/base/buf.h"
#include "mcp/base/util.h"

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

void http_ext_stream_start(struct http_conn *c, int status, const char *content_type,
                           const char *extra)
{
    struct buf h;
    buf_init(&h, HTTP_MAX_HEADER_BYTES);
    if (!c->chunked)
        c->keep_alive = false; /* HTTP/1.0: the body ends when the connection does */
    buf_printf(&h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nCache-Control: no-cache\r\n"
                   "X-Accel-Buffering: no\r\n%s%sConnection: %s\r\n\r\n",
               status, http_status_str((enum http_status)status), content_type,
               extra ? extra : "", c->chunked ? "Transfer-Encoding: chunked\r\n" : "",
               c->keep_alive ? "keep-alive" : "close");
    bool chunked = c->chunked; /* the head itself is never chunk-framed */
    c->chunked = false;
    http_conn_write_body(c, h.data, h.len);
    c->chunked = chunked;
    buf_release(&h);
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
