/* Host-side TCP forwarder for endpoint(): a listener on the host's 127.0.0.1 (ephemeral port)
 * whose connections are relayed to 127.0.0.1:<port> inside the sandbox's network namespace.
 *
 * An endpoint lives as long as its sandbox, not as long as the mcpbox process that made it (a
 * stdio client starts one server per session; the sandbox outlives it, so must its URL). Each
 * endpoint is therefore a small detached process (double fork, setsid: no longer a child of
 * mcpbox nor in its process group) that owns the listening socket and a pidfd of the sandbox's
 * init, and exits when init does (the sandbox destroyed or expired). Per accepted connection it
 * forks a relay that enters the sandbox's network namespace (rootless: its user namespace
 * first, which the user owns), connects to the port and copies bytes both ways with poll().
 * These processes run only system calls (they are forked from a threaded process).
 * A later get_endpoint, from this process or another, finds the same forwarder through a file
 * in the sandbox's runtime directory (fwd-<port>: "<host port> <pid>"). See
 * docs/local-backend.md, Endpoints.
 *
 * Only the sandbox's owner (and the server's own user) may use the port, though any local user
 * can connect to 127.0.0.1: each relay first asks the kernel (sock_diag, one exact lookup of the
 * client's socket by its 4-tuple) which uid owns the other end, and closes the connection
 * unheard for any other. */
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOG_MODULE "local"
#include "lib/base/buf.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_spawn.h"
#include "backend/local/local_sandbox.h"
#include "backend/local/local_egress.h"
#include "lib/base/log.h"
#include "lib/base/xalloc.h"

#define FWD_BACKLOG 64
#define FWD_RELAY_BUF 65536

/* What this process knows of the forwarders it made or found (port -> host port). */
struct fwd {
    int port, host_port;
    struct fwd *next;
};

/* Fixed descriptors in the forwarder process. */
enum { FD_LISTEN = 3, FD_PIDFD, FD_NETNS, FD_USERNS, FD_FIRST_FREE };

/* fork() without the pthread_atfork handlers: libuv's close and reopen descriptors of its own in
 * the child, and in the forwarder those numbers are ours. Only system calls follow it. */
static pid_t raw_fork(void)
{
    return (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
}

static int write_all_fd(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* The uid owning the client's end of the loopback connection `c` (sock_diag: the socket whose
 * source is the peer and destination us), or -1. The same lookup as server/http/http_peer.c, for
 * IPv4 only and with system calls only (this runs in a process forked from a threaded one). */
static long peer_uid(int c)
{
    struct sockaddr_in peer, self;
    socklen_t plen = sizeof peer, slen = sizeof self;
    if (getpeername(c, (struct sockaddr *)&peer, &plen) < 0 ||
        getsockname(c, (struct sockaddr *)&self, &slen) < 0 || peer.sin_family != AF_INET)
        return -1;
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req = {.nlh = {.nlmsg_len = sizeof req,
                     .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                     .nlmsg_flags = NLM_F_REQUEST,
                     .nlmsg_seq = 1},
             .r = {.sdiag_family = AF_INET,
                   .sdiag_protocol = IPPROTO_TCP,
                   .idiag_states = ~0u,
                   .id = {.idiag_sport = peer.sin_port,
                          .idiag_dport = self.sin_port,
                          .idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}}}};
    memcpy(req.r.id.idiag_src, &peer.sin_addr, 4);
    memcpy(req.r.id.idiag_dst, &self.sin_addr, 4);
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    long buf[1024]; /* aligned for nlmsghdr */
    long uid = -1;
    ssize_t n = sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0
                    ? -1
                    : recv(fd, buf, sizeof buf, 0);
    const struct nlmsghdr *h = (const void *)buf;
    if (n > 0 && NLMSG_OK(h, (size_t)n) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
        h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
        uid = ((const struct inet_diag_msg *)NLMSG_DATA(h))->idiag_uid;
    close(fd);
    return uid;
}

/* One connection: from an allowed user only; into the sandbox's namespaces, connect, copy both
 * ways until both ends are done or the sandbox ends. */
__attribute__((noreturn)) static void relay_main(int client, int port, bool userns,
                                                 const uid_t allowed[2])
{
    long uid = peer_uid(client);
    if (uid < 0 || ((uid_t)uid != allowed[0] && (uid_t)uid != allowed[1]))
        _exit(1); /* another local user: closed before a byte reaches the sandbox */
    if ((userns && setns(FD_USERNS, CLONE_NEWUSER) < 0) ||
        setns(FD_NETNS, CLONE_NEWNET) < 0)
        _exit(1);
    int target = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (target < 0 || connect(target, (struct sockaddr *)&sa, sizeof sa) < 0)
        _exit(1);
    static char buf[FWD_RELAY_BUF];
    struct pollfd p[3] = {{.fd = client, .events = POLLIN}, {.fd = target, .events = POLLIN},
                          {.fd = FD_PIDFD, .events = POLLIN}};
    int open_ends = 2;
    while (open_ends > 0) {
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        if (p[2].revents)
            _exit(0); /* the sandbox ended */
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !p[i].revents)
                continue;
            ssize_t n = read(p[i].fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            int other = i == 0 ? target : client;
            if (n > 0 && write_all_fd(other, buf, (size_t)n) == 0)
                continue;
            if (n < 0)
                _exit(1);
            shutdown(other, SHUT_WR); /* EOF: pass it on, keep reading the other way */
            p[i].fd = -1;
            open_ends--;
        }
    }
    _exit(0);
}

