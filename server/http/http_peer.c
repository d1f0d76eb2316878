/* Who is at the other end of a loopback TCP connection: the uid that owns the peer's socket.
 *
 * One sock_diag (NETLINK_SOCK_DIAG, inet_diag) request names the peer's socket by its exact
 * 4-tuple, and the kernel looks up that one socket and answers with its owner. Chosen over
 * reading /proc/net/tcp{,6}: that file lists every TCP socket of the namespace as text, so a
 * lookup would parse the whole table (thousands of lines on a busy host) on every new
 * connection, and /proc may be mounted hidepid or absent in a container; the netlink query is
 * one small exact lookup that needs no privilege. */
#define LOG_MODULE "http"
#include "server/http/http_conn.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/base/log.h"

/* Fills the request's socket id: source = the peer, destination = us, as the peer's socket
 * sees the connection. IPv4-mapped IPv6 addresses become plain IPv4 (the client's socket is
 * then an AF_INET one). */
static int fill_id(struct inet_diag_req_v2 *r, const struct sockaddr_storage *peer,
                   const struct sockaddr_storage *self)
{
    if (peer->ss_family == AF_INET && self->ss_family == AF_INET) {
        const struct sockaddr_in *p = (const void *)peer, *s = (const void *)self;
        r->sdiag_family = AF_INET;
        r->id.idiag_sport = p->sin_port;
        r->id.idiag_dport = s->sin_port;
        memcpy(r->id.idiag_src, &p->sin_addr, 4);
        memcpy(r->id.idiag_dst, &s->sin_addr, 4);
        return 0;
    }
    if (peer->ss_family != AF_INET6 || self->ss_family != AF_INET6)
        return -1;
    const struct sockaddr_in6 *p = (const void *)peer, *s = (const void *)self;
    bool mapped = IN6_IS_ADDR_V4MAPPED(&p->sin6_addr) && IN6_IS_ADDR_V4MAPPED(&s->sin6_addr);
    r->sdiag_family = mapped ? AF_INET : AF_INET6;
    r->id.idiag_sport = p->sin6_port;
    r->id.idiag_dport = s->sin6_port;
    if (mapped) {
        memcpy(r->id.idiag_src, &p->sin6_addr.s6_addr[12], 4);
        memcpy(r->id.idiag_dst, &s->sin6_addr.s6_addr[12], 4);
    } else {
        memcpy(r->id.idiag_src, &p->sin6_addr, 16);
        memcpy(r->id.idiag_dst, &s->sin6_addr, 16);
    }
    return 0;
}

static int ask_kernel(const struct inet_diag_req_v2 *r, uid_t *uid)
{
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -errno;
    struct timeval tv = {.tv_sec = 1}; /* the kernel answers at once; never hang the loop */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req = {.nlh = {.nlmsg_len = sizeof req, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                     .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1},
             .r = *r};
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    long buf[1024]; /* aligned for nlmsghdr */
    int rc = -EPROTO;
    if (sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        rc = -errno;
    } else {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        const struct nlmsghdr *h = (const void *)buf;
        if (n < 0)
            rc = -errno;
        else if (!NLMSG_OK(h, (size_t)n))
            rc = -EPROTO;
        else if (h->nlmsg_type == NLMSG_ERROR)
            rc = ((const struct nlmsgerr *)NLMSG_DATA(h))->error < 0
                     ? ((const struct nlmsgerr *)NLMSG_DATA(h))->error
                     : -ENOENT;
        else if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
                 h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            *uid = ((const struct inet_diag_msg *)NLMSG_DATA(h))->idiag_uid;
            rc = 0;
        }
    }
    close(fd);
    return rc;
}

int http_peer_uid(const struct sockaddr_storage *peer, const struct sockaddr_storage *self,
                  uid_t *uid)
{
    struct inet_diag_req_v2 r = {
        .sdiag_protocol = IPPROTO_TCP,
        .idiag_states = ~0u,
        .id = {.idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}},
    };
    if (fill_id(&r, peer, self) < 0)
        return -EAFNOSUPPORT;
    return ask_kernel(&r, uid);
}

int http_conn_peer_uid(struct http_conn *c, uid_t *uid)
{
    if (c->peer_uid_state == 0) {
        struct sockaddr_storage peer, self;
        int plen = sizeof peer, slen = sizeof self;
        int rc = uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&peer, &plen);
        if (rc == 0)
            rc = uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&self, &slen);
        if (rc == 0)
            rc = http_peer_uid(&peer, &self, &c->peer_uid);
        c->peer_uid_state = rc == 0 ? 1 : -1;
        if (rc < 0)
            log_warn("cannot tell which user is connected over loopback (sock_diag: %s); this "
                     "client's sandboxes belong to its MCP session only",
                     strerror(-rc));
    }
    *uid = c->peer_uid;
    return c->peer_uid_state > 0 ? 0 : -1;
}
