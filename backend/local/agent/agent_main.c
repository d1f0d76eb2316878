/* The agent's event loop: connections, framing, dispatch, TTL and idle expiry. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backend/local/agent/agent.h"
#include "backend/local/proto.h"
#include "lib/base/utf8.h"
#include "lib/base/util.h"
#include "lib/base/xalloc.h"

#define AGENT_POLL_MAX (2 + AGENT_MAX_CONNS + 3 * AGENT_MAX_RUNNING)
#define AGENT_TICK_MS 1000

void agent_touch(struct agent *a)
{
    a->last_active_ms = now_mono_ms();
}

void agent_send(struct conn *c, json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (c->dead || text == NULL) {
        free(text);
        return;
    }
    size_t len = strlen(text);
    unsigned char hdr[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
                            (unsigned char)(len >> 8), (unsigned char)len};
    if (buf_append(&c->wbuf, hdr, 4) < 0 || buf_append(&c->wbuf, text, len) < 0)
        c->dead = true; /* a client that does not read loses its connection, not our memory */
    free(text);
}

static json_t *error_reply(json_t *id, const struct mcp_error *err)
{
    /* the message may name a path that is not UTF-8: sanitized, or the reply would be lost */
    return json_pack("{s:O, s:b, s:{s:s, s:i, s:o}}", "id", id, "ok", 0, "error", "code",
                     mcp_error_code_name(err->code), "errno", err->sys_errno, "message",
                     utf8_json_text(err->msg, strlen(err->msg)));
}

static json_t *op_hello(struct agent *a, json_t *req, struct mcp_error *err)
{
    return json_pack("{s:i, s:i, s:I, s:I, s:I}", "version", AGENT_PROTO_VERSION, "pid",
                     (int)getpid(), "running", (json_int_t)agent_cmd_running(a), "expires_at_ms",
                     (json_int_t)a->expires_at_ms, "idle_timeout_s", (json_int_t)a->idle_timeout_s);
}

static json_t *op_config(struct agent *a, json_t *req, struct mcp_error *err)
{
    json_t *e = json_object_get(req, "expires_at_ms"), *i = json_object_get(req, "idle_timeout_s");
    if (json_is_integer(e))
        a->expires_at_ms = json_integer_value(e);
    if (json_is_integer(i))
        a->idle_timeout_s = json_integer_value(i);
    json_t *env = json_object_get(req, "env"); /* a pooled sandbox gets its owner's env here */
    if (json_is_object(env)) {
        json_decref(a->env);
        a->env = json_incref(env);
    }
    return op_hello(a, req, err);
}

static json_t *dispatch(struct agent *a, struct conn *c, const char *op, json_t *req,
                        struct mcp_error *err)
{
    if (strcmp(op, "hello") == 0 || strcmp(op, "ping") == 0)
        return op_hello(a, req, err);
    if (strcmp(op, "config") == 0)
        return op_config(a, req, err);
    if (strcmp(op, "exec") == 0)
        return agent_cmd_exec(a, c, req, err);
    if (strcmp(op, "cmd_status") == 0)
        return agent_cmd_status(a, req, err);
    if (strcmp(op, "cmd_kill") == 0)
        return agent_cmd_kill(a, req, err);
    if (strcmp(op, "cmd_list") == 0)
        return agent_cmd_list(a, req, err);
    if (strcmp(op, "cmd_input") == 0)
        return agent_cmd_input(a, req, err);
    if (strcmp(op, "cmd_resize") == 0)
        return agent_cmd_resize(a, req, err);
    if (strcmp(op, "cmd_watch") == 0)
        return agent_cmd_watch(a, c, req, err);
    if (strcmp(op, "cmd_find") == 0)
        return agent_cmd_find_label(a, req, err);
    return agent_fs_op(a, op, req, err);
}

static void handle_frame(struct agent *a, struct conn *c, const char *data, size_t len)
{
    json_error_t jerr;
    json_t *req = json_loadb(data, len, 0, &jerr);
    struct mcp_error err = {0};
    if (!json_is_object(req)) {
        mcp_error_set(&err, MCP_ERR_INVALID, 0, "agent: bad frame: %s", jerr.text);
        json_t *null_id = json_null();
        agent_send(c, error_reply(null_id, &err));
        json_decref(null_id);
        json_decref(req);
        return;
    }
    json_t *id = json_object_get(req, "id");
    const char *op = json_string_value(json_object_get(req, "op"));
    json_t *res = NULL;
    agent_touch(a);
    if (op && strcmp(op, "egress_sockets") == 0 && agent_egress_send(a, c, id ? id : json_null())) {
        json_decref(req);
        return;
    }
    if (json_integer_value(json_object_get(req, "v")) != AGENT_PROTO_VERSION)
        mcp_error_set(&err, MCP_ERR_UNSUPPORTED, 0, "agent speaks protocol version %d",
                      AGENT_PROTO_VERSION);
    else if (op == NULL)
        mcp_error_set(&err, MCP_ERR_INVALID, 0, "agent: request without op");
    else
        res = dispatch(a, c, op, req, &err);
    if (res == NULL && err.msg[0] == '\0')
        mcp_error_set(&err, MCP_ERR_INVALID, 0, "agent: unknown op '%s'", op);
    if (res != NULL) {
        json_object_set(res, "id", id ? id : json_null());
        json_object_set_new(res, "ok", json_true());
        agent_send(c, res);
    } else {
        agent_send(c, error_reply(id ? id : json_null(), &err));
    }
    json_decref(req);
}