/* The forwarder: accept until the sandbox's init exits. */
__attribute__((noreturn)) static void forwarder_main(int port, bool userns, const uid_t allowed[2])
{
    struct pollfd p[2] = {{.fd = FD_LISTEN, .events = POLLIN}, {.fd = FD_PIDFD, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            _exit(1);
        if (p[1].revents) {
            kill(0, SIGKILL); /* the relays (our process group) go with us */
            _exit(0);
        }
        if (!p[0].revents)
            continue;
        int c = accept4(FD_LISTEN, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        if (raw_fork() == 0) {
            close(FD_LISTEN);
            relay_main(c, port, userns, allowed);
        }
        close(c);
    }
}

/* Moves the forwarder's descriptors to their fixed numbers and closes every other. */
static void arrange_fds(int listener, int pidfd, int netns, int userns)
{
    int want[] = {listener, pidfd, netns, userns};
    int tmp[4];
    for (int i = 0; i < 4; i++) /* first above the fixed range, so no dup2 clobbers a source */
        tmp[i] = want[i] >= 0 ? fcntl(want[i], F_DUPFD, 64) : -1;
    for (int i = 0; i < 4; i++) {
        if (tmp[i] >= 0)
            dup2(tmp[i], FD_LISTEN + i); /* without FD_CLOEXEC: nothing is exec'd anyway */
        else
            close(FD_LISTEN + i);
    }
    syscall(SYS_close_range, FD_FIRST_FREE, ~0u, 0);
    /* Not mcpbox's stdio: a stdio client must see EOF when the server exits. */
    int raw = open("/dev/null", O_RDWR); /* may land on a free fixed slot: move it above */
    int null = raw >= 0 ? fcntl(raw, F_DUPFD, FD_FIRST_FREE) : -1;
    if (raw >= 0)
        close(raw);
    for (int fd = 0; fd < 3 && null >= 0; fd++)
        dup2(null, fd);
    if (null >= 0)
        close(null);
}

/* Starts the detached forwarder; returns its pid (the grandchild), or -1. */
static pid_t spawn_forwarder(int listener, int pidfd, int netns, int userns, int port,
                             const uid_t allowed[2])
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return -1;
    pid_t child = raw_fork();
    if (child < 0) {
        close(pipefd[0]), close(pipefd[1]);
        return -1;
    }
    if (child == 0) {
        setsid(); /* out of mcpbox's session and process group: a signal to it misses us */
        pid_t grandchild = raw_fork();
        if (grandchild != 0) { /* report the forwarder's pid, then leave it to init */
            ssize_t w = write(pipefd[1], &grandchild, sizeof grandchild);
            (void)w;
            _exit(0);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int sig = 1; sig < NSIG; sig++) /* mcpbox's handlers (libuv's) mean nothing here */
            signal(sig, SIG_DFL);
        signal(SIGCHLD, SIG_IGN); /* relays are reaped by the kernel */
        prctl(PR_SET_NAME, "mcpbox-fwd"); /* what ps and top show (its argv is mcpbox's) */
        signal(SIGPIPE, SIG_IGN);
        close(pipefd[1]);
        arrange_fds(listener, pidfd, netns, userns);
        forwarder_main(port, userns >= 0, allowed);
    }
    close(pipefd[1]);
    pid_t pid = -1;
    if (read(pipefd[0], &pid, sizeof pid) != sizeof pid)
        pid = -1;
    close(pipefd[0]);
    waitpid(child, NULL, 0);
    return pid;
}

static int listen_loopback(int *host_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, FWD_BACKLOG) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *host_port = ntohs(sa.sin_port);
    return fd;
}

