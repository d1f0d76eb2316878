/* Host-side TCP forwarder for endpoint(): a listener on the host's 127.0.0.1 (ephemeral port)
 * whose connections are relayed to 127.0.0.1:<port> inside the sandbox's network namespace.
 * Only socket() runs inside the sandbox's netns (setns on the loop thread, switched straight
 * back: a socket stays in the namespace it was created in); everything else is ordinary libuv.
 * A forwarder lives in the mcpbox process that made it, until the sandbox ends or the backend
 * shuts down.
 * Rootless, the loop thread may not enter the sandbox's netns (setns needs CAP_SYS_ADMIN in the
 * caller's own user namespace): a helper process, forked single-threaded, enters the sandbox's
 * user namespace (the user owns it) and its netns once, then hands out a socket per request over
 * a socketpair (SCM_RIGHTS). It exits when the forwarder closes its end. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOG_MODULE "local"
#include "backend/local/local_internal.h"
#include "mcp/base/log.h"
#include "mcp/base/xalloc.h"

#define FWD_BACKLOG 64
#define FWD_MAX_QUEUED (1u << 20) /* bytes queued towards one side before reading pauses */
#define FWD_READ_BUF 65536

struct fwd_conn;

struct fwd {
    struct lsbx *sb;
    int port, host_port;
    int netns_fd;
    int helper_fd;   /* rootless: the socket helper's end, else -1 */
    pid_t helper;
    uv_tcp_t listener;
    bool closing;
    struct fwd_conn *conns;
    struct fwd *next;
};

struct fwd_side {
    uv_tcp_t tcp;
    struct fwd_conn *conn;
    struct fwd_side *peer;
};

struct fwd_conn {
    struct fwd *fwd;
    struct fwd_side client, target;
    uv_connect_t connect;
    int open_handles;
    bool closing;
    struct fwd_conn *next;
};

struct fwd_write {
    uv_write_t req;
    char *data;
};

static void conn_handle_closed(uv_handle_t *h)
{
    struct fwd_side *side = h->data;
    struct fwd_conn *c = side->conn;
    if (--c->open_handles > 0)
        return;
    struct fwd *f = c->fwd;
    for (struct fwd_conn **pp = &f->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    free(c);
}

static void conn_close(struct fwd_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->client.tcp, conn_handle_closed);
    uv_close((uv_handle_t *)&c->target.tcp, conn_handle_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)h, (void)hint;
    b->base = xmalloc(FWD_READ_BUF);
    b->len = FWD_READ_BUF;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void on_written(uv_write_t *req, int status)
{
    struct fwd_write *w = (struct fwd_write *)req;
    struct fwd_side *dst = req->handle->data;
    free(w->data);
    free(w);
    if (status < 0) {
        conn_close(dst->conn);
        return;
    }
    /* Backpressure: resume reading the other side once this one has drained. */
    if (!dst->conn->closing && dst->tcp.write_queue_size < FWD_MAX_QUEUED / 2)
        uv_read_start((uv_stream_t *)&dst->peer->tcp, on_alloc, on_read);
}

static void relay(struct fwd_side *from, const char *data, size_t len)
{
    struct fwd_side *to = from->peer;
    struct fwd_write *w = xmalloc(sizeof *w);
    w->data = (char *)data;
    uv_buf_t buf = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&to->tcp, &buf, 1, on_written) < 0) {
        free(w->data);
        free(w);
        conn_close(from->conn);
        return;
    }
    if (to->tcp.write_queue_size > FWD_MAX_QUEUED)
        uv_read_stop((uv_stream_t *)&from->tcp);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct fwd_side *side = s->data;
    if (n > 0) {
        relay(side, b->base, (size_t)n); /* takes b->base */
        return;
    }
    free(b->base);
    if (n < 0)
        conn_close(side->conn); /* EOF or error on either side ends the relay */
}

static void on_target_connected(uv_connect_t *req, int status)
{
    struct fwd_conn *c = req->data;
    if (status < 0 || c->closing) {
        conn_close(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->client.tcp, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&c->target.tcp, on_alloc, on_read);
}

/* The helper (a forked child: system calls only): one socket per byte read, sent back. */
__attribute__((noreturn)) static void helper_main(int ctl, int userns, int netns)
{
    if (setns(userns, CLONE_NEWUSER) < 0 || setns(netns, CLONE_NEWNET) < 0)
        _exit(1);
    char b;
    while (read(ctl, &b, 1) == 1) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        char ctlbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {.iov_base = &b, .iov_len = 1};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        memset(ctlbuf, 0, sizeof ctlbuf);
        if (fd >= 0) {
            msg.msg_control = ctlbuf, msg.msg_controllen = sizeof ctlbuf;
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        if (sendmsg(ctl, &msg, MSG_NOSIGNAL) != 1)
            _exit(0);
        if (fd >= 0)
            close(fd);
    }
    _exit(0);
}

static int start_helper(struct fwd *f, pid_t init)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)init);
    int userns = open(path, O_RDONLY | O_CLOEXEC), sv[2];
    if (userns < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        if (userns >= 0)
            close(userns);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        helper_main(sv[1], userns, f->netns_fd);
    }
    close(sv[1]);
    close(userns);
    if (pid < 0) {
        close(sv[0]);
        return -1;
    }
    f->helper = pid, f->helper_fd = sv[0];
    return 0;
}

