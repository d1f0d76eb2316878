/* The server proxy for any port of a sandbox: /sandboxes/{id}/proxy/{port}/... (also under /v1)
 * relays HTTP requests and WebSocket upgrades to 127.0.0.1:{port} inside the sandbox, as
 * OpenSandbox's server does. The way in is the backend's endpoint (the local backend's host-side
 * forwarder, backend/local/forward.c); this file speaks HTTP/1.1 to it, one upstream connection
 * per request.
 *
 * The sandbox's reply is hostile input: its head is bounded (size and count), parsed strictly,
 * and only headers that concern the proxied response itself are passed on (none that act on
 * mcpbox's whole origin: cookies, HSTS, Clear-Site-Data, Alt-Svc, ...; osapi_proxy_head.c).
 * The body is re-framed
 * here (never the sandbox's framing) and read no faster than the client takes it. A 101 to a
 * WebSocket upgrade turns both connections into a byte pipe, with the same bounds both ways. */
#define LOG_MODULE "osapi"
#include "osapi/osapi-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "lib/base/buf.h"
#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "server/server.h"

/* Bytes queued towards either side before reading from the other stops. */
#define PROXY_MAX_QUEUED (1u << 20)
#define PROXY_READ_CHUNK (64u * 1024u)

enum proxy_phase {
    PROXY_CONNECTING, /* asking the backend for the way in, then connecting */
    PROXY_HEAD,       /* request sent; reading the response head */
    PROXY_BODY,       /* head answered; streaming the body */
    PROXY_TUNNEL,     /* after a 101: bytes both ways */
    PROXY_DONE,
};

struct proxy {
    struct osapi_req *req; /* NULL once the exchange with the client is over */
    enum proxy_phase phase;
    long port;
    char sandbox_id[128];
    bool websocket;     /* the client asked for a WebSocket upgrade */
    bool head_only;     /* HEAD: the answer has no body */
    bool got_bytes;     /* the sandbox sent something */
    bool up_open;       /* up is initialised (closed with uv_close) */
    bool up_reading;    /* uv_read_start is in force */
    bool body_chunked;  /* the request body streams to the sandbox chunk-framed */
    bool client_paused; /* not reading the client while the sandbox lags */
    uv_tcp_t up;
    uv_connect_t connect;
    struct buf request; /* what goes to the sandbox first: head and body */
    size_t up_queued;   /* bytes written to the sandbox and not yet taken */
    http_parser parser;
    struct osapi_head head; /* the sandbox's response head (osapi_proxy_head.c) */
    char rbuf[PROXY_READ_CHUNK];
};

struct up_write {
    uv_write_t w;
    struct proxy *p;
    size_t len;
    char data[];
};

static void proxy_close_up(struct proxy *p);

/* ---- what passes ------------------------------------------------------------------------------ */

/* Request headers not forwarded: hop-by-hop ones (the framing and connection are this proxy's),
 * and the caller's credentials for mcpbox and OpenSandbox (the sandbox must never see them;
 * OpenSandbox's proxy strips Authorization and Cookie too). */
static const char request_drop[] =
    " connection keep-alive proxy-connection proxy-authorization te trailer "
    "transfer-encoding upgrade expect content-length host authorization cookie "
    "open-sandbox-api-key x-execd-access-token x-forwarded-for x-forwarded-host "
    "x-forwarded-proto x-forwarded-prefix forwarded ";

/* Added to every proxied response: a page served from the sandbox runs in an opaque origin, not
 * in mcpbox's (whose APIs would otherwise be same-origin to its scripts). */
#define PROXY_RESPONSE_GUARD                                                                       \
    "Content-Security-Policy: sandbox allow-scripts allow-forms allow-popups "                     \
    "allow-downloads\r\nX-Content-Type-Options: nosniff\r\n"

/* ---- the request to the sandbox ------------------------------------------------------------------ */