static void record_path(struct lsbx *sb, int port, char *out, size_t size)
{
    char dir[LOCAL_PATH_MAX], logs[LOCAL_PATH_MAX];
    local_sandbox_dirs(sb->be, sb->id, dir, logs);
    snprintf(out, size, "%s/fwd-%d", dir, port);
}

/* A forwarder another mcpbox process (or an earlier one) made for this port, still running. */
static int find_recorded(struct lsbx *sb, int port)
{
    char path[LOCAL_PATH_MAX + 16];
    record_path(sb, port, path, sizeof path);
    FILE *f = fopen(path, "re");
    int host_port = -1, pid = -1;
    if (f == NULL)
        return -1;
    bool ok = fscanf(f, "%d %d", &host_port, &pid) == 2;
    fclose(f);
    if (!ok || pid <= 0 || kill(pid, 0) < 0)
        return -1;
    /* The pid may have been reused: the forwarder is there if its port accepts. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)host_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (fd >= 0)
        close(fd);
    return ok ? host_port : -1;
}

static void remember(struct lsbx *sb, int port, int host_port)
{
    struct fwd *f = xcalloc(1, sizeof *f);
    f->port = port, f->host_port = host_port, f->next = sb->forwards;
    sb->forwards = f;
}

/* This process forgets the sandbox's forwarders; they exit by themselves when it ends. */
void local_forwards_close(struct lsbx *sb)
{
    while (sb->forwards) {
        struct fwd *f = sb->forwards;
        sb->forwards = f->next;
        free(f);
    }
}

static int start_forwarder(struct lsbx *sb, int port, uid_t owner, struct mcp_error *err)
{
    const uid_t allowed[2] = {owner, geteuid()};
    int host_port = 0, userns = -1;
    int pidfd = (int)syscall(SYS_pidfd_open, sb->pid, 0);
    int netns = local_ns_open(sb->pid, "net");
    if (geteuid() != 0) /* rootless: the relays enter the sandbox's user namespace first */
        userns = local_ns_open(sb->pid, "user");
    int listener = listen_loopback(&host_port);
    pid_t pid = -1;
    if (pidfd >= 0 && netns >= 0 && listener >= 0 && (geteuid() == 0 || userns >= 0))
        pid = spawn_forwarder(listener, pidfd, netns, userns, port, allowed);
    int e = errno;
    int fds[] = {pidfd, netns, userns, listener};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (pid < 0)
        return mcp_error_set(err, MCP_ERR_IO, e, "cannot start the forwarder for port %d", port);
    char rec[LOCAL_PATH_MAX + 16];
    record_path(sb, port, rec, sizeof rec);
    FILE *f = fopen(rec, "we");
    if (f != NULL) {
        fprintf(f, "%d %d\n", host_port, (int)pid);
        fclose(f);
    }
    return host_port;
}

/* The host port forwarding to `port` in the sandbox (made on first use), or -1 with err. */
int local_forward(struct lsbx *sb, int port, uid_t owner, struct mcp_error *err)
{
    for (struct fwd *f = sb->forwards; f; f = f->next)
        if (f->port == port)
            return f->host_port;
    int host_port = find_recorded(sb, port);
    if (host_port < 0)
        host_port = start_forwarder(sb, port, owner, err);
    if (host_port >= 0)
        remember(sb, port, host_port);
    return host_port;
}
