/* One TCP connection of the HTTP listener: reading and parsing requests, writing responses and
 * SSE streams, keep-alive, timeouts and the bounds on what a slow or hostile peer can make us
 * hold (input while a response is in progress, queued output). */
#define LOG_MODULE "http"
#include "server/http/http_conn.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/base/cleanup.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"
#include "server/http/sse.h"

/* Bytes read from the socket at a time. */
#define HTTP_READ_CHUNK (64u * 1024u)
/* Pipelined requests answered in one resume before the other connections get the loop. */
#define HTTP_PIPELINE_BATCH 16
/* Output held back while a resume runs (one writev for all its replies); a larger write first
 * sends what is held and then goes out by itself. */
#define HTTP_CORK_MAX_BYTES (64u * 1024u)

struct conn_full {
    struct http_conn c;
    uv_shutdown_t shutdown_req;
    enum http_reader_state timed_state; /* reader state the current deadline belongs to */
    bool in_resume;    /* http_conn_resume is running for this connection */
    bool resume_again; /* an exchange ended inside it and more input is buffered */
    bool corked;       /* writes go to `cork` until the resume ends */
    struct buf cork;
    struct buf head; /* response heads are built here (kept: no allocation per reply) */
    max_align_t frontend[]; /* http_frontend.conn_size bytes: c.frontend */
};

struct write_req {
    uv_write_t req;
    struct http_conn *c;
    size_t len;
    char data[];
};

static struct conn_full *full_of(struct http_conn *c)
{
    return container_of(c, struct conn_full, c);
}

static void conn_end_backlog(struct http_conn *c);
static void conn_feed_body(struct http_conn *c);

static void on_write(uv_write_t *req, int status)
{
    struct write_req *w = container_of(req, struct write_req, req);
    struct http_conn *c = w->c;
    c->queued -= w->len;
    c->last_write_ms = now_mono_ms();
    free(w);
    if (status < 0 && !c->closing)
        http_conn_close(c);
    else if (c->output_backlog && !c->closing && c->queued <= HTTP_MAX_QUEUED_OUTPUT / 2)
        conn_end_backlog(c);
    else if (c->queued == 0 && c->ext_drain && !c->closing)
        c->ext_drain(c->ext_drain_arg);
}

/* Queues prefix+data+suffix as one write (any may be empty). */
/* Writes what the kernel takes at once (nothing is queued: uv_try_write refuses then), so the
 * common reply costs one writev and no request. A completed uv_write costs an epoll_ctl on the
 * next loop turn (libuv re-arms the watcher when it drops POLLOUT), a syscall per reply.
 * Returns how many bytes went out, or -1 after closing the connection on an error. */
static ssize_t conn_try_write(struct http_conn *c, const char *prefix, size_t plen,
                              const char *data, size_t len, const char *suffix, size_t slen)
{
    if (c->queued > 0)
        return 0;
    uv_buf_t b[3];
    unsigned n = 0;
    if (plen)
        b[n++] = uv_buf_init((char *)prefix, (unsigned)plen);
    if (len)
        b[n++] = uv_buf_init((char *)data, (unsigned)len);
    if (slen)
        b[n++] = uv_buf_init((char *)suffix, (unsigned)slen);
    int rc = n ? uv_try_write((uv_stream_t *)&c->tcp, b, n) : 0;
    if (rc == UV_EAGAIN || rc == UV_ENOSYS)
        return 0;
    if (rc < 0) {
        http_conn_close(c);
        return -1;
    }
    c->last_write_ms = now_mono_ms();
    return rc;
}

/* Copies what is left of prefix + data + suffix after the first `skip` bytes into dst. */
static void copy_rest(char *dst, size_t skip, const char *prefix, size_t plen, const char *data,
                      size_t len, const char *suffix, size_t slen)
{
    const char *part[3] = {prefix, data, suffix};
    size_t part_len[3] = {plen, len, slen};
    for (int i = 0; i < 3; i++) {
        size_t from = skip < part_len[i] ? skip : part_len[i];
        skip -= from;
        if (part_len[i] > from)
            memcpy(dst, part[i] + from, part_len[i] - from);
        dst += part_len[i] - from;
    }
}

static void conn_write3(struct http_conn *c, const char *prefix, const char *data, size_t len,
                        const char *suffix);

