/* Opt-in egress ({network:true}): pasta (Debian package passt) gives the sandbox's network
 * namespace a tap interface backed by ordinary host sockets, without privileges in the sandbox.
 *  - host side (parent): pasta joins the sandbox's user and network namespaces, configures the
 *    interface (--config-net), forwards DNS sent to LOCAL_DNS_ADDR to the host's resolver, does
 *    not map the gateway to the host's loopback (--no-map-gw) and forwards no ports inward;
 *    it is moved into the sandbox's cgroups so that destroy (cgroup.kill) ends it too.
 *  - sandbox side (child, before it drops CAP_NET_ADMIN): unreachable routes for loopback-like,
 *    private, link-local, CGNAT and reserved ranges, so only the public internet is reachable
 *    (the DNS forwarder's /32 stays routable). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/local/egress_rules.h"
#include "backend/local/local_internal.h"

#define PASTA_PID_FILE "pasta.pid"

/* Ranges a sandbox with egress must not reach: unreachable routes with network: true, and the
 * addresses egress by policy never connects to (local_addr_blocked). One list for both: every
 * block of the IANA IPv4 Special-Purpose Address Registry (RFC 6890, as of 2025), the ones it
 * marks globally reachable included (AS112, AMT, the anycast services in 192.0.0.0/24: nothing a
 * sandbox needs, and an address that is not the public internet's), plus multicast. The sandbox's
 * own plumbing keeps what it needs: network: true's DNS forwarder gets a /32 route back
 * (local_block_private_routes), and the policy path's synthetic addresses (198.18.0.0/15) are
 * answered by mcpbox itself, never connected to. */
struct net_range {
    const char *net;
    int prefix;
};
static const struct net_range blocked[] = {
    {"0.0.0.0", 8},       /* "this network" (0.0.0.0/32 "this host" within) */
    {"10.0.0.0", 8},      /* private use */
    {"100.64.0.0", 10},   /* shared address space (CGNAT) */
    {"127.0.0.0", 8},     /* loopback */
    {"169.254.0.0", 16},  /* link local (cloud metadata services) */
    {"172.16.0.0", 12},   /* private use */
    {"192.0.0.0", 24},    /* IETF protocol assignments (DS-Lite, PCP, TURN, NAT64 discovery) */
    {"192.0.2.0", 24},    /* documentation (TEST-NET-1) */
    {"192.31.196.0", 24}, /* AS112-v4 */
    {"192.52.193.0", 24}, /* AMT */
    {"192.88.99.0", 24},  /* deprecated 6to4 relay anycast */
    {"192.168.0.0", 16},  /* private use */
    {"192.175.48.0", 24}, /* direct delegation AS112 service */
    {"198.18.0.0", 15},   /* benchmarking */
    {"198.51.100.0", 24}, /* documentation (TEST-NET-2) */
    {"203.0.113.0", 24},  /* documentation (TEST-NET-3) */
    {"224.0.0.0", 4},     /* multicast (the address space registry, not the special one) */
    {"240.0.0.0", 4},     /* reserved (255.255.255.255/32 limited broadcast within) */
};

/* The same for IPv6: the IANA IPv6 Special-Purpose Address Registry (as of 2025), plus
 * site-local and multicast from the address space registry. Neither egress path carries IPv6
 * today (pasta runs with -4; the policy path resolves and routes IPv4 only); the table is what
 * any IPv6 path must check (docs/security.md). */
static const struct net_range blocked6[] = {
    {"::", 96},             /* unspecified, loopback, deprecated IPv4-compatible */
    {"::ffff:0:0", 96},     /* IPv4-mapped */
    {"64:ff9b::", 96},      /* IPv4/IPv6 translation: would reach any IPv4 address */
    {"64:ff9b:1::", 48},    /* local-use IPv4/IPv6 translation */
    {"100::", 64},          /* discard-only */
    {"100:0:0:1::", 64},    /* dummy prefix */
    {"2001::", 23},         /* IETF protocol assignments (TEREDO, benchmarking, AMT, ORCHID...) */
    {"2001:db8::", 32},     /* documentation */
    {"2002::", 16},         /* 6to4 */
    {"2620:4f:8000::", 48}, /* direct delegation AS112 service */
    {"3fff::", 20},         /* documentation */
    {"5f00::", 16},         /* segment routing (SRv6) SIDs */
    {"fc00::", 7},          /* unique local */
    {"fe80::", 10},         /* link local */
    {"fec0::", 10},         /* deprecated site local */
    {"ff00::", 8},          /* multicast */
};

bool local_addr_blocked(struct in_addr a)
{
    uint32_t host = ntohl(a.s_addr);
    for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++) {
        struct in_addr net;
        inet_pton(AF_INET, blocked[i].net, &net);
        uint32_t mask = blocked[i].prefix ? ~0u << (32 - blocked[i].prefix) : 0;
        if ((host & mask) == (ntohl(net.s_addr) & mask))
            return true;
    }
    return false;
}

