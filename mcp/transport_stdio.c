/* stdio transport (see transport_stdio.h). */
#define LOG_MODULE "stdio"
#include "mcp/transport_stdio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "lib/base/buf.h"
#include "lib/base/cleanup.h"
#include "lib/base/json_out.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"
#include "mcp/jsonrpc.h"
#include "mcp/limits.h"
#include "mcp/server.h"
#include "mcp/session-internal.h"
#include "mcp/session.h"

#define STDIO_READ_CHUNK (64 * 1024)
#define STDIO_DRAIN_POLL_MS 5
/* After a message bigger than this, the line buffer is freed rather than kept for reuse. */
#define STDIO_LINE_KEEP_BYTES (1024 * 1024)

struct stdio_transport {
    struct mcp_server *srv;
    struct session *session; /* NULL once closed */
    uv_loop_t *loop;
    int in_fd, out_fd;

    /* Input: a stream (pipe, socket, tty), or a regular file read with uv_fs_read. */
    union {
        uv_pipe_t pipe;
        uv_tty_t tty;
    } in_h;
    uv_stream_t *in;
    uv_fs_t fs_req;
    char *file_buf;
    bool reading;
    bool fs_pending; /* a uv_fs_read is in flight: t must outlive it */

    /* Output: a stream, or NULL for a regular file written with blocking write(). */
    union {
        uv_pipe_t pipe;
        uv_tty_t tty;
    } out_h;
    uv_stream_t *out;
    size_t queued; /* bytes handed to uv_write not yet written */
    bool out_failed;

    struct buf line;  /* the message being assembled */
    bool discarding;  /* skipping the rest of an over-long line */
    bool eof;
    bool stopping;
    uv_timer_t drain;
    uint64_t drain_deadline;
    uv_shutdown_t shutdown_req;
    int open_handles;
};

struct write_req {
    uv_write_t req;
    struct stdio_transport *t;
    char *data; /* owned */
    size_t len;
};

static void stdio_stop(void *arg);
static void maybe_resume_reading(struct stdio_transport *t);

/* ---- output ------------------------------------------------------------------------------- */

static void on_drain_tick(uv_timer_t *timer);

/* stdout is gone: stop on the next loop turn, not here. We may be inside a handler's
 * tool_call_progress(), and stopping cancels (and may free) that very call. */
static void output_failed(struct stdio_transport *t, int status)
{
    if (t->out_failed || t->stopping)
        return;
    t->out_failed = true;
    log_warn("stdout closed (%s); shutting down", uv_strerror(status));
    t->drain_deadline = 0;
    uv_timer_start(&t->drain, on_drain_tick, 0, STDIO_DRAIN_POLL_MS);
}

static void on_written(uv_write_t *req, int status)
{
    struct write_req *w = container_of(req, struct write_req, req);
    struct stdio_transport *t = w->t;

    t->queued -= w->len;
    free(w->data);
    free(w);
    if (status < 0 && status != UV_ECANCELED)
        output_failed(t, status);
    else
        maybe_resume_reading(t);
}

static void write_file_blocking(struct stdio_transport *t, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(t->out_fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            output_failed(t, -errno);
            return;
        }
        data += n;
        len -= (size_t)n;
    }
}

/* Writes one message followed by a newline. jansson escapes control characters inside strings,
 * so the compact encoding never contains a raw newline. */
static void write_msg(struct stdio_transport *t, json_t *msg)
{
    if (t->out_failed)
        return;
    size_t len;
    char *data = json_out_dump(msg, &len);
    if (!data) {
        log_error("cannot serialise an outgoing message (invalid UTF-8?)");
        return;
    }
    data = xrealloc(data, len + 2);
    data[len++] = '\n';
    data[len] = '\0';
    if (!t->out) {
        write_file_blocking(t, data, len);
        free(data);
        return;
    }
    struct write_req *w = xcalloc(1, sizeof(*w));
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    w->t = t;
    w->data = data;
    w->len = len;
    t->queued += len;
    int r = uv_write(&w->req, t->out, &b, 1, on_written);
    if (r < 0) {
        t->queued -= len;
        free(data);
        free(w);
        output_failed(t, r);
    }
}

static void session_send(void *arg, json_t *msg, const json_t *related, bool final)
{
    write_msg(arg, msg);
}

static const struct session_transport_ops stdio_ops = {.send = session_send};

/* ---- input framing ------------------------------------------------------------------------- */

static void handle_line(struct stdio_transport *t, const char *data, size_t len)
{
    struct jsonrpc_msg msg;

    while (len > 0 && (data[len - 1] == '\r' || data[len - 1] == ' ' || data[len - 1] == '\t'))
        len--;
    if (len == 0 || !t->session)
        return; /* blank lines between messages are harmless */
    jsonrpc_parse(data, len, &msg);
    session_handle(t->session, &msg);
}

