/* The addresses nothing mcpbox connects to on a sandbox's behalf may be (addr_blocked.h). */
#include "backend/local/image/addr_blocked.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

/* Ranges a sandbox with egress must not reach: unreachable routes with network: true, the
 * addresses egress by policy never connects to, and those an image pull connects to only for a
 * registry the person named (local_addr_blocked). One list for all three: every
 * block of the IANA IPv4 Special-Purpose Address Registry (RFC 6890, as of 2025), the ones it
 * marks globally reachable included (AS112, AMT, the anycast services in 192.0.0.0/24: nothing a
 * sandbox needs, and an address that is not the public internet's), plus multicast. The sandbox's
 * own plumbing keeps what it needs: network: true's DNS forwarder gets a /32 route back
 * (local_block_private_routes), and the policy path's synthetic addresses (198.18.0.0/15) are
 * answered by mcpbox itself, never connected to. */
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

const struct net_range *local_blocked_ranges(size_t *n)
{
    *n = sizeof blocked / sizeof blocked[0];
    return blocked;
}

bool local_sockaddr_blocked(const struct sockaddr *sa)
{
    if (sa != NULL && sa->sa_family == AF_INET)
        return local_addr_blocked(((const struct sockaddr_in *)(const void *)sa)->sin_addr);
    if (sa != NULL && sa->sa_family == AF_INET6)
        return local_addr6_blocked(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
    return true;
}