static void build_request(struct proxy *p, const char *sandbox_id, const char *rest,
                          const char *query)
{
    const struct http_request *h = osapi_req_http(p->req);
    struct buf *b = &p->request;
    buf_init(b, (size_t)-1);
    buf_printf(b, "%s %s%s%s HTTP/1.1\r\nHost: 127.0.0.1:%ld\r\n", http_method_str(h->method), rest,
               *query ? "?" : "", query, p->port);
    for (size_t i = 0; i < h->nheaders; i++) {
        if (osapi_word_in(h->headers[i].name, request_drop))
            continue;
        buf_printf(b, "%s: %s\r\n", h->headers[i].name, h->headers[i].value);
    }
    const char *host = http_request_header(h, "host", NULL);
    if (host)
        buf_printf(b, "X-Forwarded-Host: %s\r\n", host);
    buf_printf(b, "X-Forwarded-Proto: http\r\nX-Forwarded-Prefix: /sandboxes/%s/proxy/%ld\r\n",
               sandbox_id, p->port);
    if (p->websocket)
        buf_printf(b, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
    else
        buf_printf(b, "Connection: close\r\n");
    if (p->req->body_streaming) {
        /* The body follows as it comes (proxy_body_data), framed as the client framed it. */
        const char *te = http_request_header(h, "transfer-encoding", NULL);
        const char *cl = http_request_header(h, "content-length", NULL);
        p->body_chunked = te != NULL;
        if (p->body_chunked)
            buf_printf(b, "Transfer-Encoding: chunked\r\n\r\n");
        else
            buf_printf(b, "Content-Length: %s\r\n\r\n", cl ? cl : "0");
        return;
    }
    bool has_body = h->body.len > 0 || h->method == HTTP_POST || h->method == HTTP_PUT ||
                    h->method == HTTP_PATCH;
    if (has_body)
        buf_printf(b, "Content-Length: %zu\r\n", h->body.len);
    buf_append(b, "\r\n", 2);
    if (h->body.len)
        buf_append(b, h->body.data, h->body.len);
}

/* A WebSocket handshake: GET with Upgrade: websocket, and no body (one would come before the
 * frames). */
static bool wants_websocket(const struct http_request *h)
{
    const char *upgrade = http_request_header(h, "upgrade", NULL);
    const char *connection = http_request_header(h, "connection", NULL);
    const char *length = http_request_header(h, "content-length", NULL);
    return h->method == HTTP_GET && upgrade && osapi_has_token(upgrade, "websocket") &&
           osapi_has_token(connection, "upgrade") &&
           !http_request_header(h, "transfer-encoding", NULL) &&
           (!length || strcmp(length, "0") == 0);
}

/* ---- ending ------------------------------------------------------------------------------------- */

static void proxy_free(struct proxy *p)
{
    buf_release(&p->request);
    osapi_head_release(&p->head);
    free(p);
}

static void proxy_free_cb(uv_handle_t *h)
{
    proxy_free(h->data);
}

static void proxy_close_up(struct proxy *p)
{
    p->phase = PROXY_DONE;
    if (p->up_open && !uv_is_closing((uv_handle_t *)&p->up))
        uv_close((uv_handle_t *)&p->up, proxy_free_cb);
}

/* The osapi_req's free_state: the exchange is over for the client; the rest goes with it. */
static void proxy_release(void *state)
{
    struct proxy *p = state;
    p->req = NULL;
    if (p->up_open)
        proxy_close_up(p);
    else
        proxy_free(p);
}

/* The client's connection, taken from the request (whose hooks are cleared); NULL if gone. */
static struct http_conn *take_conn(struct proxy *p)
{
    struct osapi_req *req = p->req;
    if (!req)
        return NULL;
    struct http_conn *c = req->conn;
    req->conn = NULL; /* the connection's next request must not see our hooks cleared */
    if (c) {
        http_ext_on_abort(c, NULL, NULL);
        http_ext_on_drain(c, NULL, NULL);
    }
    osapi_req_free(req); /* releases p: closes the upstream side */
    return c;
}

/* A complete body: the response ends, the client's connection goes on. */
static void finish_stream(struct proxy *p)
{
    struct http_conn *c = take_conn(p);
    if (c)
        http_ext_stream_end(c);
}

/* The client's connection ends without a proper end (a cut body, a closed tunnel). */
static void finish_abruptly(struct proxy *p)
{
    struct http_conn *c = take_conn(p);
    if (c)
        http_ext_close(c);
}

/* 502 with what went wrong and what to do; the arguments are always the port and the sandbox's
 * id, then what fmt asks for. */
static void reply_bad_gateway(struct proxy *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void reply_bad_gateway(struct proxy *p, const char *fmt, ...)
{
    struct osapi_req *req = p->req;
    if (!req)
        return;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    osapi_reply_error(req, 502, "BAD_GATEWAY", "%s", msg); /* frees req, releases p */
}

static void client_aborted(struct osapi_req *req)
{
    struct proxy *p = req->state;
    if (p->phase == PROXY_CONNECTING)
        return; /* the backend's or connect's callback sees req->conn gone */
    osapi_req_free(req);
}

/* ---- the response head ---------------------------------------------------------------------------- */

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
    return osapi_head_field(&((struct proxy *)hp->data)->head, at, len);
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
    return osapi_head_value(&((struct proxy *)hp->data)->head, at, len);
}

static void on_client_data(void *arg, const char *data, size_t len);
static void client_drained(void *arg);

/* A 101 to the WebSocket upgrade: the head goes out as is (with the checked headers), then the
 * client's connection becomes a pipe. */
static void start_tunnel(struct proxy *p)
{
    struct http_conn *c = p->req->conn;
    struct buf h;
    buf_init(&h, (size_t)-1);
    buf_printf(&h,
               "HTTP/1.1 101 Switching Protocols\r\nX-Request-ID: %s\r\n%s"
               "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
               p->req->request_id, buf_cstr(&p->head.lines));
    p->phase = PROXY_TUNNEL;
    http_ext_raw_write(c, h.data, h.len);
    buf_release(&h);
    if (p->req && p->req->conn)
        http_ext_tunnel(c, on_client_data, p);
}

static void reply_refused(struct proxy *p)
{
    p->phase = PROXY_DONE;
    reply_bad_gateway(p,
                      "the service on port %ld in sandbox %s sent a response the proxy "
                      "refuses: %s; fix the service, or reach it through the forwarded "
                      "address of GET /v1/sandboxes/{id}/endpoints/{port}",
                      p->port, p->sandbox_id, p->head.bad);
}

/* The head is complete: answer the client with it (or 502), or skip an interim 1xx. Returns
 * what http_parser expects: 0, 1 (no body follows), or -1 (stop). */
static int on_headers_complete(http_parser *hp)
{
    struct proxy *p = hp->data;
    unsigned status = hp->status_code;
    if (osapi_head_end(&p->head) == 0 && status == 101 &&
        (!p->websocket || !p->head.upgrade_websocket || !hp->upgrade))
        snprintf(p->head.bad, sizeof(p->head.bad),
                 "it answered 101 Switching Protocols to something other than a WebSocket "
                 "upgrade");
    if (p->head.bad[0]) {
        reply_refused(p);
        return -1;
    }
    if (status < 200 && status != 101) {
        osapi_head_reset(&p->head); /* 100 Continue, 103 Early Hints: the final one follows */
        return 0;
    }
    if (!p->req || !p->req->conn) {
        p->phase = PROXY_DONE;
        return -1;
    }
    if (status == 101) {
        start_tunnel(p);
        return 0; /* http_parser stops here: the rest is the other protocol */
    }
    buf_printf(&p->head.lines, "X-Request-ID: %s\r\n" PROXY_RESPONSE_GUARD, p->req->request_id);
    /* A declared length is kept (http_parser holds the body to exactly it), else chunked. */
    bool sized = (hp->flags & F_CONTENTLENGTH) && !(hp->flags & F_CHUNKED);
    if (p->head_only || status == 204 || status == 304) {
        /* No body follows; HEAD and 304 tell the length the body would have. */
        bool tell = sized && status != 204;
        http_ext_stream_start_head(p->req->conn, (int)status, buf_cstr(&p->head.lines),
                                   tell ? (long long)hp->content_length : 0);
        p->phase = PROXY_DONE;
        finish_stream(p);
        return 1;
    }
    p->phase = PROXY_BODY;
    http_ext_stream_start_head(p->req->conn, (int)status, buf_cstr(&p->head.lines),
                               sized ? (long long)hp->content_length : -1);
    return 0;
}

/* ---- the body and the tunnel: flow both ways, bounded ------------------------------------------- */

static void up_read_pause(struct proxy *p, bool pause);

static void client_drained(void *arg)
{
    struct proxy *p = arg;
    if (p->req && p->req->conn)
        http_ext_on_drain(p->req->conn, NULL, NULL);
    up_read_pause(p, false);
}

/* After a write to the client: stop reading the sandbox while the client lags. */
static void client_backpressure(struct proxy *p)
{
    if (!p->req || !p->req->conn)
        return;
    if (http_ext_queued(p->req->conn) > PROXY_MAX_QUEUED) {
        up_read_pause(p, true);
        http_ext_on_drain(p->req->conn, client_drained, p);
    }
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
    struct proxy *p = hp->data;
    if (p->phase != PROXY_BODY || !p->req || !p->req->conn)
        return -1;
    http_ext_stream_write(p->req->conn, at, len);
    client_backpressure(p);
    return 0;
}

static int on_message_complete(http_parser *hp)
{
    struct proxy *p = hp->data;
    if (p->phase == PROXY_BODY) {
        p->phase = PROXY_DONE;
        finish_stream(p);
        return -1; /* anything after the response is not ours to read */
    }
    return 0;
}

static void client_read_pause(struct proxy *p, bool pause);

static void on_up_write(uv_write_t *w, int status)
{
    struct up_write *uw = container_of(w, struct up_write, w);
    struct proxy *p = uw->p;
    p->up_queued -= uw->len;
    free(uw);
    if (status < 0 || p->phase == PROXY_DONE)
        return; /* a failed write: the read side sees the connection end */
    if (p->up_queued <= PROXY_MAX_QUEUED / 2)
        client_read_pause(p, false);
}

/* Stops (true) or restarts reading the client, whose bytes go to the sandbox. */
static void client_read_pause(struct proxy *p, bool pause)
{
    if (pause == p->client_paused || !p->req || !p->req->conn)
        return;
    p->client_paused = pause;
    http_ext_read_pause(p->req->conn, pause);
}

/* prefix + data + suffix to the sandbox as one write. */
static void up_write3(struct proxy *p, const char *prefix, const char *data, size_t len,
                      const char *suffix)
{
    size_t plen = strlen(prefix), slen = strlen(suffix);
    struct up_write *uw = xmalloc(sizeof(*uw) + plen + len + slen);
    uw->p = p;
    uw->len = plen + len + slen;
    memcpy(uw->data, prefix, plen);
    memcpy(uw->data + plen, data, len);
    memcpy(uw->data + plen + len, suffix, slen);
    uv_buf_t b = uv_buf_init(uw->data, (unsigned)uw->len);
    p->up_queued += uw->len;
    if (uv_write(&uw->w, (uv_stream_t *)&p->up, &b, 1, on_up_write) < 0) {
        p->up_queued -= uw->len;
        free(uw);
        finish_abruptly(p);
    }
}

static void up_write(struct proxy *p, const char *data, size_t len)
{
    struct up_write *uw = xmalloc(sizeof(*uw) + len);
    uw->p = p;
    uw->len = len;
    memcpy(uw->data, data, len);
    uv_buf_t b = uv_buf_init(uw->data, (unsigned)len);
    p->up_queued += len;
    if (uv_write(&uw->w, (uv_stream_t *)&p->up, &b, 1, on_up_write) < 0) {
        p->up_queued -= len;
        free(uw);
        finish_abruptly(p);
    }
}

/* Bytes from the tunnelled client to the sandbox; reading stops while the sandbox lags. */
static void on_client_data(void *arg, const char *data, size_t len)
{
    struct proxy *p = arg;
    if (p->phase != PROXY_TUNNEL)
        return;
    up_write(p, data, len);
    if (p->up_queued > PROXY_MAX_QUEUED)
        client_read_pause(p, true);
}

/* A piece of a streamed request body: kept with the request head until the sandbox's side is
 * connected, then written as it comes; the client is not read while either backs up. */
static void proxy_body_data(void *arg, const char *data, size_t len)
{
    struct proxy *p = arg;
    if (p->phase == PROXY_DONE || !p->req || len == 0)
        return;
    char prefix[24] = "";
    if (p->body_chunked)
        snprintf(prefix, sizeof(prefix), "%zx\r\n", len);
    const char *suffix = p->body_chunked ? "\r\n" : "";
    if (p->phase == PROXY_CONNECTING) {
        buf_append_str(&p->request, prefix);
        buf_append(&p->request, data, len);
        buf_append_str(&p->request, suffix);
        if (p->request.len > PROXY_MAX_QUEUED)
            client_read_pause(p, true);
        return;
    }
    up_write3(p, prefix, data, len, suffix);
    if (p->up_queued > PROXY_MAX_QUEUED)
        client_read_pause(p, true);
}

static void proxy_body_end(void *arg)
{
    struct proxy *p = arg;
    if (p->phase == PROXY_DONE || !p->req || !p->body_chunked)
        return;
    if (p->phase == PROXY_CONNECTING)
        buf_append_str(&p->request, "0\r\n\r\n");
    else
        up_write3(p, "", "0\r\n\r\n", 5, "");
}

/* ---- reading the sandbox's side ---------------------------------------------------------------- */

static const http_parser_settings parser_settings = {
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void up_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)suggested;
    struct proxy *p = h->data;
    *b = uv_buf_init(p->rbuf, sizeof(p->rbuf));
}