/* Sends what a resume held back (see HTTP_CORK_MAX_BYTES). */
static void conn_uncork(struct http_conn *c)
{
    struct conn_full *f = full_of(c);
    bool corked = f->corked;
    size_t n = f->cork.len;
    if (n == 0)
        return;
    f->cork.len = 0; /* taken (a failed write closes the connection, which uncorks again) */
    f->corked = false;
    conn_write3(c, "", f->cork.data, n, "");
    f->corked = corked;
}

/* Holds prefix+data+suffix back while corked; false if it must be written now. */
static bool conn_hold(struct http_conn *c, const char *prefix, size_t plen, const char *data,
                      size_t len, const char *suffix, size_t slen)
{
    struct conn_full *f = full_of(c);
    /* Nothing else buffered to answer in this resume: no reason to hold this back. */
    if (!f->corked || (f->cork.len == 0 && c->input.len == 0))
        return false;
    if (f->cork.len + plen + len + slen > HTTP_CORK_MAX_BYTES) {
        conn_uncork(c); /* keep the order: what is held goes first */
        return false;
    }
    buf_append(&f->cork, prefix, plen);
    buf_append(&f->cork, data, len);
    buf_append(&f->cork, suffix, slen);
    return true;
}

static void conn_write3(struct http_conn *c, const char *prefix, const char *data, size_t len,
                        const char *suffix)
{
    if (c->closing)
        return;
    size_t plen = strlen(prefix), slen = strlen(suffix);
    if (conn_hold(c, prefix, plen, data, len, suffix, slen))
        return;
    ssize_t sent = conn_try_write(c, prefix, plen, data, len, suffix, slen);
    if (sent < 0 || (size_t)sent == plen + len + slen)
        return;
    size_t total = plen + len + slen - (size_t)sent;
    struct write_req *w = xmalloc(sizeof(*w) + total);
    copy_rest(w->data, (size_t)sent, prefix, plen, data, len, suffix, slen);
    w->c = c;
    w->len = total;
    if (c->queued == 0)
        c->last_write_ms = now_mono_ms();
    c->queued += total;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)total);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) {
        c->queued -= total;
        free(w);
        http_conn_close(c);
    }
}

/* A piece of a response body: chunk-framed when the response is chunked. */
void http_conn_write_body(struct http_conn *c, const char *data, size_t len)
{
    if (!c->chunked) {
        conn_write3(c, "", data, len, "");
        return;
    }
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "%zx\r\n", len);
    conn_write3(c, prefix, data, len, "\r\n");
}

static void on_close(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    struct http_server *hs = c->hs;
    if (c->prev)
        c->prev->next = c->next;
    else if (hs->conns == c)
        hs->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    hs->nconns--;
    if (hs->nconns == 0) { /* an idle server holds no read buffer */
        free(hs->read_buf);
        hs->read_buf = NULL;
    }
    http_reader_release(&c->reader);
    buf_release(&c->input);
    buf_release(&full_of(c)->cork);
    buf_release(&full_of(c)->head);
    free(full_of(c));
    if (hs->stopping && hs->nconns == 0 && hs->open_handles == 0)
        free(hs);
}

/* reset: send RST, discarding what the kernel still holds for a peer that does not read. */
static void conn_close(struct http_conn *c, bool reset)
{
    if (c->closing)
        return;
    if (reset)
        buf_reset(&full_of(c)->cork);
    else
        conn_uncork(c); /* replies already made go out before the close, as unheld ones did */
    if (c->closing)
        return; /* that write failed and closed the connection */
    c->ext_drain = NULL;
    c->ext_data = NULL;
    c->body_streaming = false;
    c->reader.body_sink = NULL;
    c->ext_body_end = NULL;
    if (c->ext_abort) {
        void (*abort_fn)(void *) = c->ext_abort;
        c->ext_abort = NULL;
        abort_fn(c->ext_arg);
    }
    /* reset comes from http_conn_abort; any other close is no cancellation: the front-end only
     * drops the exchange's output */
    if (c->hs->fe.exchange_end)
        c->hs->fe.exchange_end(c->hs->fe.arg, c, reset);
    c->mode = EX_NONE;
    c->closing = true;
    if (!reset || uv_tcp_close_reset(&c->tcp, on_close) < 0)
        uv_close((uv_handle_t *)&c->tcp, on_close);
}

void http_conn_close(struct http_conn *c)
{
    conn_close(c, false);
}

static void conn_start_reading(struct http_conn *c);

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct http_conn *c = req->data;
    if (status < 0)
        http_conn_close(c);
}

/* Ends the connection after what is queued: shut the write side, then discard input for a
 * while so that the peer reads our reply rather than a reset. */
