/* Battery: the network a sandbox sees (only loopback, no route to the host or the metadata
 * service, no host abstract unix sockets, no vsock or AF_ALG sockets, even with the family's
 * high word set). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "battery.h"

#ifndef AF_ALG
#define AF_ALG 38
#endif
#define BATTERY_CONNECT_TIMEOUT_MS 1500
/* This VM's gateway (docs/internals/isolation-facts.md §1). */
#define BATTERY_DEFAULT_GATEWAY "192.0.2.1"
#define BATTERY_METADATA_ADDR "169.254.169.254"
#define BATTERY_ABSTRACT_DEFAULT "sbx-battery-host"

/* socket(family, type) must fail with one of allowed. With high_word the family also carries a
 * bit in its register's high word: the kernel reads an int and keeps AF_VSOCK or AF_ALG, a filter
 * that compares 64 bits (libseccomp's) sees another family. */
static void expect_socket_refused(struct battery_probe *p, int family, int type, bool high_word,
                                  const int *allowed)
{
    unsigned long f = (unsigned long)family | (high_word ? 1UL << 32 : 0);
    long fd = syscall(SYS_socket, (long)f, type | SOCK_CLOEXEC, 0);
    int e = errno;
    if (fd >= 0)
        close((int)fd);
    battery_expect_errno(p, fd, e, allowed);
}

static const int vsock_refused[] = {EPERM, 0};
static const int af_alg_refused[] = {EPERM, EAFNOSUPPORT, 0};

static void check_vsock(struct battery_probe *p)
{
    expect_socket_refused(p, AF_VSOCK, SOCK_STREAM, false, vsock_refused);
}

static void check_af_alg(struct battery_probe *p)
{
    expect_socket_refused(p, AF_ALG, SOCK_SEQPACKET, false, af_alg_refused);
}

static void check_vsock_high_word(struct battery_probe *p)
{
    expect_socket_refused(p, AF_VSOCK, SOCK_STREAM, true, vsock_refused);
}

static void check_af_alg_high_word(struct battery_probe *p)
{
    expect_socket_refused(p, AF_ALG, SOCK_SEQPACKET, true, af_alg_refused);
}

static void check_only_lo(struct battery_probe *p)
{
    FILE *f = fopen("/proc/net/dev", "re");
    if (f == NULL) {
        battery_fail(p, errno, "cannot read /proc/net/dev");
        return;
    }
    char line[512], others[BATTERY_DETAIL_MAX] = "";
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char name[64];
        if (++n <= 2 || sscanf(line, " %63[^:]:", name) != 1 || strcmp(name, "lo") == 0)
            continue;
        size_t len = strlen(others);
        snprintf(others + len, sizeof(others) - len, "%s%s", len ? "," : "", name);
    }
    fclose(f);
    if (others[0] != '\0')
        battery_fail(p, 0, "interfaces besides lo: %s", others);
    else
        battery_pass(p, 0, "only lo");
}

/* Non-blocking TCP connect; returns 0 if it connected, else the errno (ETIMEDOUT after the
 * probe's timeout). */
static int tcp_try(const char *addr, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return errno;
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : errno;
    if (rc == EINPROGRESS) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int err = ETIMEDOUT;
        socklen_t len = sizeof(err);
        if (poll(&pfd, 1, BATTERY_CONNECT_TIMEOUT_MS) == 1)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err;
    }
    close(fd);
    return rc;
}

/* The default gateway from /proc/net/route, else the documented one. */
static void default_gateway(char *out, size_t size)
{
    snprintf(out, size, "%s", getenv("BATTERY_GATEWAY") ? getenv("BATTERY_GATEWAY")
                                                         : BATTERY_DEFAULT_GATEWAY);
    FILE *f = fopen("/proc/net/route", "re");
    if (f == NULL)
        return;
    char line[256], ifname[32];
    unsigned dest, gw;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "%31s %x %x", ifname, &dest, &gw) == 3 && dest == 0 && gw != 0) {
            struct in_addr a = {.s_addr = gw};
            inet_ntop(AF_INET, &a, out, (socklen_t)size);
            break;
        }
    fclose(f);
}

static void expect_unreachable(struct battery_probe *p, const char *addr, int port)
{
    int e = tcp_try(addr, port);
    if (e == ENETUNREACH)
        battery_pass(p, e, "no route to %s", addr);
    else if (e == 0)
        battery_fail(p, 0, "connected to %s:%d", addr, port);
    else
        battery_fail(p, e, "%s:%d is routed (the attempt got past routing)", addr, port);
}

static void check_host_gw(struct battery_probe *p)
{
    char gw[64];
    default_gateway(gw, sizeof(gw));
    expect_unreachable(p, gw, 80);
}

static void check_metadata(struct battery_probe *p)
{
    expect_unreachable(p, BATTERY_METADATA_ADDR, 80);
}

/* CVE-2020-15257: the runner listens on this abstract name in the host's network namespace. */
static void check_abstract_unix(struct battery_probe *p)
{
    const char *name = getenv("BATTERY_ABSTRACT_NAME");
    name = name && *name ? name : BATTERY_ABSTRACT_DEFAULT;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strnlen(name, sizeof(sa.sun_path) - 2);
    memcpy(sa.sun_path + 1, name, len);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        battery_pass(p, errno, "no unix sockets at all");
        return;
    }
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
    int rc = connect(fd, (struct sockaddr *)&sa, alen);
    int e = errno;
    close(fd);
    static const int allowed[] = {ECONNREFUSED, 0};
    battery_expect_errno(p, rc, e, allowed);
}

const struct battery_check battery_checks_net[] = {
    {23, "vsock_denied", check_vsock, "socket(AF_VSOCK) EPERM"},
    {24, "af_alg_denied", check_af_alg, "socket(AF_ALG) refused"},
    {56, "vsock_high_word_denied", check_vsock_high_word, "socket(AF_VSOCK | 1 << 32) EPERM"},
    {57, "af_alg_high_word_denied", check_af_alg_high_word, "socket(AF_ALG | 1 << 32) refused"},
    {29, "netns_only_lo", check_only_lo, "only lo"},
    {30, "net_host_gw", check_host_gw, "gateway ENETUNREACH"},
    {31, "net_metadata", check_metadata, "169.254.169.254 ENETUNREACH"},
    {32, "abstract_unix", check_abstract_unix, "host abstract socket ECONNREFUSED"},
    {0},
};
