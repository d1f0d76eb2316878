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

#include "backend/local/image/addr_blocked.h"
#include "backend/local/egress_rules.h"
#include "backend/local/pasta_path.h"
#include "backend/local/local_limits.h"
#include "backend/local/local_cgroup.h"
#include "backend/local/local_spawn.h"

#define PASTA_PID_FILE "pasta.pid"

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
    size_t n;
    const struct net_range *blocked = local_blocked_ranges(&n);
    for (size_t i = 0; i < n; i++)
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