static void line_reset(struct stdio_transport *t)
{
    if (t->line.cap > STDIO_LINE_KEEP_BYTES) {
        buf_release(&t->line);
        buf_init(&t->line, MCP_MAX_MESSAGE_BYTES);
    }
    buf_reset(&t->line);
}

static void reject_oversized(struct stdio_transport *t)
{
    cleanup_free char *msg = xasprintf("Invalid Request: message larger than the limit of %u "
                                       "bytes (MCP_MAX_MESSAGE_BYTES); it was discarded",
                                       MCP_MAX_MESSAGE_BYTES);
    json_auto_t *e = jsonrpc_error(NULL, MCP_ERR_INVALID_REQUEST, msg,
                                   json_pack("{s:I}", "limit", (json_int_t)MCP_MAX_MESSAGE_BYTES));

    log_warn("discarding a message over %u bytes", MCP_MAX_MESSAGE_BYTES);
    write_msg(t, e);
    line_reset(t);
}

/* Consumes a chunk: complete lines are handled, a partial line is kept (up to the limit). */
static void feed(struct stdio_transport *t, const char *data, size_t len)
{
    while (len > 0 && t->session) {
        const char *nl = memchr(data, '\n', len);
        size_t part = nl ? (size_t)(nl - data) : len;
        if (t->discarding) {
            t->discarding = nl == NULL;
        } else if (t->line.len == 0 && nl) {
            handle_line(t, data, part); /* the common case: no copy */
        } else if (buf_append(&t->line, data, part) < 0) {
            reject_oversized(t);
            t->discarding = nl == NULL;
        } else if (nl) {
            handle_line(t, t->line.data, t->line.len);
            line_reset(t);
        }
        if (!nl)
            return;
        data += part + 1;
        len -= part + 1;
    }
}

/* ---- EOF and shutdown ------------------------------------------------------------------------ */

static void maybe_free(struct stdio_transport *t)
{
    if (t->open_handles == 0 && !t->fs_pending) {
        buf_release(&t->line);
        free(t->file_buf);
        free(t);
    }
}

static void on_handle_closed(uv_handle_t *h)
{
    struct stdio_transport *t = h->data;

    t->open_handles--;
    maybe_free(t);
}

static void close_handle(struct stdio_transport *t, uv_handle_t *h)
{
    if (h && !uv_is_closing(h))
        uv_close(h, on_handle_closed);
}

static void on_out_shutdown(uv_shutdown_t *req, int status)
{
    struct stdio_transport *t = req->data;

    close_handle(t, (uv_handle_t *)t->out);
}

static void stdio_stop(void *arg)
{
    struct stdio_transport *t = arg;

    if (t->stopping)
        return;
    t->stopping = true;
    if (t->session) {
        struct session *s = t->session;
        t->session = NULL;
        session_close(s);
    }
    uv_timer_stop(&t->drain);
    close_handle(t, (uv_handle_t *)&t->drain);
    if (t->in)
        close_handle(t, (uv_handle_t *)t->in);
    /* Let queued replies reach stdout before the handle goes. */
    if (t->out && !t->out_failed && uv_shutdown(&t->shutdown_req, t->out, on_out_shutdown) == 0)
        t->shutdown_req.data = t;
    else if (t->out)
        close_handle(t, (uv_handle_t *)t->out);
    server_stop(t->srv);
}

static void on_drain_tick(uv_timer_t *timer)
{
    struct stdio_transport *t = timer->data;

    if (t->session && session_inflight(t->session) > 0 && uv_now(t->loop) < t->drain_deadline)
        return;
    if (t->session && session_inflight(t->session) > 0)
        log_warn("shutting down; cancelling %zu request(s) still running",
                 session_inflight(t->session));
    stdio_stop(t);
}

static void on_eof(struct stdio_transport *t)
{
    t->eof = true;
    if (t->line.len > 0 && !t->discarding)
        log_warn("stdin closed in the middle of a message (%zu bytes); ignoring it", t->line.len);
    line_reset(t);
    log_debug("stdin closed");
    if (t->session)
        session_input_closed(t->session);
    t->drain_deadline = uv_now(t->loop) + MCP_STDIO_DRAIN_TIMEOUT_MS;
    uv_timer_start(&t->drain, on_drain_tick, 0, STDIO_DRAIN_POLL_MS);
}