/* The sandbox closed its side (or failed) while the client waits. */
static void up_ended(struct proxy *p, ssize_t why)
{
    switch (p->phase) {
    case PROXY_HEAD:
        if (!p->got_bytes) {
            reply_bad_gateway(p,
                              "nothing answered on port %ld in sandbox %s: no server "
                              "listens there, or it closed the connection without a reply. "
                              "Start the service inside the sandbox listening on "
                              "127.0.0.1 or 0.0.0.0 at that port, then retry",
                              p->port, p->sandbox_id);
            break;
        }
        http_parser_execute(&p->parser, &parser_settings, NULL, 0);
        if (p->phase == PROXY_HEAD)
            reply_bad_gateway(p,
                              "the service on port %ld in sandbox %s closed the connection "
                              "before its response head was complete; check its logs",
                              p->port, p->sandbox_id);
        break;
    case PROXY_BODY:
        if (why == UV_EOF)
            http_parser_execute(&p->parser, &parser_settings, NULL, 0); /* read-to-close bodies */
        if (p->phase == PROXY_BODY) {
            log_debug("port %ld: the response was cut short", p->port);
            finish_abruptly(p); /* the client must not take a cut body for a whole one */
        }
        break;
    case PROXY_TUNNEL:
        finish_abruptly(p);
        break;
    default:
        break;
    }
    if (p->req) /* nothing above answered: the client must not wait for a closed side */
        finish_abruptly(p);
}