static void conn_end(struct http_conn *c)
{
    if (c->closing || c->phase == CONN_DRAINING)
        return;
    conn_uncork(c); /* the shutdown must follow every reply */
    if (c->closing)
        return;
    c->phase = CONN_DRAINING;
    c->deadline = now_mono_ms() + HTTP_LINGER_MS;
    buf_reset(&c->input);
    full_of(c)->shutdown_req.data = c;
    if (uv_shutdown(&full_of(c)->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        http_conn_close(c);
        return;
    }
    if (c->read_stopped) {
        c->read_stopped = false;
        conn_start_reading(c);
    }
}

/* One buffer for all connections: libuv calls on_read right after on_alloc, and on_read copies
 * the bytes into the connection's input. (A 64 KiB malloc and free per read made glibc
 * consolidate its fast bins every time.) */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct http_server *hs = ((struct http_conn *)h->data)->hs;
    if (!hs->read_buf)
        hs->read_buf = xmalloc(HTTP_READ_CHUNK);
    b->base = hs->read_buf;
    b->len = HTTP_READ_CHUNK;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    struct http_conn *c = st->data;
    if (nread < 0) {
        http_conn_close(c); /* EOF or error: whatever is in progress loses its output */
    } else if (c->phase == CONN_TUNNEL) {
        if (nread > 0 && !c->closing && c->ext_data)
            c->ext_data(c->ext_data_arg, b->base, (size_t)nread);
    } else if (c->body_streaming && nread > 0 && !c->closing) {
        if (buf_append(&c->input, b->base, (size_t)nread) < 0)
            http_conn_close(c);
        else
            conn_feed_body(c);
    } else if (nread > 0 && !c->closing && c->phase != CONN_DRAINING) {
        if (buf_append(&c->input, b->base, (size_t)nread) < 0) {
            http_conn_close(c);
        } else if (c->phase == CONN_READING) {
            http_conn_resume(c);
        } else if (c->input.len > HTTP_MAX_PENDING_INPUT) {
            uv_read_stop(st); /* a response is in progress: let TCP push back */
            c->read_stopped = true;
        }
    }
}

static void conn_start_reading(struct http_conn *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
        http_conn_close(c);
}

void http_conn_read_pause(struct http_conn *c, bool pause)
{
    if (c->closing || pause == c->read_stopped)
        return;
    c->read_stopped = pause;
    if (pause)
        uv_read_stop((uv_stream_t *)&c->tcp);
    else
        conn_start_reading(c);
}

/* A client that pipelines requests without reading the replies would make the server queue
 * them without end: past HTTP_MAX_QUEUED_OUTPUT, its requests are neither read nor parsed (TCP
 * pushes back on it) until it has read half of the queue. The write-stall sweep still drops a
 * client that reads nothing at all. */
static bool conn_start_backlog(struct http_conn *c)
{
    if (c->queued <= HTTP_MAX_QUEUED_OUTPUT)
        return false;
    if (!c->read_stopped) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->read_stopped = true;
    }
    c->output_backlog = true;
    c->deadline = 0; /* waiting on the client's reads, not on its next request */
    return true;
}

static void conn_end_backlog(struct http_conn *c)
{
    c->output_backlog = false;
    c->deadline = now_mono_ms() + HTTP_KEEPALIVE_TIMEOUT_MS;
    c->read_stopped = false;
    conn_start_reading(c);
    if (c->input.len > 0)
        http_conn_schedule_resume(c);
}

static void update_deadline(struct http_conn *c)
{
    struct conn_full *f = full_of(c);
    enum http_reader_state st = c->reader.state;
    if (st == f->timed_state)
        return;
    f->timed_state = st;
    if (st == HTTP_READER_HEADERS) {
        c->deadline = now_mono_ms() + HTTP_HEADER_TIMEOUT_MS;
    } else if (st == HTTP_READER_BODY) {
        c->deadline = now_mono_ms() + HTTP_BODY_TIMEOUT_MS;
        /* curl waits a second for this before sending a large body. The headers passed the
         * size checks; admission (Host, token, ...) is decided once the body is in. */
        const char *expect = http_request_header(&c->reader.req, "expect", NULL);
        if (expect && strcasecmp(expect, "100-continue") == 0)
            conn_write3(c, "HTTP/1.1 100 Continue\r\n\r\n", "", 0, "");
    }
}

/* The rest of a streamed request body: what is buffered goes to the reader (and its sink);
 * at its end the extension is told. Not re-entrant (the sink may close c). */