/* ---- reading --------------------------------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct stdio_transport *t = h->data;

    b->base = t->file_buf;
    b->len = STDIO_READ_CHUNK;
}

static void on_stream_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct stdio_transport *t = s->data;

    if (n > 0) {
        feed(t, b->base, (size_t)n);
        if (t->out && t->queued > MCP_STDIO_MAX_WRITE_QUEUE && t->reading) {
            /* The client is not reading our replies: stop taking requests until it does. */
            uv_read_stop(t->in);
            t->reading = false;
        }
    } else if (n < 0) {
        if (n != UV_EOF)
            log_warn("reading stdin: %s", uv_strerror((int)n));
        uv_read_stop(s);
        t->reading = false;
        on_eof(t);
    }
}

static void maybe_resume_reading(struct stdio_transport *t)
{
    if (!t->reading && !t->eof && !t->stopping && t->in &&
        t->queued <= MCP_STDIO_MAX_WRITE_QUEUE / 2) {
        t->reading = uv_read_start(t->in, on_alloc, on_stream_read) == 0;
    }
}

static void on_file_read(uv_fs_t *req);

static void start_file_read(struct stdio_transport *t)
{
    uv_buf_t b = uv_buf_init(t->file_buf, STDIO_READ_CHUNK);

    if (t->stopping)
        return;
    t->fs_req.data = t;
    t->fs_pending = uv_fs_read(t->loop, &t->fs_req, t->in_fd, &b, 1, -1, on_file_read) == 0;
    if (!t->fs_pending)
        on_eof(t);
}

static void on_file_read(uv_fs_t *req)
{
    struct stdio_transport *t = req->data;
    ssize_t n = req->result;

    uv_fs_req_cleanup(req);
    t->fs_pending = false;
    if (t->stopping) {
        maybe_free(t);
        return;
    }
    if (n <= 0) {
        if (n < 0)
            log_warn("reading stdin: %s", uv_strerror((int)n));
        on_eof(t);
        return;
    }
    feed(t, t->file_buf, (size_t)n);
    start_file_read(t);
}

/* ---- start ----------------------------------------------------------------------------------- */

/* Wraps fd in a pipe or tty handle (*out), or leaves *out NULL for a regular file or a
 * character device such as /dev/null. */
static int open_stream(struct stdio_transport *t, int fd, void *storage, bool readable,
                       uv_stream_t **out, struct mcp_error *err)
{
    uv_handle_type type = uv_guess_handle(fd);
    int r;

    *out = NULL;
    if (type == UV_FILE)
        return 0;
    if (type == UV_TTY) {
        r = uv_tty_init(t->loop, storage, fd, readable);
    } else {
        r = uv_pipe_init(t->loop, storage, 0);
        if (r == 0 && (r = uv_pipe_open(storage, fd)) < 0) {
            ((uv_handle_t *)storage)->data = t;
            t->open_handles++;
            close_handle(t, storage);
        }
    }
    if (r < 0)
        return mcp_error_set(err, MCP_ERR_IO, -r, "cannot use fd %d for stdio: %s", fd,
                             uv_strerror(r));
    ((uv_handle_t *)storage)->data = t;
    t->open_handles++;
    *out = storage;
    return 0;
}

static void owner_for_uid(char *out, size_t size)
{
    snprintf(out, size, "local:uid:%u", (unsigned)getuid());
}

int stdio_transport_start(struct mcp_server *srv, int in_fd, int out_fd, struct mcp_error *err)
{
    struct stdio_transport *t = xcalloc(1, sizeof(*t));
    char owner[64];

    t->srv = srv;
    t->loop = server_loop(srv);
    t->in_fd = in_fd;
    t->out_fd = out_fd;
    t->file_buf = xmalloc(STDIO_READ_CHUNK);
    buf_init(&t->line, MCP_MAX_MESSAGE_BYTES);
    if (open_stream(t, in_fd, &t->in_h, true, &t->in, err) < 0 ||
        open_stream(t, out_fd, &t->out_h, false, &t->out, err) < 0) {
        /* Handles opened so far close asynchronously and free t when done. */
        t->stopping = true;
        if (t->in)
            close_handle(t, (uv_handle_t *)t->in);
        maybe_free(t);
        return -1;
    }
    uv_timer_init(t->loop, &t->drain);
    t->drain.data = t;
    t->open_handles++;
    owner_for_uid(owner, sizeof(owner));
    t->session = session_new(srv, &stdio_ops, t, owner);
    server_on_stop(srv, stdio_stop, t);
    if (t->in) {
        t->reading = uv_read_start(t->in, on_alloc, on_stream_read) == 0;
        if (!t->reading)
            on_eof(t);
    } else {
        start_file_read(t);
    }
    return 0;
}