static void on_up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct proxy *p = s->data;
    if (nread == 0 || p->phase == PROXY_DONE)
        return;
    if (nread < 0) {
        up_ended(p, nread);
        return;
    }
    p->got_bytes = true;
    if (p->phase == PROXY_TUNNEL) {
        if (p->req && p->req->conn) {
            http_ext_raw_write(p->req->conn, b->base, (size_t)nread);
            client_backpressure(p);
        }
        return;
    }
    size_t used = http_parser_execute(&p->parser, &parser_settings, b->base, (size_t)nread);
    if (p->phase == PROXY_TUNNEL) { /* the bytes after the 101 are the other protocol's */
        if (used < (size_t)nread && p->req && p->req->conn) {
            http_ext_raw_write(p->req->conn, b->base + used, (size_t)nread - used);
            client_backpressure(p);
        }
        return;
    }
    if (p->phase == PROXY_DONE || used == (size_t)nread)
        return;
    enum http_errno e = HTTP_PARSER_ERRNO(&p->parser);
    if (p->phase == PROXY_HEAD && p->head.bad[0]) {
        reply_refused(p); /* a limit of the head, found before its end */
    } else if (p->phase == PROXY_HEAD) {
        reply_bad_gateway(p,
                          "the service on port %ld in sandbox %s sent a response that is not "
                          "HTTP/1.x (%s); the proxy relays HTTP and WebSocket only",
                          p->port, p->sandbox_id, http_errno_description(e));
    } else {
        log_debug("port %ld: malformed response body: %s", p->port, http_errno_description(e));
        finish_abruptly(p);
    }
}

