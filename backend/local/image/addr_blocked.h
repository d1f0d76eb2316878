/* Addresses that are not the public internet: the IANA special-purpose registries (IPv4 and
 * IPv6) plus multicast. Egress never reaches them (network: true's unreachable routes, the
 * policy path's proxy), and image pulls reach them only for a registry the person named
 * (docs/security.md). Built into mcpbox_image, which the local backend links. */
#ifndef MCPBOX_LOCAL_ADDR_BLOCKED_H
#define MCPBOX_LOCAL_ADDR_BLOCKED_H

#include <stdbool.h>
#include <stddef.h>

struct in_addr;
struct in6_addr;
struct sockaddr;

struct net_range {
    const char *net; /* an address literal */
    int prefix;
};

/* The IPv4 blocks, in order (n of them). */
const struct net_range *local_blocked_ranges(size_t *n);
bool local_addr_blocked(struct in_addr a);
bool local_addr6_blocked(const struct in6_addr *a);
/* Either family; anything else (or NULL) counts as blocked. */
bool local_sockaddr_blocked(const struct sockaddr *sa);

#endif
