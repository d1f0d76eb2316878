/* Egress by policy, the agent's part: it holds the two sockets the sandbox's nftables rules send
 * outbound traffic to (every TCP connection to a non-loopback address, every DNS query), and
 * hands copies of them to mcpbox on request. mcpbox accepts, reads names, decides and connects
 * out on its own loop; the agent never sees a byte of that traffic (docs/local-backend.md,
 * "Egress by policy"). The sockets are made at start, before any command runs, so no sandbox
 * process can take their ports first. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/local/agent/agent.h"
#include "backend/local/proto.h"

static int bound_socket(int type, unsigned short port)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        (type == SOCK_STREAM && listen(fd, 1024) < 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

int agent_egress_open(struct agent *a)
{
    a->egress_tcp = bound_socket(SOCK_STREAM, AGENT_EGRESS_TCP_PORT);
    a->egress_udp = bound_socket(SOCK_DGRAM, AGENT_EGRESS_DNS_PORT);
    return a->egress_tcp >= 0 && a->egress_udp >= 0 ? 0 : -1;
}

/* The reply to "egress_sockets" goes out at once with both fds attached (SCM_RIGHTS), ahead of
 * anything queued: mcpbox asks on a connection of its own and waits for nothing else on it. */
bool agent_egress_send(struct agent *a, struct conn *c, json_t *id)
{
    if (a->egress_tcp < 0 || c->wbuf.len > 0)
        return false;
    json_t *r = json_pack("{s:O, s:b, s:i, s:i}", "id", id, "ok", 1, "tcp", AGENT_EGRESS_TCP_PORT,
                          "udp", AGENT_EGRESS_DNS_PORT);
    char *text = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    if (text == NULL)
        return false;
    size_t len = strlen(text);
    unsigned char hdr[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
                            (unsigned char)(len >> 8), (unsigned char)len};
    struct iovec iov[2] = {{hdr, 4}, {text, len}};
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl.space,
                       .msg_controllen = sizeof ctl.space};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
    int fds[2] = {a->egress_tcp, a->egress_udp};
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
    ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    free(text);
    if (n != (ssize_t)(4 + len))
        c->dead = true; /* a tiny frame on a fresh connection: anything short is a broken peer */
    return true;
}

static int write_text(const char *path, const char *a, size_t na, const char *b, size_t nb)
{
    /* never twice: the spawn may have written the bundle (host root) and bound it over the
     * system one, which this would then read */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    bool ok = write(fd, a, na) == (ssize_t)na && write(fd, b, nb) == (ssize_t)nb;
    return close(fd) == 0 && ok ? 0 : -1;
}

/* The system bundle as this sandbox sees it (NULL: none), at most 8 MiB. */
static char *system_bundle(size_t *len)
{
    static const char *const paths[] = {"/etc/ssl/certs/ca-certificates.crt",
                                        "/etc/pki/tls/certs/ca-bundle.crt"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        FILE *f = fopen(paths[i], "re");
        if (f == NULL)
            continue;
        char *buf = malloc(8u << 20);
        *len = buf ? fread(buf, 1, 8u << 20, f) : 0;
        fclose(f);
        return buf;
    }
    *len = 0;
    return NULL;
}

void agent_egress_trust(const char *ca_pem)
{
    size_t n = 0, ca_len = strlen(ca_pem);
    struct stat st;
    if (stat(AGENT_EGRESS_TRUST_DIR "/ca-bundle.pem", &st) == 0) { /* the spawn made it */
        write_text(AGENT_EGRESS_TRUST_DIR "/ca.pem", ca_pem, ca_len, "", 0);
        return;
    }
    char *sys = system_bundle(&n);
    const char *bundle = AGENT_EGRESS_TRUST_DIR "/ca-bundle.pem";
    mkdir(AGENT_EGRESS_TRUST_DIR, 0755);
    write_text(AGENT_EGRESS_TRUST_DIR "/ca.pem", ca_pem, ca_len, "", 0);
    write_text(bundle, sys ? sys : "", n, ca_pem, ca_len);
    free(sys);
}