static void up_read_pause(struct proxy *p, bool pause)
{
    if (!p->up_open || uv_is_closing((uv_handle_t *)&p->up) || pause != p->up_reading)
        return;
    p->up_reading = !pause;
    if (pause)
        uv_read_stop((uv_stream_t *)&p->up);
    else if (uv_read_start((uv_stream_t *)&p->up, up_alloc, on_up_read) < 0)
        finish_abruptly(p);
}

/* ---- getting there --------------------------------------------------------------------------------- */

static void on_connected(uv_connect_t *cr, int status)
{
    struct proxy *p = cr->data;
    if (p->phase == PROXY_DONE)
        return;
    if (!p->req->conn) {
        osapi_req_free(p->req);
        return;
    }
    if (status < 0) {
        reply_bad_gateway(p,
                          "cannot reach port %ld of sandbox %s: %s; get_sandbox or GET "
                          "/v1/sandboxes/{id} tells whether it is still running",
                          p->port, p->sandbox_id, uv_strerror(status));
        return;
    }
    p->phase = PROXY_HEAD;
    http_parser_init(&p->parser, HTTP_RESPONSE);
    p->parser.data = p;
    up_write(p, p->request.data, p->request.len);
    up_read_pause(p, false);
}

static void on_endpoint(void *arg, json_t *result, const struct mcp_error *err)
{
    struct proxy *p = arg;
    struct osapi_req *req = p->req;
    if (err) {
        osapi_reply_mcp_error(req, err);
        return;
    }
    if (!req->conn) {
        osapi_req_free(req);
        return;
    }
    json_int_t host_port = json_integer_value(json_object_get(result, "host_port"));
    const char *reachable = json_string_value(json_object_get(result, "reachable_from"));
    if (host_port < 1 || host_port > 65535 || !reachable || strcmp(reachable, "host") != 0) {
        osapi_reply_error(req, 500, "RUNTIME_ERROR",
                          "the backend of sandbox %s gives no address on this host for port %ld; "
                          "GET /v1/sandboxes/{id}/endpoints/%ld gives the address it has",
                          p->sandbox_id, p->port, p->port);
        return;
    }
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", (int)host_port, &sa);
    uv_tcp_init(server_loop(req->api->srv), &p->up);
    p->up.data = p;
    p->up_open = true;
    p->connect.data = p;
    int rc = uv_tcp_connect(&p->connect, &p->up, (const struct sockaddr *)&sa, on_connected);
    if (rc < 0)
        reply_bad_gateway(p, "cannot reach port %ld of sandbox %s: %s", p->port, p->sandbox_id,
                          uv_strerror(rc));
}