static void conn_feed_body(struct http_conn *c)
{
    while (c->body_streaming && !c->closing && c->input.len > 0 &&
           c->reader.state == HTTP_READER_BODY) {
        size_t n = http_reader_feed(&c->reader, c->input.data, c->input.len);
        if (c->closing)
            return;
        buf_consume(&c->input, n);
        if (n == 0 && c->reader.state == HTTP_READER_BODY)
            break;
    }
    if (!c->body_streaming || c->closing)
        return;
    if (c->reader.state == HTTP_READER_ERROR) {
        http_conn_abort(c, "a malformed streamed request body");
    } else if (c->reader.state == HTTP_READER_DONE) {
        c->body_streaming = false;
        c->reader.body_sink = NULL;
        void (*end_fn)(void *) = c->ext_body_end;
        c->ext_body_end = NULL;
        if (end_fn)
            end_fn(c->reader.body_sink_arg);
    }
}

static void conn_resume_one(struct http_conn *c)
{
    if (c->closing || c->phase != CONN_READING || c->input.len == 0 || c->output_backlog)
        return;
    size_t n = http_reader_feed(&c->reader, c->input.data, c->input.len);
    buf_consume(&c->input, n);
    update_deadline(c);
    if (c->reader.state == HTTP_READER_ERROR) {
        c->phase = CONN_RESPONDING;
        c->keep_alive = false;
        http_conn_fail(c, c->reader.error_status, NULL, "%s", c->reader.error_msg);
    } else if (c->reader.state == HTTP_READER_DONE) {
        c->phase = CONN_RESPONDING;
        c->deadline = 0;
        c->keep_alive = c->reader.req.keep_alive;
        c->chunked = c->reader.req.http_minor >= 1;
        http_route_request(c);
    } else if (c->reader.head_paused) {
        /* The head is in and a body follows: an extension may take it now and stream the
         * body; else the body is read whole, as for every other request. */
        c->keep_alive = http_should_keep_alive(&c->reader.parser) != 0;
        c->chunked = c->reader.req.http_minor >= 1;
        if (http_route_head(c))
            conn_feed_body(c);
        else
            full_of(c)->resume_again = true;
    }
}

/* Parses and routes buffered requests. Pipelined requests answered at once are taken in a row
 * (up to HTTP_PIPELINE_BATCH) and their replies held back and sent with one writev: a loop turn
 * (epoll_wait) and a write per request otherwise. */
void http_conn_resume(struct http_conn *c)
{
    struct conn_full *f = full_of(c);
    if (f->in_resume)
        return;
    f->in_resume = true;
    f->corked = true;
    for (int i = 0; i < HTTP_PIPELINE_BATCH; i++) {
        f->resume_again = false;
        conn_resume_one(c);
        if (!f->resume_again || c->closing)
            break;
    }
    f->in_resume = false;
    f->corked = false;
    conn_uncork(c);
    if (f->resume_again && !c->closing)
        http_conn_schedule_resume(c); /* batch used up: the rest on the next loop turn */
}

static void on_idle(uv_idle_t *idle)
{
    struct http_server *hs = idle->data;
    uv_idle_stop(idle);
    if (hs->fe.idle)
        hs->fe.idle(hs->fe.arg);
    for (struct http_conn *c = hs->conns; c; c = c->next) {
        if (!c->resume_pending)
            continue;
        c->resume_pending = false;
        http_conn_resume(c);
    }
}

void http_schedule_idle(struct http_server *hs)
{
    if (hs->stopping)
        return;
    hs->resume.data = hs;
    uv_idle_start(&hs->resume, on_idle);
}

void http_conn_schedule_resume(struct http_conn *c)
{
    c->resume_pending = true;
    http_schedule_idle(c->hs);
}

void http_conn_abort(struct http_conn *c, const char *why)
{
    if (c->closing)
        return;
    log_warn("dropping a connection: %s (%zu bytes queued)", why, c->queued);
    conn_close(c, true);
}

/* At the connection limit: the oldest connection (the list is newest first) that is waiting
 * for or reading a request, with no exchange in progress. */
static struct http_conn *oldest_without_request(struct http_server *hs,
                                                const struct http_conn *fresh, size_t *live)
{
    struct http_conn *victim = NULL;
    *live = 0;
    for (struct http_conn *c = hs->conns; c; c = c->next) {
        if (c->closing)
            continue;
        (*live)++;
        if (c != fresh && c->phase == CONN_READING && c->mode == EX_NONE)
            victim = c;
    }
    return victim;
}