static int socket_from_helper(struct fwd *f)
{
    char b = 's', ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &b, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                         .msg_controllen = sizeof ctl};
    if (write(f->helper_fd, &b, 1) != 1 || recvmsg(f->helper_fd, &msg, MSG_CMSG_CLOEXEC) != 1)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    int fd = -1;
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

/* A TCP socket created inside the sandbox's network namespace. */
static int socket_in_netns(int netns_fd)
{
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        return -1;
    int fd = -1;
    if (setns(netns_fd, CLONE_NEWNET) == 0) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (setns(self, CLONE_NEWNET) < 0)
            abort(); /* never leave the loop thread in a sandbox's namespace */
    }
    close(self);
    return fd;
}

static void on_connection(uv_stream_t *server, int status)
{
    struct fwd *f = server->data;
    if (status < 0 || f->closing)
        return;
    struct fwd_conn *c = xcalloc(1, sizeof *c);
    c->fwd = f;
    c->client.conn = c->target.conn = c;
    c->client.peer = &c->target, c->target.peer = &c->client;
    uv_tcp_init(server->loop, &c->client.tcp);
    uv_tcp_init(server->loop, &c->target.tcp);
    c->client.tcp.data = &c->client, c->target.tcp.data = &c->target;
    c->open_handles = 2;
    c->next = f->conns;
    f->conns = c;
    int fd = f->helper_fd >= 0 ? socket_from_helper(f) : socket_in_netns(f->netns_fd);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    c->connect.data = c;
    bool opened = fd >= 0 && uv_tcp_open(&c->target.tcp, fd) == 0; /* the handle owns fd now */
    if (fd >= 0 && !opened)
        close(fd);
    if (uv_accept(server, (uv_stream_t *)&c->client.tcp) < 0 || !opened ||
        uv_tcp_connect(&c->connect, &c->target.tcp, (struct sockaddr *)&sa, on_target_connected) < 0)
        conn_close(c);
}

static void listener_closed(uv_handle_t *h)
{
    struct fwd *f = h->data;
    close(f->netns_fd);
    if (f->helper_fd >= 0) {
        close(f->helper_fd); /* the helper sees EOF and exits at once */
        waitpid(f->helper, NULL, 0);
    }
    lsbx_unref(f->sb);
    free(f);
}

void local_forwards_close(struct lsbx *sb)
{
    while (sb->forwards) {
        struct fwd *f = sb->forwards;
        sb->forwards = f->next;
        f->closing = true;
        for (struct fwd_conn *c = f->conns; c; c = c->next)
            conn_close(c);
        uv_close((uv_handle_t *)&f->listener, listener_closed);
    }
}

/* The host port forwarding to `port` in the sandbox (made on first use), or -1 with err. */
int local_forward(struct lsbx *sb, int port, struct mcp_error *err)
{
    for (struct fwd *f = sb->forwards; f; f = f->next)
        if (f->port == port)
            return f->host_port;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)sb->pid);
    int netns = open(path, O_RDONLY | O_CLOEXEC);
    if (netns < 0)
        return mcp_error_set(err, MCP_ERR_UNAVAILABLE, errno, "cannot open %s", path);
    struct fwd *f = xcalloc(1, sizeof *f);
    f->sb = sb, f->port = port, f->netns_fd = netns, f->helper_fd = -1;
    if (geteuid() != 0 && start_helper(f, sb->pid) < 0) {
        close(netns);
        free(f);
        return mcp_error_set(err, MCP_ERR_IO, errno,
                             "cannot start the helper that opens sockets in the sandbox");
    }
    uv_tcp_init(sb->be->base.loop, &f->listener);
    f->listener.data = f;
    lsbx_ref(sb);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_storage bound;
    int len = sizeof bound;
    int rc = uv_tcp_bind(&f->listener, (struct sockaddr *)&sa, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&f->listener, FWD_BACKLOG, on_connection);
    if (rc == 0)
        rc = uv_tcp_getsockname(&f->listener, (struct sockaddr *)&bound, &len);
    if (rc < 0) {
        uv_close((uv_handle_t *)&f->listener, listener_closed);
        return mcp_error_set(err, MCP_ERR_IO, 0, "cannot listen on 127.0.0.1: %s", uv_strerror(rc));
    }
    f->host_port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    f->next = sb->forwards;
    sb->forwards = f;
    return f->host_port;
}
