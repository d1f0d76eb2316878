/* mcpbox's side of the agent protocol: one unix stream connection per sandbox on the loop
 * (uv_pipe), request ids matched to callbacks, and events routed to watched commands. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/local/agent_frame.h"
#include "backend/local/local_agent.h"
#include "backend/local/proto.h"
#include "lib/base/json_out.h"
#include "lib/base/xalloc.h"

#define CLIENT_KEEP_BUF (1u << 20)

struct pending {
    uint64_t id;
    agent_reply_cb *cb;
    void *arg;
    struct pending *next;
};

struct watch {
    char cmd[32];
    agent_event_cb *cb;
    void *arg;
    struct watch *next;
};

struct agent_conn {
    uv_pipe_t pipe;
    uv_idle_t fail_idle;   /* delivers failures to pending calls outside the caller's stack */
    bool dead, closing;
    uint64_t next_id;
    struct buf rbuf;
    struct pending *pending;
    struct watch *watches;
    int handles_open;
};

struct write_req {
    uv_write_t req;
    char *data;
};

bool agent_conn_alive(const struct agent_conn *c)
{
    return c && !c->dead && !c->closing;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct agent_conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    buf_release(&c->rbuf);
    for (struct watch *w = c->watches, *n; w; w = n)
        n = w->next, free(w);
    free(c);
}

/* Fails every pending call (from the idle callback, never from inside agent_call). */
static void fail_pending(struct agent_conn *c, const char *why)
{
    struct mcp_error err;
    mcp_error_set(&err, MCP_ERR_UNAVAILABLE, 0, "sandbox agent: %s", why);
    while (c->pending) {
        struct pending *p = c->pending;
        c->pending = p->next;
        p->cb(p->arg, NULL, &err);
        free(p);
    }
    /* Watchers hear about the loss through an event with "ev":"lost". */
    json_t *ev = json_pack("{s:s}", "ev", "lost");
    while (c->watches) {
        struct watch *w = c->watches;
        c->watches = w->next;
        w->cb(w->arg, ev);
        free(w);
    }
    json_decref(ev);
}

static void on_fail_idle(uv_idle_t *idle)
{
    struct agent_conn *c = idle->data;
    uv_idle_stop(idle);
    fail_pending(c, c->closing ? "connection closed" : "connection lost (the sandbox stopped?)");
}

static void mark_dead(struct agent_conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    uv_read_stop((uv_stream_t *)&c->pipe);
    uv_idle_start(&c->fail_idle, on_fail_idle);
}

static void dispatch(struct agent_conn *c, json_t *msg)
{
    const char *ev = json_string_value(json_object_get(msg, "ev"));
    if (ev) {
        const char *cmd = json_string_value(json_object_get(msg, "cmd"));
        for (struct watch *w = c->watches; w && cmd; w = w->next)
            if (strcmp(w->cmd, cmd) == 0) {
                w->cb(w->arg, msg); /* may unwatch (and free w): return right after */
                return;
            }
        return;
    }
    uint64_t id = (uint64_t)json_integer_value(json_object_get(msg, "id"));
    for (struct pending **pp = &c->pending; *pp; pp = &(*pp)->next) {
        struct pending *p = *pp;
        if (p->id != id)
            continue;
        *pp = p->next;
        if (json_is_true(json_object_get(msg, "ok"))) {
            p->cb(p->arg, msg, NULL);
        } else {
            struct mcp_error err;
            agent_reply_error(msg, &err);
            p->cb(p->arg, NULL, &err);
        }
        free(p);
        return;
    }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    static char slab[65536]; /* the loop is single-threaded; data is copied out at once */
    (void)h, (void)hint;
    *b = uv_buf_init(slab, sizeof slab);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct agent_conn *c = s->data;
    if (n < 0) {
        mark_dead(c);
        return;
    }
    if (buf_append(&c->rbuf, b->base, (size_t)n) < 0) {
        mark_dead(c);
        return;
    }
    while (!c->dead) {
        json_t *msg;
        enum agent_frame_rc rc = agent_frame_next(&c->rbuf, &msg);
        if (rc == AGENT_FRAME_TOO_BIG) {
            mark_dead(c);
            return;
        }
        if (rc == AGENT_FRAME_NONE)
            break;
        if (rc == AGENT_FRAME_OK)
            dispatch(c, msg); /* may close c: it stays allocated until its handles close */
        json_decref(msg);
    }
    if (c->rbuf.len == 0 && c->rbuf.cap > CLIENT_KEEP_BUF) { /* give big frames' memory back */
        buf_release(&c->rbuf);
        buf_init(&c->rbuf, AGENT_FRAME_MAX + 4 + 65536);
    }
}