void osapi_proxy(struct osapi_req *req, const char *sandbox_id, long port, const char *rest)
{
    if (port < 1 || port > 65535) {
        osapi_reply_error(req, 400, "INVALID_REQUEST_BODY",
                          "port must be 1..65535 (got %ld) in /sandboxes/{id}/proxy/{port}", port);
        return;
    }
    if (osapi_bind(req, sandbox_id, true, NULL) < 0)
        return;
    struct proxy *p = xcalloc(1, sizeof(*p));
    p->req = req;
    p->port = port;
    snprintf(p->sandbox_id, sizeof(p->sandbox_id), "%s", req->sandbox_id);
    p->phase = PROXY_CONNECTING;
    p->websocket = wants_websocket(osapi_req_http(req));
    p->head_only = osapi_req_http(req)->method == HTTP_HEAD;
    osapi_head_init(&p->head);
    build_request(p, req->sandbox_id, rest, osapi_req_query(req));
    req->state = p;
    req->free_state = proxy_release;
    req->on_abort = client_aborted;
    if (req->body_streaming)
        http_ext_body_stream(req->conn, proxy_body_data, proxy_body_end, p);
    struct mcp_error err;
    if (req->be->ops->endpoint(req->be, req->sandbox_id, (int)port, on_endpoint, p, &err) < 0)
        osapi_reply_mcp_error(req, &err);
}