void http_conn_accept(struct http_server *hs)
{
    struct conn_full *f = xcalloc(1, sizeof(*f) + hs->fe.conn_size);
    struct http_conn *c = &f->c;
    c->hs = hs;
    c->frontend = f->frontend;
    c->tcp.data = c;
    uv_tcp_init(hs->loop, &c->tcp);
    c->next = hs->conns;
    if (hs->conns)
        hs->conns->prev = c;
    hs->conns = c;
    hs->nconns++;
    http_reader_init(&c->reader);
    c->reader.stop_after_head = hs->ext && hs->ext->route_head; /* http_route_head */
    buf_init(&c->input, HTTP_MAX_PENDING_INPUT + HTTP_READ_CHUNK);
    buf_init(&f->cork, HTTP_CORK_MAX_BYTES);
    buf_init(&f->head, HTTP_MAX_HEADER_BYTES);
    if (uv_accept((uv_stream_t *)&hs->listener, (uv_stream_t *)&c->tcp) < 0) {
        http_conn_close(c);
        return;
    }
    size_t live;
    struct http_conn *victim = oldest_without_request(hs, c, &live);
    if (live > HTTP_MAX_CONNECTIONS && victim != NULL && !hs->stopping) {
        log_warn("connection limit (%d) reached; closing the oldest connection that has not "
                 "sent a complete request", HTTP_MAX_CONNECTIONS);
        http_conn_close(victim);
        live--;
    }
    if (live > HTTP_MAX_CONNECTIONS || hs->stopping) {
        log_warn("connection limit (%d) reached; refusing a connection", HTTP_MAX_CONNECTIONS);
        http_conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->phase = CONN_READING;
    c->keep_alive = true;
    f->timed_state = HTTP_READER_IDLE;
    c->deadline = now_mono_ms() + HTTP_HEADER_TIMEOUT_MS; /* a new client must speak promptly */
    conn_start_reading(c);
}

void http_conn_exchange_done(struct http_conn *c)
{
    c->ext_abort = NULL;
    c->ext_drain = NULL;
    if (c->body_streaming) { /* answered before the body's end: the rest cannot be skipped */
        c->body_streaming = false;
        c->reader.body_sink = NULL;
        c->ext_body_end = NULL;
        c->keep_alive = false;
    }
    if (c->hs->fe.exchange_end)
        c->hs->fe.exchange_end(c->hs->fe.arg, c, false);
    c->mode = EX_NONE;
    if (c->closing || c->phase == CONN_DRAINING)
        return;
    if (!c->keep_alive) {
        conn_end(c);
        return;
    }
    http_reader_next(&c->reader);
    full_of(c)->timed_state = HTTP_READER_IDLE;
    c->phase = CONN_READING;
    c->deadline = now_mono_ms() + HTTP_KEEPALIVE_TIMEOUT_MS;
    if (conn_start_backlog(c))
        return; /* on_write goes on once the client has read half of it */
    if (c->read_stopped) {
        c->read_stopped = false;
        conn_start_reading(c);
    }
    if (c->input.len > 0 && full_of(c)->in_resume)
        full_of(c)->resume_again = true; /* http_conn_resume takes it in its loop */
    else if (c->input.len > 0)
        http_conn_schedule_resume(c);
}

/* Decimal digits by hand: every response's head is built here, and printf is most of its cost. */
static void append_uint(struct buf *h, unsigned long long v)
{
    char digits[24];
    size_t i = sizeof(digits);
    do {
        digits[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    buf_append(h, digits + i, sizeof(digits) - i);
}

static void append_head(struct buf *h, struct http_conn *c, int status, const char *extra)
{
    buf_append_str(h, "HTTP/1.1 ");
    append_uint(h, (unsigned)status);
    buf_append_str(h, " ");
    buf_append_str(h, http_status_str((enum http_status)status));
    buf_append_str(h, "\r\n");
    if (c->hs->fe.head)
        c->hs->fe.head(c->hs->fe.arg, c, h);
    if (extra)
        buf_append_str(h, extra);
}

void http_conn_respond(struct http_conn *c, int status, const char *content_type,
                       const char *extra, const char *body, size_t len)
{
    struct buf *h = &full_of(c)->head;
    buf_reset(h);
    if (c->body_streaming)
        c->keep_alive = false; /* the rest of the body is not read: the connection ends */
    append_head(h, c, status, extra);
    if (content_type) {
        buf_append_str(h, "Content-Type: ");
        buf_append_str(h, content_type);
        buf_append_str(h, "\r\n");
    }
    buf_append_str(h, "Content-Length: ");
    append_uint(h, len);
    buf_append_str(h, c->keep_alive ? "\r\nConnection: keep-alive\r\n\r\n"
                                    : "\r\nConnection: close\r\n\r\n");
    conn_write3(c, buf_cstr(h), body, len, ""); /* copies whatever it cannot send now */
    http_conn_exchange_done(c);
}

void http_printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = '?';
}

void http_conn_fail(struct http_conn *c, int status, const char *extra, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    http_printable(msg);
    if (c->hs->fe.error) {
        c->hs->fe.error(c->hs->fe.arg, c, status, extra, msg);
        return;
    }
    log_debug("HTTP %d: %s", status, msg);
    http_conn_respond(c, status, "text/plain; charset=utf-8", extra, msg, strlen(msg));
}

void http_conn_sse_start(struct http_conn *c, bool prime)
{
    struct buf h;
    buf_init(&h, HTTP_MAX_HEADER_BYTES);
    if (!c->chunked)
        c->keep_alive = false; /* HTTP/1.0: the stream ends when the connection does */
    append_head(&h, c, 200, NULL);
    buf_printf(&h, "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                   "X-Accel-Buffering: no\r\n%sConnection: %s\r\n\r\n",
               c->chunked ? "Transfer-Encoding: chunked\r\n" : "",
               c->keep_alive ? "keep-alive" : "close");
    conn_write3(c, buf_cstr(&h), "", 0, "");
    buf_release(&h);
    c->event_ids = true;
    c->stream_no = c->hs->fe.stream_start ? c->hs->fe.stream_start(c->hs->fe.arg, c, &c->event_ids)
                                          : 0;
    c->event_seq = 0;
    c->next_ping = now_mono_ms() + HTTP_SSE_PING_MS;
    if (prime) {
        char id[32];
        struct buf ev;
        snprintf(id, sizeof(id), "%u-%u", c->stream_no, ++c->event_seq);
        buf_init(&ev, 256);
        sse_priming(&ev, id, SSE_RETRY_MS);
        http_conn_write_body(c, ev.data, ev.len);
        buf_release(&ev);
    }
}

void http_conn_sse_message(struct http_conn *c, const char *json, size_t len)
{
    if (c->closing)
        return;
    if (c->queued > 0 && c->queued + len > HTTP_MAX_QUEUED_OUTPUT) {
        http_conn_abort(c, "the client is not reading its event stream");
        return;
    }
    char id[32];
    struct buf ev;
    snprintf(id, sizeof(id), "%u-%u", c->stream_no, ++c->event_seq);
    buf_init(&ev, (size_t)-1);
    sse_event(&ev, "message", c->event_ids ? id : NULL, json, len);
    http_conn_write_body(c, ev.data, ev.len);
    buf_release(&ev);
}

void http_conn_sse_comment(struct http_conn *c, const char *text)
{
    struct buf ev;
    buf_init(&ev, 256);
    if (sse_comment(&ev, text) == 0)
        http_conn_write_body(c, ev.data, ev.len);
    buf_release(&ev);
}

void http_conn_sse_end(struct http_conn *c)
{
    if (c->chunked)
        conn_write3(c, "0\r\n\r\n", "", 0, "");
    http_conn_exchange_done(c);
}

void http_conn_sweep(struct http_conn *c, uint64_t now)
{
    if (c->closing)
        return;
    if (c->queued > 0 && now > c->last_write_ms && now - c->last_write_ms > HTTP_WRITE_STALL_MS) {
        http_conn_abort(c, "the client stopped reading");
        return;
    }
    if ((c->mode == EX_SSE || c->mode == EX_GET) && now >= c->next_ping) {
        c->next_ping = now + HTTP_SSE_PING_MS;
        http_conn_sse_comment(c, "keep-alive");
    }
    if (c->deadline == 0 || now < c->deadline)
        return;
    c->deadline = 0;
    if (c->phase == CONN_DRAINING || c->reader.state == HTTP_READER_IDLE) {
        http_conn_close(c); /* linger over, or an idle keep-alive connection */
    } else if (c->phase == CONN_READING) {
        c->phase = CONN_RESPONDING;
        c->keep_alive = false;
        http_conn_fail(c, 408, NULL, "Request Timeout: the request was not received in time");
    }
}