static bool in_prefix6(const struct in6_addr *a, const struct in6_addr *net, int prefix)
{
    int whole = prefix / 8, bits = prefix % 8;
    if (memcmp(a->s6_addr, net->s6_addr, (size_t)whole) != 0)
        return false;
    unsigned char mask = (unsigned char)(0xff << (8 - bits));
    return bits == 0 || (a->s6_addr[whole] & mask) == (net->s6_addr[whole] & mask);
}

bool local_addr6_blocked(const struct in6_addr *a)
{
    for (size_t i = 0; i < sizeof blocked6 / sizeof blocked6[0]; i++) {
        struct in6_addr net;
        inet_pton(AF_INET6, blocked6[i].net, &net);
        if (in_prefix6(a, &net, blocked6[i].prefix))
            return true;
    }
    return false;
}

static pid_t read_pid_file(const char *dir)
{
    char path[LOCAL_PATH_MAX + 32], text[32];
    snprintf(path, sizeof path, "%s/" PASTA_PID_FILE, dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    return (pid_t)atoi(text);
}

int local_start_network(const char *dir, pid_t pid, const struct cg_sandbox *cg,
                        struct mcp_error *err)
{
    const char *pasta = local_pasta_path();
    if (pasta == NULL)
        return mcp_error_set(err, MCP_ERR_UNSUPPORTED, ENOENT,
                             "network: true needs pasta, which is not installed (Debian/Ubuntu: "
                             "apt install passt); or create the sandbox without network");
    char pidarg[32], pidfile[LOCAL_PATH_MAX + 32];
    snprintf(pidarg, sizeof pidarg, "%d", (int)pid);
    snprintf(pidfile, sizeof pidfile, "%s/" PASTA_PID_FILE, dir);
    /* As root pasta would drop to nobody by default; "--runas 0" keeps it root (it joins the
     * sandbox's namespaces). Rootless it runs as the user, and --runas 0 would fail: the two
     * arguments are left out (the NULL ends argv early, before --pid's pair moves up). */
    char *argv[] = {(char *)"pasta", (char *)"--config-net", (char *)"--quiet", (char *)"-4",
                    (char *)"--no-map-gw", (char *)"--dns-forward", (char *)LOCAL_DNS_ADDR,
                    (char *)"-t", (char *)"none", (char *)"-u", (char *)"none", (char *)"-T",
                    (char *)"none", (char *)"-U", (char *)"none", (char *)"--pid", pidfile,
                    (char *)"--runas", (char *)"0", pidarg, NULL};
    if (geteuid() != 0) { /* pidarg (the target pid) must stay last */
        argv[17] = pidarg;
        argv[18] = NULL;
    }
    char *envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    /* The server blocks signals it handles on its loop (SIGCHLD among them); pasta inherits the
     * mask through exec and then fails at start ("Couldn't install signal handlers"): it gets
     * an empty one, and default dispositions. */
    posix_spawnattr_t attr;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t child;
    int rc = posix_spawn(&child, pasta, &fa, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return mcp_error_set(err, MCP_ERR_IO, rc, "cannot run %s", pasta);
    int status = -1; /* waitpid failing (not EINTR) leaves it so: not an exit, an error */
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    } /* pasta forks to the background once the namespace is configured */
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0,
                             "pasta could not set up the sandbox's network (exit status %d)",
                             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    pid_t daemon = read_pid_file(dir);
    if (daemon <= 0)
        return mcp_error_set(err, MCP_ERR_BACKEND, 0, "pasta did not write its pid file");
    if ((cg->v2[0] && cg_attach_v2(cg, daemon, err) < 0) ||
        ((cg->mem[0] || cg->pids[0]) && cg_attach_v1(cg, daemon, err) < 0)) {
        kill(daemon, SIGKILL);
        return mcp_error_prefix(err, "moving pasta into the sandbox's cgroups");
    }
    return 0;
}

/* ---- child side: raw netlink, no allocation ---------------------------------------------- */

struct route_msg {
    struct nlmsghdr nh;
    struct rtmsg rt;
    char attrs[64];
};

static void add_attr(struct nlmsghdr *nh, unsigned short type, const void *data, size_t len)
{
    struct rtattr *a = (struct rtattr *)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len));
    a->rta_type = type;
    a->rta_len = (unsigned short)RTA_LENGTH(len);
    memcpy(RTA_DATA(a), data, len);
    nh->nlmsg_len = NLMSG_ALIGN(nh->nlmsg_len) + (unsigned)RTA_ALIGN(a->rta_len);
}