/* After a large frame, give the memory back: an idle sandbox should cost little. */
static void shrink(struct buf *b)
{
    if (b->len == 0 && b->cap > AGENT_KEEP_BUF) {
        size_t limit = b->limit;
        buf_release(b);
        buf_init(b, limit);
    }
}

static void conn_read(struct agent *a, struct conn *c)
{
    char chunk[AGENT_READ_CHUNK];
    ssize_t n = read(c->fd, chunk, sizeof chunk);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        c->dead = true;
        return;
    }
    if (n < 0)
        return;
    if (buf_append(&c->rbuf, chunk, (size_t)n) < 0) {
        c->dead = true;
        return;
    }
    while (c->rbuf.len >= 4 && !c->dead) {
        const unsigned char *p = (const unsigned char *)c->rbuf.data;
        size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
        if (len > AGENT_FRAME_MAX) {
            c->dead = true;
            return;
        }
        if (c->rbuf.len < 4 + len)
            return;
        handle_frame(a, c, c->rbuf.data + 4, len);
        buf_consume(&c->rbuf, 4 + len);
    }
    shrink(&c->rbuf);
}

static void conn_write(struct conn *c)
{
    while (c->wbuf.len > 0) {
        ssize_t n = send(c->fd, c->wbuf.data, c->wbuf.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                c->dead = true;
            return;
        }
        buf_consume(&c->wbuf, (size_t)n);
    }
    shrink(&c->wbuf);
}

static void accept_conn(struct agent *a)
{
    int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    size_t n = 0;
    for (struct conn *c = a->conns; c; c = c->next)
        n++;
    if (n >= AGENT_MAX_CONNS) {
        close(fd);
        return;
    }
    struct conn *c = xcalloc(1, sizeof *c);
    c->fd = fd;
    buf_init(&c->rbuf, AGENT_FRAME_MAX + 4 + AGENT_READ_CHUNK);
    buf_init(&c->wbuf, AGENT_WBUF_MAX);
    c->next = a->conns;
    a->conns = c;
    agent_touch(a);
}

static void sweep_conns(struct agent *a)
{
    for (struct conn **pp = &a->conns; *pp;) {
        struct conn *c = *pp;
        if (!c->dead) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        agent_cmd_forget_conn(a, c);
        agent_watch_forget_conn(a, c);
        close(c->fd);
        buf_release(&c->rbuf);
        buf_release(&c->wbuf);
        free(c);
    }
}

/* Ends the sandbox: PID 1 exiting makes the kernel kill everything in the pid namespace. The
 * marker file tells mcpbox (now or at its next start) why the sandbox is gone. */
static void expire(struct agent *a, const char *why)
{
    /* 0644: a rootless mcpbox (the directory's owner, not this uid) reads it. */
    int fd = openat(a->logdir_fd, "expired", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                    0644);
    if (fd >= 0) {
        ssize_t w = write(fd, why, strlen(why));
        (void)w;
        close(fd);
    }
    _exit(0);
}

static void check_expiry(struct agent *a)
{
    if (a->expires_at_ms > 0 && now_wall_ms() >= a->expires_at_ms)
        expire(a, "ttl");
    if (a->idle_timeout_s > 0 && agent_cmd_running(a) == 0 &&
        now_mono_ms() - a->last_active_ms >= (uint64_t)duration_ms(a->idle_timeout_s))
        expire(a, "idle");
    if (agent_cmd_running(a) > 0)
        agent_touch(a); /* a running command is activity */
}

static int poll_timeout(struct agent *a)
{
    uint64_t now = now_mono_ms(), next = agent_cmd_next_deadline(a);
    int t = AGENT_TICK_MS;
    if (next && next <= now)
        return 0;
    if (next && next - now < (uint64_t)t)
        t = (int)(next - now);
    return t;
}