struct agent_conn *agent_conn_open(uv_loop_t *loop, const char *sock_path, struct mcp_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        mcp_error_set(err, MCP_ERR_IO, errno, "socket");
        return NULL;
    }
    /* A unix connect to a listening socket completes at once (or fails with EAGAIN when the
     * agent's backlog is full). */
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        mcp_error_set(err, MCP_ERR_UNAVAILABLE, e, "cannot reach the sandbox agent at %s",
                      sock_path);
        return NULL;
    }
    struct agent_conn *c = xcalloc(1, sizeof *c);
    buf_init(&c->rbuf, AGENT_FRAME_MAX + 4 + 65536);
    uv_pipe_init(loop, &c->pipe, 0);
    uv_idle_init(loop, &c->fail_idle);
    c->pipe.data = c->fail_idle.data = c;
    c->handles_open = 2;
    c->next_id = 1;
    if (uv_pipe_open(&c->pipe, fd) < 0) {
        close(fd);
        mark_dead(c);
    } else {
        uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
    }
    return c;
}

void agent_conn_close(struct agent_conn *c)
{
    if (c == NULL || c->closing)
        return;
    c->closing = true;
    c->dead = true;
    fail_pending(c, "connection closed"); /* callers closing a connection expect this now */
    uv_close((uv_handle_t *)&c->pipe, on_handle_closed);
    uv_close((uv_handle_t *)&c->fail_idle, on_handle_closed);
}

static void on_written(uv_write_t *req, int status)
{
    struct write_req *w = (struct write_req *)req;
    if (status < 0 && req->handle->data)
        mark_dead(req->handle->data);
    free(w->data);
    free(w);
}

int agent_call(struct agent_conn *c, json_t *req, agent_reply_cb *cb, void *arg,
               struct mcp_error *err)
{
    if (!agent_conn_alive(c)) {
        json_decref(req);
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0,
                             "the sandbox agent is not reachable (the sandbox may have stopped)");
    }
    uint64_t id = c->next_id++;
    json_object_set_new(req, "v", json_integer(AGENT_PROTO_VERSION));
    json_object_set_new(req, "id", json_integer((json_int_t)id));
    size_t len = 0;
    char *text = json_out_dump(req, &len);
    json_decref(req);
    if (text == NULL)
        return mcp_error_set(err, MCP_ERR_INVALID, 0,
                             "request for the agent is not valid JSON text (invalid UTF-8?)");
    if (len > AGENT_FRAME_MAX) {
        free(text);
        return mcp_error_set(err, MCP_ERR_LIMIT, 0, "request too large for the agent (%zu bytes)",
                             len);
    }
    struct write_req *w = xmalloc(sizeof *w);
    w->data = xmalloc(len + 4);
    w->data[0] = (char)(len >> 24), w->data[1] = (char)(len >> 16);
    w->data[2] = (char)(len >> 8), w->data[3] = (char)len;
    memcpy(w->data + 4, text, len);
    free(text);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)(len + 4));
    int rc = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_written);
    if (rc < 0) {
        free(w->data);
        free(w);
        mark_dead(c);
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, 0, "writing to the sandbox agent: %s",
                             uv_strerror(rc));
    }
    struct pending *p = xcalloc(1, sizeof *p);
    p->id = id, p->cb = cb, p->arg = arg;
    p->next = c->pending;
    c->pending = p;
    return 0;
}

void agent_watch(struct agent_conn *c, const char *cmd_id, agent_event_cb *cb, void *arg)
{
    struct watch *w = xcalloc(1, sizeof *w);
    snprintf(w->cmd, sizeof w->cmd, "%s", cmd_id);
    w->cb = cb, w->arg = arg;
    w->next = c->watches;
    c->watches = w;
}

void agent_unwatch(struct agent_conn *c, const char *cmd_id)
{
    for (struct watch **pp = &c->watches; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->cmd, cmd_id) == 0) {
            struct watch *w = *pp;
            *pp = w->next;
            free(w);
            return;
        }
}