/* Sends a request and reads its acknowledgement: 0, or -1 with errno. */
static int nl_request(int fd, struct nlmsghdr *nh)
{
    if (send(fd, nh, nh->nlmsg_len, 0) < 0)
        return -1;
    char reply[512];
    ssize_t n = recv(fd, reply, sizeof reply, 0);
    struct nlmsghdr *h = (struct nlmsghdr *)reply;
    if (n < (ssize_t)sizeof *h || h->nlmsg_type != NLMSG_ERROR)
        return -1;
    struct nlmsgerr *e = NLMSG_DATA(h);
    errno = -e->error;
    return e->error == 0 ? 0 : -1;
}

static int route(int fd, const char *net, int prefix, unsigned char type, int oif,
                 const char *src)
{
    struct route_msg m;
    memset(&m, 0, sizeof m);
    m.nh.nlmsg_len = NLMSG_LENGTH(sizeof m.rt);
    m.nh.nlmsg_type = RTM_NEWROUTE;
    m.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK;
    m.rt.rtm_family = AF_INET;
    m.rt.rtm_dst_len = (unsigned char)prefix;
    m.rt.rtm_table = RT_TABLE_MAIN;
    m.rt.rtm_protocol = RTPROT_STATIC;
    m.rt.rtm_scope = type == RTN_UNICAST ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
    m.rt.rtm_type = type;
    struct in_addr dst;
    inet_pton(AF_INET, net, &dst);
    add_attr(&m.nh, RTA_DST, &dst, sizeof dst);
    if (oif > 0)
        add_attr(&m.nh, RTA_OIF, &oif, sizeof oif);
    struct in_addr pref;
    if (src != NULL && inet_pton(AF_INET, src, &pref) == 1)
        add_attr(&m.nh, RTA_PREFSRC, &pref, sizeof pref);
    return nl_request(fd, &m.nh);
}

struct addr_msg {
    struct nlmsghdr nh;
    struct ifaddrmsg ifa;
    char attrs[64];
};

/* Adds addr/32 to interface ifindex, host scope: an address of the namespace itself. */
static int add_address(int fd, int ifindex, const char *addr)
{
    struct addr_msg m;
    memset(&m, 0, sizeof m);
    m.nh.nlmsg_len = NLMSG_LENGTH(sizeof m.ifa);
    m.nh.nlmsg_type = RTM_NEWADDR;
    m.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
    m.ifa.ifa_family = AF_INET;
    m.ifa.ifa_prefixlen = 32;
    m.ifa.ifa_scope = RT_SCOPE_HOST;
    m.ifa.ifa_index = (unsigned)ifindex;
    struct in_addr a;
    inet_pton(AF_INET, addr, &a);
    add_attr(&m.nh, IFA_LOCAL, &a, sizeof a);
    add_attr(&m.nh, IFA_ADDRESS, &a, sizeof a);
    return nl_request(fd, &m.nh);
}

/* The tap interface pasta created: the one that is not lo. */
static int tap_index(void)
{
    struct if_nameindex *ifs = if_nameindex(), *i;
    int idx = 0;
    for (i = ifs; i && i->if_index; i++)
        if (strcmp(i->if_name, "lo") != 0) {
            idx = (int)i->if_index;
            break;
        }
    if (ifs)
        if_freenameindex(ifs);
    return idx;
}

int local_block_private_routes(const char **failed)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) {
        *failed = "netlink socket";
        return -1;
    }
    for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++)
        if (route(fd, blocked[i].net, blocked[i].prefix, RTN_UNREACHABLE, 0, NULL) < 0) {
            close(fd);
            *failed = blocked[i].net;
            return -1;
        }
    int tap = tap_index();
    if (tap <= 0 || route(fd, LOCAL_DNS_ADDR, 32, RTN_UNICAST, tap, NULL) < 0) {
        close(fd);
        *failed = "DNS forwarder route";
        return -1;
    }
    close(fd);
    return 0;
}

/* Egress by policy: every IPv4 destination is routed to lo (source 127.0.0.1, so that the
 * redirected connection and the DNS reply's reverse NAT look like loopback traffic), where the
 * nftables rules (egress_netns.c) hand it to the agent's sockets. Nothing else leaves: the
 * namespace has no other interface.
 * lo also gets LOCAL_EGRESS_SELF_ADDR: glibc's getaddrinfo with AI_ADDRCONFIG (getent ahosts,
 * apt, Python callers) returns no IPv4 address at all unless the namespace has one other than
 * 127.0.0.1. Connections to it stay in the sandbox (the rules treat it as loopback). */
int local_egress_default_route(const char **failed)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) {
        *failed = "netlink socket";
        return -1;
    }
    int lo = (int)if_nametoindex("lo");
    int rc = lo > 0 ? route(fd, "0.0.0.0", 0, RTN_UNICAST, lo, "127.0.0.1") : -1;
    if (rc < 0)
        *failed = "default route to lo";
    else if ((rc = add_address(fd, lo, LOCAL_EGRESS_SELF_ADDR)) < 0)
        *failed = "the sandbox's own address on lo";
    close(fd);
    return rc;
}