static void loop_once(struct agent *a)
{
    struct pollfd pfd[AGENT_POLL_MAX];
    struct conn *conn_of[AGENT_POLL_MAX];
    struct cmd *cmd_of[AGENT_POLL_MAX];
    int n = 0;
    agent_watch_pump(a); /* replays fill their connections before the poll below sends them */
    memset(conn_of, 0, sizeof conn_of);
    memset(cmd_of, 0, sizeof cmd_of);
    pfd[n++] = (struct pollfd){.fd = a->listen_fd, .events = POLLIN};
    pfd[n++] = (struct pollfd){.fd = a->sig_fd, .events = POLLIN};
    for (struct conn *c = a->conns; c && n < AGENT_POLL_MAX; c = c->next) {
        conn_of[n] = c;
        pfd[n++] = (struct pollfd){.fd = c->fd, .events = (short)(POLLIN | (c->wbuf.len ? POLLOUT : 0))};
    }
    int first_cmd = n;
    n += agent_cmd_poll_fds(a, pfd + n, cmd_of + n, AGENT_POLL_MAX - n);
    /* Nothing to do right now: make the next command's log file ahead of time. */
    if (a->spare_log < 0 && poll(pfd, (nfds_t)n, 0) == 0)
        agent_cmd_make_spare_log(a);
    if (poll(pfd, (nfds_t)n, poll_timeout(a)) < 0 && errno != EINTR)
        _exit(1);
    if (pfd[0].revents)
        accept_conn(a);
    if (pfd[1].revents) {
        struct signalfd_siginfo si;
        while (read(a->sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        }
    }
    for (int i = first_cmd; i < n; i++)
        if (pfd[i].revents && cmd_of[i])
            agent_cmd_on_fd(a, cmd_of[i], pfd[i].fd, pfd[i].revents);
    agent_cmd_reap(a); /* after draining pipes, so output precedes the exit event */
    for (int i = 2; i < first_cmd; i++) {
        if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
            conn_read(a, conn_of[i]);
    }
    for (struct conn *c = a->conns; c; c = c->next)
        if (c->wbuf.len && !c->dead)
            conn_write(c);
    agent_cmd_timeouts(a);
    sweep_conns(a);
    check_expiry(a);
}

static int parse_config(struct agent *a, const char *text)
{
    json_t *cfg = json_loads(text, 0, NULL);
    if (!json_is_object(cfg))
        return -1;
    a->expires_at_ms = json_integer_value(json_object_get(cfg, "expires_at_ms"));
    a->idle_timeout_s = json_integer_value(json_object_get(cfg, "idle_timeout_s"));
    const char *wd = json_string_value(json_object_get(cfg, "workdir"));
    snprintf(a->workdir, sizeof a->workdir, "%s", wd ? wd : "/workspace");
    a->env = json_incref(json_object_get(cfg, "env"));
    if (json_is_true(json_object_get(cfg, "egress")) && agent_egress_open(a) < 0) {
        json_decref(cfg);
        return -1; /* without its sockets an egress sandbox has no way out: do not start */
    }
    if (json_is_string(json_object_get(cfg, "egress_ca")))
        agent_egress_trust(json_string_value(json_object_get(cfg, "egress_ca")));
    if (!json_is_object(a->env)) {
        json_decref(a->env);
        a->env = json_object();
    }
    json_decref(cfg);
    return 0;
}

/* jansson seeds its hash function on the first object it makes by opening and reading
 * /dev/urandom: three system calls on the path of every create, where getrandom is one. */
static void seed_json_hashes(void)
{
    uint32_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
        return; /* jansson seeds itself as before */
    json_object_seed(seed != 0 ? seed : 1u);
}

int main(int argc, char **argv)
{
    static struct agent a = {.listen_fd = AGENT_LISTEN_FD, .logdir_fd = AGENT_LOGDIR_FD,
                             .spare_log = -1, .egress_tcp = -1, .egress_udp = -1};
    /* Commands must not ptrace us or read our memory through /proc/1/mem. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    seed_json_hashes();
    /* The configuration (which may hold the sandbox's env values) comes in the environment,
     * not argv: argv is world-readable on the host through ps. Commands get a fresh envp. */
    const char *cfg = getenv(AGENT_CONFIG_ENV);
    if (cfg == NULL || parse_config(&a, cfg) < 0)
        return 2;
    clearenv();
    fcntl(a.listen_fd, F_SETFD, FD_CLOEXEC);
    fcntl(a.logdir_fd, F_SETFD, FD_CLOEXEC);
    fcntl(a.listen_fd, F_SETFL, O_NONBLOCK);
    close(AGENT_EXE_FD);
    setsid();
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    a.sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (a.sig_fd < 0)
        return 3;
    agent_touch(&a);
    for (;;)
        loop_once(&a);
}
